// Shared fixture for the conformance suite: runs a real hangar-envd and points
// the real E2B JS SDK (debug mode) at it.
//
// Debug mode (E2B_DEBUG=true) skips the control plane: Sandbox.create() returns
// sandboxId "debug_sandbox_id" with envdVersion "99.99.99" and talks to envd
// directly. The SDK would use http://localhost:49983, but its `sandboxUrl`
// option (also E2B_SANDBOX_URL) replaces that base URL for RPCs and /files, so
// every daemon here listens on a port the kernel picks (-port 0) and reports it
// on -ready-fd. Test files therefore run in parallel without fighting over 49983.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

import { Sandbox } from 'e2b';

process.env.E2B_DEBUG = 'true';

export { Sandbox };
export * as e2b from 'e2b';

const READY_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

export const isRoot = typeof process.geteuid === 'function' && process.geteuid() === 0;

/** The passwd entry of `name`, or null. Read from /etc/passwd, not from the daemon. */
export function passwdEntry(name) {
  let text;
  try {
    text = fs.readFileSync('/etc/passwd', 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 7 && f[0] === name) {
      return { name: f[0], uid: Number(f[2]), gid: Number(f[3]), home: f[5], shell: f[6] };
    }
  }
  return null;
}

/** The user name owning `uid`, as the daemon should report it. */
export function userNameOf(uid) {
  const text = fs.readFileSync('/etc/passwd', 'utf8');
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 7 && Number(f[2]) === uid) return f[0];
  }
  return String(uid);
}

/** The group name owning `gid`. */
export function groupNameOf(gid) {
  const text = fs.readFileSync('/etc/group', 'utf8');
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length >= 3 && Number(f[2]) === gid) return f[0];
  }
  return String(gid);
}

/** The second Unix user the suite switches to (CI runs `useradd -m user`). */
export const OTHER_USER = 'user';

/**
 * Why tests that run as OTHER_USER cannot run here, or false when they can.
 * Pass the result as the `skip` option of a test.
 */
export function otherUserSkip() {
  if (!isRoot) return 'needs root: hangar-envd only switches users when it runs as root';
  if (!passwdEntry(OTHER_USER)) return `needs the Unix user '${OTHER_USER}' (create it with: useradd -m ${OTHER_USER})`;
  return false; // node:test treats any non-false value, null included, as a skip
}

/** Go's FileMode.String() for a POSIX st_mode (what envd puts in EntryInfo.permissions). */
export function goModeString(mode) {
  const fmt = mode & 0o170000;
  let s = '';
  if (fmt === 0o040000) s += 'd';
  else if (fmt === 0o120000) s += 'L';
  else if (fmt === 0o010000) s += 'p';
  else if (fmt === 0o140000) s += 'S';
  else if (fmt === 0o020000) s += 'Dc';
  else if (fmt === 0o060000) s += 'D';
  if (mode & 0o4000) s += 'u';
  if (mode & 0o2000) s += 'g';
  if (mode & 0o1000) s += 't';
  if (s === '') s = '-';
  const rwx = 'rwxrwxrwx';
  for (let i = 0; i < 9; i++) s += mode & (1 << (8 - i)) ? rwx[i] : '-';
  return s;
}

/**
 * Runs every cleanup, newest first, even when one fails; then reports the
 * first failure so it is not lost.
 */
export async function runCleanups(cleanups) {
  let first = null;
  for (const fn of cleanups.splice(0).reverse()) {
    try {
      await fn();
    } catch (err) {
      first ??= err;
    }
  }
  if (first) throw first;
}

/** A fresh directory for one test, removed by the caller's cleanup. */
export function tempDir(prefix = 'hangar-conf-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Waits until `fn()` returns a truthy value (awaiting it if it is a promise)
 * and returns that value. Fails with `what` after `timeoutMs`. This is the
 * suite's only way of waiting for something: no fixed sleeps.
 */
export async function waitFor(fn, { timeoutMs = 10_000, intervalMs = 20, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      const detail = last instanceof Error ? `: last error ${last.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Races `promise` against a deadline so a hung stream fails the test instead of the whole run. */
export async function withDeadline(promise, timeoutMs, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function envdBinary() {
  const bin = process.env.HANGAR_ENVD;
  if (!bin) throw new Error('HANGAR_ENVD is not set: point it at the built hangar-envd (e.g. build/programs/hangar-envd/hangar-envd)');
  if (!path.isAbsolute(bin)) throw new Error(`HANGAR_ENVD must be an absolute path, got ${bin}`);
  fs.accessSync(bin, fs.constants.X_OK);
  return bin;
}

/**
 * A running hangar-envd.
 *   url        base URL (http://127.0.0.1:<port>)
 *   port       the port it listens on
 *   sandbox()  a debug-mode SDK Sandbox pointed at it
 *   stop()     SIGTERM, wait for exit (SIGKILL after a deadline), then kill
 *              whatever is left in its process group
 *   log()      what it wrote to stderr so far
 */
class Envd {
  constructor(child, port, stderrBuf) {
    this.child = child;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this._stderr = stderrBuf;
    this._tap = null;
  }

  log() {
    return this._stderr.join('');
  }

  /** The URL the SDK should use: the daemon, or the recording proxy in front of it. */
  get sdkUrl() {
    return this._tap ? this._tap.url : this.url;
  }

  /** Requests seen by the recording proxy (see tap()). */
  get requests() {
    return this._tap ? this._tap.requests : [];
  }

  /**
   * Puts a recording HTTP proxy in front of the daemon, so a test can check
   * what the SDK sent (method, path, headers) and what came back (status,
   * headers) without trusting the SDK's own account of it. Bodies are
   * streamed through untouched.
   */
  async tap() {
    if (this._tap) return this._tap;
    const requests = [];
    const target = { host: '127.0.0.1', port: this.port };
    const server = http.createServer((req, res) => {
      const record = { method: req.method, url: req.url, headers: { ...req.headers } };
      requests.push(record);
      const up = http.request(
        { ...target, method: req.method, path: req.url, headers: req.headers },
        (upRes) => {
          record.status = upRes.statusCode;
          record.responseHeaders = { ...upRes.headers };
          res.writeHead(upRes.statusCode, upRes.rawHeaders);
          upRes.pipe(res);
        },
      );
      up.on('error', (err) => {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(err));
      });
      req.pipe(up);
      res.on('close', () => up.destroy());
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    this._tap = { server, requests, url: `http://127.0.0.1:${server.address().port}` };
    return this._tap;
  }

  /** A debug-mode Sandbox (sandboxId "debug_sandbox_id", envdVersion 99.99.99) on this daemon. */
  async sandbox(opts = {}) {
    const sbx = await Sandbox.create({ debug: true, sandboxUrl: this.sdkUrl, ...opts });
    if (sbx.sandboxId !== 'debug_sandbox_id') {
      throw new Error(`expected the SDK's debug sandbox, got ${sbx.sandboxId}`);
    }
    return sbx;
  }

  /**
   * A Sandbox that sends X-Access-Token: `token`. Debug-mode create()/connect()
   * never carry a token (there is no control plane to hand one out), so this
   * builds the instance the way create() does after a real API call, with
   * the envdAccessToken the API would have returned.
   */
  securedSandbox(token, opts = {}) {
    return new Sandbox({
      debug: true,
      sandboxUrl: this.sdkUrl,
      sandboxId: 'debug_sandbox_id',
      envdVersion: '99.99.99',
      envdAccessToken: token,
      ...opts,
    });
  }

  async stop() {
    if (this._tap) {
      this._tap.server.closeAllConnections?.();
      this._tap.server.close();
      this._tap = null;
    }
    const child = this.child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      let timer;
      const timedOut = await Promise.race([
        exited.then(() => false),
        new Promise((r) => { timer = setTimeout(() => r(true), STOP_TIMEOUT_MS); }),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        child.kill('SIGKILL');
        await exited;
      }
    }
    // Children the daemon left behind in its process group (it is the group leader).
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // nothing left
    }
  }
}

/**
 * Starts hangar-envd on 127.0.0.1 and a kernel-chosen port and resolves once
 * it has written "ready <port>" to its ready fd.
 *   args  extra daemon flags (-token-file, -user, -workdir, -env K=V, ...)
 *   env   extra environment for the daemon process
 */
export async function startEnvd({ args = [], env = {} } = {}) {
  const bin = envdBinary();
  const verbose = !!process.env.HANGAR_ENVD_VERBOSE;
  const argv = ['-addr', '127.0.0.1', '-port', '0', '-ready-fd', '3', ...(verbose ? ['-v'] : []), ...args];
  const child = spawn(bin, argv, {
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    detached: true, // own process group, so stop() can reap what it leaves behind
  });
  const stderrBuf = [];
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => {
    stderrBuf.push(d);
    if (verbose) process.stderr.write(d);
  });

  const ready = new Promise((resolve, reject) => {
    let line = '';
    const fail = (why) => reject(new Error(`hangar-envd (${bin} ${argv.join(' ')}) ${why}\n${stderrBuf.join('')}`));
    const timer = setTimeout(() => fail(`wrote no ready line within ${READY_TIMEOUT_MS} ms`), READY_TIMEOUT_MS);
    child.on('error', (err) => { clearTimeout(timer); fail(`failed to start: ${err.message}`); });
    child.on('exit', (code, sig) => { clearTimeout(timer); fail(`exited before it was ready (code ${code}, signal ${sig})`); });
    const fd3 = child.stdio[3];
    fd3.setEncoding('utf8');
    fd3.on('data', (d) => {
      line += d;
      const nl = line.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      const m = /^ready (\d+)$/.exec(line.slice(0, nl));
      if (!m) return fail(`wrote a malformed ready line: ${JSON.stringify(line.slice(0, nl))}`);
      resolve(Number(m[1]));
    });
  });
  let port;
  try {
    port = await ready;
  } catch (err) {
    try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ }
    throw err;
  }
  child.removeAllListeners('exit');
  child.removeAllListeners('error');
  return new Envd(child, port, stderrBuf);
}

/** Writes `token` to a fresh 0600 file and returns its path. */
export function tokenFile(token) {
  const dir = tempDir('hangar-conf-token-');
  const file = path.join(dir, 'token');
  fs.writeFileSync(file, token + '\n', { mode: 0o600 });
  return file;
}
