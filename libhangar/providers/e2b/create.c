/*
 * Creating a sandbox, and killing those nobody may use: one a rule refused,
 * and one an unanswered create may have made, found by the create id in its
 * metadata.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"

#define KILL_PAUSE_MIN_MS 200
#define KILL_PAUSE_MAX_MS 2000

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

static const char *map_template(struct e2b *e, const char *tpl)
{
	const char *mapped;

	if (!tpl || !*tpl)
		return "base";
	mapped = e2b_jstr(e->templates, tpl);
	return mapped ? mapped : tpl;
}

static int answer_id(const cJSON *j, const char **id)
{
	*id = e2b_jstr(j, "sandboxID");
	if (!*id || !e2b_valid_id(*id))
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0,
					"e2b: the control API answered without a valid sandbox id");
	return 0;
}

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
			e2b_forget(e, id);
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
void e2b_kill_refused(struct e2b *e, const char *id)
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
int e2b_adopt(struct e2b *e, const cJSON *j, int64_t timeout, hangar_sys_sandbox *out)
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
			e2b_kill_refused(e, id);
			return hangar_error_last()->code;
		}
		/* The platform hands it out again on every connect. */
		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: traffic token of %s not kept: %s", id,
		     hangar_error_last()->message);
	}
	rc = e2b_describe(e, id, j, out, &refused);
	if (rc) {
		/* Refused, or undescribable: either way nobody may use it. */
		e2b_kill_refused(e, id);
		return hangar_error_last()->code;
	}
	{
		int64_t now = clock_wall_us();

		hangar_sys_sandbox_set_times(out, now, timeout > 0 ? now + timeout * 1000000 : 0);
	}
	e2b_remember(e, id, timeout);
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
		rc = e2b_adopt(e, r.json, timeout, out);
	}
	e2b_resp_free(&r);
	return rc;
}
