/*
 * Forks for best-of-N: N sessions from one session's current state, by the
 * cheapest path the provider has: its own fork, a snapshot and N creates
 * from it, or a checkpoint restored into N new sandboxes. The creates and
 * restores of the last two run in parallel, one thread per fork.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/providers.h"
#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "sess.h"

struct child {
	int error;
	char message[1024];
	hangar_sandbox *sb;
};

struct fork_job {
	hangar_ctx *ctx;
	const struct store_session *parent;
	const char *provider, *template_id; /* snapshot: where and from what */
	const char *checkpoint_id;          /* checkpoint: what to restore */
	struct child *kids;
	uint32_t count;
	pthread_t *threads;

	/* The caller's cancel, asked on the calling thread only; the workers see stop. */
	hangar_cancel_fn cancel;
	void *cancel_payload;
	atomic_int stop;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	uint32_t running;                   /* workers not yet finished, under lock */
};

struct fork_arg {
	struct fork_job *job;
	uint32_t index;
};

static void child_failed(struct child *c, int rc)
{
	c->error = rc;
	snprintf(c->message, sizeof(c->message), "%s", hangar_error_last()->message);
}

/* Asks the caller's cancel (calling thread only); once it said yes, the answer stays yes. */
static int job_cancelled(struct fork_job *j)
{
	if (!atomic_load(&j->stop) && j->cancel && j->cancel(j->cancel_payload))
		atomic_store(&j->stop, 1);
	return atomic_load(&j->stop);
}

/* A worker's view of the cancel: the flag the calling thread sets. */
static int worker_stopped(void *payload)
{
	struct fork_job *j = payload;

	return atomic_load(&j->stop);
}

static void fork_one_run(struct fork_job *j, struct child *c)
{
	int rc;

	if (atomic_load(&j->stop)) {
		c->error = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the fork was cancelled");
		return;
	}
	rc = sess_create_sandbox(j->ctx, j->parent, j->provider, j->template_id, &c->sb);
	if (rc == 0 && atomic_load(&j->stop))
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the fork was cancelled");
	else if (rc == 0 && j->checkpoint_id)
		rc = sess_restore(j->ctx, j->parent, j->checkpoint_id, c->sb, worker_stopped, j);
	if (rc != 0 && c->sb) {
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		hangar_sandbox_kill(c->sb);
		hangar_sys_error_restore(&saved);
		c->sb = hangar_sandbox_unref(c->sb);
	}
	if (rc)
		child_failed(c, rc);
}

static void *fork_one(void *p)
{
	struct fork_arg *a = p;
	struct fork_job *j = a->job;

	fork_one_run(j, &j->kids[a->index]);
	pthread_mutex_lock(&j->lock);
	j->running--;
	pthread_cond_broadcast(&j->changed);
	pthread_mutex_unlock(&j->lock);
	return NULL;
}

/* Waits for the workers, asking the caller's cancel every 20 ms meanwhile. */
static void wait_workers(struct fork_job *j)
{
	pthread_mutex_lock(&j->lock);
	while (j->running > 0) {
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += 20 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&j->changed, &j->lock, &until);
		if (j->running > 0 && j->cancel) {
			pthread_mutex_unlock(&j->lock);
			job_cancelled(j);
			pthread_mutex_lock(&j->lock);
		}
	}
	pthread_mutex_unlock(&j->lock);
}

/* Runs fork_one for every child, in parallel where threads can be had. */
static void fork_all(struct fork_job *j)
{
	struct fork_arg *args = calloc(j->count, sizeof(*args));
	int *started = calloc(j->count, sizeof(*started));
	pthread_condattr_t attr;

	pthread_mutex_init(&j->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&j->changed, &attr);
	pthread_condattr_destroy(&attr);
	j->threads = calloc(j->count, sizeof(*j->threads));
	for (uint32_t i = 0; i < j->count; i++) {
		struct fork_arg one = { j, i };

		if (args && started && j->threads) {
			args[i] = one;
			pthread_mutex_lock(&j->lock);
			j->running++;
			pthread_mutex_unlock(&j->lock);
			started[i] = pthread_create(&j->threads[i], NULL, fork_one, &args[i]) == 0;
			if (!started[i]) {
				pthread_mutex_lock(&j->lock);
				j->running--;
				pthread_mutex_unlock(&j->lock);
			}
		}
		if (!started || !started[i]) {
			job_cancelled(j);
			fork_one_run(j, &j->kids[i]);
		}
	}
	wait_workers(j);
	for (uint32_t i = 0; started && i < j->count; i++)
		if (started[i])
			pthread_join(j->threads[i], NULL);
	pthread_cond_destroy(&j->changed);
	pthread_mutex_destroy(&j->lock);
	free(j->threads);
	free(started);
	free(args);
}

static void native_fn(const hangar_fork_result *r, void *payload)
{
	struct fork_job *j = payload;
	struct child *c;

	if (r->index >= j->count)
		return;
	c = &j->kids[r->index];
	if (r->error) {
		c->error = r->error;
		snprintf(c->message, sizeof(c->message), "%s", r->message);
	} else {
		c->sb = hangar_sandbox_ref(r->sandbox);
	}
}

/* The record of one fork, holding sb: the parent's description, its own id and sealed options. */
static int child_record(hangar_ctx *ctx, const struct store_session *parent, const char *group, const char *checkpoint_id,
			hangar_sandbox *sb, struct hangar_session **out)
{
	struct store_session row = { 0 };
	char id[32], *spec = NULL;
	int rc;

	*out = NULL;
	sess_new_id(id, "ses-");
	if (sess_set(&row.id, id) || sess_set(&row.environment, parent->environment) ||
	    sess_set(&row.workspace, parent->workspace) || sess_set(&row.user, parent->user) ||
	    sess_set(&row.labels_json, parent->labels_json) || sess_set(&row.parent_id, parent->id) ||
	    sess_set(&row.fork_group, group) || sess_set(&row.provider, hangar_provider_name(hangar_sandbox_provider(sb))) ||
	    sess_set(&row.sandbox_id, hangar_sandbox_id(sb)) || sess_set(&row.checkpoint_id, checkpoint_id) ||
	    sess_set(&row.parked_checkpoint_id, "") || sess_set(&row.last_reason, "") ||
	    sess_set(&row.suspend_reason, "")) {
		rc = HANGAR_ENOMEM;
		goto out;
	}
	/* The options are sealed to a session's id: open the parent's, seal them to the fork's. */
	if ((rc = sess_spec_open(ctx, parent->id, parent->spec, parent->spec_len, &spec)) != 0 ||
	    (rc = sess_spec_seal(ctx, row.id, spec, &row.spec, &row.spec_len)) != 0)
		goto out;
	row.state = HANGAR_SESSION_ACTIVE;
	row.flags = parent->flags;
	row.created_us = row.updated_us = clock_wall_us();
	if ((rc = store_session_put(ctx, &row)) != 0)
		goto out;
	sess_event(ctx, "session.forked", &row, NULL);
	rc = sess_handle_new(out, ctx, &row);
out:
	if (spec) {
		sodium_memzero(spec, strlen(spec));
		free(spec);
	}
	store_session_free(&row);
	return rc;
}

int hangar_session_fork_opts_init(hangar_session_fork_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_session_fork_opts);
}

/* After a cancel: every sandbox made for the fork destroyed, the checkpoint taken for it deleted. */
static int undo_fork(struct fork_job *j, hangar_checkpoint *cp, const char *session_id)
{
	for (uint32_t i = 0; i < j->count; i++)
		if (j->kids[i].sb) {
			hangar_sandbox_kill(j->kids[i].sb);
			j->kids[i].sb = hangar_sandbox_unref(j->kids[i].sb);
		}
	if (cp && hangar_checkpoint_delete(cp) != 0)
		hangar_sys_log(j->ctx, HANGAR_LOG_WARNING, "session %s: the cancelled fork's checkpoint %s stays: %s", session_id,
			       hangar_checkpoint_id(cp), hangar_error_last()->message);
	return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "session %s: the fork was cancelled; nothing was kept",
		    session_id);
}

/*
 * The fork's snapshot, once its children are made (or none could be), is
 * released: it goes with the last of them, at once when there are none, so
 * a fork leaves no snapshot behind. Released only now, as until the
 * children hold it nothing would keep it from going. The fork's own result
 * stands whatever this does.
 */
static void release_snapshot(hangar_ctx *ctx, const char *provider, const char *snapshot_id, const char *session_id)
{
	hangar_sys_saved_error saved;

	int rc;

	hangar_sys_error_save(&saved);
	rc = hangar_snapshot_release(ctx, provider, snapshot_id);
	if (rc != 0)
		hangar_sys_log(ctx, rc == HANGAR_EUNSUPPORTED ? HANGAR_LOG_DEBUG : HANGAR_LOG_WARNING,
			       "session %s: the fork's snapshot %s stays: %s", session_id, snapshot_id,
			       hangar_error_last()->message);
	hangar_sys_error_restore(&saved);
}

int hangar_session_fork(hangar_session *s, uint32_t count, hangar_session_fork_fn fn, void *payload)
{
	return hangar_session_fork_ext(s, count, NULL, fn, payload);
}

int hangar_session_fork_ext(hangar_session *s, uint32_t count, const hangar_session_fork_opts *opts,
			    hangar_session_fork_fn fn, void *payload)
{
	hangar_session_fork_opts o;
	struct fork_job job = { 0 };
	struct store_session row = { 0 };
	struct sess_lease l = { 0 };
	hangar_checkpoint *cp = NULL;
	hangar_buf snap = HANGAR_BUF_INIT;
	hangar_sandbox *sb = NULL;
	char group[32];
	const char *base;
	uint64_t caps;
	int rc, method;

	HCHECK_ARG(s, "s is NULL");
	HCHECK_ARG(count >= 1 && count <= 100, "count must be 1 to 100");
	HCHECK_ARG(fn, "fn is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_session_fork_opts, "opts")) != 0)
		return rc;
	job.cancel = o.cancel;
	job.cancel_payload = o.cancel_payload;
	/* Its current state: a suspended or parked session is brought back first. */
	if ((rc = hangar_session_sandbox(&sb, s)) != 0)
		return rc;
	if ((rc = sess_lease_take(&l, s->ctx, s->id, 1)) != 0)
		goto out;
	if ((rc = store_session_get(s->ctx, s->id, &row)) != 0)
		goto out;
	if (row.state != HANGAR_SESSION_ACTIVE || strcmp(row.sandbox_id, hangar_sandbox_id(sb)) != 0) {
		rc = herr(HANGAR_EGONE, HANGAR_ERRCAT_ARGUMENT, "session %s changed while it was being forked", s->id);
		goto out;
	}
	if (!(job.kids = calloc(count, sizeof(*job.kids)))) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	job.ctx = s->ctx;
	job.parent = &row;
	job.count = count;
	sess_new_id(group, "fork-");
	caps = hangar_provider_capabilities(hangar_sandbox_provider(sb));
	base = row.checkpoint_id;
	if (caps & HANGAR_CAP_FORK) {
		method = HANGAR_FORK_NATIVE;
		if (job_cancelled(&job)) {
			rc = undo_fork(&job, NULL, s->id);
			goto out;
		}
		if ((rc = hangar_sandbox_fork(sb, count, native_fn, &job)) != 0)
			goto out;
	} else if (caps & HANGAR_CAP_SNAPSHOT) {
		method = HANGAR_FORK_SNAPSHOT;
		if (job_cancelled(&job)) {
			rc = undo_fork(&job, NULL, s->id);
			goto out;
		}
		/* Held by this process until released below: a fork killed before then leaves no snapshot. */
		if ((rc = sandbox_snapshot_held(&snap, sb, group)) != 0)
			goto out;
		job.provider = row.provider;
		job.template_id = snap.ptr;
		fork_all(&job);
	} else {
		hangar_checkpoint_opts co = HANGAR_CHECKPOINT_OPTS_INIT;
		char label[64];
		const char *labels[] = { label, NULL };

		method = HANGAR_FORK_CHECKPOINT;
		snprintf(label, sizeof(label), "fork=%s", group);
		co.workspace = row.workspace;
		co.session_id = row.id;
		co.parent_id = *row.checkpoint_id ? row.checkpoint_id : NULL;
		co.user = *row.user ? row.user : NULL;
		co.labels = labels;
		co.cancel = o.cancel;
		co.cancel_payload = o.cancel_payload;
		if ((rc = hangar_checkpoint_create(&cp, sb, &co)) != 0)
			goto out;
		job.checkpoint_id = hangar_checkpoint_id(cp);
		base = job.checkpoint_id;
		fork_all(&job);
	}
	if (job_cancelled(&job)) {
		rc = undo_fork(&job, cp, s->id);
		goto out;
	}
	sess_lease_give(&l);
	hangar_sys_log(s->ctx, HANGAR_LOG_INFO, "session %s: forked %u by %s into group %s", s->id, count,
	     method == HANGAR_FORK_NATIVE ? "native fork" : method == HANGAR_FORK_SNAPSHOT ? "snapshot" : "checkpoint",
	     group);
	for (uint32_t i = 0; i < count; i++) {
		struct child *c = &job.kids[i];
		hangar_session_fork_result r = { HANGAR_SESSION_FORK_RESULT_VERSION, sizeof(r), i, 0, method, 0, NULL, "" };
		struct hangar_session *child = NULL;

		if (!c->error && c->sb) {
			int crc = child_record(s->ctx, &row, group, base, c->sb, &child);

			if (crc) {
				child_failed(c, crc);
				{
					hangar_sys_saved_error saved;

					hangar_sys_error_save(&saved);
					hangar_sandbox_kill(c->sb);
					hangar_sys_error_restore(&saved);
				}
			}
		} else if (!c->error) {
			c->error = HANGAR_EPROTOCOL;
			snprintf(c->message, sizeof(c->message), "the provider reported nothing for this fork");
		}
		r.error = c->error;
		r.message = c->error ? c->message : "";
		r.session = child;
		fn(&r, payload);
		hangar_session_unref(child);
	}
	rc = 0;
out:
	sess_lease_give(&l);
	for (uint32_t i = 0; job.kids && i < count; i++)
		hangar_sandbox_unref(job.kids[i].sb);
	free(job.kids);
	if (snap.ptr)
		release_snapshot(s->ctx, row.provider, snap.ptr, s->id);
	hangar_buf_dispose(&snap);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_unref(sb);
	store_session_free(&row);
	if (rc == 0)
		herr_clear();
	return rc;
}
