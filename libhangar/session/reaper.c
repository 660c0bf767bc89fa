/*
 * The reaper under a store lease (hangar_ctx_reap): of several processes
 * sharing a store, the one holding the lease reaps, so a pass is neither
 * done N times over nor left undone when its process dies. The lease is a
 * row with an expiry (store/lease.c), not a session or advisory lock: a
 * transaction-pooling proxy hands each statement to any server connection,
 * which would make a session lock belong to whoever ran last.
 */
#include <string.h>

#include "core/providers.h"
#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

#define LEASE_NAME_MAX 64
#define LEASE_SECONDS_MAX 86400

static int check_lease_name(const char *lease)
{
	size_t n;

	HCHECK_ARG(lease, "lease is NULL");
	n = strlen(lease);
	if (n == 0 || n > LEASE_NAME_MAX || strspn(lease, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: a lease's name is 1 to %d characters of A-Z a-z 0-9 . _ -", LEASE_NAME_MAX);
	return 0;
}

int hangar_ctx_reap(hangar_reap_result *out, hangar_ctx *ctx, const char *lease, uint32_t lease_seconds)
{
	hangar_reap_result r = HANGAR_REAP_RESULT_INIT;
	int64_t ttl_us, now;
	int held = 0, rc;

	HCHECK_ARG(out, "out is NULL");
	if ((rc = hversioned_check(out, &hv_reap_result, "out")) != 0)
		return rc;
	HCHECK_ARG(ctx, "ctx is NULL");
	if ((rc = check_lease_name(lease)) != 0)
		return rc;
	if (lease_seconds < 1 || lease_seconds > LEASE_SECONDS_MAX)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: lease_seconds is 1 to %d",
			    LEASE_SECONDS_MAX);
	ttl_us = (int64_t)lease_seconds * 1000000;

	now = clock_wall_us();
	rc = store_lease_acquire(ctx, lease, hctx_instance(ctx), now, ttl_us, &held);
	if (rc == 0 && held) {
		uint32_t forgotten = 0, reaped = 0;

		r.leader = 1;
		r.lease_expires_us = now + ttl_us;
		hangar_sys_log(ctx, HANGAR_LOG_DEBUG, "reaper: %s holds lease %s", hctx_instance(ctx), lease);
		rc = sandbox_prune(ctx, &forgotten);
		r.records_forgotten = forgotten;
		if (rc == 0) {
			rc = hangar_session_reap(ctx, &reaped);
			r.sessions_reaped = reaped;
		}
		if (rc == 0) {
			/* A long pass must not let the lease run out under it. */
			now = clock_wall_us();
			rc = store_lease_acquire(ctx, lease, hctx_instance(ctx), now, ttl_us, &held);
			if (rc == 0 && held)
				r.lease_expires_us = now + ttl_us;
			else if (rc == 0)
				r.leader = 0;   /* the pass outlived the lease and another process took it */
		}
	}
	hresult_store(out, &r, sizeof(r));
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_ctx_reap_release(hangar_ctx *ctx, const char *lease, int *released)
{
	int done = 0, rc;

	if (released)
		*released = 0;
	HCHECK_ARG(ctx, "ctx is NULL");
	if ((rc = check_lease_name(lease)) != 0)
		return rc;
	rc = store_lease_release(ctx, lease, hctx_instance(ctx), &done);
	if (rc)
		return rc;
	if (released)
		*released = done;
	herr_clear();
	return 0;
}
