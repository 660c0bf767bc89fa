"""Every error kind raises its own class, with the details control flow needs."""

import builtins
import os
import re
import socket

import pytest

import hangar
from hangar import errors


def library_codes():
    """The HANGAR_E* codes of hangar/errors.h, as the extension has them."""
    return {n: v for n, v in vars(hangar._hangar).items()
            if re.fullmatch(r"HANGAR_E[A-Z]+", n) and isinstance(v, int) and v < 0}


def test_one_class_per_kind():
    # A code added to hangar/errors.h fails this until it has its class.
    codes = library_codes()
    assert len(codes) >= 18 and "HANGAR_EGONE" in codes
    classes = hangar.ERROR_CLASSES
    assert len({c.code for c in classes}) == len(classes)
    assert sorted(c.code for c in classes) == sorted(codes.values())
    for c in classes:
        assert issubclass(c, hangar.HangarError)
        # Never a builtin's name for another meaning.
        assert not hasattr(builtins, c.__name__), c.__name__
        assert hangar.error_class(c.code) is c
        # The class's name matches the library's name of its code.
        assert c.name == hangar._hangar.hangar_error_name(c.code)
    assert hangar.error_class(-1000) is hangar.HangarError


def test_the_factory_keeps_details():
    e = errors._from_details({"code": -5, "name": "capacity", "message": "full", "http_status": 429,
                              "retry_after": 7, "os_errno": 0, "provider_code": "", "category": 4, "flags": 1})
    assert type(e) is hangar.CapacityError and e.code == -5 and e.http_status == 429 and e.retry_after == 7
    assert e.unreachable and "full" in str(e)


def unused_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_local_kinds(ctx, tmp_path):
    with pytest.raises(hangar.ConfigError) as ei:
        ctx.set("HANGAR_EXEC_TIMEOUT_SECONDS", "not a number")
    assert "HANGAR_EXEC_TIMEOUT_SECONDS" in ei.value.message and ei.value.code == -3
    with pytest.raises(hangar.InvalidArgumentError):
        ctx.set("HANGAR_NO_SUCH_SETTING", "1")
    with pytest.raises(hangar.NotFoundError):
        ctx.provider("no-such-provider")
    with pytest.raises(hangar.InvalidArgumentError):
        hangar.Sandbox.create(ctx, tier="no-such-tier")
    with pytest.raises(hangar.RefusedError):
        hangar.Sandbox.create(ctx, provider="local", tier="isolated")
    with pytest.raises(hangar.GoneError):
        hangar.Sandbox.attach(ctx, "sb-0000000000000000")
    with pytest.raises(hangar.NotFoundError):
        hangar.Checkpoint.lookup(ctx, "ckpt-aaaaaaaaaaaaaaaaaaaaaaaaaa")
    with pytest.raises(hangar.NotFoundError):
        hangar.Session.open(ctx, "no-such-session")
    ctx.set("HANGAR_READ_LIMIT_BYTES", "10")
    with hangar.Sandbox.create(ctx) as sb:
        sb.write_file("/tmp/big", b"x" * 11)
        with pytest.raises(hangar.TooLargeError):
            sb.read_file("/tmp/big")
        with pytest.raises(hangar.FileError):
            sb.read_file("/tmp/missing")
        with pytest.raises(hangar.SystemCallError) as ei:
            sb.copy_in(tmp_path / "missing", "/tmp/x")
        assert ei.value.os_errno != 0
        with pytest.raises(hangar.ExistsError):
            sb.mkdir("/tmp")
        with pytest.raises(hangar.UnsupportedError):
            # Local snapshots hold a root caller's sandbox's files; none for others.
            if os.geteuid() == 0:
                sb.fork(1)
            else:
                sb.snapshot()
        with pytest.raises(hangar.CanceledError):
            sb.exec("sleep 30", cancel=lambda: True)
        p = sb.start("sleep 30")
        with pytest.raises(hangar.DeadlineError):
            p.wait(0.1)
        p.kill()
        sb.pause()
        with pytest.raises(hangar.PausedError):
            sb.exec("true")
        sb.resume()
        sb.kill()
        with pytest.raises(hangar.GoneError):
            sb.exec("true")


def test_cloud_kinds(fake):
    ctx = hangar.Context(settings=fake.settings)
    fake.fault({"route": "create", "status": 429, "count": 1, "retry_after": 7})
    with pytest.raises(hangar.CapacityError) as ei:
        hangar.Sandbox.create(ctx, provider="e2b")
    assert ei.value.http_status == 429 and ei.value.retry_after == 7
    fake.fault({"route": "create", "status": 503, "count": 1})
    with pytest.raises(hangar.UnavailableError) as ei:
        hangar.Sandbox.create(ctx, provider="e2b")
    assert ei.value.http_status == 503
    with pytest.raises(hangar.CreateError):
        hangar.Sandbox.create(ctx, provider="e2b", template="no-such-alias")
    with hangar.Sandbox.create(ctx, provider="e2b") as sb:
        fake.fault({"route": "exec", "envd": "undecodable", "count": 1})
        with pytest.raises(hangar.ProtocolError):
            sb.exec("true")
        assert sb.exec("echo fine").stdout == b"fine\n"
    down = dict(fake.settings, HANGAR_E2B_API_URL=f"http://127.0.0.1:{unused_port()}")
    with pytest.raises(hangar.UnavailableError) as ei:
        hangar.Sandbox.create(hangar.Context(settings=down), provider="e2b")
    assert ei.value.unreachable


def test_no_memory_maps_to_its_class():
    # Out of memory cannot be provoked on purpose; the one mapping is what
    # the extension uses for it as for every other code.
    e = errors._from_details({"code": -2, "name": "nomem", "message": "out of memory", "http_status": 0,
                              "retry_after": 0, "os_errno": 12, "provider_code": "", "category": 3, "flags": 0})
    assert type(e) is hangar.NoMemoryError


def test_bad_arguments_are_python_errors(ctx):
    with hangar.Sandbox.create(ctx) as sb:
        with pytest.raises(TypeError):
            sb.exec("true", env="A=1")
        with pytest.raises(TypeError):
            sb.exec("true", env=[1])
        with pytest.raises(TypeError):
            sb.write_file("/tmp/x", 5)  # type: ignore[arg-type]
        with pytest.raises(hangar.InvalidArgumentError):
            sb.exec("x" * (200 * 1024))
        with pytest.raises(hangar.InvalidArgumentError):
            sb.exec("true", timeout=10**9)
