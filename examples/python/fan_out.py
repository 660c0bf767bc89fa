#!/usr/bin/env python3
"""fan_out: runs one command per argument, each in a sandbox of its own, all at once.

    fan_out.py [--timeout SECONDS] 'COMMAND' ...

One asyncio event loop drives every sandbox (hangar.aio, shaped as the E2B
SDK's AsyncSandbox). Each command's output is printed as it finishes, after
a header naming its index, exit status and sandbox. With --timeout, the
commands still running when it passes are cancelled: each is stopped in
its sandbox, and its sandbox killed. The exit status is 0 when every
command exited 0, else 1.
"""

import asyncio
import sys
from typing import Optional

import hangar
from hangar.aio import AsyncSandbox


async def one(i: int, command: str) -> int:
    async with await AsyncSandbox.create() as sb:
        r = await sb.commands.run(command)
        print(f"[{i}] exit {r.exit_code} in {sb.id}")
        sys.stdout.write(r.stdout.text)
        sys.stdout.flush()
        return r.exit_code


async def fan_out(commands: list[str], timeout: Optional[float]) -> int:
    tasks = [asyncio.ensure_future(one(i, c)) for i, c in enumerate(commands)]
    try:
        async with asyncio.timeout(timeout):
            codes = await asyncio.gather(*tasks)
    except TimeoutError:
        print(f"fan_out: {sum(not t.done() or t.cancelled() for t in tasks)} command(s) cancelled after {timeout} s",
              file=sys.stderr)
        return 1
    return 0 if all(c == 0 for c in codes) else 1


def main(argv: list[str]) -> int:
    timeout = None
    if len(argv) > 2 and argv[1] == "--timeout":
        timeout = float(argv[2])
        argv = argv[2:]
    if len(argv) < 2:
        print("usage: fan_out.py [--timeout SECONDS] 'COMMAND' ...", file=sys.stderr)
        return 2
    try:
        return asyncio.run(fan_out(argv[1:], timeout))
    except hangar.HangarError as e:
        print(f"fan_out: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
