#!/usr/bin/env python3
"""run: runs one shell command in a fresh sandbox and passes its output on.

    run.py 'COMMAND'

The sandbox comes from HANGAR_DEFAULT_PROVIDER (the local provider unless
the environment says otherwise) and is killed when the command is done.
Output is passed on live; the exit status is the command's.
"""

import sys

import hangar


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: run.py 'COMMAND'", file=sys.stderr)
        return 2

    def live(stream: int, data: bytes) -> None:
        out = sys.stdout if stream == hangar.STDOUT else sys.stderr
        out.buffer.write(data)
        out.flush()

    try:
        ctx = hangar.Context()
        with hangar.Sandbox.create(ctx) as sb:
            print(f"run: sandbox {sb.id} on {sb.provider}", file=sys.stderr)
            result = sb.exec(argv[1], on_output=live)
    except hangar.HangarError as e:
        print(f"run: {e}", file=sys.stderr)
        return 1
    if result.timed_out:
        print("run: the command timed out", file=sys.stderr)
    code: int = result.exit_code
    return code if code >= 0 else 128


if __name__ == "__main__":
    sys.exit(main(sys.argv))
