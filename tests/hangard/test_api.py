"""Every route of hangard through a real HTTP client, against real jails."""

import base64
import json
import os
import re
import socket
import subprocess
import threading
import time

import pytest

from conftest import ADMIN, READER, TOKENS, WRITER, binary, resolve_ref, wait_for


def test_livez_needs_no_token(server):
    r = server.ok("GET", "/livez", token=None)
    assert r.json() == {"status": "ok"}
    assert re.fullmatch(r"[0-9a-f]{16}", r.header("X-Request-Id"))


def test_readyz(server):
    assert server.ok("GET", "/readyz", token=READER).json()["status"] == "ready"


def test_readyz_fails_when_the_state_directory_goes(make_server):
    s = make_server().start()
    assert s.ok("GET", "/readyz").json()["status"] == "ready"
    os.rename(s.state_dir, s.state_dir + ".away")
    r = s.request("GET", "/readyz")
    assert r.status == 503, r
    assert "state directory" in r.json()["error"]["message"]


def test_sandbox_lifecycle(server):
    r = server.ok("POST", "/v1/sandboxes", {"tier": "default", "timeout": 600, "env": {"GREETING": "hi"}},
                  status=201)
    sb = r.json()
    sid = sb["id"]
    assert sb["provider"] == "local" and sb["state"] == "running" and sb["expires_at_us"] > 0
    try:
        got = server.ok("GET", f"/v1/sandboxes/{sid}", token=READER).json()
        assert got["id"] == sid and got["state"] == "running"
        assert sid in [s["id"] for s in server.ok("GET", "/v1/sandboxes", token=READER).json()["sandboxes"]]
        assert sid in [s["id"] for s in server.ok("GET", "/v1/sandboxes?provider=local").json()["sandboxes"]]
        # The create's env reaches every command.
        out = server.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "echo $GREETING"}).json()
        assert out["stdout"] == "hi\n"

        assert server.ok("POST", f"/v1/sandboxes/{sid}/pause").json()["state"] == "paused"
        r = server.request("POST", f"/v1/sandboxes/{sid}/exec", {"command": "true"})
        assert r.status == 409 and r.json()["error"]["kind"] == "paused", r
        assert server.ok("POST", f"/v1/sandboxes/{sid}/resume").json()["state"] == "running"

        before = server.ok("GET", f"/v1/sandboxes/{sid}").json()["expires_at_us"]
        after = server.ok("POST", f"/v1/sandboxes/{sid}/timeout", {"seconds": 60}).json()["expires_at_us"]
        assert 0 < after < before
    finally:
        server.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
    r = server.request("GET", f"/v1/sandboxes/{sid}")
    assert r.status == 410 and r.json()["error"]["kind"] == "gone", r
    assert sid not in [s["id"] for s in server.ok("GET", "/v1/sandboxes").json()["sandboxes"]]


def test_create_from_an_environment(server):
    sid = server.ok("POST", "/v1/sandboxes", {"environment": "small"}, status=201).json()["id"]
    try:
        out = server.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "echo $FROM_ENVIRONMENT"}).json()
        assert out["stdout"] == "yes\n"
    finally:
        server.request("DELETE", f"/v1/sandboxes/{sid}")
    r = server.request("POST", "/v1/sandboxes", {"environment": "no-such-one"})
    assert r.status == 404 and r.json()["error"]["kind"] == "not_found", r


def test_unknown_sandbox_is_gone(server):
    for method, path, body in [("GET", "", None), ("DELETE", "", None), ("POST", "/pause", None),
                               ("POST", "/exec", {"command": "true"}), ("POST", "/timeout", {"seconds": 5})]:
        r = server.request(method, "/v1/sandboxes/sb-0000000000000000" + path, body)
        assert r.status == 410, (method, path, r)
        err = r.json()["error"]
        assert err["kind"] == "gone" and err["code"] == -7 and "sb-0000000000000000" in err["message"]


def test_bad_json_is_400_with_a_clear_message(server):
    r = server.request("POST", "/v1/sandboxes", b'{"tier": "default",', headers={"Content-Type": "application/json"})
    assert r.status == 400
    assert r.json()["error"]["kind"] == "invalid"
    assert "not JSON" in r.json()["error"]["message"]
    r = server.request("POST", "/v1/sandboxes", b'[1,2]')
    assert r.status == 400 and "object" in r.json()["error"]["message"]


def test_unknown_fields_are_refused(server):
    # Documented: a member the route does not know is 400, never ignored,
    # so a misspelt "timeout" cannot silently create a default sandbox.
    r = server.request("POST", "/v1/sandboxes", {"timout": 5})
    assert r.status == 400 and 'unknown field "timout"' in r.json()["error"]["message"], r
    r = server.request("POST", "/v1/sandboxes", {"timeout": "5"})
    assert r.status == 400 and '"timeout"' in r.json()["error"]["message"], r
    r = server.request("POST", "/v1/sandboxes", {"network": "maybe"})
    assert r.status == 400, r
    r = server.request("POST", "/v1/sandboxes", {"tier": "warp"})
    assert r.status == 400 and r.json()["error"]["kind"] == "invalid", r


def test_unknown_route_and_method(server):
    r = server.request("GET", "/v1/nothing-here")
    assert r.status == 404 and r.json()["error"]["kind"] == "no_route"
    r = server.request("PATCH", "/v1/sandboxes")
    assert r.status == 405 and r.json()["error"]["kind"] == "method_not_allowed"


def test_exec_whole_result(server, sandbox):
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec",
                  {"command": "echo out; echo err >&2; exit 3"}).json()
    assert r["exit_code"] == 3 and r["timed_out"] is False
    assert r["stdout"] == "out\n" and r["stderr"] == "err\n"
    assert r["stdout_encoding"] == "utf-8"
    assert r["stdout_truncated"] is False and r["stdout_bytes"] == 4


def test_exec_bytes_that_are_not_utf8_come_as_base64(server, sandbox):
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": r"printf 'a\377b'"}).json()
    assert r["stdout_encoding"] == "base64"
    assert base64.b64decode(r["stdout"]) == b"a\xffb"
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "printf 'héllo'", "encoding": "base64"}).json()
    assert r["stdout_encoding"] == "base64" and base64.b64decode(r["stdout"]) == "héllo".encode()
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "printf 'héllo'"}).json()
    assert r["stdout_encoding"] == "utf-8" and r["stdout"] == "héllo"


def test_exec_stdin_timeout_and_truncation(server, sandbox):
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "cat", "stdin": "fed in"}).json()
    assert r["stdout"] == "fed in"
    raw = bytes(range(256))
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec",
                  {"command": "od -An -tx1 | tr -d ' \\n'", "stdin_base64": base64.b64encode(raw).decode()}).json()
    assert r["stdout"] == raw.hex()
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "sleep 30", "timeout": 1}).json()
    assert r["timed_out"] is True
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec",
                  {"command": "head -c 100000 /dev/zero | tr '\\0' x", "output_limit": 1000}).json()
    assert r["stdout_truncated"] is True and r["stdout_bytes"] == 100000
    r = server.request("POST", f"/v1/sandboxes/{sandbox}/exec", {"stdin": "no command"})
    assert r.status == 400 and "command" in r.json()["error"]["message"]


def read_ndjson(server, path, body):
    c = server.connection()
    c.request("POST", path, body=json.dumps(body), headers={"Authorization": f"Bearer {WRITER}"})
    r = c.getresponse()
    assert r.status == 200, r.read()
    assert r.getheader("Content-Type") == "application/x-ndjson"
    events = [json.loads(line) for line in r.read().decode().splitlines()]
    c.close()
    return events


@pytest.mark.parametrize("path", ["/exec?stream=1", "/exec/stream"])
def test_exec_stream_in_order_with_the_exit_last(server, sandbox, path):
    events = read_ndjson(server, f"/v1/sandboxes/{sandbox}{path}",
                         {"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.05; done; echo oops >&2; exit 4"})
    out = "".join(e["data"] for e in events if e["type"] == "stdout")
    assert out == "".join(f"line{i}\n" for i in range(1, 6))
    assert any(e["type"] == "stderr" and "oops" in e["data"] for e in events)
    assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 4
    assert [e["type"] for e in events].count("exit") == 1


def test_exec_stream_arrives_while_the_command_runs(server, sandbox):
    # The command waits for a file only a second request makes, which the
    # test sends after it has read the first line: the stream is live.
    c = server.connection()
    c.request("POST", f"/v1/sandboxes/{sandbox}/exec/stream",
              body=json.dumps({"command": "echo first; until [ -e /tmp/go-on ]; do sleep 0.05; done; echo second",
                               "timeout": 60}),
              headers={"Authorization": f"Bearer {WRITER}"})
    r = c.getresponse()
    first = json.loads(r.readline())
    assert first == {"type": "stdout", "data": "first\n", "encoding": "utf-8"}
    server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "touch /tmp/go-on"})
    rest = [json.loads(l) for l in r.read().decode().splitlines()]
    assert "".join(e["data"] for e in rest if e["type"] == "stdout") == "second\n"
    assert rest[-1]["type"] == "exit" and rest[-1]["exit_code"] == 0
    c.close()


def test_exec_stream_error_before_the_stream_is_a_plain_error(server):
    r = server.request("POST", "/v1/sandboxes/sb-0000000000000000/exec/stream", {"command": "true"})
    assert r.status == 410 and r.json()["error"]["kind"] == "gone"


def test_files_round_trip(server, sandbox):
    data = os.urandom(300000)
    r = server.ok("PUT", f"/v1/sandboxes/{sandbox}/files?path=/tmp/blob.bin", data,
                  headers={"Content-Type": "application/octet-stream"})
    assert r.json()["bytes"] == len(data)
    r = server.ok("GET", f"/v1/sandboxes/{sandbox}/files?path=/tmp/blob.bin", token=READER)
    assert r.body == data
    assert r.header("Content-Type") == "application/octet-stream"
    r = server.request("GET", f"/v1/sandboxes/{sandbox}/files?path=/tmp/missing")
    assert r.status == 404 and r.json()["error"]["kind"] == "file", r
    r = server.request("GET", f"/v1/sandboxes/{sandbox}/files")
    assert r.status == 400 and "path" in r.json()["error"]["message"]
    # No temporary file is left behind in hangard's directory.
    leftovers = [f for d, _, fs in os.walk(server.workdir) for f in fs
                 if f.startswith(("upload-", "download-"))]
    assert leftovers == []


def test_file_upload_over_the_cap_is_413(make_server):
    s = make_server(args=["-max-upload-bytes", "1000"]).start()
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    try:
        r = s.request("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/big", b"x" * 5000)
        assert r.status == 413 and r.json()["error"]["kind"] == "too_large", r
        s.ok("PUT", f"/v1/sandboxes/{sid}/files?path=/tmp/small", b"x" * 1000)
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_file_download_over_the_library_limit_is_413(make_server):
    s = make_server(env={"HANGAR_COPY_LIMIT_BYTES": "1000"}).start()
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    try:
        s.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "head -c 5000 /dev/zero > /tmp/big"})
        r = s.request("GET", f"/v1/sandboxes/{sid}/files?path=/tmp/big")
        assert r.status == 413 and r.json()["error"]["kind"] == "too_large", r
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")


def test_local_forks_no_sandbox_and_snapshots_for_root_only(server, sandbox):
    r = server.request("POST", f"/v1/sandboxes/{sandbox}/fork", {"count": 2})
    assert r.status == 501 and r.json()["error"]["kind"] == "unsupported", r
    r = server.request("POST", f"/v1/sandboxes/{sandbox}/snapshot", {"name": "snap"})
    if os.geteuid() == 0:
        # Of its files, into the state directory.
        assert r.status == 201 and re.fullmatch(r"snap-[0-9a-f]{16}", r.json()["snapshot_id"]), r
    else:
        assert r.status == 501 and r.json()["error"]["kind"] == "unsupported", r
    r = server.request("POST", f"/v1/sandboxes/{sandbox}/fork", {"count": 1000})
    assert r.status == 400


def test_tiers_templates_environments(server):
    tiers = server.ok("GET", "/v1/tiers", token=READER).json()["tiers"]
    assert [t["name"] for t in tiers] == ["fast", "isolated", "default", "heavy"]
    default = tiers[2]
    assert any(p["name"] == "local" and p["loaded"] for p in default["providers"])
    r = server.request("GET", "/v1/templates", token=READER)
    assert r.status == 501 and r.json()["error"]["kind"] == "unsupported", r
    envs = server.ok("GET", "/v1/environments", token=READER).json()["environments"]
    assert [e["name"] for e in envs] == ["small"]
    assert envs[0]["env"] == {"FROM_ENVIRONMENT": "yes"} and envs[0]["timeout"] == 600


def test_openapi_is_served_as_kept_in_the_repo(server):
    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "programs", "hangard", "openapi.json"), "rb") as f:
        kept = f.read()
    r = server.ok("GET", "/v1/openapi.json", token=READER)
    assert r.body == kept
    assert r.json()["openapi"].startswith("3.1")


def test_every_route_is_documented_and_every_documented_route_served(server):
    doc = server.ok("GET", "/v1/openapi.json").json()
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops
                  if m in ("get", "put", "post", "delete", "patch")}
    r = subprocess.run([binary(), "routes"], stdout=subprocess.PIPE, check=True, timeout=30)
    served = {tuple(l.split(" ", 1)) for l in r.stdout.decode().splitlines()}
    assert served == documented, (served - documented, documented - served)
    # And the server really answers each one (no "no_route" 404, no 405).
    for method, path in sorted(documented):
        if path == "/v1/events":
            continue  # a stream that never ends: test_events_deliver_created
        r = server.request(method, path.replace("{id}", "sb-0000000000000000"), token=ADMIN)
        assert r.status not in (405,) and not (r.status == 404 and r.json()["error"]["kind"] == "no_route"), \
            (method, path, r)


def test_every_503_and_429_in_the_openapi_document_declares_retry_after(server):
    doc = server.ok("GET", "/v1/openapi.json").json()

    def resolve(obj):
        return resolve_ref(doc, obj)

    checked = 0
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if method not in ("get", "put", "post", "delete", "patch"):
                continue
            responses = op["responses"]
            # Any route is 503 while the server stops (and past a full queue),
            # any route behind a token 429 past its rate: each must say so.
            assert "503" in responses, (method, path)
            if op.get("security", doc["security"]):
                assert "429" in responses, (method, path)
            for status in ("503", "429"):
                if status not in responses:
                    continue
                headers = {k.lower(): v for k, v in resolve(responses[status]).get("headers", {}).items()}
                assert "retry-after" in headers, (method, path, status)
                h = resolve(headers["retry-after"])
                assert h.get("required") is True, (method, path, status, h)
                assert h["schema"]["type"] == "integer" and h["schema"].get("minimum", 0) >= 1, h
                checked += 1
    assert checked > 50, checked


def test_every_library_error_code_has_a_status(server):
    root = os.environ.get("HANGAR_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "include", "hangar", "errors.h")) as f:
        codes = {int(v) for v in re.findall(r"HANGAR_E[A-Z]+ = (-\d+)", f.read())}
    r = subprocess.run([binary(), "errors"], stdout=subprocess.PIPE, check=True, timeout=30)
    table = {int(c): (name, int(st)) for c, name, st in (l.split() for l in r.stdout.decode().splitlines())}
    assert set(table) == codes
    expect = {"not_found": 404, "gone": 410, "invalid": 400, "too_large": 413, "unavailable": 503,
              "capacity": 503, "timeout": 504, "refused": 403, "config": 500}
    for code, (name, status) in table.items():
        if name in expect:
            assert status == expect[name], (name, status)
    assert {n for n, _ in table.values()} >= set(expect)


def test_every_response_has_a_request_id_and_logs_say_the_route(server):
    ids = set()
    for method, path, token in [("GET", "/livez", None), ("GET", "/v1/tiers", None),
                                ("GET", "/v1/sandboxes/sb-0123456789abcdef", READER), ("GET", "/nope", READER)]:
        r = server.request(method, path, token=token)
        rid = r.header("X-Request-Id")
        assert rid and rid not in ids, r
        ids.add(rid)
    def logged():
        return {l["request_id"]: l for l in server.log_lines() if l.get("msg") == "request"}
    lines = wait_for("the log lines", lambda: ids <= set(logged()) and logged())
    by_id = {rid: lines[rid] for rid in ids}
    routes = {l["route"] for l in by_id.values()}
    # The template, not the raw path (which would blow up metrics and leak ids).
    assert "/v1/sandboxes/{id}" in routes and "/v1/sandboxes/sb-0123456789abcdef" not in routes
    for l in by_id.values():
        assert {"method", "status", "duration_ms", "time"} <= set(l)
    assert any(l.get("token") == "reader" for l in by_id.values())


def test_tokens_never_reach_the_log(server):
    server.request("GET", "/v1/tiers", token=WRITER)
    server.request("GET", "/v1/tiers", token="not-a-token-" + "9" * 30)
    text = server.log_text()
    for tok, _ in TOKENS.values():
        assert tok not in text
    assert "not-a-token-" not in text


class SSE:
    """A /v1/events subscriber on a raw socket, so the test controls reads."""

    def __init__(self, server, token=READER):
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        self.sock.sendall(f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.head = head.decode()

    def _more(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def events(self, want, timeout=60):
        """Reads until an event named want arrives, within timeout seconds in
        all (heartbeats do not extend it); returns its data. Other events stay
        buffered for a later call."""
        deadline = time.monotonic() + timeout
        while True:
            for m in re.finditer(rb"event: (\S+)\r?\ndata: (.*?)\r?\n", self.buf):
                if m.group(1).decode() == want:
                    self.buf = self.buf[:m.start()] + self.buf[m.end():]
                    return json.loads(m.group(2))
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {want} event within {timeout} s")
            self.sock.settimeout(left)
            self._more()

    def close(self):
        self.sock.close()


def test_events_deliver_created_and_killed(server):
    a, b = SSE(server), SSE(server, token=ADMIN)
    try:
        assert "200" in a.head.splitlines()[0] and "text/event-stream" in a.head
        sid = server.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
        for sub in (a, b):
            ev = sub.events("sandbox.created")
            assert ev["id"] == sid and ev["provider"] == "local"
        server.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)
        assert a.events("sandbox.killed")["id"] == sid
    finally:
        a.close()
        b.close()


def test_events_need_a_token(server):
    assert server.request("GET", "/v1/events", token=None).status == 401


def parse_prometheus(text):
    """A small parser of the text format: {(name, frozenset(labels)): value}."""
    samples, types = {}, {}
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
    label_re = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = line_re.match(line)
        assert m, f"not a sample line: {line!r}"
        labels, rest = {}, m.group(3) or ""
        while rest:
            lm = label_re.match(rest)
            assert lm, f"bad labels in {line!r}"
            labels[lm.group(1)] = lm.group(2)
            rest = rest[lm.end():]
        value = float(m.group(4))
        base = re.sub(r"_(bucket|sum|count|total)$", "", m.group(1))
        assert m.group(1) in types or base in types or base + "_total" in types, f"sample without TYPE: {line}"
        samples[(m.group(1), frozenset(labels.items()))] = value
    return samples, types


def test_metrics_parse_and_count(server, sandbox):
    server.ok("GET", "/livez", token=None)
    server.request("GET", "/v1/sandboxes/sb-0000000000000000")
    r = server.ok("GET", "/metrics", token=READER)
    assert r.header("Content-Type").startswith("text/plain")
    samples, types = parse_prometheus(r.body.decode())
    assert types["hangard_requests_total"] == "counter"
    assert types["hangard_request_duration_seconds"] == "histogram"
    key = ("hangard_requests_total", frozenset({"method": "GET", "route": "/v1/sandboxes/{id}", "status": "410"}.items()))
    assert samples[key] >= 1
    # Histograms: cumulative buckets, +Inf equal to the count.
    lab = frozenset({"method": "GET", "route": "/livez"}.items())
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in samples.items()
                     if k[0] == "hangard_request_duration_seconds_bucket" and frozenset(
                         (a, b) for a, b in k[1] if a != "le") == lab)
    assert buckets and all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    assert buckets[-1][0] == float("inf")
    assert buckets[-1][1] == samples[("hangard_request_duration_seconds_count", lab)]
    running = samples[("hangard_sandboxes", frozenset({"provider": "local", "state": "running"}.items()))]
    assert running >= 1
    assert samples[("hangard_tier_fallbacks_total", frozenset())] == 0
    assert samples[("hangard_sandbox_list_ok", frozenset())] == 1


def test_metrics_count_sandboxes_by_state(server, sandbox):
    def paused():
        s, _ = parse_prometheus(server.ok("GET", "/metrics").body.decode())
        return s.get(("hangard_sandboxes", frozenset({"provider": "local", "state": "paused"}.items())), 0)
    before = paused()
    server.ok("POST", f"/v1/sandboxes/{sandbox}/pause")
    try:
        assert paused() == before + 1
    finally:
        server.ok("POST", f"/v1/sandboxes/{sandbox}/resume")
