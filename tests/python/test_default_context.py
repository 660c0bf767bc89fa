"""The default context: calls given no context make one from the HANGAR_* settings, once, and share it."""

import os
import subprocess
import sys
import threading

import pytest

import hangar
import hangar.context


def python(code, **env):
    """Runs code in a fresh interpreter (a default context of its own) with env added."""
    e = dict(os.environ, **env)
    if e.get("HANGAR_PY_PRELOAD"):
        e["LD_PRELOAD"] = e["HANGAR_PY_PRELOAD"]
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, timeout=120)


def test_calls_without_a_context_use_one_made_from_the_settings():
    code = ("import hangar\n"
            "with hangar.Sandbox.create() as sb:\n"
            "    assert sb.context is hangar.default_context()\n"
            "    print(sb.context.get('HANGAR_EXEC_TIMEOUT_SECONDS'))\n"
            "    print(sb.commands.run('echo from-default').stdout.text, end='')\n"
            "s = hangar.Session.create()\n"
            "try:\n"
            "    assert s.sandbox().context is hangar.default_context()\n"
            "    assert hangar.Session.open(s.id).id == s.id\n"
            "    assert s.id in [i.id for i in hangar.Session.list()]\n"
            "finally:\n"
            "    s.delete()\n"
            "print('ok')\n")
    r = python(code, HANGAR_EXEC_TIMEOUT_SECONDS="77")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().splitlines() == ["77", "from-default", "ok"]


def test_a_wrong_setting_raises_naming_the_variable_and_is_not_kept():
    code = ("import os, hangar\n"
            "for attempt in range(2):\n"
            "    try:\n"
            "        hangar.Sandbox.create()\n"
            "    except hangar.ConfigError as e:\n"
            "        print('ConfigError', e.message)\n"
            "os.environ['HANGAR_EXEC_TIMEOUT_SECONDS'] = '9'\n"
            "print(hangar.default_context().get('HANGAR_EXEC_TIMEOUT_SECONDS'))\n")
    r = python(code, HANGAR_EXEC_TIMEOUT_SECONDS="soon")
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    # Raised by every call while the setting is wrong, then made once it is right.
    assert len(lines) == 3 and lines[2] == "9", lines
    for line in lines[:2]:
        assert line.startswith("ConfigError") and "HANGAR_EXEC_TIMEOUT_SECONDS" in line


def test_threads_share_one_default_context(monkeypatch):
    monkeypatch.setattr(hangar.context, "_default", None)
    made = []
    real = hangar.Context.__init__

    def counting(self, *a, **kw):
        made.append(self)
        real(self, *a, **kw)

    monkeypatch.setattr(hangar.Context, "__init__", counting)
    n = 8
    barrier = threading.Barrier(n)
    got = [None] * n

    def first_use(i):
        barrier.wait(30)
        got[i] = hangar.default_context()

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(made) == 1 and all(c is made[0] for c in got)
    monkeypatch.setattr(hangar.Context, "__init__", real)

    # And two threads' sandboxes, created without a context, share it.
    sbs = [None, None]

    def create(i):
        sbs[i] = hangar.Sandbox.create()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert sbs[0].context is sbs[1].context is made[0]
        assert sbs[0].id != sbs[1].id
    finally:
        for sb in sbs:
            if sb is not None:
                sb.kill()
    # The context the sandboxes hold is released at exit, not before.
    hangar.context._release_default()
    assert hangar.context._default is None and made[0]._handle.closed


def test_an_explicit_context_wins(monkeypatch):
    monkeypatch.setattr(hangar.context, "_default", None)
    mine = hangar.Context(settings={"HANGAR_EXEC_TIMEOUT_SECONDS": "5"})
    with hangar.Sandbox.create(mine) as sb:
        assert sb.context is mine
        # The default context was not even made.
        assert hangar.context._default is None
        assert hangar.Sandbox.attach(mine, sb.id).context is mine
        shared = hangar.Sandbox.attach(sb.id)
        assert shared.context is hangar.default_context() is not mine
        assert shared.context.get("HANGAR_EXEC_TIMEOUT_SECONDS") != "5"
    hangar.context._release_default()


def test_the_id_only_forms_and_their_errors(ctx):
    with pytest.raises(TypeError, match="hangar.Context or None, not str"):
        hangar.Sandbox.create("base")  # E2B's template: here, by name
    with pytest.raises(TypeError, match="missing the sandbox id"):
        hangar.Sandbox.attach(ctx)
    with pytest.raises(TypeError, match="two strings"):
        hangar.Sandbox.attach("sbx-a", "sbx-b")
    with pytest.raises(TypeError, match="missing the session id"):
        hangar.Session.open(None)
    with pytest.raises(hangar.NotFoundError):
        hangar.Session.open("no-such-session")
    with pytest.raises(hangar.NotFoundError):
        hangar.Checkpoint.lookup("ckpt-" + "a" * 26)
    with pytest.raises(hangar.GoneError):
        hangar.Sandbox.attach("sbx-never-made")
    assert isinstance(list(hangar.Checkpoint.list()), list)
