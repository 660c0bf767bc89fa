#!/usr/bin/env python3
"""copy_files: copies a file into a sandbox, works on it there, and copies the
result back out.

    copy_files.py INPUT OUTPUT

INPUT goes to /tmp/input in a fresh sandbox, which upper-cases it into
/tmp/output; that is copied to OUTPUT here. Both copies stream, so the
files may be larger than memory. Small files can go through memory
instead: Sandbox.write_file() and read_file() take and give bytes.
"""

import sys

import hangar


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: copy_files.py INPUT OUTPUT", file=sys.stderr)
        return 2
    ctx = hangar.Context()
    try:
        with hangar.Sandbox.create(ctx) as sb:
            sb.copy_in(argv[1], "/tmp/input")
            r = sb.exec("tr a-z A-Z < /tmp/input > /tmp/output && stat -c %s /tmp/output")
            if not r.ok:
                print(f"copy: the sandbox said (exit {r.exit_code}): {r.stderr.text}", file=sys.stderr)
                return 1
            sb.copy_out("/tmp/output", argv[2], limit=1 << 30)
            print(f"{argv[2]}: {int(r.stdout)} bytes from sandbox {sb.id}")
    except hangar.HangarError as e:
        print(f"copy: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
