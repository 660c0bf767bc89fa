// What hangard's E2B API (/e2b) costs over its own /v1, on local sandboxes:
// the real E2B JS SDK's calls against the same requests made straight to
// /v1 with fetch, on one hangard on loopback.
//   - create then kill a sandbox     (Sandbox.create + kill / POST + DELETE /v1/sandboxes)
//   - one sandbox's state            (Sandbox.getInfo / GET /v1/sandboxes/{id})
//   - the list of sandboxes          (Sandbox.list().nextItems() / GET /v1/sandboxes)
//   - a command through the sandbox edge (commands.run('true') with
//     sandboxUrl set to hangard) against the same SDK call straight at a
//     hangar-envd listening on TCP (the jail's envd answers on a unix
//     socket only, with a token only the library holds: the baseline is
//     the same binary on loopback, outside a jail), and envd's /health the
//     same two ways, which takes the command's own cost out; timed in
//     pairs, the figure is the p50 of the pairs' differences
//   - the same command on a sandbox of the e2b provider (the cloud fake of
//     tests/fakes, whose sandboxes are hangar-envd processes behind its own
//     edge proxy): through hangard's edge, against the same SDK straight at
//     the platform's sandbox URL with the platform's own token. Both reach
//     the same envd, so the difference is hangard's edge alone
// Figures only: nothing here passes or fails.
//
// Run: meson test -C build --benchmark --verbose e2b-api
// Optional: BENCH_ITERATIONS (default 200), BENCH_WARMUP (default 20),
// BENCH_CREATES (default 30: creates take a jail each).
// Exits 77 (meson's "skipped") when the SDK is not installed
// (npm ci --prefix tests/conformance).

import { spawn } from 'node:child_process';

import { performance } from 'node:perf_hooks';

import { measure, percentile } from './stats.mjs';

let harness;
try {
  harness = await import('../tests/e2b-api/harness.mjs');
} catch (err) {
  if (err.code !== 'MODULE_NOT_FOUND' && err.code !== 'ERR_MODULE_NOT_FOUND') throw err;
  console.log(`skipped: the E2B SDK is not installed (npm ci --prefix tests/conformance): ${err.message}`);
  process.exit(77);
}
const { FAKE_API_KEY, Fake, Hangard, e2b } = harness;

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

  await edgeAgainstEnvd(hd);
} finally {
  await hd.cleanup();
}
await edgeAgainstPlatform();

/** hangar-envd on 127.0.0.1, a port of the kernel's choice: {port, stop()}. */
async function startEnvd() {
  const child = spawn(process.env.HANGAR_ENVD_PATH, ['-addr', '127.0.0.1', '-port', '0', '-ready-fd', '3', '-user', 'user'], {
    stdio: ['ignore', 'ignore', 'inherit', 'pipe'],
  });
  const line = await new Promise((resolve, reject) => {
    let buf = '';
    child.stdio[3].on('data', (d) => { buf += d; if (buf.includes('\n')) resolve(buf); });
    child.on('error', reject);
    child.on('exit', () => resolve(buf));
  });
  const m = /^ready (\d+)/.exec(line);
  if (!m) throw new Error(`hangar-envd did not start: ${line}`);
  return { port: Number(m[1]), stop: () => child.kill('SIGTERM') };
}

/**
 * Times viaEdge() and straight() in pairs and prints p50s and the p50 of
 * the pairs' differences. Each iteration times both ways, in alternating
 * order, so that the machine's drift (2 CPUs shared with builds) falls on
 * both alike.
 */
async function paired(what, viaEdge, straight) {
  for (let i = 0; i < counts.warmup; i++) { await viaEdge(); await straight(); }
  const edge = [], direct = [], diff = [];
  for (let i = 0; i < counts.iterations; i++) {
    const t = [0, 0];
    for (const k of i % 2 ? [1, 0] : [0, 1]) {
      const t0 = performance.now();
      await (k === 0 ? viaEdge() : straight());
      t[k] = performance.now() - t0;
    }
    edge.push(t[0]);
    direct.push(t[1]);
    diff.push(t[0] - t[1]);
  }
  const p = (a) => percentile(a.sort((x, y) => x - y), 50).toFixed(3);
  console.log(`${what.padEnd(28)} n=${counts.iterations}  p50 via the edge ${p(edge)} ms, straight ${p(direct)} ms, ` +
    `the edge adds ${p(diff)} ms (p50 of the pairs' differences)`);
}

/** The same envd both ways: a sandbox of the e2b provider on the cloud fake. */
async function edgeAgainstPlatform() {
  if (!process.env.FAKE_E2B) {
    console.log('e2b provider pair: skipped (FAKE_E2B is not set: the fakes are not built)');
    return;
  }
  // Commands as `user`, as in local sandboxes and the pair above: root's own login profile may be slow.
  const fake = await new Fake('cloud', { sandboxUser: 'user' }).start();
  let hd;
  try {
    hd = await new Hangard({ env: fake.env() }).start();
    const sb = await e2b.Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 600_000 });
    try {
      // The platform's own view of its one sandbox, with the token hangard keeps from the SDK.
      const platform = { apiKey: FAKE_API_KEY, apiUrl: `http://127.0.0.1:${fake.api}`, sandboxUrl: fake.edgeUrl };
      const [info] = await e2b.Sandbox.list(platform).nextItems();
      const direct = await e2b.Sandbox.connect(info.sandboxId, { ...platform, timeoutMs: 600_000 });
      await paired("commands.run('true'), e2b", () => sb.commands.run('true'), () => direct.commands.run('true'));
      console.log('  (an e2b-provider sandbox: the same envd behind the platform\'s edge both ways; the\n' +
        '   difference is hangard\'s edge alone)');
      await paired('/health (isRunning), e2b', () => sb.isRunning(), () => direct.isRunning());
    } finally {
      await sb.kill();
    }
  } finally {
    await hd?.cleanup();
    await fake.stop();
  }
}

async function edgeAgainstEnvd(hd) {
  const envd = await startEnvd();
  const sb = await e2b.Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 600_000 });
  try {
    const direct = new e2b.Sandbox({ sandboxId: 'bench', envdVersion: '0.6.4', sandboxUrl: `http://127.0.0.1:${envd.port}` });
    await paired("commands.run('true')", () => sb.commands.run('true'), () => direct.commands.run('true'));
    console.log("  (the straight envd runs outside a jail, where `bash -l` reads the host's own profile: this pair also\n" +
      "   weighs the jail against the host; /health below is the edge's own cost)");
    await paired('/health (isRunning)', () => sb.isRunning(), () => direct.isRunning());
  } finally {
    await sb.kill();
    envd.stop();
  }
}
