#!/usr/bin/env python3
"""The unprivileged caller of test_unprivileged.py: run as the test user
`user`, with its own state, image store and home (the environment), it does
one thing and prints what it saw as JSON on its last line.

  unpriv_caller.py import PATH NAME      imports PATH (an OCI layout) as NAME: digest, progress seen
  unpriv_caller.py probe NAME            two sandboxes of NAME and what they show
  unpriv_caller.py refused PATH NAME     the import of a hostile PATH: its error
  unpriv_caller.py cancel PATH NAME      an import its progress callback cancels: its error
  unpriv_caller.py create NAME           a sandbox of NAME: what it says, or the error
  unpriv_caller.py everything NAME       commands, files, a terminal, a checkpoint and a session in NAME
  unpriv_caller.py rm NAME               removes the image and collects garbage
"""
import json
import sys

import hangar

ENVD_PROBE = r"""P=$(pgrep -x hangar-envd); test -n "$P" || echo no-envd; python3 -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
p = int(sys.argv[1])
def opens(name):
    try:
        os.close(os.open('/proc/%d/%s' % (p, name), os.O_RDONLY)); return 0
    except OSError as e:
        return e.errno
def call(r):
    return 0 if r >= 0 else ctypes.get_errno()
uid = [l.split()[1] for l in open('/proc/%d/status' % p) if l.startswith('Uid:')][0]
print('environ:%d mem:%d kill:%d uid:%s' % (opens('environ'), opens('mem'), call(libc.kill(p, 0)),
      'same' if int(uid) == os.getuid() else 'other'))
" $P"""


def ctx():
    return hangar.Context({"HANGAR_DEFAULT_PROVIDER": "local", "HANGAR_LOCAL_NETWORK": "off"})


def sh(sb, cmd, user="user"):
    r = sb.exec(cmd, user=user, timeout=120)
    return [r.exit_code, r.stdout.text, r.stderr.text]


def probe(name):
    c = ctx()
    out = {}
    with hangar.Sandbox.create(c, provider="local", template=name, timeout=300) as a, \
            hangar.Sandbox.create(c, provider="local", template=name, timeout=300) as b:
        out["os_release"] = sh(a, "cat /etc/os-release")
        out["default"] = sh(a, "echo $FROM_IMAGE; pwd; id -un; id -u", user=None)
        out["owners"] = sh(a, "stat -c '%u %g %U' /usr/bin/dpkg /etc/passwd /srv/users-file")
        # A package-like install as the sandbox's root: a new program in /usr and a changed one.
        out["install"] = sh(a, "printf '#!/bin/sh\\necho installed\\n' > /usr/bin/hangar-installed && "
                               "chmod 755 /usr/bin/hangar-installed && echo changed >> /usr/bin/zcat && "
                               "mkdir /usr/lib/hangar-pkg && chown user: /usr/lib/hangar-pkg && echo done",
                            user="root")
        out["installed_a"] = sh(a, "hangar-installed; stat -c %U /usr/lib/hangar-pkg; tail -n1 /usr/bin/zcat")
        out["installed_b"] = sh(b, "command -v hangar-installed || echo no-program; "
                                   "test -e /usr/lib/hangar-pkg || echo no-dir; tail -n1 /usr/bin/zcat")
        out["user_cannot"] = sh(a, "echo x > /usr/bin/by-user")
        out["envd_user"] = sh(a, ENVD_PROBE)
        out["envd_root"] = sh(a, ENVD_PROBE, user="root")
        out["same_ids"] = [sh(a, "id -u", user="root"), sh(b, "id -u", user="root")]
    return out


def resumed(info):
    return {hangar.RESUME_HOT: "hot", hangar.RESUME_COLD: "cold"}.get(info.last_resume, str(info.last_resume))


def everything(name):
    """What test_everything_works_in_an_image sees as root, as this caller: each result raw, for the test to judge."""
    c = ctx()
    out = {}
    data = bytes(range(256)) * 64
    with hangar.Sandbox.create(c, provider="local", template=name, timeout=300) as sb:
        out["exit"] = sh(sb, "echo out; echo err >&2; exit 3", user=None)
        r = sb.exec("sleep 30; echo not-killed", timeout=1)
        out["timeout"] = [r.timed_out, r.exit_code, r.stdout.text]
        # One that ignores the timeout's SIGTERM (its sleep too, inherited): SIGKILL follows.
        r = sb.exec("trap '' TERM; sleep 30; echo not-killed", timeout=1)
        out["stubborn"] = [r.timed_out, r.exit_code, r.stdout.text]
        out["missing"] = sh(sb, "no-such-program-here", user=None)[0]
        out["runtime"] = sh(sb, "cat /proc/self/maps; env", user=None)
        sb.write_file("/workspace/data.bin", data)
        out["read_back"] = sb.read_file("/workspace/data.bin") == data
        out["as_seen"] = sh(sb, "wc -c < /workspace/data.bin; stat -c %U /workspace/data.bin", user=None)
        sb.files.make_dir("/workspace/listed/deeper")
        sb.write_file("/workspace/listed/a.txt", "alpha\n")
        out["listed"] = sorted([f.path, f.is_dir, None if f.is_dir else f.bytes] for f in sb.list_files("/workspace/listed"))
        seen = []
        p = hangar.Process.start(sb, None, pty=True, cols=80, rows=24, on_output=lambda s, d: seen.append(d))
        p.write(b"echo pty-$((6*7)); tty; exit\n")
        p.wait(timeout=30)
        out["pty"] = b"".join(seen).decode(errors="replace")
        # A checkpoint of a tree, restored into a second sandbox of the image that lacks it.
        tree = {"/workspace/w/f": b"kept\n", "/workspace/w/sub/bin": data[::-1], "/workspace/w/sub/empty": b""}
        for path, content in tree.items():
            sb.write_file(path, content)
        sid = "unpriv-" + name.split("/")[1][:6]
        cp = hangar.Checkpoint.create(sb, workspace="/workspace/w", session_id=sid)
        with hangar.Sandbox.create(c, provider="local", template=name, timeout=300) as other:
            out["before_restore"] = other.exists("/workspace/w/f")
            cp.restore(other, workspace="/workspace/w")
            out["restored"] = all(other.read_file(path) == content for path, content in tree.items())
            out["restored_names"] = sorted(f.path for f in other.list_files("/workspace/w", depth=2))
        cp.delete()
    # A session: a process left running, parked hot, then suspended and resumed cold.
    s = hangar.Session.create(c, provider="local", template=name, workspace="/workspace", timeout=300)
    try:
        sb = s.sandbox()
        # The process as its pid, start time and command line (another process may have its pid after a cold resume).
        sh(sb, "echo state > /workspace/s; sleep 1000 </dev/null >/dev/null 2>&1 & "
               "echo $! > /workspace/pid; cut -d' ' -f22 /proc/$!/stat > /workspace/start", user=None)
        same = ("p=$(cat /workspace/pid); test \"$(cut -d' ' -f22 /proc/$p/stat)\" = \"$(cat /workspace/start)\" && "
                "tr '\\0' ' ' < /proc/$p/cmdline")
        s.suspend()
        s.resume()
        out["hot"] = [resumed(s.info()), s.sandbox().read_file("/workspace/s").decode(),
                      sh(s.sandbox(), same, user=None)]
        s.suspend(park=False)
        s.resume()
        out["cold"] = [resumed(s.info()), s.sandbox().read_file("/workspace/s").decode(),
                       sh(s.sandbox(), "cat /etc/hostname >/dev/null && echo ok", user=None)]
    finally:
        s.delete()
    return out


def main():
    what = sys.argv[1]
    if what == "import":
        seen = []
        digest = ctx().import_image(sys.argv[2], name=sys.argv[3], progress=lambda p: seen.append([p.layers_done, p.bytes_done]))
        result = [digest, seen]
    elif what == "probe":
        result = probe(sys.argv[2])
    elif what == "everything":
        result = everything(sys.argv[2])
    elif what == "cancel":
        try:
            # Cancels once bytes of the first layer were unpacked: in the child that unpacks it.
            ctx().import_image(sys.argv[2], name=sys.argv[3], progress=lambda p: p.bytes_done > 0)
            result = "imported"
        except hangar.HangarError as e:
            result = [type(e).__name__, str(e)]
    elif what == "refused":
        try:
            ctx().import_image(sys.argv[2], name=sys.argv[3])
            result = "imported"
        except hangar.HangarError as e:
            result = [type(e).__name__, str(e)]
    elif what == "create":
        try:
            with hangar.Sandbox.create(ctx(), provider="local", template=sys.argv[2], timeout=300) as sb:
                result = sh(sb, "echo made")
        except hangar.HangarError as e:
            result = [type(e).__name__, str(e)]
    elif what == "rm":
        c = ctx()
        c.remove_image(sys.argv[2])
        c.gc_images()
        result = "removed"
    else:
        sys.exit(__doc__)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
