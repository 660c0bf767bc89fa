// Round-trip latency of the real E2B JS SDK against hangar-envd.
//
// Starts a hangar-envd (as the conformance suite does: debug-mode SDK,
// kernel-chosen port), then times
//   - sandbox.commands.run('true')           (Start stream: bash -l -c true)
//   - sandbox.files.read(<small file>)       (GET /files)
// each ITERATIONS times after WARMUP untimed runs, and prints p50/p95 in ms.
// For scale it also times `bash -l -c true` spawned locally: the SDK always
// wraps commands in a login shell, so this host's profile scripts set a floor
// under commands.run that has nothing to do with the daemon.
// Figures only: nothing here passes or fails.
//
// Run (from the repository root, once the SDK is installed):
//   npm ci --prefix tests/conformance
//   ninja -C build
//   HANGAR_ENVD=$PWD/build/programs/hangar-envd/hangar-envd node bench/sdk-run.mjs
// Optional: BENCH_ITERATIONS (default 200), BENCH_WARMUP (default 20).
// Compare with seed 003 §3.7 (upstream envd: commands.run('true') 18.0/25.0 ms,
// files.read 2.2/10.2 ms p50/p95 on loopback).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

import { startEnvd } from '../tests/conformance/harness.mjs';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20);

function percentile(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

async function measure(name, fn) {
  for (let i = 0; i < WARMUP; i++) await fn();
  const times = [];
  for (let i = 0; i < ITERATIONS; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const fmt = (x) => x.toFixed(2).padStart(8);
  console.log(`${name.padEnd(28)} n=${ITERATIONS}  p50 ${fmt(percentile(times, 50))} ms  p95 ${fmt(percentile(times, 95))} ms`);
}

const envd = await startEnvd();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangar-bench-'));
try {
  const sbx = await envd.sandbox();
  const file = path.join(dir, 'small.txt');
  fs.writeFileSync(file, 'a small file for the read benchmark\n');

  await measure("commands.run('true')", () => sbx.commands.run('true'));
  await measure('files.read (small file)', () => sbx.files.read(file));
  await measure('local bash -l -c true', async () => {
    const r = spawnSync('/bin/bash', ['-l', '-c', 'true'], { env: { PATH: process.env.PATH, HOME: os.homedir() } });
    if (r.status !== 0) throw new Error(`bash -l -c true exited ${r.status}`);
  });
} finally {
  await envd.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
