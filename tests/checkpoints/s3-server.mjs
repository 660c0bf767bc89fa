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
// Test controls under /-/ (unsigned, loopback only):
//   GET  /-/log                 one line per request: METHOD URL STATUS
//   POST /-/fail-part?n=N       the upload of part N answers 500 (once)
//   GET  /-/uploads             how many multipart uploads are unfinished
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

function pendingUploads() {
  try { return fs.readdirSync(uploadsDir()).length; } catch { return 0; }
}

const log = [];
const failParts = new Set();

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
