/*
 * Tiers over in-process providers that inject faults: picking, fallback on
 * "full" and "unreachable" only, cooldowns (and Retry-After), the isolated
 * tier's rules, named providers, concurrent creates, audit events, hedged
 * creates, and the provider recorded with a sandbox across a restart.
 *
 * The providers' sandboxes are only records: they describe an envd endpoint
 * nobody ever connects to, since tiers only create, attach and kill.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <hangar/hangar.h>
#include <hangar/sys/provider.h>
#include "clock.h"

/* ---- a fault-injecting provider -------------------------------------------------- */

#define MAX_BOXES 256

struct tprov {
	const char *name;
	uint64_t caps;
	struct hangar_provider_ops ops;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	/* faults */
	int fail_code;              /* a HANGAR_E* code create fails with, or 0 */
	int fail_http;
	int fail_errno;
	int fail_retry_after;       /* seconds for hangar_sys_error_retry_after(), or 0 */
	int fail_unreachable;       /* the failure carries HANGAR_ERROR_UNREACHABLE */
	char fail_msg[128];
	int gate;                   /* creates wait while it is set */
	/* what happened */
	int creates;                /* calls of create */
	int waiting;                /* creates waiting at the gate */
	int connects;
	int kills;
	int next_id;
	char *live[MAX_BOXES];      /* ids of live sandboxes */
	int nlive;
};

static int tp_init(void **state, hangar_ctx *ctx, void *data)
{
	(void)ctx;
	*state = data;
	return 0;
}

static int describe(const char *id, hangar_sys_sandbox *out)
{
	int rc = hangar_sys_sandbox_set_id(out, id);

	if (!rc)
		rc = hangar_sys_sandbox_set_envd_url(out, "http://127.0.0.1:9");
	return rc;
}

static int tp_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	struct tprov *t = state;
	char id[64];

	(void)opts;
	pthread_mutex_lock(&t->mu);
	t->creates++;
	t->waiting++;
	pthread_cond_broadcast(&t->cond);
	while (t->gate)
		pthread_cond_wait(&t->cond, &t->mu);
	t->waiting--;
	if (t->fail_code) {
		int code = t->fail_code, http = t->fail_http, err = t->fail_errno, ra = t->fail_retry_after;
		int unreachable = t->fail_unreachable;
		char msg[128];

		snprintf(msg, sizeof(msg), "%s", t->fail_msg);
		pthread_mutex_unlock(&t->mu);
		hangar_sys_error(code, http, err, "%s: %s", t->name, msg);
		if (ra)
			hangar_sys_error_retry_after(ra);
		if (unreachable)
			hangar_sys_error_flags(HANGAR_ERROR_UNREACHABLE);
		return code;
	}
	snprintf(id, sizeof(id), "%s-%d", t->name, ++t->next_id);
	if (t->nlive < MAX_BOXES)
		t->live[t->nlive++] = strdup(id);
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
	return describe(id, out);
}

static int find_live(struct tprov *t, const char *id)
{
	for (int i = 0; i < t->nlive; i++)
		if (!strcmp(t->live[i], id))
			return i;
	return -1;
}

static int tp_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct tprov *t = state;
	int found;

	pthread_mutex_lock(&t->mu);
	t->connects++;
	found = find_live(t, id) >= 0;
	pthread_mutex_unlock(&t->mu);
	if (!found)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "%s: no sandbox %s", t->name, id);
	return describe(id, out);
}

static int tp_kill(void *state, const char *id)
{
	struct tprov *t = state;
	int i;

	pthread_mutex_lock(&t->mu);
	t->kills++;
	i = find_live(t, id);
	if (i >= 0) {
		free(t->live[i]);
		t->live[i] = t->live[--t->nlive];
	}
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
	if (i < 0)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "%s: no sandbox %s", t->name, id);
	return 0;
}

static void tp_setup(struct tprov *t, const char *name, uint64_t caps)
{
	memset(t, 0, sizeof(*t));
	t->name = name;
	t->caps = caps;
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cond, NULL);
	t->ops = (struct hangar_provider_ops){
		.version = HANGAR_PROVIDER_OPS_VERSION,
		.size = sizeof(struct hangar_provider_ops),
		.name = name,
		.capabilities = caps,
		.init = tp_init,
		.create = tp_create,
		.connect = tp_connect,
		.kill = tp_kill,
	};
}

static void tp_free(struct tprov *t)
{
	for (int i = 0; i < t->nlive; i++)
		free(t->live[i]);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->mu);
}

static void tp_fail(struct tprov *t, int code, int http, int err, const char *msg)
{
	pthread_mutex_lock(&t->mu);
	t->fail_code = code;
	t->fail_http = http;
	t->fail_errno = err;
	t->fail_retry_after = 0;
	t->fail_unreachable = 0;
	snprintf(t->fail_msg, sizeof(t->fail_msg), "%s", msg ? msg : "fault injected");
	pthread_mutex_unlock(&t->mu);
}

/* The next failures also carry a Retry-After of seconds (0: none). */
static void tp_retry_after(struct tprov *t, int seconds)
{
	pthread_mutex_lock(&t->mu);
	t->fail_retry_after = seconds;
	pthread_mutex_unlock(&t->mu);
}

static int tp_get(struct tprov *t, const int *field)
{
	int v;

	pthread_mutex_lock(&t->mu);
	v = *field;
	pthread_mutex_unlock(&t->mu);
	return v;
}

static void tp_gate(struct tprov *t, int on)
{
	pthread_mutex_lock(&t->mu);
	t->gate = on;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->mu);
}

/* Waits (10 s at most) until *field == want; 1 when it got there. */
static int tp_wait(struct tprov *t, const int *field, int want)
{
	struct timespec dl;
	int ok;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 10;
	pthread_mutex_lock(&t->mu);
	while (*field != want)
		if (pthread_cond_timedwait(&t->cond, &t->mu, &dl) == ETIMEDOUT)
			break;
	ok = *field == want;
	pthread_mutex_unlock(&t->mu);
	return ok;
}

/* ---- events ------------------------------------------------------------------------ */

#define MAX_EVENTS 256

static struct {
	pthread_mutex_t mu;
	int n;
	char *name[MAX_EVENTS];
	cJSON *json[MAX_EVENTS];
} ev = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void on_event(const char *name, const char *json, void *payload)
{
	(void)payload;
	pthread_mutex_lock(&ev.mu);
	if (ev.n < MAX_EVENTS) {
		ev.name[ev.n] = strdup(name);
		ev.json[ev.n] = cJSON_Parse(json);
		ev.n++;
	}
	pthread_mutex_unlock(&ev.mu);
}

static void events_clear(void)
{
	pthread_mutex_lock(&ev.mu);
	for (int i = 0; i < ev.n; i++) {
		free(ev.name[i]);
		cJSON_Delete(ev.json[i]);
	}
	ev.n = 0;
	pthread_mutex_unlock(&ev.mu);
}

static int events_count(const char *name)
{
	int n = 0;

	pthread_mutex_lock(&ev.mu);
	for (int i = 0; i < ev.n; i++)
		n += !strcmp(ev.name[i], name);
	pthread_mutex_unlock(&ev.mu);
	return n;
}

/* The k-th event of that name (call after the events are in). */
static const cJSON *event_get(const char *name, int k)
{
	for (int i = 0; i < ev.n; i++)
		if (!strcmp(ev.name[i], name) && k-- == 0)
			return ev.json[i];
	return NULL;
}

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	ck_assert_msg(cJSON_IsString(v), "event field %s is missing", key);
	return v->valuestring;
}

static double jnum(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	ck_assert_msg(cJSON_IsNumber(v), "event field %s is missing", key);
	return v->valuedouble;
}

/* ---- fixture -------------------------------------------------------------------------- */

static char tmpdir[64];
static struct tprov fast1, fast2, vm, base;
static hangar_ctx *ctx;

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static void open_ctx(hangar_ctx **out)
{
	char dir[128];

	snprintf(dir, sizeof(dir), "%s/state", tmpdir);
	must(hangar_ctx_new(out, HANGAR_CTX_NO_ENV), "ctx");
	must(hangar_provider_register(*out, &fast1.ops, &fast1), "register fast1");
	must(hangar_provider_register(*out, &fast2.ops, &fast2), "register fast2");
	must(hangar_provider_register(*out, &vm.ops, &vm), "register vm");
	must(hangar_provider_register(*out, &base.ops, &base), "register base");
	must(hangar_ctx_set(*out, "HANGAR_DEFAULT_PROVIDER", "base"), "default provider");
	must(hangar_ctx_set(*out, "HANGAR_STATE_DIR", dir), "state dir");
	must(hangar_ctx_set(*out, "HANGAR_TIERS",
			    "{\"fast\":[\"fast1\",\"fast2\"],\"isolated\":[\"vm\"],\"heavy\":[]}"),
	     "tiers");
	hangar_ctx_set_event(*out, on_event, NULL);
}

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/hangar-tiers-XXXXXX");
	ck_assert(mkdtemp(tmpdir));
	tp_setup(&fast1, "fast1", HANGAR_CAP_PAUSE);
	tp_setup(&fast2, "fast2", HANGAR_CAP_PAUSE);
	tp_setup(&vm, "vm", HANGAR_CAP_KERNEL_ISOLATION);
	tp_setup(&base, "base", 0);
	events_clear();
	open_ctx(&ctx);
}

static void teardown(void)
{
	char cmd[128];

	ctx = hangar_ctx_unref(ctx);
	tp_free(&fast1);
	tp_free(&fast2);
	tp_free(&vm);
	tp_free(&base);
	events_clear();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Creates a sandbox for tier (and provider, or NULL); returns its code and,
 * on success, the provider's name in who (a static buffer per call site). */
static int create(const char *tier, const char *provider, char *who, size_t size)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.tier = tier;
	o.provider = provider;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	if (who && size)
		snprintf(who, size, "%s", rc == 0 ? hangar_provider_name(hangar_sandbox_provider(sb)) : "");
	if (rc == 0)
		ck_assert_ptr_nonnull(sb);
	else
		ck_assert_ptr_null(sb);
	hangar_sandbox_unref(sb);
	return rc;
}

static void create_on(const char *tier, const char *provider, const char *want)
{
	char who[40];

	must(create(tier, provider, who, sizeof(who)), "create");
	ck_assert_str_eq(who, want);
}

/* ---- introspection helpers ---------------------------------------------------------- */

struct cooling_q {
	const char *tier, *provider;
	int64_t until;
	int32_t loaded;
	int found;
	int32_t falls_back;
	int64_t hedge_ms;
	uint32_t n;
	char list[256];
};

static int tier_cb(const hangar_tier_info *info, void *payload)
{
	struct cooling_q *q = payload;

	ck_assert_int_eq(info->version, HANGAR_TIER_INFO_VERSION);
	if (strcmp(info->name, q->tier))
		return 0;
	q->falls_back = info->falls_back;
	q->hedge_ms = info->hedge_ms;
	q->n = info->n_providers;
	q->list[0] = '\0';
	for (uint32_t i = 0; i < info->n_providers; i++) {
		size_t len = strlen(q->list);

		snprintf(q->list + len, sizeof(q->list) - len, "%s%s", i ? "," : "", info->providers[i]);
		if (q->provider && !strcmp(info->providers[i], q->provider)) {
			q->found = 1;
			q->until = info->cooling_until_us[i];
			q->loaded = info->loaded[i];
		}
	}
	return 0;
}

static struct cooling_q tier_query(const char *tier, const char *provider)
{
	struct cooling_q q = { .tier = tier, .provider = provider };

	must(hangar_tier_foreach(ctx, tier_cb, &q), "tier foreach");
	return q;
}

/* Polls the tier info every 50 ms (10 s at most) until provider is no longer cooling. */
static int wait_cooled(const char *tier, const char *provider)
{
	struct timespec step = { 0, 50 * 1000000 };

	for (int i = 0; i < 200; i++) {
		if (tier_query(tier, provider).until == 0)
			return 1;
		nanosleep(&step, NULL);
	}
	return 0;
}

/* ---- picking and fallback ------------------------------------------------------------- */

START_TEST(fast_picks_first)
{
	create_on("fast", NULL, "fast1");
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_int_eq(fast2.creates, 0);
	ck_assert_int_eq(base.creates, 0);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 0);
}
END_TEST

START_TEST(no_tier_is_default)
{
	create_on(NULL, NULL, "base");
	create_on("default", NULL, "base");
	ck_assert_int_eq(fast1.creates, 0);
	ck_assert_int_eq(events_count("sandbox.created"), 2);
	ck_assert_str_eq(jstr(event_get("sandbox.created", 0), "tier"), "default");
	ck_assert_str_eq(jstr(event_get("sandbox.created", 0), "provider"), "base");
}
END_TEST

START_TEST(default_tier_list_then_default)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"default\":[\"fast2\"]}"), "tiers");
	create_on(NULL, NULL, "fast2");
	tp_fail(&fast2, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on(NULL, NULL, "base");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
}
END_TEST

START_TEST(unknown_tier)
{
	ck_assert_int_eq(create("turbo", NULL, NULL, 0), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "tier"));
	ck_assert_int_eq(fast1.creates + fast2.creates + base.creates, 0);
}
END_TEST

START_TEST(fast_falls_back_when_full)
{
	const cJSON *e;

	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, "HTTP 429: no capacity");
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
	e = event_get("sandbox.tier_fallback", 0);
	ck_assert_str_eq(jstr(e, "tier"), "fast");
	ck_assert_str_eq(jstr(e, "from"), "fast1");
	ck_assert_str_eq(jstr(e, "to"), "fast2");
	ck_assert_str_eq(jstr(e, "reason"), "capacity");
	ck_assert_int_eq((int)jnum(e, "http_status"), 429);
	ck_assert_int_eq((int)jnum(e, "cooldown_seconds"), 60);
	ck_assert_str_eq(jstr(event_get("sandbox.created", 0), "provider"), "fast2");
	ck_assert_str_eq(jstr(event_get("sandbox.created", 0), "tier"), "fast");

	/* Cooling down: not asked again, and no second event. */
	create_on("fast", NULL, "fast2");
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
	ck_assert_int_gt(tier_query("fast", "fast1").until, clock_wall_us() + 50 * 1000000LL);
}
END_TEST

START_TEST(fast_falls_back_to_default_provider)
{
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	tp_fail(&fast2, HANGAR_EUNAVAILABLE, 503, 0, NULL);
	create_on("fast", NULL, "base");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 2);
	ck_assert_str_eq(jstr(event_get("sandbox.tier_fallback", 1), "from"), "fast2");
	ck_assert_str_eq(jstr(event_get("sandbox.tier_fallback", 1), "to"), "base");
	ck_assert_str_eq(jstr(event_get("sandbox.tier_fallback", 1), "reason"), "unavailable");
	/* An empty list: fast is the default provider alone. */
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\":[]}"), "tiers");
	create_on("fast", NULL, "base");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 2);
}
END_TEST

START_TEST(unreachable_falls_back)
{
	static const struct {
		int code, http, err;
		const char *reason;
	} cases[] = {
		{ HANGAR_EUNAVAILABLE, 502, 0, "unavailable" },
		{ HANGAR_EUNAVAILABLE, 503, 0, "unavailable" },
		{ HANGAR_EUNAVAILABLE, 504, 0, "unavailable" },
		{ HANGAR_EUNAVAILABLE, 0, ECONNREFUSED, "unreachable" },
		{ HANGAR_EUNAVAILABLE, 0, ETIMEDOUT, "unreachable" },
		{ HANGAR_ECAPACITY, 500, 0, "capacity" },
	};

	must(hangar_ctx_set(ctx, "HANGAR_TIER_COOLDOWN_SECONDS", "0"), "no cooldown");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		events_clear();
		tp_fail(&fast1, cases[i].code, cases[i].http, cases[i].err, NULL);
		create_on("fast", NULL, "fast2");
		ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
		ck_assert_str_eq(jstr(event_get("sandbox.tier_fallback", 0), "reason"), cases[i].reason);
		ck_assert_int_eq((int)jnum(event_get("sandbox.tier_fallback", 0), "cooldown_seconds"), 0);
	}
	/* A cooldown of 0 skips nothing: fast1 was asked every time. */
	ck_assert_int_eq(fast1.creates, (int)(sizeof(cases) / sizeof(cases[0])));
}
END_TEST

START_TEST(other_errors_do_not_fall_back)
{
	static const struct {
		int code, http;
	} cases[] = {
		{ HANGAR_EINVAL, 400 },
		{ HANGAR_ECREATE, 404 },        /* a missing template */
		{ HANGAR_EUNAVAILABLE, 401 },   /* the key was rejected */
		{ HANGAR_EUNAVAILABLE, 403 },
		{ HANGAR_EUNAVAILABLE, 500 },
		{ HANGAR_ETIMEOUT, 0 },
		{ HANGAR_EUNAVAILABLE, 0 },     /* unavailable, but not for want of a connection */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tp_fail(&fast1, cases[i].code, cases[i].http, 0, "nope");
		ck_assert_int_eq(create("fast", NULL, NULL, 0), cases[i].code);
		ck_assert_int_eq(hangar_error_last()->http_status, cases[i].http);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "fast1: nope"));
		ck_assert_int_eq(tier_query("fast", "fast1").until, 0);
	}
	ck_assert_int_eq(fast1.creates, (int)(sizeof(cases) / sizeof(cases[0])));
	ck_assert_int_eq(fast2.creates, 0);
	ck_assert_int_eq(base.creates, 0);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 0);
}
END_TEST

START_TEST(comes_back_after_cooldown)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIER_COOLDOWN_SECONDS", "1"), "cooldown");
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on("fast", NULL, "fast2");
	tp_fail(&fast1, 0, 0, 0, NULL);
	/* Until the cooldown ends fast1 is not asked, even though it would answer. */
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_msg(wait_cooled("fast", "fast1"), "fast1 still cooling down after 10 s");
	create_on("fast", NULL, "fast1");
	ck_assert_int_eq(fast1.creates, 2);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
}
END_TEST

START_TEST(retry_after_is_honoured)
{
	struct cooling_q q;

	must(hangar_ctx_set(ctx, "HANGAR_TIER_COOLDOWN_SECONDS", "1"), "cooldown");
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, "HTTP 429: rate limited");
	tp_retry_after(&fast1, 30);
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq((int)jnum(event_get("sandbox.tier_fallback", 0), "cooldown_seconds"), 30);
	q = tier_query("fast", "fast1");
	ck_assert_int_gt(q.until, clock_wall_us() + 20 * 1000000LL);
	ck_assert_int_le(q.until, clock_wall_us() + 31 * 1000000LL);
	/* A shorter Retry-After than the cooldown does not shorten it. */
	must(hangar_ctx_set(ctx, "HANGAR_TIER_COOLDOWN_SECONDS", "60"), "cooldown");
	tp_fail(&fast2, HANGAR_ECAPACITY, 429, 0, "rate limited");
	tp_retry_after(&fast2, 5);
	create_on("fast", NULL, "base");
	ck_assert_int_eq((int)jnum(event_get("sandbox.tier_fallback", 1), "cooldown_seconds"), 60);
}
END_TEST

/* What a message says is for people: only the field sets a cooldown. */
START_TEST(retry_after_is_never_read_from_text)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIER_COOLDOWN_SECONDS", "2"), "cooldown");
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, "HTTP 429: {\"message\": \"retry after 30 s\"}");
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq((int)jnum(event_get("sandbox.tier_fallback", 0), "cooldown_seconds"), 2);
	ck_assert_int_le(tier_query("fast", "fast1").until, clock_wall_us() + 3 * 1000000LL);
	/* And a reworded message with the field still cools for the field's time
	 * (fast1 left out, as its 2 s may be over on a slow machine). */
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\":[\"fast2\",\"base\"]}"), "tiers");
	tp_fail(&fast2, HANGAR_ECAPACITY, 429, 0, "saturated, come back tomorrow");
	tp_retry_after(&fast2, 9);
	create_on("fast", NULL, "base");
	ck_assert_int_eq((int)jnum(event_get("sandbox.tier_fallback", 1), "cooldown_seconds"), 9);
	/* A Retry-After of a day is cut to the bound (one hour). */
	tp_fail(&base, HANGAR_ECAPACITY, 429, 0, "full");
	tp_retry_after(&base, 86400);
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"heavy\":[\"base\"]}"), "tiers");
	ck_assert_int_eq(create("heavy", NULL, NULL, 0), HANGAR_ECAPACITY);
	ck_assert_int_le(tier_query("heavy", "base").until, clock_wall_us() + 3601 * 1000000LL);
	ck_assert_int_gt(tier_query("heavy", "base").until, clock_wall_us() + 3500 * 1000000LL);
}
END_TEST

/* "Unreachable" is the flag, not the error's category or words. */
START_TEST(unreachable_is_a_flag)
{
	tp_fail(&fast1, HANGAR_EUNAVAILABLE, 0, 0, "the control API cannot be reached");
	ck_assert_int_eq(create("fast", NULL, NULL, 0), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(fast2.creates, 0);
	tp_fail(&fast1, HANGAR_EUNAVAILABLE, 0, 0, "nope");
	pthread_mutex_lock(&fast1.mu);
	fast1.fail_unreachable = 1;
	pthread_mutex_unlock(&fast1.mu);
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
}
END_TEST

START_TEST(every_provider_cooling)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"heavy\":[\"fast1\",\"fast2\"]}"), "tiers");
	tp_fail(&fast1, HANGAR_EUNAVAILABLE, 503, 0, NULL);
	tp_fail(&fast2, HANGAR_ECAPACITY, 429, 0, NULL);
	ck_assert_int_eq(create("heavy", NULL, NULL, 0), HANGAR_ECAPACITY);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
	ck_assert_int_eq(base.creates, 0);
	/* Both cooling: nothing is asked, and there is no room (sandbox.h). */
	ck_assert_int_eq(create("heavy", NULL, NULL, 0), HANGAR_ECAPACITY);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "cooling down"));
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_int_eq(fast2.creates, 1);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
}
END_TEST

/* ---- isolated and heavy ----------------------------------------------------------------- */

START_TEST(isolated_never_falls_back)
{
	create_on("isolated", NULL, "vm");
	tp_fail(&vm, HANGAR_ECAPACITY, 429, 0, NULL);
	ck_assert_int_eq(create("isolated", NULL, NULL, 0), HANGAR_ECAPACITY);
	tp_fail(&vm, 0, 0, 0, NULL);
	/* Cooling now, and still nothing else is tried. */
	ck_assert_int_eq(create("isolated", NULL, NULL, 0), HANGAR_ECAPACITY);
	ck_assert_int_eq(vm.creates, 2);
	ck_assert_int_eq(fast1.creates + fast2.creates + base.creates, 0);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 0);
}
END_TEST

START_TEST(isolated_unconfigured)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\":[\"fast1\"]}"), "tiers");
	ck_assert_int_eq(create("isolated", NULL, NULL, 0), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_TIERS"));
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"isolated\":[\"kubernetes\"]}"), "tiers");
	ck_assert_int_eq(create("isolated", NULL, NULL, 0), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_TIERS"));
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "kubernetes"));
	ck_assert_int_eq(fast1.creates + fast2.creates + base.creates + vm.creates, 0);
}
END_TEST

START_TEST(isolated_needs_kernel_isolation)
{
	struct cooling_q q;

	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"isolated\":[\"base\"]}"), "tiers");
	ck_assert_int_eq(create("isolated", NULL, NULL, 0), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_CAP_KERNEL_ISOLATION"));
	ck_assert_int_eq(create("isolated", "base", NULL, 0), HANGAR_EREFUSED);
	q = tier_query("isolated", "base");
	ck_assert_int_eq(q.found, 1);
	ck_assert_int_eq(q.loaded, 0);
	/* One without the capability is skipped for one that has it. */
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"isolated\":[\"base\",\"vm\"]}"), "tiers");
	create_on("isolated", NULL, "vm");
	ck_assert_int_eq(base.creates, 0);
}
END_TEST

START_TEST(heavy_fails_without_providers)
{
	ck_assert_int_eq(create("heavy", NULL, NULL, 0), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_TIERS"));
	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"heavy\":[\"fast1\"]}"), "tiers");
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	ck_assert_int_eq(create("heavy", NULL, NULL, 0), HANGAR_ECAPACITY);
	ck_assert_int_eq(base.creates, 0);
}
END_TEST

/* ---- named providers -------------------------------------------------------------------- */

START_TEST(named_provider_wins)
{
	create_on("fast", "fast2", "fast2");
	create_on("heavy", "base", "base");
	create_on(NULL, "vm", "vm");
	ck_assert_int_eq(fast1.creates, 0);
	/* Even one cooling down, and a named provider never falls back. */
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(create("fast", "fast1", NULL, 0), HANGAR_ECAPACITY);
	ck_assert_int_eq(fast1.creates, 2);
	tp_fail(&fast1, 0, 0, 0, NULL);
	create_on("fast", "fast1", "fast1");
	ck_assert_int_eq(create("fast", "nosuch", NULL, 0), HANGAR_ENOTFOUND);
}
END_TEST

START_TEST(named_provider_under_isolated)
{
	ck_assert_int_eq(create("isolated", "fast2", NULL, 0), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "isolated"));
	ck_assert_int_eq(create("isolated", "base", NULL, 0), HANGAR_EREFUSED);
	ck_assert_int_eq(fast2.creates + base.creates, 0);
	create_on("isolated", "vm", "vm");
}
END_TEST

/* ---- concurrency --------------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int rc;
	char who[40];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	o.tier = "fast";
	w->rc = hangar_sandbox_create(&sb, ctx, &o);
	if (w->rc == 0)
		snprintf(w->who, sizeof(w->who), "%s", hangar_provider_name(hangar_sandbox_provider(sb)));
	hangar_sandbox_unref(sb);
	return NULL;
}

static void run_workers(struct worker *w, int n)
{
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(pthread_create(&w[i].th, NULL, worker_main, &w[i]), 0);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].th, NULL);
}

START_TEST(concurrent_creates_during_cooldown)
{
	struct worker w[8];

	memset(w, 0, sizeof(w));
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on("fast", NULL, "fast2");
	run_workers(w, 8);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(w[i].rc, 0);
		ck_assert_str_eq(w[i].who, "fast2");
	}
	ck_assert_int_eq(fast1.creates, 1);
	ck_assert_int_eq(fast2.creates, 9);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
}
END_TEST

START_TEST(concurrent_creates_into_a_full_provider)
{
	struct worker w[8];

	memset(w, 0, sizeof(w));
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	run_workers(w, 8);
	for (int i = 0; i < 8; i++) {
		ck_assert_int_eq(w[i].rc, 0);
		ck_assert_str_eq(w[i].who, "fast2");
	}
	/* However many raced into fast1 before its cooldown, each fell back once. */
	ck_assert_int_ge(fast1.creates, 1);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), fast1.creates);
	ck_assert_int_eq(fast2.creates, 8);
}
END_TEST

/* ---- hedged creates ----------------------------------------------------------------------- */

START_TEST(hedge_keeps_one_and_kills_the_other)
{
	const cJSON *e;
	struct cooling_q q;

	must(hangar_ctx_set(ctx, "HANGAR_TIER_HEDGE", "{\"fast\":20}"), "hedge");
	q = tier_query("fast", NULL);
	ck_assert_int_eq(q.hedge_ms, 20);
	tp_gate(&fast1, 1);
	create_on("fast", NULL, "fast2");
	ck_assert(tp_wait(&fast1, &fast1.waiting, 1));
	ck_assert_int_eq(events_count("sandbox.tier_hedge"), 1);
	e = event_get("sandbox.tier_hedge", 0);
	ck_assert_str_eq(jstr(e, "winner"), "fast2");
	ck_assert_str_eq(jstr(e, "loser"), "fast1");
	/* fast1 answers late: its sandbox is killed. */
	tp_gate(&fast1, 0);
	ck_assert_msg(tp_wait(&fast1, &fast1.kills, 1), "the extra sandbox was not killed");
	ck_assert_int_eq(tp_get(&fast1, &fast1.nlive), 0);
	ck_assert_int_eq(tp_get(&fast2, &fast2.nlive), 1);
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 0);
	/* The event comes from the hedge thread just after the kill: the context joins it. */
	ctx = hangar_ctx_unref(ctx);
	ck_assert_int_eq(events_count("sandbox.hedge_discarded"), 1);
	ck_assert_str_eq(jstr(event_get("sandbox.hedge_discarded", 0), "provider"), "fast1");
	ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(event_get("sandbox.hedge_discarded", 0), "killed")));
}
END_TEST

START_TEST(hedge_first_answers_in_time)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIER_HEDGE", "{\"fast\":600000}"), "hedge");
	create_on("fast", NULL, "fast1");
	ck_assert_int_eq(fast2.creates, 0);
	ck_assert_int_eq(events_count("sandbox.tier_hedge"), 0);
	/* Failing in time is a plain fallback. */
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
	ck_assert_int_eq(events_count("sandbox.tier_hedge"), 0);
}
END_TEST

START_TEST(hedge_loser_in_flight_at_unref)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIER_HEDGE", "{\"fast\":1}"), "hedge");
	tp_gate(&fast1, 1);
	create_on("fast", NULL, "fast2");
	tp_gate(&fast1, 0);
	/* The context waits for the hedge thread: nothing is left behind. */
	ctx = hangar_ctx_unref(ctx);
	ck_assert_int_eq(fast1.nlive, 0);
	ck_assert_int_eq(fast1.kills, 1);
	ck_assert_int_eq(fast2.nlive, 1);
}
END_TEST

START_TEST(hedge_first_fails_after_the_second_started)
{
	must(hangar_ctx_set(ctx, "HANGAR_TIER_HEDGE", "{\"fast\":1}"), "hedge");
	/* Both are in flight; then fast1 answers "full" and fast2 a sandbox. */
	tp_gate(&fast2, 1);
	tp_gate(&fast1, 1);
	{
		struct worker w = { 0 };

		ck_assert_int_eq(pthread_create(&w.th, NULL, worker_main, &w), 0);
		ck_assert(tp_wait(&fast1, &fast1.waiting, 1));
		ck_assert(tp_wait(&fast2, &fast2.waiting, 1));
		tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
		tp_gate(&fast1, 0);
		tp_gate(&fast2, 0);
		pthread_join(w.th, NULL);
		must(w.rc, "hedged create");
		ck_assert_str_eq(w.who, "fast2");
	}
	ck_assert_int_eq(fast1.nlive + fast2.nlive, 1);
	ctx = hangar_ctx_unref(ctx);
	ck_assert_int_eq(fast1.nlive, 0);
}
END_TEST

/* ---- events, introspection, restart ------------------------------------------------------------ */

START_TEST(created_and_killed_events)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb;
	char id[64];

	o.tier = "fast";
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(events_count("sandbox.created"), 1);
	ck_assert_str_eq(jstr(event_get("sandbox.created", 0), "id"), id);
	ck_assert_int_eq(events_count("sandbox.killed"), 1);
	ck_assert_str_eq(jstr(event_get("sandbox.killed", 0), "id"), id);
	ck_assert_str_eq(jstr(event_get("sandbox.killed", 0), "provider"), "fast1");
	/* Removed: nothing is called any more. */
	hangar_ctx_set_event(ctx, NULL, NULL);
	create_on("fast", NULL, "fast1");
	ck_assert_int_eq(events_count("sandbox.created"), 1);
}
END_TEST

START_TEST(tier_info)
{
	struct cooling_q q;

	must(hangar_ctx_set(ctx, "HANGAR_TIERS", "{\"fast\":[\"fast1\",\"nosuch\",\"fast2\"],\"isolated\":[\"vm\"]}"),
	     "tiers");
	q = tier_query("fast", "nosuch");
	ck_assert_str_eq(q.list, "fast1,nosuch,fast2,base");
	ck_assert_int_eq(q.falls_back, 1);
	ck_assert_int_eq(q.loaded, 0);
	ck_assert_int_eq(q.hedge_ms, 0);
	ck_assert_int_eq(tier_query("fast", "fast2").loaded, 1);
	q = tier_query("isolated", "vm");
	ck_assert_str_eq(q.list, "vm");
	ck_assert_int_eq(q.falls_back, 0);
	ck_assert_int_eq(q.loaded, 1);
	ck_assert_str_eq(tier_query("default", NULL).list, "base");
	ck_assert_int_eq(tier_query("heavy", NULL).n, 0);
	/* A provider that is not there is skipped without a fallback event. */
	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	create_on("fast", NULL, "fast2");
	ck_assert_int_eq(events_count("sandbox.tier_fallback"), 1);
	ck_assert_str_eq(jstr(event_get("sandbox.tier_fallback", 0), "to"), "fast2");
	ck_assert_int_eq(hangar_tier_foreach(NULL, tier_cb, &q), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_tier_foreach(ctx, NULL, &q), HANGAR_EINVAL);
}
END_TEST

START_TEST(recorded_provider_after_restart)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb;
	char id[64];

	tp_fail(&fast1, HANGAR_ECAPACITY, 429, 0, NULL);
	o.tier = "fast";
	must(hangar_sandbox_create(&sb, ctx, &o), "create");
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(sb)), "fast2");
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);

	/* A new context, as after a restart: the store says which provider holds it. */
	open_ctx(&ctx);
	must(hangar_sandbox_attach(&sb, ctx, NULL, id), "attach");
	ck_assert_str_eq(hangar_provider_name(hangar_sandbox_provider(sb)), "fast2");
	ck_assert_int_eq(fast1.connects + vm.connects + base.connects, 0);
	must(hangar_sandbox_kill(sb), "kill");
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(fast2.nlive, 0);
	ck_assert_int_eq(fast2.kills, 1);
	ck_assert_int_eq(fast1.kills + vm.kills + base.kills, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tiers");
	TCase *t = tcase_create("tiers");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, fast_picks_first);
	tcase_add_test(t, no_tier_is_default);
	tcase_add_test(t, default_tier_list_then_default);
	tcase_add_test(t, unknown_tier);
	tcase_add_test(t, fast_falls_back_when_full);
	tcase_add_test(t, fast_falls_back_to_default_provider);
	tcase_add_test(t, unreachable_falls_back);
	tcase_add_test(t, other_errors_do_not_fall_back);
	tcase_add_test(t, comes_back_after_cooldown);
	tcase_add_test(t, retry_after_is_honoured);
	tcase_add_test(t, retry_after_is_never_read_from_text);
	tcase_add_test(t, unreachable_is_a_flag);
	tcase_add_test(t, every_provider_cooling);
	tcase_add_test(t, isolated_never_falls_back);
	tcase_add_test(t, isolated_unconfigured);
	tcase_add_test(t, isolated_needs_kernel_isolation);
	tcase_add_test(t, heavy_fails_without_providers);
	tcase_add_test(t, named_provider_wins);
	tcase_add_test(t, named_provider_under_isolated);
	tcase_add_test(t, concurrent_creates_during_cooldown);
	tcase_add_test(t, concurrent_creates_into_a_full_provider);
	tcase_add_test(t, hedge_keeps_one_and_kills_the_other);
	tcase_add_test(t, hedge_first_answers_in_time);
	tcase_add_test(t, hedge_loser_in_flight_at_unref);
	tcase_add_test(t, hedge_first_fails_after_the_second_started);
	tcase_add_test(t, created_and_killed_events);
	tcase_add_test(t, tier_info);
	tcase_add_test(t, recorded_provider_after_restart);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
