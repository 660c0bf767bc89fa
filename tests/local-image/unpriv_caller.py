#!/usr/bin/env python3
"""The unprivileged caller of test_unprivileged.py: run as the test user
`user`, with its own state, image store and home (the environment), it does
one thing and prints what it saw as JSON on its last line.

  unpriv_caller.py import PATH NAME      imports PATH (an OCI layout) as NAME: digest, progress seen
  unpriv_caller.py probe NAME            two sandboxes of NAME and what they show
  unpriv_caller.py refused PATH NAME     the import of a hostile PATH: its error
  unpriv_caller.py cancel PATH NAME      an import its progress callback cancels: its error
  unpriv_caller.py create NAME           a sandbox of NAME: what it says, or the error
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


def main():
    what = sys.argv[1]
    if what == "import":
        seen = []
        digest = ctx().import_image(sys.argv[2], name=sys.argv[3], progress=lambda p: seen.append([p.layers_done, p.bytes_done]))
        result = [digest, seen]
    elif what == "probe":
        result = probe(sys.argv[2])
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
