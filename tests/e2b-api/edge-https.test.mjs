// hangard's sandbox edge to a platform whose envd URL is https (E2B's is):
// the real SDK through hangard's /e2b and edge, to e2b-provider sandboxes
// on the cloud fake with its edge behind TLS from a CA made here; then a CA
// that did not sign the platform's certificate, and hostile platforms that
// complete the handshake and then cut or garble the answer.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Fake, Hangard, closeTls, e2b, makeCa, scratchPath, tlsServer, waitFor } from './harness.mjs';

const { Sandbox } = e2b;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangard-edge-https-'));
const good = makeCa(dir, 'good');
const other = makeCa(dir, 'other');

let fake;
const started = [];

async function hangard(env) {
  const hd = await new Hangard({ env: { ...fake.env(), ...env } }).start();
  started.push(hd);
  return hd;
}

before(async () => {
  fake = await new Fake('cloud', { tlsEdge: { cert: good.cert, key: good.key } }).start();
  assert.match(fake.env().HANGAR_E2B_SANDBOX_URL, /^https:\/\//);
});

after(async () => {
  for (const hd of started) await hd.cleanup();
  await fake?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('an https envd verified with HANGARD_EDGE_CA_FILE', () => {
  // The files the tests write, removed through the sandbox at the end.
  const at = scratchPath('edge-https');
  let hd, sb;
  before(async () => {
    hd = await hangard({ HANGARD_EDGE_CA_FILE: good.ca });
    sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  });
  after(async () => {
    try {
      await sb?.files.remove(at);
    } finally {
      await sb?.kill();
    }
  });

  test('commands run through the edge to the platform over TLS', async () => {
    const before = fake.edgeBytes;
    assert.equal((await sb.commands.run('echo platform')).stdout, 'platform\n');
    await assert.rejects(sb.commands.run('exit 3'), (err) => err.exitCode === 3);
    assert.ok(fake.edgeBytes > before, 'the requests went through the https edge');
    // The platform's tokens stay with hangard: the SDK holds only hangard's.
    assert.notEqual(sb.envdAccessToken, undefined);
    const rec = await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`);
    assert.equal(rec.json().provider, 'e2b');
  });

  test('files go up and come down whole, larger than any buffer of the edge', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7 + (i >> 11)) & 0xff;
    await sb.files.write(`${at}/edge-https.bin`, new Uint8Array(big).buffer);
    const back = Buffer.from(await sb.files.read(`${at}/edge-https.bin`, { format: 'bytes' }));
    assert.equal(back.length, big.length);
    assert.ok(back.equals(big), 'the file came back as it went');
    await sb.files.write(`${at}/edge-https.txt`, 'over tls');
    assert.equal(await sb.files.read(`${at}/edge-https.txt`), 'over tls');
    assert.equal((await sb.commands.run(`wc -c < ${at}/edge-https.bin`)).stdout.trim(), String(big.length));
  });

  test('a background command\'s output streams while it runs', async () => {
    await sb.commands.run(`mkdir -p ${at}; rm -f ${at}/fifo; mkfifo ${at}/fifo`);
    let out = '';
    const bg = await sb.commands.run(`echo ready; read line < ${at}/fifo; echo "got $line"`, {
      background: true,
      onStdout: (d) => {
        out += d;
      },
    });
    // The first line arrives while the command still waits on the fifo.
    await waitFor(() => out.includes('ready\n'), { what: 'the first line of the stream' });
    assert.ok(!out.includes('got'));
    await sb.commands.run(`echo hello > ${at}/fifo`);
    const res = await bg.wait();
    assert.equal(res.exitCode, 0);
    assert.equal(out, 'ready\ngot hello\n');
  });

  test('requests one after another all succeed', async () => {
    // The fake's edge closes after each answer (Connection: close): each
    // request has a handshake of its own, and none fails for reusing one.
    for (let i = 0; i < 10; i++) {
      assert.equal(await sb.files.read(`${at}/edge-https.txt`), 'over tls');
      assert.equal((await sb.commands.run(`echo ${i}`)).stdout, `${i}\n`);
    }
  });
});

describe('verification fails', () => {
  for (const [what, env] of [
    ['a CA file of another CA', () => ({ HANGARD_EDGE_CA_FILE: other.ca })],
    ['the system CAs only', () => ({})],
  ]) {
    test(`with ${what}: a clear error to the SDK, nothing forwarded`, async () => {
      const hd = await hangard(env());
      const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
      try {
        const bytes = fake.edgeBytes;
        // Connect's RPCs: the SDK's own class for a 502, whatever its text.
        await assert.rejects(sb.commands.run('touch /tmp/edge-https-unverified'), e2b.NotFoundError);
        // envd's HTTP routes: the SDK shows the edge's message.
        await assert.rejects(sb.files.read('/tmp/x'), (err) => {
          assert.match(err.message, /cannot be reached over TLS/);
          assert.match(err.message, /certificate/i);
          return true;
        });
        const r = await hd.request('GET', '/files?path=/tmp/x', {
          headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '49983',
            'X-Access-Token': sb.envdAccessToken },
        });
        assert.equal(r.status, 502);
        assert.match(r.body, /TLS/);
        assert.equal(fake.edgeBytes, bytes, 'nothing went past the handshake');
      } finally {
        await sb.kill();
      }
    });
  }

  test('a CA file that cannot be read is named in the error', async () => {
    const hd = await hangard({ HANGARD_EDGE_CA_FILE: path.join(dir, 'missing.pem') });
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    try {
      await assert.rejects(sb.files.read('/tmp/x'), /HANGARD_EDGE_CA_FILE/);
      await assert.rejects(sb.commands.run('true'), e2b.NotFoundError);
    } finally {
      await sb.kill();
    }
  });
});

describe('a hostile platform past the handshake', () => {
  let hostile, hd, mode;
  const seen = [];
  before(async () => {
    hostile = await tlsServer({ cert: good.cert, key: good.key }, (s) => {
      s.on('error', () => {});
      let head = '';
      s.on('data', (d) => {
        head += d.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        seen.push(head);
        head = '';
        if (mode === 'keep') {
          // A well-framed answer, and the connection stays open for the next.
          s.write('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 4\r\n\r\nkept');
        } else if (mode === 'garbage') {
          s.end(Buffer.from('\x00\xffSSH-2.0-not-http\r\n\r\n\x16\x03', 'latin1'));
        } else if (mode === 'cut-stream') {
          // A server stream that starts, then the connection is cut.
          s.write('HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\nTransfer-Encoding: chunked\r\n\r\n');
          s.write('4\r\n\x00\x00\x00\x00\r\n');
          s.destroy();
        } else {
          // A file whose body ends long before its length.
          s.write('HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 100000\r\n\r\n');
          s.write('only this much');
          s.destroy();
        }
      });
    });
    hd = await hangard({
      HANGARD_EDGE_CA_FILE: good.ca,
      HANGAR_E2B_SANDBOX_URL: `https://127.0.0.1:${hostile.address().port}`,
    });
  });
  after(async () => {
    await closeTls(hostile);
  });

  test('a connection whose answers end where they say is kept for the next request', async () => {
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    try {
      mode = 'keep';
      const handshakes = hostile.handshakes, requests = seen.length;
      for (let i = 0; i < 20; i++) assert.equal(await sb.files.read('/tmp/kept'), 'kept');
      assert.equal(seen.length - requests, 20);
      // Not one each: a request may start before the last one's connection
      // is back in the edge's pool (the client has its answer first).
      assert.ok(hostile.handshakes - handshakes < 20, `${hostile.handshakes - handshakes} handshakes for 20 requests`);
    } finally {
      await sb.kill();
    }
  });

  test('garbage instead of an answer, a stream cut, a body cut: errors, and hangard goes on', async () => {
    const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
    try {
      mode = 'garbage';
      await assert.rejects(sb.files.read('/tmp/anything'), /gave no valid answer/);
      await assert.rejects(sb.commands.run('true'), e2b.NotFoundError);
      mode = 'cut-stream';
      const headers = { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '49983',
        'X-Access-Token': sb.envdAccessToken };
      // What came is forwarded, then the client's connection is cut at once
      // (not left open until the idle bound): the SDK fails well within its
      // own request timeout.
      await assert.rejects(hd.request('POST', '/process.Process/Start', { headers, body: 'x' }),
        /terminated|aborted|ECONNRESET|socket/);
      await assert.rejects(sb.commands.run('true', { requestTimeoutMs: 10_000 }), (err) => !/timed out|timeout/i.test(err.message));
      mode = 'cut-body';
      await assert.rejects(sb.files.read('/tmp/anything', { format: 'bytes' }));
      assert.ok(seen.length >= 4, 'each request reached the hostile platform');
      // The platform's token went up; the SDK's own did not.
      for (const h of seen) assert.ok(!h.includes(sb.envdAccessToken), 'the SDK\'s token was forwarded');
      assert.equal((await hd.request('GET', '/e2b/health', { key: null })).status, 204);
    } finally {
      await sb.kill();
    }
  });
});
