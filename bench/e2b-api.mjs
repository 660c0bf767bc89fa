// What hangard's E2B API (/e2b) costs over its own /v1, on local sandboxes:
// the real E2B JS SDK's calls against the same requests made straight to
// /v1 with fetch, on one hangard on loopback.
//   - create then kill a sandbox     (Sandbox.create + kill / POST + DELETE /v1/sandboxes)
//   - one sandbox's state            (Sandbox.getInfo / GET /v1/sandboxes/{id})
//   - the list of sandboxes          (Sandbox.list().nextItems() / GET /v1/sandboxes)
// Figures only: nothing here passes or fails. Commands and files do not go
// through hangard (it routes no envd traffic), so they are not timed here.
//
// Run: meson test -C build --benchmark --verbose e2b-api
// Optional: BENCH_ITERATIONS (default 200), BENCH_WARMUP (default 20),
// BENCH_CREATES (default 30: creates take a jail each).
// Exits 77 (meson's "skipped") when the SDK is not installed
// (npm ci --prefix tests/conformance).

import { measure } from './stats.mjs';

let harness;
try {
  harness = await import('../tests/e2b-api/harness.mjs');
} catch (err) {
  if (err.code !== 'MODULE_NOT_FOUND' && err.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  console.log(`skipped: the E2B SDK is not installed (npm ci --prefix tests/conformance): ${err.message}`);
  process.exit(77);
}
const { Hangard, e2b } = harness;

const counts = {
  iterations: Number(process.env.BENCH_ITERATIONS ?? 200),
  warmup: Number(process.env.BENCH_WARMUP ?? 20),
};
const creates = { iterations: Number(process.env.BENCH_CREATES ?? 30), warmup: 3 };

async function ok(res, status) {
  const r = await res;
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.body}`);
  return r;
}

const hd = await new Hangard().start();
try {
  const opts = hd.opts();
  await measure('create+kill via /e2b (SDK)', async () => {
    const sb = await e2b.Sandbox.create({ ...opts, timeoutMs: 60_000 });
    await sb.kill();
  }, creates);
  await measure('create+kill via /v1', async () => {
    const id = (await ok(hd.v1('POST', '/v1/sandboxes', { timeout: 60 }), 201)).json().id;
    await ok(hd.v1('DELETE', `/v1/sandboxes/${id}`), 204);
  }, creates);

  const sb = await e2b.Sandbox.create({ ...opts, metadata: { bench: 'e2b-api' }, timeoutMs: 600_000 });
  await measure('getInfo via /e2b (SDK)', () => e2b.Sandbox.getInfo(sb.sandboxId, opts), counts);
  await measure('GET /v1/sandboxes/{id}', () => ok(hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`), 200), counts);
  await measure('list via /e2b (SDK)', () => e2b.Sandbox.list(opts).nextItems(), counts);
  await measure('GET /v1/sandboxes', () => ok(hd.v1('GET', '/v1/sandboxes'), 200), counts);
  await sb.kill();
} finally {
  await hd.cleanup();
}
