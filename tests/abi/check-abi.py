#!/usr/bin/env python3
"""The ABI of libhangar, checked from four sides that must agree.

  exports   the dynamic symbols the built shared library defines
  symfile   the global names of the version script libhangar.sym
  headers   the functions the public headers declare with HANGAR_EXTERN
  man       a man/<name>.3 page per function, each installed by man/meson.build

Also: libhangar.sym is well formed (nodes HANGAR_<major>.<minor>, the first
HANGAR_0.2, names sorted, "local: *;"), each export carries the version node
that lists it, the soname is libhangar.so.1, and nothing but hangar_* leaks.

Every check returns a list of problems; an empty list is a pass. The checks
are plain functions so test-check-abi.py can show each of them failing.
"""
import argparse
import os
import re
import subprocess
import sys

SONAME = 'libhangar.so.1'
FIRST_NODE = 'HANGAR_0.2'
NODE_RE = re.compile(r'^HANGAR_\d+\.\d+$')


# ---- reading the four sides ------------------------------------------------

def read_exports(lib):
    """{name: version node} of the defined dynamic symbols, plus the version
    definitions themselves (nm lists them as absolute symbols)."""
    out = subprocess.run(['nm', '-D', '--defined-only', lib], check=True,
                         capture_output=True, text=True).stdout
    exports, version_defs = {}, set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, sym = parts[1], parts[2]
        name, _, version = sym.partition('@')
        version = version.lstrip('@')
        if kind == 'A' and not version:
            version_defs.add(name)
            continue
        exports[name] = version
    return exports, version_defs


def read_soname(lib):
    out = subprocess.run(['readelf', '-d', lib], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r'\(SONAME\)\s+Library soname: \[([^\]]+)\]', out)
    return m.group(1) if m else None


def parse_symfile(text):
    """[(node, [names], has_local_star)] in file order, or raises ValueError."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'#[^\n]*', ' ', text)
    nodes = []
    for m in re.finditer(r'([A-Za-z0-9_.]+)\s*\{(.*?)\}\s*([A-Za-z0-9_.]*)\s*;', text, flags=re.S):
        node, body = m.group(1), m.group(2)
        names, local_star, section = [], False, None
        for tok in re.split(r'\s*;\s*', body):
            tok = tok.strip()
            if not tok:
                continue
            for label in ('global:', 'local:'):
                if tok.startswith(label):
                    section = label[:-1]
                    tok = tok[len(label):].strip()
            if not tok:
                continue
            if section == 'local':
                local_star = local_star or tok == '*'
            else:
                names.append(tok)
        nodes.append((node, names, local_star))
    if not nodes:
        raise ValueError('no version node found')
    return nodes


def strip_c(text):
    """Source text without comments and preprocessor definitions."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    text = re.sub(r'\\\n', ' ', text)
    return '\n'.join(l for l in text.splitlines() if not l.lstrip().startswith('#'))


DECL_RE = re.compile(r'HANGAR_EXTERN\s*\(([^()]*)\)\s*(\w+)\s*\(')


def read_header_decls(paths):
    """{name: header} of the HANGAR_EXTERN functions, and the problems met."""
    decls, problems = {}, []
    for path in paths:
        with open(path) as f:
            code = strip_c(f.read())
        uses = len(re.findall(r'\bHANGAR_EXTERN\b', code))
        found = DECL_RE.findall(code)
        if uses != len(found):
            problems.append(f'{path}: {uses} uses of HANGAR_EXTERN but {len(found)} '
                            'parsed as function declarations')
        for _type, name in found:
            if name in decls:
                problems.append(f'{name}: declared in both {decls[name]} and {path}')
            decls[name] = path
    return decls, problems


def public_headers(src_include, build_include):
    paths = []
    for base in (src_include, build_include):
        for root, _dirs, files in os.walk(os.path.join(base, 'hangar')):
            paths += [os.path.join(root, f) for f in sorted(files) if f.endswith('.h')]
    return paths


# ---- the checks ------------------------------------------------------------

def diff(label_a, a, label_b, b):
    out = []
    for n in sorted(set(a) - set(b)):
        out.append(f'{n}: in {label_a}, not in {label_b}')
    for n in sorted(set(b) - set(a)):
        out.append(f'{n}: in {label_b}, not in {label_a}')
    return out


def check_three_way(exports, sym_names, header_names):
    """(a) exports == version script == HANGAR_EXTERN declarations."""
    return (diff('the library exports', exports, 'libhangar.sym', sym_names)
            + diff('libhangar.sym', sym_names, 'the HANGAR_EXTERN declarations', header_names))


def check_symfile(nodes):
    """(b) node names, sorting, duplicates, local: *."""
    problems = []
    if nodes[0][0] != FIRST_NODE:
        problems.append(f'the first version node is {nodes[0][0]}, not {FIRST_NODE}')
    seen = {}
    for node, names, _local in nodes:
        if not NODE_RE.match(node):
            problems.append(f'version node {node} is not named HANGAR_<major>.<minor>')
        if names != sorted(names):
            for before, after in zip(names, names[1:]):
                if before > after:
                    problems.append(f'{node}: {after} comes after {before}; names must be sorted')
        for n in names:
            if n in seen:
                problems.append(f'{n}: listed in both {seen[n]} and {node}')
            seen[n] = node
            if not re.match(r'^\w+$', n):
                problems.append(f'{node}: "{n}" is a pattern, not a name')
    if not nodes[-1][2]:
        problems.append(f'the last version node ({nodes[-1][0]}) lacks "local: *;", '
                        'so internal symbols would leak')
    return problems


def check_versions(exports, nodes):
    """Each export carries the version node that lists it."""
    where = {n: node for node, names, _l in nodes for n in names}
    return [f'{n}: exported as version "{v or "(none)"}", listed in {where[n]}'
            for n, v in sorted(exports.items()) if n in where and v != where[n]]


def check_man(names, man_dir):
    """(c) every function has man/<name>.3, installed by man/meson.build."""
    problems = []
    try:
        with open(os.path.join(man_dir, 'meson.build')) as f:
            installed = set(re.findall(r"'([^'/]+\.\d)'", f.read()))
    except OSError as e:
        return [f'cannot read man/meson.build: {e}']
    for n in sorted(names):
        page = os.path.join(man_dir, n + '.3')
        if not os.path.isfile(page):
            problems.append(f'{n}: no man page man/{n}.3')
            continue
        if n + '.3' not in installed:
            problems.append(f'{n}: man/{n}.3 is not installed by man/meson.build')
        with open(page) as f:
            first = f.readline().strip()
        m = re.match(r'^\.so\s+(\S+)$', first)
        if m and not os.path.isfile(os.path.join(man_dir, os.path.basename(m.group(1)))):
            problems.append(f'{n}: man/{n}.3 points at {m.group(1)}, which does not exist')
    return problems


def check_soname(soname):
    """(d)"""
    return [] if soname == SONAME else [f'soname is {soname!r}, not {SONAME!r}']


def check_foreign(exports, version_defs):
    """(e) nothing but hangar_* functions (and the HANGAR_* version nodes)."""
    problems = [f'{n}: exported but not a hangar_ symbol' for n in sorted(exports)
                if not n.startswith('hangar_')]
    problems += [f'{v}: version definition not named HANGAR_<major>.<minor>'
                 for v in sorted(version_defs) if not NODE_RE.match(v)]
    return problems


# ---- main ------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--lib', required=True, help='the built libhangar.so')
    ap.add_argument('--sym', required=True, help='libhangar/libhangar.sym')
    ap.add_argument('--include', required=True, help='include/ of the source tree')
    ap.add_argument('--build-include', required=True, help='include/ of the build tree')
    ap.add_argument('--man', required=True, help='man/ of the source tree')
    args = ap.parse_args()

    exports, version_defs = read_exports(args.lib)
    with open(args.sym) as f:
        try:
            nodes = parse_symfile(f.read())
        except ValueError as e:
            print(f'FAIL libhangar.sym: {e}')
            return 1
    sym_names = [n for _node, names, _l in nodes for n in names]
    headers, header_problems = read_header_decls(public_headers(args.include, args.build_include))

    checks = [
        ('exports == libhangar.sym == HANGAR_EXTERN declarations',
         header_problems + check_three_way(exports, sym_names, headers)),
        ('libhangar.sym is well formed', check_symfile(nodes)),
        ('exports carry their version node', check_versions(exports, nodes)),
        ('every function has an installed man page',
         check_man(set(exports) | set(sym_names) | set(headers), args.man)),
        ('soname', check_soname(read_soname(args.lib))),
        ('only hangar_ symbols exported', check_foreign(exports, version_defs)),
    ]
    failed = 0
    for title, problems in checks:
        print(f'{"ok  " if not problems else "FAIL"} {title}')
        for p in problems:
            print(f'       {p}')
        failed += bool(problems)
    print(f'{len(exports)} exports, {len(sym_names)} in libhangar.sym, '
          f'{len(headers)} HANGAR_EXTERN declarations')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
