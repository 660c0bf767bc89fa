#!/usr/bin/env python3
"""Extracts the complete example program of a man page such as
man/libhangar.3 (the first .EX block of its EXAMPLE section), and compiles
and links it against the built library, so the page cannot drift from the
API."""
import os
import shlex
import subprocess
import sys
import tempfile


def main():
    page, cc, lib = sys.argv[1], sys.argv[2], sys.argv[3]
    incs = sys.argv[4:]
    with open(page) as f:
        text = f.read()
    try:
        section = text.split('\n.SH EXAMPLE\n', 1)[1].split('\n.SH ', 1)[0]
        code = section.split('\n.EX\n', 1)[1].split('\n.EE\n', 1)[0]
    except IndexError:
        print(f'FAIL: no .EX block in the EXAMPLE section of {page}')
        return 1
    # roff escapes used in the example: \e is a backslash, \- a minus, \& nothing.
    code = code.replace('\\e', '\\').replace('\\-', '-').replace('\\&', '') + '\n'
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, 'example.c')
        with open(src, 'w') as f:
            f.write(code)
        cmd = shlex.split(cc) + ['-std=c11', '-Wall', '-Wextra', '-Werror'] + \
            [f'-I{i}' for i in incs] + [src, '-o', os.path.join(tmp, 'example'), lib]
        print('+ ' + ' '.join(shlex.quote(c) for c in cmd))
        r = subprocess.run(cmd)
        if r.returncode:
            print(f'FAIL: the example of {page} does not build')
            return 1
    print(f'ok: the example of {page} builds ({code.count(chr(10))} lines)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
