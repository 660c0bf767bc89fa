// The same SDK with hangard's sandboxes on the e2b provider, against the
// e2b fake of each flavour: what the local provider cannot do (native
// forks, snapshots) and what one flavour has and the other lacks.

import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';

import { ADMIN_KEY, FAKE_API_KEY, Fake, Hangard, e2b, scratchPath, waitFor } from './harness.mjs';

const { Sandbox } = e2b;

async function exec(hd, id, command) {
  const r = await hd.v1('POST', `/v1/sandboxes/${id}/exec`, { command });
  assert.equal(r.status, 200, r.body);
  return r.json();
}

/*
 * The SDK's envd traffic through hangard's edge to a platform's sandbox:
 * the edge forwards to the platform's envd URL with the platform's tokens,
 * which the SDK never holds.
 */
async function throughTheEdge(hd) {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  const file = `${scratchPath('edge')}.txt`;
  try {
    assert.equal((await sb.commands.run('echo platform')).stdout, 'platform\n');
    await sb.files.write(file, 'via the platform');
    assert.equal((await exec(hd, sb.sandboxId, `cat ${file}`)).stdout, 'via the platform');
    assert.equal(await sb.files.read(file), 'via the platform');
    const other = new Sandbox({ ...hd.edgeOpts(), sandboxId: sb.sandboxId, envdAccessToken: 'f'.repeat(64), envdVersion: '0.6.4' });
    await assert.rejects(other.commands.run('true'), e2b.AuthenticationError);
  } finally {
    try {
      await sb.files.remove(file);
    } finally {
      await sb.kill();
    }
  }
}

describe('on the cloud fake', () => {
  let fake, hd;
  before(async () => {
    fake = await new Fake('cloud').start();
    hd = await new Hangard({ env: fake.env() }).start();
  });
  after(async () => {
    await hd?.cleanup();
    await fake?.stop();
  });

  test('commands and files go through the edge to the platform', () => throughTheEdge(hd));

  test('the edge asks the platform where a sandbox is once, not on every request', async () => {
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    const api = (method, url, body) => fetch(`http://127.0.0.1:${fake.api}${url}`, {
      method, headers: { 'X-API-Key': FAKE_API_KEY, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    try {
      assert.equal((await api('GET', `/sandboxes/${sb.sandboxId}`)).status, 200, 'the platform knows the sandbox by its id');
      // The platform's next look-up of a sandbox fails; the edge's second request must not need one.
      let judged = false;
      for (let attempt = 0; attempt < 5 && !judged; attempt++) {
        assert.equal(await sb.isRunning(), true);
        const t0 = performance.now();
        assert.equal((await api('POST', '/_fake/faults', { route: 'get', status: 500, count: 1 })).status, 204);
        const running = await sb.isRunning();
        // Only a request well within the moment a target is kept says anything about keeping it.
        judged = performance.now() - t0 < 400;
        if (judged) assert.equal(running, true, 'the edge looked the sandbox up again');
        const check = await api('GET', `/sandboxes/${sb.sandboxId}`);
        if (judged) assert.equal(check.status, 500, 'the fault was taken by a look-up of the edge');
        await api('DELETE', '/_fake/faults');
      }
      assert.ok(judged, 'no request came soon enough after another to judge');
    } finally {
      await api('DELETE', '/_fake/faults');
      await sb.kill();
    }
  });

  test('a sandbox killed behind the edge\'s back fails through it at once', async () => {
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    assert.equal((await sb.commands.run('echo kept')).stdout, 'kept\n');
    assert.equal((await hd.v1('DELETE', `/v1/sandboxes/${sb.sandboxId}`)).status, 204);
    await assert.rejects(sb.commands.run('true'), e2b.SandboxNotFoundError);
    assert.equal(await sb.isRunning(), false);
  });

  test('create, pause and connect run on the e2b provider', async () => {
    const sb = await Sandbox.create({ ...hd.opts(), metadata: { on: 'cloud' }, timeoutMs: 120_000 });
    try {
      const v1 = (await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json();
      assert.equal(v1.provider, 'e2b');
      assert.equal((await Sandbox.getInfo(sb.sandboxId, hd.opts())).metadata.on, 'cloud');
      assert.equal(await sb.pause(), true);
      assert.equal((await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json().state, 'paused');
      await Sandbox.connect(sb.sandboxId, hd.opts());
      assert.equal((await exec(hd, sb.sandboxId, 'echo back')).stdout, 'back\n');
    } finally {
      await sb.kill();
    }
  });

  test('fork gives working sandboxes with the parent\'s metadata and their own tokens', async () => {
    const parent = await Sandbox.create({ ...hd.opts(), metadata: { family: 'f1' }, timeoutMs: 120_000 });
    const kids = [];
    const mark = scratchPath('fork-mark');
    try {
      await exec(hd, parent.sandboxId, `echo inherited > ${mark}`);
      const forks = await Sandbox.fork(parent.sandboxId, { ...hd.opts(), count: 2, timeoutMs: 90_000 });
      assert.equal(forks.length, 2);
      for (const f of forks) {
        assert.ok(!(f instanceof Error), String(f));
        kids.push(f);
      }
      const ids = new Set([parent.sandboxId, ...kids.map((k) => k.sandboxId)]);
      assert.equal(ids.size, 3);
      const tokens = new Set([parent.envdAccessToken, ...kids.map((k) => k.envdAccessToken)]);
      assert.equal(tokens.size, 3, 'a fork shares a token');
      for (const k of kids) {
        const info = await Sandbox.getInfo(k.sandboxId, hd.opts());
        assert.deepEqual(info.metadata, { family: 'f1' });
        const v1 = (await hd.v1('GET', `/v1/sandboxes/${k.sandboxId}`)).json();
        const left = v1.expires_at_us / 1000 - Date.now();
        assert.ok(left > 60_000 && left <= 91_000, `a fork's lifetime left ${left} ms, asked 90 s`);
        assert.equal((await exec(hd, k.sandboxId, 'echo forked')).stdout, 'forked\n');
      }
      const listed = await Sandbox.list({ ...hd.opts(), query: { metadata: { family: 'f1' } } }).nextItems();
      assert.deepEqual(listed.map((s) => s.sandboxId).sort(), [...ids].sort());
    } finally {
      try {
        await exec(hd, parent.sandboxId, `rm -f ${mark}`);
      } finally {
        for (const k of kids) await k.kill();
        await parent.kill();
      }
    }
  });

  test('a snapshot is a templateID a create can name', async () => {
    const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 120_000 });
    let clone;
    try {
      const snap = await sb.createSnapshot({ name: 'e2b-snappy' });
      assert.ok(snap.snapshotId, JSON.stringify(snap));
      assert.deepEqual(snap.names, ['e2b-snappy']);
      clone = await Sandbox.create(snap.snapshotId, { ...hd.opts(), timeoutMs: 60_000 });
      assert.notEqual(clone.sandboxId, sb.sandboxId);
      const info = await Sandbox.getInfo(clone.sandboxId, hd.opts());
      assert.equal(info.templateId, snap.snapshotId);
      assert.equal((await exec(hd, clone.sandboxId, 'echo from-snapshot')).stdout, 'from-snapshot\n');
    } finally {
      await clone?.kill();
      await sb.kill();
    }
  });

  test('the snapshots taken are listed to their taker and are templates', async () => {
    const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 120_000 });
    const other = await Sandbox.create({ ...hd.opts(), timeoutMs: 120_000 });
    try {
      const a = await sb.createSnapshot({ name: 'e2b-listed-a' });
      const b = await sb.createSnapshot({ name: 'e2b-listed-b' });
      const c = await other.createSnapshot();
      const mine = await Sandbox.listSnapshots({ ...hd.opts(), sandboxId: sb.sandboxId }).nextItems();
      assert.deepEqual(mine.map((s) => s.snapshotId).sort(), [a.snapshotId, b.snapshotId].sort());
      assert.deepEqual(mine.find((s) => s.snapshotId === a.snapshotId).names, ['e2b-listed-a']);
      const named = await Sandbox.listSnapshots({ ...hd.opts(), name: 'e2b-listed-b' }).nextItems();
      assert.deepEqual(named.map((s) => s.snapshotId), [b.snapshotId]);
      assert.deepEqual((await sb.listSnapshots().nextItems()).length, 2);
      // Pages of one, newest first, through every snapshot taken.
      const seen = [];
      const pages = Sandbox.listSnapshots({ ...hd.opts(), limit: 1 });
      while (pages.hasNext) seen.push(...(await pages.nextItems()).map((s) => s.snapshotId));
      assert.ok(seen.length >= 3, JSON.stringify(seen));
      assert.equal(new Set(seen).size, seen.length, 'a snapshot on two pages');
      assert.ok([a, b, c].every((s) => seen.includes(s.snapshotId)), JSON.stringify(seen));
      // Another token took none of them.
      const admin = await hd.request('GET', '/e2b/snapshots', { key: null, headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
      assert.equal(admin.status, 200, admin.body);
      assert.deepEqual(admin.json(), []);
      // A snapshot's name stands for it as a template; deleting it is refused, not faked.
      assert.deepEqual((await hd.request('GET', '/e2b/templates/aliases/e2b-listed-a')).json(),
        { templateID: a.snapshotId, public: false });
      assert.equal(await e2b.Template.exists('e2b-listed-a', hd.opts()), true);
      await assert.rejects(Sandbox.deleteSnapshot(a.snapshotId, hd.opts()), (err) => {
        assert.match(String(err), /not deleted through hangar/);
        return true;
      });
      assert.equal((await Sandbox.listSnapshots({ ...hd.opts(), sandboxId: sb.sandboxId }).nextItems()).length, 2);
    } finally {
      await other.kill();
      await sb.kill();
    }
  });

  test('autoPause keeping the filesystem only: paused at the timeout, connect boots it with new tokens', async () => {
    const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000,
      lifecycle: { onTimeout: { action: 'pause', keepMemory: false } } });
    const kept = scratchPath('fs-autopause');
    try {
      await exec(hd, sb.sandboxId, `echo kept > ${kept}`);
      await sb.setTimeout(1_000);
      await waitFor(async () => (await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json().state === 'paused',
        { timeoutMs: 20_000, intervalMs: 100, what: 'the filesystem pause at the timeout' });
      assert.equal((await Sandbox.getInfo(sb.sandboxId, hd.opts())).state, 'paused');
      const back = await Sandbox.connect(sb.sandboxId, { ...hd.opts(), timeoutMs: 60_000 });
      assert.notEqual(back.envdAccessToken, sb.envdAccessToken, 'a cold boot keeps the old tokens');
      assert.equal((await exec(hd, sb.sandboxId, `cat ${kept}`)).stdout, 'kept\n');
    } finally {
      try {
        // Through the sandbox, unless a failure above left it paused.
        if ((await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json().state === 'running') {
          await exec(hd, sb.sandboxId, `rm -f ${kept}`);
        }
      } finally {
        await sb.kill();
      }
    }
  });

  test('the provider\'s templates are listed', async () => {
    const r = await hd.request('GET', '/e2b/templates');
    assert.equal(r.status, 200, r.body);
    const v1 = await hd.v1('GET', '/v1/templates');
    assert.equal(v1.status, 200, v1.body);
    const ids = r.json().map((t) => t.templateID);
    for (const t of v1.json().templates) assert.ok(ids.includes(t.template_id ?? t.id), `${JSON.stringify(t)} not in ${ids}`);
  });
});

describe('on the cube fake', () => {
  let fake, hd;
  before(async () => {
    fake = await new Fake('cube').start();
    hd = await new Hangard({ env: fake.env() }).start();
  });
  after(async () => {
    await hd?.cleanup();
    await fake?.stop();
  });

  test('commands and files go through the edge to the platform', () => throughTheEdge(hd));

  test('a fork the flavour cannot make is refused, and nothing is made', async () => {
    const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
    try {
      await assert.rejects(Sandbox.fork(sb.sandboxId, { ...hd.opts(), count: 2 }), (err) => {
        assert.equal(err.statusCode, 501, String(err));
        return true;
      });
      const all = (await hd.v1('GET', '/v1/sandboxes')).json().sandboxes;
      assert.deepEqual(all.map((s) => s.id), [sb.sandboxId]);
    } finally {
      await sb.kill();
    }
  });
});
