// User ports of sandboxes on the e2b provider, through hangard's sandbox
// edge: the SDK's getHost(port) names hangard, whose edge forwards to the
// platform's host for that port with the platform's traffic token (the
// sandboxes are created with public traffic off), which the client never
// holds: it shows hangard's own. Against the cloud fake, the cube fake
// (whose edge wants the token on every port) and the cloud fake with its
// edge behind TLS, as a platform's is.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Fake, Hangard, e2b, makeCa, scratchPath, waitFor } from './harness.mjs';

const { Sandbox } = e2b;
const DOMAIN = 'sandbox.test';

/** A loopback port nothing listens on now (the fake's sandboxes share the host's ports). */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** One raw request to hangard with its own Host: {status, head, body}, head the answer's header lines. */
function raw(hd, host, p, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: hd.port, path: p, headers: { Host: host, ...headers }, agent: false },
      (res) => {
        const parts = [];
        res.on('data', (d) => parts.push(d));
        res.on('end', () => resolve({ status: res.statusCode, head: res.rawHeaders.join('\n'), body: Buffer.concat(parts).toString() }));
        res.on('error', reject);
      });
    req.on('error', reject);
    req.end();
  });
}

/** The traffic tokens the fake minted: the platform's, which must stay in hangard. */
async function platformTokens(fake) {
  const r = await fetch(`http://127.0.0.1:${fake.api}/_fake/sandboxes`);
  assert.equal(r.status, 200);
  return (await r.json()).map((s) => s.traffic_token).filter(Boolean);
}

/*
 * A static HTTP server in the sandbox on a free port, reached at
 * getHost(port) through hangard's edge with hangard's traffic token only.
 */
async function userPort(hd, fake) {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  const dir = scratchPath('ports');
  let server;
  try {
    const port = await freePort();
    await sb.files.write(`${dir}/hello.txt`, `hello from port ${port}\n`);
    server = await sb.commands.run(`exec python3 -m http.server ${port} --bind 127.0.0.1 --directory ${dir}`, { background: true });
    const host = sb.getHost(port);
    assert.equal(host, `${port}-${sb.sandboxId}.${DOMAIN}`);
    const ours = { 'e2b-traffic-access-token': sb.trafficAccessToken };
    const ok = await waitFor(async () => {
      const r = await raw(hd, host, '/hello.txt', ours);
      assert.notEqual(r.status, 501, r.body);   // what an edge that cannot reach platform ports answers
      return r.status === 200 ? r : null;
    }, { what: 'the sandbox\'s http server through the edge' });
    assert.equal(ok.body, `hello from port ${port}\n`);

    // Without hangard's token, or with another one, the edge refuses.
    assert.equal((await raw(hd, host, '/hello.txt')).status, 401);
    assert.equal((await raw(hd, host, '/hello.txt', { 'e2b-traffic-access-token': 'f'.repeat(64) })).status, 401);
    assert.equal((await raw(hd, host, '/hello.txt', { 'e2b-traffic-access-token': sb.envdAccessToken })).status, 401);

    // The platform's token went up (the fake answers 403 without it), and
    // came back in nothing the client got: not the port's answer, not /e2b's.
    const platform = await platformTokens(fake);
    assert.ok(platform.length > 0, 'the fake minted traffic tokens');
    const info = await hd.request('GET', `/e2b/sandboxes/${sb.sandboxId}`);
    const seen = [ok.head, ok.body, info.body, JSON.stringify(sb), sb.trafficAccessToken];
    for (const t of platform) for (const s of seen) assert.ok(!s.includes(t), 'a platform traffic token reached the client');
  } finally {
    await server?.kill().catch(() => {});
    try {
      await sb.files.remove(dir);
    } finally {
      await sb.kill();
    }
  }
}

// A server that streams: one chunk, then the rest once the release file is there.
const STREAMER = `
import os, socket, sys, time
port, release = int(sys.argv[1]), sys.argv[2]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', port))
s.listen(4)
while True:
    c, _ = s.accept()
    req = c.recv(65536).decode('latin-1')
    if req.startswith('GET /ready '):
        c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok')
    else:
        with open(release + '.request', 'w') as f:
            f.write(req)
        c.sendall(b'HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\nConnection: close\\r\\n\\r\\n6\\r\\nfirst\\n\\r\\n')
        while not os.path.exists(release):
            time.sleep(0.02)
        c.sendall(b'7\\r\\nsecond\\n\\r\\n0\\r\\n\\r\\n')
    c.close()
`;

/*
 * An answer a user port streams reaches the client as it comes, not when it
 * ends; the request that went up carries none of the client's tokens.
 */
async function streamed(hd) {
  const sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  const dir = scratchPath('stream');
  let server;
  try {
    const port = await freePort();
    await sb.files.write(`${dir}/streamer.py`, STREAMER);
    server = await sb.commands.run(`exec python3 ${dir}/streamer.py ${port} ${dir}/release`, { background: true });
    const headers = { Host: sb.getHost(port), 'e2b-traffic-access-token': sb.trafficAccessToken };
    await waitFor(async () => (await raw(hd, headers.Host, '/ready', headers)).status === 200, { what: 'the streamer up' });
    const body = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: hd.port, path: '/stream', headers, agent: false }, (res) => {
        let got = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          if (!got && d.startsWith('first\n')) sb.files.write(`${dir}/release`, '').catch(reject);
          got += d;
        });
        res.on('end', () => resolve(got));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.setTimeout(15_000, () => req.destroy(new Error('the stream stalled for 15 s')));
      req.end();
    });
    // The second half is sent only after the first half reached the client.
    assert.equal(body, 'first\nsecond\n');
    // hangard's own token stayed with hangard: the platform got its own.
    const request = await sb.files.read(`${dir}/release.request`);
    assert.match(request, /^GET \/stream HTTP\/1\.1\r\n/);
    assert.ok(!request.includes(sb.trafficAccessToken), request);
    assert.ok(!request.includes(sb.envdAccessToken), request);
  } finally {
    await server?.kill().catch(() => {});
    try {
      await sb.files.remove(dir);
    } finally {
      await sb.kill();
    }
  }
}

for (const flavour of ['cloud', 'cube']) {
  describe(`on the ${flavour} fake`, () => {
    let fake, hd;
    before(async () => {
      fake = await new Fake(flavour).start();
      hd = await new Hangard({ env: { ...fake.env(), HANGARD_SANDBOX_DOMAIN: DOMAIN } }).start();
    });
    after(async () => {
      await hd?.cleanup();
      await fake?.stop();
    });

    test('a user port is reached through the edge with the platform\'s token', () => userPort(hd, fake));
    test('a user port\'s stream passes as it comes', () => streamed(hd));
  });
}

describe('on the cloud fake with its edge behind TLS', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangard-ports-'));
  let fake, hd;
  before(async () => {
    const ca = makeCa(dir, 'ports');
    fake = await new Fake('cloud', { tlsEdge: { cert: ca.cert, key: ca.key } }).start();
    hd = await new Hangard({ env: { ...fake.env(), HANGARD_SANDBOX_DOMAIN: DOMAIN, HANGARD_EDGE_CA_FILE: ca.ca } }).start();
  });
  after(async () => {
    await hd?.cleanup();
    await fake?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a user port is reached over TLS', async () => {
    const before = fake.edgeBytes;
    await userPort(hd, fake);
    assert.ok(fake.edgeBytes > before, 'the requests went through the https edge');
  });
});
