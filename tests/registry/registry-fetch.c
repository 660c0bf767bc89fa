/*
 * registry-fetch: registry_fetch() from the command line, for the registry
 * suite's harness.
 *
 *   registry-fetch fetch REFERENCE DIR   prints the manifest digest
 *   registry-fetch normalize REFERENCE   prints the normalised reference
 *
 * Settings come from the HANGAR_* environment. On failure it prints
 * "error <code>: <message>" on standard error and exits 1. With
 * REGISTRY_FETCH_CANCEL_AFTER=N set, the progress callback cancels the
 * fetch once N bytes of blobs arrived. A progress call on any thread but
 * the caller's fails the run (exit 3): registry.h promises the caller's.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/registry.h"

struct seen {
	pthread_t caller;
	int off_thread;
	uint64_t bytes, cancel_after;
	uint32_t last_done, last_total;
};

static int progress(void *ud, const char *phase, const char *digest, uint64_t done, uint64_t total, uint32_t blobs_done,
		    uint32_t blobs_total)
{
	struct seen *s = ud;

	(void)digest;
	(void)total;
	if (!pthread_equal(pthread_self(), s->caller))
		s->off_thread = 1;
	if (!strcmp(phase, "blob"))
		s->bytes++;
	s->last_done = blobs_done;
	s->last_total = blobs_total;
	return s->cancel_after && !strcmp(phase, "blob") && done >= s->cancel_after;
}

static int fail(void)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "error %d: %s\n", e->code, e->message);
	return 1;
}

int main(int argc, char **argv)
{
	struct seen s = { 0 };
	struct registry_progress p = { progress, &s, NULL };
	hangar_ctx *ctx = NULL;
	char *out = NULL;
	const char *ca = getenv("REGISTRY_FETCH_CANCEL_AFTER");
	int rc;

	if (argc == 3 && !strcmp(argv[1], "normalize")) {
		if (registry_ref_normalize(argv[2], &out) != 0)
			return fail();
		printf("%s\n", out);
		free(out);
		return 0;
	}
	if (argc != 4 || strcmp(argv[1], "fetch")) {
		fprintf(stderr, "usage: registry-fetch fetch REFERENCE DIR | normalize REFERENCE\n");
		return 2;
	}
	s.caller = pthread_self();
	if (ca)
		s.cancel_after = strtoull(ca, NULL, 10);
	if (hangar_ctx_new(&ctx, 0) != 0)
		return fail();
	rc = registry_fetch(ctx, argv[2], argv[3], &p, &out);
	if (rc != 0) {
		rc = fail();
	} else {
		printf("%s\n", out);
		fprintf(stderr, "blobs %" PRIu32 "/%" PRIu32 ", %" PRIu64 " progress calls\n", s.last_done, s.last_total,
			s.bytes);
	}
	free(out);
	hangar_ctx_unref(ctx);
	if (s.off_thread) {
		fprintf(stderr, "a progress callback ran off the calling thread\n");
		return 3;
	}
	return rc;
}
