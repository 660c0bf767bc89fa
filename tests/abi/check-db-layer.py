#!/usr/bin/env python3
"""One query layer: SQLite and libpq are used by the store's engines only.

  includes  no source but libhangar/store/db-sqlite.c includes sqlite3.h,
            none but libhangar/store/db-postgres.c includes libpq-fe.h
            (and store/pq-dl.c, which loads libpq and calls it for no one
            but db-postgres.c: see LOADERS)
            (libhangar, programs, include, bindings, bench, examples;
            tests may read a database as an outside witness)
  symbols   in the library's objects, only those two refer to sqlite3_* / PQ*

So every SQL call site goes through store/db.h and runs on both engines.
Each check returns a list of problems; an empty list is a pass.
test-check-db-layer.py shows each failing on the fault it guards against.
"""
import argparse
import os
import re
import subprocess
import sys

SCANNED = ('libhangar', 'programs', 'include', 'bindings', 'bench', 'examples')
SUFFIXES = ('.c', '.h', '.cc', '.cpp', '.i', '.in')
ENGINES = (
    # (header pattern, symbol prefix, the one source allowed, its meson object name)
    (re.compile(r'^\s*#\s*include\s*[<"]sqlite3\.h[>"]', re.M), 'sqlite3_',
     os.path.join('libhangar', 'store', 'db-sqlite.c'), 'store_db-sqlite.c.o'),
    (re.compile(r'^\s*#\s*include\s*[<"](?:postgresql/)?libpq-fe\.h[>"]', re.M), 'PQ',
     os.path.join('libhangar', 'store', 'db-postgres.c'), 'store_db-postgres.c.o'),
)
# A loader defines the library's functions under their names and forwards
# them (util/dl.h): it includes the header, and calls nothing by name.
LOADERS = {
    'PQ': os.path.join('libhangar', 'store', 'pq-dl.c'),
}


def check_includes(root):
    problems = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ('node_modules', '.git')]
            for name in filenames:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = f.read()
                for pattern, prefix, allowed, _ in ENGINES:
                    if rel in (allowed, LOADERS.get(prefix)):
                        continue
                    for m in pattern.finditer(text):
                        line = text.count('\n', 0, m.start()) + 1
                        problems.append('%s:%d includes %s: only %s may (use store/db.h)'
                                        % (rel, line, m.group(0).strip(), allowed))
    return problems


def users(nm_output, prefix):
    """{object: [symbols with prefix it needs]} from `nm -A -u ARCHIVE`."""
    found = {}
    for line in nm_output.splitlines():
        head, _, rest = line.rpartition(':')
        parts = rest.split()
        if len(parts) < 2 or parts[-2] != 'U' or not parts[-1].startswith(prefix):
            continue
        obj = head.rsplit(':', 1)[-1]
        found.setdefault(obj, []).append(parts[-1])
    return found


def check_symbols(nm_output):
    problems = []
    for _, prefix, allowed, obj_name in ENGINES:
        for obj, syms in sorted(users(nm_output, prefix).items()):
            if os.path.basename(obj) != obj_name:
                problems.append('%s calls %s* (%s): only %s may' % (obj, prefix, ', '.join(sorted(syms)[:3]), allowed))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--archive', required=True, help='the static archive of the library (libhangar_internal.a)')
    args = ap.parse_args()
    nm = subprocess.run(['nm', '-A', '-u', args.archive], check=True, capture_output=True, text=True).stdout
    for _, prefix, _, obj_name in ENGINES:
        if obj_name not in {os.path.basename(o) for o in users(nm, prefix)}:
            print('%s calls no %s*: the symbol check would prove nothing' % (obj_name, prefix))
            return 1
    problems = check_includes(args.source_root) + check_symbols(nm)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
