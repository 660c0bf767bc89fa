#!/usr/bin/env python3
"""One HTTP layer: libcurl is used by libhangar/net/ and nowhere else.

  includes  no source outside libhangar/net/ includes a curl header
            (libhangar, programs, include, bindings, bench, examples;
            tests may drive servers with curl as an outside client), but
            the files of TLS_TRANSPORT, each for its reason
  symbols   in the library's objects, only net/net.c's refer to curl_*

Each check returns a list of problems; an empty list is a pass.
test-check-http-layer.py shows each failing on the fault it guards against.
"""
import argparse
import os
import re
import subprocess
import sys

SCANNED = ('libhangar', 'programs', 'include', 'bindings', 'bench', 'examples')
ALLOWED_DIR = os.path.join('libhangar', 'net')
SUFFIXES = ('.c', '.h', '.cc', '.cpp', '.i', '.in')
# Files that use libcurl as a TLS byte pipe (CURLOPT_CONNECT_ONLY, then
# curl_easy_send/recv) and make no HTTP request through it: not a second
# HTTP layer. Each names why it cannot go through libhangar/net.
TLS_TRANSPORT = {
    os.path.join('programs', 'hangard', 'e2b-edge-tls.c'):
        "hangard's sandbox edge relays a client's bytes to an https envd as they come",
}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]curl/', re.M)
NET_OBJECT = 'net_net.c.o'  # meson's name for libhangar/net/net.c's object


def check_includes(root):
    problems = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ('node_modules', '.git')]
            rel_dir = os.path.relpath(dirpath, root)
            if rel_dir == ALLOWED_DIR or rel_dir.startswith(ALLOWED_DIR + os.sep):
                continue
            for name in filenames:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                if os.path.relpath(path, root) in TLS_TRANSPORT:
                    continue
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for m in INCLUDE_RE.finditer(text):
                    line = text.count('\n', 0, m.start()) + 1
                    problems.append('%s:%d includes a curl header: only %s/ may (use net.h)'
                                    % (os.path.relpath(path, root), line, ALLOWED_DIR))
    return problems


def curl_users(nm_output):
    """{object: [curl symbols it needs]} from `nm -A -u ARCHIVE`."""
    users = {}
    for line in nm_output.splitlines():
        # "archive.a:object.o:                 U curl_easy_init"
        head, _, rest = line.rpartition(':')
        parts = rest.split()
        if len(parts) < 2 or parts[-2] != 'U' or not parts[-1].startswith('curl_'):
            continue
        obj = head.rsplit(':', 1)[-1]
        users.setdefault(obj, []).append(parts[-1])
    return users


def check_symbols(nm_output):
    problems = []
    for obj, syms in sorted(curl_users(nm_output).items()):
        if os.path.basename(obj) != NET_OBJECT:
            problems.append('%s calls libcurl (%s): only net/net.c may' % (obj, ', '.join(sorted(syms)[:3])))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--archive', required=True, help='the static archive of the library (libhangar_internal.a)')
    args = ap.parse_args()
    nm = subprocess.run(['nm', '-A', '-u', args.archive], check=True, capture_output=True, text=True).stdout
    if not curl_users(nm):
        print('no object of %s calls libcurl: the symbol check would prove nothing' % args.archive)
        return 1
    problems = check_includes(args.source_root) + check_symbols(nm)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
