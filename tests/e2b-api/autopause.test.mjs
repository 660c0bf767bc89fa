// autoPause: a sandbox created with it is paused, not killed, when its
// timeout ends, and connect resumes it as it was. Through the SDK
// (lifecycle.onTimeout, as npm e2b spells it) and raw, on local sandboxes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Hangard, e2b, waitFor } from './harness.mjs';

const { Sandbox } = e2b;

let hd;

before(async () => {
  hd = await new Hangard().start();
});

after(async () => {
  await hd?.cleanup();
});

async function v1State(id) {
  const r = await hd.v1('GET', `/v1/sandboxes/${id}`);
  assert.equal(r.status, 200, r.body);
  return r.json().state;
}

async function exec(id, command) {
  const r = await hd.v1('POST', `/v1/sandboxes/${id}/exec`, { command });
  assert.equal(r.status, 200, r.body);
  return r.json();
}

test('the SDK\'s onTimeout pause: paused when the create\'s timeout ends', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 1_500, lifecycle: { onTimeout: 'pause' } });
  try {
    const info = await Sandbox.getInfo(sb.sandboxId, hd.opts());
    assert.equal(info.lifecycle.onTimeout, 'pause');
    const end = info.endAt.getTime() - Date.now();
    assert.ok(end <= 2_000, `endAt ${end} ms away, asked 1.5 s`);
    await waitFor(async () => (await v1State(sb.sandboxId)) === 'paused',
      { timeoutMs: 20_000, intervalMs: 100, what: 'the autoPause at the timeout' });
    assert.equal((await Sandbox.getInfo(sb.sandboxId, hd.opts())).state, 'paused');
  } finally {
    await Sandbox.kill(sb.sandboxId, hd.opts());
  }
});

test('setTimeout moves the pause; connect resumes it with its memory', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000, lifecycle: { onTimeout: 'pause' } });
  try {
    // A process whose memory only a pause with memory keeps.
    await exec(sb.sandboxId, 'sleep 600 >/dev/null 2>&1 & echo $! > /tmp/e2b-autopause-pid');
    await sb.setTimeout(1_000);
    await waitFor(async () => (await v1State(sb.sandboxId)) === 'paused',
      { timeoutMs: 20_000, intervalMs: 100, what: 'the pause after setTimeout' });
    const back = await Sandbox.connect(sb.sandboxId, { ...hd.opts(), timeoutMs: 60_000 });
    assert.equal(back.sandboxId, sb.sandboxId);
    assert.equal(await v1State(sb.sandboxId), 'running');
    const pid = (await exec(sb.sandboxId, 'cat /tmp/e2b-autopause-pid')).stdout.trim();
    assert.match(pid, /^[0-9]+$/);
    assert.equal((await exec(sb.sandboxId, `kill -0 ${pid} && echo alive`)).stdout, 'alive\n');
    // The new timeout stands: the pause that was due is not made again.
    const again = await Sandbox.getInfo(sb.sandboxId, hd.opts());
    assert.equal(again.state, 'running');
    assert.ok(again.endAt.getTime() - Date.now() > 30_000, String(again.endAt));
  } finally {
    await Sandbox.kill(sb.sandboxId, hd.opts());
  }
});

test('a sandbox without autoPause is still killed at its timeout', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
  assert.equal((await Sandbox.getInfo(sb.sandboxId, hd.opts())).lifecycle.onTimeout, 'kill');
  await sb.setTimeout(1_000);
  await waitFor(async () => (await hd.request('GET', `/e2b/sandboxes/${sb.sandboxId}`)).status === 404,
    { timeoutMs: 20_000, intervalMs: 100, what: 'the end of the sandbox without autoPause' });
  await assert.rejects(Sandbox.getInfo(sb.sandboxId, hd.opts()), e2b.NotFoundError);
});

test('raw: autoPause on create, the library\'s lifetime past the pause, refreshes extend it', async () => {
  const r = await hd.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', timeout: 30, autoPause: true } });
  assert.equal(r.status, 201, r.body);
  const id = r.json().sandboxID;
  try {
    // hangard, not the library, ends it at 30 s: the library's end is later.
    const v1 = (await hd.v1('GET', `/v1/sandboxes/${id}`)).json();
    assert.ok(v1.expires_at_us / 1000 - Date.now() > 60_000, `library lifetime ${v1.expires_at_us}`);
    const before = Date.parse((await hd.request('GET', `/e2b/sandboxes/${id}`)).json().endAt);
    assert.equal((await hd.request('POST', `/e2b/sandboxes/${id}/refreshes`, { body: { duration: 600 } })).status, 204);
    const after = (await hd.request('GET', `/e2b/sandboxes/${id}`)).json();
    assert.ok(Date.parse(after.endAt) - before > 500_000, `${after.endAt} after a refresh of 600 s`);
    assert.deepEqual(after.lifecycle, { autoResume: false, onTimeout: 'pause' });
    // A refresh never shortens it.
    assert.equal((await hd.request('POST', `/e2b/sandboxes/${id}/refreshes`, { body: { duration: 1 } })).status, 204);
    assert.equal((await hd.request('GET', `/e2b/sandboxes/${id}`)).json().endAt, after.endAt);
  } finally {
    await hd.request('DELETE', `/e2b/sandboxes/${id}`);
  }
});

test('a pause that cannot be made is refused at create, and nothing is left', async () => {
  // The local provider pauses with memory only, and no checkpoint store is
  // configured for a session suspend.
  await assert.rejects(
    Sandbox.create({ ...hd.opts(), timeoutMs: 30_000, lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } }),
    (err) => {
      assert.match(String(err), /autoPauseMemory: false: .*HANGAR_CHECKPOINT_STORE/);
      return true;
    });
  assert.deepEqual((await hd.v1('GET', '/v1/sandboxes')).json().sandboxes, []);
  const bad = await hd.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', autoPause: 'yes' } });
  assert.equal(bad.status, 400, bad.body);
});

test('raw: autoPause on resume of a paused sandbox, refused on a running one', async () => {
  const r = await hd.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', timeout: 60 } });
  assert.equal(r.status, 201, r.body);
  const id = r.json().sandboxID;
  try {
    const running = await hd.request('POST', `/e2b/sandboxes/${id}/connect`, { body: { timeout: 60, autoPause: true } });
    assert.equal(running.status, 400, running.body);
    assert.equal((await hd.request('GET', `/e2b/sandboxes/${id}`)).json().lifecycle.onTimeout, 'kill');
    assert.equal((await hd.request('POST', `/e2b/sandboxes/${id}/pause`, { body: {} })).status, 204);
    const back = await hd.request('POST', `/e2b/sandboxes/${id}/resume`, { body: { timeout: 1, autoPause: true } });
    assert.equal(back.status, 201, back.body);
    assert.equal((await hd.request('GET', `/e2b/sandboxes/${id}`)).json().lifecycle.onTimeout, 'pause');
    await waitFor(async () => (await v1State(id)) === 'paused',
      { timeoutMs: 20_000, intervalMs: 100, what: 'the pause of a sandbox resumed with autoPause' });
  } finally {
    await hd.request('DELETE', `/e2b/sandboxes/${id}`);
  }
});
