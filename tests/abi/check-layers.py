#!/usr/bin/env python3
"""The layer order of libhangar, as libhangar-internals(7) states it, kept.

  order     a file in layer L includes only headers of L itself or of
            layers listed before L; layers on one line of the order are
            peers and include none of each other
  providers the built-in providers (libhangar/providers/NAME/) include only
            public headers, their own files and the helper layers the
            document lets providers use
  private   a header whose opening comment says it is private to
            libhangar/X is included only from X
  style     quoted includes name a file in the same directory, LAYER/FILE.h
            from libhangar/, or hangar/...; never "../"
  root      libhangar/modules.c, the composition root, may include any layer

The order is read from the document, between the lines `.\\" layers:begin`
and `.\\" layers:end` (one layer or one line of peers per line), and the
helper layers providers may use from `.\\" providers-may-use:`.
test-check-layers.py shows each check failing on the fault it guards against.
"""
import argparse
import os
import re
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
PRIVATE_RE = re.compile(r'private to libhangar/(\w+)', re.I)
ROOT_FILE = os.path.join('libhangar', 'modules.c')
GENERATED = ('version.h',)


def read_order(doc_text):
    """({layer: rank}, [layers providers may use]) from the document's text."""
    ranks, helpers, inside, rank = {}, [], False, 0
    for line in doc_text.splitlines():
        s = line.strip()
        if s.startswith('.\\" providers-may-use:'):
            helpers = s.split(':', 1)[1].split()
        elif s == '.\\" layers:begin':
            inside = True
        elif s == '.\\" layers:end':
            inside = False
        elif inside and s and not s.startswith('.'):
            for name in s.split()[0].split('/'):
                ranks[name] = rank
            rank += 1
    return ranks, helpers


def layer_of(rel):
    """The layer of a file under libhangar/: 'core', 'providers/local', 'root', or None."""
    parts = rel.split(os.sep)
    if parts[0] != 'libhangar' or len(parts) < 2:
        return None
    if rel == ROOT_FILE:
        return 'root'
    if len(parts) == 2:
        return None
    if parts[1] == 'providers':
        return 'providers/' + parts[2] if len(parts) > 3 else None
    return parts[1]


def resolve(root, src_rel, inc):
    """The tree-relative path an include names, as the build's include path finds it, or None."""
    here = os.path.dirname(src_rel)
    for base in (here, 'libhangar', 'include', os.path.join('include', 'hangar'), os.path.join('libhangar', 'util')):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def private_owner(root, rel, cache={}):
    key = (root, rel)
    if key not in cache:
        owner = None
        with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
            head = f.read(400)
        m = PRIVATE_RE.search(head)
        if m:
            owner = m.group(1)
        cache[key] = owner
    return cache[key]


def check(root, ranks, helpers):
    problems = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, 'libhangar')):
        for name in sorted(filenames):
            if not name.endswith(('.c', '.h')):
                continue
            src = os.path.relpath(os.path.join(dirpath, name), root)
            me = layer_of(src)
            if me is None:
                problems.append('%s: in no layer (put it in a layer directory)' % src)
                continue
            if me not in ranks and me != 'root' and not me.startswith('providers/'):
                problems.append('%s: layer %s is not in the documented order' % (src, me))
                continue
            with open(os.path.join(root, src), encoding='utf-8', errors='replace') as f:
                text = f.read()
            for m in INCLUDE_RE.finditer(text):
                inc = m.group(1)
                where = '%s:%d' % (src, text.count('\n', 0, m.start()) + 1)
                if '..' in inc.split('/'):
                    problems.append('%s: "%s": name it from libhangar/ (LAYER/FILE.h), not with ../' % (where, inc))
                    continue
                if inc in GENERATED:
                    continue
                target = resolve(root, src, inc)
                if target is None:
                    problems.append('%s: "%s" names no file of the tree' % (where, inc))
                    continue
                if target.startswith('include' + os.sep):
                    if not inc.startswith('hangar/'):
                        problems.append('%s: "%s": name public headers as "hangar/..."' % (where, inc))
                    continue
                them = layer_of(target)
                same_dir = os.path.dirname(target) == os.path.dirname(src)
                if not same_dir and inc != os.path.relpath(target, 'libhangar'):
                    problems.append('%s: "%s": name it as "%s"' % (where, inc, os.path.relpath(target, 'libhangar')))
                owner = private_owner(root, target)
                if owner and owner != me and me != 'root':
                    problems.append('%s: includes %s, private to libhangar/%s' % (where, target, owner))
                if them == me or me == 'root':
                    continue
                if me.startswith('providers/'):
                    if them not in helpers:
                        problems.append('%s: provider %s includes %s (layer %s): providers use only the '
                                        'public API (hangar/sys/) and the helper layers %s'
                                        % (where, me, target, them, ', '.join(helpers) or 'none'))
                    continue
                if them is None or them not in ranks:
                    problems.append('%s: includes %s, of no layer below %s' % (where, target, me))
                elif ranks[them] == ranks[me]:
                    problems.append('%s: includes %s: %s and %s are peers and use none of each other'
                                    % (where, target, me, them))
                elif ranks[them] > ranks[me]:
                    problems.append('%s: includes %s: %s is above %s (register a hook downward instead)'
                                    % (where, target, them, me))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--source-root', required=True)
    ap.add_argument('--doc', required=True, help='the internals document stating the order')
    args = ap.parse_args()
    with open(args.doc, encoding='utf-8') as f:
        ranks, helpers = read_order(f.read())
    if len(ranks) < 3:
        print('%s states no layer order (.\\" layers:begin ... .\\" layers:end)' % args.doc)
        return 1
    problems = check(args.source_root, ranks, helpers)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
