/*
 * A session's lease: one caller at a time changes a session (suspend,
 * resume, fork, archive, delete), across threads, processes and machines
 * that share the state store.
 *
 * A holder renews its lease from a thread of its own while it holds it, so
 * the lease runs out LEASE_TTL_US after its holder stopped, however long
 * the work under it takes. Another caller waits for it only as long as
 * HANGAR_SESSION_BUSY_WAIT_SECONDS allows, then fails with HANGAR_EBUSY
 * and the time the lease still runs as retry_after_s.
 *
 * A holder names itself with hproc_identity(): a caller on the same
 * machine and in the same pid namespace can so tell at once that the holder
 * is no longer running (killed with SIGKILL, say) and take the lease over
 * without waiting it out; a pid used again by another process has another
 * start time. Holders elsewhere are waited out: at most LEASE_TTL_US.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sess.h"

/* ---- renewing ------------------------------------------------------------------ */

/*
 * The renewing thread runs detached, on a state of its own: the holder may
 * give the lease up while it holds the store's lock (inside a listing, say),
 * where waiting for the thread, itself waiting for that lock, would never
 * end. A renewal only extends a lease its holder still holds, so one that
 * lands after the lease was given up changes nothing.
 */
struct renewer {
	hangar_ctx *ctx;                /* a reference */
	char *id;
	char holder[96];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
};

static void renewer_free(struct renewer *r)
{
	hangar_ctx_unref(r->ctx);
	free(r->id);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

static void *renewer(void *arg)
{
	struct renewer *r = arg;
	struct timespec at;

	pthread_mutex_lock(&r->mu);
	while (!r->stop) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += LEASE_RENEW_MS / 1000;
		if (pthread_cond_timedwait(&r->cv, &r->mu, &at) != ETIMEDOUT || r->stop)
			continue;
		pthread_mutex_unlock(&r->mu);
		/* This thread's own last error: nobody reads it. */
		store_session_lease_renew(r->ctx, r->id, r->holder, LEASE_TTL_US);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	renewer_free(r);
	return NULL;
}

static int start_renewer(struct sess_lease *l)
{
	struct renewer *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t th;
	int rc;

	if (!r || !(r->id = strdup(l->id))) {
		free(r);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	r->ctx = hangar_ctx_ref(l->ctx);
	snprintf(r->holder, sizeof(r->holder), "%s", l->holder);
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &ta, renewer, r);
	pthread_attr_destroy(&ta);
	if (rc != 0) {
		renewer_free(r);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot start the thread that renews a session's lease");
	}
	l->renewer = r;
	return 0;
}

/* Tells the thread to end; it frees its state itself. */
static void stop_renewer(struct sess_lease *l)
{
	struct renewer *r = l->renewer;

	if (!r)
		return;
	l->renewer = NULL;
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* ---- taking and giving --------------------------------------------------------- */

/* Sleeps ms milliseconds (a poll's pause, not a synchronisation). */
static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int sess_lease_take(struct sess_lease *l, hangar_ctx *ctx, const char *id, int wait)
{
	int64_t wait_ms = wait ? hctx_int(ctx, HS_SESSION_BUSY_WAIT) * 1000 : 0;
	int64_t deadline = clock_mono_ms() + wait_ms, expires_us = 0;
	char *other = NULL, *dead = NULL;
	long pause = 10;
	int rc;

	memset(l, 0, sizeof(*l));
	l->ctx = ctx;
	l->id = id;
	hproc_identity(l->holder, sizeof(l->holder));
	for (;;) {
		free(other);
		other = NULL;
		rc = store_session_lease(ctx, id, l->holder, LEASE_TTL_US, dead, &other, &expires_us);
		free(dead);
		dead = NULL;
		if (rc == 1)
			break;
		if (rc < 0)
			goto out;
		if (hproc_dead(other)) {
			hangar_sys_log(ctx, HANGAR_LOG_INFO, "session %s: its lease holder %s is no longer running: taken over",
				       id, other);
			dead = other;
			other = NULL;
			continue;
		}
		if (!wait) {
			rc = 0; /* l->held stays 0 */
			goto out;
		}
		if (clock_mono_ms() >= deadline) {
			int64_t left_s = (expires_us - clock_wall_us() + 999999) / 1000000;

			rc = herr(HANGAR_EBUSY, HANGAR_ERRCAT_ARGUMENT,
				  "session %s is being changed by another caller (its lease runs %lld s more; "
				  "waited HANGAR_SESSION_BUSY_WAIT_SECONDS)", id, (long long)(left_s > 0 ? left_s : 0));
			herr_retry_after(left_s > 0 ? left_s : 1);
			goto out;
		}
		/* The holder gives it up with one UPDATE: poll, backing off to 200 ms. */
		pause_ms(pause);
		if (pause < 200)
			pause *= 2;
	}
	if ((rc = start_renewer(l)) != 0) {
		store_session_unlease(ctx, id, l->holder);
		goto out;
	}
	l->held = 1;
	rc = 0;
out:
	free(other);
	free(dead);
	return rc;
}

int sess_save_give(struct sess_lease *l, struct store_session *row)
{
	int rc;

	if (!l->held)
		return sess_save(l->ctx, row);
	row->updated_us = clock_wall_us();
	stop_renewer(l);
	rc = store_session_update_unlease(l->ctx, row, l->holder);
	if (rc == 0)
		l->held = 0;
	return rc;
}

void sess_lease_give(struct sess_lease *l)
{
	hangar_sys_saved_error saved;

	if (!l->held)
		return;
	stop_renewer(l);
	hangar_sys_error_save(&saved);
	store_session_unlease(l->ctx, l->id, l->holder);
	hangar_sys_error_restore(&saved);
	l->held = 0;
}
