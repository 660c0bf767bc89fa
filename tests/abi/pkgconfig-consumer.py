#!/usr/bin/env python3
"""Installs the build into a scratch DESTDIR with the project's own install
rules, then builds and runs consumer.c against it with pkg-config alone.
Fails when a public header is not installed, when libhangar.pc is wrong,
or when a function the headers declare is not exported."""
import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    print('+ ' + ' '.join(shlex.quote(c) for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--meson', required=True)
    ap.add_argument('--build-root', required=True)
    ap.add_argument('--source-include', required=True)
    ap.add_argument('--prefix', required=True)
    ap.add_argument('--libdir', required=True)
    ap.add_argument('--includedir', required=True)
    ap.add_argument('--cc', required=True)
    ap.add_argument('--sanitize', default='none')
    ap.add_argument('--source', required=True, help='consumer.c')
    ap.add_argument('--expect-version', required=True)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix='hangar-consumer-') as tmp:
        destdir = os.path.join(tmp, 'dest')
        run([args.meson, 'install', '-C', args.build_root, '--destdir', destdir,
             '--no-rebuild', '--quiet'], stdout=subprocess.DEVNULL)

        def staged(path):
            return os.path.join(destdir, os.path.join(args.prefix, path).lstrip('/'))
        prefix, libdir, incdir = staged(''), staged(args.libdir), staged(args.includedir)

        # Every public header of the source tree (and the generated version.h) is installed.
        missing = []
        base = os.path.join(args.source_include, 'hangar')
        for root, _dirs, files in os.walk(base):
            for f in files:
                rel = os.path.relpath(os.path.join(root, f), base)
                if rel.endswith('.h.in'):
                    rel = rel[:-3]
                if rel.endswith('.h') and not os.path.isfile(os.path.join(incdir, 'hangar', rel)):
                    missing.append(rel)
        if missing:
            print('FAIL: public headers not installed: ' + ', '.join(sorted(missing)))
            return 1

        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, 'pkgconfig'))
        env.pop('PKG_CONFIG_LIBDIR', None)
        pc = run(['pkg-config', '--define-variable=prefix=' + prefix.rstrip('/'),
                  '--cflags', '--libs', 'libhangar'],
                 env=env, capture_output=True, text=True).stdout.split()
        print('pkg-config: ' + ' '.join(pc))
        if not any(f.startswith('-I' + destdir) for f in pc) or not any(f.startswith('-L' + destdir) for f in pc):
            print('FAIL: libhangar.pc does not point into the installed prefix')
            return 1

        work = os.path.join(tmp, 'consumer')
        os.mkdir(work)
        src = shutil.copy(args.source, work)
        exe = os.path.join(work, 'consumer')
        extra = [] if args.sanitize in ('', 'none') else ['-fsanitize=' + args.sanitize]
        run(shlex.split(args.cc) + ['-std=c11', '-Wall', '-Wextra', '-Werror', *extra,
                                    src, '-o', exe, *pc])
        out = run([exe], env=dict(os.environ, LD_LIBRARY_PATH=libdir),
                  capture_output=True, text=True)
        got = out.stdout.strip()
        if got != args.expect_version:
            print(f'FAIL: consumer printed {got!r}, expected {args.expect_version!r}')
            return 1
        print(f'ok: a pkg-config consumer of the installed libhangar runs ({got})')
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as e:
        if e.stdout:
            print(e.stdout)
        if e.stderr:
            print(e.stderr)
        print(f'FAIL: {e}')
        sys.exit(1)
