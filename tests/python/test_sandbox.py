"""The sandbox API from Python, on local sandboxes and on the e2b fake (cloud)."""

import os
import threading

import pytest

import hangar
from conftest import removed_after, scratch_path, wait_for


def test_exec_result(sandbox):
    r = sandbox.exec("printf 'out\\n'; printf 'err\\n' >&2; exit 3")
    assert isinstance(r, hangar.ExecResult)
    assert r.exit_code == 3 and not r.ok
    assert r.stdout == b"out\n" and r.stderr == b"err\n"
    assert isinstance(r.stdout, bytes) and r.stdout.text == "out\n"
    assert not r.timed_out and not r.truncated
    assert r.stdout_bytes == 4 and r.duration > 0


def test_exec_options(sandbox):
    r = sandbox.exec("echo $A-$B; pwd; cat", env={"A": "1"}, cwd="/tmp", stdin=b"fed\n")
    assert r.stdout.text.splitlines() == ["1-", "/tmp", "fed"]
    r = sandbox.exec("echo $B", env=["B=two"])
    assert r.stdout == b"two\n"
    r = sandbox.exec("id -un", user="root")
    assert r.stdout == b"root\n"


def test_exec_binary_and_invalid_utf8(sandbox):
    r = sandbox.exec("printf '\\000\\377a'")
    assert r.stdout == b"\x00\xffa"
    assert r.stdout.text == "\x00\ufffda"


def test_exec_timeout_is_a_result(sandbox):
    r = sandbox.exec("sleep 30", timeout=1)
    assert r.timed_out and r.exit_code == 124


def test_exec_truncated(sandbox):
    r = sandbox.exec("head -c 5000 /dev/zero | tr '\\0' x", output_limit=100)
    assert r.truncated and r.stdout_bytes == 5000
    assert r.stdout.startswith(b"x" * 50) and r.stdout.endswith(b"x" * 50)
    assert b"4900 bytes of output omitted" in r.stdout


def test_exec_live_output(sandbox):
    seen = []
    r = sandbox.exec("echo one; echo two >&2", on_output=lambda s, d: seen.append((s, d)))
    assert r.exit_code == 0
    assert b"".join(d for s, d in seen if s == hangar.STDOUT) == b"one\n"
    assert b"".join(d for s, d in seen if s == hangar.STDERR) == b"two\n"


def test_exec_cancel(sandbox):
    with pytest.raises(hangar.CanceledError):
        sandbox.exec("sleep 30", cancel=lambda: True)


def test_files(sandbox, tmp_path):
    data = bytes(range(256)) * 40
    sandbox.write_file("/tmp/py/d/f.bin", data)
    assert sandbox.read_file("/tmp/py/d/f.bin") == data
    sandbox.write_file("/tmp/py/t.txt", "héllo")
    assert sandbox.read_file("/tmp/py/t.txt") == "héllo".encode()
    assert sandbox.exists("/tmp/py/d/f.bin") and not sandbox.exists("/tmp/py/none")
    entries = sandbox.list_files("/tmp/py")
    assert iter(entries) is entries  # an iterator, not a list
    by_name = {e.name: e for e in entries}
    assert by_name["d"].is_dir and by_name["t.txt"].is_file and by_name["t.txt"].bytes == 6
    st = sandbox.stat("/tmp/py/d/f.bin")
    assert st.bytes == len(data) and st.path == "/tmp/py/d/f.bin"
    sandbox.mkdir("/tmp/py/new/deep")
    with pytest.raises(hangar.ExistsError):
        sandbox.mkdir("/tmp/py/new/deep")
    sandbox.rename("/tmp/py/t.txt", "/tmp/py/new/u.txt")
    assert sandbox.read_file("/tmp/py/new/u.txt") == "héllo".encode()
    local = tmp_path / "in.bin"
    local.write_bytes(data * 3)
    sandbox.copy_in(local, "/tmp/py/copied.bin")
    sandbox.copy_out("/tmp/py/copied.bin", tmp_path / "out.bin")
    assert (tmp_path / "out.bin").read_bytes() == data * 3
    sandbox.remove("/tmp/py")
    assert not sandbox.exists("/tmp/py")
    with pytest.raises(hangar.FileError):
        sandbox.read_file("/tmp/py/d/f.bin")


def test_info_and_listing(target, sandbox):
    ctx, provider = target
    info = sandbox.info()
    assert info.id == sandbox.id and info.provider == provider == sandbox.provider
    assert info.state == hangar.RUNNING and not info.paused
    assert sandbox.id in {s.id for s in ctx.sandboxes(provider)}


def test_pause_resume(sandbox, scratch):
    sandbox.write_file(f"{scratch}/kept", b"1")
    sandbox.pause()
    assert sandbox.info().paused
    with pytest.raises(hangar.PausedError):
        sandbox.exec("true")
    sandbox.resume()
    assert sandbox.read_file(f"{scratch}/kept") == b"1"


def test_with_block_kills_unless_kept(target):
    ctx, provider = target
    with hangar.Sandbox.create(ctx, provider=provider) as sb:
        sid = sb.id
    with pytest.raises(hangar.GoneError):
        hangar.Sandbox.attach(ctx, sid)
    with hangar.Sandbox.create(ctx, provider=provider, keep=True) as sb:
        sid = sb.id
    again = hangar.Sandbox.attach(ctx, sid)
    assert again.exec("echo alive").stdout == b"alive\n"
    again.kill()
    with pytest.raises(hangar.GoneError):
        again.exec("true")


def test_exception_in_block_still_kills(target):
    ctx, provider = target
    with pytest.raises(KeyError):
        with hangar.Sandbox.create(ctx, provider=provider) as sb:
            sid = sb.id
            raise KeyError("x")
    with pytest.raises(hangar.GoneError):
        hangar.Sandbox.attach(ctx, sid)


def test_process_stdin_and_output(sandbox):
    got = []
    lock = threading.Lock()

    def out(stream, data):
        with lock:
            got.append((stream, data))

    with sandbox.start("cat; echo done >&2", stdin=True, on_output=out) as p:
        assert p.pid > 0
        p.write(b"hello\n")
        p.write("wörld\n")
        wait_for("echo of stdin", lambda: b"".join(d for s, d in list(got) if s == 1) == "hello\nwörld\n".encode())
        p.close_stdin()
        assert p.wait(30) == 0
    assert (hangar.STDERR, b"done\n") in got


def test_process_signal_and_wait_deadline(sandbox):
    p = hangar.Process.start(sandbox, "sleep 60")
    with pytest.raises(hangar.DeadlineError):
        p.wait(0.2)
    p.signal(hangar.SIGKILL)
    assert p.wait(30) == -1
    p.close()
    p.close()  # twice is harmless
    with pytest.raises(ValueError):
        p.wait()


def test_process_attach(sandbox):
    p = sandbox.start("sleep 60")
    q = hangar.Process.attach(sandbox, p.pid)
    q.kill()
    assert p.wait(30) == -1
    with pytest.raises(hangar.NotFoundError):
        hangar.Process.attach(sandbox, 999999)


def test_pty_resize(sandbox):
    got = []
    p = sandbox.start(pty=True, cols=80, rows=24, on_output=lambda s, d: got.append(d))
    p.resize(100, 40)
    p.write("stty size; exit\n")
    assert p.wait(30) == 0
    assert b"40 100" in b"".join(got)
    q = sandbox.start("sleep 1")
    with pytest.raises(hangar.UnsupportedError):
        q.resize(10, 10)
    q.kill()


def test_metrics_and_logs(sandbox):
    samples = list(sandbox.metrics())
    assert samples and samples[0].cpu_count > 0 and samples[0].mem_total_bytes > 0
    assert all(isinstance(e, hangar.LogEntry) for e in sandbox.logs())


def test_local_ports_and_no_fork(ctx):
    with hangar.Sandbox.create(ctx, provider="local") as sb:
        addr = sb.expose_port(8000)
        host, port = addr.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert sb.expose_port(8000) == addr
        with pytest.raises(hangar.UnsupportedError):
            sb.fork(1)


def test_cloud_fork_and_snapshot(cloud_ctx):
    with hangar.Sandbox.create(cloud_ctx, provider="e2b") as sb, removed_after(sb, scratch_path("m")) as m:
        sb.write_file(m, b"mark")
        forks = sb.fork(2)
        assert [f.index for f in forks] == [0, 1]
        for f in forks:
            assert f.error is None and f.sandbox is not None
            with f.sandbox as child:
                assert child.id != sb.id
                assert child.read_file(m) == b"mark"
            # A fork is the caller's as a created sandbox is: the block kills it.
            with pytest.raises(hangar.GoneError):
                hangar.Sandbox.attach(cloud_ctx, child.id)
        snap = sb.snapshot("py-snap")
        assert snap
        with hangar.Sandbox.create(cloud_ctx, provider="e2b", template=snap) as from_snap:
            assert from_snap.read_file(m) == b"mark"


def test_settings_tiers_environments(ctx, tmp_path):
    names = [s.name for s in ctx.settings()]
    assert "HANGAR_DEFAULT_PROVIDER" in names and "HANGAR_E2B_API_KEY" in names
    own = [s.name for s in ctx.settings(all=False)]
    assert "HANGAR_E2B_API_KEY" not in own and "HANGAR_STATE_DIR" in own
    ctx.set("HANGAR_E2B_API_KEY", "e2b_secret_value_do_not_show")
    masked = {s.name: s for s in ctx.settings("e2b", all=False)}
    assert masked["HANGAR_E2B_API_KEY"].value != "e2b_secret_value_do_not_show"
    assert masked["HANGAR_E2B_API_KEY"].source == hangar.SETTING_EXPLICIT
    tiers = {t.name: t for t in ctx.tiers()}
    assert list(tiers) == ["fast", "isolated", "default", "heavy"]
    assert "local" in tiers["default"].providers
    envs = tmp_path / "environments.json"
    envs.write_text('{"py": {"description": "for tests", "tier": "default", "env": {"X": "y"}}}')
    ctx.set("HANGAR_ENVIRONMENTS_FILE", str(envs))
    (e,) = list(ctx.environments())
    assert e.name == "py" and e.env == {"X": "y"} and ctx.environment("py").description == "for tests"
    with pytest.raises(hangar.NotFoundError):
        ctx.environment("nope")
    with hangar.Sandbox.create(ctx, environment="py") as sb:
        assert sb.exec("echo $X").stdout == b"y\n"


def test_events(tmp_path):
    events = []
    ctx = hangar.Context(on_event=lambda name, data: events.append((name, data)))
    with hangar.Sandbox.create(ctx) as sb:
        sid = sb.id
    names = [n for n, _ in events]
    assert "sandbox.created" in names and "sandbox.killed" in names
    assert dict(events)["sandbox.created"]["id"] == sid


def test_templates_on_the_fake(cloud_ctx):
    tid = cloud_ctx.build_template("py-tpl", "docker.io/library/python:3.12", provider="e2b",
                                   progress=lambda status, msg: None)
    assert tid
    assert tid in {t.template_id for t in cloud_ctx.templates("e2b")}
    with pytest.raises(hangar.UnsupportedError):
        list(cloud_ctx.templates("local"))


def test_every_public_name_has_a_docstring():
    # help() and editors show them: each public class, function, method and
    # property of the package says what it does (the header's text, in
    # Python terms). Inherited members (bytes' for Output) are not ours.
    import inspect

    import hangar.aio

    missing = []
    for module, name in [(hangar, n) for n in hangar.__all__] + [(hangar.aio, n) for n in hangar.aio.__all__]:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue
        if not inspect.isclass(obj):
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            continue
        # Its own, not a base class's, nor the signature dataclass writes.
        doc = (vars(obj).get("__doc__") or "").strip()
        if not doc or doc.startswith(obj.__name__ + "("):
            missing.append(name)
        for attr, member in vars(obj).items():
            if attr.startswith("_"):
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            elif not inspect.isfunction(member):
                continue
            if not (member.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
    assert not missing, f"no docstring: {missing}"


def test_envd_endpoint(ctx):
    with hangar.Sandbox.create(ctx) as sb:
        ep = sb.envd_endpoint()
        # The local provider: envd on a unix socket outside the sandbox, with a token of its own.
        assert ep.socket_path and os.path.exists(ep.socket_path) and ep.access_token
        assert isinstance(ep.headers, list)
        # What the library reports is what envd takes: a request with it is answered.
        import http.client
        import socket

        class UnixHTTP(http.client.HTTPConnection):
            def connect(self):
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(ep.socket_path)

        c = UnixHTTP("localhost", timeout=10)
        c.request("GET", "/health", headers={"X-Access-Token": ep.access_token})
        assert c.getresponse().status in (200, 204)
        sb.pause()
        with pytest.raises(hangar.PausedError):
            sb.envd_endpoint()
        sb.resume()
        assert sb.envd_endpoint().access_token == ep.access_token


def test_port_endpoint(ctx, fake):
    # A local sandbox's ports are exposed, not routed by a platform.
    with hangar.Sandbox.create(ctx) as sb:
        with pytest.raises(hangar.UnsupportedError):
            sb.port_endpoint(8000)
    # A server on the host is a port of the fake's sandboxes (they run on the
    # host): reached at the endpoint with its headers, and only with them.
    import http.client
    import http.server
    import threading
    import urllib.parse

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with hangar.Sandbox.create(hangar.Context(settings=fake.settings), provider="e2b") as sb:
            ep = sb.port_endpoint(port)
            assert ep.url == fake.settings["HANGAR_E2B_SANDBOX_URL"]
            assert f"E2b-Sandbox-Port: {port}" in ep.headers
            assert f"E2b-Sandbox-Id: {sb.id}" in ep.headers
            assert any(h.startswith("e2b-traffic-access-token: ") for h in ep.headers)
            with pytest.raises(hangar.InvalidArgumentError):
                sb.port_endpoint(0)

            def get(headers):
                u = urllib.parse.urlsplit(ep.url)
                c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
                c.request("GET", "/", headers=dict(h.split(": ", 1) for h in headers))
                r = c.getresponse()
                return r.status, r.read()

            assert get(ep.headers) == (200, b"hello")
            assert get([h for h in ep.headers if not h.startswith("e2b-traffic")])[0] == 403
            sb.pause()
            with pytest.raises(hangar.PausedError):
                sb.port_endpoint(port)
    finally:
        server.shutdown()
        server.server_close()


def test_port_endpoint_by_domain(fake):
    # Without a sandbox URL, a port is the platform's <port>-<id>.<domain> over
    # https, on E2B's own domains too (where envd is the shared sandbox.<domain>).
    settings = {k: v for k, v in fake.settings.items() if k != "HANGAR_E2B_SANDBOX_URL"}
    with hangar.Sandbox.create(hangar.Context(settings=settings), provider="e2b") as sb:
        assert sb.envd_endpoint().url == "https://sandbox.e2b.app"
        ep = sb.port_endpoint(3000)
        assert ep.url == f"https://3000-{sb.id}.e2b.app"
        assert f"E2b-Sandbox-Port: 3000" in ep.headers
