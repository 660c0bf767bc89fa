/*
 * Suspend, resume and the reaper: the checkpoint comes first; a sandbox is
 * parked (paused with its memory) only within the bounds session.h lists,
 * and taken back on resume only when it is still the latest state.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/providers.h"
#include "checkpoint/ckpt.h"
#include "core/versioned.h"
#include "sess.h"
#include "util/sjson.h"

#define REASON_MAX 512

/* ---- suspend ---------------------------------------------------------------------- */

/* The session's labels and the suspend's, as "key=value" strings (malloc'd array). */
static int checkpoint_labels(const struct store_session *row, const char *const *extra, char ***out)
{
	char err[160];
	cJSON *j = sjson_parse(row->labels_json, strlen(row->labels_json), 0, err, sizeof(err)), *e;
	size_t n = 0, k = 0;
	char **v;

	*out = NULL;
	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_OS, "session %s: its labels in the state store do not parse: %s",
			    row->id, j ? "not an object" : err);
	}
	cJSON_ArrayForEach(e, j)
		n++;
	for (const char *const *l = extra; l && *l; l++)
		n++;
	if (!(v = calloc(n + 1, sizeof(*v)))) {
		cJSON_Delete(j);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	cJSON_ArrayForEach(e, j)
		if (cJSON_IsString(e) && asprintf(&v[k], "%s=%s", e->string, e->valuestring) >= 0)
			k++;
	for (const char *const *l = extra; l && *l; l++)
		if ((v[k] = strdup(*l)))
			k++;
	cJSON_Delete(j);
	*out = v;
	return 0;
}

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/*
 * Why sb cannot be parked now (written into reason), or "" when it can; may
 * evict the longest-parked sandbox of another session to make room.
 */
static void park_refusal(hangar_session *s, const struct store_session *row, hangar_sandbox *sb, uint32_t flags,
			 char reason[REASON_MAX])
{
	hangar_ctx *ctx = s->ctx;
	int64_t max_parked = hctx_int(ctx, HS_SESSION_HOT_RESUME_MAX), max_sb = hctx_int(ctx, HS_MAX_SANDBOXES);
	hangar_provider *p = hangar_sandbox_provider(sb);
	uint64_t n = 0;

	reason[0] = '\0';
	if (flags & HANGAR_SUSPEND_NO_PARK)
		snprintf(reason, REASON_MAX, "the caller asked not to park");
	else if (hctx_int(ctx, HS_SESSION_HOT_RESUME_MINUTES) == 0)
		snprintf(reason, REASON_MAX, "hot resume is off (HANGAR_SESSION_HOT_RESUME_MINUTES is 0)");
	else if (!(hangar_provider_capabilities(p) & HANGAR_CAP_HOT_RESUME))
		snprintf(reason, REASON_MAX, "provider %s cannot keep a paused sandbox's memory", hangar_provider_name(p));
	else if (row->flags & HANGAR_SESSION_EXCLUSIVE_CREDENTIAL)
		snprintf(reason, REASON_MAX, "the session holds an exclusive credential");
	else if (max_parked == 0)
		snprintf(reason, REASON_MAX, "HANGAR_SESSION_HOT_RESUME_MAX is 0");
	else if (max_sb > 0 && store_sandbox_count(ctx, &n) == 0 && n * 4 >= (uint64_t)max_sb * 3)
		snprintf(reason, REASON_MAX, "the fleet is three-quarters full (%llu of HANGAR_MAX_SANDBOXES=%lld)",
			 (unsigned long long)n, (long long)max_sb);
	else {
		/* Room under the cap: the longest-parked goes first. */
		while (store_session_count(ctx, HANGAR_SESSION_PARKED, &n) == 0 && n >= (uint64_t)max_parked) {
			if (sess_evict_parked(ctx, s->id, "HANGAR_SESSION_HOT_RESUME_MAX sandboxes were parked") != 1) {
				snprintf(reason, REASON_MAX,
					 "HANGAR_SESSION_HOT_RESUME_MAX (%lld) sandboxes are parked and none could be evicted",
					 (long long)max_parked);
				break;
			}
		}
	}
}

static int suspend_locked(hangar_session *s, const hangar_suspend_opts *o, struct sess_lease *l)
{
	hangar_ctx *ctx = s->ctx;
	hangar_checkpoint_opts co = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	struct store_session row;
	hangar_sandbox *sb = NULL;
	char reason[REASON_MAX] = "", **labels = NULL;
	int rc, ckpt_rc;

	if ((rc = store_session_get(ctx, s->id, &row)) != 0)
		return rc;
	if (row.state == HANGAR_SESSION_ARCHIVED) {
		rc = herr(HANGAR_EGONE, HANGAR_ERRCAT_ARGUMENT, "session %s is archived", row.id);
		goto out;
	}
	if (row.state != HANGAR_SESSION_ACTIVE)
		goto out; /* suspended or parked already */
	if ((rc = sess_attach(ctx, &row, &sb)) != 0) {
		if (rc != HANGAR_EGONE)
			goto out;
		/* Nothing left to checkpoint: the next resume restores the last one. */
		snprintf(reason, sizeof(reason), "its sandbox %s was gone", row.sandbox_id);
		sess_clear_sandbox(&row);
		row.state = HANGAR_SESSION_SUSPENDED;
		sess_set(&row.suspend_reason, reason);
		if (sess_save(ctx, &row) == 0)
			sess_event(ctx, "session.suspended", &row, reason);
		rc = herr(HANGAR_EGONE, HANGAR_ERRCAT_SANDBOX,
			  "session %s: its sandbox was gone; it resumes from %s", row.id,
			  *row.checkpoint_id ? row.checkpoint_id : "nothing (a fresh sandbox)");
		goto out;
	}

	/* The checkpoint first, always; chained to the last one while it is indexed. */
	if (*row.checkpoint_id) {
		struct store_ckpt c;

		rc = store_ckpt_get(ctx, row.checkpoint_id, &c);
		if (rc == HANGAR_ENOTFOUND)
			sess_set(&row.checkpoint_id, "");
		else if (rc)
			goto out;
		else
			store_ckpt_free(&c);
	}
	if ((rc = checkpoint_labels(&row, o->labels, &labels)) != 0)
		goto out;
	co.workspace = row.workspace;
	co.session_id = row.id;
	co.parent_id = *row.checkpoint_id ? row.checkpoint_id : NULL;
	co.blob = o->blob;
	co.blob_len = o->blob_len;
	co.labels = (const char *const *)labels;
	co.user = *row.user ? row.user : NULL;
	co.timeout_sec = o->timeout_sec;
	co.cancel = o->cancel;
	co.cancel_payload = o->cancel_payload;
	ckpt_rc = hangar_checkpoint_create(&cp, sb, &co);
	if (ckpt_rc == HANGAR_ECANCELED) {
		/* The caller gave up: nothing was stored, the session keeps running. */
		rc = ckpt_rc;
		herr_prefix("session %s keeps running: its suspend was cancelled", row.id);
		goto out;
	}
	if (ckpt_rc == 0 && cp) {
		sess_set(&row.checkpoint_id, hangar_checkpoint_id(cp));
	} else if (!*row.checkpoint_id) {
		/* Nothing to fall back on: the sandbox stays, and so does the work in it. */
		rc = ckpt_rc;
		herr_prefix("session %s keeps running: its checkpoint failed", row.id);
		goto out;
	} else {
		hangar_sys_log(ctx, HANGAR_LOG_WARNING, "session %s: checkpoint failed, suspending on %s: %s", row.id,
		     row.checkpoint_id, hangar_error_last()->message);
	}

	park_refusal(s, &row, sb, o->flags, reason);
	if (!reason[0] && sess_hook(s, sb, HANGAR_SESSION_HOOK_PARK) != 0)
		snprintf(reason, sizeof(reason), "%s", hangar_error_last()->message);
	if (!reason[0] && hangar_sandbox_pause(sb) != 0)
		snprintf(reason, sizeof(reason), "pausing failed: %s", hangar_error_last()->message);
	if (!reason[0]) {
		row.state = HANGAR_SESSION_PARKED;
		row.parked_us = clock_wall_us();
		sess_set(&row.parked_checkpoint_id, row.checkpoint_id);
		sess_set(&row.suspend_reason, "");
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "session %s: parked sandbox %s at checkpoint %s", row.id, row.sandbox_id,
		     row.checkpoint_id);
	} else {
		sess_destroy_sandbox(ctx, &row, sb, reason);
		sess_clear_sandbox(&row);
		row.state = HANGAR_SESSION_SUSPENDED;
		sess_set(&row.suspend_reason, reason);
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "session %s: suspended at checkpoint %s, not parked: %s", row.id,
		     row.checkpoint_id, reason);
	}
	if ((rc = sess_save_give(l, &row)) != 0)
		goto out;
	sess_event(ctx, row.state == HANGAR_SESSION_PARKED ? "session.parked" : "session.suspended", &row,
		   reason[0] ? reason : NULL);
out:
	sess_cache(s, &row);
	free_strv(labels);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_unref(sb);
	store_session_free(&row);
	return rc;
}

int hangar_session_suspend(hangar_session *s, const hangar_suspend_opts *opts)
{
	hangar_suspend_opts o;
	struct sess_lease l;
	int rc;

	HCHECK_ARG(s, "s is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_suspend_opts, "opts")) != 0)
		return rc;
	HCHECK_ARG(!(o.flags & ~HANGAR_SUSPEND_NO_PARK), "opts->flags has unknown bits");
	HCHECK_ARG(o.blob || !o.blob_len, "opts->blob is NULL with a length");
	{
		char *labels = NULL;

		/* Before anything happens: a bad label must not leave a suspend half done. */
		if ((rc = ckpt_labels_json(&labels, o.labels)) != 0)
			return rc;
		free(labels);
	}
	if ((rc = sess_lease_take(&l, s->ctx, s->id, 1)) != 0)
		return rc;
	rc = suspend_locked(s, &o, &l);
	sess_lease_give(&l);
	if (rc == 0)
		herr_clear();
	return rc;
}

/* ---- resume ----------------------------------------------------------------------- */

/* The check command's bound: HANGAR_SESSION_CHECK_SECONDS for the whole call, not only in the sandbox. */
struct check_bound {
	int64_t until_ms;
	int hit;
};

static int check_overdue(void *payload)
{
	struct check_bound *b = payload;

	if (clock_mono_ms() >= b->until_ms)
		b->hit = 1;
	return b->hit;
}

/* Tries the parked sandbox: 0 and *out when it is the session's again, else reason says why not. */
static int try_hot(hangar_session *s, struct store_session *row, hangar_sandbox **out, char reason[REASON_MAX])
{
	hangar_ctx *ctx = s->ctx;
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	struct check_bound check = { 0, 0 };
	hangar_sandbox *sb = NULL;
	char *latest = NULL;
	int rc;

	*out = NULL;
	if ((rc = sess_latest_checkpoint(ctx, row, &latest)) != 0)
		return rc;
	if (strcmp(latest, row->parked_checkpoint_id) != 0 || strcmp(row->checkpoint_id, row->parked_checkpoint_id) != 0) {
		snprintf(reason, REASON_MAX, "a newer checkpoint (%s) than the parked sandbox's (%s) exists", latest,
			 *row->parked_checkpoint_id ? row->parked_checkpoint_id : "none");
		free(latest);
		sess_destroy_sandbox(ctx, row, NULL, reason);
		return 0;
	}
	free(latest);
	if ((rc = sess_attach(ctx, row, &sb)) != 0) {
		snprintf(reason, REASON_MAX, "the parked sandbox %s: %s",
			 rc == HANGAR_EGONE ? "is gone" : "did not answer (hung)", hangar_error_last()->message);
		sess_destroy_sandbox(ctx, row, NULL, reason);
		return 0;
	}
	if (hangar_sandbox_resume(sb) != 0) {
		snprintf(reason, REASON_MAX, "resuming the parked sandbox failed: %s", hangar_error_last()->message);
		goto fail;
	}
	check.until_ms = clock_mono_ms() + hctx_int(ctx, HS_SESSION_CHECK_SECONDS) * 1000;
	eo.timeout_sec = hctx_int(ctx, HS_SESSION_CHECK_SECONDS);
	eo.cancel = check_overdue;
	eo.payload = &check;
	rc = hangar_sandbox_exec(&res, sb, "true", &eo);
	if (rc || res.exit_code != 0 || res.timed_out) {
		if (rc == HANGAR_ECANCELED && check.hit)
			snprintf(reason, REASON_MAX,
				 "the resumed sandbox hung: no answer to a command within %lld s (HANGAR_SESSION_CHECK_SECONDS)",
				 (long long)hctx_int(ctx, HS_SESSION_CHECK_SECONDS));
		else if (rc)
			snprintf(reason, REASON_MAX, "the resumed sandbox did not answer a command: %s",
				 hangar_error_last()->message);
		else
			snprintf(reason, REASON_MAX, "the resumed sandbox's check command failed (exit %d%s)", res.exit_code,
				 res.timed_out ? ", timed out" : "");
		hangar_exec_result_dispose(&res);
		goto fail;
	}
	hangar_exec_result_dispose(&res);
	if (sess_hook(s, sb, HANGAR_SESSION_HOOK_WAKE) != 0) {
		snprintf(reason, REASON_MAX, "%s", hangar_error_last()->message);
		goto fail;
	}
	*out = sb;
	return 0;
fail:
	sess_destroy_sandbox(ctx, row, sb, reason);
	hangar_sandbox_unref(sb);
	return 0;
}

/* A new sandbox with the latest checkpoint restored (or none to restore). */
static int cold(hangar_session *s, struct store_session *row, struct sess_lease *l, hangar_sandbox **out,
		int *how)
{
	hangar_ctx *ctx = s->ctx;
	hangar_sandbox *sb = NULL;
	char *latest = NULL;
	int rc;

	*out = NULL;
	if ((rc = sess_latest_checkpoint(ctx, row, &latest)) != 0)
		return rc;
	if ((rc = sess_create_sandbox(ctx, row, NULL, NULL, &sb)) != 0)
		goto out;
	if (*latest && (rc = sess_restore(ctx, row, latest, sb, NULL, NULL)) != 0) {
		herr_prefix("session %s: restoring checkpoint %s", row->id, latest);
		goto fail;
	}
	if ((rc = sess_hook(s, sb, HANGAR_SESSION_HOOK_COLD)) != 0)
		goto fail;
	if (*latest)
		sess_set(&row->checkpoint_id, latest);
	*how = *latest ? HANGAR_RESUME_COLD : HANGAR_RESUME_FRESH;
	*out = sb;
	sb = NULL;
	goto out;
fail: {
	hangar_sys_saved_error saved;

	hangar_sys_error_save(&saved);
	hangar_sandbox_kill(sb);
	hangar_sys_error_restore(&saved);
}
out:
	hangar_sandbox_unref(sb);
	free(latest);
	return rc;
}

static int resume_locked(hangar_session *s, struct sess_lease *l, hangar_sandbox **out)
{
	hangar_ctx *ctx = s->ctx;
	struct store_session row;
	hangar_sandbox *sb = NULL;
	char reason[REASON_MAX] = "";
	int rc, how = HANGAR_RESUME_HOT;

	if ((rc = store_session_get(ctx, s->id, &row)) != 0)
		return rc;
	switch (row.state) {
	case HANGAR_SESSION_ARCHIVED:
		rc = herr(HANGAR_EGONE, HANGAR_ERRCAT_ARGUMENT, "session %s is archived", row.id);
		goto out;
	case HANGAR_SESSION_ACTIVE:
		rc = sess_attach(ctx, &row, &sb);
		if (rc == 0)
			goto out;
		if (rc != HANGAR_EGONE)
			goto out;
		snprintf(reason, sizeof(reason), "its sandbox %s was gone", row.sandbox_id);
		break;
	case HANGAR_SESSION_PARKED:
		if ((rc = try_hot(s, &row, &sb, reason)) != 0)
			goto out;
		break;
	default:
		snprintf(reason, sizeof(reason), "%s", *row.suspend_reason ? row.suspend_reason : "it was suspended");
		break;
	}
	if (!sb) {
		/* Whatever was parked has been destroyed by now. */
		sess_clear_sandbox(&row);
		row.state = HANGAR_SESSION_SUSPENDED;
		if ((rc = cold(s, &row, l, &sb, &how)) != 0) {
			hangar_sys_saved_error saved;

			hangar_sys_error_save(&saved);
			sess_save(ctx, &row);
			hangar_sys_error_restore(&saved);
			goto out;
		}
	}
	row.state = HANGAR_SESSION_ACTIVE;
	row.last_resume = how;
	sess_set(&row.last_reason, how == HANGAR_RESUME_HOT ? "" : reason);
	sess_set(&row.provider, hangar_provider_name(hangar_sandbox_provider(sb)));
	sess_set(&row.sandbox_id, hangar_sandbox_id(sb));
	sess_set(&row.parked_checkpoint_id, "");
	row.parked_us = 0;
	if ((rc = sess_save_give(l, &row)) != 0) {
		/* Not recorded: nobody would know of a new sandbox. A woken one stays for the next try. */
		if (how != HANGAR_RESUME_HOT) {
			hangar_sys_saved_error saved;

			hangar_sys_error_save(&saved);
			hangar_sandbox_kill(sb);
			hangar_sys_error_restore(&saved);
		}
		goto out;
	}
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "session %s: resumed %s on sandbox %s%s%s", row.id,
	     how == HANGAR_RESUME_HOT ? "hot" : how == HANGAR_RESUME_COLD ? "from its checkpoint" : "fresh",
	     row.sandbox_id, reason[0] ? ": " : "", reason);
	sess_event(ctx, how == HANGAR_RESUME_HOT ? "session.woken" : "session.restored", &row,
		   reason[0] ? reason : NULL);
out:
	sess_cache(s, &row);
	store_session_free(&row);
	if (rc == 0 && out)
		*out = hangar_sandbox_ref(sb);
	hangar_sandbox_unref(sb);
	return rc;
}

int hangar_session_resume(hangar_session *s, hangar_sandbox **out)
{
	struct sess_lease l;
	int rc;

	if (out)
		*out = NULL;
	HCHECK_ARG(s, "s is NULL");
	if ((rc = sess_lease_take(&l, s->ctx, s->id, 1)) != 0)
		return rc;
	rc = resume_locked(s, &l, out);
	sess_lease_give(&l);
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_session_sandbox(hangar_sandbox **out, hangar_session *s)
{
	struct store_session row;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(s, "s is NULL");
	/* The common case without the lease: active, and its sandbox answers to attach. */
	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		return rc;
	if (row.state == HANGAR_SESSION_ACTIVE && sess_attach(s->ctx, &row, out) == 0) {
		sess_cache(s, &row);
		store_session_free(&row);
		herr_clear();
		return 0;
	}
	store_session_free(&row);
	return hangar_session_resume(s, out);
}

/* ---- eviction and the reaper -------------------------------------------------------- */

/* Un-parks the session of row if it is still parked on the same sandbox; 1 when it went. */
static int unpark(hangar_ctx *ctx, const char *id, const char *sandbox_id, const char *why)
{
	struct store_session row;
	struct sess_lease l;
	int rc, gone = 0;

	if ((rc = sess_lease_take(&l, ctx, id, 0)) != 0 || !l.held)
		return rc == HANGAR_ENOTFOUND ? 0 : rc;
	if ((rc = store_session_get(ctx, id, &row)) == 0) {
		if (row.state == HANGAR_SESSION_PARKED && !strcmp(row.sandbox_id, sandbox_id)) {
			sess_destroy_sandbox(ctx, &row, NULL, why);
			sess_clear_sandbox(&row);
			row.state = HANGAR_SESSION_SUSPENDED;
			sess_set(&row.suspend_reason, why);
			if ((rc = sess_save_give(&l, &row)) == 0) {
				gone = 1;
				sess_event(ctx, "session.unparked", &row, why);
			}
		}
		store_session_free(&row);
	}
	sess_lease_give(&l);
	return rc ? rc : gone;
}

struct parked_list {
	size_t n, cap;
	char **ids, **sandboxes;
	int64_t *parked_us;
};

static int collect_parked(const struct store_session *r, void *payload)
{
	struct parked_list *l = payload;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **a = realloc(l->ids, cap * sizeof(*a)), **b;
		int64_t *c;

		if (!a)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		l->ids = a;
		if (!(b = realloc(l->sandboxes, cap * sizeof(*b))))
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		l->sandboxes = b;
		if (!(c = realloc(l->parked_us, cap * sizeof(*c))))
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		l->parked_us = c;
		l->cap = cap;
	}
	l->ids[l->n] = strdup(r->id);
	l->sandboxes[l->n] = strdup(r->sandbox_id);
	l->parked_us[l->n] = r->parked_us;
	if (!l->ids[l->n] || !l->sandboxes[l->n]) {
		free(l->ids[l->n]);
		free(l->sandboxes[l->n]);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	l->n++;
	return 0;
}

static void parked_list_free(struct parked_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->ids[i]);
		free(l->sandboxes[i]);
	}
	free(l->ids);
	free(l->sandboxes);
	free(l->parked_us);
	memset(l, 0, sizeof(*l));
}

int sess_evict_parked(hangar_ctx *ctx, const char *except, const char *why)
{
	struct parked_list l = { 0 };
	int rc = store_session_list(ctx, HANGAR_SESSION_PARKED, collect_parked, &l);

	/* Longest-parked first; one another caller holds is passed over. */
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		if (except && !strcmp(l.ids[i], except))
			continue;
		rc = unpark(ctx, l.ids[i], l.sandboxes[i], why);
		if (rc == 1)
			break;
	}
	parked_list_free(&l);
	return rc;
}

/* Destroys the sandboxes given up earlier that could not be destroyed then; how many went. */
static uint32_t reap_doomed(hangar_ctx *ctx)
{
	char **ids = NULL, **providers = NULL;
	uint32_t n = 0;

	if (store_doomed_list(ctx, 64, &ids, &providers) == 0)
		for (size_t i = 0; ids[i]; i++) {
			hangar_sandbox *sb = NULL;
			int rc = hangar_sandbox_attach(&sb, ctx, *providers[i] ? providers[i] : NULL, ids[i]);

			if (rc == 0)
				rc = hangar_sandbox_kill(sb);
			hangar_sandbox_unref(sb);
			if (rc == 0 || rc == HANGAR_EGONE || rc == HANGAR_ENOTFOUND) {
				hangar_sys_log(ctx, HANGAR_LOG_INFO, "reaper: destroyed sandbox %s, given up earlier", ids[i]);
				if (store_doomed_remove(ctx, ids[i]) == 0 && rc == 0)
					n++;
			} else {
				hangar_sys_log(ctx, HANGAR_LOG_INFO, "reaper: sandbox %s, given up earlier, still does not answer: %s",
					       ids[i], hangar_error_last()->message);
			}
		}
	store_ids_free(ids);
	store_ids_free(providers);
	return n;
}

int hangar_session_reap(hangar_ctx *ctx, uint32_t *reaped)
{
	struct parked_list l = { 0 };
	int64_t minutes, max_parked, now = clock_wall_us();
	uint32_t n = 0;
	int rc;

	if (reaped)
		*reaped = 0;
	HCHECK_ARG(ctx, "ctx is NULL");
	minutes = hctx_int(ctx, HS_SESSION_HOT_RESUME_MINUTES);
	max_parked = hctx_int(ctx, HS_SESSION_HOT_RESUME_MAX);
	/* Longest-parked first. */
	rc = store_session_list(ctx, HANGAR_SESSION_PARKED, collect_parked, &l);
	for (size_t i = 0; rc == 0 && i < l.n; i++) {
		size_t left = l.n - i;   /* still parked, this one included */
		char why[REASON_MAX];
		int r;

		if (minutes == 0 || now - l.parked_us[i] > minutes * 60 * 1000000)
			snprintf(why, sizeof(why), "reaped: parked longer than HANGAR_SESSION_HOT_RESUME_MINUTES (%lld)",
				 (long long)minutes);
		else if ((int64_t)left > max_parked)
			snprintf(why, sizeof(why), "reaped: more than HANGAR_SESSION_HOT_RESUME_MAX (%lld) parked",
				 (long long)max_parked);
		else
			continue;
		r = unpark(ctx, l.ids[i], l.sandboxes[i], why);
		if (r == 1)
			n++;
		else if (r < 0)
			rc = r;
	}
	parked_list_free(&l);
	n += reap_doomed(ctx);
	if (reaped)
		*reaped = n;
	if (rc == 0)
		herr_clear();
	return rc;
}
