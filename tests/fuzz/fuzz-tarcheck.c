/*
 * The tar checker against any input, fed in pieces whose size comes from the
 * first byte. Whatever it accepts must come out as an archive the checker
 * accepts again, unchanged (its own output is its fixed point), with the same
 * counts; whatever it refuses is refused with HANGAR_EREFUSED.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/tarcheck.h"

struct acc {
	unsigned char *p;
	size_t n, cap;
};

static int sink(void *payload, const void *data, size_t len)
{
	struct acc *a = payload;

	if (a->n + len > a->cap) {
		size_t cap = (a->n + len) * 2;
		unsigned char *p = realloc(a->p, cap);

		if (!p)
			abort();
		a->p = p;
		a->cap = cap;
	}
	memcpy(a->p + a->n, data, len);
	a->n += len;
	return 0;
}

static int run(const unsigned char *in, size_t n, size_t step, struct acc *out, struct tarcheck_stats *st)
{
	/* Small caps so the fuzzer reaches them. */
	struct tarcheck_limits lim = { .max_members = 64, .max_name = 300, .max_total = 1 << 20,
				       .max_member = 1 << 19 };
	struct tarcheck *t;
	int rc = 0;

	if (tarcheck_new(&t, &lim, sink, out) < 0)
		abort();
	for (size_t off = 0; off < n && rc == 0; off += step)
		rc = tarcheck_feed(t, in + off, n - off < step ? n - off : step);
	if (rc == 0)
		rc = tarcheck_finish(t);
	*st = *tarcheck_stats(t);
	tarcheck_free(t);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acc first = { 0 }, second = { 0 };
	struct tarcheck_stats s1, s2;
	size_t step;
	int rc;

	if (size < 1)
		return 0;
	step = 1 + (size_t)data[0] * 7;
	rc = run(data + 1, size - 1, step, &first, &s1);
	if (rc == 0) {
		if (first.n < 1024 || first.n % 512)
			abort();
		if (run(first.p, first.n, 4096, &second, &s2) != 0 || second.n != first.n ||
		    memcmp(second.p, first.p, first.n) != 0 || memcmp(&s1, &s2, sizeof(s1)) != 0)
			abort();
	} else if (rc != HANGAR_EREFUSED) {
		abort();
	}
	free(first.p);
	free(second.p);
	return 0;
}
