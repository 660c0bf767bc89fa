/*
 * Opening sealed checkpoint streams. The first byte chooses what happens:
 *  - even: the rest is fed to a reader as sealed bytes, in pieces whose
 *    sizes come from the input; it must be refused (a forgery would need
 *    the key), and nothing may be handed on;
 *  - odd: the rest is sealed, one byte of the sealed stream is altered (or
 *    the stream cut) at a place taken from the input, and the result opened:
 *    an untouched stream opens to exactly the input; a touched one is
 *    refused, and what was handed on before is a prefix of the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/seal.h"

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

static int feed_all(const struct seal_keyring *kr, const unsigned char *s, size_t n, size_t step, struct acc *out)
{
	struct seal_reader *r;
	int rc = 0;

	if (seal_reader_new(&r, kr, "cp", "session", sink, out) < 0)
		abort();
	for (size_t off = 0; off < n && rc == 0; off += step)
		rc = seal_reader_feed(r, s + off, n - off < step ? n - off : step);
	if (rc == 0)
		rc = seal_reader_finish(r);
	seal_reader_free(r);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seal_keyring kr;
	struct acc sealed = { 0 }, opened = { 0 };
	size_t step;
	int rc;

	if (!kr.n && seal_keyring_add(&kr, "fuzz key", 8) < 0)
		abort();
	if (size < 2)
		return 0;
	step = 1 + ((size_t)data[1] << 4);
	if (!(data[0] & 1)) {
		rc = feed_all(&kr, data + 2, size - 2, step, &opened);
		if (rc != HANGAR_EREFUSED || opened.n)
			abort();
	} else {
		struct seal_writer *w;
		const unsigned char *plain = data + 2;
		size_t n = size - 2, at;
		int cut = data[0] & 2;

		if (seal_writer_new(&w, &kr, "cp", "session", sink, &sealed) < 0 || seal_writer_write(w, plain, n) < 0 ||
		    seal_writer_finish(w) < 0)
			abort();
		seal_writer_free(w);
		at = ((size_t)data[1] * 2654435761u + n) % (sealed.n + 1);
		if (at < sealed.n && !cut)
			sealed.p[at] ^= (unsigned char)(data[0] | 1);
		rc = feed_all(&kr, sealed.p, cut ? at : sealed.n, step, &opened);
		if (at == sealed.n) {
			if (rc != 0 || opened.n != n || (n && memcmp(opened.p, plain, n)))
				abort();
		} else if (rc != HANGAR_EREFUSED || opened.n > n || (opened.n && memcmp(opened.p, plain, opened.n))) {
			abort();
		}
	}
	free(sealed.p);
	free(opened.p);
	return 0;
}
