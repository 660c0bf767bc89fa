// Hostile and careless requests to hangard's sandbox edge, raw (node:http,
// which lets a test set Host): tokens missing, wrong or of another sandbox,
// hosts and headers that disagree or carry odd bytes, user ports without
// their traffic token, and clients that send or read too slowly. What a
// refused request would have done is checked through /v1: nothing.

import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, test } from 'node:test';

import { ADMIN_KEY, Hangard, e2b, waitFor } from './harness.mjs';

const { Sandbox } = e2b;
const DOMAIN = 'sandbox.test';
let hd;
let a;
let b;

before(async () => {
  // Short bounds, so that the stalled clients and sandboxes below are given
  // up on within the test's time.
  hd = await new Hangard({
    env: { HANGARD_SANDBOX_DOMAIN: DOMAIN, HANGARD_IDLE_TIMEOUT_SECONDS: '3', HANGARD_SANDBOX_STALL_SECONDS: '2' },
  }).start();
  a = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 300_000 });
  b = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 300_000 });
});

after(async () => {
  await a?.kill().catch(() => {});
  await b?.kill().catch(() => {});
  await hd?.cleanup();
});

/** One raw request: {status, headers, body}. */
function raw(method, path, { headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: hd.port, method, path, headers, agent: false }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(parts).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const envdHeaders = (sb, token = sb.envdAccessToken) => ({
  'E2b-Sandbox-Id': sb.sandboxId,
  'E2b-Sandbox-Port': '49983',
  ...(token === null ? {} : { 'X-Access-Token': token }),
});

/** A command run through /v1 (an admin token), on a connection of its own. */
async function exec(id, command) {
  const r = await raw('POST', `/v1/sandboxes/${id}/exec`, {
    headers: { Authorization: `Bearer ${ADMIN_KEY}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ command }),
  });
  assert.equal(r.status, 200, r.body);
  return JSON.parse(r.body);
}

/** A write of /tmp/NAME in the sandbox through envd's /files, as the SDK makes it. */
function upload(name, headers, hostHeader) {
  const boundary = 'edge-boundary';
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\n` +
    `Content-Type: application/octet-stream\r\n\r\npwned\r\n--${boundary}--\r\n`;
  const h = { ...headers, 'Content-Type': `multipart/form-data; boundary=${boundary}` };
  if (hostHeader) h.Host = hostHeader;
  return raw('POST', `/files?path=/tmp/${name}&username=root`, { headers: h, body });
}

async function absent(sb, name) {
  assert.equal((await exec(sb.sandboxId, `test -e /tmp/${name} && echo there || echo absent`)).stdout, 'absent\n');
}

test('the right token writes; no token, a wrong one or another sandbox\'s is 401 and reaches nothing', async () => {
  const ok = await upload('edge-ok', envdHeaders(a));
  assert.equal(ok.status, 200, ok.body);
  assert.equal((await exec(a.sandboxId, 'cat /tmp/edge-ok')).stdout, 'pwned');

  for (const [what, headers] of [
    ['no token', envdHeaders(b, null)],
    ['an empty token', envdHeaders(b, '')],
    ['a wrong token', envdHeaders(b, 'f'.repeat(64))],
    ['a token one byte short', envdHeaders(b, b.envdAccessToken.slice(1))],
    ['sandbox A\'s token on B', envdHeaders(b, a.envdAccessToken)],
    ['B\'s traffic token as its envd token', envdHeaders(b, b.trafficAccessToken)],
  ]) {
    const r = await upload('edge-refused', headers);
    assert.equal(r.status, 401, `${what}: ${r.body}`);
    assert.deepEqual(JSON.parse(r.body).code, 401, what);
  }
  await absent(b, 'edge-refused');
  // Connect's RPCs get Connect's error, which the SDK makes AuthenticationError.
  const wrong = new Sandbox({ ...hd.edgeOpts(), sandboxId: b.sandboxId, envdAccessToken: a.envdAccessToken, envdVersion: '0.6.4' });
  await assert.rejects(wrong.commands.run('touch /tmp/edge-rpc-refused'), e2b.AuthenticationError);
  await absent(b, 'edge-rpc-refused');
});

test('the sandbox\'s own envd credentials never reach the client', async () => {
  const r = await raw('GET', '/health', { headers: envdHeaders(a) });
  assert.ok(r.status === 204 || r.status === 200, r.body);
  for (const k of Object.keys(r.headers)) assert.doesNotMatch(k, /access-token/i);
  // The log names the sandbox and port of each request, never a token.
  await waitFor(() => hd.log().includes(`"sandbox":"${a.sandboxId}","sandbox_port":49983`), { what: 'the edge\'s log line' });
  for (const tok of [a.envdAccessToken, a.trafficAccessToken, b.envdAccessToken]) assert.ok(!hd.log().includes(tok));
});

test('keep-alive: one client connection carries requests with and without bodies', async () => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ports = new Set();
  const one = (method, path, body, extra = {}) => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: hd.port, method, path, agent, headers: { ...envdHeaders(a), ...extra } }, (res) => {
      ports.add(res.socket.localPort);
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
  try {
    for (let i = 0; i < 3; i++) {
      assert.equal((await one('POST', `/files?path=/tmp/edge-ka-${i}&username=root`, `ka${i}`, { 'Content-Type': 'application/octet-stream' })).status, 200);
      assert.ok([200, 204].includes((await one('GET', '/health')).status));
      const got = await one('GET', `/files?path=/tmp/edge-ka-${i}&username=root`);
      assert.equal(got.status, 200, got.body);
      assert.equal(got.body, `ka${i}`);
    }
    assert.equal(ports.size, 1, 'one connection for all');
  } finally {
    agent.destroy();
  }
});

test('routing by host name: PORT-ID.DOMAIN; a host and headers that disagree are 400', async () => {
  const host = `49983-${a.sandboxId}.${DOMAIN}`;
  const ok = await upload('edge-by-host', { 'X-Access-Token': a.envdAccessToken }, host);
  assert.equal(ok.status, 200, ok.body);
  assert.equal((await exec(a.sandboxId, 'cat /tmp/edge-by-host')).stdout, 'pwned');
  // create answers the domain the SDK builds host names from.
  const created = await hd.request('GET', `/e2b/sandboxes/${a.sandboxId}`);
  assert.equal(created.status, 200, created.body);

  const mismatch = await upload('edge-mismatch', { ...envdHeaders(b), 'X-Access-Token': a.envdAccessToken }, host);
  assert.equal(mismatch.status, 400, mismatch.body);
  const portMismatch = await upload('edge-mismatch', { ...envdHeaders(a), 'E2b-Sandbox-Port': '8080' }, host);
  assert.equal(portMismatch.status, 400, portMismatch.body);
  await absent(a, 'edge-mismatch');
  await absent(b, 'edge-mismatch');
});

test('signed file URLs by host name: made with the sandbox\'s token and current, or 401', async () => {
  const host = `49983-${a.sandboxId}.${DOMAIN}`;
  const target = (u) => { const x = new URL(u); return x.pathname + x.search; };
  const up = await a.uploadUrl('/tmp/edge-signed', { user: 'root' });
  const boundary = 'edge-signed';
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\nsigned-ok\r\n--${boundary}--\r\n`;
  const put = await raw('POST', target(up), { headers: { Host: host, 'Content-Type': `multipart/form-data; boundary=${boundary}` }, body });
  assert.equal(put.status, 200, put.body);
  const down = await a.downloadUrl('/tmp/edge-signed', { user: 'root', useSignatureExpiration: 60 });
  const got = await raw('GET', target(down), { headers: { Host: host } });
  assert.equal(got.status, 200, got.body);
  assert.equal(got.body, 'signed-ok');

  const refused = [
    ['a read signature used to write', raw('POST', target(down), { headers: { Host: host, 'Content-Type': `multipart/form-data; boundary=${boundary}` }, body })],
    ['another path', raw('GET', target(down).replace('edge-signed', 'edge-other'), { headers: { Host: host } })],
    ['a tampered signature', raw('GET', target(down).replace(/signature=v1_(.)/, (m, c) => `signature=v1_${c === 'A' ? 'B' : 'A'}`), { headers: { Host: host } })],
    ['an expired signature', a.downloadUrl('/tmp/edge-signed', { user: 'root', useSignatureExpiration: -10 })
      .then((u) => raw('GET', target(u), { headers: { Host: host } }))],
    ['A\'s signature on B', raw('GET', target(down), { headers: { Host: `49983-${b.sandboxId}.${DOMAIN}` } })],
  ];
  for (const [what, p] of refused) assert.equal((await p).status, 401, what);
  await absent(b, 'edge-signed');
});

test('a port-id host of an unknown sandbox, and ids and ports with odd bytes', async () => {
  const unknown = await raw('GET', '/health', { headers: { Host: `49983-sb-0000000000000000.${DOMAIN}`, 'X-Access-Token': a.envdAccessToken } });
  assert.equal(unknown.status, 401, unknown.body);
  for (const host of [`49983-..%2f.${DOMAIN}`, `49983-${'a'.repeat(65)}.${DOMAIN}`, `0-${a.sandboxId}.${DOMAIN}`,
    `99999-${a.sandboxId}.${DOMAIN}`, `x-${a.sandboxId}.${DOMAIN}`, `49983-.${DOMAIN}`, `49983-a.b.${DOMAIN}`]) {
    const r = await raw('GET', '/health', { headers: { Host: host, 'X-Access-Token': a.envdAccessToken } });
    assert.equal(r.status, 400, `${host}: ${r.body}`);
  }
  for (const id of ['../etc', 'a'.repeat(65), 'sb x', 'sb%00', '']) {
    const r = await raw('GET', '/health', { headers: { ...envdHeaders(a), 'E2b-Sandbox-Id': id } });
    assert.equal(r.status, 400, `${JSON.stringify(id)}: ${r.body}`);
  }
  for (const port of ['0', '65536', '49983x', '-1', ' ', '0x50']) {
    const r = await raw('GET', '/health', { headers: { ...envdHeaders(a), 'E2b-Sandbox-Port': port } });
    assert.equal(r.status, 400, `${JSON.stringify(port)}: ${r.body}`);
  }
  // A host of another domain is hangard's own API, not a sandbox's.
  const other = await raw('GET', '/livez', { headers: { Host: `49983-${a.sandboxId}.elsewhere.test` } });
  assert.equal(other.status, 200, other.body);
});

test('a user port needs the traffic token, and is served with it', async () => {
  // A server in the sandbox on port 8000 (busybox-free: the host's shell and nc are not assumed).
  await a.commands.run(`python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1`, { background: true });
  await exec(a.sandboxId, 'echo port-ok > /tmp/edge-port.txt');
  const headers = { 'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '8000' };
  const none = await raw('GET', '/edge-port.txt', { headers });
  assert.equal(none.status, 401, none.body);
  const envdTok = await raw('GET', '/edge-port.txt', { headers: { ...headers, 'e2b-traffic-access-token': a.envdAccessToken } });
  assert.equal(envdTok.status, 401, envdTok.body);
  const other = await raw('GET', '/edge-port.txt', { headers: { ...headers, 'e2b-traffic-access-token': b.trafficAccessToken } });
  assert.equal(other.status, 401, other.body);
  const ok = await waitFor(async () => {
    const r = await raw('GET', '/edge-port.txt', { headers: { ...headers, 'e2b-traffic-access-token': a.trafficAccessToken } });
    return r.status === 200 ? r : null;
  }, { what: 'the sandbox\'s http server through the edge' });
  assert.equal(ok.body, 'port-ok\n');
});

// A server in the sandbox that answers as nothing should, by the path: not
// at all, not HTTP, a body cut short of its length, a stream that stops
// (and /ready, to know it listens).
const HOSTILE = `
import socket, threading
def serve(c):
    req = c.recv(65536).decode('latin-1')
    path = req.split(' ')[1] if ' ' in req else ''
    if path == '/ready':
        c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok')
    elif path == '/silent':
        threading.Event().wait(60)
    elif path == '/garbage':
        c.sendall(b'NOT HTTP AT ALL\\r\\n\\r\\n')
    elif path == '/cut':
        c.sendall(b'HTTP/1.1 200 OK\\r\\nContent-Length: 100\\r\\n\\r\\nshort')
    elif path == '/slow-stream':
        c.sendall(b'HTTP/1.1 200 OK\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n5\\r\\nfirst\\r\\n')
        threading.Event().wait(60)
    c.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', 8001))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

test('hostile answers from a sandbox\'s port: forwarded as they are, bounded in time', async () => {
  await exec(a.sandboxId, `cat > /tmp/edge-hostile.py <<'EOF'\n${HOSTILE}\nEOF`);
  await a.commands.run('python3 /tmp/edge-hostile.py >/dev/null 2>&1', { background: true });
  const headers = { 'E2b-Sandbox-Id': a.sandboxId, 'E2b-Sandbox-Port': '8001', 'e2b-traffic-access-token': a.trafficAccessToken };
  await waitFor(async () => (await raw('GET', '/ready', { headers })).status === 200, { what: 'the hostile server up' });
  // Not HTTP: 502.
  assert.equal((await raw('GET', '/garbage', { headers })).status, 502);

  // No answer at all: 502 after the stall bound (2 s here), others answered meanwhile.
  const t0 = Date.now();
  const silent = raw('GET', '/silent', { headers });
  await othersAnswered();
  const r = await silent;
  assert.equal(r.status, 502, r.body);
  const took = Date.now() - t0;
  assert.ok(took >= 1500 && took < 10_000, `the silent sandbox was given up after ${took} ms: ${r.body}`);

  // A body cut short of its length is cut for the client too, never passed off as whole.
  await assert.rejects(raw('GET', '/cut', { headers }), /aborted|ECONNRESET|socket hang up|terminated/);
  // A stream that stops: what came is forwarded, then the connection is cut.
  await assert.rejects(raw('GET', '/slow-stream', { headers }), /aborted|ECONNRESET|socket hang up|terminated/);
});

/** Waits until a socket is closed by the other end; rejects after ms. */
function closedWithin(sock, ms) {
  return new Promise((resolve, reject) => {
    if (sock.destroyed) return resolve();
    const t = setTimeout(() => reject(new Error(`the connection was still open after ${ms} ms`)), ms);
    sock.once('close', () => { clearTimeout(t); resolve(); });
  });
}

/** Requests of the edge (no route of hangard's own) hangard's log says it gave up. */
function abortedEdgeRequests() {
  return hd.log().split('\n').filter((l) => l.includes('"route":"-"') && l.includes('"aborted":true')).length;
}

/*
 * Another sandbox's envd and hangard's API answer at once. On connections of
 * their own: the idle bound here is shorter than a pooled connection's
 * keep-alive, so a pooled one could be closed under the request.
 */
async function othersAnswered() {
  const t0 = Date.now();
  for (let i = 0; i < 3; i++) {
    const r = await raw('POST', `/files?path=/tmp/edge-meanwhile-${i}&username=root`, {
      headers: { ...envdHeaders(b), 'Content-Type': 'application/octet-stream' }, body: `m${i}`,
    });
    assert.equal(r.status, 200, r.body);
  }
  assert.equal((await exec(b.sandboxId, 'cat /tmp/edge-meanwhile-0 /tmp/edge-meanwhile-2')).stdout, 'm0m2');
  assert.equal((await raw('GET', '/e2b/health')).status, 204);
  assert.ok(Date.now() - t0 < 3000, `others took ${Date.now() - t0} ms`);
}

test('an upload sent slowly holds nobody else up, and is given up after the idle bound', async () => {
  const sock = net.connect(hd.port, '127.0.0.1');
  sock.on('error', () => {});
  await new Promise((r) => sock.once('connect', r));
  sock.write(`POST /files?path=/tmp/edge-slow&username=root HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
    `E2b-Sandbox-Id: ${a.sandboxId}\r\nE2b-Sandbox-Port: 49983\r\nX-Access-Token: ${a.envdAccessToken}\r\n` +
    `Content-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n`);
  sock.write(Buffer.alloc(64 * 1024, 1));
  // Meanwhile the edge and the API answer others.
  await othersAnswered();
  await closedWithin(sock, 20_000);
});

test('a client that never reads a stream holds nobody else up, and is given up', async () => {
  // A Connect server stream of a command that writes without end, read by nobody.
  const body = JSON.stringify({ process: { cmd: '/bin/sh', args: ['-c', 'while :; do cat /etc/services; done'] } });
  const frame = Buffer.alloc(5 + Buffer.byteLength(body));
  frame.writeUInt32BE(Buffer.byteLength(body), 1);
  frame.write(body, 5);
  const abortedBefore = abortedEdgeRequests();
  const sock = net.connect(hd.port, '127.0.0.1');
  sock.on('error', () => {});
  await new Promise((r) => sock.once('connect', r));
  sock.pause();
  sock.write(`POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\nE2b-Sandbox-Id: ${a.sandboxId}\r\n` +
    `E2b-Sandbox-Port: 49983\r\nX-Access-Token: ${a.envdAccessToken}\r\nAuthorization: Basic ${Buffer.from('root:').toString('base64')}\r\n` +
    `Content-Type: application/connect+json\r\nConnect-Protocol-Version: 1\r\nContent-Length: ${frame.length}\r\n\r\n`);
  sock.write(frame);
  // Meanwhile others are answered.
  await othersAnswered();
  // Past the idle bound hangard gives the stalled stream up: its log says
  // so, and once the client reads again it finds the end after a bounded
  // amount (what the kernel's buffers and the edge's queue held).
  await waitFor(() => abortedEdgeRequests() > abortedBefore, { timeoutMs: 30_000, what: 'the stalled stream given up' });
  let got = 0;
  sock.on('data', (d) => { got += d.length; });
  sock.resume();
  await closedWithin(sock, 10_000);
  assert.ok(got < 64 * 1024 * 1024, `${got} bytes came after the stall`);
  await exec(a.sandboxId, 'pkill -f "cat /etc/services" || true');
});
