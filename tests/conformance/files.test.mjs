// sandbox.files.* from the real E2B JS SDK against hangar-envd
// (GET/POST /files and filesystem.Filesystem: Stat, ListDir, MakeDir, Move, Remove).
//
// The daemon runs on this machine, so every write is checked on disk with
// node:fs and every read is compared with what node:fs put there.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';

import { AuthenticationError, FileNotFoundError, InvalidArgumentError, NotFoundError, SandboxError } from 'e2b';

import {
  goModeString, groupNameOf, isRoot, OTHER_USER, otherUserSkip, passwdEntry, runCleanups, startEnvd, tempDir, userNameOf,
} from './harness.mjs';

let envd;
let sbx;
const cleanups = [];

before(async () => {
  envd = await startEnvd();
  // A recording proxy in front of the daemon shows which upload shape the SDK chose.
  await envd.tap();
  sbx = await envd.sandbox();
});

after(async () => {
  await envd?.stop();
  await runCleanups(cleanups);
});

function scratch() {
  const dir = tempDir();
  cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function uniq(prefix) {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Requests the proxy saw for `/files?path=<p>` since `from`. */
function fileRequests(p, from = 0) {
  return envd.requests.slice(from).filter((r) => {
    const u = new URL(r.url, 'http://x');
    if (u.pathname !== '/files') return false;
    // a multipart upload of several files carries no ?path=
    return p === undefined || u.searchParams.get('path') === p;
  });
}

async function streamToBuffer(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

describe('write and read', () => {
  test('text round trip; write returns the entry', async () => {
    const p = path.join(scratch(), 'hello.txt');
    const text = `hello ${uniq('text')}\nsecond line ✓\n`;
    const info = await sbx.files.write(p, text);
    assert.equal(info.path, p);
    assert.equal(info.name, 'hello.txt');
    assert.equal(info.type, 'file');
    assert.equal(fs.readFileSync(p, 'utf8'), text, 'on disk');
    assert.equal(await sbx.files.read(p), text);
  });

  test('reads what is on disk', async () => {
    const p = path.join(scratch(), 'from-disk.txt');
    const text = uniq('disk');
    fs.writeFileSync(p, text);
    assert.equal(await sbx.files.read(p), text);
  });

  test('overwrite replaces the whole file', async () => {
    const p = path.join(scratch(), 'over.txt');
    await sbx.files.write(p, 'a much longer first version\n');
    await sbx.files.write(p, 'short\n');
    assert.equal(fs.readFileSync(p, 'utf8'), 'short\n');
  });

  test('empty file', async () => {
    const p = path.join(scratch(), 'empty');
    await sbx.files.write(p, '');
    assert.equal(fs.statSync(p).size, 0);
    assert.equal(await sbx.files.read(p), '');
    assert.equal((await sbx.files.read(p, { format: 'bytes' })).length, 0);
  });

  test('bytes: all 256 byte values', async () => {
    const p = path.join(scratch(), 'bytes.bin');
    const data = Uint8Array.from({ length: 256 }, (_, i) => i);
    await sbx.files.write(p, data);
    assert.deepEqual([...fs.readFileSync(p)], [...data], 'on disk');
    const got = await sbx.files.read(p, { format: 'bytes' });
    assert.ok(got instanceof Uint8Array);
    assert.deepEqual([...got], [...data]);
  });

  test('ArrayBuffer upload', async () => {
    const p = path.join(scratch(), 'ab.bin');
    const data = randomBytes(4096);
    await sbx.files.write(p, data.buffer.slice(data.byteOffset, data.byteOffset + data.length));
    assert.ok(fs.readFileSync(p).equals(data));
  });

  test('blob write and read', async () => {
    const p = path.join(scratch(), 'blob.bin');
    const data = randomBytes(10_000);
    await sbx.files.write(p, new Blob([data]));
    assert.ok(fs.readFileSync(p).equals(data), 'on disk');
    const blob = await sbx.files.read(p, { format: 'blob' });
    assert.ok(blob instanceof Blob);
    assert.ok(Buffer.from(await blob.arrayBuffer()).equals(data));
  });

  test('stream write (octet-stream, chunked) and stream read', async () => {
    const p = path.join(scratch(), 'stream.bin');
    const parts = [randomBytes(70_000), randomBytes(1), randomBytes(200_000)];
    const mark = envd.requests.length;
    const body = new ReadableStream({
      start(c) {
        for (const part of parts) c.enqueue(new Uint8Array(part));
        c.close();
      },
    });
    await sbx.files.write(p, body);
    const want = Buffer.concat(parts);
    assert.ok(fs.readFileSync(p).equals(want), 'on disk');
    const [req] = fileRequests(p, mark);
    assert.ok(req, 'the upload went through the proxy');
    assert.match(req.headers['content-type'], /^application\/octet-stream/, 'the SDK streams as octet-stream');

    const stream = await sbx.files.read(p, { format: 'stream' });
    assert.ok((await streamToBuffer(stream)).equals(want));
  });

  test('a large file round-trips', async () => {
    const p = path.join(scratch(), 'large.bin');
    const data = randomBytes(5 * 1024 * 1024 + 3);
    await sbx.files.write(p, data);
    assert.ok(fs.readFileSync(p).equals(data), 'on disk');
    assert.ok(Buffer.from(await sbx.files.read(p, { format: 'bytes' })).equals(data));
  });

  test('writing creates missing parent directories', async () => {
    const dir = scratch();
    const p = path.join(dir, 'a', 'b', 'c', 'deep.txt');
    await sbx.files.write(p, 'deep');
    assert.equal(fs.readFileSync(p, 'utf8'), 'deep');
    assert.ok(fs.statSync(path.join(dir, 'a', 'b')).isDirectory());
  });

  test("a relative path is resolved against the user's home", { skip: isRoot ? false : 'needs root' }, async () => {
    const home = passwdEntry('root').home;
    const name = `.hangar-conf-${uniq('rel')}.txt`;
    cleanups.push(() => fs.rmSync(path.join(home, name), { recursive: true, force: true }));
    await sbx.files.write(name, 'relative', { user: 'root' });
    assert.ok(fs.statSync(path.join(home, name)).isFile(), `${path.join(home, name)} is the file written`);
    assert.equal(fs.readFileSync(path.join(home, name), 'utf8'), 'relative');
    assert.equal(await sbx.files.read(name, { user: 'root' }), 'relative');
  });

  test("a ~/ path is resolved against the user's home", { skip: isRoot ? false : 'needs root' }, async () => {
    const home = passwdEntry('root').home;
    const name = `.hangar-conf-${uniq('tilde')}.txt`;
    cleanups.push(() => fs.rmSync(path.join(home, name), { recursive: true, force: true }));
    const info = await sbx.files.write(`~/${name}`, 'tilde', { user: 'root' });
    assert.equal(info.path, path.join(home, name));
    assert.ok(fs.statSync(path.join(home, name)).isFile(), `${path.join(home, name)} is the file written`);
    assert.equal(await sbx.files.read(`~/${name}`, { user: 'root' }), 'tilde');
  });
});

describe('upload shapes', () => {
  test('default upload is one multipart request', async () => {
    const p = path.join(scratch(), 'multi.txt');
    const mark = envd.requests.length;
    await sbx.files.write(p, 'multipart body');
    const reqs = fileRequests(p, mark);
    assert.equal(reqs.length, 1);
    assert.match(reqs[0].headers['content-type'], /^multipart\/form-data; boundary=/);
    assert.equal(fs.readFileSync(p, 'utf8'), 'multipart body');
  });

  test('useOctetStream sends the raw body (envd >= 0.5.7; debug mode reports 99.99.99)', async () => {
    const p = path.join(scratch(), 'octet.bin');
    const data = randomBytes(33_333);
    const mark = envd.requests.length;
    const info = await sbx.files.write(p, data, { useOctetStream: true });
    assert.equal(info.path, p);
    const [req] = fileRequests(p, mark);
    assert.match(req.headers['content-type'], /^application\/octet-stream/);
    assert.equal(req.headers['content-encoding'], undefined);
    assert.ok(fs.readFileSync(p).equals(data));
  });

  test('gzip upload: octet-stream with Content-Encoding gzip', async () => {
    const p = path.join(scratch(), 'gz-up.txt');
    const text = 'compressible '.repeat(5000);
    const mark = envd.requests.length;
    await sbx.files.write(p, text, { gzip: true });
    const [req] = fileRequests(p, mark);
    assert.match(req.headers['content-type'], /^application\/octet-stream/);
    assert.equal(req.headers['content-encoding'], 'gzip');
    assert.equal(fs.readFileSync(p, 'utf8'), text, 'stored decompressed');
  });

  test('gzip read: content is intact', async () => {
    const p = path.join(scratch(), 'gz-down.bin');
    const data = Buffer.concat([Buffer.from('x'.repeat(50_000)), randomBytes(1000)]);
    fs.writeFileSync(p, data);
    const mark = envd.requests.length;
    const got = await sbx.files.read(p, { format: 'bytes', gzip: true });
    assert.ok(Buffer.from(got).equals(data));
    const [req] = fileRequests(p, mark);
    assert.match(req.headers['accept-encoding'], /\bgzip\b/, 'the SDK asked for gzip');
    assert.equal(req.responseHeaders['content-encoding'], 'gzip', 'and the daemon compressed');
    assert.equal(await sbx.files.read(p, { gzip: true }).then((s) => s.length > 0), true);
  });

  test('GET /files honours Accept-Encoding: gzip on the wire', async () => {
    // fetch() decompresses transparently, so look at the raw response.
    const p = path.join(scratch(), 'raw-gz.txt');
    const text = 'raw gzip check '.repeat(2000);
    fs.writeFileSync(p, text);
    const res = await new Promise((resolve, reject) => {
      http.get(`${envd.url}/files?path=${encodeURIComponent(p)}`, { headers: { 'Accept-Encoding': 'gzip' } }, resolve)
        .on('error', reject);
    });
    const raw = await streamToBuffer(res);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-encoding'], 'gzip');
    assert.equal(zlib.gunzipSync(raw).toString(), text);
  });

  test('GET /files without Accept-Encoding is not compressed', async () => {
    const p = path.join(scratch(), 'raw-plain.txt');
    fs.writeFileSync(p, 'plain');
    const res = await new Promise((resolve, reject) => {
      http.get(`${envd.url}/files?path=${encodeURIComponent(p)}`, resolve).on('error', reject);
    });
    const raw = await streamToBuffer(res);
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-encoding'], undefined);
    assert.equal(raw.toString(), 'plain');
    assert.match(res.headers['content-disposition'] ?? '', /filename=.*raw-plain\.txt/);
  });

  test('many files in one call: one multipart request with a part per file', async () => {
    const dir = scratch();
    const files = Array.from({ length: 7 }, (_, i) => ({
      path: path.join(dir, `sub${i % 2}`, `f${i}.txt`),
      data: `content ${i} ${uniq('f')}`,
    }));
    files.push({ path: path.join(dir, 'bin.dat'), data: Uint8Array.from([0, 255, 10, 13]) });
    const mark = envd.requests.length;
    const infos = await sbx.files.write(files);
    assert.ok(Array.isArray(infos));
    assert.equal(infos.length, files.length);
    assert.deepEqual(infos.map((i) => i.path), files.map((f) => f.path), 'entries in part order');
    for (const info of infos) {
      assert.equal(info.type, 'file');
      assert.equal(info.name, path.basename(info.path));
    }
    for (const f of files) {
      const want = typeof f.data === 'string' ? Buffer.from(f.data) : Buffer.from(f.data);
      assert.ok(fs.readFileSync(f.path).equals(want), f.path);
    }
    const reqs = envd.requests.slice(mark).filter((r) => r.url.startsWith('/files'));
    assert.equal(reqs.length, 1, 'a single request');
    assert.match(reqs[0].headers['content-type'], /^multipart\/form-data/);
  });

  test('many files with useOctetStream: one request per file', async () => {
    const dir = scratch();
    const files = [1, 2, 3].map((i) => ({ path: path.join(dir, `o${i}.bin`), data: randomBytes(100 * i) }));
    const infos = await sbx.files.write(files, { useOctetStream: true });
    assert.deepEqual(infos.map((i) => i.path).sort(), files.map((f) => f.path).sort());
    for (const f of files) assert.ok(fs.readFileSync(f.path).equals(f.data));
  });
});

describe('exists and getInfo', () => {
  test('exists is true for files and directories, false for missing paths', async () => {
    const dir = scratch();
    const p = path.join(dir, 'there.txt');
    fs.writeFileSync(p, 'x');
    assert.equal(await sbx.files.exists(p), true);
    assert.equal(await sbx.files.exists(dir), true);
    assert.equal(await sbx.files.exists(path.join(dir, 'not-there')), false);
  });

  test('getInfo of a file', async () => {
    const dir = scratch();
    const p = path.join(dir, 'info.txt');
    const data = 'twelve bytes';
    await sbx.files.write(p, data);
    const st = fs.lstatSync(p);
    const info = await sbx.files.getInfo(p);
    assert.equal(info.name, 'info.txt');
    assert.equal(info.path, p);
    assert.equal(info.type, 'file');
    assert.equal(info.size, Buffer.byteLength(data));
    assert.equal(info.mode, st.mode & 0o777);
    assert.equal(info.permissions, goModeString(st.mode));
    assert.match(info.permissions, /^-[rwx-]{9}$/);
    assert.equal(info.owner, userNameOf(st.uid));
    assert.equal(info.group, groupNameOf(st.gid));
    assert.ok(info.modifiedTime instanceof Date);
    assert.ok(Math.abs(info.modifiedTime.getTime() - st.mtimeMs) < 2, `mtime ${info.modifiedTime.toISOString()} vs ${st.mtime.toISOString()}`);
  });

  test('getInfo of a directory', async () => {
    const dir = scratch();
    fs.chmodSync(dir, 0o750);
    const st = fs.lstatSync(dir);
    const info = await sbx.files.getInfo(dir);
    assert.equal(info.type, 'dir');
    assert.equal(info.name, path.basename(dir));
    assert.equal(info.mode, 0o750);
    assert.equal(info.permissions, goModeString(st.mode));
    assert.equal(info.permissions, 'drwxr-x---');
  });

  test('getInfo of a symlink reports the target type and the link target', async () => {
    const dir = scratch();
    const target = path.join(dir, 'target.txt');
    fs.writeFileSync(target, 'target');
    const link = path.join(dir, 'link');
    fs.symlinkSync(target, link);
    const info = await sbx.files.getInfo(link);
    assert.equal(info.path, link);
    assert.equal(info.type, 'file');
    assert.equal(info.symlinkTarget, fs.realpathSync(target));
  });

  test('getInfo of a missing path throws NotFoundError', async () => {
    await assert.rejects(sbx.files.getInfo(path.join(scratch(), 'missing')), NotFoundError);
  });
});

describe('list', () => {
  function tree() {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'a.txt'), 'a');
    fs.mkdirSync(path.join(dir, 'sub', 'deeper'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'sub', 'b.txt'), 'bb');
    fs.writeFileSync(path.join(dir, 'sub', 'deeper', 'c.txt'), 'ccc');
    return dir;
  }

  test('depth 1: direct children with absolute paths', async () => {
    const dir = tree();
    const entries = await sbx.files.list(dir);
    const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
    assert.deepEqual(Object.keys(byName).sort(), ['a.txt', 'sub']);
    assert.equal(byName['a.txt'].path, path.join(dir, 'a.txt'));
    assert.equal(byName['a.txt'].type, 'file');
    assert.equal(byName['a.txt'].size, 1);
    assert.equal(byName.sub.path, path.join(dir, 'sub'));
    assert.equal(byName.sub.type, 'dir');
  });

  test('depth 2: children and grandchildren', async () => {
    const dir = tree();
    const entries = await sbx.files.list(dir, { depth: 2 });
    const rel = entries.map((e) => path.relative(dir, e.path)).sort();
    assert.deepEqual(rel, ['a.txt', 'sub', path.join('sub', 'b.txt'), path.join('sub', 'deeper')].sort());
    const b = entries.find((e) => e.path === path.join(dir, 'sub', 'b.txt'));
    assert.equal(b.name, 'b.txt');
    assert.equal(b.size, 2);
  });

  test('an empty directory lists as []', async () => {
    assert.deepEqual(await sbx.files.list(scratch()), []);
  });

  test('list of a missing directory throws NotFoundError', async () => {
    await assert.rejects(sbx.files.list(path.join(scratch(), 'missing')), NotFoundError);
  });
});

describe('makeDir, rename, remove', () => {
  test('makeDir returns true, then false when it exists', async () => {
    const p = path.join(scratch(), 'x', 'y', 'z');
    assert.equal(await sbx.files.makeDir(p), true);
    assert.ok(fs.statSync(p).isDirectory());
    assert.equal(await sbx.files.makeDir(p), false);
  });

  test('makeDir over an existing file is an invalid argument', async () => {
    const p = path.join(scratch(), 'file');
    fs.writeFileSync(p, 'x');
    await assert.rejects(sbx.files.makeDir(p), InvalidArgumentError);
  });

  test('rename moves a file and returns the new entry', async () => {
    const dir = scratch();
    const from = path.join(dir, 'old.txt');
    const to = path.join(dir, 'new-parent', 'new.txt');
    fs.writeFileSync(from, 'moved content');
    const info = await sbx.files.rename(from, to);
    assert.equal(info.path, to);
    assert.equal(info.name, 'new.txt');
    assert.equal(info.type, 'file');
    assert.equal(fs.existsSync(from), false);
    assert.equal(fs.readFileSync(to, 'utf8'), 'moved content');
  });

  test('rename a directory', async () => {
    const dir = scratch();
    fs.mkdirSync(path.join(dir, 'd1'));
    fs.writeFileSync(path.join(dir, 'd1', 'f'), 'f');
    const info = await sbx.files.rename(path.join(dir, 'd1'), path.join(dir, 'd2'));
    assert.equal(info.type, 'dir');
    assert.equal(fs.readFileSync(path.join(dir, 'd2', 'f'), 'utf8'), 'f');
  });

  test('rename of a missing source throws NotFoundError', async () => {
    const dir = scratch();
    await assert.rejects(sbx.files.rename(path.join(dir, 'nope'), path.join(dir, 'dest')), NotFoundError);
  });

  test('remove deletes files and whole trees; a missing path is fine', async () => {
    const dir = scratch();
    const f = path.join(dir, 'f.txt');
    fs.writeFileSync(f, 'x');
    fs.mkdirSync(path.join(dir, 'tree', 'inner'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'tree', 'inner', 'g'), 'g');
    await sbx.files.remove(f);
    assert.equal(fs.existsSync(f), false);
    await sbx.files.remove(path.join(dir, 'tree'));
    assert.equal(fs.existsSync(path.join(dir, 'tree')), false);
    await sbx.files.remove(path.join(dir, 'never-existed'));
    assert.equal(await sbx.files.exists(dir), true);
  });
});

// Upload metadata lives in user.e2b.* xattrs; node:fs cannot read xattrs, so
// python3 does, and the test is skipped where user xattrs are unavailable.
function xattrs(file) {
  const r = spawnSync('python3', ['-c', `
import json, os, sys
p = sys.argv[1]
print(json.dumps({k: os.getxattr(p, k).decode() for k in os.listxattr(p) if k.startswith('user.')}))
`, file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`reading xattrs failed: ${r.stderr || r.error}`);
  return JSON.parse(r.stdout);
}

function xattrSkip() {
  const dir = tempDir('hangar-conf-xattr-');
  try {
    const f = path.join(dir, 'probe');
    fs.writeFileSync(f, '');
    const r = spawnSync('python3', ['-c', 'import os, sys; os.setxattr(sys.argv[1], "user.probe", b"1")', f]);
    return r.status === 0 ? false : 'needs python3 and user xattrs on the temp directory';
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('metadata', () => {
  const skip = xattrSkip();

  test('X-Metadata-* becomes user.e2b.* xattrs and EntryInfo.metadata', { skip }, async () => {
    const p = path.join(scratch(), 'meta.txt');
    const info = await sbx.files.write(p, 'with metadata', { metadata: { Owner: 'alice', 'build-id': '42' } });
    const want = { owner: 'alice', 'build-id': '42' }; // keys are lower-cased
    assert.deepEqual(info.metadata, want);
    assert.deepEqual(xattrs(p), { 'user.e2b.owner': 'alice', 'user.e2b.build-id': '42' });
    assert.deepEqual((await sbx.files.getInfo(p)).metadata, want);
    const listed = (await sbx.files.list(path.dirname(p))).find((e) => e.path === p);
    assert.deepEqual(listed.metadata, want);
  });

  test('each upload replaces the metadata set', { skip }, async () => {
    const p = path.join(scratch(), 'meta2.txt');
    await sbx.files.write(p, 'v1', { metadata: { a: '1', b: '2' } });
    await sbx.files.write(p, 'v2', { metadata: { c: '3' } });
    assert.deepEqual(xattrs(p), { 'user.e2b.c': '3' });
    await sbx.files.write(p, 'v3');
    assert.deepEqual(xattrs(p), {});
    assert.equal((await sbx.files.getInfo(p)).metadata, undefined);
  });
});

/** A scratch directory that belongs to the user (envd acts with the user's own rights). */
function userScratch(pw) {
  const dir = scratch();
  fs.chmodSync(dir, 0o755);
  fs.chownSync(dir, pw.uid, pw.gid);
  return dir;
}

describe('users and ownership', () => {
  test(`files written as ${OTHER_USER} belong to ${OTHER_USER}, parents too`, { skip: otherUserSkip() }, async () => {
    const pw = passwdEntry(OTHER_USER);
    const dir = userScratch(pw);
    const p = path.join(dir, 'made', 'by-user.txt');
    const info = await sbx.files.write(p, 'mine', { user: OTHER_USER });
    assert.equal(info.path, p);
    assert.equal(fs.statSync(p).uid, pw.uid);
    assert.equal(fs.statSync(path.join(dir, 'made')).uid, pw.uid, 'created parent directory');
    assert.equal((await sbx.files.getInfo(p)).owner, OTHER_USER);
  });

  test(`makeDir as ${OTHER_USER} is owned by ${OTHER_USER}`, { skip: otherUserSkip() }, async () => {
    const pw = passwdEntry(OTHER_USER);
    const p = path.join(userScratch(pw), 'udir');
    assert.equal(await sbx.files.makeDir(p, { user: OTHER_USER }), true);
    assert.equal(fs.statSync(p).uid, pw.uid);
  });

  test(`${OTHER_USER} cannot write, make or read where only root can`, { skip: otherUserSkip() }, async () => {
    const dir = scratch(); // root's, mode 0700
    fs.chmodSync(dir, 0o755);
    const secret = path.join(dir, 'secret.txt');
    fs.writeFileSync(secret, 'root only', { mode: 0o600 });
    await assert.rejects(sbx.files.write(path.join(dir, 'planted.txt'), 'x', { user: OTHER_USER }),
      (e) => e instanceof SandboxError && /permission denied/.test(e.message));
    await assert.rejects(sbx.files.makeDir(path.join(dir, 'sub'), { user: OTHER_USER }),
      (e) => e instanceof SandboxError && /permission/.test(e.message));
    await assert.rejects(sbx.files.read(secret, { user: OTHER_USER }),
      (e) => e instanceof SandboxError && /permission denied/.test(e.message));
    assert.deepEqual(fs.readdirSync(dir), ['secret.txt']);
    assert.equal(await sbx.files.read(secret, { user: 'root' }), 'root only');
  });

  test(`relative paths for ${OTHER_USER} resolve in its home`, { skip: otherUserSkip() }, async () => {
    const pw = passwdEntry(OTHER_USER);
    const name = `.hangar-conf-${uniq('urel')}.txt`;
    cleanups.push(() => fs.rmSync(path.join(pw.home, name), { recursive: true, force: true }));
    await sbx.files.write(name, 'in home', { user: OTHER_USER });
    assert.equal(fs.readFileSync(path.join(pw.home, name), 'utf8'), 'in home');
  });
});

describe('errors', () => {
  test('reading a missing file throws NotFoundError (FileNotFoundError)', async () => {
    const err = await sbx.files.read(path.join(scratch(), 'missing.txt')).then(
      () => assert.fail('expected an error'),
      (e) => e,
    );
    assert.ok(err instanceof NotFoundError, `got ${err?.name}: ${err?.message}`);
    assert.ok(err instanceof FileNotFoundError);
  });

  test('reading a directory is an error', async () => {
    await assert.rejects(sbx.files.read(scratch()), InvalidArgumentError);
  });

  test('/files errors are JSON {code, message} with the HTTP status', async () => {
    const dir = scratch();
    for (const [p, status] of [[path.join(dir, 'missing'), 404], [dir, 400]]) {
      const res = await fetch(`${envd.url}/files?path=${encodeURIComponent(p)}`);
      const body = await res.text();
      assert.equal(res.status, status, body);
      assert.match(res.headers.get('content-type') ?? '', /^application\/json(; charset=utf-8)?$/, 'one JSON Content-Type');
      const json = JSON.parse(body);
      assert.equal(json.code, status);
      assert.equal(typeof json.message, 'string');
    }
  });

  test('writing under a path whose parent is a file is an error', async () => {
    const dir = scratch();
    fs.writeFileSync(path.join(dir, 'plain'), 'x');
    await assert.rejects(sbx.files.write(path.join(dir, 'plain', 'child.txt'), 'y'));
    assert.equal(fs.readFileSync(path.join(dir, 'plain'), 'utf8'), 'x', 'the file is untouched');
  });

  test('writing onto a directory is an error', async () => {
    const dir = scratch();
    fs.mkdirSync(path.join(dir, 'd'));
    await assert.rejects(sbx.files.write(path.join(dir, 'd'), 'y'), InvalidArgumentError);
  });

  test('list of a non-directory is an invalid argument', async () => {
    const p = path.join(scratch(), 'f');
    fs.writeFileSync(p, 'x');
    await assert.rejects(sbx.files.list(p), InvalidArgumentError);
  });

  test('an unknown user is an authentication error (read, write, RPC)', async () => {
    const user = uniq('nosuchuser');
    const p = path.join(scratch(), 'u.txt');
    fs.writeFileSync(p, 'x');
    await assert.rejects(sbx.files.read(p, { user }), AuthenticationError);
    await assert.rejects(sbx.files.write(path.join(path.dirname(p), 'w.txt'), 'y', { user }), AuthenticationError);
    assert.equal(fs.existsSync(path.join(path.dirname(p), 'w.txt')), false, 'nothing written');
    await assert.rejects(sbx.files.list(path.dirname(p), { user }), AuthenticationError);
    await assert.rejects(sbx.files.exists(p, { user }), AuthenticationError);
  });
});
