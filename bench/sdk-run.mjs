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
// With HANGAR_LIB_EXEC pointing at bench/lib-exec from a build, it also
// runs libhangar's exec of `true` against the same daemon (lib-exec reaches
// it through a provider that describes this daemon) with the same counts,
// and prints that line right under commands.run('true'). The library wraps
// the command as `timeout -k 5s 120s bash -lc true`, the SDK as
// `/bin/bash -l -c true`; both run as the daemon's own user.
//
// Run (from the repository root, once the SDK is installed):
//   npm ci --prefix tests/conformance
//   ninja -C build
//   HANGAR_ENVD=$PWD/build/programs/hangar-envd/hangar-envd \
//   HANGAR_LIB_EXEC=$PWD/build/bench/lib-exec node bench/sdk-run.mjs
// or through meson: meson test -C build --benchmark --verbose sdk-vs-lib
// Optional: BENCH_ITERATIONS (default 200), BENCH_WARMUP (default 20),
// BENCH_USER (run the daemon with -user NAME, so every command, the local
// bash floor included, runs as NAME: a user with a light login profile shows
// the protocol costs instead of the profile scripts; needs root).
// Exits 77 (meson's "skipped") when the SDK is not installed.
// For comparison, upstream envd measures (commands.run('true') 18.0/25.0 ms,
// files.read 2.2/10.2 ms p50/p95 on loopback).

import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { measure as measureFor } from './stats.mjs';

let startEnvd;
let passwdEntry;
try {
  ({ startEnvd, passwdEntry } = await import('../tests/conformance/harness.mjs'));
} catch (err) {
  if (err.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  console.log(`skipped: the E2B SDK is not installed (npm ci --prefix tests/conformance): ${err.message}`);
  process.exit(77);
}

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20);
const USER = process.env.BENCH_USER || null;
const userEntry = USER ? passwdEntry(USER) : null;
if (USER && !userEntry) throw new Error(`BENCH_USER: no user ${USER} in /etc/passwd`);

function measure(name, fn) {
  return measureFor(name, fn, { iterations: ITERATIONS, warmup: WARMUP });
}

// Runs bench/lib-exec against the daemon and returns what it printed.
async function libExec(bin, url) {
  const args = ['-n', String(ITERATIONS), '--warmup', String(WARMUP), ...(USER ? ['--user', USER] : []), url];
  const child = spawn(bin, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
  child.stderr.setEncoding('utf8').on('data', (d) => { err += d; });
  const [code, signal] = await once(child, 'exit');
  if (code !== 0) {
    process.exitCode = 1;
    return `${out}lib-exec failed (exit ${code ?? signal}): ${err.trim()}`;
  }
  return out.trimEnd();
}

const envd = await startEnvd({ args: USER ? ['-user', USER] : [] });
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangar-bench-'));
try {
  const sbx = await envd.sandbox();
  const file = path.join(dir, 'small.txt');
  fs.chmodSync(dir, 0o755); // readable by BENCH_USER too
  fs.writeFileSync(file, 'a small file for the read benchmark\n');

  console.log(`commands run as ${USER ?? os.userInfo().username}`);
  await measure("commands.run('true')", () => sbx.commands.run('true'));
  if (process.env.HANGAR_LIB_EXEC) console.log(await libExec(process.env.HANGAR_LIB_EXEC, envd.url));
  await measure('files.read (small file)', () => sbx.files.read(file));
  await measure('local bash -l -c true', async () => {
    const as = userEntry ? { uid: userEntry.uid, gid: userEntry.gid, cwd: '/' } : {};
    const home = userEntry ? userEntry.home : os.homedir();
    const r = spawnSync('/bin/bash', ['-l', '-c', 'true'], { env: { PATH: process.env.PATH, HOME: home }, ...as });
    if (r.status !== 0) throw new Error(`bash -l -c true exited ${r.status}`);
  });
} finally {
  await envd.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
