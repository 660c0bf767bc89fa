// HANGAR_E2B_CA_FILE: a platform whose control API and envd are https with
// certificates of a private CA (made here). The cloud fake's API and edge
// each go behind the harness's TLS layer; the library is driven through the
// CLI (`hangar run`) and through hangard (/v1 and the sandbox edge). With
// the CA file it works; without it, it fails with a certificate error naming
// the address; with a file that cannot be used, a configuration error naming
// the setting and the file.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Fake, Hangard, closeTls, e2b, makeCa, tlsServer } from './harness.mjs';

const { Sandbox } = e2b;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangar-e2b-ca-'));
const good = makeCa(dir, 'good');
const other = makeCa(dir, 'other');

let fake, apiTls, apiUrl;
const started = [];

before(async () => {
  fake = await new Fake('cloud', { tlsEdge: { cert: good.cert, key: good.key } }).start();
  // The fake's control API speaks plain HTTP; the same TLS layer as its edge's in front.
  apiTls = await tlsServer({ cert: good.cert, key: good.key }, (s) => {
    const up = net.connect(fake.api, '127.0.0.1');
    s.pipe(up).pipe(s);
    s.on('error', () => up.destroy());
    up.on('error', () => s.destroy());
    s.on('close', () => up.destroy());
    up.on('close', () => s.destroy());
  });
  apiUrl = `https://127.0.0.1:${apiTls.address().port}`;
  assert.match(fake.env().HANGAR_E2B_SANDBOX_URL, /^https:\/\//);
});

after(async () => {
  for (const hd of started) await hd.cleanup();
  await closeTls(apiTls);
  await fake?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The platform's settings with its control API behind TLS too. */
function tlsEnv(extra = {}) {
  return { ...fake.env(), HANGAR_E2B_API_URL: apiUrl, ...extra };
}

/** The live sandboxes the fake holds, from its own inspection route: a witness besides the library. */
async function fakeSandboxes() {
  const r = await fetch(`http://127.0.0.1:${fake.api}/_fake/sandboxes`);
  assert.equal(r.status, 200);
  return (await r.json()).map((s) => s.id);
}

/**
 * `hangar run` with a state directory of its own and only the given HANGAR_*
 * settings. Asynchronous: the TLS layers in front of the fake run in this
 * process and must go on answering meanwhile.
 */
async function hangarRun(env, ...command) {
  const state = fs.mkdtempSync(path.join(dir, 'state-'));
  const e = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('HANGAR_')) e[k] = v;
  Object.assign(e, { HANGAR_STATE_DIR: state, HANGAR_SECRET_KEY: 'e2b-ca-suite-secret-key-0123456789abcdef' }, env);
  const child = spawn(process.env.HANGAR_CLI, ['run', '--', ...command], { env: e, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '', stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
  child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
  const status = await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code));
  });
  return { status, stdout, stderr };
}

describe('hangar run on a platform with a private CA', () => {
  test('with HANGAR_E2B_CA_FILE: control API and envd over https', async () => {
    const r = await hangarRun(tlsEnv({ HANGAR_E2B_CA_FILE: good.ca }), 'echo', 'trusted');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'trusted\n');
    assert.ok(apiTls.handshakes > 0, 'the control API was reached through TLS');
    assert.deepEqual(await fakeSandboxes(), [], 'hangar run killed its sandbox');
  });

  test('without it the control API\'s certificate is refused, naming its address', async () => {
    const live = await fakeSandboxes();
    const r = await hangarRun(tlsEnv(), 'echo', 'never');
    assert.notEqual(r.status, 0);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /certificate/i);
    assert.ok(r.stderr.includes(apiUrl), r.stderr);
    assert.deepEqual(await fakeSandboxes(), live, 'no sandbox was made');
  });

  test('a CA that did not sign the platform\'s certificate is refused too', async () => {
    const r = await hangarRun(tlsEnv({ HANGAR_E2B_CA_FILE: other.ca }), 'echo', 'never');
    assert.notEqual(r.status, 0);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /certificate/i);
  });

  test('envd\'s requests take the CA file too (control API over plain http)', async () => {
    const ok = await hangarRun({ ...fake.env(), HANGAR_E2B_CA_FILE: good.ca }, 'echo', 'envd trusted');
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout, 'envd trusted\n');
    // Without it the create goes through and the first envd request fails, naming envd's address.
    const bad = await hangarRun(fake.env(), 'echo', 'never');
    assert.notEqual(bad.status, 0);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr, /certificate/i);
    assert.ok(bad.stderr.includes(fake.edgeUrl), bad.stderr);
  });

  test('a CA file that cannot be read, is no file, or holds no certificate, is a configuration error', async () => {
    const missing = path.join(dir, 'no-such-ca.pem');
    const garbage = path.join(dir, 'garbage.pem');
    fs.writeFileSync(garbage, 'not a certificate\n');
    for (const file of [missing, garbage, dir]) {
      const before = apiTls.handshakes;
      const r = await hangarRun(tlsEnv({ HANGAR_E2B_CA_FILE: file }), 'echo', 'never');
      assert.notEqual(r.status, 0);
      assert.equal(r.stdout, '');
      assert.ok(r.stderr.includes('HANGAR_E2B_CA_FILE') && r.stderr.includes(file), r.stderr);
      assert.equal(apiTls.handshakes, before, 'nothing was sent to the platform');
    }
  });
});

describe('hangard on a platform with a private CA', () => {
  async function hangard(env) {
    const hd = await new Hangard({ env: tlsEnv(env) }).start();
    started.push(hd);
    return hd;
  }

  test('/v1 create and exec, and the edge trusting HANGAR_E2B_CA_FILE', async () => {
    const hd = await hangard({ HANGAR_E2B_CA_FILE: good.ca });
    const created = await hd.v1('POST', '/v1/sandboxes', { timeout: 600 });
    assert.equal(created.status, 201, created.body);
    const id = created.json().id;
    assert.equal(created.json().provider, 'e2b');
    const r = await hd.v1('POST', `/v1/sandboxes/${id}/exec`, { command: 'echo over https; exit 4' });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json().stdout, 'over https\n');
    assert.equal(r.json().exit_code, 4);
    assert.equal((await hd.v1('DELETE', `/v1/sandboxes/${id}`)).status, 204);

    // No HANGARD_EDGE_CA_FILE: the edge verifies the platform's envd with the e2b provider's CA.
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    try {
      const edgeBytes = fake.edgeBytes;
      assert.equal((await sb.commands.run('echo through the edge')).stdout, 'through the edge\n');
      assert.ok(fake.edgeBytes > edgeBytes, 'the command went through the https envd');
    } finally {
      await sb.kill();
    }
  });

  test('HANGARD_EDGE_CA_FILE wins over HANGAR_E2B_CA_FILE at the edge', async () => {
    const hd = await hangard({ HANGAR_E2B_CA_FILE: good.ca, HANGARD_EDGE_CA_FILE: other.ca });
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    try {
      const bytes = fake.edgeBytes;
      // Connect's RPCs: the SDK's own class for the edge's 502; envd's HTTP routes show its message.
      await assert.rejects(sb.commands.run('echo never'), e2b.NotFoundError);
      await assert.rejects(sb.files.read('/tmp/x'), (err) => {
        assert.match(err.message, /cannot be reached over TLS/);
        assert.match(err.message, /certificate/i);
        return true;
      });
      assert.equal(fake.edgeBytes, bytes, 'nothing went past the handshake');
      // The library's own requests still trust the e2b provider's CA.
      const r = await hd.v1('POST', `/v1/sandboxes/${sb.sandboxId}/exec`, { command: 'echo library' });
      assert.equal(r.status, 200, r.body);
      assert.equal(r.json().stdout, 'library\n');
    } finally {
      await sb.kill();
    }
  });

  test('without the CA file /v1 create fails with the certificate error', async () => {
    const hd = await hangard({});
    const live = await fakeSandboxes();
    const r = await hd.v1('POST', '/v1/sandboxes', { timeout: 600 });
    assert.ok(r.status >= 500, `${r.status} ${r.body}`);
    assert.match(r.body, /certificate/i);
    assert.ok(r.body.includes(apiUrl), r.body);
    assert.deepEqual(await fakeSandboxes(), live, 'no sandbox was made');
  });
});
