// sandbox.commands.* from the real E2B JS SDK against hangar-envd
// (process.Process: Start, Connect, List, SendInput, CloseStdin, SendSignal).

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { AuthenticationError, CommandExitError, InvalidArgumentError, NotFoundError, TimeoutError } from 'e2b';

import {
  isRoot, OTHER_USER, otherUserSkip, passwdEntry, runCleanups, startEnvd, tempDir, waitFor, withDeadline,
} from './harness.mjs';

// Running as another user (root included) needs a daemon running as root.
const rootSkip = isRoot ? false : 'needs root: hangar-envd only switches users when it runs as root';

const LEAK_VAR = 'HANGAR_CONFORMANCE_LEAK';
const DEFAULT_VAR = 'HANGAR_CONFORMANCE_DEFAULT';
const DEFAULT_VAL = `from-daemon-${randomUUID().slice(0, 8)}`;

let envd;
let sbx;
const cleanups = [];

before(async () => {
  // The daemon's own environment must not reach commands; -env values must.
  envd = await startEnvd({ args: ['-env', `${DEFAULT_VAR}=${DEFAULT_VAL}`], env: { [LEAK_VAR]: 'leaked' } });
  sbx = await envd.sandbox();
});

after(async () => {
  await envd?.stop();
  await runCleanups(cleanups);
});

function uniq(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

function scratch() {
  const dir = tempDir();
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function pids() {
  return (await sbx.commands.list()).map((p) => p.pid);
}

/** A process that is gone from the daemon's list and from the kernel (not even a zombie). */
async function waitGone(pid) {
  await waitFor(async () => !(await pids()).includes(pid), { what: `pid ${pid} to leave commands.list()` });
  await waitFor(() => !fs.existsSync(`/proc/${pid}`), { what: `pid ${pid} to be reaped` });
}

describe('run', () => {
  test('stdout, stderr and exit code 0', async () => {
    const out = uniq('out');
    const err = uniq('err');
    const r = await sbx.commands.run(`printf '%s\\n' ${out}; printf '%s\\n' ${err} >&2`);
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, `${out}\n`);
    assert.equal(r.stderr, `${err}\n`);
    assert.equal(r.error, undefined, 'a clean exit carries no error text');
  });

  for (const code of [1, 3, 42]) {
    test(`exit ${code} throws CommandExitError with exitCode ${code}`, async () => {
      const before = uniq('before');
      const err = await sbx.commands.run(`echo ${before}; echo oops >&2; exit ${code}`).then(
        () => assert.fail('expected CommandExitError'),
        (e) => e,
      );
      assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
      assert.equal(err.exitCode, code);
      assert.equal(err.error, `exit status ${code}`);
      assert.equal(err.stdout, `${before}\n`, 'output before the exit is kept');
      assert.equal(err.stderr, 'oops\n');
    });
  }

  test('a missing binary exits 127', async () => {
    const name = uniq('hangar-no-such-binary');
    const err = await sbx.commands.run(name).then(() => assert.fail('expected CommandExitError'), (e) => e);
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, 127);
    assert.match(err.stderr, new RegExp(name));
  });

  test('large output arrives complete', async () => {
    const n = 300_000;
    const r = await sbx.commands.run(`head -c ${n} /dev/zero | tr '\\0' x`);
    assert.equal(r.stdout.length, n);
    assert.ok(/^x+$/.test(r.stdout), 'only the bytes the command wrote');
  });

  test('multi-byte UTF-8 output is decoded intact', async () => {
    const text = 'héllo wörld ✓ 日本語 🚀';
    const r = await sbx.commands.run(`printf '%s' '${text}'`);
    assert.equal(r.stdout, text);
  });
});

describe('background', () => {
  test('returns a handle; wait() gives the result; onStdout/onStderr see each stream', async () => {
    const [a, b, c] = [uniq('one'), uniq('two'), uniq('three')];
    const seenOut = [];
    const seenErr = [];
    const h = await sbx.commands.run(`echo ${a}; echo ${b} >&2; echo ${c}`, {
      background: true,
      onStdout: (d) => seenOut.push(d),
      onStderr: (d) => seenErr.push(d),
    });
    assert.equal(typeof h.pid, 'number');
    assert.ok(h.pid > 0);
    const r = await withDeadline(h.wait(), 10_000, 'wait()');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, `${a}\n${c}\n`);
    assert.equal(r.stderr, `${b}\n`);
    assert.equal(seenOut.join(''), r.stdout);
    assert.equal(seenErr.join(''), r.stderr);
  });

  test('run() returns while the command is still running', async () => {
    const h = await sbx.commands.run('cat', { background: true, stdin: true });
    assert.equal(h.exitCode, undefined, 'no exit code yet');
    assert.ok((await pids()).includes(h.pid), 'listed while running');
    await h.closeStdin();
    const r = await withDeadline(h.wait(), 10_000, 'wait() after EOF');
    assert.equal(r.exitCode, 0);
  });
});

describe('stdin', () => {
  test('sendStdin and closeStdin', async () => {
    const h = await sbx.commands.run('cat', { background: true, stdin: true });
    const first = uniq('hello');
    const second = uniq('world');
    await h.sendStdin(`${first} `);
    await sbx.commands.sendStdin(h.pid, `${second}\n`);
    await waitFor(() => h.stdout.includes(`${first} ${second}\n`), { what: 'cat to echo stdin' });
    await h.closeStdin();
    const r = await withDeadline(h.wait(), 10_000, 'cat to exit on EOF');
    assert.equal(r.stdout, `${first} ${second}\n`);
  });

  test('stdin carries every byte value', async () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const h = await sbx.commands.run('od -An -v -tx1', { background: true, stdin: true });
    await h.sendStdin(bytes);
    await h.closeStdin();
    const r = await withDeadline(h.wait(), 10_000, 'od');
    const got = r.stdout.trim().split(/\s+/).map((x) => parseInt(x, 16));
    assert.deepEqual(got, [...bytes]);
  });

  test('without stdin:true the command reads /dev/null', async () => {
    const r = await sbx.commands.run('readlink /proc/self/fd/0; cat', { timeoutMs: 10_000 });
    assert.equal(r.stdout, '/dev/null\n', 'cat must see EOF at once');
  });

  test('sendStdin to a command started without stdin fails', async () => {
    const h = await sbx.commands.run('sleep 30', { background: true });
    try {
      await assert.rejects(sbx.commands.sendStdin(h.pid, 'x\n'));
    } finally {
      await sbx.commands.kill(h.pid);
    }
  });
});

describe('kill', () => {
  test('kill() returns true, the command ends by signal and disappears', async () => {
    const h = await sbx.commands.run('sleep 30', { background: true });
    assert.equal(await sbx.commands.kill(h.pid), true);
    const err = await withDeadline(h.wait(), 10_000, 'wait() after kill').then(
      () => assert.fail('a killed command does not exit 0'),
      (e) => e,
    );
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, -1, 'killed by a signal: exitCode -1');
    assert.match(err.error, /signal: killed/);
    await waitGone(h.pid);
    assert.equal(await sbx.commands.kill(h.pid), false, 'a second kill finds nothing');
  });

  test('handle.kill() works too', async () => {
    const h = await sbx.commands.run('sleep 30', { background: true });
    assert.equal(await h.kill(), true);
    await assert.rejects(withDeadline(h.wait(), 10_000, 'wait()'), CommandExitError);
    await waitGone(h.pid);
  });

  test('kill of an unknown pid returns false', async () => {
    assert.equal(await sbx.commands.kill(999_999_999), false);
  });
});

describe('list', () => {
  test('shows a running background command with its cmd, args, envs and cwd', async () => {
    const dir = scratch();
    const cmd = `sleep 30 # ${uniq('marker')}`;
    const h = await sbx.commands.run(cmd, { background: true, envs: { LIST_VAR: 'v1' }, cwd: dir });
    try {
      const entry = (await sbx.commands.list()).find((p) => p.pid === h.pid);
      assert.ok(entry, `pid ${h.pid} is listed`);
      assert.equal(entry.cmd, '/bin/bash');
      assert.deepEqual(entry.args, ['-l', '-c', cmd]);
      assert.deepEqual(entry.envs, { LIST_VAR: 'v1' });
      assert.equal(entry.cwd, dir);
    } finally {
      await sbx.commands.kill(h.pid);
    }
    await waitGone(h.pid);
  });

  test('a finished command leaves the list', async () => {
    const h = await sbx.commands.run('true', { background: true });
    await h.wait();
    await waitFor(async () => !(await pids()).includes(h.pid), { what: 'finished pid to leave the list' });
  });
});

describe('connect', () => {
  test('connect(pid) receives live output (no replay) and the end', async () => {
    const h = await sbx.commands.run('while IFS= read -r l; do echo "got:$l"; done; exit 5', {
      background: true,
      stdin: true,
    });
    const first = uniq('first');
    await h.sendStdin(`${first}\n`);
    await waitFor(() => h.stdout.includes(`got:${first}\n`), { what: 'output to the first handle' });
    await h.disconnect();

    const seen = [];
    const c = await sbx.commands.connect(h.pid, { onStdout: (d) => seen.push(d) });
    assert.equal(c.pid, h.pid);
    const second = uniq('second');
    await sbx.commands.sendStdin(h.pid, `${second}\n`);
    await waitFor(() => seen.join('').includes(`got:${second}\n`), { what: 'live output on the connected handle' });
    await sbx.commands.closeStdin(h.pid);
    const err = await withDeadline(c.wait(), 10_000, 'connected wait()').then(
      () => assert.fail('expected exit 5'),
      (e) => e,
    );
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, 5);
    assert.ok(!c.stdout.includes(first), 'output from before connect() is not replayed');
    assert.equal(seen.join(''), `got:${second}\n`);
  });

  test('connect to a command that just exited returns its end', async () => {
    const h = await sbx.commands.run('exit 7', { background: true });
    await assert.rejects(h.wait(), CommandExitError);
    const c = await sbx.commands.connect(h.pid);
    const err = await withDeadline(c.wait(), 10_000, 'wait() on an exited command').then(
      () => assert.fail('expected exit 7'),
      (e) => e,
    );
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, 7);
  });

  test('connect to an unknown pid throws NotFoundError', async () => {
    await assert.rejects(sbx.commands.connect(999_999_999), NotFoundError);
  });
});

describe('deadlines', () => {
  test('timeoutMs ends a long command with a timeout error', async () => {
    const started = Date.now();
    const err = await sbx.commands.run('sleep 10', { timeoutMs: 500 }).then(
      () => assert.fail('sleep 10 cannot finish in 500 ms'),
      (e) => e,
    );
    assert.ok(err instanceof TimeoutError, `got ${err?.name}: ${err?.message}`);
    assert.match(err.message, /deadline_exceeded/);
    assert.ok(Date.now() - started < 9_000, 'the deadline fired, not the end of sleep');
  });

  test('the process is really gone after its deadline', async () => {
    const h = await sbx.commands.run('sleep 10', { background: true, timeoutMs: 500 });
    assert.ok((await pids()).includes(h.pid), 'running before the deadline');
    await assert.rejects(withDeadline(h.wait(), 9_000, 'the deadline'), TimeoutError);
    await waitGone(h.pid);
  });

  test('timeoutMs 0 means no deadline', async () => {
    const r = await sbx.commands.run('sleep 1; echo done', { timeoutMs: 0 });
    assert.equal(r.stdout, 'done\n');
  });

  test('requestTimeoutMs covers only the start of the command', async () => {
    // The start event must come at once; the SDK stops the request timer on it.
    const r = await sbx.commands.run('sleep 2; echo late', { requestTimeoutMs: 1_000 });
    assert.equal(r.stdout, 'late\n');
  });
});

describe('environment', () => {
  test('envs option is visible to the command', async () => {
    const r = await sbx.commands.run('printf "%s|%s" "$FOO" "$BAR"', { envs: { FOO: 'bar baz', BAR: 'x=y' } });
    assert.equal(r.stdout, 'bar baz|x=y');
  });

  test('HOME, USER, LOGNAME and PATH are set for the user', { skip: rootSkip }, async () => {
    const pw = passwdEntry('root');
    const r = await sbx.commands.run('printf "%s\\n" "$HOME" "$USER" "$LOGNAME" "$PATH"', { user: 'root' });
    const [home, user, logname, pathVar] = r.stdout.split('\n');
    assert.equal(home, pw.home);
    assert.equal(user, 'root');
    assert.equal(logname, 'root');
    assert.ok(pathVar.split(':').some((p) => p.startsWith('/')), `PATH looks like a path list: ${pathVar}`);
  });

  test("the daemon's own environment is not inherited", async () => {
    const r = await sbx.commands.run(`printf "%s" "\${${LEAK_VAR}-unset}"`);
    assert.equal(r.stdout, 'unset');
  });

  test('-env defaults are visible and request envs override them', async () => {
    const show = `printf "%s" "$${DEFAULT_VAR}"`;
    assert.equal((await sbx.commands.run(show)).stdout, DEFAULT_VAL);
    assert.equal((await sbx.commands.run(show, { envs: { [DEFAULT_VAR]: 'from-request' } })).stdout, 'from-request');
  });
});

describe('cwd', () => {
  test('cwd option', async () => {
    const dir = scratch();
    const r = await sbx.commands.run('pwd -P', { cwd: dir });
    assert.equal(r.stdout, `${fs.realpathSync(dir)}\n`);
  });

  test("without cwd the command starts in the user's home", { skip: rootSkip }, async () => {
    const r = await sbx.commands.run('pwd -P', { user: 'root' });
    assert.equal(r.stdout, `${fs.realpathSync(passwdEntry('root').home)}\n`);
  });

  test("a relative cwd is resolved against the user's home", { skip: rootSkip }, async () => {
    const home = passwdEntry('root').home;
    const dir = fs.mkdtempSync(path.join(home, '.hangar-conf-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const r = await sbx.commands.run('pwd -P', { user: 'root', cwd: path.basename(dir) });
    assert.equal(r.stdout, `${fs.realpathSync(dir)}\n`);
  });

  test('a missing cwd is an invalid argument', async () => {
    const missing = path.join(scratch(), 'does-not-exist');
    await assert.rejects(sbx.commands.run('true', { cwd: missing }), InvalidArgumentError);
  });

  test('-workdir sets the default cwd', async () => {
    const dir = scratch();
    const other = await startEnvd({ args: ['-workdir', dir] });
    try {
      const s = await other.sandbox();
      assert.equal((await s.commands.run('pwd -P')).stdout, `${fs.realpathSync(dir)}\n`);
    } finally {
      await other.stop();
    }
  });
});

describe('users', () => {
  test("the default user is the daemon's (root here)", { skip: rootSkip }, async () => {
    assert.equal((await sbx.commands.run('id -un')).stdout, 'root\n');
  });

  test("user:'root' runs as root", { skip: rootSkip }, async () => {
    const r = await sbx.commands.run('id -un; id -u', { user: 'root' });
    assert.equal(r.stdout, 'root\n0\n');
  });

  test(`user:'${OTHER_USER}' runs as ${OTHER_USER} in its home`, { skip: otherUserSkip() }, async () => {
    const pw = passwdEntry(OTHER_USER);
    const r = await sbx.commands.run('id -un; id -u; id -g; printf "%s\\n" "$HOME" "$USER"; pwd -P', { user: OTHER_USER });
    assert.equal(
      r.stdout,
      `${OTHER_USER}\n${pw.uid}\n${pw.gid}\n${pw.home}\n${OTHER_USER}\n${fs.realpathSync(pw.home)}\n`,
    );
  });

  test(`-user ${OTHER_USER} makes it the default user`, { skip: otherUserSkip() }, async () => {
    const other = await startEnvd({ args: ['-user', OTHER_USER] });
    try {
      const s = await other.sandbox();
      assert.equal((await s.commands.run('id -un')).stdout, `${OTHER_USER}\n`);
      assert.equal((await s.commands.run('id -un', { user: 'root' })).stdout, 'root\n');
    } finally {
      await other.stop();
    }
  });

  test('an unknown user is an authentication error', async () => {
    await assert.rejects(sbx.commands.run('true', { user: uniq('nosuchuser') }), AuthenticationError);
  });
});
