"""What enters hangard as text is valid UTF-8 without NUL, or it is refused
(400 naming the field), never cut and never stored; JSON bodies are strict;
integers come back exact; every refusal is the JSON error with a request id
and a log line; a client that sends its whole body first reads the 413."""

import json
import os
import signal
import socket
import re

import pytest

from conftest import READER, WRITER, wait_for


def refused(r, *words):
    assert r.status == 400, r
    err = r.json()["error"]
    assert err["kind"] == "invalid", err
    for w in words:
        assert w in err["message"], (w, err)
    assert r.header("X-Request-Id"), r.headers
    return err


def raw_post(server, path, body, token=WRITER):
    """Sends body bytes exactly as given (no json.dumps on the way)."""
    return server.request("POST", path, body, token=token, headers={"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def session(server):
    s = server.ok("POST", "/v1/sessions", {"labels": {"team": "a"}}, status=201).json()
    yield s
    server.request("DELETE", f"/v1/sessions/{s['id']}")


# ---- NUL and invalid UTF-8 in the target ----------------------------------

def test_a_nul_in_an_id_is_refused_not_cut(server, sandbox, session):
    # Cut at the NUL, each of these would name a real sandbox or session.
    for method, path in [("GET", f"/v1/sandboxes/{sandbox}%00anything"),
                         ("DELETE", f"/v1/sandboxes/{sandbox}%00x"),
                         ("GET", f"/v1/sessions/{session['id']}%00x"),
                         ("GET", f"/v1/sessions/{session['id']}%00x/checkpoints"),
                         ("GET", "/v1/checkpoints/cp-1%00x"),
                         ("DELETE", "/v1/checkpoints/cp-1%00x")]:
        refused(server.request(method, path), "the path", "NUL")
    # Nothing happened to them.
    server.ok("GET", f"/v1/sandboxes/{sandbox}")
    server.ok("GET", f"/v1/sessions/{session['id']}")


def test_invalid_utf8_in_the_path_is_refused(server, sandbox):
    for bad in ("%ff%fe", "%c0%af", "%ed%a0%80", "%f4%90%80%80", "%e2%82"):
        refused(server.request("GET", f"/v1/sandboxes/{sandbox}{bad}"), "the path", "not UTF-8")


def test_a_nul_in_a_file_path_writes_nothing(server, sandbox):
    r = server.request("PUT", f"/v1/sandboxes/{sandbox}/files?path=/tmp/report%00.txt", b"data")
    refused(r, '"path"', "NUL")
    r = server.request("GET", f"/v1/sandboxes/{sandbox}/files?path=/tmp/report%00.txt")
    refused(r, '"path"')
    out = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec",
                    {"command": "test -e /tmp/report && echo there || echo absent"}).json()
    assert out["stdout"] == "absent\n", out
    # Other query values are held to the same rule.
    refused(server.request("GET", "/v1/sandboxes?provider=local%00x"), '"provider"')
    refused(server.request("GET", "/v1/sandboxes?provider=%ff"), '"provider"', "not UTF-8")


# ---- JSON strings -----------------------------------------------------------

def test_an_escaped_nul_in_a_command_runs_nothing(server, sandbox):
    r = raw_post(server, f"/v1/sandboxes/{sandbox}/exec",
                 b'{"command":"touch /tmp/first-half\\u0000; echo b"}')
    refused(r, "/command", "\\u0000")
    out = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec",
                    {"command": "test -e /tmp/first-half && echo ran || echo not-run"}).json()
    assert out["stdout"] == "not-run\n", out


@pytest.mark.parametrize("path, body, where", [
    ("/v1/sandboxes", b'{"env":{"A":"one\\u0000two"}}', "/env/A"),
    ("/v1/sandboxes", b'{"env":{"A\\u0000B":"x"}}', "at /env (byte"),
    ("/v1/sessions", b'{"labels":{"team":"a\\u0000b"}}', "/labels/team"),
    ("/v1/sessions", b'{"id":"s-\\ud800"}', "/id"),
])
def test_nul_and_lone_surrogates_in_json_strings_are_refused(server, path, body, where):
    before = server.ok("GET", "/v1/sessions", token=READER).json()["sessions"]
    refused(raw_post(server, path, body), where)
    assert server.ok("GET", "/v1/sessions", token=READER).json()["sessions"] == before


def test_a_label_of_invalid_utf8_is_refused_and_listings_stay_utf8(server):
    before = server.ok("GET", "/v1/sessions", token=READER)
    r = raw_post(server, "/v1/sessions", b'{"labels":{"k":"\xff\xfe"}}')
    refused(r, "/labels/k", "not valid UTF-8")
    after = server.ok("GET", "/v1/sessions", token=READER)
    after.body.decode("utf-8")  # raises if any byte is not UTF-8
    assert after.json()["sessions"] == before.json()["sessions"]
    for body in (b'{"tier":"\xc0\xaf"}', b'{"tier":"\xed\xa0\x80"}', b'{"tier":"\xf4\x90\x80\x80"}',
                 b'{"\xff":1}'):
        refused(raw_post(server, "/v1/sandboxes", body), "not valid UTF-8")


# ---- strict JSON -----------------------------------------------------------

@pytest.mark.parametrize("body, words", [
    (b'{"command":"true"} x', ["data follows the value"]),
    (b'{"command":"true"}{}', ["data follows the value"]),
    (b'{"command":"true","command":"false"}', ['duplicate member "command"']),
    (b'{"command":"true","comm\\u0061nd":"false"}', ['duplicate member "command"']),
    (b'{"command":"true","env":{"A":"1","A":"2"}}', ["/env", 'duplicate member "A"']),
    (b'{"command":"true","env":' + b'[' * 40 + b']' * 40 + b'}', ["nested deeper"]),
    (b'{"command":"true",}', ["member name"]),
    (b"{'command':'true'}", ["member name"]),
    (b'{"command":"true","timeout":01}', ["',' or '}'"]),
])
def test_exec_bodies_are_strict(server, sandbox, body, words):
    refused(raw_post(server, f"/v1/sandboxes/{sandbox}/exec", body), "not JSON", *words)


def test_a_duplicate_member_creates_nothing(server):
    before = {s["id"] for s in server.ok("GET", "/v1/sandboxes").json()["sandboxes"]}
    refused(raw_post(server, "/v1/sandboxes", b'{"timeout":60,"timeout":-7}'), 'duplicate member "timeout"')
    after = {s["id"] for s in server.ok("GET", "/v1/sandboxes").json()["sandboxes"]}
    assert after == before


# ---- exact integers ---------------------------------------------------------

NUMBER = re.compile(rb'"([a-z_]+)":(-?[0-9][0-9.eE+-]*)')


def integers_of(body):
    """Every number member of a JSON text, as written: name -> text."""
    got = {}
    for name, text in NUMBER.findall(body):
        got.setdefault(name.decode(), []).append(text.decode())
    return got


def assert_exact(body, names):
    got = integers_of(body)
    for name in names:
        assert name in got, (name, body[:400])
        for text in got[name]:
            assert re.fullmatch(r"-?[0-9]+", text), (name, text)
    return got


def test_sandbox_times_are_exact_integers(server, sandbox):
    r = server.ok("GET", f"/v1/sandboxes/{sandbox}")
    got = assert_exact(r.body, ["created_at_us", "expires_at_us"])
    # The text is the number: parsing it as an integer loses nothing.
    assert int(got["created_at_us"][0]) == r.json()["created_at_us"]
    assert int(got["created_at_us"][0]) > 1 << 50
    assert_exact(server.ok("GET", "/v1/sandboxes").body, ["created_at_us", "expires_at_us"])


def test_session_times_are_exact_integers(server, session):
    r = server.ok("GET", f"/v1/sessions/{session['id']}")
    got = assert_exact(r.body, ["created_us", "updated_us", "parked_since_us"])
    assert int(got["created_us"][0]) > 1 << 50
    assert_exact(server.ok("GET", "/v1/sessions", token=READER).body, ["created_us", "updated_us"])


def test_error_codes_and_exec_counts_are_exact_integers(server, sandbox):
    r = server.request("GET", "/v1/sandboxes/sb-0000000000000000")
    assert_exact(r.body, ["code"])
    r = server.ok("POST", f"/v1/sandboxes/{sandbox}/exec", {"command": "echo hi; exit 3"})
    assert_exact(r.body, ["exit_code", "stdout_bytes", "stderr_bytes"])
    assert r.json()["exit_code"] == 3


@pytest.mark.parametrize("value", [b"9007199254740993", b"60.5", b"-2", b"1e400", b"-1e400", b"1e19"])
def test_integers_past_their_bounds_or_not_whole_are_refused_not_rounded(server, value):
    # No integer a client sets reaches 2^53 (timeouts are bounded): past the
    # bound it is refused, so a rounded double never stands in for it.
    r = raw_post(server, "/v1/sandboxes", b'{"timeout":' + value + b'}')
    refused(r, '"timeout"')


# ---- HTTP details -----------------------------------------------------------

def test_405_says_what_is_allowed(server):
    for method, path, allowed in [("DELETE", "/v1/sandboxes", {"GET", "POST"}),
                                  ("PUT", "/v1/sandboxes/sb-0000000000000000", {"GET", "DELETE"}),
                                  ("POST", "/v1/sandboxes/sb-0000000000000000/files", {"GET", "PUT"}),
                                  ("PATCH", "/livez", {"GET"})]:
        r = server.request(method, path)
        assert r.status == 405, (method, path, r)
        assert set(r.header("Allow").split(", ")) == allowed, (method, path, r.headers)
        assert r.json()["error"]["kind"] == "method_not_allowed" and r.header("X-Request-Id")


def send_whole_body_then_read(server, path, body, method="POST"):
    c = server.connection()
    try:
        c.request(method, path, body=body, headers={"Authorization": f"Bearer {WRITER}",
                                                    "Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


@pytest.mark.parametrize("path", ["/v1/sandboxes", "/v1/sessions", "/v1/sandboxes/sb-0000000000000000/exec"])
def test_a_client_sending_the_whole_body_reads_the_413(server, path):
    # 1 MiB is the default limit; 300 KiB more is within the drain bound.
    body = b" " * ((1 << 20) + 300000)
    status, headers, answer = send_whole_body_then_read(server, path, body)
    assert status == 413, answer
    assert json.loads(answer)["error"]["kind"] == "too_large"
    assert headers.get("x-request-id")
    # The connection was not lost either: the server still answers.
    server.ok("GET", "/livez", token=None)


def test_an_upload_past_its_cap_reads_the_413(make_server):
    s = make_server(args=["-max-upload-bytes", "1000"]).start()
    status, _, answer = send_whole_body_then_read(s, "/v1/sandboxes/sb-0000000000000000/files?path=/tmp/x",
                                                  b"x" * 500000, method="PUT")
    assert status == 413, answer


def test_every_refusal_has_a_log_line_with_its_request_id(server):
    ids = []
    for method, path, body in [("GET", "/v1/sandboxes/x%00y", None), ("DELETE", "/v1/sandboxes", None),
                               ("POST", "/v1/sandboxes", b'{"a":1,"a":2}')]:
        r = server.request(method, path, body)
        assert r.status in (400, 405), r
        ids.append(r.header("X-Request-Id"))

    def logged():
        lines = {l.get("request_id"): l for l in server.log_lines() if l.get("msg") == "request"}
        return lines if set(ids) <= set(lines) else None
    lines = wait_for("the log lines", logged)
    assert [lines[i]["status"] for i in ids] == [400, 405, 400]


def test_headers_and_targets_over_the_limit_are_answered_in_json(make_server):
    s = make_server(args=["-header-limit-bytes", "8192"]).start()
    cases = [("431", "headers_too_large", "/livez", {"X-Big": "y" * 9000}),
             ("414", "uri_too_long", "/livez?" + "q" * 9000, {}),
             ("431", "headers_too_large", "/livez", {"X-A": "a" * 4000, "X-B": "b" * 4000, "X-C": "c" * 1000})]
    ids = []
    for status, kind, path, headers in cases:
        r = s.request("GET", path, token=None, headers=headers)
        assert str(r.status) == status, r
        assert r.json()["error"]["kind"] == kind, r.body
        assert re.fullmatch(r"[0-9a-f]{16}", r.header("X-Request-Id") or ""), r
        ids.append((r.header("X-Request-Id"), r.status))
    # One header under the limit is served as usual.
    assert s.request("GET", "/livez", token=None, headers={"X-Big": "y" * 6000}).status == 200

    def logged():
        lines = {l.get("request_id"): l for l in s.log_lines() if l.get("msg") == "request"}
        return lines if all(i in lines for i, _ in ids) else None
    lines = wait_for("the log lines", logged)
    for i, status in ids:
        assert lines[i]["status"] == status and "answered_by" not in lines[i], lines[i]


# Linked from libmicrohttpd's static archive, its own error pages are
# replaced by hangard's (programs/hangard/mhd-pages.c); from the shared
# library they stay its HTML (meson.build says which).
LIBRARY_PAGES = os.environ.get("HANGARD_LIBRARY_PAGES") == "1"


def raw_answer(s, data):
    """Sends data on a connection of its own, reads until the server closes it."""
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as c:
        try:
            c.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # answered and closed while we still sent: read what it said
        got = b""
        while True:
            try:
                chunk = c.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:] if ":" in l)}
    return status, headers, body


def test_headers_over_the_limit_are_logged_as_libmicrohttpd_answered_them(make_server):
    s = make_server(args=["-header-limit-bytes", "8192"]).start()
    r = s.request("GET", "/livez", token=None, headers={"X-Big": "y" * 20000})
    assert r.status == 431, r

    def line():
        return [l for l in s.log_lines() if l.get("msg") == "request" and l.get("answered_by") == "libmicrohttpd"]
    got = wait_for("the log line of the 431", line)
    assert got[0]["status"] == 431 and re.fullmatch(r"[0-9a-f]{16}", got[0]["request_id"]), got
    if LIBRARY_PAGES:
        # The id the client saw is the one logged.
        assert got[0]["request_id"] == r.header("X-Request-Id"), (got, r.headers)


@pytest.mark.skipif(not LIBRARY_PAGES, reason="hangard links libmicrohttpd's shared library: its pages are HTML")
def test_what_libmicrohttpd_refuses_itself_is_the_json_error_with_an_id(make_server):
    s = make_server(args=["-header-limit-bytes", "8192"]).start()
    big = "y" * 20000
    cases = [
        (431, "headers_too_large", f"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n"),
        (414, "uri_too_long", f"GET /livez?{big} HTTP/1.1\r\nHost: x\r\n\r\n"),
        (400, "invalid", "GET /livez HTTP/1.1\r\nHost: x\r\nno colon in this line\r\n\r\n"),
        (505, "invalid", "GET /livez HTTP/2.0\r\nHost: x\r\n\r\n"),
    ]
    seen = []
    for status, kind, data in cases:
        got, headers, body = raw_answer(s, data.encode())
        what = (data[:60], got, headers, body[:200])
        assert got == status, what
        assert headers.get("content-type", "").startswith("application/json"), what
        err = json.loads(body)["error"]
        assert err["kind"] == kind and isinstance(err["code"], int) and err["code"] < 0, what
        assert err["message"] and "<" not in err["message"], what
        rid = headers.get("x-request-id", "")
        assert re.fullmatch(r"[0-9a-f]{16}", rid), what
        seen.append((rid, status))
    assert len({rid for rid, _ in seen}) == len(seen), seen

    # Each id is on libmicrohttpd's log line, with the status it answered.
    def logged():
        lines = {l.get("request_id"): l for l in s.log_lines() if l.get("msg") == "http" and "request_id" in l}
        return lines if all(rid in lines for rid, _ in seen) else None
    lines = wait_for("libmicrohttpd's log lines", logged)
    for rid, status in seen:
        assert lines[rid]["status"] == status, lines[rid]
    # And hangard's own answers are untouched by the wrapping: still JSON, still served.
    assert s.request("GET", "/livez", token=None).status == 200
    r = s.request("GET", "/v1/no-such-route", token=None)
    assert r.status == 404 and r.json()["error"]["kind"] == "no_route", r


def test_requests_still_arriving_at_a_stop_are_logged_and_do_not_hold_it(make_server):
    # Each request exists, with its id, from its first line on. One whose
    # headers never end is not waited for at a stop (a slow client cannot
    # hold it for the whole bound); one in its body is, up to the bound.
    s = make_server(args=["-shutdown-seconds", "2"]).start()
    held = []
    for payload in [b"GET /livez HTTP/1.1\r\n", b"GET /livez HTTP/1.1\r\nHost: x\r\n"]:
        c = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        c.sendall(payload)
        held.append(c)
    try:
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=20) == 0
    finally:
        for c in held:
            c.close()
    lines = s.log_lines()
    # Stopped at once, not at the bound (libmicrohttpd then closes the two).
    assert "stopped" in [l["msg"] for l in lines], lines[-4:]
    cut = [l for l in lines if l.get("msg") == "request" and l.get("answered_by") == "libmicrohttpd"]
    assert len(cut) == 2 and all(l["aborted"] for l in cut), cut
