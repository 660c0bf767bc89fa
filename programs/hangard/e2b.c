/*
 * E2B's control API under /e2b, so that the E2B SDKs, unchanged, create and
 * manage hangar's sandboxes (E2B_API_URL=http://HOST:PORT/e2b, E2B_API_KEY a
 * hangard token with the sandboxes scope). Each route is one or two library
 * calls, as the /v1 ones are; what E2B has and hangar does not is refused
 * (400 for a field asking for it, 501 with a pointer for a route), never
 * quietly done some other way. Answers and errors are E2B's shapes, errors
 * {code, message} with the HTTP status as code, which the SDKs turn into
 * their own error classes. hangard(8), E2B COMPATIBILITY, has the table.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>
#include <sodium.h>

#include "e2b.h"

/* Bounds on metadata, which is kept in a file per sandbox. */
#define META_MAX_KEYS   64
#define META_MAX_KEY    256
#define META_MAX_VALUE  2048
/* E2B's default lifetime when a create or resume names none. */
#define E2B_DEFAULT_TIMEOUT 15
/* The longest lifetime a request may ask for: the /v1 API's bound. */
#define E2B_MAX_TIMEOUT 31536000

cJSON *e2b_error_body(unsigned status, const char *message)
{
	cJSON *doc = cJSON_CreateObject();
	sjson_add_int64(doc, "code", status);
	cJSON_AddStringToObject(doc, "message", message);
	return doc;
}

/* As error_status(), except that what is gone is not found: E2B's SDKs
 * know a missing sandbox by 404 only. */
unsigned e2b_error_status(int code)
{
	return code == HANGAR_EGONE ? 404 : error_status(code);
}

void e2b_iso_time(char out[80], int64_t us)
{
	time_t s = (time_t)(us / 1000000);
	struct tm tm;
	gmtime_r(&s, &tm);
	snprintf(out, 80, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000 / 1000));
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* 204 for a library call that went well, else its error. */
static void reply_done(struct request *r, int rc)
{
	if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_empty(r, 204);
}

/*
 * The sandbox the path's E2B id names now (e2b_resolve()), with its record
 * when rec is not NULL: 0 with *sb; 1 when it is suspended (*sb NULL,
 * nothing answered); -1 after answering.
 */
static int open_target(struct request *r, struct e2b_record *rec, hangar_sandbox **sb)
{
	const char *id = request_param(r);
	int rc;

	*sb = NULL;
	if (rec) {
		memset(rec, 0, sizeof(*rec));
		rec->network = -1;
	}
	if (!e2b_id_ok(id)) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "a sandbox id is 1 to 64 of [A-Za-z0-9_-]");
		return -1;
	}
	rc = e2b_resolve(id, rec, sb);
	if (rc == HANGAR_EOS) {
		reply_error(r, 500, "os", HANGAR_EOS, "the E2B record of %s cannot be read", id);
		return -1;
	}
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return -1;
	}
	return rc;
}

/* The running or paused sandbox the path names, or NULL after answering:
 * a suspended one has none until connect resumes it. */
static hangar_sandbox *open_sandbox(struct request *r)
{
	hangar_sandbox *sb;
	int rc = open_target(r, NULL, &sb);

	if (rc == 1)
		reply_error(r, 409, "conflict", HANGAR_EPAUSED,
			    "the sandbox %s is paused, its state kept as a checkpoint: connect resumes it", request_param(r));
	return rc == 0 ? sb : NULL;
}

/* What get and list say of a suspended sandbox, which the library does not
 * list: from its record. */
static void suspended_info(hangar_sandbox_info *info, const char *e2b_id, const struct e2b_record *rec)
{
	info->id = e2b_id;
	info->provider = rec->provider ? rec->provider : "";
	info->template_id = rec->template_id ? rec->template_id : "";
	info->state = HANGAR_SANDBOX_PAUSED;
	info->created_at_us = rec->created_us;
	info->expires_at_us = 0;
}

/* The record of a sandbox, or an empty one for a sandbox made without /e2b. */
static int load_record(struct request *r, const char *id, struct e2b_record *rec)
{
	int rc = e2b_record_get(id, rec);
	if (rc < 0) {
		reply_error(r, 500, "os", HANGAR_EOS, "the E2B record of %s cannot be read", id);
		return -1;
	}
	return 0;
}

static int save_record(struct request *r, const char *id, const struct e2b_record *rec)
{
	if (e2b_record_put(id, rec) < 0) {
		reply_error(r, 500, "os", HANGAR_EOS, "the E2B record of %s cannot be written", id);
		return -1;
	}
	return 0;
}

static const char *template_of(const struct e2b_record *rec, const hangar_sandbox_info *info)
{
	if (rec->template_id && rec->template_id[0])
		return rec->template_id;
	return info && info->template_id && info->template_id[0] ? info->template_id : "base";
}

/* Where the SDK reaches the sandbox's envd: PORT-ID.DOMAIN, or its own
 * setting (E2B_SANDBOX_URL, E2B_DOMAIN) when hangard routes no domain. */
static void add_domain(cJSON *o)
{
	if (edge_domain())
		cJSON_AddStringToObject(o, "domain", edge_domain());
	else
		cJSON_AddNullToObject(o, "domain");
}

/* E2B's Sandbox: what create, connect and resume answer, under the E2B id
 * (whichever sandbox serves it now). */
static cJSON *sandbox_answer(const char *id, hangar_sandbox *sb, const struct e2b_record *rec,
			     const hangar_sandbox_info *info)
{
	char envd[E2B_TOKEN_LEN + 1], traffic[E2B_TOKEN_LEN + 1];
	cJSON *o = cJSON_CreateObject();

	e2b_tokens(id, rec->generation, envd, traffic);
	cJSON_AddStringToObject(o, "templateID", template_of(rec, info));
	cJSON_AddStringToObject(o, "sandboxID", id);
	cJSON_AddStringToObject(o, "clientID", sb ? hangar_provider_name(hangar_sandbox_provider(sb))
					      : rec->provider ? rec->provider : "");
	cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
	cJSON_AddStringToObject(o, "envdAccessToken", envd);
	cJSON_AddStringToObject(o, "trafficAccessToken", traffic);
	add_domain(o);
	sodium_memzero(envd, sizeof(envd));
	sodium_memzero(traffic, sizeof(traffic));
	return o;
}

/* ListedSandbox's members, which SandboxDetail has too. */
static void add_listed(cJSON *o, const hangar_sandbox_info *info, const struct e2b_record *rec)
{
	char started[80], end[80];
	e2b_iso_time(started, info->created_at_us ? info->created_at_us : now_us());
	/* No end (paused, or no limit): the time of the answer. */
	e2b_iso_time(end, rec->auto_pause && rec->pause_at_us && info->state != HANGAR_SANDBOX_PAUSED ? rec->pause_at_us
			: info->expires_at_us			 ? info->expires_at_us
								 : now_us());
	cJSON_AddStringToObject(o, "templateID", template_of(rec, info));
	cJSON_AddStringToObject(o, "sandboxID", info->id);
	cJSON_AddStringToObject(o, "clientID", info->provider);
	cJSON_AddStringToObject(o, "startedAt", started);
	cJSON_AddStringToObject(o, "endAt", end);
	cJSON_AddStringToObject(o, "state", info->state == HANGAR_SANDBOX_PAUSED ? "paused" : "running");
	cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
	cJSON_AddItemToObject(o, "metadata", rec->metadata ? cJSON_Duplicate(rec->metadata, 1) : cJSON_CreateObject());
}

/* ---- create ---- */

/* metadata and envVars: objects of strings, within bounds. */
static int want_strings(struct request *r, cJSON *doc, const char *key, cJSON **out)
{
	cJSON *obj = cJSON_GetObjectItemCaseSensitive(doc, key), *it;
	int n = 0;

	*out = NULL;
	if (!obj || cJSON_IsNull(obj))
		return 0;
	if (!cJSON_IsObject(obj))
		goto bad;
	cJSON_ArrayForEach(it, obj) {
		if (!cJSON_IsString(it) || !it->string[0] || strlen(it->string) > META_MAX_KEY ||
		    strlen(it->valuestring) > META_MAX_VALUE || ++n > META_MAX_KEYS)
			goto bad;
	}
	*out = obj;
	return 0;
bad:
	reply_error(r, 400, "invalid", HANGAR_EINVAL,
		    "\"%s\" must be an object of at most %d strings, names of 1 to %d bytes, values of at most %d",
		    key, META_MAX_KEYS, META_MAX_KEY, META_MAX_VALUE);
	return -1;
}

/* What E2B has and a create here cannot do: refused, never ignored. */
static int refuse_unmapped(struct request *r, cJSON *doc)
{
	cJSON *net = cJSON_GetObjectItemCaseSensitive(doc, "network"), *it;
	cJSON *resume = cJSON_GetObjectItemCaseSensitive(doc, "autoResume");

	if (resume && !cJSON_IsNull(resume) &&
	    (!cJSON_IsObject(resume) || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resume, "enabled")))) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "autoResume is not supported");
		return -1;
	}
	if (net && !cJSON_IsNull(net)) {
		if (!cJSON_IsObject(net))
			goto bad_net;
		cJSON_ArrayForEach(it, net) if (strcmp(it->string, "allowPublicTraffic") != 0 || !cJSON_IsBool(it))
			goto bad_net;
	}
	static const char *const none[] = { "mcp", "iam", "volumeMounts" };
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, none[i]);
		if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" is not supported here", none[i]);
			return -1;
		}
	}
	return 0;
bad_net:
	reply_error(r, 400, "invalid", HANGAR_EINVAL,
		    "\"network\" may hold allowPublicTraffic only: egress rules are not supported here "
		    "(allow_internet_access turns the network on or off)");
	return -1;
}

/* templateID: an environment of that name, E2B's default "base" the
 * provider's default, anything else the provider's template or image. */
static int is_environment(const hangar_environment_info *e, void *payload)
{
	(void)e;
	*(int *)payload = 1;
	return 0;
}

static char **env_of(cJSON *vars)
{
	char **v = calloc((size_t)cJSON_GetArraySize(vars) + 1, sizeof(*v));
	size_t n = 0;
	cJSON *it;

	if (!v)
		return NULL;
	cJSON_ArrayForEach(it, vars) {
		if (strchr(it->string, '=') || asprintf(&v[n], "%s=%s", it->string, it->valuestring) < 0) {
			v[n] = NULL;
			env_free(v);
			return NULL;
		}
		n++;
	}
	return v;
}

/* Makes the sandbox and answers; *made its id when it did. */
static void create(struct request *r, char **made)
{
	static const char *const fields[] = { "templateID", "timeout", "autoPause", "autoPauseMemory", "autoResume",
					      "secure", "allow_internet_access", "network", "metadata", "envVars",
					      "mcp", "iam", "volumeMounts", NULL };
	hangar_create_opts opts = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct e2b_record rec = { 0 };
	hangar_sandbox *sb = NULL;
	const char *tmpl = NULL;
	cJSON *doc = request_json(r, fields), *meta, *vars;
	char **env = NULL;
	int internet, found = 0, secure, auto_pause, auto_memory, rc;

	if (!doc)
		return;
	opts.timeout_sec = E2B_DEFAULT_TIMEOUT;
	if (want_string(r, doc, "templateID", &tmpl) < 0 ||
	    want_int(r, doc, "timeout", 0, E2B_MAX_TIMEOUT, &opts.timeout_sec) < 0 ||
	    want_bool(r, doc, "allow_internet_access", -1, &internet) < 0 || want_bool(r, doc, "secure", 1, &secure) < 0 ||
	    want_strings(r, doc, "metadata", &meta) < 0 || want_strings(r, doc, "envVars", &vars) < 0 ||
	    want_bool(r, doc, "autoPause", 0, &auto_pause) < 0 ||
	    want_bool(r, doc, "autoPauseMemory", 1, &auto_memory) < 0 || refuse_unmapped(r, doc) < 0)
		goto out;
	if (!tmpl || !tmpl[0]) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"templateID\" is required");
		goto out;
	}
	/* A lifetime of 0 would mean none to the library: E2B has no such thing. */
	if (opts.timeout_sec == 0)
		opts.timeout_sec = 1;
	int64_t e2b_timeout = opts.timeout_sec;
	if (auto_pause)
		opts.timeout_sec += E2B_AUTOPAUSE_GRACE_S;
	if (internet >= 0)
		opts.network = internet ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF;
	if (vars && !(env = env_of(vars))) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"envVars\" names must not hold '='");
		goto out;
	}
	opts.env = (const char *const *)env;
	rc = hangar_environment_get(hangard->ctx, tmpl, is_environment, &found);
	if (rc < 0 && rc != HANGAR_ENOTFOUND && rc != HANGAR_EINVAL) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if (found)
		opts.environment = tmpl;
	else if (strcmp(tmpl, "base") != 0)
		opts.template_id = tmpl;
	rc = hangar_sandbox_create(&sb, hangard->ctx, &opts);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	/* The pause asked for is one that can be made, or no sandbox. */
	uint64_t caps = hangar_provider_capabilities(hangar_sandbox_provider(sb));
	char why[256];
	if (auto_pause && auto_memory && !(caps & HANGAR_CAP_PAUSE)) {
		hangar_sandbox_kill(sb);
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
			    "the provider %s cannot pause a sandbox with its memory (autoPauseMemory: false suspends "
			    "it into a checkpoint instead)",
			    hangar_provider_name(hangar_sandbox_provider(sb)));
		goto out;
	}
	if (auto_pause && !auto_memory && !e2b_can_suspend(why, sizeof(why)) && !(caps & HANGAR_CAP_FS_PAUSE)) {
		hangar_sandbox_kill(sb);
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED, "autoPauseMemory: false: %s", why);
		goto out;
	}
	rec.template_id = (char *)tmpl;
	rec.metadata = meta;
	rec.network = internet;
	rec.created_us = now_us();
	/* What a restore into a new sandbox makes it with again. */
	if (vars && cJSON_GetArraySize(vars) > 0 && !(rec.env_sealed = e2b_env_seal(vars))) {
		hangar_sandbox_kill(sb);
		reply_error(r, 500, "os", HANGAR_ENOMEM, "out of memory");
		goto out;
	}
	rec.auto_pause = auto_pause;
	rec.auto_pause_memory = auto_memory;
	rec.pause_at_us = auto_pause ? now_us() + e2b_timeout * 1000000 : 0;
	e2b_lock();
	rc = e2b_record_put(hangar_sandbox_id(sb), &rec);
	e2b_unlock();
	if (rc < 0) {
		/* Nobody could find it by its metadata: it goes. */
		hangar_sandbox_kill(sb);
		reply_error(r, 500, "os", HANGAR_EOS, "the sandbox's E2B record cannot be written");
		goto out;
	}
	hangar_sandbox_get_info(&info, sb);
	reply_json(r, 201, sandbox_answer(hangar_sandbox_id(sb), sb, &rec, &info));
	*made = strdup(hangar_sandbox_id(sb));
out:
	free(rec.env_sealed);
	env_free(env);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

/* A create again under its Idempotency-Key: the sandbox it made, as now. */
static void answer_again(struct request *r, const char *id)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct e2b_record rec;
	hangar_sandbox *sb = NULL;
	int rc = e2b_resolve(id, &rec, &sb);

	if (rc == 0)
		rc = hangar_sandbox_get_info(&info, sb);
	else if (rc == 1)
		suspended_info(&info, id, &rec);
	if (rc == HANGAR_EOS)
		reply_error(r, 500, "os", HANGAR_EOS, "the E2B record of %s cannot be read", id);
	else if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_json(r, 201, sandbox_answer(id, sb, &rec, &info));
	e2b_record_dispose(&rec);
	hangar_sandbox_unref(sb);
}

void h_e2b_create(struct request *r)
{
	const char *key = request_header(r, "Idempotency-Key"), *body;
	char *id = NULL;
	size_t len;

	if (!key) {
		create(r, &id);
		free(id);
		return;
	}
	if (!key[0] || strlen(key) > 255 || !sjson_text_ok(key, strlen(key))) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "an Idempotency-Key is 1 to 255 bytes of UTF-8 text");
		return;
	}
	body = request_body(r, &len);
	switch (e2b_idem_begin(request_token_name(r), key, body, len, &id)) {
	case E2B_IDEM_NEW:
		create(r, &id);
		e2b_idem_finish(request_token_name(r), key, id);
		break;
	case E2B_IDEM_DONE:
		answer_again(r, id);
		break;
	case E2B_IDEM_RUNNING:
		reply_error(r, 409, "conflict", HANGAR_EBUSY, "a create with this Idempotency-Key is running");
		break;
	case E2B_IDEM_OTHER_BODY:
		reply_error(r, 422, "invalid", HANGAR_EINVAL, "this Idempotency-Key came with another request body");
		break;
	default:
		reply_error(r, 503, "capacity", HANGAR_ECAPACITY, "too many creates with an Idempotency-Key run at once");
		break;
	}
	free(id);
}

/* ---- listing ---- */

struct listed {
	hangar_sandbox_info info;
	char *id, *provider, *template_id;
	struct e2b_record rec;
};

struct listing {
	struct listed *v;
	size_t n, cap;
	int failed;
	struct e2b_ids ids;     /* the records, to list each sandbox under its E2B id */
	char *seen;             /* per record: its sandbox was listed */
};

/* Adds one under its E2B id; a suspended one (no sandbox) from its record. */
static int add_entry(struct listing *l, const hangar_sandbox_info *info, const char *e2b_id)
{
	struct listed *e;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 32;
		struct listed *nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv) {
			l->failed = 1;
			return 1;
		}
		l->v = nv;
		l->cap = cap;
	}
	e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	e->info = *info;
	e->id = strdup(e2b_id);
	e->provider = strdup(info->provider);
	e->template_id = strdup(info->template_id ? info->template_id : "");
	if (!e->id || !e->provider || !e->template_id || e2b_record_get(e->id, &e->rec) < 0) {
		free(e->id);
		free(e->provider);
		free(e->template_id);
		l->failed = 1;
		return 1;
	}
	e->info.id = e->id;
	e->info.provider = e->provider;
	e->info.template_id = e->template_id;
	l->n++;
	return 0;
}

static int collect(const hangar_sandbox_info *info, void *payload)
{
	struct listing *l = payload;
	struct e2b_id_entry *e = e2b_ids_find(&l->ids, info->id);

	if (e) {
		l->seen[e - l->ids.v] = 1;
		return add_entry(l, info, e->e2b_id);
	}
	/* A sandbox a restore replaced, not yet gone: its id is another's now. */
	for (size_t i = 0; i < l->ids.n; i++)
		if (strcmp(l->ids.v[i].e2b_id, info->id) == 0)
			return 0;
	return add_entry(l, info, info->id);
}

/* The suspended ones whose sandbox is not parked: the library lists none. */
static void collect_suspended(struct listing *l)
{
	for (size_t i = 0; i < l->ids.n && !l->failed; i++) {
		struct e2b_id_entry *e = &l->ids.v[i];
		hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
		if (l->seen[i] || e->rec.paused != E2B_PAUSED_SESSION || !e->rec.session_id)
			continue;
		suspended_info(&info, e->e2b_id, &e->rec);
		add_entry(l, &info, e->e2b_id);
	}
}

static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].id);
		free(l->v[i].provider);
		free(l->v[i].template_id);
		e2b_record_dispose(&l->v[i].rec);
	}
	free(l->v);
	free(l->seen);
	e2b_ids_free(&l->ids);
}

static int listed_alive(const char *id, void *payload)
{
	const struct listing *l = payload;
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].id, id) == 0)
			return 1;
	return 0;
}

/* Newest first, then by id: the order pages follow. */
static int newest_first(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;
	if (x->info.created_at_us != y->info.created_at_us)
		return x->info.created_at_us > y->info.created_at_us ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes a form-encoded component in place ('+' a space); -1 on a NUL. */
static int form_decode(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (*p == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
			char c = (char)(hexval(p[1]) << 4 | hexval(p[2]));
			if (!c)
				return -1;
			*o++ = c;
			p += 2;
		} else {
			*o++ = *p == '+' ? ' ' : *p;
		}
	}
	*o = '\0';
	return 0;
}

/*
 * E2B's metadata filter: a query string "k=v&k2=v2" whose names and values
 * are themselves percent-encoded, sent as one parameter. Into an object of
 * what each key must be; NULL after answering 400.
 */
static cJSON *metadata_filter(struct request *r, const char *q)
{
	cJSON *want = cJSON_CreateObject();
	char *copy = strdup(q), *save = NULL, *pair;

	if (!want || !copy)
		goto bad;
	for (pair = strtok_r(copy, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '=');
		if (!eq)
			goto bad;
		*eq = '\0';
		char *k = pair, *v = eq + 1;
		if (form_decode(k) < 0 || form_decode(v) < 0 || form_decode(k) < 0 || form_decode(v) < 0 || !*k ||
		    !sjson_text_ok(k, strlen(k)) || !sjson_text_ok(v, strlen(v)))
			goto bad;
		cJSON_DeleteItemFromObjectCaseSensitive(want, k);
		cJSON_AddStringToObject(want, k, v);
	}
	free(copy);
	return want;
bad:
	free(copy);
	cJSON_Delete(want);
	reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"metadata\" is a query string of key=value pairs");
	return NULL;
}

static int matches(const struct listed *e, cJSON *want, int states)
{
	cJSON *it;
	if (!(states & (e->info.state == HANGAR_SANDBOX_PAUSED ? 2 : 1)))
		return 0;
	cJSON_ArrayForEach(it, want) {
		cJSON *have = e->rec.metadata ? cJSON_GetObjectItemCaseSensitive(e->rec.metadata, it->string) : NULL;
		if (!cJSON_IsString(have) || strcmp(have->valuestring, it->valuestring) != 0)
			return 0;
	}
	return 1;
}

/* state=running,paused: bit 1 running, bit 2 paused; -1 after answering. */
static int state_filter(struct request *r, const char *q)
{
	int states = 0;
	if (!q)
		return 3;
	for (const char *p = q; *p;) {
		size_t n = strcspn(p, ",");
		if (n == 7 && strncmp(p, "running", 7) == 0)
			states |= 1;
		else if (n == 6 && strncmp(p, "paused", 6) == 0)
			states |= 2;
		else {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"state\" is a comma list of running and paused");
			return -1;
		}
		p += n + (p[n] == ',');
	}
	return states ? states : 3;
}

/* Pages: limit 1 to 100, nextToken the "created.id" of the last one given. */
static void list_common(struct request *r, int v2)
{
	struct listing l = { 0 };
	const char *limit_q = request_query(r, "limit"), *next = request_query(r, "nextToken");
	cJSON *want = cJSON_CreateObject(), *arr;
	long limit = 100;
	size_t from = 0;
	int states = v2 ? state_filter(r, request_query(r, "state")) : 1, rc;

	if (states < 0)
		goto out;
	if (request_query(r, "metadata")) {
		cJSON_Delete(want);
		if (!(want = metadata_filter(r, request_query(r, "metadata"))))
			goto out;
	}
	if (v2 && limit_q) {
		char *end;
		limit = strtol(limit_q, &end, 10);
		if (*end || end == limit_q || limit < 1 || limit > 100) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"limit\" is a whole number from 1 to 100");
			goto out;
		}
	}
	int64_t started_s = now_us() / 1000000 - 1;
	if (e2b_ids_load(&l.ids) < 0 || !(l.seen = calloc(l.ids.n + 1, 1))) {
		reply_error(r, 500, "os", HANGAR_EOS, "cannot list the sandboxes' E2B records");
		goto out;
	}
	rc = hangar_sandbox_list(hangard->ctx, NULL, collect, &l);
	if (rc == 0)
		collect_suspended(&l);
	if (l.failed) {
		reply_error(r, 500, "os", HANGAR_EOS, "cannot list the sandboxes' E2B records");
		goto out;
	}
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	/* A whole list: the records of sandboxes not in it go, except those
	 * written since it began (a create finishing meanwhile). */
	e2b_records_sweep(started_s, listed_alive, &l);
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), newest_first);
	if (v2 && next) {
		char *dot = strchr(next, '.'), *end;
		long long created = strtoll(next, &end, 10);
		if (!dot || end != dot || !e2b_id_ok(dot + 1)) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"nextToken\" is not one this server gave");
			goto out;
		}
		struct listed key = { 0 };
		key.info.created_at_us = created;
		key.id = dot + 1;
		while (from < l.n && newest_first(&l.v[from], &key) <= 0)
			from++;
	}
	arr = cJSON_CreateArray();
	size_t given = 0, i;
	const struct listed *last = NULL;
	for (i = from; i < l.n; i++) {
		if (!matches(&l.v[i], want, states))
			continue;
		if (v2 && given == (size_t)limit)
			break;
		cJSON *o = cJSON_CreateObject();
		add_listed(o, &l.v[i].info, &l.v[i].rec);
		sjson_add_int64(o, "cpuCount", 0);
		sjson_add_int64(o, "memoryMB", 0);
		sjson_add_int64(o, "diskSizeMB", 0);
		cJSON_AddItemToArray(arr, o);
		last = &l.v[i];
		given++;
	}
	reply_json(r, 200, arr);
	if (v2 && i < l.n && last) {
		char token[96];
		snprintf(token, sizeof(token), "%" PRId64 ".%s", last->info.created_at_us, last->id);
		reply_header(r, "X-Next-Token", token);
	}
out:
	cJSON_Delete(want);
	listing_free(&l);
}

void h_e2b_list(struct request *r)
{
	list_common(r, 0);
}

void h_e2b_list_v2(struct request *r)
{
	list_common(r, 1);
}

/* ---- one sandbox ---- */

static int last_metric(const hangar_sandbox_metric *m, void *payload)
{
	*(hangar_sandbox_metric *)payload = *m;
	return 0;
}

void h_e2b_get(struct request *r)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_sandbox_metric m = { 0 };
	struct e2b_record rec;
	char envd[E2B_TOKEN_LEN + 1], traffic[E2B_TOKEN_LEN + 1];
	const char *id = request_param(r);
	hangar_sandbox *sb = NULL;
	int rc = open_target(r, &rec, &sb);

	if (rc < 0)
		goto out;
	if (rc == 1) {
		suspended_info(&info, id, &rec);
	} else if ((rc = hangar_sandbox_get_info(&info, sb)) < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	info.id = id;
	/* Sizes from the newest resource sample, when the provider keeps them. */
	if (sb && info.state == HANGAR_SANDBOX_RUNNING)
		hangar_sandbox_metrics(sb, last_metric, &m);
	cJSON *o = cJSON_CreateObject();
	add_listed(o, &info, &rec);
	sjson_add_int64(o, "cpuCount", m.cpu_count);
	sjson_add_int64(o, "memoryMB", (int64_t)(m.mem_total_bytes >> 20));
	sjson_add_int64(o, "diskSizeMB", (int64_t)(m.disk_total_bytes >> 20));
	e2b_tokens(info.id, rec.generation, envd, traffic);
	cJSON_AddStringToObject(o, "envdAccessToken", envd);
	add_domain(o);
	cJSON *life = cJSON_AddObjectToObject(o, "lifecycle");
	cJSON_AddBoolToObject(life, "autoResume", 0);
	cJSON_AddStringToObject(life, "onTimeout", rec.auto_pause ? "pause" : "kill");
	sodium_memzero(envd, sizeof(envd));
	sodium_memzero(traffic, sizeof(traffic));
	reply_json(r, 200, o);
out:
	e2b_record_dispose(&rec);
	hangar_sandbox_unref(sb);
}

/*
 * Kills the sandbox, or for one that has a session (suspended, parked, or
 * resumed from one) deletes the session: its sandbox and its checkpoints
 * go with it, and a later connect finds nothing.
 */
void h_e2b_kill(struct request *r)
{
	const char *id = request_param(r);
	struct e2b_record rec;
	hangar_sandbox *sb = NULL;
	int rc = open_target(r, &rec, &sb);

	if (rc < 0)
		goto out;
	if (rec.session_id && (rc = e2b_session_delete(rec.session_id)) < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if (sb) {
		rc = hangar_sandbox_kill(sb);
		/* Gone with its session; or the session was never made (a pause
		 * that failed) and it is the one to kill. */
		if (rc == HANGAR_EGONE && rec.session_id)
			rc = 0;
	}
	if (rc < 0 && rc != HANGAR_EGONE) {
		reply_hangar_error(r, rc);
		goto out;
	}
	e2b_lock();
	e2b_record_delete(id);
	e2b_unlock();
	if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_empty(r, 204);
out:
	e2b_record_dispose(&rec);
	hangar_sandbox_unref(sb);
}

/* Keeps the sandbox at least secs more: never shortens its lifetime. */
static int extend(hangar_sandbox *sb, int64_t secs)
{
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	int rc = hangar_sandbox_get_info(&info, sb);
	if (rc < 0)
		return rc;
	if (info.expires_at_us == 0 || info.expires_at_us >= now_us() + secs * 1000000)
		return 0;
	return hangar_sandbox_set_timeout(sb, secs ? secs : 1);
}

/*
 * How long the sandbox lives from now, as E2B's timeout: the library's
 * lifetime, or for an autoPause sandbox the pause it is due, with the
 * library's lifetime E2B_AUTOPAUSE_GRACE_S past it. only_longer: extends
 * only (refreshes, connect). 0, a library error, or 1 after answering.
 */
static int set_life(struct request *r, const char *id, hangar_sandbox *sb, int64_t secs, int only_longer)
{
	int64_t at = now_us() + secs * 1000000;
	struct e2b_record rec;
	int rc;

	e2b_lock();
	rc = load_record(r, id, &rec);
	e2b_unlock();
	if (rc < 0)
		return 1;
	if (!rec.auto_pause) {
		e2b_record_dispose(&rec);
		return only_longer ? extend(sb, secs) : hangar_sandbox_set_timeout(sb, secs ? secs : 1);
	}
	if (only_longer && rec.paused == E2B_NOT_PAUSED && rec.pause_at_us >= at) {
		e2b_record_dispose(&rec);
		return 0;
	}
	e2b_record_dispose(&rec);
	rc = hangar_sandbox_set_timeout(sb, (secs ? secs : 1) + E2B_AUTOPAUSE_GRACE_S);
	if (rc < 0)
		return rc;
	e2b_lock();
	if (load_record(r, id, &rec) < 0) {
		rc = 1;
	} else {
		rec.pause_at_us = at;
		rc = save_record(r, id, &rec) < 0 ? 1 : 0;
		e2b_record_dispose(&rec);
	}
	e2b_unlock();
	return rc;
}

/* 204, or the error set_life() left unanswered. */
static void reply_life(struct request *r, int rc)
{
	if (rc != 1)
		reply_done(r, rc);
}

void h_e2b_timeout(struct request *r)
{
	static const char *const fields[] = { "timeout", NULL };
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb = NULL;
	int64_t secs = -1;

	if (!doc)
		return;
	if (want_int(r, doc, "timeout", 0, E2B_MAX_TIMEOUT, &secs) < 0)
		goto out;
	if (secs < 0) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"timeout\" is required");
		goto out;
	}
	if (!(sb = open_sandbox(r)))
		goto out;
	/* 0 is "no limit" to the library; to E2B it is now. */
	reply_life(r, set_life(r, request_param(r), sb, secs, 0));
out:
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

void h_e2b_refresh(struct request *r)
{
	static const char *const fields[] = { "duration", NULL };
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb = NULL;
	int64_t secs = E2B_DEFAULT_TIMEOUT;

	if (!doc)
		return;
	if (want_int(r, doc, "duration", 0, 3600, &secs) < 0 || !(sb = open_sandbox(r)))
		goto out;
	reply_life(r, set_life(r, request_param(r), sb, secs, 1));
out:
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

/* ---- pause, resume, connect ---- */

/*
 * Records how the sandbox was paused and, when it came back from its
 * filesystem alone, counts its tokens' generation up. The record is read
 * again under the lock, after the library call: that call may take long
 * and is not made holding it.
 */
static int note_pause(struct request *r, const char *id, enum e2b_paused paused, int new_tokens,
		      struct e2b_record *out)
{
	int rc;
	e2b_lock();
	rc = load_record(r, id, out);
	if (rc == 0) {
		out->paused = paused;
		out->generation += new_tokens;
		rc = save_record(r, id, out);
	}
	e2b_unlock();
	return rc;
}

/* A code of e2b_session_*(), answered with its own message when it has one. */
static void reply_session_error(struct request *r, int rc, const char *why)
{
	if (why[0])
		reply_error(r, e2b_error_status(rc), rc == HANGAR_EOS ? "os" : "invalid", rc, "%s", why);
	else
		reply_hangar_error(r, rc);
}

/*
 * memory: true pauses the sandbox with its memory (400 where the provider
 * cannot); memory: false suspends it as a session (e2b-sessions.c), or,
 * where no checkpoint store is configured, makes the provider's own
 * filesystem pause where it has one, else 400 naming the setting.
 */
void h_e2b_pause(struct request *r)
{
	static const char *const fields[] = { "memory", NULL };
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct e2b_record rec = { 0 };
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb = NULL;
	const char *id = request_param(r);
	char why[256];
	int memory, rc;

	if (!doc)
		return;
	if (want_bool(r, doc, "memory", 1, &memory) < 0)
		goto out;
	rc = open_target(r, NULL, &sb);
	if (rc < 0)
		goto out;
	if (rc == 0 && (rc = hangar_sandbox_get_info(&info, sb)) < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if (!sb || info.state == HANGAR_SANDBOX_PAUSED) {
		reply_error(r, 409, "conflict", HANGAR_EINVAL, "the sandbox %s is already paused", id);
		goto out;
	}
	uint64_t caps = hangar_provider_capabilities(hangar_sandbox_provider(sb));
	if (!memory && e2b_can_suspend(why, sizeof(why))) {
		rc = e2b_session_suspend(id, sb, request_abandoned, r, why, sizeof(why));
		if (rc < 0)
			reply_session_error(r, rc, why);
		else
			reply_empty(r, 204);
		goto out;
	}
	if (!memory && !(caps & HANGAR_CAP_FS_PAUSE)) {
		/* Never a pause with its memory instead. */
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED, "%s", why);
		goto out;
	}
	rc = memory ? hangar_sandbox_pause(sb) : hangar_sandbox_pause_filesystem(sb);
	if (rc == HANGAR_EUNSUPPORTED) {
		/* Never the other kind of pause instead. */
		reply_error(r, 400, "unsupported", rc, "the provider %s cannot pause a sandbox %s",
			    hangar_provider_name(hangar_sandbox_provider(sb)),
			    memory ? "with its memory (memory: false suspends it into a checkpoint instead)"
				   : "keeping its filesystem only");
		goto out;
	}
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if (note_pause(r, id, memory ? E2B_PAUSED_MEMORY : E2B_PAUSED_FILESYSTEM, 0, &rec) == 0)
		reply_empty(r, 204);
out:
	e2b_record_dispose(&rec);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

/*
 * Resumes a paused sandbox and sets its lifetime, or for a running one
 * (connect) only extends it; answers the Sandbox, 201 when it was resumed
 * and 200 when it was running. A sandbox that comes back from its
 * filesystem alone is a new machine: its tokens are new too. A suspended
 * one resumes its session: hot, the same machine and tokens, or restored
 * into a new sandbox under the same E2B id with new tokens.
 */
static void resume_common(struct request *r, int connect)
{
	static const char *const fields[] = { "timeout", "autoPause", "memory", NULL };
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	struct e2b_record rec = { 0 };
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb = NULL;
	const char *id = request_param(r);
	char why[256];
	int64_t secs = -1;
	int memory, pause, rc, suspended;
	unsigned status = 201;

	if (!doc)
		return;
	if (want_int(r, doc, "timeout", 0, E2B_MAX_TIMEOUT, &secs) < 0 || want_bool(r, doc, "memory", 1, &memory) < 0 ||
	    want_bool(r, doc, "autoPause", 0, &pause) < 0)
		goto out;
	if ((suspended = open_target(r, &rec, &sb)) < 0)
		goto out;
	if (suspended) {
		e2b_record_dispose(&rec);
		rc = e2b_session_resume(id, &sb, &rec, why, sizeof(why));
		if (rc < 0) {
			reply_session_error(r, rc, why);
			goto out;
		}
	}
	if ((rc = hangar_sandbox_get_info(&info, sb)) < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if (pause && !rec.auto_pause && !(hangar_provider_capabilities(hangar_sandbox_provider(sb)) & HANGAR_CAP_PAUSE)) {
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
			    "the provider %s cannot pause a sandbox with its memory",
			    hangar_provider_name(hangar_sandbox_provider(sb)));
		goto out;
	}
	if (suspended) {
		/* Its lifetime starts again, as a paused sandbox's does. */
		if (secs < 0)
			secs = E2B_DEFAULT_TIMEOUT;
		if (pause && !rec.auto_pause) {
			e2b_record_dispose(&rec);
			e2b_lock();
			if (load_record(r, id, &rec) < 0) {
				e2b_unlock();
				goto out;
			}
			rec.auto_pause = rec.auto_pause_memory = 1;
			rc = save_record(r, id, &rec);
			e2b_unlock();
			if (rc < 0)
				goto out;
		}
		if ((rc = set_life(r, id, sb, secs, 0)) == 1)
			goto out;
	} else if (info.state != HANGAR_SANDBOX_PAUSED) {
		if (!connect) {
			reply_error(r, 409, "conflict", HANGAR_EINVAL, "the sandbox %s is not paused", id);
			goto out;
		}
		if (pause && !rec.auto_pause) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL,
				    "autoPause is set at create, or when a paused sandbox is resumed");
			goto out;
		}
		status = 200;
		rc = secs > 0 ? set_life(r, id, sb, secs, 1) : 0;
		if (rc == 1)
			goto out;
	} else {
		int cold = rec.paused == E2B_PAUSED_FILESYSTEM;
		if (!memory && !cold) {
			reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
				    "the sandbox was paused with its memory and resumes with it: "
				    "a cold boot from its filesystem is not supported");
			goto out;
		}
		rc = hangar_sandbox_resume(sb);
		/* An autoPause sandbox's due pause is behind it: it gets a new one. */
		if (rc == 0 && secs < 0 && (!connect || rec.auto_pause || pause))
			secs = E2B_DEFAULT_TIMEOUT;
		if (rc == 0) {
			e2b_record_dispose(&rec);
			if (note_pause(r, id, E2B_NOT_PAUSED, cold, &rec) < 0)
				goto out;
			/* autoPause asked on resume: from now on, with its memory. */
			if (pause && !rec.auto_pause) {
				rec.auto_pause = rec.auto_pause_memory = 1;
				e2b_lock();
				rc = save_record(r, id, &rec);
				e2b_unlock();
				if (rc < 0)
					goto out;
			}
		}
		if (rc == 0 && secs >= 0 && (rc = set_life(r, id, sb, secs, 0)) == 1)
			goto out;
	}
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	reply_json(r, status, sandbox_answer(id, sb, &rec, &info));
out:
	e2b_record_dispose(&rec);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

void h_e2b_resume(struct request *r)
{
	resume_common(r, 0);
}

void h_e2b_connect(struct request *r)
{
	resume_common(r, 1);
}

/* ---- forks and snapshots ---- */

struct forked {
	hangar_sandbox *sb[100];
	int error[100];
	char *message[100];
	uint32_t n;
};

static void take_fork(const hangar_fork_result *f, void *payload)
{
	struct forked *k = payload;
	if (f->index >= 100 || k->n >= 100)
		return;
	k->sb[k->n] = f->error ? NULL : hangar_sandbox_ref(f->sandbox);
	k->error[k->n] = f->error;
	k->message[k->n] = strdup(f->message ? f->message : "");
	k->n++;
}

/* One SandboxForkResult: {sandbox} or {error: {code, message}}. */
static cJSON *fork_error(int code, const char *message)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "error", e2b_error_body(e2b_error_status(code), message));
	return o;
}

/*
 * Forks natively (hangar_sandbox_fork()): one result per fork, in the
 * platform's order, each fork with the parent's templateID and metadata,
 * its own tokens and the lifetime asked (default 15 s, as E2B's).
 */
void h_e2b_fork(struct request *r)
{
	static const char *const fields[] = { "timeout", "count", NULL };
	struct forked k = { 0 };
	struct e2b_record parent = { 0 };
	cJSON *doc = request_json(r, fields), *out;
	hangar_sandbox *sb = NULL;
	int64_t secs = E2B_DEFAULT_TIMEOUT, count = 1;
	int rc;

	if (!doc)
		return;
	if (want_int(r, doc, "timeout", 0, E2B_MAX_TIMEOUT, &secs) < 0 || want_int(r, doc, "count", 1, 100, &count) < 0 ||
	    !(sb = open_sandbox(r)) || load_record(r, request_param(r), &parent) < 0)
		goto done;
	rc = hangar_sandbox_fork(sb, (uint32_t)count, take_fork, &k);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto done;
	}
	out = cJSON_CreateArray();
	for (uint32_t i = 0; i < k.n; i++) {
		struct e2b_record rec = { .template_id = parent.template_id,
					  .metadata = parent.metadata,
					  .env_sealed = parent.env_sealed,
					  .network = parent.network,
					  .created_us = now_us() };
		const char *id;
		char why[512];
		if (!k.sb[i]) {
			cJSON_AddItemToArray(out, fork_error(k.error[i], k.message[i]));
			continue;
		}
		id = hangar_sandbox_id(k.sb[i]);
		rc = hangar_sandbox_set_timeout(k.sb[i], secs ? secs : 1);
		snprintf(why, sizeof(why), "%s", rc < 0 ? hangar_error_last()->message : "");
		if (rc == 0) {
			e2b_lock();
			if (e2b_record_put(id, &rec) < 0) {
				rc = HANGAR_EOS;
				snprintf(why, sizeof(why), "the fork's E2B record cannot be written");
			}
			e2b_unlock();
		}
		if (rc < 0) {
			/* A fork nobody may use as asked goes. */
			hangar_sandbox_kill(k.sb[i]);
			cJSON_AddItemToArray(out, fork_error(rc, why));
			continue;
		}
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "sandbox", sandbox_answer(id, k.sb[i], &rec, NULL));
		cJSON_AddItemToArray(out, o);
	}
	reply_json(r, 201, out);
done:
	for (uint32_t i = 0; i < k.n; i++) {
		hangar_sandbox_unref(k.sb[i]);
		free(k.message[i]);
	}
	e2b_record_dispose(&parent);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

/* hangar_sandbox_snapshot(): its id is a templateID a create may name. */
void h_e2b_snapshot(struct request *r)
{
	static const char *const fields[] = { "name", NULL };
	hangar_buf id = HANGAR_BUF_INIT;
	cJSON *doc = request_json(r, fields);
	hangar_sandbox *sb = NULL;
	const char *name = NULL;
	int rc;

	if (!doc)
		return;
	if (want_string(r, doc, "name", &name) < 0 || !(sb = open_sandbox(r)))
		goto done;
	rc = hangar_sandbox_snapshot(&id, sb, name);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto done;
	}
	/* GET /snapshots lists it to this caller; a snapshot taken but not
	 * recorded is still the caller's to use, so the answer stands. */
	if (e2b_snapshot_note(request_token_name(r), request_param(r), id.ptr, name, now_us()) < 0)
		fprintf(stderr, "hangard: cannot record the snapshot %s of %s\n", id.ptr, request_param(r));
	cJSON *o = cJSON_CreateObject(), *names;
	cJSON_AddStringToObject(o, "snapshotID", id.ptr);
	names = cJSON_AddArrayToObject(o, "names");
	if (name && name[0])
		cJSON_AddItemToArray(names, cJSON_CreateString(name));
	reply_json(r, 201, o);
done:
	hangar_buf_dispose(&id);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}

/* ---- metrics and logs ---- */

struct samples {
	cJSON *arr;
	int64_t start_s, end_s;   /* 0: unbounded */
};

static int add_sample(const hangar_sandbox_metric *m, void *payload)
{
	struct samples *w = payload;
	int64_t t = m->timestamp_us / 1000000;
	char when[80];
	cJSON *o;

	if ((w->start_s && t < w->start_s) || (w->end_s && t > w->end_s))
		return 0;
	e2b_iso_time(when, m->timestamp_us);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "timestamp", when);
	sjson_add_int64(o, "timestampUnix", t);
	sjson_add_int64(o, "cpuCount", m->cpu_count);
	cJSON_AddNumberToObject(o, "cpuUsedPct", m->cpu_used_pct);
	sjson_add_int64(o, "memUsed", (int64_t)m->mem_used_bytes);
	sjson_add_int64(o, "memTotal", (int64_t)m->mem_total_bytes);
	sjson_add_int64(o, "memCache", 0);
	sjson_add_int64(o, "diskUsed", (int64_t)m->disk_used_bytes);
	sjson_add_int64(o, "diskTotal", (int64_t)m->disk_total_bytes);
	cJSON_AddItemToArray(w->arr, o);
	return 0;
}

/* A whole number query parameter within bounds; -1 after answering 400. */
static int query_int(struct request *r, const char *key, int64_t min, int64_t max, int64_t *out)
{
	const char *q = request_query(r, key);
	char *end;
	long long v;

	if (!q)
		return 0;
	v = strtoll(q, &end, 10);
	if (!*q || *end || v < min || v > max) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"%s\" is a whole number from %" PRId64 " to %" PRId64,
			    key, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

void h_e2b_metrics(struct request *r)
{
	struct samples w = { 0 };
	hangar_sandbox *sb;
	int rc;

	if (query_int(r, "start", 0, INT64_C(253402300799), &w.start_s) < 0 ||
	    query_int(r, "end", 0, INT64_C(253402300799), &w.end_s) < 0 || !(sb = open_sandbox(r)))
		return;
	w.arr = cJSON_CreateArray();
	rc = hangar_sandbox_metrics(sb, add_sample, &w);
	if (rc < 0) {
		cJSON_Delete(w.arr);
		reply_hangar_error(r, rc);
	} else {
		reply_json(r, 200, w.arr);
	}
	hangar_sandbox_unref(sb);
}

static int level_rank(const char *level)
{
	static const char *const order[] = { "debug", "info", "warn", "error" };
	for (int i = 0; i < 4; i++)
		if (strcmp(order[i], level) == 0)
			return i;
	return 1; /* a platform's own word counts as info */
}

struct log_walk {
	cJSON *arr;
	int min_rank;
	const char *search;
	int64_t cursor_ms;        /* -1: none */
	int backward;
};

static int add_log(const hangar_sandbox_log_entry *e, void *payload)
{
	struct log_walk *w = payload;
	int64_t ms = e->timestamp_us / 1000;
	char when[80];
	cJSON *o;

	if (level_rank(e->level) < w->min_rank || (w->search && !strstr(e->message, w->search)))
		return 0;
	if (w->cursor_ms >= 0 && (w->backward ? ms > w->cursor_ms : ms < w->cursor_ms))
		return 0;
	e2b_iso_time(when, e->timestamp_us);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "timestamp", when);
	cJSON_AddStringToObject(o, "message", e->message);
	cJSON_AddStringToObject(o, "level", e->level);
	cJSON_AddObjectToObject(o, "fields");
	cJSON_AddItemToArray(w->arr, o);
	return 0;
}

/*
 * The platform log, as E2B's v2 logs: at most limit entries from cursor
 * (milliseconds) on, oldest first (forward) or newest first (backward), at
 * level or above, holding search.
 */
void h_e2b_logs(struct request *r)
{
	struct log_walk w = { 0 };
	const char *dir = request_query(r, "direction"), *level = request_query(r, "level");
	int64_t limit = 1000;
	hangar_sandbox *sb;
	cJSON *doc, *logs;
	int rc, n;

	w.cursor_ms = -1;
	w.search = request_query(r, "search");
	if (query_int(r, "limit", 0, 1000, &limit) < 0 ||
	    query_int(r, "cursor", 0, INT64_C(253402300799999), &w.cursor_ms) < 0)
		return;
	if (dir && strcmp(dir, "forward") != 0 && strcmp(dir, "backward") != 0) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"direction\" is forward or backward");
		return;
	}
	if (level && strcmp(level, "debug") != 0 && strcmp(level, "info") != 0 && strcmp(level, "warn") != 0 &&
	    strcmp(level, "error") != 0) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"level\" is debug, info, warn or error");
		return;
	}
	if (w.search && strlen(w.search) > 256) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"search\" is at most 256 bytes");
		return;
	}
	w.backward = dir && strcmp(dir, "backward") == 0;
	w.min_rank = level ? level_rank(level) : 0;
	if (!(sb = open_sandbox(r)))
		return;
	doc = cJSON_CreateObject();
	w.arr = logs = cJSON_AddArrayToObject(doc, "logs");
	rc = hangar_sandbox_logs(sb, add_log, &w);
	hangar_sandbox_unref(sb);
	if (rc < 0) {
		cJSON_Delete(doc);
		reply_hangar_error(r, rc);
		return;
	}
	/* The library reports oldest first: backward is newest first. */
	if (w.backward) {
		cJSON *rev = cJSON_CreateArray(), *it;
		while ((n = cJSON_GetArraySize(logs)) > 0 && (it = cJSON_DetachItemFromArray(logs, n - 1)))
			cJSON_AddItemToArray(rev, it);
		cJSON_ReplaceItemInObjectCaseSensitive(doc, "logs", rev);
		logs = rev;
	}
	while (cJSON_GetArraySize(logs) > limit)
		cJSON_DeleteItemFromArray(logs, cJSON_GetArraySize(logs) - 1);
	reply_json(r, 200, doc);
}

void h_e2b_health(struct request *r)
{
	reply_empty(r, 204);
}

/* ---- what does not map ---- */

#define NO_BUILDS "templates are not built through this API: publish an environment with `hangar environment " \
		  "publish NAME` (or pull an image with `hangar image pull`) and name it as templateID"

static const struct {
	const char *method, *path, *why;
} unmapped[] = {
	{ "POST", "/e2b/v3/templates", NO_BUILDS },
	{ "POST", "/e2b/v2/templates", NO_BUILDS },
	{ "GET", "/e2b/api-keys", "keys are hangard tokens with the sandboxes scope: hangard hash-token NAME sandboxes" },
	{ "POST", "/e2b/api-keys", "keys are hangard tokens with the sandboxes scope: hangard hash-token NAME sandboxes" },
	{ "GET", "/e2b/teams", "hangard has no teams: a token sees every sandbox" },
	{ "GET", "/e2b/volumes", "volumes are not supported" },
	{ "POST", "/e2b/volumes", "volumes are not supported" },
	{ "PUT", "/e2b/sandboxes/{id}/network", "network rules are not supported: allow_internet_access at create" },
	{ "GET", "/e2b/sandboxes/{id}/logs", "logs are served at GET /v2/sandboxes/{id}/logs" },
};

void h_e2b_unmapped(struct request *r)
{
	const char *path = request_route(r)->path;
	for (size_t i = 0; i < sizeof(unmapped) / sizeof(unmapped[0]); i++)
		if (strcmp(unmapped[i].path, path) == 0 && strcmp(unmapped[i].method, request_method(r)) == 0) {
			reply_error(r, 501, "unsupported", HANGAR_EUNSUPPORTED, "%s %s: %s", request_method(r),
				    path + strlen(E2B_PREFIX), unmapped[i].why);
			return;
		}
	reply_error(r, 501, "unsupported", HANGAR_EUNSUPPORTED, "%s %s is not supported", request_method(r),
		    path + strlen(E2B_PREFIX));
}
