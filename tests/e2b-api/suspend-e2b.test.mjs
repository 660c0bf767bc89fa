// E2B's pause with memory: false on a sandbox of the e2b provider (the
// cloud fake), with a checkpoint store set: a session suspend as for local
// sandboxes (suspend.test.mjs), its checkpoint written to the store, and
// connect restoring it into a new platform sandbox under the same
// sandboxID. The fake's sandboxes share the host's filesystem, so the file
// is removed from the host while suspended: only the checkpoint brings it back.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { Fake, Hangard, e2b } from './harness.mjs';

const { Sandbox } = e2b;
let fake, hd, store;

/** Every file under dir, relative to it. */
function filesUnder(dir) {
  return fs.readdirSync(dir, { recursive: true }).filter((f) => fs.statSync(path.join(dir, f)).isFile());
}

before(async () => {
  fake = await new Fake('cloud').start();
  hd = new Hangard();
  store = path.join(hd.dir, 'checkpoints');
  fs.mkdirSync(store);
  Object.assign(hd.extraEnv, fake.env(), {
    HANGAR_CHECKPOINT_STORE: `file://${store}`,
    HANGAR_SESSION_HOT_RESUME_MINUTES: '0',
  });
  await hd.start();
});

after(async () => {
  await hd?.cleanup();
  await fake?.stop();
});

test('memory: false then connect restores the platform sandbox from the checkpoint store', async () => {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  const id = sb.sandboxId;
  let kept;
  try {
    // What a suspend keeps: /home/user, E2B's home (the host's here).
    kept = `/home/user/hangar-suspend-e2b-${id}.txt`;
    await sb.files.write(kept, 'written before the pause');
    assert.deepEqual(filesUnder(store), []);

    assert.equal(await sb.pause({ keepMemory: false }), true);
    const ses = (await hd.v1('GET', `/v1/sessions/e2b-${id}`)).json();
    assert.equal(ses.state, 'suspended');
    assert.notEqual(ses.checkpoint, '');
    // The session went through the store: its checkpoint is there.
    const stored = filesUnder(store);
    assert.ok(stored.length > 0, 'nothing in the checkpoint store');
    assert.ok(stored.some((f) => f.includes(ses.checkpoint)), `checkpoint ${ses.checkpoint} not in ${stored}`);
    // No platform sandbox runs for it.
    const platform = await (await fetch(`http://127.0.0.1:${fake.api}/_fake/sandboxes`)).json();
    assert.deepEqual(platform.filter((s) => s.state === 'running'), []);
    fs.rmSync(kept);

    const back = await Sandbox.connect(id, { ...hd.edgeOpts(), timeoutMs: 120_000 });
    assert.equal(back.sandboxId, id);
    assert.equal(await back.files.read(kept), 'written before the pause');
    assert.equal((await hd.v1('GET', `/v1/sessions/e2b-${id}`)).json().last_resume, 'cold');
    const now = (await hd.v1('GET', '/v1/sandboxes')).json().sandboxes;
    assert.equal(now.length, 1);
    assert.equal(now[0].provider, 'e2b');
  } finally {
    await Sandbox.kill(id, hd.opts());
    if (kept) fs.rmSync(kept, { force: true });
  }
});
