"""hangard as a server: tokens, limits, TLS, configuration, shutdown."""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time

import pytest

from conftest import ADMIN, READER, TOKENS, WRITER, Server, binary, hash_line, wait_for


# ---- tokens ---------------------------------------------------------------

def test_no_token_is_401(server):
    r = server.request("GET", "/v1/sandboxes", token=None)
    assert r.status == 401 and r.header("WWW-Authenticate").startswith("Bearer")
    assert r.json()["error"]["kind"] == "unauthorized"
    r = server.request("GET", "/v1/sandboxes", token=None, headers={"Authorization": f"Basic {WRITER}"})
    assert r.status == 401


def test_wrong_token_is_401(server):
    assert server.request("GET", "/v1/sandboxes", token="nope").status == 401
    assert server.request("GET", "/v1/sandboxes", token="").status == 401
    assert server.request("GET", "/v1/sandboxes", token="x" * 5000).status == 401


def test_a_token_one_byte_off_is_refused(server):
    near = WRITER[:-1] + chr(ord(WRITER[-1]) ^ 1)
    assert server.request("GET", "/v1/sandboxes", token=near).status == 401
    assert server.request("GET", "/v1/sandboxes", token=WRITER[:-1]).status == 401
    assert server.request("GET", "/v1/sandboxes", token=WRITER + "7").status == 401
    assert server.request("GET", "/v1/sandboxes", token=WRITER).status == 200


def test_scopes(server):
    # read: GET only; write: changes; admin: everything.
    assert server.request("GET", "/v1/sandboxes", token=READER).status == 200
    r = server.request("POST", "/v1/sandboxes", {}, token=READER)
    assert r.status == 403 and "write" in r.json()["error"]["message"]
    assert server.request("DELETE", "/v1/sandboxes/sb-0000000000000000", token=READER).status == 403
    assert server.request("PUT", "/v1/sandboxes/sb-0000000000000000/files?path=/x", b"x", token=READER).status == 403
    assert server.request("GET", "/metrics", token=READER).status == 200
    assert server.request("DELETE", "/v1/sandboxes/sb-0000000000000000", token=ADMIN).status == 410


def test_a_write_only_token_cannot_read(make_server):
    d_tokens = os.path.join(make_server().workdir, "wo-tokens")
    with open(d_tokens, "w") as f:
        f.write(hash_line("wo", "write-only-token", "write"))
    s = make_server(tokens_file=d_tokens).start()
    assert s.request("GET", "/v1/sandboxes", token="write-only-token").status == 403
    assert s.request("POST", "/v1/sandboxes/sb-0000000000000000/pause", token="write-only-token").status == 410


def test_hash_token_makes_a_line_the_server_takes():
    line = hash_line("ci-bot", "s3cret", "read,admin")
    name, scopes, h = line.split()
    assert (name, scopes) == ("ci-bot", "read,admin")
    assert h.startswith("blake2b:") and len(h) == len("blake2b:") + 64
    assert "s3cret" not in line
    # The same token hashes the same; another one does not.
    assert hash_line("ci-bot", "s3cret", "read,admin") == line
    assert hash_line("ci-bot", "s3cret2", "read,admin") != line
    for args, token in [(["bad name", "read"], "t"), (["n", "root"], "t"), (["n", "read"], ""),
                        (["n", "read"], "two words")]:
        r = subprocess.run([binary(), "hash-token", *args], input=token.encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        assert r.returncode != 0 and r.stdout == b"", (args, token)


@pytest.mark.parametrize("content,complaint", [
    ("ci read blake2b:abcd\n", "64 hex"),
    ("ci read,fly blake2b:" + "0" * 64 + "\n", "scopes"),
    ("ci read\n", "NAME SCOPES HASH"),
    ("ci read sha1:" + "0" * 64 + "\n", "blake2b"),
    ("a read blake2b:" + "0" * 64 + "\na read blake2b:" + "1" * 64 + "\n", "taken"),
])
def test_a_bad_tokens_file_stops_the_start(workdir, content, complaint):
    path = os.path.join(workdir, "bad-tokens")
    with open(path, "w") as f:
        f.write(content)
    r = subprocess.run([binary(), "-tokens", path, "-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30, env={"PATH": os.environ.get("PATH", "")})
    assert r.returncode != 0 and complaint in r.stderr.decode(), r.stderr


def test_no_tokens_file_no_server():
    r = subprocess.run([binary(), "-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                       env={"PATH": os.environ.get("PATH", "")})
    assert r.returncode != 0 and b"HANGARD_TOKENS_FILE" in r.stderr


# ---- limits ---------------------------------------------------------------

def test_oversized_body_is_413(server):
    # An announced length past the limit and the drain bound (1 MiB past
    # it) is refused at once, before the body is read.
    sock = raw_connect(server)
    sock.sendall(f"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {WRITER}\r\n"
                 f"Content-Type: application/json\r\nContent-Length: {(2 << 20) + 1}\r\n\r\n".encode() + b"{" * 1000)
    answer = closed_without_answer(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer
    assert b'"kind":"too_large"' in answer


def test_oversized_chunked_body_is_413(make_server):
    s = make_server(args=["-max-body-bytes", "1024"]).start()
    c = s.connection()
    c.putrequest("POST", "/v1/sandboxes")
    c.putheader("Authorization", f"Bearer {WRITER}")
    c.putheader("Transfer-Encoding", "chunked")
    c.endheaders()
    for _ in range(4):
        c.send(b"200\r\n" + b" " * 512 + b"\r\n")
    c.send(b"0\r\n\r\n")
    r = c.getresponse()
    assert r.status == 413, r.read()
    c.close()
    # Under the cap the same route answers normally.
    assert s.request("POST", "/v1/sandboxes", b'{"tier":' + b" " * 900 + b'"nope"}').status == 400


def test_headers_over_the_memory_limit_are_refused(make_server):
    s = make_server(args=["-header-limit-bytes", "8192"]).start()
    r = s.request("GET", "/livez", token=None, headers={"X-Big": "y" * 20000})
    assert r.status in (413, 431), r
    assert s.request("GET", "/livez", token=None).status == 200


def raw_connect(server):
    return socket.create_connection(("127.0.0.1", server.port), timeout=30)


def closed_without_answer(sock, timeout=30):
    """Waits until the server closes sock; returns what it sent before."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            d = sock.recv(4096)
            if not d:
                return got
            got += d
    except ConnectionResetError:
        return got


def test_a_slow_client_is_cut_off_while_others_are_served(make_server):
    s = make_server(args=["-idle-timeout-seconds", "1", "-threads", "1"]).start()
    slow = raw_connect(s)
    # Headers byte by byte, then nothing more.
    for b in b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: ":
        slow.send(bytes([b]))
    # Meanwhile others are served, on the same (single) network thread.
    results = []
    def fetch():
        results.append(s.request("GET", "/livez", token=None, timeout=10).status)
    threads = [threading.Thread(target=fetch) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [200] * 5
    # The idle timeout closes the slow one, which never got an answer.
    assert closed_without_answer(slow) == b""
    slow.close()


def test_the_connection_limit_holds(make_server):
    s = make_server(args=["-max-connections", "2", "-threads", "1", "-idle-timeout-seconds", "60"]).start()
    held = []
    for _ in range(2):
        c = s.connection(timeout=30)
        c.request("GET", "/livez")
        assert c.getresponse().read()  # keep-alive: the connection stays open
        held.append(c)
    extra = raw_connect(s)
    extra.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    extra.settimeout(1.5)
    # At the limit the third connection is not served: either refused
    # (closed with no answer) or left waiting until a slot frees.
    try:
        got = extra.recv(4096)
        assert got == b"", got
        refused = True
    except socket.timeout:
        refused = False
    held.pop().close()
    if refused:
        extra.close()
        wait_for("a slot after one closed",
                 lambda: _try(lambda: s.request("GET", "/livez", token=None, timeout=5).status == 200))
    else:
        extra.settimeout(30)
        assert extra.recv(4096).startswith(b"HTTP/1.1 200")
        extra.close()
    for c in held:
        c.close()


def _try(fn):
    try:
        return fn()
    except OSError:
        return False


# ---- TLS ------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_tls(make_server):
    s = make_server()
    cert, key = os.path.join(s.workdir, "cert.pem"), os.path.join(s.workdir, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    s.args += ["-tls-cert", cert, "-tls-key", key]
    s.start()
    s.tls_context = ssl.create_default_context(cafile=cert)
    assert s.request("GET", "/livez", token=None).status == 200
    r = s.request("GET", "/v1/tiers", token=READER)
    assert r.status == 200 and r.json()["tiers"]
    # Plain HTTP to the TLS port gets no HTTP answer.
    plain = raw_connect(s)
    plain.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not closed_without_answer(plain).startswith(b"HTTP/1.1 200")
    plain.close()
    # A client that does not trust the certificate is refused by the handshake.
    s.tls_context = ssl.create_default_context()
    with pytest.raises(ssl.SSLError):
        s.request("GET", "/livez", token=None)


# ---- configuration -----------------------------------------------------------

def test_config_file_environment_and_flags(make_server):
    s = make_server()
    conf = os.path.join(s.workdir, "hangard.conf")
    with open(conf, "w") as f:
        f.write("# hangard\nHANGARD_MAX_BODY_BYTES=100\n\nHANGAR_EXEC_TIMEOUT_SECONDS=7\n")
    s.args += ["-config", conf]
    s.start()
    body = {"tier": "default", "provider": "local", "template": "x" * 80}
    assert s.request("POST", "/v1/sandboxes", body).status == 413
    s.stop()
    # The environment overrides the file, a flag overrides both.
    s2 = make_server(args=["-config", conf], env={"HANGARD_MAX_BODY_BYTES": "50"})
    s2.start()
    assert s2.request("POST", "/v1/sandboxes", {"tier": "x" * 60}).status == 413
    s3 = make_server(args=["-config", conf, "-max-body-bytes", "100000"], env={"HANGARD_MAX_BODY_BYTES": "50"})
    s3.start()
    r = s3.request("POST", "/v1/sandboxes", {"tier": "x" * 200})
    assert r.status == 400, r


@pytest.mark.parametrize("line,complaint", [
    ("HANGARD_PORT=99999", "HANGARD_PORT"),
    ("HANGARD_NOPE=1", "unknown setting HANGARD_NOPE"),
    ("no equals sign", "KEY=VALUE"),
    ("HANGAR_EXEC_TIMEOUT_SECONDS=soon", "HANGAR_EXEC_TIMEOUT_SECONDS"),
])
def test_a_bad_config_stops_the_start(make_server, line, complaint):
    s = make_server()
    conf = os.path.join(s.workdir, "bad.conf")
    with open(conf, "w") as f:
        f.write(line + "\n")
    r = subprocess.run([binary(), "-config", conf, "-tokens", s.tokens_file, "-port", "0"], env=s.env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert r.returncode != 0 and complaint in r.stderr.decode(), r.stderr


def test_a_bad_flag_stops_the_start(make_server):
    s = make_server()
    for args in (["-idle-timeout-seconds", "0"], ["-no-such-flag", "1"], ["-port"]):
        r = subprocess.run([binary(), "-tokens", s.tokens_file, *args], env=s.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        assert r.returncode != 0, args


# ---- shutdown ---------------------------------------------------------------

def test_sigterm_finishes_the_request_in_flight_then_exits_0(make_server):
    s = make_server().start()
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    c = s.connection()
    c.request("POST", f"/v1/sandboxes/{sid}/exec/stream",
              body=json.dumps({"command": "echo started; sleep 1; echo finished"}),
              headers={"Authorization": f"Bearer {WRITER}"})
    r = c.getresponse()
    assert json.loads(r.readline())["data"] == "started\n"
    # The request is in flight: stop the server now.
    s.proc.send_signal(signal.SIGTERM)
    rest = [json.loads(l) for l in r.read().decode().splitlines()]
    c.close()
    assert [e.get("data") for e in rest if e["type"] == "stdout"] == ["finished\n"]
    assert rest[-1]["type"] == "exit" and rest[-1]["exit_code"] == 0
    assert s.proc.wait(timeout=60) == 0
    msgs = [l["msg"] for l in s.log_lines()]
    assert "stopping" in msgs and msgs[-1] == "stopped"
    # It stopped accepting.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
    # The sandbox itself outlives hangard: a new one finds and kills it.
    s2 = make_server(state_dir=s.state_dir).start()
    s2.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)


def test_sigterm_ends_event_streams_and_bounds_the_wait(make_server):
    s = make_server(args=["-shutdown-seconds", "1"]).start()
    sub = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    sub.sendall(f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {READER}\r\n\r\n".encode())
    assert sub.recv(4096).startswith(b"HTTP/1.1 200")
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    # A command that would outlast the bound: cancelled at the bound.
    done = []
    def long_exec():
        try:
            done.append(s.request("POST", f"/v1/sandboxes/{sid}/exec", {"command": "sleep 60"}, timeout=60).status)
        except (OSError, http.client.HTTPException) as e:
            done.append(type(e).__name__)
    t = threading.Thread(target=long_exec)
    t.start()
    wait_for("the exec to be running",
             lambda: "sleep 60" in s.request("POST", f"/v1/sandboxes/{sid}/exec",
                                             {"command": "ps -eo args"}).json()["stdout"])
    start = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=60) == 0
    t.join(timeout=60)
    assert time.monotonic() - start < 30
    assert done == [503], done
    assert closed_without_answer(sub) is not None
    sub.close()
    s2 = make_server(state_dir=s.state_dir).start()
    s2.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)


def test_a_request_while_stopping_is_503_with_retry_after(make_server):
    s = make_server().start()
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    auth = {"Authorization": f"Bearer {WRITER}"}
    # Keep-alive connections opened before the signal, idle when it comes:
    # one for a route behind a token, one for /livez.
    idle = []
    for _ in range(2):
        conn = s.connection()
        conn.request("GET", "/v1/tiers", headers=auth)
        r = conn.getresponse()
        assert r.status == 200
        r.read()
        idle.append(conn)
    # A request in flight holds the server in its drain.
    c = s.connection()
    c.request("POST", f"/v1/sandboxes/{sid}/exec/stream",
              body=json.dumps({"command": "echo started; sleep 2; echo finished"}), headers=auth)
    stream = c.getresponse()
    assert json.loads(stream.readline())["data"] == "started\n"
    s.proc.send_signal(signal.SIGTERM)
    # The listener closes once the server is stopping (the log line comes earlier).
    def refused():
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=5).close()
            return False
        except OSError:
            return True
    wait_for("the listener to close", refused)
    for conn, path, headers in ((idle[0], "/v1/tiers", auth), (idle[1], "/livez", {})):
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        body = json.loads(r.read())
        conn.close()
        assert r.status == 503 and body["error"]["kind"] == "unavailable", (path, r.status, body)
        assert int(r.getheader("Retry-After")) >= 1, (path, r.getheaders())
    assert json.loads(stream.read().decode().splitlines()[-1])["exit_code"] == 0
    c.close()
    assert s.proc.wait(timeout=60) == 0
    s2 = make_server(state_dir=s.state_dir).start()
    s2.ok("DELETE", f"/v1/sandboxes/{sid}", status=204)


# ---- per-token rate, event streams that stall -----------------------------------

def test_per_token_request_rate(make_server):
    s = make_server(args=["-token-rate", "1", "-token-burst", "3"]).start()
    statuses = [s.request("GET", "/v1/tiers", token=READER) for _ in range(8)]
    assert [r.status for r in statuses[:3]] == [200, 200, 200]
    limited = [r for r in statuses if r.status == 429]
    assert limited, statuses
    assert limited[0].json()["error"]["kind"] == "rate_limited"
    assert int(limited[0].header("Retry-After")) >= 1
    # Each token has its own bucket; /livez needs none and is never limited.
    assert s.request("GET", "/v1/tiers", token=WRITER).status == 200
    assert all(s.request("GET", "/livez", token=None).status == 200 for _ in range(5))


def subscribers(server):
    text = server.ok("GET", "/metrics", token=ADMIN).body.decode()
    return int(float(next(l.split()[1] for l in text.splitlines() if l.startswith("hangard_event_subscribers "))))


def test_event_heartbeats_find_subscribers_that_left(make_server):
    s = make_server(args=["-event-heartbeat-seconds", "1"]).start()
    sub = socket.create_connection(("127.0.0.1", s.port), timeout=30)
    sub.sendall(f"GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {READER}\r\n\r\n".encode())
    got = b""
    while b": keepalive" not in got:
        d = sub.recv(4096)
        assert d, got
        got += d
    assert subscribers(s) == 1
    sub.close()
    wait_for("the closed subscriber to be dropped", lambda: subscribers(s) == 0)


def test_a_stream_reader_that_stalls_is_dropped_and_its_command_stopped(make_server):
    s = make_server().start()
    sid = s.ok("POST", "/v1/sandboxes", {}, status=201).json()["id"]
    try:
        sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        body = json.dumps({"command": "head -c 300000000 /dev/zero; echo done", "output_limit": 1000,
                           "timeout": 120})
        sock.sendall(f"POST /v1/sandboxes/{sid}/exec/stream HTTP/1.1\r\nHost: x\r\n"
                     f"Authorization: Bearer {WRITER}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
        # Not reading: the stream's bound is hit long before 300 MB, the
        # request ends on the server, and the command is cancelled.
        def ended():
            return any(l.get("msg") == "request" and l.get("route") == "/v1/sandboxes/{id}/exec/stream"
                       for l in s.log_lines())
        wait_for("the stalled stream to be dropped", ended, timeout=120)
        data = closed_without_answer(sock, timeout=60)
        sock.close()
        assert b'"type":"exit"' not in data
        # hangard serves on, and the sandbox is not busy with the command.
        ps = s.ok("POST", f"/v1/sandboxes/{sid}/exec", {"command": "ps -eo args"}).json()["stdout"]
        assert "head -c 300000000" not in ps
    finally:
        s.request("DELETE", f"/v1/sandboxes/{sid}")
