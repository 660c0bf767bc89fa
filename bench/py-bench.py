#!/usr/bin/env python3
"""py-bench: what the Python bindings add to a call.

On one local sandbox: Sandbox.exec("true") from Python, against the same
hangar_sandbox_exec() from C (lib-exec --attach, a separate process on the
same sandbox and so the same hangar-envd), in alternating rounds so that
drift on a shared machine hits both; then the bindings' own cost per call
without the sandbox (a call that returns at once, and building a result);
then create -> exec -> kill cycles from Python.

    py-bench.py [--calls N] [--rounds N] [--cycles N] LIB_EXEC

meson runs it as the `python` benchmark with the build tree's package on
PYTHONPATH. It prints figures and asserts none; the goal is at most 50 us
added per call. Needs what the local provider needs (root, bubblewrap).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

if os.environ.get("HANGAR_PY_PRELOAD"):
    os.environ.pop("LD_PRELOAD", None)

import hangar  # noqa: E402


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))]


def py_exec(sb, n, warmup):
    v = []
    for i in range(warmup + n):
        t0 = time.perf_counter()
        r = sb.exec("true")
        dt = time.perf_counter() - t0
        if r.exit_code != 0:
            raise SystemExit(f"py-bench: `true` exited {r.exit_code}")
        if i >= warmup:
            v.append(dt * 1e3)
    return v


def c_exec(lib_exec, sid, n, warmup):
    r = subprocess.run([lib_exec, "-n", str(n), "--warmup", str(warmup), "--attach", sid], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"py-bench: lib-exec failed: {r.stderr.strip() or r.stdout.strip()}")
    m = re.search(r"p50\s+([\d.]+) ms\s+p95\s+([\d.]+) ms", r.stdout)
    if not m:
        raise SystemExit(f"py-bench: cannot read lib-exec's output: {r.stdout!r}")
    return float(m.group(1)), float(m.group(2))


def per_call_us(fn, n=200000):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("lib_exec")
    a = ap.parse_args()

    state = tempfile.TemporaryDirectory(prefix="hangar-py-bench-")
    os.environ["HANGAR_STATE_DIR"] = state.name
    ctx = hangar.Context()
    print(f"py-bench: Python {sys.version.split()[0]}, hangar {hangar.__version__}, local provider")
    print()
    print("exec('true') round trip" + " " * 11 + f"{'p50 ms':>9} {'p95 ms':>9}")
    with hangar.Sandbox.create(ctx) as sb:
        py50, c50 = [], []
        for rnd in range(a.rounds):
            v = py_exec(sb, a.calls, 20)
            p50, p95 = pct(v, 50), pct(v, 95)
            cp50, cp95 = c_exec(a.lib_exec, sb.id, a.calls, 20)
            py50.append(p50)
            c50.append(cp50)
            print(f"  round {rnd + 1}: Python bindings        {p50:9.3f} {p95:9.3f}")
            print(f"  round {rnd + 1}: C (lib-exec --attach)  {cp50:9.3f} {cp95:9.3f}")
        added = (statistics.median(py50) - statistics.median(c50)) * 1e3
        print(f"  added by the bindings (median of round p50s): {added:+.1f} us per call (goal <= 50 us)")

    print()
    print("the bindings' own cost per call, no sandbox involved:")
    name = hangar._hangar.hangar_error_name
    print(f"  a wrapped C call that returns at once       {per_call_us(lambda: name(-7)):7.2f} us")
    raw = (0, 0, b"", b"", 0, 0, 1000, 0)
    build = hangar.ExecResult._from_raw
    print(f"  building an ExecResult from the C result    {per_call_us(lambda: build(raw), 100000):7.2f} us")
    try:
        hangar.Sandbox.attach(ctx, "sb-0000000000000000")
    except hangar.GoneError:
        pass

    def raising():
        try:
            ctx.set("HANGAR_EXEC_TIMEOUT_SECONDS", "x")
        except hangar.ConfigError:
            pass

    print(f"  a failing call raising its HangarError      {per_call_us(raising, 20000):7.2f} us")

    print()
    v = []
    for _ in range(a.cycles):
        t0 = time.perf_counter()
        with hangar.Sandbox.create(ctx) as sb:
            sb.exec("true")
        v.append((time.perf_counter() - t0) * 1e3)
    print(f"create -> exec -> kill from Python, n={a.cycles}: p50 {pct(v, 50):.1f} ms  p95 {pct(v, 95):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
