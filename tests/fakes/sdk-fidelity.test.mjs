// The real E2B JS SDK (tests/conformance/node_modules/e2b) against a
// cloud-flavour fake-e2b: if the SDK is happy, the fake speaks E2B's control
// API and edge closely enough for the provider's tests to mean something.
//
// Environment: FAKE_E2B and HANGAR_ENVD name the binaries. The fake listens on
// kernel-chosen ports and reports them on --ready-fd.

import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

const API_KEY = 'e2b_fidelity_key';
const READY_TIMEOUT_MS = 10_000;

let fake;
let apiUrl;
let edgeUrl;

function startFake() {
  return new Promise((resolve, reject) => {
    const child = spawn(process.env.FAKE_E2B, [
      '--flavour', 'cloud', '--envd', process.env.HANGAR_ENVD,
      '--api-key', API_KEY, '--ready-fd', '3',
    ], { stdio: ['ignore', 'inherit', 'inherit', 'pipe'] });
    let line = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('fake-e2b did not become ready'));
    }, READY_TIMEOUT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`fake-e2b exited with ${code}`));
    });
    child.stdio[3].on('data', (chunk) => {
      line += chunk.toString();
      if (!line.includes('\n')) return;
      clearTimeout(timer);
      const [, api, edge] = line.trim().split(' ');
      resolve({ child, api: Number(api), edge: Number(edge) });
    });
  });
}

function stopFake(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.removeAllListeners('exit');
    child.on('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

let Sandbox;
let e2b;

before(async () => {
  fake = await startFake();
  apiUrl = `http://127.0.0.1:${fake.api}`;
  edgeUrl = `http://127.0.0.1:${fake.edge}`;
  // The SDK reads these when each call builds its connection config.
  delete process.env.E2B_DEBUG;
  process.env.E2B_API_URL = apiUrl;
  process.env.E2B_SANDBOX_URL = edgeUrl;
  process.env.E2B_API_KEY = API_KEY;
  e2b = await import('../conformance/node_modules/e2b/dist/index.mjs');
  Sandbox = e2b.Sandbox;
});

after(async () => {
  if (fake) await stopFake(fake.child);
});

test('create, run a command, list with the paginator', async () => {
  const a = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: 'fidelity' } });
  const b = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: 'fidelity' } });
  try {
    assert.match(a.sandboxId, /^[a-z0-9]{20}$/);
    const out = await a.commands.run('echo hi');
    assert.equal(out.stdout, 'hi\n');
    assert.equal(out.exitCode, 0);

    const seen = [];
    const pager = Sandbox.list({ query: { metadata: { suite: 'fidelity' } }, limit: 1 });
    while (pager.hasNext) {
      const items = await pager.nextItems();
      assert.ok(items.length <= 1);
      seen.push(...items.map((s) => s.sandboxId));
    }
    assert.deepEqual(seen.sort(), [a.sandboxId, b.sandboxId].sort());

    const info = await a.getInfo();
    assert.equal(info.state, 'running');
    assert.equal(info.sandboxId, a.sandboxId);
  } finally {
    await a.kill();
    await b.kill();
  }
});

test('pause keeps processes; connect resumes them', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  try {
    const bg = await sbx.commands.run('sleep 1000', { background: true });
    assert.ok(bg.pid > 0);
    assert.equal(await sbx.pause(), true);
    assert.equal(await sbx.pause(), false, 'a second pause answers 409 → false');
    const listed = await Sandbox.list({ query: { state: ['paused'] } }).nextItems();
    assert.ok(listed.some((s) => s.sandboxId === sbx.sandboxId));

    const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 });
    assert.equal((await again.getInfo()).state, 'running');
    const procs = await again.commands.list();
    assert.ok(procs.some((p) => p.pid === bg.pid), 'the background sleep survived pause and resume');
    const out = await again.commands.run('echo back');
    assert.equal(out.stdout, 'back\n');
    await again.commands.kill(bg.pid);
  } finally {
    assert.equal(await sbx.kill(), true);
  }
  assert.equal(await Sandbox.kill(sbx.sandboxId), false, 'killing twice → 404 → false');
});

test('the edge enforces the envd access token', async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  try {
    const res = await fetch(`${edgeUrl}/process.Process/List`, {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        'E2b-Sandbox-Id': sbx.sandboxId,
        'E2b-Sandbox-Port': '49983',
      },
      body: '{}',
    });
    assert.equal(res.status, 401);
    const health = await fetch(`${edgeUrl}/health`, {
      headers: { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' },
    });
    assert.equal(health.status, 204);
  } finally {
    await sbx.kill();
  }
});

test('a wrong API key fails', async () => {
  await assert.rejects(
    Sandbox.create({ apiKey: 'e2b_wrong', timeoutMs: 60_000 }),
    (err) => err instanceof e2b.AuthenticationError,
  );
});
