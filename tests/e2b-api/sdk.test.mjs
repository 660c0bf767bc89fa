// The real E2B JS SDK against hangard's /e2b, with only its documented
// settings (apiUrl, apiKey) changed: each call is checked against what
// hangard's /v1 API (an admin token) says happened, not against the SDK's
// own account of it.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { ADMIN_KEY, E2B_KEY, Hangard, RW_KEY, e2b, waitFor } from './harness.mjs';

const { Sandbox } = e2b;
let hd;

before(async () => {
  hd = await new Hangard().start();
});

after(async () => {
  await hd?.cleanup();
});

async function v1State(id) {
  const r = await hd.v1('GET', `/v1/sandboxes/${id}`);
  return r.status === 200 ? r.json().state : r.status;
}

async function exec(id, command) {
  const r = await hd.v1('POST', `/v1/sandboxes/${id}/exec`, { command });
  assert.equal(r.status, 200, r.body);
  return r.json();
}

test('Sandbox.create makes a running sandbox with its lifetime and envVars', async () => {
  const sb = await Sandbox.create({
    ...hd.opts(),
    metadata: { suite: 'e2b-api', case: 'create' },
    envs: { GREETING: 'hello from e2b' },
    timeoutMs: 120_000,
  });
  try {
    assert.match(sb.sandboxId, /^[A-Za-z0-9_-]{1,64}$/);
    const info = (await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json();
    assert.equal(info.state, 'running');
    const left = info.expires_at_us / 1000 - Date.now();
    assert.ok(left > 100_000 && left <= 121_000, `lifetime left ${left} ms, asked 120 s`);
    assert.equal((await exec(sb.sandboxId, 'printf %s "$GREETING"')).stdout, 'hello from e2b');
    // The tokens the SDK keeps are per sandbox and never empty.
    assert.match(sb.envdAccessToken, /^[0-9a-f]{64}$/);
    assert.match(sb.trafficAccessToken, /^[0-9a-f]{64}$/);
  } finally {
    await sb.kill();
  }
});

test('getInfo reports what create was given; another sandbox has other tokens', async () => {
  const a = await Sandbox.create({ ...hd.opts(), metadata: { who: 'a' }, timeoutMs: 60_000 });
  const b = await Sandbox.create({ ...hd.opts(), metadata: { who: 'b' }, timeoutMs: 60_000 });
  try {
    const info = await Sandbox.getInfo(a.sandboxId, hd.opts());
    assert.equal(info.sandboxId, a.sandboxId);
    assert.equal(info.templateId, 'base');
    assert.deepEqual(info.metadata, { who: 'a' });
    assert.equal(info.state, 'running');
    assert.ok(info.endAt > info.startedAt);
    assert.notEqual(a.envdAccessToken, b.envdAccessToken);
    assert.notEqual(a.trafficAccessToken, b.trafficAccessToken);
  } finally {
    await a.kill();
    await b.kill();
  }
});

test('setTimeout changes the lifetime both ways', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
  try {
    const expires = async () => (await hd.v1('GET', `/v1/sandboxes/${sb.sandboxId}`)).json().expires_at_us / 1000;
    await sb.setTimeout(600_000);
    let left = (await expires()) - Date.now();
    assert.ok(left > 590_000 && left <= 601_000, `after 600 s: ${left} ms`);
    await sb.setTimeout(30_000);
    left = (await expires()) - Date.now();
    assert.ok(left > 20_000 && left <= 31_000, `after 30 s: ${left} ms`);
  } finally {
    await sb.kill();
  }
});

test('list filters by metadata and state, and pages', async () => {
  const tag = `run-${process.pid}-${Date.now()}`;
  const made = [];
  try {
    for (let i = 0; i < 3; i++) made.push(await Sandbox.create({ ...hd.opts(), metadata: { tag, n: String(i) }, timeoutMs: 60_000 }));
    const all = await Sandbox.list({ ...hd.opts(), query: { metadata: { tag } } }).nextItems();
    assert.deepEqual(all.map((s) => s.sandboxId).sort(), made.map((s) => s.sandboxId).sort());
    const one = await Sandbox.list({ ...hd.opts(), query: { metadata: { tag, n: '1' } } }).nextItems();
    assert.deepEqual(one.map((s) => s.sandboxId), [made[1].sandboxId]);
    assert.deepEqual(one[0].metadata, { tag, n: '1' });
    const none = await Sandbox.list({ ...hd.opts(), query: { metadata: { tag: tag + 'x' } } }).nextItems();
    assert.deepEqual(none, []);

    // Pages of one: every sandbox once, newest first, then no more.
    const pager = Sandbox.list({ ...hd.opts(), query: { metadata: { tag } }, limit: 1 });
    const seen = [];
    while (pager.hasNext) {
      const page = await pager.nextItems();
      assert.ok(page.length <= 1, `a page of ${page.length}`);
      seen.push(...page.map((s) => s.sandboxId));
      assert.ok(seen.length <= 3, 'pages never end');
    }
    assert.deepEqual(seen, made.map((s) => s.sandboxId).reverse());

    assert.equal(await made[0].pause(), true);
    const paused = await Sandbox.list({ ...hd.opts(), query: { metadata: { tag }, state: ['paused'] } }).nextItems();
    assert.deepEqual(paused.map((s) => s.sandboxId), [made[0].sandboxId]);
    const running = await Sandbox.list({ ...hd.opts(), query: { metadata: { tag }, state: ['running'] } }).nextItems();
    assert.equal(running.length, 2);
    assert.ok(!running.some((s) => s.sandboxId === made[0].sandboxId));
  } finally {
    for (const s of made) await s.kill();
  }
});

test('pause keeps memory, a second pause is false, connect resumes it', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 120_000 });
  try {
    // A process whose memory must outlive the pause.
    await exec(sb.sandboxId, 'nohup sleep 1000 >/dev/null 2>&1 & echo $! > /tmp/sleeper');
    const pid = (await exec(sb.sandboxId, 'cat /tmp/sleeper')).stdout.trim();
    assert.equal(await sb.pause(), true);
    assert.equal(await v1State(sb.sandboxId), 'paused');
    assert.equal(await Sandbox.pause(sb.sandboxId, hd.opts()), false);
    const back = await Sandbox.connect(sb.sandboxId, { ...hd.opts(), timeoutMs: 90_000 });
    assert.equal(back.sandboxId, sb.sandboxId);
    assert.equal(back.envdAccessToken, sb.envdAccessToken, 'a hot resume keeps the tokens');
    assert.equal(await v1State(sb.sandboxId), 'running');
    assert.equal((await exec(sb.sandboxId, `kill -0 ${pid} && echo alive`)).stdout.trim(), 'alive');
    // Connecting to a running sandbox changes nothing but extends it.
    const again = await Sandbox.connect(sb.sandboxId, hd.opts());
    assert.equal(again.sandboxId, sb.sandboxId);
  } finally {
    await sb.kill();
  }
});

test('kill removes the sandbox; a second kill is false', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
  assert.equal(await sb.kill(), true);
  assert.equal(await v1State(sb.sandboxId), 410);
  assert.equal(await Sandbox.kill(sb.sandboxId, hd.opts()), false);
});

test('an unknown sandbox is the SDK\'s NotFoundError', async () => {
  await assert.rejects(Sandbox.getInfo('sb-0000000000000000', hd.opts()), e2b.NotFoundError);
  await assert.rejects(Sandbox.connect('sb-0000000000000000', hd.opts()), e2b.NotFoundError);
  await assert.rejects(Sandbox.setTimeout('sb-0000000000000000', 10_000, hd.opts()), e2b.NotFoundError);
});

test('a missing or wrong key is the SDK\'s AuthenticationError', async () => {
  await assert.rejects(Sandbox.create({ ...hd.opts(), apiKey: 'e2b_not_a_key' }), e2b.AuthenticationError);
  await assert.rejects(Sandbox.getInfo('sb-0000000000000000', { ...hd.opts(), apiKey: 'wrong' }), e2b.AuthenticationError);
});

test('a hangard token without the sandboxes scope is refused (403)', async () => {
  await assert.rejects(Sandbox.create({ ...hd.opts(), apiKey: RW_KEY }), (err) => {
    assert.ok(err instanceof e2b.SandboxError, String(err));
    assert.equal(err.statusCode, 403);
    assert.match(err.message, /sandboxes scope/);
    return true;
  });
});

test('what does not map is refused, never done another way', async () => {
  // Resume on traffic: the edge does not wake a paused sandbox.
  await assert.rejects(Sandbox.create({ ...hd.opts(), lifecycle: { onTimeout: 'pause', autoResume: true } }), (err) => {
    assert.equal(err.statusCode, 400);
    assert.match(err.message, /autoResume/);
    return true;
  });
  assert.deepEqual((await hd.v1('GET', '/v1/sandboxes')).json().sandboxes, []);
  // No checkpoint store, and the local provider keeps no filesystem-only
  // pause: 400 naming what to configure, not a memory pause.
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
  try {
    await assert.rejects(sb.pause({ keepMemory: false }), (err) => {
      assert.equal(err.statusCode, 400);
      assert.match(err.message, /HANGAR_CHECKPOINT_STORE/);
      return true;
    });
    assert.equal(await v1State(sb.sandboxId), 'running');
  } finally {
    await sb.kill();
  }
});

test('over the token\'s rate is the SDK\'s RateLimitError', async () => {
  const slow = await new Hangard({ env: { HANGARD_TOKEN_RATE: '1', HANGARD_TOKEN_BURST: '1' } }).start();
  try {
    // The SDK retries a 429 only when Retry-After fits its request deadline.
    const opts = slow.opts({ requestTimeoutMs: 500 });
    await assert.rejects(Sandbox.getInfo('sb-0000000000000000', opts), e2b.NotFoundError);
    await assert.rejects(Sandbox.getInfo('sb-0000000000000000', opts), e2b.RateLimitError);
  } finally {
    await slow.cleanup();
  }
});

test('tokens survive a restart with the same HANGAR_SECRET_KEY', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 120_000 });
  const other = new Hangard({ stateDir: hd.stateDir });
  try {
    await other.start();
    const again = await Sandbox.connect(sb.sandboxId, other.opts());
    assert.equal(again.envdAccessToken, sb.envdAccessToken);
    assert.equal(again.trafficAccessToken, sb.trafficAccessToken);
  } finally {
    await other.remove();
    await sb.kill();
  }
});

test('the bearer form of the key works as X-API-Key does', async () => {
  const r = await hd.request('GET', '/e2b/v2/sandboxes', { key: null, headers: { Authorization: `Bearer ${E2B_KEY}` } });
  assert.equal(r.status, 200, r.body);
  assert.ok(Array.isArray(r.json()));
  await waitFor(async () => (await hd.request('GET', '/e2b/health', { key: null })).status === 204, { what: '/e2b/health' });
});

test('getMetrics reports the sandbox\'s resources', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 60_000 });
  try {
    const samples = await sb.getMetrics();
    assert.ok(samples.length >= 1, 'no sample');
    let m = samples.at(-1);
    assert.ok(m.cpuCount >= 1, `cpuCount ${m.cpuCount}`);
    assert.ok(m.memTotal > 0 && m.memUsed >= 0 && m.memUsed <= m.memTotal, JSON.stringify(m));
    // Right after a create the memory in use can read 0 (what bwrap and envd took as they started
    // stays with the jail: hangar_sandbox_metrics(3)); 4 MiB the sandbox holds in its /tmp counts.
    const r = await hd.v1('POST', `/v1/sandboxes/${sb.sandboxId}/exec`, { command: 'head -c 4194304 /dev/zero > /tmp/fill' });
    assert.equal(r.status, 200, r.body);
    assert.equal(r.json().exit_code, 0, r.body);
    await waitFor(async () => {
      m = (await sb.getMetrics()).at(-1);
      return m && m.memUsed >= 4 * 1024 * 1024 && m.memUsed <= m.memTotal;
    }, { what: 'a sample with the 4 MiB in use' });
    assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60_000, `sampled at ${m.timestamp}`);
    // A window that ended before the sandbox existed holds nothing.
    assert.deepEqual(await Sandbox.getMetrics(sb.sandboxId, { ...hd.opts(), end: new Date(Date.now() - 3_600_000) }), []);
    await assert.rejects(Sandbox.getMetrics('sb-0000000000000000', hd.opts()), e2b.NotFoundError);
  } finally {
    await sb.kill();
  }
});

test('logs: the limits a sandbox hit, filtered by level, text and direction', async () => {
  // Small limits, so that a command reaches both: an OOM kill (error) and
  // refused forks (warn).
  const small = await new Hangard({ env: { HANGAR_LOCAL_MEMORY_MB: '64', HANGAR_LOCAL_PIDS: '24' } }).start();
  try {
    const made = await small.request('POST', '/e2b/v2/sandboxes', { body: { templateID: 'base', timeout: 120 } });
    assert.equal(made.status, 201, made.body);
    const id = made.json().sandboxID;
    const run = (command) => small.v1('POST', `/v1/sandboxes/${id}/exec`, { command });
    await run('head -c 300000000 /dev/zero | tail > /dev/null');
    await run('for i in $(seq 60); do sleep 5 & done 2>/dev/null; wait');
    const logs = async (q) => {
      const r = await small.request('GET', `/e2b/v2/sandboxes/${id}/logs${q}`);
      assert.equal(r.status, 200, r.body);
      return r.json().logs;
    };
    const all = await waitFor(async () => {
      const l = await logs('');
      return l.some((e) => e.level === 'error') && l.some((e) => /process limit/.test(e.message)) && l;
    }, { what: 'the OOM kill and the refused forks in the log' });
    for (const e of all) {
      assert.ok(!Number.isNaN(Date.parse(e.timestamp)), e.timestamp);
      assert.deepEqual(e.fields, {});
    }
    const errors = await logs('?level=error');
    assert.ok(errors.length >= 1 && errors.every((e) => e.level === 'error'), JSON.stringify(errors));
    assert.ok(errors.some((e) => /memory limit/.test(e.message)));
    const warns = await logs('?level=warn');
    assert.ok(warns.length > errors.length && warns.every((e) => e.level === 'warn' || e.level === 'error'));
    const found = await logs(`?search=${encodeURIComponent('process limit')}`);
    assert.ok(found.length >= 1 && found.every((e) => e.message.includes('process limit')), JSON.stringify(found));
    assert.deepEqual(await logs('?search=no-such-line'), []);
    assert.equal((await logs('?limit=1')).length, 1);
    const backward = await logs('?direction=backward');
    assert.deepEqual(backward.map((e) => e.message), all.map((e) => e.message).reverse());
    // After every entry, nothing.
    assert.deepEqual(await logs(`?cursor=${Date.now() + 3_600_000}`), []);
    for (const q of ['?level=loud', '?direction=sideways', '?limit=1001', '?cursor=-1', `?search=${'x'.repeat(257)}`]) {
      const r = await small.request('GET', `/e2b/v2/sandboxes/${id}/logs${q}`);
      assert.equal(r.status, 400, `${q}: ${r.body}`);
    }
  } finally {
    await small.cleanup();
  }
});

test('a create retried with its Idempotency-Key answers the sandbox it made', async () => {
  const key = `retry-${process.pid}-${Date.now()}`;
  const opts = { ...hd.opts(), headers: { 'Idempotency-Key': key }, metadata: { idem: key }, timeoutMs: 60_000 };
  const first = await Sandbox.create(opts);
  let other;
  try {
    const again = await Sandbox.create(opts);
    assert.equal(again.sandboxId, first.sandboxId);
    assert.equal(again.envdAccessToken, first.envdAccessToken);
    const listed = await Sandbox.list({ ...hd.opts(), query: { metadata: { idem: key } } }).nextItems();
    assert.equal(listed.length, 1, 'the retry made a second sandbox');
    // The same key from another caller is another create.
    other = await Sandbox.create({ ...opts, apiKey: ADMIN_KEY });
    assert.notEqual(other.sandboxId, first.sandboxId);
  } finally {
    await first.kill();
    await other?.kill();
  }
});

test('a sandbox whose lifetime ran out is the SDK\'s NotFoundError', async () => {
  const sb = await Sandbox.create({ ...hd.opts(), timeoutMs: 2_000 });
  try {
    await waitFor(async () => {
      try {
        await Sandbox.getInfo(sb.sandboxId, hd.opts());
        return false;
      } catch (err) {
        if (err instanceof e2b.NotFoundError) return true;
        throw err;
      }
    }, { timeoutMs: 30_000, what: 'the sandbox to end with its lifetime' });
    assert.equal(await v1State(sb.sandboxId), 410);
    assert.equal(await Sandbox.kill(sb.sandboxId, hd.opts()), false);
  } finally {
    await sb.kill().catch(() => {});
  }
});
