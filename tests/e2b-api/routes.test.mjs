// Promises that cannot drift: the /e2b routes hangard serves are the table
// of hangard(8), E2B COMPATIBILITY, both ways; and the envd version /e2b
// announces is the one hangar-envd implements.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';

import { Hangard, hangardBinary } from './harness.mjs';

function served() {
  const r = spawnSync(hangardBinary(), ['routes', 'e2b']);
  assert.equal(r.status, 0, String(r.stderr));
  return r.stdout.toString().trim().split('\n').sort();
}

test('hangard(8) lists exactly the /e2b routes served', () => {
  const page = fs.readFileSync(path.join(process.env.HANGAR_SOURCE_ROOT, 'man', 'hangard.8'), 'utf8');
  const start = page.indexOf('.SH E2B COMPATIBILITY');
  assert.ok(start >= 0, 'hangard(8) has no E2B COMPATIBILITY section');
  const section = page.slice(start, page.indexOf('\n.SH ', start + 1));
  // Rows of the table: "METHOD<TAB>/path<TAB>what it maps to".
  const documented = [...section.matchAll(/^(GET|POST|PUT|DELETE|PATCH)\t(\/\S+)\t/gm)]
    .map((m) => `${m[1]} /e2b${m[2]}`).sort();
  const routes = served();
  assert.ok(routes.length > 10, routes.join('\n'));
  assert.deepEqual(routes.filter((r) => !documented.includes(r)), [], 'served but not in hangard(8)');
  assert.deepEqual(documented.filter((r) => !routes.includes(r)), [], 'in hangard(8) but not served');
});

test('the /v1 route list leaves the /e2b routes out', () => {
  const r = spawnSync(hangardBinary(), ['routes']);
  const v1 = r.stdout.toString().trim().split('\n');
  assert.ok(v1.length > 10);
  assert.deepEqual(v1.filter((l) => l.includes(' /e2b')), []);
});

test('envdVersion is what hangar-envd implements', async () => {
  const envd = spawnSync(process.env.HANGAR_ENVD_PATH, ['-version']);
  assert.equal(envd.status, 0);
  const hd = await new Hangard().start();
  try {
    const r = await hd.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', timeout: 30 } });
    assert.equal(r.status, 201, r.body);
    assert.equal(r.json().envdVersion, envd.stdout.toString().trim());
  } finally {
    await hd.cleanup();
  }
});
