/*
 * The e2b provider's operations, shared by its flavours (e2b.h).
 *
 * Security rules (seeds 000 and 001):
 *   - every sandbox is created with network.allowPublicTraffic=false, so the
 *     platform's edge wants the traffic token, which only we hold;
 *   - envd's access token lives in memory only (the sandbox description);
 *     after a restart connect fetches it again;
 *   - the traffic token is sealed into the state store at create
 *     (hangar_sys_secret_put) because CubeAPI hands it out only then, and is
 *     used whenever connect hands none out;
 *   - a sandbox whose envd takes no token is refused and killed unless
 *     HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD is on, and refused and killed
 *     regardless when it has no traffic token either (it is public);
 *   - ids from the API are checked before they enter a URL path;
 *   - a kill that protects security (a refused sandbox, or one an unanswered
 *     create may have made) is retried until its deadline, and its failure is
 *     reported with the sandbox's id: it may still be running;
 *   - every create carries a client-made id in its metadata (E2B_CREATE_ID_KEY):
 *     when its answer never comes, the sandbox it may have made is looked for
 *     by that id and killed before the caller (or a tier) goes elsewhere.
 * A paused sandbox is never connected implicitly: connecting resumes it, so
 * connect() reads its state first and only calls the connect route (which on
 * a running sandbox merely extends its lifetime) to learn its tokens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"
#include "hangar/sandbox.h"
#include "hangar/template.h"

#define TRAFFIC_SECRET "traffic-token"
#define TRAFFIC_HEADER "e2b-traffic-access-token"
#define KILL_PAUSE_MIN_MS 200
#define KILL_PAUSE_MAX_MS 2000
#define LIST_MAX_PAGES 10000

struct e2b_known {                  /* what we remember of a sandbox between calls */
	char id[E2B_ID_MAX + 1];
	int64_t timeout_sec;        /* its lifetime, restarted on resume */
	struct e2b_known *next;
};


/* ---- small helpers ---------------------------------------------------------------- */

/* A declared setting's value: validated when the context opened, never NULL. */
static const char *setting(hangar_ctx *ctx, const char *name)
{
	const char *v = "";

	hangar_sys_ctx_setting_string(&v, ctx, name);
	return v;
}

static int64_t setting_int(hangar_ctx *ctx, const char *name)
{
	int64_t v = 0;

	hangar_sys_ctx_setting_int(&v, ctx, name);
	return v;
}

/*
 * Describes a failure again with a new message, keeping the fields of the
 * saved one that control flow reads (category, HTTP status, flags,
 * Retry-After). Returns code.
 */
static int redescribe(const hangar_sys_saved_error *saved, int code, const char *provider_code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int redescribe(const hangar_sys_saved_error *saved, int code, const char *provider_code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e2b_error(code, saved->error.category, saved->error.http_status, provider_code, "%s", msg);
	hangar_sys_error_flags(saved->error.flags);
	hangar_sys_error_retry_after(saved->error.retry_after_s);
	return code;
}

int e2b_oom(void)
{
	return hangar_sys_error(HANGAR_ENOMEM, 0, 0, "out of memory");
}

static int bad_id(const char *id)
{
	return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: invalid sandbox id (it must match [A-Za-z0-9_-]{1,64})");
}

static void remember(struct e2b *e, const char *id, int64_t timeout_sec)
{
	struct e2b_known *k;

	pthread_mutex_lock(&e->mu);
	for (k = e->known; k; k = k->next)
		if (!strcmp(k->id, id))
			break;
	if (!k && (k = calloc(1, sizeof(*k)))) {
		snprintf(k->id, sizeof(k->id), "%s", id);
		k->next = e->known;
		e->known = k;
	}
	if (k)
		k->timeout_sec = timeout_sec;
	pthread_mutex_unlock(&e->mu);
}

static int64_t remembered_timeout(struct e2b *e, const char *id)
{
	int64_t t = e->default_timeout;

	pthread_mutex_lock(&e->mu);
	for (struct e2b_known *k = e->known; k; k = k->next)
		if (!strcmp(k->id, id)) {
			t = k->timeout_sec;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return t;
}

static void forget(struct e2b *e, const char *id)
{
	pthread_mutex_lock(&e->mu);
	for (struct e2b_known **kp = &e->known; *kp; kp = &(*kp)->next)
		if (!strcmp((*kp)->id, id)) {
			struct e2b_known *k = *kp;

			*kp = k->next;
			free(k);
			break;
		}
	pthread_mutex_unlock(&e->mu);
}

static int e2b_own_domain(const char *d)
{
	static const char *const own[] = { "e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcmp(d, own[i]))
			return 1;
	return 0;
}

/* Replaces every {sandbox_id} and {port} in tmpl. NULL when out of memory. */
static char *fill_url(const char *tmpl, const char *id)
{
	struct hbuf b = HBUF_INIT;

	while (*tmpl) {
		if (!strncmp(tmpl, "{sandbox_id}", 12)) {
			if (hbuf_puts(&b, id) < 0)
				goto fail;
			tmpl += 12;
		} else if (!strncmp(tmpl, "{port}", 6)) {
			if (hbuf_printf(&b, "%d", ENVD_PORT) < 0)
				goto fail;
			tmpl += 6;
		} else {
			if (hbuf_put(&b, tmpl, 1) < 0)
				goto fail;
			tmpl++;
		}
	}
	return b.data ? hbuf_steal(&b) : strdup("");
fail:
	hbuf_free(&b);
	return NULL;
}

/*
 * Where the sandbox's envd is: the override with
 * its placeholders filled, or one URL routed by header; else E2B's shared
 * host routed by header on E2B's own domains, else 49983-<id>.<domain>.
 * E2b-Sandbox-Id and E2b-Sandbox-Port go with every request, as the SDKs do.
 */
static int describe_envd(struct e2b *e, const char *id, const char *answer_domain, hangar_sys_sandbox *out)
{
	const char *domain = answer_domain ? answer_domain : e->domain;
	char port[16], *url = NULL;
	int rc;

	if (answer_domain && !e2b_valid_domain(answer_domain))
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the control API answered a malformed domain");
	if (e->sandbox_url)
		url = fill_url(e->sandbox_url, id);
	else if (e2b_own_domain(domain)) {
		if (asprintf(&url, "https://sandbox.%s", domain) < 0)
			url = NULL;
	} else if (asprintf(&url, "https://%d-%s.%s", ENVD_PORT, id, domain) < 0)
		url = NULL;
	if (!url)
		return e2b_oom();
	rc = hangar_sys_sandbox_set_envd_url(out, url);
	free(url);
	snprintf(port, sizeof(port), "%d", ENVD_PORT);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_header(out, "E2b-Sandbox-Id", id);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_header(out, "E2b-Sandbox-Port", port);
	return rc;
}

static const char *map_template(struct e2b *e, const char *tpl)
{
	const char *mapped;

	if (!tpl || !*tpl)
		return "base";
	mapped = e2b_jstr(e->templates, tpl);
	return mapped ? mapped : tpl;
}

/* ---- init ------------------------------------------------------------------------------- */

static void e2b_fini(void *state)
{
	struct e2b *e = state;

	if (!e)
		return;
	e2b_api_fini(&e->api);
	while (e->known) {
		struct e2b_known *k = e->known;

		e->known = k->next;
		free(k);
	}
	pthread_mutex_destroy(&e->mu);
	cJSON_Delete(e->templates);
	free(e->domain);
	free(e->sandbox_url);
	free(e);
}

const struct e2b_flavour *e2b_flavour_named(const char *name)
{
	static const struct e2b_flavour *const all[] = { &e2b_flavour_cloud, &e2b_flavour_selfhosted,
							 &e2b_flavour_cube };

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

static int e2b_init(void **state, hangar_ctx *ctx, void *data)
{
	const struct e2b_flavour *fl = e2b_flavour_named(setting(ctx, "HANGAR_E2B_FLAVOR"));
	const char *api_url = setting(ctx, "HANGAR_E2B_API_URL");
	const char *key = setting(ctx, "HANGAR_E2B_API_KEY");
	const char *sandbox_url = setting(ctx, "HANGAR_E2B_SANDBOX_URL");
	char *base = NULL;
	struct e2b *e;
	int rc;

	(void)data;
	*state = NULL;
	if (!fl)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_E2B_FLAVOR names no flavour of the e2b provider");
	if (fl->need_key && !*key)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_E2B_API_KEY must be set for the %s flavour of the e2b provider",
					fl->name);
	if (fl->need_api_url && !*api_url)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_E2B_API_URL must be set for the %s flavour of the e2b provider",
					fl->name);
	e = calloc(1, sizeof(*e));
	if (!e)
		return e2b_oom();
	pthread_mutex_init(&e->mu, NULL);
	e->ctx = ctx;
	e->fl = fl;
	e->domain = strdup(setting(ctx, "HANGAR_E2B_DOMAIN"));
	e->sandbox_url = *sandbox_url ? strdup(sandbox_url) : NULL;
	{
		int32_t allow = 0;
		const char *templates = "{}";

		hangar_sys_ctx_setting_bool(&allow, ctx, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD");
		e->allow_unauth = allow;
		hangar_sys_ctx_setting_json(&templates, ctx, "HANGAR_E2B_ENVIRONMENT_TEMPLATES");
		e->templates = cJSON_Parse(templates);
	}
	e->default_timeout = setting_int(ctx, "HANGAR_SANDBOX_TIMEOUT_SECONDS");
	e->build_timeout_ms = setting_int(ctx, "HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS") * 1000;
	if (!e->domain || (*sandbox_url && !e->sandbox_url) || !e->templates) {
		e2b_fini(e);
		return e2b_oom();
	}
	if (*api_url)
		base = strdup(api_url);
	else if (asprintf(&base, "https://api.%s", e->domain) < 0)
		base = NULL;
	if (!base) {
		e2b_fini(e);
		return e2b_oom();
	}
	rc = e2b_api_init(&e->api, ctx, base, *key ? key : NULL,
			  setting_int(ctx, "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS") * 1000);
	free(base);
	if (rc) {
		pthread_mutex_destroy(&e->mu);
		cJSON_Delete(e->templates);
		free(e->domain);
		free(e->sandbox_url);
		free(e);
		return rc;
	}
	*state = e;
	return 0;
}

/* ---- describing a sandbox from an answer --------------------------------------------- */

/*
 * Fills out from a Sandbox answer (create, connect): envd endpoint, tokens.
 * The traffic token comes from the answer, else from the sealed store.
 * Applies the envd-token rules; *refused tells the caller a rule refused it.
 */
static int describe(struct e2b *e, const char *id, const cJSON *j, hangar_sys_sandbox *out, int *refused)
{
	const char *envd_token = e2b_jstr(j, "envdAccessToken");
	const char *traffic = e2b_jstr(j, "trafficAccessToken");
	const char *tpl = e2b_jstr(j, "templateID");
	hangar_buf sealed = HANGAR_BUF_INIT;
	int rc;

	*refused = 0;
	rc = hangar_sys_sandbox_set_id(out, id);
	if (rc == 0)
		rc = describe_envd(e, id, e2b_jstr(j, "domain"), out);
	if (rc == 0 && tpl)
		rc = hangar_sys_sandbox_set_template(out, tpl);
	if (rc)
		return rc;
	if (!traffic) {
		int g = hangar_sys_secret_get(&sealed, e->ctx, id, TRAFFIC_SECRET);

		if (g == 0)
			traffic = sealed.ptr;
		else if (g != HANGAR_ENOTFOUND && e->fl->traffic_token_once)
			/* Kept only by us, and the edge wants it on every port: without it nothing would work. */
			return g;
	}
	if (!envd_token && !traffic) {
		*refused = 1;
		rc = hangar_sys_error(HANGAR_EREFUSED, 0, 0,
				      "e2b: sandbox %s has neither an envd access token nor a traffic token: "
				      "anyone who can reach it could run commands in it",
				      id);
	} else if (!envd_token && !e->allow_unauth) {
		*refused = 1;
		rc = hangar_sys_error(HANGAR_EREFUSED, 0, 0,
				      "e2b: sandbox %s has no envd access token; set "
				      "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD=true only on a private network",
				      id);
	}
	if (rc == 0 && envd_token)
		rc = hangar_sys_sandbox_set_access_token(out, envd_token);
	if (rc == 0 && traffic)
		rc = hangar_sys_sandbox_add_header(out, TRAFFIC_HEADER, traffic);
	if (sealed.ptr)
		explicit_bzero(sealed.ptr, sealed.size);
	hangar_buf_dispose(&sealed);
	return rc;
}

static int answer_id(const cJSON *j, const char **id)
{
	*id = e2b_jstr(j, "sandboxID");
	if (!*id || !e2b_valid_id(*id))
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0,
					"e2b: the control API answered without a valid sandbox id");
	return 0;
}

/* ---- create -------------------------------------------------------------------------- */

/* A failed DELETE worth trying again: the platform was busy, not refusing. */
static int kill_transient(int rc, long status)
{
	if (status == 0)
		return rc == HANGAR_EUNAVAILABLE || rc == HANGAR_ETIMEOUT;
	return status == 408 || status == 409 || status == 429 || status == 500 || status == 502 || status == 503 ||
	       status == 504;
}

/*
 * Kills a sandbox nobody may use. The kill protects security, so one DELETE
 * is not enough: a transient failure is tried again after a pause growing
 * from KILL_PAUSE_MIN_MS to KILL_PAUSE_MAX_MS, an answer with Retry-After
 * (CubeAPI's 503 while the sandbox's lifecycle lock is held) after the wait
 * it asks for, until the deadline HANGAR_E2B_REQUEST_TIMEOUT_SECONDS from
 * now. A sandbox already gone counts as killed. Returns 0, or the last
 * failure's code with the thread's last error describing it.
 */
static int kill_hard(struct e2b *e, const char *id)
{
	int64_t deadline = clock_mono_ms() + e->api.timeout_ms;
	int pause_ms = KILL_PAUSE_MIN_MS, tries = 0;
	char path[128];

	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	for (;;) {
		struct e2b_resp r;
		int64_t wait_ms, left;
		long status;
		int rc, ra;

		rc = e2b_call(&e->api, "DELETE", path, NULL, 0, E2B_ROUTE_SANDBOX, "kill", &r);
		status = r.status;
		ra = r.retry_after;
		e2b_resp_free(&r);
		tries++;
		if (rc == 0 || rc == HANGAR_EGONE) {
			forget(e, id);
			return 0;
		}
		if (rc == HANGAR_ENOMEM || !kill_transient(rc, status))
			return rc;
		wait_ms = ra >= 0 ? (int64_t)ra * 1000 : pause_ms;
		left = deadline - clock_mono_ms();
		if (wait_ms >= left) {
			hangar_sys_error_prefix("gave up after %d %s (%s)", tries, tries == 1 ? "try" : "tries",
				    ra >= 0 ? "the platform asked to wait past the deadline" : "deadline reached");
			return rc;
		}
		hangar_sys_log(e->ctx, HANGAR_LOG_INFO, "e2b: kill of %s failed (%s); trying again in %lld ms", id,
		     hangar_error_last()->message, (long long)wait_ms);
		if (wait_ms > 0)
			poll(NULL, 0, (int)wait_ms);
		if (pause_ms < KILL_PAUSE_MAX_MS)
			pause_ms = pause_ms * 2 > KILL_PAUSE_MAX_MS ? KILL_PAUSE_MAX_MS : pause_ms * 2;
	}
}

/*
 * Kills a sandbox a rule refused (or that could not be described), keeping
 * the reason it was refused as the thread's last error; when the kill still
 * failed, the message says so, with the id: the sandbox may still be running.
 */
static void kill_refused(struct e2b *e, const char *id)
{
	hangar_sys_saved_error saved;
	char why[512];

	hangar_sys_error_save(&saved);
	if (kill_hard(e, id) == 0) {
		hangar_sys_error_restore(&saved);
		return;
	}
	snprintf(why, sizeof(why), "%s", hangar_error_last()->message);
	hangar_sys_log(e->ctx, HANGAR_LOG_WARNING, "e2b: could not kill refused sandbox %s: %s", id, why);
	hangar_sys_error_restore(&saved);
	redescribe(&saved, saved.error.code, saved.provider_code,
		  "%s; sandbox %s may still be running: killing it failed: %s", saved.message, id, why);
}

/*
 * Takes a new sandbox from a Sandbox answer (create, fork): keeps its
 * traffic token sealed, describes it into out, and kills it when a rule
 * refuses it or it cannot be described. timeout is its lifetime.
 */
static int adopt(struct e2b *e, const cJSON *j, int64_t timeout, hangar_sys_sandbox *out)
{
	const char *id, *traffic;
	int rc, refused;

	rc = answer_id(j, &id);
	if (rc)
		return rc; /* nothing we can name: the platform's own expiry reclaims it */
	/* Keep the traffic token first: some platforms (CubeAPI) never hand it out again. */
	traffic = e2b_jstr(j, "trafficAccessToken");
	if (traffic && (rc = hangar_sys_secret_put(e->ctx, id, TRAFFIC_SECRET, traffic)) != 0) {
		if (e->fl->traffic_token_once) {
			if (rc == HANGAR_ECONFIG)
				hangar_sys_error(HANGAR_ECONFIG, 0, 0,
						 "HANGAR_SECRET_KEY must be set for the %s flavour of the e2b "
						 "provider: its traffic tokens are kept sealed with it",
						 e->fl->name);
			kill_refused(e, id);
			return hangar_error_last()->code;
		}
		/* The platform hands it out again on every connect. */
		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: traffic token of %s not kept: %s", id,
		     hangar_error_last()->message);
	}
	rc = describe(e, id, j, out, &refused);
	if (rc) {
		/* Refused, or undescribable: either way nobody may use it. */
		kill_refused(e, id);
		return hangar_error_last()->code;
	}
	{
		int64_t now = clock_wall_us();

		hangar_sys_sandbox_set_times(out, now, timeout > 0 ? now + timeout * 1000000 : 0);
	}
	remember(e, id, timeout);
	return 0;
}

/* A new create id: 32 hex digits from the kernel's random source. */
static int new_create_id(char out[33])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return hangar_sys_error(HANGAR_EOS, 0, errno, "e2b: getrandom failed");
	for (size_t i = 0; i < sizeof(b); i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[32] = '\0';
	return 0;
}

/*
 * After a create that went out and got no answer (rc; the connection closed,
 * was reset, or our deadline passed): the platform may have made the
 * sandbox. Looks for sandboxes whose metadata carries this create's id (the
 * list's metadata filter, and a match on each entry's own metadata, so that
 * a platform ignoring the filter never gets another sandbox killed) and
 * kills them with kill_hard(). Returns the code the create fails with, the
 * thread's last error saying what was found and done; its provider_code is
 * "create_orphan_killed" (the outcome is known now: nothing of it runs, so
 * the code is HANGAR_EUNAVAILABLE and a tier may fall back),
 * "create_orphan_leaked" (found, and killing it failed) or
 * "create_outcome_unknown" (nothing found after a deadline passed, or the
 * look-up failed); none when nothing was found after a lost connection.
 */
static int reclaim(struct e2b *e, const char *cid, int rc)
{
	char query[96], esc[160], path[256], ids[200] = "", why[512] = "";
	hangar_sys_saved_error saved;
	struct e2b_resp r;
	int lr, found = 0, failed = 0;

	hangar_sys_error_save(&saved);
	snprintf(query, sizeof(query), "%s=%s", E2B_CREATE_ID_KEY, cid);
	e2b_escape(esc, sizeof(esc), query);
	snprintf(path, sizeof(path), "/v2/sandboxes?metadata=%s&limit=%d", esc, LIST_PAGE);
	lr = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "look for the sandbox of an unanswered create",
		      &r);
	if (lr == 0 && !cJSON_IsArray(r.json))
		lr = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list is not an array");
	if (lr) {
		snprintf(why, sizeof(why), "%s", hangar_error_last()->message);
		e2b_resp_free(&r);
		hangar_sys_error_restore(&saved);
		return redescribe(&saved, rc, "create_outcome_unknown",
				 "%s; the platform may have made the sandbox (metadata %s) and looking for it failed: "
				 "%s",
				 saved.message, query, why);
	}
	for (const cJSON *s = r.json->child; s; s = s->next) {
		struct e2b_sandbox_fields f;
		size_t n = strlen(ids);
		const char *id;

		if (e2b_decode_sandbox(s, &f) < 0 || !f.create_id || strcmp(f.create_id, cid) != 0)
			continue;
		id = f.id;
		found++;
		if (kill_hard(e, id) != 0) {
			failed++;
			snprintf(why, sizeof(why), "%s", hangar_error_last()->message);
		}
		if (n + strlen(id) + 3 < sizeof(ids))
			snprintf(ids + n, sizeof(ids) - n, "%s%s", n ? ", " : "", id);
	}
	e2b_resp_free(&r);
	hangar_sys_error_restore(&saved);
	if (found && failed) {
		hangar_sys_log(e->ctx, HANGAR_LOG_WARNING, "e2b: the unanswered create made %s; killing it failed: %s", ids, why);
		return redescribe(&saved, rc, "create_orphan_leaked",
				 "%s; the platform made %s, which may still be running: killing it failed: %s",
				 saved.message, ids, why);
	}
	if (found) {
		hangar_sys_log(e->ctx, HANGAR_LOG_INFO, "e2b: the unanswered create made %s; killed", ids);
		/* Nothing of it runs: a tier may move on as if the platform was never reached. */
		e2b_error(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, 0, "create_orphan_killed",
			  "%s; the platform had made %s, found by its create id and killed", saved.message, ids);
		hangar_sys_error_flags(HANGAR_ERROR_UNREACHABLE);
		return HANGAR_EUNAVAILABLE;
	}
	if (rc == HANGAR_ETIMEOUT)
		/* It may still be in the making: the outcome stays unknown. */
		return redescribe(&saved, rc, "create_outcome_unknown",
				 "%s; no sandbox with metadata %s exists yet, but it may still be made", saved.message,
				 query);
	return redescribe(&saved, rc, saved.provider_code,
			 "%s; no sandbox of it was made (none has metadata %s)", saved.message, query);
}

int e2b_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	struct e2b *e = state;
	const char *tpl = map_template(e, opts->template_id);
	int64_t timeout = opts->timeout_sec;
	cJSON *body, *net, *envs = NULL, *meta;
	char resolved[256], cid[33];
	struct e2b_resp r;
	int rc;

	if (timeout < 0)
		timeout = e->fl->no_limit_timeout;
	rc = new_create_id(cid);
	if (rc == 0)
		rc = e->fl->resolve_template(e, tpl, resolved, sizeof(resolved));
	if (rc)
		return rc;
	body = cJSON_CreateObject();
	if (!body)
		return e2b_oom();
	cJSON_AddStringToObject(body, "templateID", resolved);
	cJSON_AddNumberToObject(body, "timeout", (double)timeout);
	cJSON_AddBoolToObject(body, "secure", 1);
	cJSON_AddBoolToObject(body, "allow_internet_access", opts->network != HANGAR_NETWORK_OFF);
	net = cJSON_AddObjectToObject(body, "network");
	if (net)
		cJSON_AddBoolToObject(net, "allowPublicTraffic", 0);
	meta = cJSON_AddObjectToObject(body, "metadata");
	if (meta) {
		cJSON_AddStringToObject(meta, "hangar", "1");
		cJSON_AddStringToObject(meta, E2B_CREATE_ID_KEY, cid);
	}
	if (opts->env && opts->env[0])
		envs = cJSON_AddObjectToObject(body, "envVars");
	for (const char *const *v = opts->env; envs && v && *v; v++) {
		const char *eq = strchr(*v, '=');
		char *k = strndup(*v, (size_t)(eq - *v));

		if (k)
			cJSON_AddStringToObject(envs, k, eq + 1);
		free(k);
	}
	rc = e2b_call(&e->api, "POST", e->fl->sandboxes_path, body, 1, E2B_ROUTE_CREATE, "create", &r);
	cJSON_Delete(body);
	if (rc && r.unanswered)
		rc = reclaim(e, cid, rc);
	if (rc == 0) {
		const char *id = e2b_jstr(r.json, "sandboxID");

		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: created %s from %s", id ? id : "?", resolved);
		rc = adopt(e, r.json, timeout, out);
	}
	e2b_resp_free(&r);
	return rc;
}

/* ---- connect (describe without changing), resume ---------------------------------------- */

/* GET /sandboxes/{id}: the detail, in r->json. */
static int get_detail(struct e2b *e, const char *id, struct e2b_resp *r)
{
	char path[128];

	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	return e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "status", r);
}

static int state_of(const cJSON *j)
{
	const char *s = e2b_jstr(j, "state");

	return s && (!strcmp(s, "paused") || !strcmp(s, "pausing")) ? HANGAR_SANDBOX_PAUSED
								      : HANGAR_SANDBOX_RUNNING;
}

/* The flavour's connect route: resumes a paused sandbox, extends a running one. */
static int connect_route(struct e2b *e, const char *id, int64_t timeout, int running, struct e2b_resp *r,
			 const char *what)
{
	cJSON *body = cJSON_CreateObject();
	char path[160];
	int rc;

	if (!body)
		return e2b_oom();
	e->fl->connect_body(body, timeout, running);
	snprintf(path, sizeof(path), "%s/%s/connect", e->fl->sandboxes_path, id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, what, r);
	cJSON_Delete(body);
	if (rc == 0) {
		const char *got = e2b_jstr(r->json, "sandboxID");

		if (got && strcmp(got, id) != 0)
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: %s answered for another sandbox", what);
	}
	return rc;
}

/* A newer traffic token than the sealed one (E2B rotates them on resume). */
static void reseal(struct e2b *e, const char *id, const cJSON *j)
{
	const char *traffic = e2b_jstr(j, "trafficAccessToken");
	hangar_sys_saved_error saved;

	if (!traffic)
		return;
	hangar_sys_error_save(&saved);
	if (hangar_sys_secret_put(e->ctx, id, TRAFFIC_SECRET, traffic) != 0)
		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: traffic token of %s not kept", id);
	hangar_sys_error_restore(&saved);
}

int e2b_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct e2b *e = state;
	struct e2b_resp d, c;
	int64_t created, expires, now = clock_wall_us();
	int rc, refused;

	if (!e2b_valid_id(id))
		return bad_id(id);
	rc = get_detail(e, id, &d);
	if (rc) {
		e2b_resp_free(&d);
		return rc;
	}
	created = e2b_jtime_us(d.json, "startedAt");
	expires = e2b_jtime_us(d.json, "endAt");
	if (state_of(d.json) == HANGAR_SANDBOX_PAUSED) {
		/* Connecting would resume it: describe it without tokens. */
		rc = hangar_sys_sandbox_set_id(out, id);
		if (rc == 0)
			rc = hangar_sys_sandbox_set_state(out, HANGAR_SANDBOX_PAUSED);
		if (rc == 0)
			rc = describe_envd(e, id, e2b_jstr(d.json, "domain"), out);
		if (rc == 0 && e2b_jstr(d.json, "templateID"))
			rc = hangar_sys_sandbox_set_template(out, e2b_jstr(d.json, "templateID"));
		if (rc == 0)
			rc = hangar_sys_sandbox_set_times(out, created, 0);
		e2b_resp_free(&d);
		return rc;
	}
	/*
	 * Running. E2B's detail carries the envd token: nothing to change then.
	 * Else (Cube) the connect route hands the tokens out; on a running
	 * sandbox it only extends the lifetime, so ask for no more than it has
	 * left (a flavour whose platform ignores the value there sends none).
	 */
	if (e2b_jstr(d.json, "envdAccessToken")) {
		rc = describe(e, id, d.json, out, &refused);
		if (rc == 0)
			rc = hangar_sys_sandbox_set_times(out, created, expires);
		e2b_resp_free(&d);
		return rc;
	}
	{
		int64_t left = expires > now ? (expires - now) / 1000000 : 0;

		if (expires == 0)
			left = remembered_timeout(e, id);
		else if (left < 1)
			left = 1;
		rc = connect_route(e, id, left, 1, &c, "connect");
	}
	if (rc == 0) {
		rc = describe(e, id, c.json, out, &refused);
		if (rc == 0 && !e2b_jstr(c.json, "templateID") && e2b_jstr(d.json, "templateID"))
			rc = hangar_sys_sandbox_set_template(out, e2b_jstr(d.json, "templateID"));
		if (rc == 0)
			rc = hangar_sys_sandbox_set_times(out, created, expires);
		if (rc == 0)
			reseal(e, id, c.json);
	}
	e2b_resp_free(&c);
	e2b_resp_free(&d);
	return rc;
}

int e2b_resume(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct e2b *e = state;
	struct e2b_resp c;
	int64_t timeout, now = clock_wall_us();
	int rc, refused;

	if (!e2b_valid_id(id))
		return bad_id(id);
	timeout = remembered_timeout(e, id);
	rc = connect_route(e, id, timeout, 0, &c, "resume");
	if (rc == 0)
		rc = describe(e, id, c.json, out, &refused);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_times(out, 0, timeout > 0 ? now + timeout * 1000000 : 0);
	if (rc == 0)
		reseal(e, id, c.json);
	e2b_resp_free(&c);
	return rc;
}

/* ---- kill, pause, timeouts ---------------------------------------------------------------- */

int e2b_kill(void *state, const char *id)
{
	struct e2b *e = state;
	struct e2b_resp r;
	char path[128];
	int rc;

	if (!e2b_valid_id(id))
		return bad_id(id);
	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	rc = e2b_call(&e->api, "DELETE", path, NULL, 0, E2B_ROUTE_SANDBOX, "kill", &r);
	e2b_resp_free(&r);
	if (rc == 0 || rc == HANGAR_EGONE)
		forget(e, id);
	return rc;
}

static int do_pause(struct e2b *e, const char *id, int memory)
{
	struct e2b_resp r, d;
	cJSON *body = NULL;
	char path[160];
	int rc;

	if (!e2b_valid_id(id))
		return bad_id(id);
	if (e->fl->pause_body(&body, memory) != 0)
		return e2b_oom();
	snprintf(path, sizeof(path), "/sandboxes/%s/pause", id);
	rc = e2b_call(&e->api, "POST", path, body, 0, E2B_ROUTE_SANDBOX, "pause", &r);
	cJSON_Delete(body);
	if (rc && r.status == 409) {
		/* Already paused is done; anything else is the platform refusing. */
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		if (get_detail(e, id, &d) == 0 && state_of(d.json) == HANGAR_SANDBOX_PAUSED)
			rc = 0;
		else
			hangar_sys_error_restore(&saved);
		e2b_resp_free(&d);
	}
	e2b_resp_free(&r);
	return rc;
}

int e2b_pause(void *state, const char *id)
{
	return do_pause(state, id, 1);
}

int e2b_pause_filesystem(void *state, const char *id)
{
	struct e2b *e = state;

	if (!(e->fl->capabilities & HANGAR_CAP_FS_PAUSE))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
					"e2b: the %s flavour always pauses with memory; a filesystem-only pause is "
					"not available",
					e->fl->name);
	return do_pause(state, id, 0);
}

int e2b_set_timeout(void *state, const char *id, int64_t seconds)
{
	struct e2b *e = state;
	struct e2b_resp r;
	cJSON *body;
	char path[160];
	int rc;

	if (!e2b_valid_id(id))
		return bad_id(id);
	if (seconds < 0 || seconds > E2B_MAX_TIMEOUT)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a timeout must be 0 to 366 days");
	body = cJSON_CreateObject();
	if (!body)
		return e2b_oom();
	/* 0 is "no limit": the flavour says how its platform spells it. */
	cJSON_AddNumberToObject(body, "timeout", (double)(seconds ? seconds : e->fl->no_limit_timeout));
	snprintf(path, sizeof(path), "/sandboxes/%s/timeout", id);
	rc = e2b_call(&e->api, "POST", path, body, 0, E2B_ROUTE_SANDBOX, "set timeout", &r);
	cJSON_Delete(body);
	e2b_resp_free(&r);
	if (rc == 0)
		remember(e, id, seconds ? seconds : e->fl->no_limit_timeout);
	return rc;
}

/* ---- list ------------------------------------------------------------------------------------ */

static int list_entry(struct e2b *e, const cJSON *s, hangar_sys_list *out)
{
	struct e2b_sandbox_fields f;
	hangar_sys_sandbox *d;
	int rc;

	if (e2b_decode_sandbox(s, &f) < 0)
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list holds a sandbox without a valid id");
	d = hangar_sys_list_add(out);
	if (!d)
		return e2b_oom();
	rc = hangar_sys_sandbox_set_id(d, f.id);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_state(d, f.paused ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING);
	if (rc == 0 && f.template_id)
		rc = hangar_sys_sandbox_set_template(d, f.template_id);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_times(d, f.started_us, f.paused ? 0 : f.end_us);
	(void)e;
	return rc;
}

int e2b_list(void *state, hangar_sys_list *out)
{
	struct e2b *e = state;
	char token[256] = "", esc[800], path[1024];
	int rc = 0;

	for (int page = 0; page < LIST_MAX_PAGES; page++) {
		struct e2b_resp r;

		if (*token) {
			if (e2b_escape(esc, sizeof(esc), token) < 0)
				return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list's page token is too long");
			snprintf(path, sizeof(path), "/v2/sandboxes?limit=%d&nextToken=%s", LIST_PAGE, esc);
		} else {
			snprintf(path, sizeof(path), "/v2/sandboxes?limit=%d", LIST_PAGE);
		}
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "list", &r);
		if (rc == 0 && !cJSON_IsArray(r.json))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list is not an array");
		for (const cJSON *s = r.json ? r.json->child : NULL; rc == 0 && s; s = s->next)
			rc = list_entry(e, s, out);
		/* A list that does not page (CubeAPI's) ignores nextToken and sends none. */
		if (rc == 0 && !e->fl->pages && cJSON_GetArraySize(r.json) >= LIST_PAGE)
			hangar_sys_log(e->ctx, HANGAR_LOG_WARNING,
			     "e2b: the %s flavour lists at most %d sandboxes and does not page: more may exist",
			     e->fl->name, LIST_PAGE);
		if (rc == 0 && *r.next_token && !strcmp(r.next_token, token))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list repeats its page token");
		if (rc == 0)
			snprintf(token, sizeof(token), "%s", r.next_token);
		e2b_resp_free(&r);
		if (rc)
			return rc; /* the core drops what was added: never a partial list */
		if (!*token)
			return 0;
	}
	return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the list goes on past %d pages", LIST_MAX_PAGES);
}

/* ---- snapshots ------------------------------------------------------------------------------ */

int e2b_put_buf(hangar_buf *out, const char *s)
{
	char *c = strdup(s);

	if (!c)
		return e2b_oom();
	hangar_buf_dispose(out);
	out->ptr = c;
	out->size = strlen(c);
	out->reserved = out->size + 1;
	return 0;
}

int e2b_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id)
{
	struct e2b *e = state;
	cJSON *body = cJSON_CreateObject();
	struct e2b_resp r;
	const char *snap;
	char path[160];
	int rc;

	if (!body)
		return e2b_oom();
	if (!e2b_valid_id(id)) {
		cJSON_Delete(body);
		return bad_id(id);
	}
	if (name)
		cJSON_AddStringToObject(body, "name", name);
	snprintf(path, sizeof(path), "/sandboxes/%s/snapshots", id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, "snapshot", &r);
	cJSON_Delete(body);
	if (rc == 0 && r.status == 409)
		rc = hangar_sys_error(HANGAR_EINVAL, 409, 0, "e2b: a snapshot of %s is already being taken", id);
	if (rc == 0) {
		snap = e2b_jstr(r.json, "snapshotID");
		/* A template reference ("snap-…", or E2B's "name:tag"): it goes into JSON, never a path. */
		if (!snap || strlen(snap) > 200 ||
		    strspn(snap, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/") != strlen(snap))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the snapshot answer has no valid id");
		else
			rc = e2b_put_buf(out_id, snap);
	}
	e2b_resp_free(&r);
	return rc;
}

/* ---- templates ---------------------------------------------------------------------------- */

void e2b_progress(const struct hangar_template_build_opts *o, const char *status, const char *msg)
{
	if (o->progress)
		o->progress(status, msg ? msg : "", o->payload);
}

/* Waits between two polls of a build, growing from 200 ms to 2 s, never past the deadline. */
static void poll_wait(int *delay_ms, int64_t deadline)
{
	int64_t left = deadline - clock_mono_ms();
	int d = *delay_ms;

	if (left < d)
		d = left > 0 ? (int)left : 0;
	if (d > 0)
		poll(NULL, 0, d);
	if (*delay_ms < 2000)
		*delay_ms = *delay_ms * 2 > 2000 ? 2000 : *delay_ms * 2;
}

int e2b_follow_build(struct e2b *e, const struct hangar_template_build_opts *o, const char *tid, const char *bid)
{
	int64_t deadline = clock_mono_ms() + e->build_timeout_ms;
	int delay = 200, offset = 0;
	char last[64] = "";

	for (;;) {
		struct e2b_resp r;
		char path[256];
		const char *status;
		int rc;

		e->fl->build_status_path(path, sizeof(path), tid, bid, offset);
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "build status", &r);
		if (rc) {
			e2b_resp_free(&r);
			return rc;
		}
		status = e2b_jstr(r.json, "status");
		if (!status) {
			e2b_resp_free(&r);
			return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a build status without a status");
		}
		/* E2B: new log entries; Cube: the phase or error in message. */
		{
			const cJSON *entries = cJSON_GetObjectItemCaseSensitive(r.json, "logEntries");
			int n = 0;

			for (const cJSON *le = cJSON_IsArray(entries) ? entries->child : NULL; le; le = le->next, n++)
				e2b_progress(o, status, e2b_jstr(le, "message"));
			offset += n;
			if (!n && (strcmp(last, status) || e2b_jstr(r.json, "message")))
				e2b_progress(o, status, e2b_jstr(r.json, "message"));
		}
		snprintf(last, sizeof(last), "%s", status);
		if (!strcmp(status, "ready")) {
			e2b_resp_free(&r);
			return 0;
		}
		if (!strcmp(status, "error") || !strcmp(status, "failed")) {
			const cJSON *reason = cJSON_GetObjectItemCaseSensitive(r.json, "reason");
			const char *why = e2b_jstr(reason, "message");

			if (!why)
				why = e2b_jstr(r.json, "message");
			rc = hangar_sys_error(HANGAR_ECREATE, 0, 0, "e2b: the build of template %s failed: %.300s", tid,
					      why ? why : "no reason given");
			e2b_resp_free(&r);
			return rc;
		}
		e2b_resp_free(&r);
		if (clock_mono_ms() >= deadline)
			return hangar_sys_error(HANGAR_ETIMEOUT, 0, 0,
						"e2b: template %s was not built within "
						"HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS (%lld s); it may still finish",
						tid, (long long)(e->build_timeout_ms / 1000));
		poll_wait(&delay, deadline);
	}
}

int e2b_template_build(void *state, const struct hangar_template_build_opts *opts, hangar_buf *out_template_id)
{
	struct e2b *e = state;

	if (!opts->name || !*opts->name || strlen(opts->name) > 128 || strpbrk(opts->name, " \t\r\n/\\\"") ||
	    !opts->image || !*opts->image || strpbrk(opts->image, " \t\r\n\""))
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a template build needs a name and an image");
	return e->fl->template_build(e, opts, out_template_id);
}

int e2b_template_list(void *state, int (*fn)(const struct hangar_template_info *info, void *payload), void *payload)
{
	struct e2b *e = state;
	cJSON *all = cJSON_CreateArray();
	char token[256] = "", esc[800], path[1024];
	int rc = 0;

	if (!all)
		return e2b_oom();
	/* Everything first, so that a failure reports nothing. */
	for (int page = 0; page < LIST_MAX_PAGES; page++) {
		struct e2b_resp r;

		if (!*token || e2b_escape(esc, sizeof(esc), token) < 0)
			esc[0] = '\0';
		e->fl->template_list_path(path, sizeof(path), esc);
		rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_OTHER, "template list", &r);
		if (rc == 0 && !cJSON_IsArray(r.json))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the template list is not an array");
		if (rc == 0 && *r.next_token && !strcmp(r.next_token, token))
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the template list repeats its page token");
		while (rc == 0 && r.json->child) {
			cJSON *t = cJSON_DetachItemViaPointer(r.json, r.json->child);

			cJSON_AddItemToArray(all, t);
		}
		snprintf(token, sizeof(token), "%s", rc == 0 && e->fl->pages ? r.next_token : "");
		e2b_resp_free(&r);
		if (rc || !*token)
			break;
	}
	for (const cJSON *t = all->child; rc == 0 && t; t = t->next) {
		struct hangar_template_info info = { HANGAR_TEMPLATE_INFO_VERSION, sizeof(info), NULL, "", "", "e2b" };

		if (e2b_decode_template(t, &info) == 0)
			rc = fn(&info, payload);
	}
	cJSON_Delete(all);
	return rc;
}

/* ---- forks, metrics, logs ------------------------------------------------------------------ */

#define METRICS_MAX 1000
#define LOGS_MAX 1000
#define LOG_MESSAGE_MAX 4096

int e2b_fork(void *state, const char *id, uint32_t count, int64_t timeout_sec, hangar_sys_list *out)
{
	struct e2b *e = state;
	cJSON *body;
	struct e2b_resp r;
	char path[160];
	uint32_t i = 0;
	int rc;

	if (!(e->fl->capabilities & HANGAR_CAP_FORK))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "e2b: the %s flavour has no native fork",
					e->fl->name);
	if (!e2b_valid_id(id))
		return bad_id(id);
	if (count < 1 || count > 100)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a fork makes 1 to 100 sandboxes");
	if (timeout_sec <= 0 || timeout_sec > E2B_MAX_TIMEOUT)
		timeout_sec = E2B_MAX_TIMEOUT;
	body = cJSON_CreateObject();
	if (!body)
		return e2b_oom();
	cJSON_AddNumberToObject(body, "timeout", (double)timeout_sec);
	cJSON_AddNumberToObject(body, "count", count);
	snprintf(path, sizeof(path), "/sandboxes/%s/fork", id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, "fork", &r);
	cJSON_Delete(body);
	if (rc == 0 && !cJSON_IsArray(r.json))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the fork answer is not an array");
	if (rc) {
		e2b_resp_free(&r);
		return rc;
	}
	for (const cJSON *x = r.json->child; x; x = x->next, i++) {
		const cJSON *sbj = cJSON_GetObjectItemCaseSensitive(x, "sandbox");
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(x, "error");
		hangar_sys_sandbox *d = i < count ? hangar_sys_list_add(out) : NULL;

		if (!d) {
			/* More forks than asked for, or no memory to describe one: nobody may keep it. */
			const char *extra = cJSON_IsObject(sbj) ? e2b_jstr(sbj, "sandboxID") : NULL;

			if (extra && e2b_valid_id(extra))
				kill_refused(e, extra);
			continue;
		}
		if (cJSON_IsObject(sbj)) {
			int a = adopt(e, sbj, timeout_sec, d);

			if (a && hangar_sys_sandbox_set_error(d, a, hangar_error_last()->message) != 0)
				hangar_sys_sandbox_set_error(d, a, "");
		} else {
			char why[256], msg[320];
			int c = e2b_decode_fork_error(err, why, sizeof(why));

			snprintf(msg, sizeof(msg), "e2b: fork %u of %s failed: %s", i, id, why);
			hangar_sys_sandbox_set_error(d, c, msg);
		}
	}
	e2b_resp_free(&r);
	return 0;
}

static int cmp_metric(const void *a, const void *b)
{
	const struct hangar_sandbox_metric *x = a, *y = b;

	return (x->timestamp_us > y->timestamp_us) - (x->timestamp_us < y->timestamp_us);
}

int e2b_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		void *payload)
{
	struct e2b *e = state;
	struct hangar_sandbox_metric *v = NULL;
	struct e2b_resp r;
	char path[160];
	int rc, n = 0, skip;

	if (!e2b_valid_id(id))
		return bad_id(id);
	if (e->fl->no_metrics)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "e2b: the %s flavour keeps no metrics: %s",
					e->fl->name, e->fl->no_metrics);
	snprintf(path, sizeof(path), "/sandboxes/%s/metrics", id);
	rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "metrics", &r);
	if (rc == 0 && !cJSON_IsArray(r.json))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the metrics are not an array");
	if (rc == 0) {
		/* Only the newest METRICS_MAX samples, whatever the platform sends. */
		skip = cJSON_GetArraySize(r.json) - METRICS_MAX;
		v = calloc(METRICS_MAX, sizeof(*v));
		if (!v)
			rc = e2b_oom();
		for (const cJSON *x = r.json->child; rc == 0 && x; x = x->next) {
			if (skip-- > 0)
				continue;
			if (e2b_decode_metric(x, &v[n]) < 0)
				rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a malformed metrics sample");
			n++;
		}
	}
	e2b_resp_free(&r);
	if (rc == 0 && n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_metric);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = fn(&v[i], payload);
	free(v);
	return rc;
}

struct log_line {
	struct hangar_sandbox_log_entry entry;
	int index;
};

static int cmp_log(const void *a, const void *b)
{
	const struct log_line *x = a, *y = b;

	if (x->entry.timestamp_us != y->entry.timestamp_us)
		return x->entry.timestamp_us < y->entry.timestamp_us ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

int e2b_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	     void *payload)
{
	struct e2b *e = state;
	struct log_line *v = NULL;
	const cJSON *logs;
	struct e2b_resp r;
	char path[160];
	int rc, n = 0;

	if (!e2b_valid_id(id))
		return bad_id(id);
	/* The v2 route on every flavour: CubeAPI has it too. */
	snprintf(path, sizeof(path), "/v2/sandboxes/%s/logs?limit=%d", id, LOGS_MAX);
	rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "logs", &r);
	logs = rc == 0 ? cJSON_GetObjectItemCaseSensitive(r.json, "logs") : NULL;
	if (rc == 0 && !cJSON_IsArray(logs))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the logs answer has no list of entries");
	if (rc == 0 && !(v = calloc(LOGS_MAX, sizeof(*v))))
		rc = e2b_oom();
	for (const cJSON *x = rc == 0 ? logs->child : NULL; x && n < LOGS_MAX; x = x->next) {
		struct log_line *l = &v[n];
		int d = e2b_decode_log(x, &l->entry, LOG_MESSAGE_MAX);

		l->index = n++;
		if (d == -1) {
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a malformed log entry");
			break;
		}
		if (d < 0) {
			rc = e2b_oom();
			break;
		}
	}
	e2b_resp_free(&r);
	if (rc == 0 && n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_log);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = fn(&v[i].entry, payload);
	for (int i = 0; i < n; i++) {
		free((char *)v[i].entry.level);
		free((char *)v[i].entry.message);
	}
	free(v);
	return rc;
}

/* ---- the table ------------------------------------------------------------------------ */

static uint64_t e2b_capabilities(void *state)
{
	const struct e2b *e = state;

	return e->fl->capabilities;
}

/* HANGAR_E2B_ENVIRONMENT_TEMPLATES maps environment names to template ids. */
static int check_templates(const char *name, const char *value)
{
	cJSON *json = cJSON_Parse(value);
	int rc = 0;

	for (const cJSON *t = json ? json->child : NULL; t && !rc; t = t->next)
		if (!cJSON_IsString(t) || !*t->valuestring || !*t->string)
			rc = hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					      "%s must map environment names to template ids (strings); \"%s\" does not",
					      name, t->string ? t->string : "");
	cJSON_Delete(json);
	return rc;
}

/* The e2b provider's settings, each with its one default. */
static const struct hangar_setting_def e2b_settings[] = {
	{ "HANGAR_E2B_FLAVOR", HANGAR_SETTING_TYPE_CHOICE, HANGAR_SETTING_FIXED, "cloud", 0, 0, "cloud|selfhosted|cube",
	  "which platform: E2B's cloud, self-hosted E2B, or CubeSandbox", NULL },
	{ "HANGAR_E2B_API_URL", HANGAR_SETTING_TYPE_URL, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "the control API (default https://api.<domain>; required for cube)", NULL },
	{ "HANGAR_E2B_DOMAIN", HANGAR_SETTING_TYPE_HOST, 0, "e2b.app", 0, 0, NULL,
	  "sandbox host names are <port>-<id>.<domain>", NULL },
	{ "HANGAR_E2B_SANDBOX_URL", HANGAR_SETTING_TYPE_URL, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "where envd is reached, if not at the domain", NULL },
	{ "HANGAR_E2B_API_KEY", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0,
	  NULL, "the API key (required for cloud and selfhosted)", NULL },
	{ "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", HANGAR_SETTING_TYPE_BOOL, 0, "false", 0, 0, NULL,
	  "accept an envd that takes no token (private networks only)", NULL },
	{ "HANGAR_E2B_ENVIRONMENT_TEMPLATES", HANGAR_SETTING_TYPE_JSON, 0, "{}", 0, 0, NULL,
	  "template name -> platform template id", check_templates },
	{ "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 1, 86400, NULL,
	  "one control-API call", NULL },
	{ "HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "1800", 1, 7LL * 86400, NULL,
	  "a template build", NULL },
	{ NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

/*
 * Not offered, and said why: the platforms route a sandbox's port at
 * <port>-<id>.<domain>, but every sandbox is created with public traffic off
 * (see the top of this file), so that host answers 403 to a request without
 * the traffic token, which never leaves the library. A bare host name would
 * reach nothing.
 */
static int e2b_expose_port(void *state, const char *id, uint32_t port, hangar_buf *out_addr)
{
	struct e2b *e = state;

	(void)out_addr;
	if (!e2b_valid_id(id))
		return bad_id(id);
	return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
				"e2b: the %s flavour cannot expose port %u: its host %u-%s.<domain> wants the "
				"sandbox's traffic token (public traffic is off), which stays in the library",
				e->fl->name, (unsigned)port, (unsigned)port, id);
}

/*
 * One table for every flavour: init reads HANGAR_E2B_FLAVOR and reports that
 * flavour's capabilities; the slots a flavour lacks answer
 * HANGAR_EUNSUPPORTED from the flavour's rules. Before init it claims only
 * what every flavour has.
 */
const struct hangar_provider_ops e2b_provider_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "e2b",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_TEMPLATES,
	.init = e2b_init,
	.fini = e2b_fini,
	.create = e2b_create,
	.connect = e2b_connect,
	.kill = e2b_kill,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.set_timeout = e2b_set_timeout,
	.list = e2b_list,
	.pause_filesystem = e2b_pause_filesystem,
	.snapshot = e2b_snapshot,
	.template_build = e2b_template_build,
	.template_list = e2b_template_list,
	.fork = e2b_fork,
	.metrics = e2b_metrics,
	.logs = e2b_logs,
	.settings = e2b_settings,
	.get_capabilities = e2b_capabilities,
	.expose_port = e2b_expose_port,
};
