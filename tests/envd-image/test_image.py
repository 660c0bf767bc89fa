"""hangar-envd in roots without bash, timeout or any libc: what runs, with
which libraries, and what the uniform exec rules still give."""

import base64
import os
import subprocess
import time
import urllib.parse

import pytest

from envdwire import events, end_error

LIB = "/run/hangar"


def start(client, cmd, args, envs=None, pty=None, timeout=60):
    msg = {"process": {"cmd": cmd, "args": args, "envs": envs or {}}}
    if pty:
        msg["pty"] = {"size": {"cols": 80, "rows": 24}}
    status, envs_, body = client.stream("/process.Process/Start", msg, timeout=timeout)
    assert status == 200, body
    assert end_error(envs_) is None, envs_
    ev = events(envs_)
    out = b"".join(base64.b64decode(b["stdout"]) for k, b in ev if k == "data" and "stdout" in b)
    err = b"".join(base64.b64decode(b["stderr"]) for k, b in ev if k == "data" and "stderr" in b)
    end = [b for k, b in ev if k == "end"]
    assert len(end) == 1, ev
    return out.decode(), err.decode(), end[0]


def uniform(client, command, seconds=30, envs=None):
    """What the library sends for hangar_sandbox_exec."""
    return start(client, "timeout", ["-k", "5s", f"{seconds}s", "bash", "-lc", command],
                 envs=dict({"CI": "true"}, **(envs or {})))


def file_mappings(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6
                and line.split(None, 5)[5].startswith("/")}


@pytest.mark.parametrize("kind", ["busybox", "musl"])
def test_envd_starts_and_maps_only_its_own_runtime(image, kind):
    d = image(kind)
    out, _, end = uniform(d.client, "echo hello")
    assert out == "hello\n" and end.get("exitCode", 0) == 0, (out, end)
    maps = file_mappings(d.daemon_pid())
    assert maps, "the daemon maps no file at all"
    assert all(m.startswith(LIB + "/") for m in maps), f"the daemon maps files of the image: {sorted(maps)}"
    assert f"{LIB}/hangar-envd" in maps


def test_commands_run_with_the_images_own_libc(image):
    d = image("musl")
    out, _, end = uniform(d.client, "maps")
    assert end.get("exitCode", 0) == 0, end
    assert "/lib/ld-musl-x86_64.so.1" in out, out
    assert LIB not in out, f"a command maps hangar-envd's runtime:\n{out}"


def test_busybox_commands_map_nothing_of_envd(image):
    d = image("busybox")
    out, _, _ = uniform(d.client, "cat /proc/self/maps")
    files = {line.split(None, 5)[5] for line in out.splitlines() if len(line.split(None, 5)) == 6}
    assert "/bin/busybox" in files, out
    assert not any(f.startswith(LIB) for f in files), out
    assert not any(".so" in f for f in files), f"a static root maps a library: {files}"


def test_no_loader_variable_reaches_a_command_and_the_callers_are_kept(image):
    d = image("musl")
    out, _, _ = uniform(d.client, "maps", envs={"LD_LIBRARY_PATH": "/custom", "FOO": "bar"})
    env = [line[4:] for line in out.splitlines() if line.startswith("ENV ")]
    assert "LD_LIBRARY_PATH=/custom" in env and "FOO=bar" in env, env
    assert [e for e in env if e.startswith("LD_")] == ["LD_LIBRARY_PATH=/custom"], env
    out, _, _ = uniform(d.client, "env")
    assert not [line for line in out.splitlines() if line.startswith("LD_")], out


def test_bash_becomes_sh_and_timeout_is_envds(image):
    d = image("busybox")
    assert not os.path.lexists(os.path.join(d.root, "bin/bash"))
    assert not os.path.lexists(os.path.join(d.root, "bin/timeout"))
    out, err, end = uniform(d.client, 'echo "$0"; echo ok; exit 3')
    assert out == "sh\nok\n", (out, err)
    assert end["exitCode"] == 3 and end["exited"], end


def test_a_program_that_exists_is_run_as_asked(image):
    def with_bash(root):
        path = os.path.join(root, "bin/bash")
        with open(path, "w") as f:
            f.write('#!/bin/sh\necho "this is bash"\nexec sh "$@"\n')
        os.chmod(path, 0o755)

    d = image("busybox", with_bash)
    out, _, _ = uniform(d.client, 'echo "$0"')
    assert out == "this is bash\nsh\n", out


def with_timeout(root):
    """A timeout of the image's own that says so, then runs its command as coreutils' would."""
    path = os.path.join(root, "bin/timeout")
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "the image\'s timeout" >&2\nwhile [ "${1#-}" != "$1" ]; do shift; done\n'
                'shift\nexec "$@"\n')
    os.chmod(path, 0o755)


def test_envd_is_the_timeout_even_where_the_root_has_one(image):
    # One program fewer per command: the image's timeout is not started for options envd takes.
    d = image("busybox", with_timeout)
    out, err, end = uniform(d.client, 'echo ok; exit 3')
    assert out == "ok\n" and "the image's timeout" not in err, (out, err)
    assert end["exitCode"] == 3 and end["exited"], end
    out, err, end = start(d.client, "timeout", ["-s", "KILL", "5s", "sh", "-c", "echo $0"])
    assert out == "sh\n" and "the image's timeout" not in err, (out, err)


def test_options_only_coreutils_knows_go_to_the_roots_timeout(image):
    d = image("busybox", with_timeout)
    out, err, end = start(d.client, "timeout", ["--foreground", "5s", "sh", "-c", "echo ran; exit 4"])
    assert out == "ran\n" and "the image's timeout" in err, (out, err)
    assert end["exitCode"] == 4, end


def test_timeout_term_gives_124_in_time(image):
    d = image("busybox")
    t0 = time.monotonic()
    out, err, end = uniform(d.client, "echo started; sleep 30; echo not reached", seconds=1)
    took = time.monotonic() - t0
    assert out == "started\n", (out, err)
    assert end["exitCode"] == 124 and end["exited"], end
    assert 1 <= took < 5, took


def reference_timeout(cmd_args):
    """What coreutils' timeout, run on the host, ends with, as hangar-envd reports an end."""
    r = subprocess.run(["timeout"] + cmd_args, capture_output=True)
    return r.returncode


def test_timeout_kill_after_grace_matches_coreutils(image):
    d = image("busybox")
    script = 'trap "" TERM; sleep 30'
    t0 = time.monotonic()
    _, _, end = start(d.client, "timeout", ["-k", "1s", "1s", "sh", "-c", script])
    took = time.monotonic() - t0
    # coreutils' timeout kills its whole group, itself too: a SIGKILL death (137 to a shell).
    assert reference_timeout(["-k", "1s", "1s", "sh", "-c", script]) == -9
    assert end.get("exited") is not True and end["status"] == "signal: killed", end
    assert 2 <= took < 6, took


def test_timeout_passes_a_commands_own_end(image):
    d = image("busybox")
    _, _, end = start(d.client, "timeout", ["10s", "sh", "-c", "exit 7"])
    assert end["exitCode"] == 7, end
    _, _, end = start(d.client, "timeout", ["10s", "sh", "-c", "kill -USR1 $$"])
    assert reference_timeout(["10s", "sh", "-c", "kill -USR1 $$"]) == -10
    assert end["status"] == "signal: user defined signal 1", end


@pytest.mark.parametrize("args,needle", [
    (["--foreground", "1s", "true"], "--foreground"),
    (["-k", "soon", "1s", "true"], "kill-after"),
    (["-s", "NOPE", "1s", "true"], "signal"),
    (["1s"], "missing operand"),
    (["forever", "true"], "invalid duration"),
])
def test_timeout_arguments_it_cannot_honour_fail_as_127(image, args, needle):
    d = image("busybox")
    out, err, end = start(d.client, "timeout", args)
    assert end["exitCode"] == 127, end
    assert needle in err and out == "", (out, err)


def test_sigterm_to_the_stand_in_reaches_the_group_and_arms_the_kill(image):
    d = image("busybox")
    call = d.client.open_stream("/process.Process/Start", {"process": {
        "cmd": "timeout", "args": ["-k", "1s", "60s", "sh", "-c", 'trap "" TERM; echo ready; sleep 60']}})
    with call:
        first = call.next()
        pid = first[1]["event"]["start"]["pid"]
        ready = call.next()[1]["event"]["data"]
        assert base64.b64decode(ready["stdout"]) == b"ready\n", ready
        t0 = time.monotonic()
        r = d.client.unary("/process.Process/SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGTERM"})
        assert r.status == 200, r
        ends = [b for k, b in events(list(call.envelopes())) if k == "end"]
    assert ends and ends[0]["status"] == "signal: killed", ends
    assert time.monotonic() - t0 < 5


def pty_session(client, keys, user="user", timeout=20):
    call = client.open_stream("/process.Process/Start", {
        "process": {"cmd": "/bin/bash", "args": ["-i", "-l"], "envs": {"TERM": "xterm"}},
        "pty": {"size": {"cols": 80, "rows": 24}}},
        headers={"Authorization": "Basic " + base64.b64encode((user + ":").encode()).decode()})
    out = b""
    with call:
        pid = call.next()[1]["event"]["start"]["pid"]
        r = client.unary("/process.Process/SendInput", {"process": {"pid": pid},
                                                         "input": {"pty": base64.b64encode(keys).decode()}})
        assert r.status == 200, r
        for kind, body in events(list(call.envelopes())):
            if kind == "data" and "pty" in body:
                out += base64.b64decode(body["pty"])
    return out.decode(errors="replace")


def test_a_terminal_without_bash_gets_the_users_shell(image):
    d = image("busybox")  # user's login shell: /bin/ash
    out = pty_session(d.client, b'echo "shell=$0"; exit\n')
    assert "shell=ash" in out, out


def test_a_terminal_without_bash_or_a_fit_shell_gets_sh(image):
    d = image("busybox")  # root's login shell, /bin/bash, is not there
    out = pty_session(d.client, b'echo "shell=$0"; exit\n', user="root")
    assert "shell=sh" in out, out


def files_url(path, user="user"):
    return "/files?" + urllib.parse.urlencode({"path": path, "username": user})


def test_files_move_both_ways_as_the_user(image):
    d = image("musl")
    data = os.urandom(200_000)
    r = d.client.request("POST", files_url("/workspace/blob"), body=data,
                         headers={"Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    st = os.stat(os.path.join(d.root, "workspace/blob"))
    assert st.st_uid == 1000 and st.st_size == len(data)
    r = d.client.request("GET", files_url("/workspace/blob"))
    assert r.status == 200 and r.body == data


def archive_url(path, **params):
    return "/hangar/v1/archive?" + urllib.parse.urlencode({"path": path, **params})


@pytest.mark.parametrize("kind", ["busybox", "musl"])
def test_checkpoint_capture_and_restore_through_the_worker(image, kind):
    d = image(kind)
    out, err, end = uniform(d.client, "mkdir -p /workspace/src && echo alpha > /workspace/src/a.txt && "
                                      "printf 'b\\n' > '/workspace/caf\xe9.txt'")
    assert end.get("exitCode", 0) == 0, (out, err, end)
    r = d.client.request("GET", archive_url("/workspace"), timeout=60)
    assert r.status == 200, r
    body = r.body
    out, _, _ = uniform(d.client, "rm -rf /workspace/src /workspace/*.txt; echo x > /workspace/stale")
    r = d.client.request("PUT", archive_url("/workspace", mode="replace"), body=body,
                         headers={"Content-Type": "application/zstd"}, timeout=60)
    assert r.status == 200, r
    ws = os.path.join(d.root, "workspace")
    assert open(os.path.join(ws, "src/a.txt")).read() == "alpha\n"
    assert open(os.path.join(ws, "caf\xe9.txt")).read() == "b\n"
    assert not os.path.exists(os.path.join(ws, "stale"))
    assert os.stat(os.path.join(ws, "src/a.txt")).st_uid == 1000


EVIL_C = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void loaded(void)
{
	int fd = open("/evil-" WHAT, O_WRONLY | O_CREAT, 0644);

	if (fd >= 0)
		close(fd);
}
"""


def plant(root, what, paths):
    """A library that leaves /evil-WHAT in the root when anything loads it, at each of paths."""
    src = os.path.join(root, "evil.c")
    with open(src, "w") as f:
        f.write(EVIL_C)
    first = None
    for p in paths:
        dest = os.path.join(root, p.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if first is None:
            subprocess.run(["gcc", "-shared", "-fPIC", f'-DWHAT="{what}"', "-o", dest, src], check=True)
            first = dest
        else:
            subprocess.run(["cp", first, dest], check=True)
    os.unlink(src)


def hostile(root):
    libs = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib", "/lib64"]
    plant(root, "nss", [d + "/libnss_evil.so.2" for d in libs])
    with open(os.path.join(root, "etc/nsswitch.conf"), "w") as f:
        for db in ("passwd", "group", "shadow", "hosts", "initgroups", "services"):
            f.write(f"{db}: evil files\n")
    plant(root, "preload", ["/lib/evil-preload.so"])
    with open(os.path.join(root, "etc/ld.so.preload"), "w") as f:
        f.write("/lib/evil-preload.so\n")


def test_a_hostile_image_loads_nothing_into_envd(image):
    d = image("busybox", hostile)
    out, err, end = uniform(d.client, "id -un; echo hi > /workspace/f")
    assert out == "user\n", (out, err, end)
    r = d.client.request("GET", archive_url("/workspace"), timeout=60)
    assert r.status == 200, r
    r = d.client.request("GET", files_url("/workspace/f"))
    assert r.status == 200 and r.body == b"hi\n"
    maps = file_mappings(d.daemon_pid())
    assert all(m.startswith(LIB + "/") for m in maps), sorted(maps)
    for what in ("nss", "preload"):
        assert not os.path.exists(os.path.join(d.root, f"evil-{what}")), f"the image's {what} library was loaded"


def test_the_hostile_image_would_load_its_nss_module_into_a_plain_glibc_program(image, tmp_path):
    """The attack is real: the same root makes the host's getent load the module, so the test above can fail."""
    if os.geteuid() != 0:
        pytest.skip("runs bubblewrap as root")
    root = str(tmp_path / "plain")
    from conftest import cached_root
    import shutil
    shutil.copytree(cached_root("busybox"), root, symlinks=True)
    hostile(root)
    os.unlink(os.path.join(root, "etc/ld.so.preload"))
    loader = "/lib64/ld-linux-x86-64.so.2"
    getent = "/usr/bin/getent"
    subprocess.run(["bwrap", "--bind", root, "/", "--proc", "/proc", "--dev", "/dev",
                    "--ro-bind", loader, "/run/l/ld.so", "--ro-bind", "/lib/x86_64-linux-gnu/libc.so.6",
                    "/run/l/libc.so.6", "--ro-bind", getent, "/run/l/getent",
                    "/run/l/ld.so", "--library-path", "/run/l", "--inhibit-cache", "/run/l/getent", "passwd", "user"],
                   capture_output=True, timeout=30)
    assert os.path.exists(os.path.join(root, "evil-nss"))
