// Hostile and careless requests to /e2b, raw: credentials, scopes, ids with
// odd bytes, filters and bodies that are not what they should be. Each
// answer is E2B's error shape ({code, message}, code the HTTP status), and
// nothing reaches the state directory that should not.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { ADMIN_KEY, E2B_KEY, Hangard, RW_KEY } from './harness.mjs';

let hd;

before(async () => {
  hd = await new Hangard().start();
});

after(async () => {
  await hd?.cleanup();
});

function assertE2bError(r, status, pattern) {
  assert.equal(r.status, status, r.body);
  const doc = r.json();
  assert.deepEqual(Object.keys(doc).sort(), ['code', 'message'], r.body);
  assert.equal(doc.code, status);
  if (pattern) assert.match(doc.message, pattern);
}

test('no key, a wrong key, an empty bearer: 401 in E2B\'s shape', async () => {
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: null }), 401, /API key is required/);
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: 'e2b_' + 'a'.repeat(40) }), 401, /not valid/);
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: E2B_KEY + 'x' }), 401, /not valid/);
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: null, headers: { Authorization: 'Bearer ' } }), 401);
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: null, headers: { Authorization: `Basic ${E2B_KEY}` } }), 401);
});

test('sandboxes is the only scope /e2b takes, and it grants nothing else', async () => {
  assertE2bError(await hd.request('GET', '/e2b/v2/sandboxes', { key: RW_KEY }), 403, /sandboxes scope/);
  assertE2bError(await hd.request('POST', '/e2b/v2/sandboxes', { key: RW_KEY, body: { templateID: 'base' } }), 403);
  // admin implies it.
  assert.equal((await hd.request('GET', '/e2b/v2/sandboxes', { key: ADMIN_KEY })).status, 200);
  // A sandboxes token on /v1 is refused, as a bearer token or as X-API-Key.
  const v1 = await hd.request('GET', '/v1/sandboxes', { key: null, headers: { Authorization: `Bearer ${E2B_KEY}` } });
  assert.equal(v1.status, 403, v1.body);
  assert.equal(v1.json().error.kind, 'forbidden');
  assert.equal((await hd.request('GET', '/v1/sandboxes', { key: E2B_KEY })).status, 401);
});

test('ids with odd bytes are refused before anything reads them', async () => {
  const before = fs.readdirSync(hd.stateDir).sort();
  const bad = [
    '..%2F..%2Fetc%2Fpasswd', '..', 'sb-%00x', 'sb-%ff', 'sb%2E.json', 'a'.repeat(65), 'sb-%20x', 'sb-%0Ax', '%E2%80%AE',
  ];
  for (const id of bad) {
    for (const [method, suffix, body] of [['GET', '', undefined], ['DELETE', '', undefined],
      ['POST', '/pause', {}], ['POST', '/timeout', { timeout: 5 }], ['POST', '/v2connect', { timeout: 5 }]]) {
      const p = suffix === '/v2connect' ? `/e2b/v2/sandboxes/${id}/connect` : `/e2b/sandboxes/${id}${suffix}`;
      const r = await hd.request(method, p, { body });
      // 400 for a malformed id, 404 for a path that names no route.
      assert.ok(r.status === 400 || r.status === 404, `${method} ${p}: ${r.status} ${r.body}`);
      assertE2bError(r, r.status);
    }
  }
  assert.deepEqual(fs.readdirSync(hd.stateDir).sort(), before);
  assert.deepEqual(fs.readdirSync(path.join(hd.stateDir, 'e2b')), []);
});

test('filters and pages that are not what they should be: 400', async () => {
  for (const q of ['state=running,frozen', 'state=', 'limit=0', 'limit=101', 'limit=1x', 'nextToken=garbage',
    'nextToken=12.%2F..%2Fx', 'metadata=novalue', 'metadata=k%3D%2500', 'metadata=%3Dv']) {
    const r = await hd.request('GET', `/e2b/v2/sandboxes?${q}`);
    if (q === 'state=') {
      // An empty state list is no filter.
      assert.equal(r.status, 200, `${q}: ${r.body}`);
      continue;
    }
    assertE2bError(r, 400);
  }
});

test('bodies: strict JSON, known members, bounded metadata', async () => {
  const cases = [
    ['{"templateID":"base","templateID":"x"}', /duplicate|not JSON/],
    ['{"templateID":"base","bogus":1}', /unknown field/],
    ['[1]', /object/],
    ['{"timeout":5}', /templateID/],
    ['{"templateID":"base","timeout":-1}', /timeout/],
    ['{"templateID":"base","timeout":1.5}', /timeout/],
    ['{"templateID":"base","metadata":{"k":1}}', /metadata/],
    ['{"templateID":"base","metadata":{"":"v"}}', /metadata/],
    ['{"templateID":"base","envVars":{"A=B":"c"}}', /envVars/],
    ['{"templateID":"base","network":{"allowOut":["0.0.0.0/0"]}}', /network/],
    ['{"templateID":"base","mcp":{"x":{}}}', /mcp/],
    ['{"templateID":"base","autoResume":{"enabled":true}}', /autoResume/],
  ];
  const many = {};
  for (let i = 0; i < 65; i++) many[`k${i}`] = 'v';
  cases.push([JSON.stringify({ templateID: 'base', metadata: many }), /metadata/]);
  cases.push([JSON.stringify({ templateID: 'base', metadata: { k: 'v'.repeat(2049) } }), /metadata/]);
  for (const [body, pattern] of cases) {
    const r = await hd.request('POST', '/e2b/v2/sandboxes', { body, headers: { 'Content-Type': 'application/json' } });
    assertE2bError(r, 400, pattern);
  }
  // None of them made a sandbox.
  const listed = await hd.v1('GET', '/v1/sandboxes');
  assert.deepEqual(listed.json().sandboxes, []);
});

test('what does not map answers 501 with where to go', async () => {
  assertE2bError(await hd.request('POST', '/e2b/v3/templates', { body: {} }), 501, /templateID/);
  assertE2bError(await hd.request('GET', '/e2b/api-keys'), 501, /hash-token/);
  assertE2bError(await hd.request('PUT', '/e2b/sandboxes/sb-0000000000000000/network', { body: {} }), 501);
  // Unknown paths and methods are E2B-shaped too.
  assertE2bError(await hd.request('GET', '/e2b/nothing-here'), 404);
  assertE2bError(await hd.request('PATCH', '/e2b/sandboxes'), 405);
});

test('a record left by a sandbox that ended is forgotten by the next list', async () => {
  const made = await hd.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', timeout: 60 } });
  assert.equal(made.status, 201, made.body);
  const id = made.json().sandboxID;
  const file = path.join(hd.stateDir, 'e2b', `${id}.json`);
  assert.ok(fs.existsSync(file));
  // Killed outside /e2b: the record stays until a whole list shows it gone.
  assert.equal((await hd.v1('DELETE', `/v1/sandboxes/${id}`)).status, 204);
  const old = new Date(Date.now() - 10_000);
  fs.utimesSync(file, old, old);
  assert.equal((await hd.request('GET', '/e2b/v2/sandboxes')).status, 200);
  assert.ok(!fs.existsSync(file), 'the record of a killed sandbox is still there');
});

test('an Idempotency-Key reused for another body, or twice at once, makes one sandbox', async () => {
  const create = (key, body) => hd.request('POST', '/e2b/v2/sandboxes', { body, headers: { 'Idempotency-Key': key } });
  const made = [];
  try {
    const first = await create('k-body', { templateID: 'base', timeout: 60 });
    assert.equal(first.status, 201, first.body);
    made.push(first.json().sandboxID);
    assertE2bError(await create('k-body', { templateID: 'base', timeout: 61 }), 422, /another request body/);

    // Two at once: one creates; the other waits for nothing and is told so,
    // or comes after and gets the same sandbox.
    const both = await Promise.all([1, 2].map(() => create('k-race', { templateID: 'base', timeout: 60 })));
    const ok = both.filter((r) => r.status === 201).map((r) => r.json().sandboxID);
    for (const r of both.filter((x) => x.status !== 201)) assertE2bError(r, 409, /running/);
    assert.ok(ok.length >= 1 && new Set(ok).size === 1, both.map((r) => r.body).join(' | '));
    made.push(ok[0]);

    for (const bad of ['', 'x'.repeat(256)]) {
      assertE2bError(await create(bad, { templateID: 'base' }), 400, /Idempotency-Key/);
    }
    const all = (await hd.v1('GET', '/v1/sandboxes')).json().sandboxes.map((s) => s.id).sort();
    assert.deepEqual(all, [...made].sort());
  } finally {
    for (const id of made) await hd.v1('DELETE', `/v1/sandboxes/${id}`);
  }
});
