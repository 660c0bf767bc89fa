"""The C examples in examples/, run for real against the local provider.

Each test runs an example with a state directory of its own and checks
what it did from outside: the output it computed, the files it wrote, and
with the CLI that it left no sandbox or session behind. The last test
installs the build into a scratch directory and builds every example
against it with pkg-config alone, as a user would.
"""

import glob
import json
import os
import secrets
import shlex
import shutil
import socket
import string
import subprocess

import pytest

TIMEOUT = 180


def need(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set (run through meson test)")
    return value


@pytest.fixture
def env(tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("HANGAR_")}
    for name in ("HANGAR_ENVD_PATH", "HANGAR_JAIL_PATH"):
        if os.environ.get(name):
            e[name] = os.environ[name]
    e["HANGAR_STATE_DIR"] = str(tmp_path / "state")
    yield e
    # Whatever an example left behind is killed, so a failure costs no jail.
    cli = os.environ.get("HANGAR_CLI")
    if cli:
        for sid in live_sandboxes(e):
            subprocess.run([cli, "sandbox", "kill", sid], env=e, capture_output=True, timeout=TIMEOUT)
    # And the runtime directory (on a tmpfs) the state directory links to, which tmp_path's removal leaves.
    link = tmp_path / "state" / "local" / "run"
    if link.is_symlink():
        shutil.rmtree(os.readlink(link), ignore_errors=True)


def live_sandboxes(e):
    r = subprocess.run([need("HANGAR_CLI"), "sandbox", "list", "--json"], env=e,
                       capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return [s["id"] for s in json.loads(r.stdout)]


def sessions(e):
    r = subprocess.run([need("HANGAR_CLI"), "session", "list", "--json"], env=e,
                       capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return json.loads(r.stdout)


def example(name, *args, env, extra=None):
    e = dict(env)
    e.update(extra or {})
    return subprocess.run([need("EXAMPLE_" + name.upper()), *args], env=e, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=TIMEOUT)


def test_run_passes_output_and_exit_status(env):
    token = secrets.token_hex(8)
    r = example("run", f"printf %s {token}; printf oops >&2; exit 7", env=env)
    assert r.returncode == 7, r.stderr
    assert r.stdout.decode() == token
    assert b"oops" in r.stderr
    assert live_sandboxes(env) == [], "run left its sandbox alive"


def test_run_reports_a_broken_setup(env):
    r = example("run", "true", env=env, extra={"HANGAR_DEFAULT_PROVIDER": "no-such-provider"})
    assert r.returncode != 0
    assert b"run: create:" in r.stderr


def test_copy_round_trip(env, tmp_path):
    text = "".join(secrets.choice(string.ascii_letters + string.digits + "\n") for _ in range(300_000))
    src, dst = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(text)
    r = example("copy", str(src), str(dst), env=env)
    assert r.returncode == 0, r.stderr
    assert dst.read_text() == text.upper()
    assert f": {len(text)} bytes from sandbox " in r.stdout.decode()
    assert live_sandboxes(env) == []


def test_copy_of_a_missing_file_fails_cleanly(env, tmp_path):
    dst = tmp_path / "out.txt"
    r = example("copy", str(tmp_path / "absent"), str(dst), env=env)
    assert r.returncode != 0
    assert b"copy: copy in:" in r.stderr
    assert not dst.exists()
    assert live_sandboxes(env) == [], "a failed copy left its sandbox alive"


def test_tiers_falls_back_when_the_cloud_is_unreachable(env):
    # A port that is bound but not listening refuses connections at once.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = example("tiers", "fast", env=env, extra={
            "HANGAR_TIERS": json.dumps({"fast": ["e2b"]}),
            "HANGAR_E2B_FLAVOR": "cloud",
            "HANGAR_E2B_API_KEY": "e2b_" + secrets.token_hex(20),
            "HANGAR_E2B_API_URL": f"http://127.0.0.1:{port}",
            "HANGAR_E2B_DOMAIN": "sandbox.invalid",
        })
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "tier fast: e2b local [fallback]" in out
    events = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()
              if line.startswith("event sandbox.tier_fallback ")]
    assert events, out
    assert events[0]["from"] == "e2b" and events[0]["to"] == "local"
    assert events[0]["reason"] == "unreachable"
    assert " on local through tier fast" in out
    assert any(line.startswith("event sandbox.killed ") for line in out.splitlines())


def test_tiers_isolated_never_falls_back(env):
    r = example("tiers", "isolated", env=env, extra={"HANGAR_TIERS": json.dumps({"isolated": []})})
    assert r.returncode != 0
    assert b"tiers: create:" in r.stderr
    assert live_sandboxes(env) == []


def test_session_keeps_the_workspace_and_the_conversation(env):
    r = example("session", env=env)
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert "resumed hot" in out
    assert "notes: draft one\n" in out
    assert "conversation: user: keep the notes\n" in out
    assert sessions(env) == [], "the session was not deleted"
    assert live_sandboxes(env) == []


def test_session_kept_survives_the_program(env):
    r = example("session", "--keep", env=env)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.decode().splitlines()[0].split()[1]
    assert [s["id"] for s in sessions(env)] == [sid]
    d = subprocess.run([need("HANGAR_CLI"), "session", "delete", sid], env=env, capture_output=True,
                       timeout=TIMEOUT)
    assert d.returncode == 0, d.stderr


def test_examples_build_against_the_installed_library(env, tmp_path):
    """meson install into a scratch DESTDIR, then cc $(pkg-config --cflags --libs libhangar)."""
    prefix = need("INSTALL_PREFIX")
    dest = tmp_path / "dest"
    subprocess.run([need("MESON"), "install", "-C", need("MESON_BUILD_ROOT"), "--destdir", str(dest),
                    "--no-rebuild", "--quiet"], check=True, stdout=subprocess.DEVNULL, timeout=TIMEOUT)

    def staged(path):
        return str(dest) + os.path.join(prefix, path)
    libdir = staged(need("INSTALL_LIBDIR"))
    pc_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    pc_env.pop("PKG_CONFIG_LIBDIR", None)
    flags = subprocess.run(["pkg-config", "--define-variable=prefix=" + str(dest) + prefix,
                            "--cflags", "--libs", "libhangar"], env=pc_env, check=True,
                           capture_output=True, text=True).stdout.split()
    sanitize = os.environ.get("B_SANITIZE", "none")
    extra = [] if sanitize in ("", "none") else ["-fsanitize=" + sanitize]
    sources = sorted(glob.glob(os.path.join(need("HANGAR_SOURCE_ROOT"), "examples", "*.c")))
    assert len(sources) >= 4, sources
    built = {}
    for src in sources:
        name = os.path.basename(src)[:-2]
        exe = str(tmp_path / name)
        subprocess.run([*shlex.split(need("CC_CMD")), "-std=c11", "-Wall", "-Wextra", "-Werror", *extra,
                        src, "-o", exe, *flags], check=True, timeout=TIMEOUT)
        built[name] = exe

    token = secrets.token_hex(8)
    run_env = dict(env, LD_LIBRARY_PATH=libdir)
    r = subprocess.run([built["run"], f"echo {token}"], env=run_env, capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == token + "\n"
    # The program ran on the installed copy, not on the build tree's.
    ldd = subprocess.run(["ldd", built["run"]], env=run_env, capture_output=True, text=True).stdout
    assert libdir in ldd, ldd
    shutil.rmtree(dest)
