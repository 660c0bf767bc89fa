// E2B's templates and snapshots on a hangard serving local sandboxes: the
// templates are its environments (HANGAR_ENVIRONMENTS_FILE) and the images
// of its image store (one imported here with the real `hangar image
// import`), asked through the SDK (Template.exists, Sandbox.listSnapshots,
// Sandbox.deleteSnapshot) and raw.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ADMIN_KEY, Hangard, RW_KEY, e2b } from './harness.mjs';

const { Sandbox, Template } = e2b;

let hd, digest;

function assertE2bError(r, status, pattern) {
  assert.equal(r.status, status, r.body);
  const doc = r.json();
  assert.deepEqual(Object.keys(doc).sort(), ['code', 'message'], r.body);
  assert.equal(doc.code, status);
  if (pattern) assert.match(doc.message, pattern);
}

/** `hangar image import` of a small rootfs tarball into the state directory hangard will use. */
function importImage(stateDir, dir, name) {
  const root = path.join(dir, 'rootfs');
  fs.mkdirSync(path.join(root, 'etc'), { recursive: true });
  fs.writeFileSync(path.join(root, 'etc', 'e2b-template'), 'an image as a template\n');
  const tarball = path.join(dir, 'rootfs.tar');
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('HANGAR_') && k !== 'LD_PRELOAD') env[k] = v;
  let r = spawnSync('tar', ['-C', root, '-cf', tarball, '.'], { env });
  assert.equal(r.status, 0, String(r.stderr));
  // The CLI is one of ours: it keeps the sanitizer runtime it was built with.
  r = spawnSync(process.env.HANGAR_CLI, ['image', 'import', tarball, '--name', name], {
    env: { ...env, LD_PRELOAD: process.env.LD_PRELOAD ?? '', HANGAR_STATE_DIR: stateDir },
  });
  assert.equal(r.status, 0, String(r.stderr));
  return r.stdout.toString().trim();
}

before(async () => {
  hd = new Hangard();
  const envs = path.join(hd.dir, 'environments.json');
  fs.writeFileSync(envs, JSON.stringify({ small: { description: 'a small one', env: { FROM_ENV: 'yes' } } }));
  digest = importImage(hd.stateDir, hd.dir, 'e2b-template-test:1');
  assert.match(digest, /^sha256:[0-9a-f]{64}$/);
  hd.extraEnv = { HANGAR_ENVIRONMENTS_FILE: envs };
  await hd.start();
});

after(async () => {
  await hd?.cleanup();
});

const TEMPLATE_KEYS = ['aliases', 'buildCount', 'buildID', 'buildStatus', 'cpuCount', 'createdAt', 'createdBy',
  'diskSizeMB', 'envdVersion', 'lastSpawnedAt', 'memoryMB', 'names', 'public', 'spawnCount', 'templateID',
  'updatedAt'];

test('the templates are the environments and the images, in E2B\'s Template shape', async () => {
  const r = await hd.request('GET', '/e2b/templates');
  assert.equal(r.status, 200, r.body);
  const all = r.json();
  assert.deepEqual(all.map((t) => t.templateID), ['small', digest]);
  for (const t of all) {
    assert.deepEqual(Object.keys(t).sort(), TEMPLATE_KEYS);
    assert.equal(t.buildStatus, 'ready');
    assert.match(t.buildID, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.ok(!Number.isNaN(Date.parse(t.createdAt)), t.createdAt);
  }
  assert.deepEqual(all[0].names, ['small']);
  assert.ok(all[1].names.some((n) => n.endsWith('e2b-template-test:1')), JSON.stringify(all[1].names));
  // The same build id from answer to answer.
  assert.deepEqual((await hd.request('GET', '/e2b/templates')).json().map((t) => t.buildID), all.map((t) => t.buildID));
});

test('v2 pages the templates with X-Next-Token', async () => {
  const first = await hd.request('GET', '/e2b/v2/templates?limit=1');
  assert.equal(first.status, 200, first.body);
  assert.deepEqual(first.json().map((t) => t.templateID), ['small']);
  const token = first.headers.get('x-next-token');
  assert.ok(token, 'no X-Next-Token with one more to come');
  const second = await hd.request('GET', `/e2b/v2/templates?limit=1&nextToken=${encodeURIComponent(token)}`);
  assert.deepEqual(second.json().map((t) => t.templateID), [digest]);
  assert.equal(second.headers.get('x-next-token'), null);
  assertE2bError(await hd.request('GET', '/e2b/v2/templates?limit=0'), 400, /limit/);
  assertE2bError(await hd.request('GET', '/e2b/v2/templates?limit=101'), 400, /limit/);
  assertE2bError(await hd.request('GET', '/e2b/v2/templates?nextToken=x1'), 400, /nextToken/);
  assertE2bError(await hd.request('GET', '/e2b/v2/templates?nextToken=-1'), 400, /nextToken/);
});

test('Template.exists answers for environments, image names and digests, and base', async () => {
  assert.equal(await Template.exists('small', hd.opts()), true);
  assert.equal(await Template.exists('e2b-template-test:1', hd.opts()), true);
  assert.equal(await Template.exists(digest, hd.opts()), true);
  assert.equal(await Template.exists('base', hd.opts()), true);
  assert.equal(await Template.exists('no-such-template', hd.opts()), false);
  const alias = await hd.request('GET', '/e2b/templates/aliases/e2b-template-test:1');
  assert.deepEqual(alias.json(), { templateID: digest, public: false });
  assert.deepEqual((await hd.request('GET', '/e2b/templates/aliases/small')).json(), { templateID: 'small', public: false });
});

test('a template with its one build; 404 for a name nothing has', async () => {
  const r = await hd.request('GET', '/e2b/templates/small');
  assert.equal(r.status, 200, r.body);
  const t = r.json();
  assert.equal(t.templateID, 'small');
  assert.equal(t.builds.length, 1);
  assert.equal(t.builds[0].status, 'ready');
  const listed = (await hd.request('GET', '/e2b/templates')).json().find((x) => x.templateID === 'small');
  assert.equal(t.builds[0].buildID, listed.buildID);
  assertE2bError(await hd.request('GET', '/e2b/templates/nothing-here'), 404, /nothing-here/);
  assertE2bError(await hd.request('GET', '/e2b/templates/aliases/nothing-here'), 404);
});

test('a create names a template as listed: the environment applies', async () => {
  const sb = await Sandbox.create('small', { ...hd.opts(), timeoutMs: 60_000 });
  try {
    assert.equal((await Sandbox.getInfo(sb.sandboxId, hd.opts())).templateId, 'small');
    const r = await hd.v1('POST', `/v1/sandboxes/${sb.sandboxId}/exec`, { command: 'echo $FROM_ENV' });
    assert.equal(r.json().stdout, 'yes\n');
  } finally {
    await sb.kill();
  }
});

test('odd and hostile names are refused or not found, never a path', async () => {
  assertE2bError(await hd.request('GET', `/e2b/templates/${'a'.repeat(600)}`), 400, /templateID/);
  assertE2bError(await hd.request('GET', '/e2b/templates/%2e%2e'), 404);
  assertE2bError(await hd.request('GET', '/e2b/templates/sha256:' + '0'.repeat(64)), 404);
  assertE2bError(await hd.request('DELETE', '/e2b/templates/..%2f..%2fstate'), 404);
  assertE2bError(await hd.request('GET', '/e2b/templates', { key: null }), 401);
  assertE2bError(await hd.request('GET', '/e2b/templates', { key: RW_KEY }), 403, /sandboxes scope/);
});

test('builds stay 501 and point at hangar environment publish', async () => {
  assertE2bError(await hd.request('POST', '/e2b/v3/templates', { body: {} }), 501, /hangar environment publish/);
  assertE2bError(await hd.request('POST', '/e2b/v2/templates', { body: {} }), 501, /hangar environment publish/);
});

test('deleting: an environment or base is refused, an image is removed', async () => {
  assertE2bError(await hd.request('DELETE', '/e2b/templates/small'), 400, /HANGAR_ENVIRONMENTS_FILE/);
  assertE2bError(await hd.request('DELETE', '/e2b/templates/base'), 400);
  assert.equal((await hd.request('GET', '/e2b/templates/small')).status, 200);
  const r = await hd.request('DELETE', '/e2b/templates/e2b-template-test:1');
  assert.equal(r.status, 204, r.body);
  assert.deepEqual((await hd.v1('GET', '/v1/images')).json().images, []);
  assert.deepEqual((await hd.request('GET', '/e2b/templates')).json().map((t) => t.templateID), ['small']);
  assert.equal(await Template.exists(digest, hd.opts()), false);
  assertE2bError(await hd.request('DELETE', `/e2b/templates/${digest}`), 404);
});

test('GET /snapshots: none taken, filters and pages checked', async () => {
  assert.deepEqual(await Sandbox.listSnapshots(hd.opts()).nextItems(), []);
  const r = await hd.request('GET', '/e2b/snapshots?sandboxID=sb-1&name=x');
  assert.equal(r.status, 200, r.body);
  assert.deepEqual(r.json(), []);
  assertE2bError(await hd.request('GET', '/e2b/snapshots?limit=0'), 400, /limit/);
  assertE2bError(await hd.request('GET', '/e2b/snapshots?nextToken=nodot'), 400, /nextToken/);
  const admin = await hd.request('GET', '/e2b/snapshots', { key: null, headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
  assert.equal(admin.status, 200, admin.body);
  assert.deepEqual(admin.json(), []);
});

test('GET /snapshots reads only well-formed records of the caller', async () => {
  const dir = path.join(hd.stateDir, 'e2b', 'snapshots');
  fs.mkdirSync(dir, { recursive: true });
  const rec = (o) => JSON.stringify({ snapshotID: 'x', names: [], sandboxID: 'sb-1', caller: 'e2b', createdUs: 1, ...o });
  fs.writeFileSync(path.join(dir, 'a.json'), rec({ snapshotID: 'mine:default', names: ['mine'], createdUs: 2 }));
  fs.writeFileSync(path.join(dir, 'b.json'), rec({ snapshotID: 'theirs:default', caller: 'boss' }));
  fs.writeFileSync(path.join(dir, 'c.json'), '{"snapshotID": 1');
  fs.writeFileSync(path.join(dir, 'd.json'), rec({ names: [7] }));
  fs.writeFileSync(path.join(dir, 'e.json'), 'x'.repeat(1 << 20));
  fs.symlinkSync(path.join(dir, 'a.json'), path.join(dir, 'f.json'));
  fs.writeFileSync(path.join(dir, 'g.json'), rec({ snapshotID: 'older:default', createdUs: 1 }));
  try {
    const all = await Sandbox.listSnapshots(hd.opts()).nextItems();
    assert.deepEqual(all, [{ snapshotId: 'mine:default', names: ['mine'] }, { snapshotId: 'older:default', names: [] }]);
    // Pages of one: the token leads past the first, to the second only.
    const first = await hd.request('GET', '/e2b/snapshots?limit=1');
    assert.deepEqual(first.json().map((s) => s.snapshotID), ['mine:default']);
    const token = first.headers.get('x-next-token');
    assert.ok(token);
    const second = await hd.request('GET', `/e2b/snapshots?limit=1&nextToken=${encodeURIComponent(token)}`);
    assert.deepEqual(second.json().map((s) => s.snapshotID), ['older:default']);
    assert.equal(second.headers.get('x-next-token'), null);
    // name: the name, or the name with the default tag; nothing else.
    for (const [q, want] of [['mine', ['mine:default']], ['mine:default', ['mine:default']], ['mine:v2', []],
      ['theirs:default', []], ['%00', []]]) {
      const r = await hd.request('GET', `/e2b/snapshots?name=${encodeURIComponent(q)}`);
      assert.equal(r.status, 200, r.body);
      assert.deepEqual(r.json().map((s) => s.snapshotID), want, q);
    }
    // A snapshot's name is a templateID; the other caller's is not this caller's to list, but names resolve.
    assert.deepEqual((await hd.request('GET', '/e2b/templates/aliases/mine')).json(), { templateID: 'mine:default', public: false });
    assertE2bError(await hd.request('DELETE', '/e2b/templates/mine:default'), 400, /not deleted through hangar/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
