"""hangar(1): usage, configuration, run, and the sandbox commands, end to end."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import setting_names, wait_for


def one_error_line(r):
    lines = r.stderr.decode(errors="replace").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("hangar: "), lines[0]
    return lines[0]


# ---- usage ------------------------------------------------------------------------

USAGE_ERRORS = [
    [],
    ["frobnicate"],
    ["--bogus"],
    ["run"],
    ["run", "--"],
    ["run", "--bogus", "--", "true"],
    ["run", "--timeout"],
    ["run", "--timeout", "soon", "--", "true"],
    ["run", "--timeout", "-5", "--", "true"],
    ["run", "--timeout", " 5", "--", "true"],
    ["run", "--timeout", "99999999999", "--", "true"],
    ["run", "--timeout", "604801", "--", "true"],
    ["sandbox", "create", "--timeout", "99999999999"],
    ["sandbox", "create", "--timeout", "31622401"],
    ["sandbox", "timeout", "sb-1", "99999999999"],
    ["run", "--env", "NOEQUALS", "--", "true"],
    ["sandbox"],
    ["sandbox", "frobnicate"],
    ["sandbox", "create", "--network", "maybe"],
    ["sandbox", "create", "extra"],
    ["sandbox", "list", "extra"],
    ["sandbox", "info"],
    ["sandbox", "info", "a", "b"],
    ["sandbox", "exec"],
    ["sandbox", "exec", "sb-1"],
    ["sandbox", "exec", "sb-1", "--"],
    ["sandbox", "shell"],
    ["sandbox", "shell", "sb-1", "extra"],
    ["sandbox", "cp", "a"],
    ["sandbox", "cp", "a", "b"],
    ["sandbox", "cp", "x:/a", "y:/b"],
    ["sandbox", "pause"],
    ["sandbox", "kill", "a", "b"],
    ["sandbox", "timeout", "sb-1"],
    ["sandbox", "timeout", "sb-1", "later"],
    ["sandbox", "port", "sb-1"],
    ["sandbox", "port", "sb-1", "0"],
    ["sandbox", "port", "sb-1", "65536"],
    ["sandbox", "port", "sb-1", "http"],
    ["sandbox", "port", "sb-1", "-80"],
    ["config"],
    ["config", "frobnicate"],
    ["config", "check", "extra"],
    ["version", "extra"],
    ["help", "frobnicate"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a) or "(none)")
def test_usage_errors_exit_2_with_one_line(hangar, args):
    r = hangar(*args)
    assert r.returncode == 2, r.stderr
    one_error_line(r)
    assert r.stdout == b""


def test_help_lists_every_command_and_the_exit_codes(hangar):
    r = hangar.ok("--help")
    out = r.stdout.decode()
    for cmd in ["run", "sandbox create", "sandbox list", "sandbox info", "sandbox exec", "sandbox shell",
                "sandbox cp", "sandbox pause", "sandbox resume", "sandbox kill", "sandbox timeout", "sandbox port",
                "config check", "version", "help"]:
        assert re.search(rf"^\s+{cmd}\s", out, re.M), cmd
    assert "Exit status" in out
    for code in ["124", "137", "128+N"]:
        assert code in out


@pytest.mark.parametrize("args", [["help", "run"], ["run", "--help"], ["help", "sandbox", "exec"],
                                  ["sandbox", "exec", "--help"], ["sandbox", "--help"], ["help", "sandbox"],
                                  ["config", "check", "--help"]])
def test_command_help(hangar, args):
    r = hangar.ok(*args)
    assert r.stdout.decode().startswith("usage: hangar ")


def test_version(hangar):
    r = hangar.ok("version")
    assert re.fullmatch(r"hangar \d+\.\d+\.\d+\n", r.stdout.decode())
    assert hangar.ok("--version").stdout == r.stdout


# ---- config check -------------------------------------------------------------------

def test_config_check_prints_every_setting(hangar, state_dir):
    r = hangar.ok("config", "check")
    out = r.stdout.decode()
    for name in setting_names():
        assert re.search(rf"^{name}=.*  \((default|environment|explicit)\)$", out, re.M), name
    assert f"HANGAR_STATE_DIR={state_dir}  (environment)" in out.splitlines()
    assert "HANGAR_EXEC_TIMEOUT_SECONDS=120  (default)" in out.splitlines()
    assert re.search(r"^default provider: local$", out, re.M)
    assert re.search(r"^capabilities: .*\bpty\b", out, re.M)


def test_config_check_says_where_the_secret_key_comes_from(hangar, state_dir):
    out = hangar.ok("config", "check").stdout.decode().splitlines()
    line = next(l for l in out if l.startswith("secret key: "))
    assert f"{state_dir}/secret.key" in line and "HANGAR_SECRET_KEY is unset" in line
    out = hangar.ok("config", "check", env={"HANGAR_SECRET_KEY": "k"}).stdout.decode().splitlines()
    assert "secret key: HANGAR_SECRET_KEY" in out
    assert not any("secret.key" in l for l in out)


def test_config_check_lists_settings_under_their_provider(hangar):
    lines = hangar.ok("config", "check").stdout.decode().splitlines()
    owner = {}
    current = None
    for line in lines:
        m = re.match(r"^provider ([a-z0-9_-]+): ", line)
        if m:
            current = m.group(1)
        m = re.match(r"^(HANGAR_[A-Z0-9_]+)=", line)
        if m:
            owner[m.group(1)] = current
    # The library's own come first, before any provider line.
    assert owner["HANGAR_TIERS"] is None
    assert owner["HANGAR_EXEC_TIMEOUT_SECONDS"] is None
    # Each provider's under that provider's line.
    assert owner["HANGAR_BWRAP_PATH"] == "local"
    assert owner["HANGAR_LOCAL_NETWORK"] == "local"
    assert owner["HANGAR_E2B_FLAVOR"] == "e2b"
    assert owner["HANGAR_E2B_API_KEY"] == "e2b"
    assert owner["HANGAR_E2B_CA_FILE"] == "e2b"


def test_a_provider_setting_is_validated_at_open(hangar):
    r = hangar("config", "check", env={"HANGAR_E2B_REQUEST_TIMEOUT_SECONDS": " 5"})
    assert r.returncode == 1
    assert "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS" in one_error_line(r)


def test_config_check_names_a_malformed_variable(hangar):
    r = hangar("config", "check", env={"HANGAR_EXEC_TIMEOUT_SECONDS": "abc"})
    assert r.returncode == 1
    assert "HANGAR_EXEC_TIMEOUT_SECONDS" in one_error_line(r)


def test_config_check_fails_when_the_provider_cannot_be_set_up(hangar):
    r = hangar("config", "check", env={"HANGAR_DEFAULT_PROVIDER": "nosuchprovider"})
    assert r.returncode == 1
    assert "nosuchprovider" in one_error_line(r)


def test_a_malformed_setting_fails_every_command(hangar):
    r = hangar("sandbox", "list", env={"HANGAR_LOCAL_NETWORK": "sometimes"})
    assert r.returncode == 1
    assert "HANGAR_LOCAL_NETWORK" in one_error_line(r)


# ---- run ----------------------------------------------------------------------------

def test_run_streams_and_exit_code(hangar):
    before = set(hangar.ids())
    r = hangar("run", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert r.returncode == 3, r.stderr
    assert r.stdout == b"out\n"
    assert "err" in r.stderr.decode().splitlines()
    assert b"out" not in r.stderr
    # The sandbox is gone again.
    assert set(hangar.ids()) == before


def test_run_quotes_each_word(hangar):
    r = hangar.ok("run", "--", "printf", "[%s]\\n", "a b", "it's", "$HOME", "*", "")
    assert r.stdout.decode() == "[a b]\n[it's]\n[$HOME]\n[*]\n[]\n"


def test_run_takes_one_word_as_a_command_line(hangar):
    r = hangar.ok("run", "--", "echo one two | wc -w")
    assert r.stdout.decode().strip() == "2"


def test_run_env_and_cwd(hangar):
    r = hangar.ok("run", "--env", "GREETING=hello there", "-e", "X=1", "--cwd", "/tmp", "--",
                  "sh", "-c", 'echo "$GREETING/$X/$(pwd)"')
    assert r.stdout.decode() == "hello there/1//tmp\n"


def test_run_timeout_exits_124(hangar):
    started = time.monotonic()
    r = hangar("run", "--timeout", "1", "--", "sleep", "10", timeout=60)
    elapsed = time.monotonic() - started
    assert r.returncode == 124, r.stderr
    assert elapsed < 9, f"took {elapsed:.1f}s"


def test_run_killed_by_a_signal_exits_137(hangar):
    r = hangar("run", "--", "sh", "-c", "kill -9 $$")
    assert r.returncode == 137, r.stderr


def test_run_keep_keeps_the_sandbox(hangar):
    r = hangar.ok("run", "--keep", "--", "true")
    sid = r.stderr.decode().splitlines()[-1]
    assert sid in hangar.ids()
    hangar.ok("sandbox", "kill", sid)
    assert sid not in hangar.ids()


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM])
def test_run_interrupted_kills_the_sandbox(hangar, signo):
    before = set(hangar.ids())
    p = subprocess.Popen(hangar.argv("run", "--", "sleep", "60"), env=hangar.env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Wait for the command to run: its sandbox shows up, and then a
        # process of ours in it (the exec is running once ps shows sleep).
        new = wait_for("the sandbox of 'hangar run'", lambda: set(hangar.ids()) - before)
        sid = next(iter(new))
        wait_for("sleep to start", lambda: b"sleep 60" in hangar("sandbox", "exec", sid, "--", "ps -eo args").stdout)
        p.send_signal(signo)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signo, err
    assert sid not in hangar.ids()


def test_sandbox_exec_interrupted_stops_the_command(hangar, sandbox):
    p = subprocess.Popen(hangar.argv("sandbox", "exec", sandbox, "--", "sh", "-c", "echo started; sleep 43.25"),
                         env=hangar.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"started\n"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGINT, err
    # The command is stopped in the sandbox too, not left to its timeout.
    wait_for("the command to stop", lambda: hangar("sandbox", "exec", sandbox, "--",
                                                   "pgrep -f 'sleep 43[.]25'").returncode == 1)


# ---- sandbox ------------------------------------------------------------------------

def test_sandbox_create_list_info(hangar, sandbox):
    assert re.fullmatch(r"[A-Za-z0-9._-]+", sandbox)
    table = hangar.ok("sandbox", "list").stdout.decode().splitlines()
    assert table[0].split() == ["ID", "PROVIDER", "STATE", "CREATED", "EXPIRES"]
    row = next(line.split() for line in table[1:] if line.split()[0] == sandbox)
    assert row[1:3] == ["local", "running"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row[3])

    listed = json.loads(hangar.ok("sandbox", "list", "--json").stdout)
    mine = next(s for s in listed if s["id"] == sandbox)
    assert mine["provider"] == "local" and mine["state"] == "running"
    assert mine["created_at"] and mine["expires_at"]
    assert json.loads(hangar.ok("sandbox", "list", "--provider", "local", "--json").stdout)

    info = json.loads(hangar.ok("sandbox", "info", sandbox, "--json").stdout)
    assert info == mine
    text = hangar.ok("sandbox", "info", sandbox).stdout.decode()
    assert f"id:        {sandbox}" in text.splitlines()
    assert "state:     running" in text.splitlines()


def test_sandbox_create_options(hangar):
    r = hangar.ok("sandbox", "create", "--timeout", "0", "--env", "FROM_CREATE=yes", "--network", "off")
    sid = r.stdout.decode().strip()
    try:
        info = json.loads(hangar.ok("sandbox", "info", sid, "--json").stdout)
        assert info["expires_at"] is None
        r = hangar.ok("sandbox", "exec", sid, "--", "echo $FROM_CREATE")
        assert r.stdout == b"yes\n"
    finally:
        hangar("sandbox", "kill", sid)


def test_sandbox_exec(hangar, sandbox):
    r = hangar("sandbox", "exec", sandbox, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == b"out\n"
    assert "err" in r.stderr.decode().splitlines()
    r = hangar.ok("sandbox", "exec", "--cwd", "/tmp", sandbox, "--env", "A=b", "--", "sh", "-c", "echo $A $(pwd)")
    assert r.stdout == b"b /tmp\n"
    r = hangar("sandbox", "exec", sandbox, "--timeout", "1", "--", "sleep", "10")
    assert r.returncode == 124
    # State persists between commands in one sandbox.
    hangar.ok("sandbox", "exec", sandbox, "--", "echo kept > /tmp/state")
    assert hangar.ok("sandbox", "exec", sandbox, "--", "cat /tmp/state").stdout == b"kept\n"


def test_sandbox_port_exposes_a_server(hangar, sandbox):
    hangar.ok("sandbox", "exec", sandbox, "--",
              "mkdir -p /tmp/www && echo exposed > /tmp/www/page && "
              "(python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www >/dev/null 2>&1 &)")
    wait_for("the server in the sandbox", lambda: hangar(
        "sandbox", "exec", sandbox, "--",
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000), timeout=1)'").returncode == 0)
    out = hangar.ok("sandbox", "port", sandbox, "8000").stdout.decode()
    assert re.fullmatch(r"127\.0\.0\.1:\d+\n", out)
    with urllib.request.urlopen(f"http://{out.strip()}/page", timeout=10) as r:
        assert r.read() == b"exposed\n"
    assert hangar.ok("sandbox", "port", sandbox, "8000").stdout.decode() == out
    r = hangar("sandbox", "port", "sb-0000000000000000", "8000")
    assert r.returncode == 1 and b"gone" in r.stderr


def test_sandbox_exec_reports_the_oom_killer_and_info_the_limits(hangar):
    if os.geteuid() != 0:
        pytest.skip("memory limits need a root caller")
    sid = hangar.ok("sandbox", "create", env={"HANGAR_LOCAL_MEMORY_MB": "64"}).stdout.decode().strip()
    try:
        r = hangar("sandbox", "exec", sid, "--", "python3 -c 'a = bytearray(256 << 20)'")
        assert r.returncode == 137
        assert b"reached its memory limit" in r.stderr
        r = hangar("sandbox", "exec", sid, "--", "kill -9 $$")
        assert r.returncode == 137
        assert b"memory limit" not in r.stderr
        info = hangar.ok("sandbox", "info", sid).stdout.decode().splitlines()
        assert any(re.fullmatch(r"memory: +\d+ of 64 MiB", line) for line in info), info
        assert any(re.fullmatch(r"processes: [1-9]\d* of 512", line) for line in info), info
    finally:
        hangar("sandbox", "kill", sid)


def test_sandbox_cp_both_ways(hangar, sandbox, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17) + bytes(range(256))
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    hangar.ok("sandbox", "cp", str(src), f"{sandbox}:/workspace/sub/dir/file.bin")
    r = hangar.ok("sandbox", "exec", sandbox, "--", "wc -c < /workspace/sub/dir/file.bin")
    assert int(r.stdout) == len(data)

    out = tmp_path / "out.bin"
    hangar.ok("sandbox", "cp", "--", f"{sandbox}:/workspace/sub/dir/file.bin", str(out))
    assert out.read_bytes() == data

    # Into a directory keeps the name, both ways.
    hangar.ok("sandbox", "cp", str(src), f"{sandbox}:/workspace/")
    outdir = tmp_path / "d"
    outdir.mkdir()
    hangar.ok("sandbox", "cp", f"{sandbox}:/workspace/in.bin", str(outdir))
    assert (outdir / "in.bin").read_bytes() == data


def test_sandbox_cp_failures(hangar, sandbox, tmp_path):
    r = hangar("sandbox", "cp", f"{sandbox}:/no/such/file", str(tmp_path / "x"))
    assert r.returncode == 1
    one_error_line(r)
    assert not (tmp_path / "x").exists()
    r = hangar("sandbox", "cp", str(tmp_path / "missing"), f"{sandbox}:/workspace/x")
    assert r.returncode == 1
    one_error_line(r)


def test_sandbox_lifecycle(hangar):
    sid = hangar.ok("sandbox", "create").stdout.decode().strip()
    hangar.ok("sandbox", "exec", sid, "--", "true")

    hangar.ok("sandbox", "pause", sid)
    assert json.loads(hangar.ok("sandbox", "info", sid, "--json").stdout)["state"] == "paused"
    r = hangar("sandbox", "exec", sid, "--", "true")
    assert r.returncode == 1
    assert "paused" in one_error_line(r)

    hangar.ok("sandbox", "resume", sid)
    assert json.loads(hangar.ok("sandbox", "info", sid, "--json").stdout)["state"] == "running"
    assert hangar.ok("sandbox", "exec", sid, "--", "echo back").stdout == b"back\n"

    hangar.ok("sandbox", "timeout", sid, "3600")
    expires = json.loads(hangar.ok("sandbox", "info", sid, "--json").stdout)["expires_at"]
    assert expires and time.strptime(expires, "%Y-%m-%dT%H:%M:%SZ")

    hangar.ok("sandbox", "kill", sid)
    assert sid not in hangar.ids()
    for args in (["info", sid], ["exec", sid, "--", "true"], ["kill", sid], ["pause", sid]):
        r = hangar("sandbox", *args)
        assert r.returncode == 1, args
        assert "gone" in one_error_line(r), args


def test_unknown_sandbox_is_gone(hangar):
    r = hangar("sandbox", "info", "sb-0000000000000000")
    assert r.returncode == 1
    assert "gone" in one_error_line(r)


def test_verbose_logs_on_stderr(hangar):
    r = hangar("--verbose", "run", "--", "true")
    assert r.returncode == 0
    assert re.search(r"^hangar: (info|debug): .*created", r.stderr.decode(), re.M)


# ---- hostile input and bounds -------------------------------------------------------------

@pytest.mark.parametrize("value", ["0", " 5", "+5", "5 ", "-1", "1e3", "99999999999999999999"])
def test_numeric_settings_are_digits_within_bounds(hangar, value):
    r = hangar("config", "check", env={"HANGAR_READ_LIMIT_BYTES": value})
    assert r.returncode != 0
    assert "HANGAR_READ_LIMIT_BYTES" in r.stderr.decode()


def test_odd_ids_cannot_forge_lines(hangar):
    forged = "sb-1\nhangar: sandbox sb-2 killed\r\x1b[2J"
    for sid in (forged, "a" * 5000):
        r = hangar("sandbox", "info", sid)
        assert r.returncode == 1
        line = one_error_line(r)
        assert "\x1b" not in line and "\r" not in line
        assert len(line) < 400, len(line)


def test_list_names_a_broken_provider(hangar, sandbox):
    # The default provider cannot be set up: never an empty table with exit 0.
    r = hangar("sandbox", "list", env={"HANGAR_BWRAP_PATH": "/nonexistent"})
    assert r.returncode == 1, r.stdout
    err = r.stderr.decode()
    assert "local" in err and "HANGAR_BWRAP_PATH" in err, err


def test_command_line_too_long_is_a_clear_error(hangar, sandbox):
    # Each word is short enough to pass to hangar; joined, the line is over 128 KiB.
    words = ["x" * 1000] * 140
    r = hangar("sandbox", "exec", sandbox, "--", "echo", *words)
    assert r.returncode == 1, r.returncode
    assert "command line" in one_error_line(r)
    # Just under still runs.
    r = hangar.ok("sandbox", "exec", sandbox, "--", "echo", *words[:120])
    assert len(r.stdout) == 120 * 1001


# A file far larger than any limit, made sparse so it costs the sandbox no
# space (envd refuses devices such as /dev/zero outright).
ENDLESS_FILE = "truncate -s 64G /tmp/zero"


def temp_copies(d):
    return [p for p in os.listdir(d) if ".hangar-" in p]


def test_sandbox_cp_out_has_a_size_limit(hangar, sandbox, tmp_path):
    hangar.ok("sandbox", "exec", sandbox, "--", ENDLESS_FILE)
    r = hangar("sandbox", "cp", f"{sandbox}:/tmp/zero", str(tmp_path / "z"),
               env={"HANGAR_COPY_LIMIT_BYTES": str(8 << 20)})
    assert r.returncode == 1
    assert "limit" in one_error_line(r)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM])
def test_sandbox_cp_interrupted_removes_its_temporary_file(hangar, sandbox, tmp_path, signo):
    hangar.ok("sandbox", "exec", sandbox, "--", ENDLESS_FILE)
    p = subprocess.Popen(hangar.argv("sandbox", "cp", f"{sandbox}:/tmp/zero", str(tmp_path / "z")),
                         env=hangar.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # The copy is under way once its temporary file holds data.
        def growing():
            names = temp_copies(tmp_path)
            return names and os.path.getsize(tmp_path / names[0]) > 0
        wait_for("the copy to start", growing)
        p.send_signal(signo)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signo, err
    assert os.listdir(tmp_path) == []
