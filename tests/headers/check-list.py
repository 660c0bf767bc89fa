#!/usr/bin/env python3
"""Fails when a public header exists that headers.txt does not list (or the
reverse), so a new header cannot skip the stand-alone compilation tests."""
import os
import sys


def main():
    src_include, listing = sys.argv[1], sys.argv[2]
    on_disk = set()
    for root, _dirs, files in os.walk(os.path.join(src_include, 'hangar')):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), src_include)
            if name.endswith('.h'):
                on_disk.add(rel)
            elif name.endswith('.h.in'):
                on_disk.add(rel[:-len('.in')])  # generated into the build tree
    with open(listing) as f:
        listed = {line.strip() for line in f if line.strip() and not line.startswith('#')}
    ok = True
    for h in sorted(on_disk - listed):
        print(f'{h}: public header not in tests/headers/headers.txt')
        ok = False
    for h in sorted(listed - on_disk):
        print(f'{h}: listed in tests/headers/headers.txt but not in include/')
        ok = False
    if ok:
        print(f'{len(listed)} public headers, all listed')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
