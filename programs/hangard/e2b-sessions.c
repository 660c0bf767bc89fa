/*
 * E2B's pause with memory: false, as hangar does it: a session suspend
 * (hangar/session.h). The first such pause makes the sandbox a session's
 * (hangar_session_opts.sandbox, named "e2b-" and the E2B id), with the
 * options its create had, so that a restore makes the same kind of
 * sandbox; the suspend checkpoints E2B's home directory, then parks the
 * sandbox (paused with its memory) where the library may, else destroys
 * it. connect resumes the session: the parked sandbox hot, else the
 * checkpoint restored into a new sandbox, which then serves the same E2B
 * id with new tokens. The session lives as long as the E2B sandbox: kill
 * deletes it with its checkpoints, and so does the sweep of a sandbox that
 * ended on its own.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b.h"

/* What a suspend keeps: the home of the user E2B's SDKs run as, where
 * their files and commands start. */
#define E2B_HOME "/home/user"
/* A restored sandbox's first lifetime, until connect sets the one asked. */
#define RESTORED_LIFETIME_S 60
/* How long a connect waits for another caller's resume of the same sandbox
 * (hangard answers a busy session at once elsewhere), and how often it
 * looks again for one made by another replica. */
#define RESUME_WAIT_MS  120000
#define RESUME_TICK_MS  250

int e2b_can_suspend(char *msg, size_t cap)
{
	hangar_buf v = HANGAR_BUF_INIT;
	int yes = hangar_ctx_get(&v, hangard->ctx, "HANGAR_CHECKPOINT_STORE") == 0 && v.ptr && v.ptr[0];

	hangar_buf_dispose(&v);
	if (!yes)
		snprintf(msg, cap, "memory: false suspends the sandbox into a checkpoint, and this server keeps none: "
				   "set HANGAR_CHECKPOINT_STORE (file://DIR or s3://BUCKET/PREFIX)");
	return yes;
}

static int64_t clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void session_name(char out[160], const char *e2b_id)
{
	snprintf(out, 160, "e2b-%.64s", e2b_id);
}

static int is_environment(const hangar_environment_info *e, void *payload)
{
	(void)e;
	*(int *)payload = 1;
	return 0;
}

/* Makes the running sandbox sb the session sid's, with the create options
 * of the E2B sandbox: 0, or a code (with why when it is ours). */
static int adopt(hangar_session **out, const char *sid, const char *e2b_id, hangar_sandbox *sb,
		 const struct e2b_record *rec, char *why, size_t cap)
{
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	char label[128], **env = NULL;
	const char *labels[2] = { label, NULL }, *tmpl;
	int found = 0, rc;

	if ((rc = hangar_sandbox_get_info(&info, sb)) < 0)
		return rc;
	tmpl = rec->template_id && rec->template_id[0] ? rec->template_id : info.template_id;
	if (tmpl && tmpl[0]) {
		rc = hangar_environment_get(hangard->ctx, tmpl, is_environment, &found);
		if (rc < 0 && rc != HANGAR_ENOTFOUND && rc != HANGAR_EINVAL)
			return rc;
		if (found)
			co.environment = tmpl;
		else if (strcmp(tmpl, "base") != 0)
			co.template_id = tmpl;
	}
	if (rec->env_sealed && e2b_env_open(rec->env_sealed, &env) < 0) {
		snprintf(why, cap, "the envVars of sandbox %s were sealed under another key: a restore could not "
				   "make its sandbox with them (set HANGAR_SECRET_KEY so that they outlive a restart)",
			 e2b_id);
		return HANGAR_ECONFIG;
	}
	co.provider = hangar_provider_name(hangar_sandbox_provider(sb));
	co.env = (const char *const *)env;
	co.network = rec->network < 0 ? HANGAR_NETWORK_DEFAULT : rec->network ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF;
	co.timeout_sec = RESTORED_LIFETIME_S;
	snprintf(label, sizeof(label), "e2b_sandbox=%s", e2b_id);
	so.id = sid;
	so.create = &co;
	so.workspace = E2B_HOME;
	so.labels = labels;
	so.sandbox = sb;
	rc = hangar_session_create(out, hangard->ctx, &so);
	env_free(env);
	/* Two pauses at once: the other made it. */
	if (rc == HANGAR_EEXISTS)
		rc = hangar_session_open(out, hangard->ctx, sid);
	return rc;
}

/* The record of e2b_id changed by fn (when it returns non-zero) under the
 * records' lock, and given in *after: 0, or HANGAR_EOS with why. */
static int update(const char *e2b_id, int (*fn)(struct e2b_record *rec, void *payload), void *payload,
		  struct e2b_record *after, char *why, size_t cap)
{
	struct e2b_record rec;
	int rc, wrote = 0;

	e2b_lock();
	rc = e2b_record_get(e2b_id, &rec);
	if (rc >= 0 && fn(&rec, payload)) {
		wrote = 1;
		if (e2b_record_put(e2b_id, &rec) < 0)
			rc = -1;
	}
	e2b_unlock();
	if (rc < 0) {
		snprintf(why, cap, "the E2B record of %s cannot be %s", e2b_id, wrote ? "written" : "read");
		e2b_record_dispose(&rec);
		return HANGAR_EOS;
	}
	if (after)
		*after = rec;
	else
		e2b_record_dispose(&rec);
	return 0;
}

static int set_session(struct e2b_record *rec, void *payload)
{
	if (rec->session_id && strcmp(rec->session_id, payload) == 0)
		return 0;
	free(rec->session_id);
	rec->session_id = strdup(payload);
	return 1;
}

static int set_suspended(struct e2b_record *rec, void *payload)
{
	free(rec->provider);
	rec->provider = strdup(payload);
	rec->paused = E2B_PAUSED_SESSION;
	rec->pause_at_us = 0;
	return 1;
}

/*
 * The sandboxes this process is suspending now. Between the suspend's
 * destroying the sandbox and its recording the pause, the sandbox is gone
 * while its record says running: e2b_resolve() waits that moment out for
 * the ids listed here.
 */
#define SUSPENDING_MAX 64
static pthread_mutex_t suspending_lock = PTHREAD_MUTEX_INITIALIZER;
static char suspending[SUSPENDING_MAX][65]; /* an id: 1 to 64 characters (e2b_id_ok) */

static int suspending_add(const char *e2b_id)
{
	pthread_mutex_lock(&suspending_lock);
	for (int i = 0; i < SUSPENDING_MAX; i++)
		if (!suspending[i][0]) {
			snprintf(suspending[i], sizeof(suspending[i]), "%s", e2b_id);
			pthread_mutex_unlock(&suspending_lock);
			return i;
		}
	pthread_mutex_unlock(&suspending_lock);
	return -1; /* more at once than listed: those are not waited for */
}

static void suspending_remove(int slot)
{
	if (slot < 0)
		return;
	pthread_mutex_lock(&suspending_lock);
	suspending[slot][0] = '\0';
	pthread_mutex_unlock(&suspending_lock);
	e2b_record_wake();
}

int e2b_suspending(const char *e2b_id)
{
	int yes = 0;

	pthread_mutex_lock(&suspending_lock);
	for (int i = 0; i < SUSPENDING_MAX && !yes; i++)
		yes = strcmp(suspending[i], e2b_id) == 0;
	pthread_mutex_unlock(&suspending_lock);
	return yes;
}

static int suspend_recorded(const char *e2b_id, hangar_sandbox *sb, hangar_cancel_fn cancel, void *cancel_payload,
			    char *why, size_t cap);

int e2b_session_suspend(const char *e2b_id, hangar_sandbox *sb, hangar_cancel_fn cancel, void *cancel_payload,
			char *why, size_t cap)
{
	int slot = suspending_add(e2b_id), rc = suspend_recorded(e2b_id, sb, cancel, cancel_payload, why, cap);

	suspending_remove(slot);
	return rc;
}

static int suspend_recorded(const char *e2b_id, hangar_sandbox *sb, hangar_cancel_fn cancel, void *cancel_payload,
			    char *why, size_t cap)
{
	hangar_suspend_opts opts = HANGAR_SUSPEND_OPTS_INIT;
	struct e2b_record rec;
	hangar_session *s = NULL;
	char sid[160];
	int rc, urc;

	why[0] = '\0';
	session_name(sid, e2b_id);
	/* The record names the session before the session exists: a kill
	 * meanwhile, or a crash, leaves none that nothing deletes. */
	if ((rc = update(e2b_id, set_session, sid, &rec, why, cap)) < 0)
		return rc;
	rc = hangar_session_open(&s, hangard->ctx, sid);
	if (rc == HANGAR_ENOTFOUND)
		rc = adopt(&s, sid, e2b_id, sb, &rec, why, cap);
	e2b_record_dispose(&rec);
	if (rc < 0)
		return rc;
	opts.cancel = cancel;
	opts.cancel_payload = cancel_payload;
	rc = hangar_session_suspend(s, &opts);
	hangar_session_unref(s);
	/* A suspend can fail and still leave the session suspended (its
	 * sandbox was found gone): recorded so, a connect restores it. */
	if (rc < 0 && !e2b_session_put_away(sid, NULL, 0))
		return rc;
	urc = update(e2b_id, set_suspended, (void *)hangar_provider_name(hangar_sandbox_provider(sb)), NULL, why, cap);
	return rc < 0 ? rc : urc;
}

/* set_suspended() for a record still naming session_id and running: a suspend's unwritten last step. */
struct settling {
	const char *session_id, *provider;
};

static int set_settled(struct e2b_record *rec, void *payload)
{
	const struct settling *x = payload;

	if (rec->paused != E2B_NOT_PAUSED || !rec->session_id || strcmp(rec->session_id, x->session_id) != 0)
		return 0;
	return set_suspended(rec, (void *)x->provider);
}

int e2b_session_settle(const char *e2b_id, const char *session_id)
{
	struct e2b_record after;
	char why[256], provider[64]; /* provider names are at most 32 characters */
	struct settling x = { session_id, provider };
	int rc;

	if (!e2b_session_put_away(session_id, provider, sizeof(provider)))
		return 0;
	rc = update(e2b_id, set_settled, &x, &after, why, sizeof(why));
	if (rc == 0) {
		rc = after.paused == E2B_PAUSED_SESSION;
		e2b_record_dispose(&after);
	}
	return rc;
}

struct resumed {
	const char *e2b_id, *sandbox_id;
};

/*
 * Once per resume, however many connects made it: the first to come back
 * records the sandbox; a new one (a restore) gets new tokens, so the old
 * sandbox's stop working at the edge.
 */
static int set_resumed(struct e2b_record *rec, void *payload)
{
	const struct resumed *x = payload;

	if (rec->paused != E2B_PAUSED_SESSION)
		return 0;
	if (strcmp(e2b_record_sandbox(rec, x->e2b_id), x->sandbox_id) != 0) {
		rec->generation++;
		free(rec->sandbox_id);
		rec->sandbox_id = strcmp(x->sandbox_id, x->e2b_id) == 0 ? NULL : strdup(x->sandbox_id);
	}
	rec->paused = E2B_NOT_PAUSED;
	return 1;
}

/*
 * Another caller holds the session (a connect at the same time): waits
 * until its record says it resumed, then takes that sandbox. 1 when the
 * caller should try the resume itself again (the other gave up, or still
 * holds it), 0 with *out and *rec, or a code.
 */
static int wait_other(const char *e2b_id, int64_t deadline_ms, hangar_sandbox **out, struct e2b_record *rec)
{
	int rc;

	e2b_record_wait(RESUME_TICK_MS);
	e2b_lock();
	rc = e2b_record_get(e2b_id, rec);
	e2b_unlock();
	if (rc != 0)
		return rc == 1 ? HANGAR_ENOTFOUND : HANGAR_EOS;
	if (rec->paused != E2B_PAUSED_SESSION) {
		rc = hangar_sandbox_attach(out, hangard->ctx, NULL, e2b_record_sandbox(rec, e2b_id));
		if (rc < 0)
			e2b_record_dispose(rec);
		return rc;
	}
	e2b_record_dispose(rec);
	return clock_ms() < deadline_ms ? 1 : HANGAR_EBUSY;
}

int e2b_session_resume(const char *e2b_id, hangar_sandbox **out, struct e2b_record *rec, char *why, size_t cap)
{
	struct resumed x = { e2b_id, NULL };
	hangar_session *s = NULL;
	int64_t deadline = clock_ms() + RESUME_WAIT_MS;
	char sid[160];
	int rc;

	why[0] = '\0';
	*out = NULL;
	session_name(sid, e2b_id);
	rc = hangar_session_open(&s, hangard->ctx, sid);
	while (rc == 0 && (rc = hangar_session_resume(s, out)) == HANGAR_EBUSY) {
		rc = wait_other(e2b_id, deadline, out, rec);
		if (rc == 0) {
			hangar_session_unref(s);
			return 0;
		}
		if (rc == 1)
			rc = 0;
		else if (rc == HANGAR_EBUSY)
			snprintf(why, cap, "sandbox %s is being paused or resumed by another caller", e2b_id);
		else if (rc == HANGAR_ENOTFOUND)
			snprintf(why, cap, "sandbox %s was killed while it resumed", e2b_id);
		else if (rc == HANGAR_EOS)
			snprintf(why, cap, "the E2B record of %s cannot be read", e2b_id);
	}
	hangar_session_unref(s);
	/* The session is the sandbox: without it, nothing is left to resume. */
	if (rc == HANGAR_ENOTFOUND)
		rc = HANGAR_EGONE;
	if (rc < 0)
		return rc;
	x.sandbox_id = hangar_sandbox_id(*out);
	rc = update(e2b_id, set_resumed, &x, rec, why, cap);
	if (rc < 0)
		*out = hangar_sandbox_unref(*out);
	return rc;
}

int e2b_session_delete(const char *session_id)
{
	hangar_session *s = NULL;
	int rc = hangar_session_open(&s, hangard->ctx, session_id);

	if (rc == 0)
		rc = hangar_session_delete(s);
	hangar_session_unref(s);
	return rc == HANGAR_ENOTFOUND ? 0 : rc;
}
