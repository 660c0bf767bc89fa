// E2B's pause with memory: false is a session suspend: the sandbox's home
// is checkpointed, the sandbox parked or destroyed, and connect resumes it
// (hot, or restored into a new sandbox) under the same sandboxID. Driven by
// the real E2B SDK through hangard's edge, with /v1 (an admin token) and raw
// requests to the edge as witnesses. Restores are made cold here
// (HANGAR_SESSION_HOT_RESUME_MINUTES=0), except in the last test.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Hangard, e2b, waitFor } from './harness.mjs';

const { Sandbox } = e2b;
let hd;

function storeEnv(h, extra = {}) {
  const dir = path.join(h.dir, 'checkpoints');
  fs.mkdirSync(dir, { recursive: true });
  Object.assign(h.extraEnv, { HANGAR_CHECKPOINT_STORE: `file://${dir}`, ...extra });
  return h;
}

before(async () => {
  hd = await storeEnv(new Hangard(), { HANGAR_SESSION_HOT_RESUME_MINUTES: '0' }).start();
});

after(async () => {
  await hd?.cleanup();
});

async function v1(method, p, body) {
  const r = await hd.v1(method, p, body);
  return { status: r.status, json: r.status < 300 && r.body ? r.json() : null, body: r.body };
}

async function v1Sandboxes(h = hd) {
  const r = await h.v1('GET', '/v1/sandboxes');
  assert.equal(r.status, 200, r.body);
  return r.json().sandboxes;
}

/** envd's /health through the edge, as the SDK addresses it, with a token. */
async function edgeHealth(h, id, token) {
  const r = await h.request('GET', '/health', {
    key: null,
    headers: { 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token },
  });
  return r.status;
}

async function listed(id) {
  const all = await Sandbox.list({ ...hd.opts() }).nextItems();
  return all.filter((s) => s.sandboxId === id);
}

test('memory: false then connect: same sandboxID, files and envVars kept, new tokens, listed once', async () => {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000, envs: { GREETING: 'kept env' } });
  const id = sb.sandboxId;
  try {
    await sb.files.write('/home/user/kept.txt', 'written before the pause');
    assert.equal(await edgeHealth(hd, id, sb.envdAccessToken), 204);
    const first = (await v1Sandboxes()).map((s) => s.id);
    assert.deepEqual(first, [id]);

    assert.equal(await sb.pause({ keepMemory: false }), true);
    // Suspended: no sandbox runs for it, its session holds a checkpoint.
    assert.deepEqual(await v1Sandboxes(), []);
    const ses = await v1('GET', `/v1/sessions/e2b-${id}`);
    assert.equal(ses.status, 200, ses.body);
    assert.equal(ses.json.state, 'suspended');
    assert.notEqual(ses.json.checkpoint, '');
    assert.equal((await Sandbox.getInfo(id, hd.opts())).state, 'paused');
    const paused = await listed(id);
    assert.equal(paused.length, 1);
    assert.equal(paused[0].state, 'paused');
    assert.equal(await Sandbox.pause(id, hd.opts()), false, 'a second pause');
    assert.equal(await edgeHealth(hd, id, sb.envdAccessToken), 502, 'the edge has nothing to reach');

    const back = await Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 120_000 });
    assert.equal(back.sandboxId, id);
    assert.notEqual(back.envdAccessToken, sb.envdAccessToken, 'a restore rotates the tokens');
    assert.notEqual(back.trafficAccessToken, sb.trafficAccessToken);
    assert.equal(await back.files.read('/home/user/kept.txt'), 'written before the pause');
    assert.equal((await back.commands.run('printf %s "$GREETING"')).stdout, 'kept env');
    // A new hangar sandbox serves the same E2B id; the old tokens open nothing.
    const now = await v1Sandboxes();
    assert.equal(now.length, 1);
    assert.notEqual(now[0].id, id);
    assert.equal(await edgeHealth(hd, id, back.envdAccessToken), 204);
    assert.equal(await edgeHealth(hd, id, sb.envdAccessToken), 401);
    await assert.rejects(sb.commands.run('true'));
    // The hangar id behind it is no second name its tokens open.
    assert.equal(await edgeHealth(hd, now[0].id, back.envdAccessToken), 401);
    const running = await listed(id);
    assert.equal(running.length, 1);
    assert.equal(running[0].state, 'running');
    assert.equal((await Sandbox.getInfo(id, hd.opts())).sandboxId, id);
    assert.equal((await v1('GET', `/v1/sessions/e2b-${id}`)).json.last_resume, 'cold');

    // A second round: what the restored sandbox wrote is kept too.
    await back.files.write('/home/user/second.txt', 'second round');
    assert.equal(await back.pause({ keepMemory: false }), true);
    const again = await Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 120_000 });
    assert.equal(again.sandboxId, id);
    assert.notEqual(again.envdAccessToken, back.envdAccessToken);
    assert.equal(await again.files.read('/home/user/second.txt'), 'second round');
    assert.equal(await again.files.read('/home/user/kept.txt'), 'written before the pause');
    assert.equal((await v1Sandboxes()).length, 1);
  } finally {
    await Sandbox.kill(id, hd.opts());
  }
  // The kill took the restored sandbox and the session.
  assert.deepEqual(await v1Sandboxes(), []);
  assert.equal((await v1('GET', `/v1/sessions/e2b-${id}`)).status, 404);
});

test('kill of a suspended sandbox removes it, its session and its checkpoints', async () => {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 60_000 });
  const id = sb.sandboxId;
  await sb.files.write('/home/user/doomed.txt', 'x');
  assert.equal(await sb.pause({ keepMemory: false }), true);
  const cps = await v1('GET', `/v1/sessions/e2b-${id}/checkpoints`);
  assert.equal(cps.status, 200, cps.body);
  assert.equal(cps.json.checkpoints.length, 1);
  const cpId = cps.json.checkpoints[0].id;

  assert.equal(await Sandbox.kill(id, hd.opts()), true);
  assert.deepEqual(await listed(id), []);
  assert.deepEqual(await Sandbox.list({ ...hd.opts() }).nextItems(), []);
  assert.equal((await v1('GET', `/v1/sessions/e2b-${id}`)).status, 404);
  assert.equal((await v1('GET', `/v1/checkpoints/${cpId}`)).status, 404);
  await assert.rejects(Sandbox.connect(id, hd.opts()), e2b.NotFoundError);
  await assert.rejects(Sandbox.getInfo(id, hd.opts()), e2b.NotFoundError);
  assert.equal(await Sandbox.kill(id, hd.opts()), false);
});

test('autoPause with keepMemory false suspends at the timeout; connect restores it', async () => {
  const sb = await Sandbox.create({
    ...hd.edgeOpts(), timeoutMs: 60_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } },
  });
  const id = sb.sandboxId;
  try {
    await sb.files.write('/home/user/auto.txt', 'before the timeout');
    await sb.setTimeout(1_000);
    // Waited for as an SDK user would: the sandbox reads paused (never
    // not found, not even while the suspend records itself). By then the
    // session is suspended and free, so the connect below never meets the
    // suspend's lease.
    await waitFor(async () => (await Sandbox.getInfo(id, hd.opts())).state === 'paused',
      { timeoutMs: 30_000, intervalMs: 20, what: 'the pause at the timeout' });
    assert.equal((await v1('GET', `/v1/sessions/e2b-${id}`)).json?.state, 'suspended');
    assert.deepEqual(await v1Sandboxes(), []);
    const back = await Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 60_000 });
    assert.equal(back.sandboxId, id);
    assert.equal(await back.files.read('/home/user/auto.txt'), 'before the timeout');
    assert.equal(await edgeHealth(hd, id, sb.envdAccessToken), 401);
    const info = await Sandbox.getInfo(id, hd.opts());
    assert.equal(info.state, 'running');
    assert.equal(info.lifecycle.onTimeout, 'pause');
    // Its pause is due again at the new timeout, not at once.
    assert.ok(info.endAt.getTime() - Date.now() > 30_000, String(info.endAt));
  } finally {
    await Sandbox.kill(id, hd.opts());
  }
});

test('two connects at once resume once: one sandbox, both get the same working tokens', async () => {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 60_000 });
  const id = sb.sandboxId;
  try {
    await sb.files.write('/home/user/race.txt', 'raced');
    assert.equal(await sb.pause({ keepMemory: false }), true);
    const [a, b] = await Promise.all([
      Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 60_000 }),
      Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 60_000 }),
    ]);
    assert.equal(a.sandboxId, id);
    assert.equal(b.sandboxId, id);
    assert.equal(a.envdAccessToken, b.envdAccessToken);
    assert.notEqual(a.envdAccessToken, sb.envdAccessToken);
    assert.equal((await v1Sandboxes()).length, 1, 'one sandbox for both');
    assert.equal(await a.files.read('/home/user/race.txt'), 'raced');
    assert.equal((await b.commands.run('echo b')).stdout, 'b\n');
    assert.equal(await edgeHealth(hd, id, sb.envdAccessToken), 401);
  } finally {
    await Sandbox.kill(id, hd.opts());
  }
  assert.deepEqual(await v1Sandboxes(), []);
});

test('where the library may park it, connect takes the same machine back, processes and tokens', async () => {
  const hot = await storeEnv(new Hangard()).start();
  try {
    const sb = await Sandbox.create({ ...hot.edgeOpts(), timeoutMs: 60_000 });
    const id = sb.sandboxId;
    await sb.commands.run('sleep 600', { background: true });
    // The background command's login shell starts it a moment later: wait for it, with a deadline.
    const pid = (
      await sb.commands.run('for i in $(seq 200); do pgrep -n -x sleep && exit 0; sleep 0.05; done; exit 1')
    ).stdout.trim();
    assert.match(pid, /^[0-9]+$/);
    assert.equal(await sb.pause({ keepMemory: false }), true);
    const ses = (await hot.v1('GET', `/v1/sessions/e2b-${id}`)).json();
    assert.equal(ses.state, 'parked');
    assert.equal((await Sandbox.getInfo(id, hot.opts())).state, 'paused');
    const all = await Sandbox.list({ ...hot.opts() }).nextItems();
    assert.deepEqual(all.map((s) => [s.sandboxId, s.state]), [[id, 'paused']]);
    await sb.connect();
    // The same machine: the same tokens work, the process lives on.
    assert.equal((await sb.commands.run(`kill -0 ${pid} && echo alive`)).stdout, 'alive\n');
    assert.equal((await hot.v1('GET', `/v1/sessions/e2b-${id}`)).json().last_resume, 'hot');
    assert.equal(await Sandbox.kill(id, hot.opts()), true);
    assert.deepEqual(await v1Sandboxes(hot), []);
  } finally {
    await hot.cleanup();
  }
});

test('a suspend whose hangard was killed before its record was written is settled, not lost', async () => {
  const first = await storeEnv(new Hangard(), { HANGAR_SESSION_HOT_RESUME_MINUTES: '0' }).start();
  let second;
  try {
    const sb = await Sandbox.create({ ...first.edgeOpts(), timeoutMs: 120_000 });
    const id = sb.sandboxId;
    await sb.files.write('/home/user/kept.txt', 'written before the crash');
    assert.equal(await sb.pause({ keepMemory: false }), true);
    // What a hangard killed between the session's suspend and the record's write leaves:
    // the session suspended, the record still running.
    const exited = new Promise((r) => first.child.once('exit', r));
    first.child.kill('SIGKILL');
    await exited;
    const file = path.join(first.stateDir, 'e2b', `${id}.json`);
    const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.equal(rec.paused, 'session');
    rec.paused = '';
    fs.writeFileSync(file, JSON.stringify(rec));

    second = await new Hangard({ stateDir: first.stateDir, env: { ...first.extraEnv } }).start();
    // Neither gone nor running: paused, as the suspend would have recorded it, and connect restores it.
    assert.equal((await Sandbox.getInfo(id, second.opts())).state, 'paused');
    assert.equal(JSON.parse(fs.readFileSync(file, 'utf8')).paused, 'session');
    const back = await Sandbox.connect(id, { ...second.edgeOpts(), timeoutMs: 120_000 });
    assert.equal(await back.files.read('/home/user/kept.txt'), 'written before the crash');
    assert.equal(await Sandbox.kill(id, second.opts()), true);
  } finally {
    await second?.cleanup();
    await first.remove();
  }
});
