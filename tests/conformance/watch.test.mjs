// sandbox.files.watchDir() from the real E2B JS SDK against hangar-envd
// (filesystem.Filesystem/WatchDir server stream).
//
// Changes are made with node:fs directly, so the daemon sees ordinary inotify
// events rather than its own writes. Every wait is a polled condition with a
// deadline.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { InvalidArgumentError, NotFoundError, TimeoutError } from 'e2b';

import { runCleanups, startEnvd, tempDir, waitFor } from './harness.mjs';

let envd;
let sbx;
const cleanups = [];

before(async () => {
  envd = await startEnvd();
  sbx = await envd.sandbox();
});

after(async () => {
  await envd?.stop();
  await runCleanups(cleanups);
});

function scratch() {
  const dir = tempDir('hangar-conf-watch-');
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Starts a watch that records every event; stops it at the end of the file. */
async function watch(dir, opts = {}) {
  const events = [];
  const handle = await sbx.files.watchDir(dir, (e) => { events.push(e); }, opts);
  cleanups.push(() => { handle.stop(); });
  const has = (name, type) => events.some((e) => e.name === name && e.type === type);
  const waitEvent = (name, type) =>
    waitFor(() => has(name, type), { what: `${type} event for ${name}; got ${JSON.stringify(events.map((e) => [e.type, e.name]))}` });
  return { handle, events, has, waitEvent };
}

describe('watchDir', () => {
  test('create, write and remove events with names relative to the directory', async () => {
    const dir = scratch();
    const w = await watch(dir);
    const p = path.join(dir, 'a.txt');
    fs.writeFileSync(p, 'first');
    await w.waitEvent('a.txt', 'create');
    await w.waitEvent('a.txt', 'write');
    fs.appendFileSync(p, ' more');
    fs.rmSync(p);
    await w.waitEvent('a.txt', 'remove');
    for (const e of w.events) {
      assert.ok(!path.isAbsolute(e.name), `relative name: ${e.name}`);
      assert.ok(['create', 'write', 'remove', 'chmod', 'rename'].includes(e.type), `known type: ${e.type}`);
    }
  });

  test('a directory created inside shows up as create', async () => {
    const dir = scratch();
    const w = await watch(dir);
    fs.mkdirSync(path.join(dir, 'newdir'));
    await w.waitEvent('newdir', 'create');
  });

  test('rename produces rename (old name) and create (new name)', async () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'before.txt'), 'x');
    const w = await watch(dir);
    fs.renameSync(path.join(dir, 'before.txt'), path.join(dir, 'after.txt'));
    await w.waitEvent('before.txt', 'rename');
    await w.waitEvent('after.txt', 'create');
  });

  test('chmod produces chmod', async () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'mode.txt'), 'x');
    const w = await watch(dir);
    fs.chmodSync(path.join(dir, 'mode.txt'), 0o600);
    await w.waitEvent('mode.txt', 'chmod');
  });

  test('writes made through the SDK are seen too', async () => {
    const dir = scratch();
    const w = await watch(dir);
    await sbx.files.write(path.join(dir, 'via-sdk.txt'), 'hello');
    await w.waitEvent('via-sdk.txt', 'create');
    await w.waitEvent('via-sdk.txt', 'write');
  });

  test('recursive: events in subdirectories, including new ones, are named sub/file', async () => {
    const dir = scratch();
    fs.mkdirSync(path.join(dir, 'sub'));
    const w = await watch(dir, { recursive: true });
    fs.writeFileSync(path.join(dir, 'sub', 'x.txt'), 'x');
    await w.waitEvent(path.join('sub', 'x.txt'), 'create');
    // A directory created after the watch started is watched as well.
    fs.mkdirSync(path.join(dir, 'later'));
    await w.waitEvent('later', 'create');
    // Creating a file right after mkdir can race with the daemon adding the
    // new watch; retry with fresh names until one is reported.
    let n = 0;
    await waitFor(() => {
      if (w.events.some((e) => e.name.startsWith(`later${path.sep}y`) && e.type === 'create')) return true;
      fs.writeFileSync(path.join(dir, 'later', `y${n++}.txt`), 'y');
      return false;
    }, { intervalMs: 100, what: 'an event from the new subdirectory' });
  });

  test('non-recursive: nothing from subdirectories', async () => {
    const dir = scratch();
    fs.mkdirSync(path.join(dir, 'sub'));
    const w = await watch(dir);
    fs.writeFileSync(path.join(dir, 'sub', 'hidden.txt'), 'x');
    // A later top-level change marks the point by which the first would have arrived.
    fs.writeFileSync(path.join(dir, 'marker.txt'), 'm');
    await w.waitEvent('marker.txt', 'create');
    assert.ok(!w.events.some((e) => e.name.includes('hidden.txt')), JSON.stringify(w.events));
  });

  test('includeEntry attaches the entry to create events', async () => {
    const dir = scratch();
    const w = await watch(dir, { includeEntry: true });
    fs.writeFileSync(path.join(dir, 'with-entry.txt'), '12345');
    await w.waitEvent('with-entry.txt', 'create');
    const e = w.events.find((x) => x.name === 'with-entry.txt' && x.type === 'create');
    assert.ok(e.entry, 'entry present');
    assert.equal(e.entry.path, path.join(dir, 'with-entry.txt'));
    assert.equal(e.entry.type, 'file');
  });

  test('stop() ends delivery', async () => {
    const dir = scratch();
    const w = await watch(dir);
    fs.writeFileSync(path.join(dir, 'before-stop.txt'), 'x');
    await w.waitEvent('before-stop.txt', 'create');
    await w.handle.stop();
    const count = w.events.length;
    fs.writeFileSync(path.join(dir, 'after-stop.txt'), 'x');
    // A second watch on the same directory proves the change was observable.
    const w2 = await watch(dir);
    fs.writeFileSync(path.join(dir, 'probe.txt'), 'x');
    await w2.waitEvent('probe.txt', 'create');
    assert.equal(w.events.length, count, `no events after stop(): ${JSON.stringify(w.events.slice(count))}`);
  });

  test('timeoutMs ends the watch with a timeout error passed to onExit', async () => {
    const dir = scratch();
    let exitErr = null;
    let exited = false;
    await sbx.files.watchDir(dir, () => {}, {
      timeoutMs: 500,
      onExit: (err) => { exited = true; exitErr = err ?? null; },
    });
    await waitFor(() => exited, { what: 'onExit after the watch deadline' });
    assert.ok(exitErr instanceof TimeoutError, `got ${exitErr?.name}: ${exitErr?.message}`);
    assert.match(exitErr.message, /deadline_exceeded/);
  });

  test('watching a missing directory throws NotFoundError', async () => {
    await assert.rejects(sbx.files.watchDir(path.join(scratch(), 'missing'), () => {}), NotFoundError);
  });

  test('watching a file is an invalid argument', async () => {
    const p = path.join(scratch(), 'file.txt');
    fs.writeFileSync(p, 'x');
    await assert.rejects(sbx.files.watchDir(p, () => {}), InvalidArgumentError);
  });
});
