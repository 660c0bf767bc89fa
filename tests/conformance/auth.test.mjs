// X-Access-Token and signed /files URLs on a hangar-envd started with -token-file.
//
// The SDK in debug mode never has a token (no control plane hands one out),
// so the raw checks use fetch, and the SDK-side checks build the Sandbox with
// the envdAccessToken a real create() would have returned. The signed-URL
// tests cross-check the daemon's signature code against the SDK's own
// implementation of the algorithm.

import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { AuthenticationError } from 'e2b';

import { isRoot, runCleanups, startEnvd, tempDir, tokenFile } from './harness.mjs';

const TOKEN = randomBytes(32).toString('hex');
const AUTH_FAILED = 401;

let envd;
const cleanups = [];

before(async () => {
  const file = tokenFile(TOKEN);
  cleanups.push(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }));
  envd = await startEnvd({ args: ['-token-file', file] });
});

after(async () => {
  await envd?.stop();
  await runCleanups(cleanups);
});

function scratch() {
  const dir = tempDir('hangar-conf-auth-');
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function listProcesses(headers = {}) {
  return fetch(`${envd.url}/process.Process/List`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', ...headers },
    body: '{}',
  });
}

async function assertRefused(res, what) {
  const body = await res.text();
  assert.equal(res.status, AUTH_FAILED, `${what}: status ${res.status}, body ${body}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json(; charset=utf-8)?$/, `${what}: one JSON Content-Type`);
  const json = JSON.parse(body);
  assert.equal(json.code, AUTH_FAILED, `${what}: REST error shape {code:401,...}`);
  assert.equal(typeof json.message, 'string');
}

describe('access token', () => {
  test('/health needs no token', async () => {
    const res = await fetch(`${envd.url}/health`);
    assert.equal(res.status, 204);
  });

  test('an RPC without X-Access-Token is refused with 401', async () => {
    await assertRefused(await listProcesses(), 'no token');
  });

  test('an RPC with a wrong token is refused with 401', async () => {
    await assertRefused(await listProcesses({ 'X-Access-Token': randomBytes(32).toString('hex') }), 'wrong token');
    await assertRefused(await listProcesses({ 'X-Access-Token': TOKEN.slice(0, -1) }), 'truncated token');
  });

  test('an RPC with the right token works', async () => {
    const res = await listProcesses({ 'X-Access-Token': TOKEN });
    assert.equal(res.status, 200);
    const json = await res.json();
    assert.ok(json.processes === undefined || Array.isArray(json.processes), JSON.stringify(json));
  });

  test('a streaming RPC without the token is refused with 401', async () => {
    const msg = Buffer.from(JSON.stringify({ process: { cmd: '/bin/true' } }));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(msg.length, 1);
    const res = await fetch(`${envd.url}/process.Process/Start`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1' },
      body: Buffer.concat([head, msg]),
    });
    await assertRefused(res, 'Start without token');
  });

  test('GET /files without token or signature is refused', async () => {
    const p = path.join(scratch(), 'secret.txt');
    fs.writeFileSync(p, 'secret');
    const res = await fetch(`${envd.url}/files?path=${encodeURIComponent(p)}`);
    await assertRefused(res, 'unsigned download');
  });

  test('/files with the header token works without a signature', async () => {
    const p = path.join(scratch(), 'with-header.txt');
    fs.writeFileSync(p, 'header token');
    const res = await fetch(`${envd.url}/files?path=${encodeURIComponent(p)}`, { headers: { 'X-Access-Token': TOKEN } });
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'header token');
  });

  test('the SDK with the right token runs commands and reads files', async () => {
    const sbx = envd.securedSandbox(TOKEN);
    const word = randomUUID();
    assert.equal((await sbx.commands.run(`echo ${word}`)).stdout, `${word}\n`);
    const p = path.join(scratch(), 'sdk.txt');
    await sbx.files.write(p, word);
    assert.equal(await sbx.files.read(p), word);
    assert.equal(await sbx.files.exists(p), true);
  });

  test('the SDK with a wrong token gets AuthenticationError', async () => {
    const sbx = envd.securedSandbox(randomBytes(32).toString('hex'));
    await assert.rejects(sbx.commands.run('true'), AuthenticationError);
    await assert.rejects(sbx.files.list('/'), AuthenticationError);
    await assert.rejects(sbx.files.read('/etc/hostname'), AuthenticationError);
  });

  test('the SDK without a token gets AuthenticationError', async () => {
    const sbx = await envd.sandbox();
    await assert.rejects(sbx.commands.list(), AuthenticationError);
  });
});

describe('signed /files URLs (signatures computed by the SDK)', () => {
  // A client that must not send the header token: only the signature authorises.
  const bare = () => envd.securedSandbox(TOKEN);

  test('downloadUrl is accepted without a header token', async () => {
    const p = path.join(scratch(), 'signed-read.txt');
    const data = randomUUID();
    fs.writeFileSync(p, data);
    const url = await bare().downloadUrl(p);
    assert.match(url, /[?&]signature=v1_/);
    const res = await fetch(url);
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(await res.text(), data);
  });

  test('downloadUrl for an explicit user', { skip: isRoot ? false : 'needs root' }, async () => {
    const p = path.join(scratch(), 'signed-user.txt');
    fs.writeFileSync(p, 'as root');
    const url = await bare().downloadUrl(p, { user: 'root' });
    assert.match(url, /[?&]username=root/);
    const res = await fetch(url);
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(await res.text(), 'as root');
  });

  test('uploadUrl is accepted for a multipart POST', async () => {
    const p = path.join(scratch(), 'signed-write.bin');
    const data = randomBytes(2048);
    const url = await bare().uploadUrl(p);
    const form = new FormData();
    form.append('file', new Blob([data]), p);
    const res = await fetch(url, { method: 'POST', body: form });
    assert.equal(res.status, 200, await res.clone().text());
    const entries = JSON.parse(await res.text());
    assert.equal(entries[0].path, p);
    assert.ok(fs.readFileSync(p).equals(data));
  });

  test('a signature with an expiration in the future is accepted', async () => {
    const p = path.join(scratch(), 'expiring.txt');
    fs.writeFileSync(p, 'not yet expired');
    const url = await bare().downloadUrl(p, { useSignatureExpiration: 120 });
    assert.match(url, /[?&]signature_expiration=\d+/);
    const res = await fetch(url);
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(await res.text(), 'not yet expired');
  });

  test('an expired signature is refused', async () => {
    const p = path.join(scratch(), 'expired.txt');
    fs.writeFileSync(p, 'expired');
    // A negative lifetime makes the SDK sign an expiration in the past.
    const url = await bare().downloadUrl(p, { useSignatureExpiration: -60 });
    const exp = Number(new URL(url).searchParams.get('signature_expiration'));
    assert.ok(exp < Date.now() / 1000, 'the URL really is expired');
    await assertRefused(await fetch(url), 'expired signature');
  });

  test('an expired upload signature is refused and writes nothing', async () => {
    const p = path.join(scratch(), 'expired-upload.txt');
    const url = await bare().uploadUrl(p, { useSignatureExpiration: -60 });
    const form = new FormData();
    form.append('file', new Blob(['nope']), p);
    await assertRefused(await fetch(url, { method: 'POST', body: form }), 'expired upload');
    assert.equal(fs.existsSync(p), false);
  });

  test('a signature is bound to its path', async () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'a.txt'), 'a');
    fs.writeFileSync(path.join(dir, 'b.txt'), 'b');
    const url = new URL(await bare().downloadUrl(path.join(dir, 'a.txt')));
    url.searchParams.set('path', path.join(dir, 'b.txt'));
    await assertRefused(await fetch(url), 'signature reused for another path');
  });

  test('a signature is bound to its operation', async () => {
    const p = path.join(scratch(), 'op.txt');
    const readUrl = await bare().downloadUrl(p);
    const form = new FormData();
    form.append('file', new Blob(['x']), p);
    await assertRefused(await fetch(readUrl, { method: 'POST', body: form }), 'read signature used to write');
    assert.equal(fs.existsSync(p), false);
  });

  test('a signature is bound to its expiration', async () => {
    const p = path.join(scratch(), 'exp-bound.txt');
    fs.writeFileSync(p, 'x');
    const url = new URL(await bare().downloadUrl(p, { useSignatureExpiration: 60 }));
    url.searchParams.set('signature_expiration', String(Number(url.searchParams.get('signature_expiration')) + 3600));
    await assertRefused(await fetch(url), 'extended expiration');
  });

  test('a signature made with another token is refused', async () => {
    const p = path.join(scratch(), 'other-token.txt');
    fs.writeFileSync(p, 'x');
    const url = await envd.securedSandbox(randomBytes(32).toString('hex')).downloadUrl(p);
    await assertRefused(await fetch(url), 'foreign signature');
  });

  test('a mismatching header token wins over a valid signature', async () => {
    const p = path.join(scratch(), 'hdr.txt');
    fs.writeFileSync(p, 'x');
    const url = await bare().downloadUrl(p);
    await assertRefused(await fetch(url, { headers: { 'X-Access-Token': 'wrong' } }), 'bad header with good signature');
  });
});
