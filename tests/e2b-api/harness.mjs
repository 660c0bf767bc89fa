// Shared fixture of the e2b-api suite: a real hangard on loopback serving
// local sandboxes (real jails), and the real E2B JS SDK pointed at it with
// its documented settings only (apiUrl, apiKey).
//
// The SDK is the copy tests/conformance pins and installs (npm e2b), so that
// both suites witness the same client.

import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', 'conformance', 'package.json'));

/** The npm `e2b` module: Sandbox, NotFoundError, AuthenticationError, ... */
export const e2b = require('e2b');

// Tokens of every server here: name -> [token, scopes].
export const TOKENS = {
  e2b: ['hgr-e2b-' + '4'.repeat(40), 'sandboxes'],
  rw: ['hgr-rw-' + '6'.repeat(40), 'read,write'],
  boss: ['hgr-boss-' + '8'.repeat(40), 'admin'],
};
export const E2B_KEY = TOKENS.e2b[0];
export const RW_KEY = TOKENS.rw[0];
export const ADMIN_KEY = TOKENS.boss[0];

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run through meson test)`);
  return v;
}

export function hangardBinary() {
  return need('HANGARD');
}

/** Waits until fn() is truthy and returns it; fails with `what` after the deadline. */
export async function waitFor(fn, { timeoutMs = 15_000, intervalMs = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The first line a child writes on its fd 3 (its -ready-fd), or what it wrote before closing it. */
function readyLine(child) {
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdio[3].on('data', (d) => {
      buf += d;
      if (buf.includes('\n')) resolve(buf);
    });
    child.stdio[3].on('end', () => resolve(buf));
    child.on('error', reject);
  });
}

function tokensFile(dir) {
  const lines = ['# name scopes hash'];
  for (const [name, [tok, scopes]] of Object.entries(TOKENS)) {
    const r = spawnSync(hangardBinary(), ['hash-token', name, scopes], { input: tok });
    if (r.status !== 0) throw new Error(`hash-token: ${r.stderr}`);
    lines.push(r.stdout.toString().trim());
  }
  const file = path.join(dir, 'tokens');
  fs.writeFileSync(file, lines.join('\n') + '\n', { mode: 0o600 });
  return file;
}

/**
 * One hangard process.
 *   base       http://127.0.0.1:PORT
 *   apiUrl     what an SDK's E2B_API_URL is: base + '/e2b'
 *   opts(o)    SDK connection options for it (apiUrl, apiKey), merged with o
 *   request()  a raw HTTP request, answered as {status, headers, body, json()}
 *   stop()     SIGTERM, then wait
 */
export class Hangard {
  constructor({ env = {}, stateDir = null } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hangard-e2b-'));
    this.stateDir = stateDir ?? path.join(this.dir, 'state');
    this.extraEnv = env;
    this.tokens = tokensFile(this.dir);
  }

  async start() {
    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('HANGAR_') && !k.startsWith('HANGARD_')) env[k] = v;
    for (const k of ['HANGAR_ENVD_PATH', 'HANGAR_JAIL_PATH']) if (process.env[k]) env[k] = process.env[k];
    Object.assign(env, {
      HANGAR_STATE_DIR: this.stateDir,
      HANGARD_TMPDIR: this.dir,
      HANGAR_SECRET_KEY: 'e2b-api-suite-secret-key-0123456789abcdef',
    }, this.extraEnv);
    this.logPath = path.join(this.dir, `hangard-${Date.now()}.log`);
    const log = fs.openSync(this.logPath, 'a');
    this.child = spawn(hangardBinary(), ['-tokens', this.tokens, '-port', '0', '-ready-fd', '3'], {
      env, stdio: ['ignore', log, log, 'pipe'],
    });
    fs.closeSync(log);
    const m = /^ready (\d+)/.exec(await readyLine(this.child));
    if (!m) throw new Error(`hangard did not start: ${this.log()}`);
    this.port = Number(m[1]);
    this.base = `http://127.0.0.1:${this.port}`;
    this.apiUrl = `${this.base}/e2b`;
    return this;
  }

  log() {
    try {
      return fs.readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  opts(o = {}) {
    return { apiUrl: this.apiUrl, apiKey: E2B_KEY, ...o };
  }

  /** SDK options that also send envd's traffic through hangard's edge (E2B_SANDBOX_URL). */
  edgeOpts(o = {}) {
    return this.opts({ sandboxUrl: this.base, ...o });
  }

  async request(method, p, { body, headers = {}, key = E2B_KEY, raw = false } = {}) {
    const h = { ...headers };
    if (key !== null && !('Authorization' in h) && !('X-API-Key' in h)) h['X-API-Key'] = key;
    let data = body;
    if (body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array)) {
      data = JSON.stringify(body);
      h['Content-Type'] = 'application/json';
    }
    const res = await fetch(raw ? `${this.base}${p}` : `${this.base}${p}`, { method, headers: h, body: data });
    const text = await res.text();
    return {
      status: res.status,
      headers: res.headers,
      body: text,
      json: () => JSON.parse(text),
    };
  }

  /** The /v1 view of a sandbox (an admin token): a witness besides the SDK. */
  async v1(method, p, body) {
    return this.request(method, p, { body, key: null, headers: { Authorization: `Bearer ${ADMIN_KEY}` } });
  }

  async stop() {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    const done = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await done;
  }

  /** Stops, removes its directory (its sandboxes are left: another may share its state). */
  async remove() {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Kills every sandbox it still lists, stops, removes its directory. */
  async cleanup() {
    try {
      const r = await this.v1('GET', '/v1/sandboxes');
      if (r.status === 200) for (const sb of r.json().sandboxes) await this.v1('DELETE', `/v1/sandboxes/${sb.id}`);
    } finally {
      await this.remove();
    }
  }
}

/**
 * A path of a test's own under a sandbox's /tmp. The fake's sandboxes are
 * hangar-envd processes on this host, whose /tmp is the host's: a test that
 * writes there removes the path through the same sandbox at the end.
 */
export function scratchPath(what) {
  return `/tmp/hangar-e2b-api-${what}-${crypto.randomBytes(4).toString('hex')}`;
}

export const FAKE_API_KEY = 'e2b_test_fedcba9876543210fedcba9876543210';

/**
 * The e2b fake of a flavour (tests/fakes: a control plane whose sandboxes
 * are real hangar-envd processes), for a hangard whose default provider is
 * e2b: env() is what that hangard needs to reach it.
 */
export class Fake {
  /**
   * tlsEdge: {cert, key} (PEM files) serves the edge over https, as E2B's is;
   * sandboxUser: the user its sandboxes' commands run as (the fake's own by default).
   */
  constructor(flavour, { tlsEdge = null, sandboxUser = null } = {}) {
    this.flavour = flavour;
    this.tlsEdge = tlsEdge;
    this.sandboxUser = sandboxUser;
    this.edgeBytes = 0;   // bytes that came through the https edge, after its handshake
  }

  async start() {
    this.child = spawn(need('FAKE_E2B'), ['--flavour', this.flavour, '--envd', need('HANGAR_ENVD_PATH'),
      '--ready-fd', '3', '--api-key', FAKE_API_KEY, ...(this.sandboxUser ? ['--sandbox-user', this.sandboxUser] : [])],
      { stdio: ['ignore', 'ignore', 'inherit', 'pipe'] });
    const line = await readyLine(this.child);
    const m = /^ready (\d+) (\d+)/.exec(line);
    if (!m) throw new Error(`the e2b fake (${this.flavour}) did not start: ${line}`);
    [this.api, this.edge] = [Number(m[1]), Number(m[2])];
    if (this.tlsEdge) {
      // The fake's edge proxy speaks plain HTTP on raw sockets; TLS in front
      // of it (node's own) makes it what a platform's envd URL is.
      this.tlsServer = await tlsServer(this.tlsEdge, (s) => {
        const up = net.connect(this.edge, '127.0.0.1');
        s.on('data', (d) => {
          this.edgeBytes += d.length;
        });
        s.pipe(up).pipe(s);
        s.on('error', () => up.destroy());
        up.on('error', () => s.destroy());
        s.on('close', () => up.destroy());
        up.on('close', () => s.destroy());
      });
      this.edgeUrl = `https://127.0.0.1:${this.tlsServer.address().port}`;
    } else {
      this.edgeUrl = `http://127.0.0.1:${this.edge}`;
    }
    return this;
  }

  env() {
    const e = {
      HANGAR_DEFAULT_PROVIDER: 'e2b',
      HANGAR_E2B_FLAVOR: this.flavour,
      HANGAR_E2B_API_URL: `http://127.0.0.1:${this.api}`,
      HANGAR_E2B_SANDBOX_URL: this.edgeUrl,
      HANGAR_E2B_API_KEY: FAKE_API_KEY,
    };
    // CubeSandbox mints no envd token: its proxy's traffic token guards envd.
    if (this.flavour === 'cube') e.HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD = 'true';
    return e;
  }

  async stop() {
    await closeTls(this.tlsServer);
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    const done = new Promise((r) => this.child.once('exit', r));
    this.child.kill('SIGTERM');
    await done;
  }
}

/** A TLS server on 127.0.0.1 (any free port) with onSecure(socket) for each connection past its handshake. */
export async function tlsServer({ cert, key }, onSecure) {
  const server = tls.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, onSecure);
  server.sockets = new Set();
  server.handshakes = 0;   // connections whose handshake completed
  server.on('connection', (c) => {
    server.sockets.add(c);
    c.on('close', () => server.sockets.delete(c));
  });
  server.on('secureConnection', () => server.handshakes++);
  server.on('tlsClientError', () => {});
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return server;
}

export async function closeTls(server) {
  if (!server) return;
  for (const c of server.sockets) c.destroy();
  await new Promise((r) => server.close(r));
}

/**
 * A CA made here and a certificate it signed for 127.0.0.1 (openssl, without
 * the sanitizer runtime the suite may preload): {ca, cert, key}, PEM files in dir.
 */
export function makeCa(dir, name) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!['LD_PRELOAD', 'ASAN_OPTIONS', 'UBSAN_OPTIONS'].includes(k)) env[k] = v;
  const run = (...args) => {
    const r = spawnSync('openssl', args, { env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`);
  };
  fs.mkdirSync(dir, { recursive: true });
  const f = (n) => path.join(dir, `${name}-${n}`);
  run('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('ca.key'),
    '-out', f('ca.pem'), '-days', '2', '-subj', `/CN=hangar edge test CA ${name}`);
  run('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', f('server.key'),
    '-out', f('server.csr'), '-subj', '/CN=127.0.0.1');
  fs.writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' +
    'extendedKeyUsage=serverAuth\n');
  run('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('server.pem'), '-days', '2', '-extfile', f('ext.cnf'));
  return { ca: f('ca.pem'), cert: f('server.pem'), key: f('server.key') };
}
