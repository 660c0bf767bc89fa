// A real S3-compatible server for the checkpoint store tests: s3rver on a
// loopback port the kernel picks, printed as "READY <port>" once it listens.
//
//   node s3-server.mjs DATA_DIR BUCKET     (S3_TEST_SECRET: the secret key)
//
// s3rver 3.7 checks that the access key id exists but does not verify SigV4
// signatures, so every request first goes through verifySigV4() below, an
// implementation of AWS's Signature Version 4 for header authorization that
// answers 403 SignatureDoesNotMatch as S3 does. The access key id is s3rver's
// own (S3RVER); the secret is the test's.
//
// s3rver 3.7 also lacks AbortMultipartUpload (it answers 405): abortUpload()
// implements it as S3 does, DELETE /BUCKET/KEY?uploadId=ID -> 204 with the
// upload's parts removed, 404 NoSuchUpload for an unknown id.
//
// It lacks ListMultipartUploads too (501 NotImplemented): listUploads()
// implements it as S3 does, GET /BUCKET?uploads[&prefix=P][&delimiter=D]
// [&max-uploads=N][&key-marker=K[&upload-id-marker=U]] ->
// ListMultipartUploadsResult, uploads in key order (then upload id), keys
// with D past the prefix rolled up into CommonPrefixes (each counts as one
// entry, and as a key-marker skips all under it), IsTruncated with
// NextKeyMarker and NextUploadIdMarker, at most max-uploads (1000 by default
// and at most) entries per page, keys XML-escaped. An upload's Initiated time is the modification time
// of the file in which s3rver keeps its key (written once, when it begins).
//
// Test controls under /-/ (unsigned, loopback only):
//   GET  /-/log                 one line per request: METHOD URL STATUS
//   POST /-/fail-part?n=N       the upload of part N answers 500 (once)
//   POST /-/fail-abort?times=N  the next N AbortMultipartUpload answer 500
//   GET  /-/uploads             how many multipart uploads are unfinished
//   POST /-/age-upload?uploadId=ID&seconds=N  (or key=KEY: all its uploads)
//                               backdates the upload's Initiated time by N s
//   POST /-/bad-list?kind=K[&times=N]  the next (N) ListMultipartUploads
//                               answer(s) 200 with a hostile body made of
//                               the true listing:
//                               truncated, oversized, nul, utf8, types,
//                               garbage, loop (no uploads, IsTruncated with
//                               markers that never move), extra (each upload
//                               twice: more than asked for when max-uploads=1)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import S3rver from 's3rver';

const [dir, bucket] = process.argv.slice(2);
const secret = process.env.S3_TEST_SECRET;
if (!dir || !bucket || !secret) {
  console.error('usage: S3_TEST_SECRET=... node s3-server.mjs DATA_DIR BUCKET');
  process.exit(2);
}

const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();
const sha256hex = (data) => crypto.createHash('sha256').update(data).digest('hex');

function s3error(ctx, status, code, message) {
  ctx.status = status;
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

// Returns null when the request is signed correctly, or why not.
function verifySigV4(req) {
  const auth = req.headers.authorization || '';
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return 'no SigV4 Authorization header';
  const [, , date, region, signedHeaders, signature] = m;
  const amzDate = req.headers['x-amz-date'] || '';
  if (!amzDate.startsWith(date)) return 'x-amz-date does not match the credential scope';
  const names = signedHeaders.split(';');
  for (const required of ['host', 'x-amz-date', 'x-amz-content-sha256'])
    if (!names.includes(required)) return `${required} is not signed`;
  const [path, query = ''] = req.url.split(/\?(.*)/s);
  const canonicalQuery = query === '' ? '' : query.split('&')
    .map((p) => (p.includes('=') ? p : p + '='))
    .sort()
    .join('&');
  const canonicalHeaders = names
    .map((h) => `${h}:${String(req.headers[h] ?? '').trim().replace(/\s+/g, ' ')}\n`)
    .join('');
  const canonicalRequest = [req.method, path, canonicalQuery, canonicalHeaders, signedHeaders,
    req.headers['x-amz-content-sha256']].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256hex(canonicalRequest)].join('\n');
  let key = hmac('AWS4' + secret, date);
  key = hmac(key, region);
  key = hmac(key, 's3');
  key = hmac(key, 'aws4_request');
  const expected = hmac(key, stringToSign).toString('hex');
  if (!crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(signature))) return 'signature mismatch';
  return null;
}

const uploadsDir = () => server.store.getResourcePath(bucket, undefined, 'uploads');

function abortUpload(ctx) {
  const id = String(ctx.query.uploadId);
  const key = decodeURIComponent(ctx.path.slice(bucket.length + 2));
  const dir = path.join(uploadsDir(), id);
  let recorded = null;
  if (/^[0-9a-f]{1,64}$/.test(id) && ctx.path.startsWith(`/${bucket}/`)) {
    try { recorded = fs.readFileSync(path.join(dir, 'key'), 'utf8'); } catch { recorded = null; }
  }
  if (recorded !== key) {
    s3error(ctx, 404, 'NoSuchUpload', 'The specified upload does not exist.');
    return;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  ctx.status = 204;
}

const xmlEscape = (v) => v.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  .replace(/"/g, '&quot;').replace(/'/g, '&apos;');

// Every unfinished upload: { key, id, initiated (Date), keyFile }.
function allUploads() {
  let ids;
  try { ids = fs.readdirSync(uploadsDir()); } catch { return []; }
  const out = [];
  for (const id of ids) {
    const keyFile = path.join(uploadsDir(), id, 'key');
    try {
      out.push({ key: fs.readFileSync(keyFile, 'utf8'), id, initiated: fs.statSync(keyFile).mtime, keyFile });
    } catch { /* being aborted or completed */ }
  }
  return out;
}

// ups: uploads ({ key, id, initiated }) and common prefixes ({ cp }), in order.
function listingXml(ups, { prefix, delimiter, keyMarker, idMarker, max, truncated }) {
  const last = ups.length ? ups[ups.length - 1] : null;
  const uploads = ups.filter((u) => u.cp === undefined);
  const cps = ups.filter((u) => u.cp !== undefined);
  return '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
    `<Bucket>${bucket}</Bucket><KeyMarker>${xmlEscape(keyMarker)}</KeyMarker>` +
    `<UploadIdMarker>${xmlEscape(idMarker)}</UploadIdMarker>` +
    `<NextKeyMarker>${truncated && last ? xmlEscape(last.cp ?? last.key) : ''}</NextKeyMarker>` +
    `<NextUploadIdMarker>${truncated && last && last.cp === undefined ? last.id : ''}</NextUploadIdMarker>` +
    (prefix !== '' ? `<Prefix>${xmlEscape(prefix)}</Prefix>` : '<Prefix/>') +
    (delimiter !== '' ? `<Delimiter>${xmlEscape(delimiter)}</Delimiter>` : '') +
    `<MaxUploads>${max}</MaxUploads><IsTruncated>${truncated}</IsTruncated>` +
    uploads.map((u) => '<Upload>' +
      `<Key>${xmlEscape(u.key)}</Key><UploadId>${u.id}</UploadId>` +
      '<Initiator><ID>S3RVER</ID><DisplayName>S3RVER</DisplayName></Initiator>' +
      '<Owner><ID>S3RVER</ID><DisplayName>S3RVER</DisplayName></Owner>' +
      `<StorageClass>STANDARD</StorageClass><Initiated>${u.initiated.toISOString()}</Initiated>` +
      '</Upload>').join('') +
    cps.map((c) => `<CommonPrefixes><Prefix>${xmlEscape(c.cp)}</Prefix></CommonPrefixes>`).join('') +
    '</ListMultipartUploadsResult>';
}

let badList = null;
let badListTimes = 0;

// A hostile answer made of the true one, so that a lax reader would act on it.
function hostile(kind, xml, ups, opts) {
  switch (kind) {
    case 'truncated': return xml.slice(0, xml.lastIndexOf('</Upload>') + '</Upload>'.length);
    case 'oversized': return xml.replace('</ListMultipartUploadsResult>',
      `<Pad>${'x'.repeat(1 << 20)}</Pad></ListMultipartUploadsResult>`);
    case 'nul': return xml.replace('</Key>', '\u0000</Key>');
    case 'utf8': {
      const b = Buffer.from(xml);
      const i = b.indexOf('</Key>');
      return Buffer.concat([b.subarray(0, i), Buffer.from([0xff, 0xfe]), b.subarray(i)]);
    }
    case 'types': return xml.replace(/<IsTruncated>[a-z]*<\/IsTruncated>/, '<IsTruncated>maybe</IsTruncated>');
    case 'garbage': return 'these are not the uploads you are looking for <Upload><Key>' + xmlEscape(ups[0]?.key ?? '') + '</Key>';
    case 'loop': return listingXml([], { ...opts, truncated: true })
      .replace(/<NextKeyMarker>[^<]*</, `<NextKeyMarker>${xmlEscape(opts.keyMarker || 'k')}<`)
      .replace(/<NextUploadIdMarker>[^<]*</, `<NextUploadIdMarker>${xmlEscape(opts.idMarker || 'u')}<`);
    case 'extra': return listingXml([...ups, ...ups], opts);
    default: return xml;
  }
}

function listUploads(ctx) {
  const q = ctx.query;
  const prefix = q.prefix === undefined ? '' : String(q.prefix);
  const keyMarker = q['key-marker'] === undefined ? '' : String(q['key-marker']);
  const idMarker = keyMarker === '' || q['upload-id-marker'] === undefined ? '' : String(q['upload-id-marker']);
  let max = 1000;
  if (q['max-uploads'] !== undefined) {
    if (!/^[0-9]+$/.test(String(q['max-uploads']))) {
      s3error(ctx, 400, 'InvalidArgument', 'max-uploads must be an integer from 0 to 2147483647');
      return;
    }
    max = Math.min(1000, Number(q['max-uploads']));
  }
  const delimiter = q.delimiter === undefined ? '' : String(q.delimiter);
  const sorted = allUploads()
    .filter((u) => u.key.startsWith(prefix))
    .filter((u) => keyMarker === '' || u.key > keyMarker || (u.key === keyMarker && idMarker !== '' && u.id > idMarker))
    .filter((u) => delimiter === '' || !keyMarker.endsWith(delimiter) || !u.key.startsWith(keyMarker))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const all = [];
  for (const u of sorted) {
    const cut = delimiter === '' ? -1 : u.key.indexOf(delimiter, prefix.length);
    if (cut < 0) {
      all.push(u);
    } else {
      const cp = u.key.slice(0, cut + delimiter.length);
      if (!all.length || all[all.length - 1].cp !== cp) all.push({ cp });
    }
  }
  const ups = all.slice(0, max);
  const opts = { prefix, delimiter, keyMarker, idMarker, max, truncated: all.length > max };
  const xml = listingXml(ups, opts);
  ctx.status = 200;
  ctx.type = 'application/xml';
  if (badList && badListTimes > 0) {
    ctx.body = hostile(badList, xml, ups, opts);
    if (--badListTimes === 0) badList = null;
  } else {
    ctx.body = xml;
  }
}

function ageUpload(ctx) {
  const seconds = Number(ctx.query.seconds);
  const hit = allUploads().filter((u) => (ctx.query.uploadId !== undefined && u.id === String(ctx.query.uploadId)) ||
    (ctx.query.key !== undefined && u.key === String(ctx.query.key)));
  if (!Number.isInteger(seconds) || seconds < 0 || hit.length === 0) {
    ctx.status = 400;
    ctx.body = 'need seconds=N and the uploadId or key of an unfinished upload\n';
    return;
  }
  for (const u of hit) {
    const t = new Date(u.initiated.getTime() - seconds * 1000);
    fs.utimesSync(u.keyFile, t, t);
  }
  ctx.body = `${hit.length}\n`;
}

function pendingUploads() {
  try { return fs.readdirSync(uploadsDir()).length; } catch { return 0; }
}

const log = [];
const failParts = new Set();
let failAborts = 0;

const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory: dir,
  vhostBuckets: false,
  configureBuckets: [{ name: bucket }],
});

server.middleware.unshift(async (ctx, next) => {
  if (ctx.path.startsWith('/-/')) {
    if (ctx.path === '/-/log') {
      ctx.body = log.join('\n') + '\n';
    } else if (ctx.path === '/-/uploads') {
      ctx.body = `${pendingUploads()}\n`;
    } else if (ctx.path === '/-/age-upload' && ctx.method === 'POST') {
      ageUpload(ctx);
    } else if (ctx.path === '/-/bad-list' && ctx.method === 'POST') {
      badList = String(ctx.query.kind);
      badListTimes = ctx.query.times === undefined ? 1 : Number(ctx.query.times);
      ctx.body = 'ok\n';
    } else if (ctx.path === '/-/fail-abort' && ctx.method === 'POST') {
      failAborts = Number(ctx.query.times ?? 1);
      ctx.body = 'ok\n';
    } else if (ctx.path === '/-/fail-part' && ctx.method === 'POST') {
      failParts.add(String(ctx.query.n));
      ctx.body = 'ok\n';
    } else {
      ctx.status = 404;
    }
    return;
  }
  const why = verifySigV4(ctx.req);
  try {
    if (why) {
      s3error(ctx, 403, 'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided.');
    } else if (ctx.method === 'PUT' && ctx.query.uploadId && failParts.has(String(ctx.query.partNumber))) {
      failParts.delete(String(ctx.query.partNumber));
      s3error(ctx, 500, 'InternalError', 'We encountered an internal error. Please try again.');
    } else if (ctx.method === 'GET' && ctx.query.uploads !== undefined &&
               (ctx.path === `/${bucket}` || ctx.path === `/${bucket}/`)) {
      listUploads(ctx);
    } else if (ctx.method === 'DELETE' && ctx.query.uploadId !== undefined && failAborts > 0) {
      failAborts--;
      s3error(ctx, 500, 'InternalError', 'We encountered an internal error. Please try again.');
    } else if (ctx.method === 'DELETE' && ctx.query.uploadId !== undefined) {
      abortUpload(ctx);
    } else {
      await next();
    }
  } finally {
    log.push(`${ctx.method} ${ctx.url} ${ctx.status}`);
  }
});

const { port } = await server.run();
process.stdout.write(`READY ${port}\n`);
