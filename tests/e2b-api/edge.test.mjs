// The real E2B JS SDK's envd traffic (commands, files, PTY) through
// hangard's sandbox edge: the SDK is given hangard as its sandbox URL
// (sandboxUrl, E2B_SANDBOX_URL) besides its API URL and key, and nothing
// else. What the SDK reports is checked against what /v1 (an admin token)
// sees in the sandbox.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Hangard, e2b, waitFor } from './harness.mjs';

const { Sandbox } = e2b;
let hd;
let sb;

before(async () => {
  hd = await new Hangard().start();
  sb = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 300_000 });
});

after(async () => {
  await sb?.kill().catch(() => {});
  await hd?.cleanup();
});

async function exec(id, command) {
  const r = await hd.v1('POST', `/v1/sandboxes/${id}/exec`, { command });
  assert.equal(r.status, 200, r.body);
  return r.json();
}

test('commands.run: output, exit codes, a failing command as CommandExitError', async () => {
  const ok = await sb.commands.run('echo out; echo err >&2');
  assert.equal(ok.exitCode, 0);
  assert.equal(ok.stdout, 'out\n');
  assert.equal(ok.stderr, 'err\n');
  await assert.rejects(sb.commands.run('echo partial; exit 7'), (err) => {
    assert.ok(err instanceof e2b.CommandExitError, `${err}`);
    assert.equal(err.exitCode, 7);
    assert.equal(err.stdout, 'partial\n');
    return true;
  });
  // The command ran in the sandbox: /v1 sees what it left.
  await sb.commands.run('echo -n via-edge > /tmp/edge-mark');
  assert.equal((await exec(sb.sandboxId, 'cat /tmp/edge-mark')).stdout, 'via-edge');
});

test('a command over its timeoutMs is the SDK\'s TimeoutError', async () => {
  const t0 = Date.now();
  await assert.rejects(sb.commands.run('sleep 30', { timeoutMs: 1000 }), e2b.TimeoutError);
  assert.ok(Date.now() - t0 < 15_000, 'the timeout ended the call');
});

test('a background command, then connect to it and wait for its end', async () => {
  // The command blocks on a fifo until /v1 writes to it.
  await exec(sb.sandboxId, 'rm -f /tmp/edge-go-fifo; mkfifo /tmp/edge-go-fifo');
  const bg = await sb.commands.run('read line < /tmp/edge-go-fifo; echo "got $line"', { background: true });
  const again = await sb.commands.connect(bg.pid);
  const listed = await sb.commands.list();
  assert.ok(listed.some((p) => p.pid === bg.pid), 'the background command is listed');
  await exec(sb.sandboxId, 'echo hello > /tmp/edge-go-fifo');
  const res = await again.wait();
  assert.equal(res.exitCode, 0);
  assert.equal(res.stdout, 'got hello\n');
});

test('files: write, read, list, exists, remove', async () => {
  await sb.files.makeDir('/tmp/edge-files');
  await sb.files.write('/tmp/edge-files/a.txt', 'alpha');
  await sb.files.write([{ path: '/tmp/edge-files/b.bin', data: new Uint8Array([0, 1, 2, 255]) }]);
  assert.equal(await sb.files.read('/tmp/edge-files/a.txt'), 'alpha');
  assert.deepEqual([...(await sb.files.read('/tmp/edge-files/b.bin', { format: 'bytes' }))], [0, 1, 2, 255]);
  assert.deepEqual((await sb.files.list('/tmp/edge-files')).map((e) => e.name).sort(), ['a.txt', 'b.bin']);
  assert.equal(await sb.files.exists('/tmp/edge-files/a.txt'), true);
  await sb.files.remove('/tmp/edge-files/a.txt');
  assert.equal(await sb.files.exists('/tmp/edge-files/a.txt'), false);
  assert.equal((await exec(sb.sandboxId, 'ls /tmp/edge-files')).stdout, 'b.bin\n');
  await assert.rejects(sb.files.read('/tmp/edge-files/none'), e2b.NotFoundError);
});

test('files: a watch reports a write made in the sandbox', async () => {
  await sb.files.makeDir('/tmp/edge-watch');
  const seen = [];
  const w = await sb.files.watchDir('/tmp/edge-watch', (ev) => seen.push(ev.name));
  try {
    await exec(sb.sandboxId, 'echo x > /tmp/edge-watch/new.txt');
    await waitFor(() => seen.includes('new.txt'), { what: `new.txt among ${JSON.stringify(seen)}` });
  } finally {
    await w.stop();
  }
});

test('a few MB up and down, byte for byte', async () => {
  const big = new Uint8Array(6 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 255;
  await sb.files.write('/tmp/edge-big', big);
  const sum = (await exec(sb.sandboxId, 'cksum < /tmp/edge-big')).stdout;
  const back = await sb.files.read('/tmp/edge-big', { format: 'bytes' });
  assert.equal(back.length, big.length);
  assert.equal(Buffer.compare(Buffer.from(back), Buffer.from(big)), 0);
  // A stream of the same bytes, read as it comes.
  const stream = await sb.files.read('/tmp/edge-big', { format: 'stream' });
  let n = 0;
  for await (const part of stream) n += part.length;
  assert.equal(n, big.length);
  assert.match(sum, /^\d+ 6291456\n$/);
});

test('a PTY: create, send input, read its output', async () => {
  const dec = new TextDecoder();
  let text = '';
  const term = await sb.pty.create({ cols: 80, rows: 24, timeoutMs: 60_000, onData: (d) => { text += dec.decode(d, { stream: true }); } });
  try {
    await sb.pty.sendInput(term.pid, new TextEncoder().encode('echo $((6 * 7))-edge\n'));
    await waitFor(() => /42-edge/.test(text), { what: `42-edge in ${JSON.stringify(text.slice(-200))}` });
  } finally {
    await sb.pty.kill(term.pid);
  }
});

test('setTimeout, then commands still run', async () => {
  await sb.setTimeout(240_000);
  assert.equal((await sb.commands.run('echo after')).stdout, 'after\n');
});

// E2B's edge answers 502 for a sandbox that is not running: the SDK makes
// it SandboxNotFoundError on a command's start, TimeoutError elsewhere.
test('pause: commands fail as on E2B; after connect they run again', async () => {
  const p = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 120_000 });
  try {
    assert.equal((await p.commands.run('echo before')).stdout, 'before\n');
    assert.equal(await p.pause(), true);
    await assert.rejects(p.commands.run('echo paused'), e2b.SandboxNotFoundError);
    await assert.rejects(p.files.read('/etc/hostname'), e2b.TimeoutError);
    assert.equal(await p.isRunning(), false);
    const back = await Sandbox.connect(p.sandboxId, hd.edgeOpts());
    assert.equal((await back.commands.run('echo resumed')).stdout, 'resumed\n');
    assert.equal(await back.isRunning(), true);
  } finally {
    await p.kill();
  }
});

test('a killed sandbox fails through the edge as on E2B', async () => {
  const k = await Sandbox.create({ ...hd.edgeOpts(), timeoutMs: 60_000 });
  await k.kill();
  await assert.rejects(k.commands.run('true'), e2b.SandboxNotFoundError);
  await assert.rejects(k.files.read('/etc/hostname'), e2b.TimeoutError);
});

test('hangard stops at once with streams open through the edge', async () => {
  // A hangard of its own, stopped under a command stream and a watch.
  const other = await new Hangard().start();
  try {
    const s = await Sandbox.create({ ...other.edgeOpts(), timeoutMs: 60_000 });
    await s.commands.run('sleep 100', { background: true });
    await s.files.watchDir('/tmp', () => {});
    const t0 = Date.now();
    await other.stop();
    // Within HANGARD_SHUTDOWN_SECONDS (10 s) the streams would hold it.
    assert.ok(Date.now() - t0 < 5000, `stopped after ${Date.now() - t0} ms`);
    assert.match(other.log(), /"msg":"stopped"/);
    // Started again, for its cleanup to kill the sandbox.
    await other.start();
  } finally {
    await other.cleanup();
  }
});
