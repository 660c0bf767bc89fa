#!/usr/bin/env python3
"""The built-in providers need nothing a provider written outside the tree
lacks: each one's sources compile in a tree that holds only them, the
public headers and the helper layers providers may use (util, net and
image, as libhangar-internals(7) says). A file that reaches for core/internal.h or
any other part of the library does not compile there.

Usage: check-provider-sources.py --source-root DIR --build-include DIR --cc CC
"""
import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

HELPERS = ('util', 'net', 'image')
DEFINES = ['-DHANGAR_ENVD_INSTALL_PATH="/x"', '-DHANGAR_JAIL_INSTALL_PATH="/x"']


def copy_headers(src_dir, dst_dir):
    os.makedirs(dst_dir, exist_ok=True)
    for h in glob.glob(os.path.join(src_dir, '*.h')):
        shutil.copy(h, dst_dir)


def check(root, build_include, cc):
    problems = []
    providers = sorted(d for d in glob.glob(os.path.join(root, 'libhangar', 'providers', '*')) if os.path.isdir(d))
    if not providers:
        return ['no provider directories under libhangar/providers']
    for pdir in providers:
        name = os.path.basename(pdir)
        with tempfile.TemporaryDirectory() as tmp:
            for helper in HELPERS:
                copy_headers(os.path.join(root, 'libhangar', helper), os.path.join(tmp, helper))
            own = os.path.join(tmp, 'providers', name)
            shutil.copytree(pdir, own)
            flags = ['-std=gnu11', '-fsyntax-only', '-Werror=implicit-function-declaration',
                     '-Werror=implicit-int', '-I', tmp, '-I', os.path.join(root, 'include'), '-I', os.path.join(root, 'include', 'hangar'),
                     '-I', build_include, '-I', os.path.join(build_include, 'hangar')] + DEFINES
            sources = sorted(glob.glob(os.path.join(own, '*.c')))
            if not sources:
                problems.append('provider %s has no sources' % name)
            for c in sources:
                r = subprocess.run(shlex.split(cc) + flags + [c], capture_output=True, text=True)
                if r.returncode != 0:
                    first = (r.stderr.strip().splitlines() or ['?'])[0].replace(tmp + os.sep, '')
                    problems.append('provider %s: %s does not compile with the public API alone: %s'
                                    % (name, os.path.basename(c), first))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--build-include', required=True, help="the build tree's include/ (version.h)")
    ap.add_argument('--cc', required=True)
    args = ap.parse_args()
    problems = check(args.source_root, args.build_include, args.cc)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
