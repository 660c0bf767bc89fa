#!/usr/bin/env python3
"""py-bench: what the Python bindings add to a call.

The bindings' cost is a few microseconds on calls that take milliseconds and
vary by more than that from one moment to the next, so it is measured in
pairs: a call through the bindings, then the same call straight into
libhangar (hangar_sandbox_exec() and friends through ctypes, in this
process, on a context and handle of their own), then the bindings again,
and so on; the median of the pairs' differences is what the bindings add
(goal: at most 50 us per call). Two such comparisons: exec("true") on one
local sandbox (one hangar-envd), and create -> exec -> kill cycles. ctypes'
own cost per call is counted on the C side and printed, so the figures
understate the bindings' cost by at most that. Each comparison also gives
the pairs' difference in this thread's CPU time, where the bindings' cost
is spent, and which a busy machine disturbs far less than the wall clock.

The async API (hangar.aio) is measured the same way against the sync one:
`await sb.exec("true")` on an AsyncSandbox, then the same exec through the
Sandbox it wraps, alternating (goal: at most 100 us more per call); the
same with the exec handed to the package's Python threads, the way a call
with callbacks goes, for comparison; and the cost per call of those
threads without a sandbox (a call handed over and awaited).

Then, as a cross-check without ctypes, the same exec from C in another
process (lib-exec --attach, its own connection to the same envd) in
alternating rounds; and the bindings' own cost per call without any
sandbox (a call that returns at once, building a result, raising).

    py-bench.py [--pairs N] [--calls N] [--rounds N] [--cycles N] LIB_EXEC

meson runs it as the `python` benchmark with the build tree's package on
PYTHONPATH. It prints figures and asserts none. Needs what the local
provider needs (root, bubblewrap).
"""

import argparse
import asyncio
import ctypes
import math
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
import hangar.aio  # noqa: E402


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


class _Buf(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("reserved", ctypes.c_size_t)]


class _ExecResult(ctypes.Structure):
    # hangar_exec_result, version 2 (hangar/sandbox.h); the library fills
    # no more than .size says, so a larger struct in a later version is safe.
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32), ("exit_code", ctypes.c_int32),
                ("timed_out", ctypes.c_int32), ("out", _Buf), ("err", _Buf), ("out_bytes", ctypes.c_uint64),
                ("err_bytes", ctypes.c_uint64), ("duration_us", ctypes.c_int64), ("oom_killed", ctypes.c_int32),
                ("reserved0", ctypes.c_int32)]


class CSide:
    """libhangar called straight, through ctypes: the very library the
    extension loaded (found in /proc/self/maps), with a context of its own."""

    def __init__(self):
        path = None
        with open("/proc/self/maps") as f:
            for line in f:
                if "/libhangar.so" in line:
                    path = line.split(None, 5)[5].strip()
                    break
        if not path:
            raise SystemExit("py-bench: libhangar is not loaded")
        self.path = path
        lib = self.lib = ctypes.CDLL(path)
        vp, pvp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
        for name, res, args in (
                ("hangar_ctx_new", ctypes.c_int, [pvp, ctypes.c_uint32]),
                ("hangar_ctx_unref", vp, [vp]),
                ("hangar_sandbox_attach", ctypes.c_int, [pvp, vp, ctypes.c_char_p, ctypes.c_char_p]),
                ("hangar_sandbox_create", ctypes.c_int, [pvp, vp, vp]),
                ("hangar_sandbox_exec", ctypes.c_int, [ctypes.POINTER(_ExecResult), vp, ctypes.c_char_p, vp]),
                ("hangar_exec_result_dispose", None, [ctypes.POINTER(_ExecResult)]),
                ("hangar_sandbox_kill", ctypes.c_int, [vp]),
                ("hangar_sandbox_unref", vp, [vp]),
                ("hangar_error_name", vp, [ctypes.c_int])):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        self.ctx = ctypes.c_void_p()
        self._check(lib.hangar_ctx_new(ctypes.byref(self.ctx), 0), "hangar_ctx_new")
        self.res = _ExecResult(version=2, size=ctypes.sizeof(_ExecResult))
        self.res_p = ctypes.byref(self.res)

    def _check(self, rc, what):
        if rc < 0:
            raise SystemExit(f"py-bench: {what} failed: {ctypes.string_at(self.lib.hangar_error_name(rc)).decode()}")

    def attach(self, sid):
        sb = ctypes.c_void_p()
        self._check(self.lib.hangar_sandbox_attach(ctypes.byref(sb), self.ctx, None, sid.encode()), "attach")
        return sb

    def exec_true(self, sb):
        lib, res = self.lib, self.res_p
        rc = lib.hangar_sandbox_exec(res, sb, b"true", None)
        code = self.res.exit_code
        lib.hangar_exec_result_dispose(res)
        return rc, code

    def cycle(self):
        lib, sb = self.lib, ctypes.c_void_p()
        rc = lib.hangar_sandbox_create(ctypes.byref(sb), self.ctx, None)
        if rc == 0:
            rc, code = self.exec_true(sb)
            rc = rc or code
            kill = lib.hangar_sandbox_kill(sb)
            rc = rc or kill
        lib.hangar_sandbox_unref(sb)
        return rc

    def close(self):
        self.lib.hangar_ctx_unref(self.ctx)


def paired(n, warmup, py_call, c_call):
    """Alternates py_call() and c_call() (warm-ups first, untimed). Returns,
    in microseconds, each side's wall-clock times and the pairs' differences
    in wall-clock time and in CPU time of this thread."""
    py, c, diff, cpu_diff = [], [], [], []
    clock, cpu = time.perf_counter, time.thread_time
    for i in range(warmup + n):
        w0, u0 = clock(), cpu()
        py_call()
        w1, u1 = clock(), cpu()
        c_call()
        w2, u2 = clock(), cpu()
        if i >= warmup:
            py.append((w1 - w0) * 1e6)
            c.append((w2 - w1) * 1e6)
            diff.append(py[-1] - c[-1])
            cpu_diff.append(((u1 - u0) - (u2 - u1)) * 1e6)
    return py, c, diff, cpu_diff


def median_interval(v):
    """A 95 % confidence interval of the median, from order statistics: how
    far the p50 of these pairs could be from that of many more."""
    v = sorted(v)
    n, h = len(v), 1.96 * math.sqrt(len(v)) / 2
    return v[max(0, math.floor(n / 2 - h))], v[min(n - 1, math.ceil(n / 2 + h))]


def print_pairs(label, unit, pairs, goal, sides=("through the bindings", "straight into C"),
                cpu="this thread's CPU", what="bindings add"):
    py, c, diff, cpu_diff = pairs
    print(f"  {label}: n={len(diff)} pairs")
    for side, v in zip(sides, (py, c)):
        print(f"    {side:<23} p50 {pct(v, 50) / 1e3:9.3f} ms   p95 {pct(v, 95) / 1e3:9.3f} ms")
    for name, v in (("pairs' difference", diff), ("  in " + cpu, cpu_diff)):
        lo, hi = median_interval(v)
        print(f"    {name:<23} p25 {pct(v, 25):+9.1f} µs  p50 {pct(v, 50):+9.1f} µs  p75 {pct(v, 75):+9.1f} µs"
              f"  (95 % interval of the p50: {lo:+.1f} to {hi:+.1f})")
    print(f"  {what} p50 {pct(diff, 50):.1f} µs per {unit}, {pct(cpu_diff, 50):.1f} µs of CPU (goal ≤ {goal})")


def async_paired(sb, n, warmup, threaded=False):
    """paired(), the first side awaited on an event loop: await AsyncSandbox.exec() against Sandbox.exec().

    The CPU time is the process's (the call runs on another thread): what
    the hand-over costs, which the wall clock shows only with the
    scheduling delays of two more thread wake-ups on top, large on a busy
    machine. threaded: the exec goes the way a call with callbacks goes
    (the package's Python threads, the end handed to the loop with
    call_soon_threadsafe) instead of the extension's threads.
    """
    asb = hangar.aio.AsyncSandbox(sb)
    out = [], [], [], []
    clock, cpu = time.perf_counter, time.process_time
    run = hangar.aio._run

    def call():
        if threaded:
            return run(lambda stop: sb.exec("true", cancel=stop.is_set))
        return asb.exec("true")

    async def pairs():
        py, c, diff, cpu_diff = out
        for i in range(warmup + n):
            w0, u0 = clock(), cpu()
            r = await call()
            w1, u1 = clock(), cpu()
            q = sb.exec("true")
            w2, u2 = clock(), cpu()
            if r.exit_code or q.exit_code:
                raise SystemExit(f"py-bench: `true` exited {r.exit_code} / {q.exit_code}")
            if i >= warmup:
                py.append((w1 - w0) * 1e6)
                c.append((w2 - w1) * 1e6)
                diff.append(py[-1] - c[-1])
                cpu_diff.append(((u1 - u0) - (u2 - u1)) * 1e6)

    asyncio.run(pairs())
    return out


def async_call_us(n=20000):
    """What handing a call to hangar.aio's threads and awaiting it costs, the call itself doing nothing."""
    async def calls():
        run = hangar.aio._run
        for _ in range(200):
            await run(lambda stop: None)
        t0 = time.perf_counter()
        for _ in range(n):
            await run(lambda stop: None)
        return (time.perf_counter() - t0) / n * 1e6

    return asyncio.run(calls())


def per_call_us(fn, n=200000):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=2000, help="exec pairs")
    ap.add_argument("--calls", type=int, default=300, help="calls per lib-exec round")
    ap.add_argument("--rounds", type=int, default=3, help="lib-exec rounds")
    ap.add_argument("--cycles", type=int, default=100, help="create -> exec -> kill pairs")
    ap.add_argument("--async-pairs", type=int, default=1000, help="async exec pairs")
    ap.add_argument("lib_exec")
    a = ap.parse_args()

    state = tempfile.TemporaryDirectory(prefix="hangar-py-bench-")
    os.environ["HANGAR_STATE_DIR"] = state.name
    ctx = hangar.Context()
    c = CSide()
    print(f"py-bench: Python {sys.version.split()[0]}, hangar {hangar.__version__}, local provider")
    print(f"  C side: {c.path} through ctypes, a context of its own")
    fn = c.lib.hangar_error_name
    print(f"  ctypes' own cost per call (counted on the C side): {per_call_us(lambda: fn(-7)):.2f} us")
    print()

    print("exec('true') round trip on one sandbox, alternating pairs:")
    with hangar.Sandbox.create(ctx) as sb:
        csb = c.attach(sb.id)
        bad = []

        def py_call():
            r = sb.exec("true")
            if r.exit_code != 0:
                bad.append(f"Python: `true` exited {r.exit_code}")

        def c_call():
            rc, code = c.exec_true(csb)
            if rc or code:
                bad.append(f"C: rc {rc}, exit {code}")

        pairs = paired(a.pairs, 20, py_call, c_call)
        if bad:
            raise SystemExit(f"py-bench: {len(bad)} calls failed; first: {bad[0]}")
        print_pairs("exec('true')", "exec", pairs, "50 µs")
        c.lib.hangar_sandbox_unref(csb)

        print()
        print("the async API: await AsyncSandbox.exec('true') against Sandbox.exec('true'), alternating pairs:")
        print_pairs("exec('true')", "exec over the sync one", async_paired(sb, a.async_pairs, 20), "100 µs",
                    sides=("awaited (hangar.aio)", "sync (hangar)"), cpu="the process's CPU",
                    what="the async API adds")
        print("  the same through the package's Python threads (the way of a call with callbacks):")
        print_pairs("exec('true', cancel=...)", "exec over the sync one",
                    async_paired(sb, a.async_pairs, 20, threaded=True), "100 µs",
                    sides=("awaited (Python thread)", "sync (hangar)"), cpu="the process's CPU",
                    what="the Python threads add")

        print()
        print("the same exec from C in another process (lib-exec --attach, its own connection), in rounds:")
        py50, c50 = [], []
        for rnd in range(a.rounds):
            v = py_exec(sb, a.calls, 20)
            p50, p95 = pct(v, 50), pct(v, 95)
            cp50, cp95 = c_exec(a.lib_exec, sb.id, a.calls, 20)
            py50.append(p50)
            c50.append(cp50)
            print(f"  round {rnd + 1}: Python bindings   p50 {p50:9.3f} ms   p95 {p95:9.3f} ms")
            print(f"  round {rnd + 1}: lib-exec          p50 {cp50:9.3f} ms   p95 {cp95:9.3f} ms")
        added = (statistics.median(py50) - statistics.median(c50)) * 1e3
        print(f"  difference of the median round p50s: {added:+.1f} us (rounds minutes apart: noise of either sign)")

    print()
    print("create -> exec -> kill, alternating pairs (three blocking calls and a release each):")
    fails = []

    def py_cycle():
        with hangar.Sandbox.create(ctx) as sb:
            sb.exec("true")

    def c_cycle():
        rc = c.cycle()
        if rc:
            fails.append(rc)

    pairs = paired(a.cycles, 2, py_cycle, c_cycle)
    if fails:
        raise SystemExit(f"py-bench: {len(fails)} C cycles failed; first: {fails[0]}")
    print_pairs("create -> exec -> kill", "create -> exec -> kill cycle", pairs,
                "50 µs a call, 150 µs for its three")

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
    print(f"  an awaited call through hangar.aio's Python threads {async_call_us():7.2f} us")
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
