// sandbox.pty.* from the real E2B JS SDK against hangar-envd
// (process.Process/Start with a pty, SendInput pty, Update, SendSignal).

import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { CommandExitError } from 'e2b';

import { runCleanups, startEnvd, tempDir, waitFor, withDeadline } from './harness.mjs';

let envd;
let sbx;
const cleanups = [];

before(async () => {
  envd = await startEnvd();
  sbx = await envd.sandbox();
});

after(async () => {
  try {
    await runCleanups(cleanups); // kills the terminals, so the daemon leaves none behind
  } finally {
    await envd?.stop();
  }
});

const enc = new TextEncoder();

/** Opens a terminal and collects everything it prints as text. */
async function openPty(opts = {}) {
  const dec = new TextDecoder();
  const term = { text: '' };
  const handle = await sbx.pty.create({
    cols: 80,
    rows: 24,
    timeoutMs: 60_000,
    ...opts,
    onData: (d) => {
      assert.ok(d instanceof Uint8Array, 'pty data is bytes');
      term.text += dec.decode(d, { stream: true });
    },
  });
  cleanups.push(() => sbx.pty.kill(handle.pid).catch(() => {}));
  term.handle = handle;
  term.send = (s) => sbx.pty.sendInput(handle.pid, enc.encode(s));
  // The command line is echoed by the terminal, so look for a result that
  // only the shell's evaluation can produce.
  term.run = async (cmdline, expect) => {
    await term.send(`${cmdline}\n`);
    await waitFor(() => expect.test(term.text), { what: `${expect} in terminal output ${JSON.stringify(term.text.slice(-300))}` });
    return term.text.match(expect);
  };
  return term;
}

describe('pty', () => {
  test('create, type a command, see its output', async () => {
    const t = await openPty();
    assert.ok(t.handle.pid > 0);
    const a = randomInt(100, 999);
    const b = randomInt(100, 999);
    await t.run(`echo "sum=$((${a}+${b}))"`, new RegExp(`sum=${a + b}\\b`));
  });

  test('the terminal has the size it was created with', async () => {
    const t = await openPty({ cols: 91, rows: 37 });
    await t.run('echo "size=$(stty size)"', /size=37 91\b/);
  });

  test('resize, then stty size prints the new rows and cols', async () => {
    const t = await openPty();
    const rows = randomInt(20, 60);
    const cols = randomInt(60, 200);
    await sbx.pty.resize(t.handle.pid, { cols, rows });
    await t.run('echo "size=$(stty size)"', new RegExp(`size=${rows} ${cols}\\b`));
  });

  test('TERM=xterm-256color and the locale are set', async () => {
    const t = await openPty();
    await t.run('echo "term=$TERM lang=$LANG"', /term=xterm-256color lang=C\.UTF-8/);
  });

  test('envs and cwd are honoured', async () => {
    const dir = tempDir('hangar-conf-pty-');
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const t = await openPty({ envs: { PTY_VAR: 'pty-value' }, cwd: dir });
    await t.run('echo "v=$PTY_VAR d=$(pwd -P)"', new RegExp(`v=pty-value d=${fs.realpathSync(dir)}`));
  });

  test('it is a real terminal', async () => {
    const t = await openPty();
    await t.run('test -t 0 && test -t 1 && echo "tty=$(tty)"', /tty=\/dev\/pts\/\d+/);
  });

  test('exit ends the session with its code', async () => {
    const t = await openPty();
    const code = randomInt(2, 100);
    await t.send(`exit ${code}\n`);
    const err = await withDeadline(t.handle.wait(), 10_000, 'wait() after exit').then(
      () => assert.fail('expected a non-zero exit'),
      (e) => e,
    );
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, code);
  });

  test('kill returns true, ends the session, then returns false', async () => {
    const t = await openPty();
    assert.ok((await sbx.commands.list()).some((p) => p.pid === t.handle.pid), 'listed while running');
    assert.equal(await sbx.pty.kill(t.handle.pid), true);
    const err = await withDeadline(t.handle.wait(), 10_000, 'wait() after kill').then(
      () => assert.fail('a killed terminal does not exit 0'),
      (e) => e,
    );
    assert.ok(err instanceof CommandExitError, `got ${err?.name}: ${err?.message}`);
    assert.equal(err.exitCode, -1);
    await waitFor(async () => !(await sbx.commands.list()).some((p) => p.pid === t.handle.pid), {
      what: 'the terminal to leave the list',
    });
    assert.equal(await sbx.pty.kill(t.handle.pid), false);
  });

  test('pty.connect receives live output', async () => {
    const t = await openPty();
    await t.run('echo ready-$((1+1))', /ready-2/);
    await t.handle.disconnect();
    const dec = new TextDecoder();
    let text = '';
    const c = await sbx.pty.connect(t.handle.pid, { onData: (d) => { text += dec.decode(d, { stream: true }); } });
    assert.equal(c.pid, t.handle.pid);
    await t.send('echo again-$((20+22))\n');
    await waitFor(() => /again-42/.test(text), { what: 'output on the connected handle' });
  });

  test('stdin-only RPCs are refused for a terminal', async () => {
    const t = await openPty();
    await assert.rejects(sbx.commands.sendStdin(t.handle.pid, 'x'));
  });
});
