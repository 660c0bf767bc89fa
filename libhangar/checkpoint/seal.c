/* Sealing and opening checkpoint streams; the layout is described in seal.h. */
#include "seal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABYTES crypto_secretstream_xchacha20poly1305_ABYTES
#define HEADERBYTES crypto_secretstream_xchacha20poly1305_HEADERBYTES
#define TAG_MESSAGE crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
#define TAG_FINAL crypto_secretstream_xchacha20poly1305_TAG_FINAL
#define MAGIC "HNGCKPT\x01"
#define MAGICBYTES 8
#define MAX_ID 255
#define PREFIXBYTES (MAGICBYTES + HEADERBYTES)

/* The purpose string of the key derivation; a new layout gets a new one. */
static const char kdf_context[] = "hangar checkpoint sealing key v1";

int seal_keyring_add(struct seal_keyring *kr, const char *secret, size_t len)
{
	if (kr->n >= SEAL_MAX_KEYS)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_CONFIG, "too many secret keys: at most %d previous keys",
			    SEAL_MAX_KEYS - 1);
	if (hkdf_secret(kr->key[kr->n], SEAL_KEYBYTES, secret, len, kdf_context) < 0)
		return hangar_error_last()->code;
	kr->n++;
	return 0;
}

void seal_keyring_wipe(struct seal_keyring *kr)
{
	sodium_memzero(kr, sizeof(*kr));
}

/* The associated data of the binding chunk: magic, checkpoint id, session id. */
static int binding(unsigned char *ad, size_t *adlen, const char *checkpoint_id, const char *session_id)
{
	size_t c = checkpoint_id ? strlen(checkpoint_id) : 0, s = session_id ? strlen(session_id) : 0;

	if (!c || c > MAX_ID || s > MAX_ID)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: a checkpoint id (1 to %d bytes) and a session id (at most %d)", MAX_ID,
			    MAX_ID);
	memcpy(ad, MAGIC, MAGICBYTES);
	memcpy(ad + MAGICBYTES, checkpoint_id, c + 1);
	memcpy(ad + MAGICBYTES + c + 1, s ? session_id : "", s + 1);
	*adlen = MAGICBYTES + c + 1 + s + 1;
	return 0;
}

/* ---- writer --------------------------------------------------------------- */

struct seal_writer {
	crypto_secretstream_xchacha20poly1305_state st;
	seal_sink sink;
	void *payload;
	size_t fill;
	int failed, finished;
	unsigned char plain[SEAL_CHUNK];
	unsigned char sealed[SEAL_CHUNK + ABYTES];
};

int seal_writer_new(struct seal_writer **out, const struct seal_keyring *kr, const char *checkpoint_id,
		    const char *session_id, seal_sink sink, void *payload)
{
	unsigned char ad[MAGICBYTES + 2 * (MAX_ID + 1)], prefix[PREFIXBYTES + ABYTES];
	size_t adlen;
	struct seal_writer *w;
	int rc;

	*out = NULL;
	if (!kr || kr->n < 1 || !sink)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: no key or no sink");
	if ((rc = binding(ad, &adlen, checkpoint_id, session_id)) < 0)
		return rc;
	if (sodium_init() < 0)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "libsodium cannot start");
	w = calloc(1, sizeof(*w));
	if (!w)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	w->sink = sink;
	w->payload = payload;
	memcpy(prefix, MAGIC, MAGICBYTES);
	crypto_secretstream_xchacha20poly1305_init_push(&w->st, prefix + MAGICBYTES, kr->key[0]);
	crypto_secretstream_xchacha20poly1305_push(&w->st, prefix + PREFIXBYTES, NULL, NULL, 0, ad, adlen,
						   TAG_MESSAGE);
	if ((rc = sink(payload, prefix, sizeof(prefix))) < 0) {
		seal_writer_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

static int push_chunk(struct seal_writer *w, unsigned char tag)
{
	int rc;

	crypto_secretstream_xchacha20poly1305_push(&w->st, w->sealed, NULL, w->plain, w->fill, NULL, 0, tag);
	rc = w->sink(w->payload, w->sealed, w->fill + ABYTES);
	w->fill = 0;
	if (rc < 0)
		w->failed = 1;
	return rc;
}

int seal_writer_write(struct seal_writer *w, const void *data, size_t len)
{
	const unsigned char *p = data;

	if (w->failed || w->finished)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: the sealed stream has already %s", w->failed ? "failed" : "ended");
	while (len) {
		size_t n;

		/* A full chunk goes out only once more data follows: the final chunk may be full. */
		if (w->fill == SEAL_CHUNK) {
			int rc = push_chunk(w, TAG_MESSAGE);

			if (rc < 0)
				return rc;
		}
		n = SEAL_CHUNK - w->fill < len ? SEAL_CHUNK - w->fill : len;
		memcpy(w->plain + w->fill, p, n);
		w->fill += n;
		p += n;
		len -= n;
	}
	return 0;
}

int seal_writer_finish(struct seal_writer *w)
{
	if (w->failed || w->finished)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: the sealed stream has already %s", w->failed ? "failed" : "ended");
	w->finished = 1;
	return push_chunk(w, TAG_FINAL);
}

void seal_writer_free(struct seal_writer *w)
{
	if (!w)
		return;
	sodium_memzero(w, sizeof(*w)); /* the plaintext and the stream state */
	free(w);
}

/* ---- reader --------------------------------------------------------------- */

enum { R_PREFIX, R_DATA, R_DONE, R_FAILED };

struct seal_reader {
	crypto_secretstream_xchacha20poly1305_state st;
	struct seal_keyring kr;
	seal_sink sink;
	void *payload;
	int state;
	unsigned long long chunk;          /* data chunks opened so far */
	size_t fill;
	unsigned char ad[MAGICBYTES + 2 * (MAX_ID + 1)];
	size_t adlen;
	char id[MAX_ID + 1];
	unsigned char header[HEADERBYTES];
	unsigned char in[SEAL_CHUNK + ABYTES];
	unsigned char plain[SEAL_CHUNK];
};

int seal_reader_new(struct seal_reader **out, const struct seal_keyring *kr, const char *checkpoint_id,
		    const char *session_id, seal_sink sink, void *payload)
{
	struct seal_reader *r;
	int rc;

	*out = NULL;
	if (!kr || kr->n < 1 || !sink)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: no key or no sink");
	if (sodium_init() < 0)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "libsodium cannot start");
	r = calloc(1, sizeof(*r));
	if (!r)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((rc = binding(r->ad, &r->adlen, checkpoint_id, session_id)) < 0) {
		free(r);
		return rc;
	}
	memcpy(r->id, checkpoint_id, strlen(checkpoint_id) + 1);
	memcpy(&r->kr, kr, sizeof(*kr));
	r->sink = sink;
	r->payload = payload;
	*out = r;
	return 0;
}

static int refuse(struct seal_reader *r, const char *why)
{
	r->state = R_FAILED;
	r->fill = 0;
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "checkpoint %s refused: %s", r->id, why);
}

/* The binding chunk authenticates under one of the keys, or the stream is not ours. */
static int open_binding(struct seal_reader *r)
{
	unsigned char tag, none[1];

	if (memcmp(r->in, MAGIC, MAGICBYTES) != 0)
		return refuse(r, "not a sealed checkpoint stream (or an unknown version)");
	memcpy(r->header, r->in + MAGICBYTES, HEADERBYTES);
	for (int i = 0; i < r->kr.n; i++) {
		if (crypto_secretstream_xchacha20poly1305_init_pull(&r->st, r->header, r->kr.key[i]) != 0)
			continue;
		if (crypto_secretstream_xchacha20poly1305_pull(&r->st, none, NULL, &tag, r->in + PREFIXBYTES, ABYTES,
							       r->ad, r->adlen) == 0 &&
		    tag == TAG_MESSAGE) {
			sodium_memzero(&r->kr, sizeof(r->kr));
			r->state = R_DATA;
			return 0;
		}
	}
	return refuse(r, "it does not open with the secret key (or any previous key), or it was sealed for "
			 "another checkpoint or session, or it was altered");
}

static int open_chunk(struct seal_reader *r, int at_end)
{
	unsigned long long plen;
	unsigned char tag;
	char why[96];

	if (crypto_secretstream_xchacha20poly1305_pull(&r->st, r->plain, &plen, &tag, r->in, r->fill, NULL, 0) != 0) {
		snprintf(why, sizeof(why), "%s at chunk %llu", at_end ? "truncated or altered" : "altered", r->chunk);
		return refuse(r, why);
	}
	if (tag != TAG_FINAL && (tag != TAG_MESSAGE || at_end))
		return refuse(r, tag == TAG_MESSAGE ? "truncated: the stream ends before its final chunk"
						    : "an unexpected chunk tag");
	r->fill = 0;
	r->chunk++;
	if (tag == TAG_FINAL)
		r->state = R_DONE;
	if (plen) {
		int rc = r->sink(r->payload, r->plain, (size_t)plen);

		if (rc < 0) {
			r->state = R_FAILED;
			return rc;
		}
	}
	return 0;
}

int seal_reader_feed(struct seal_reader *r, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len) {
		size_t need, n;
		int rc;

		switch (r->state) {
		case R_PREFIX:
			need = PREFIXBYTES + ABYTES;
			break;
		case R_DATA:
			need = SEAL_CHUNK + ABYTES;
			break;
		case R_DONE:
			return refuse(r, "bytes follow its final chunk");
		default:
			return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "checkpoint %s refused: the stream was refused before",
				    r->id);
		}
		n = need - r->fill < len ? need - r->fill : len;
		memcpy(r->in + r->fill, p, n);
		r->fill += n;
		p += n;
		len -= n;
		if (r->fill < need)
			break;
		rc = r->state == R_PREFIX ? open_binding(r) : open_chunk(r, 0);
		if (r->state == R_DATA || r->state == R_DONE)
			r->fill = 0;
		if (rc < 0)
			return rc;
	}
	return 0;
}

int seal_reader_finish(struct seal_reader *r)
{
	switch (r->state) {
	case R_DONE:
		return 0;
	case R_DATA:
		if (r->fill < ABYTES)
			return refuse(r, "truncated: the stream ends before its final chunk");
		return open_chunk(r, 1);
	case R_PREFIX:
		return refuse(r, r->fill ? "truncated before its first chunk" : "the stream is empty");
	default:
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "checkpoint %s refused: the stream was refused before",
			    r->id);
	}
}

void seal_reader_free(struct seal_reader *r)
{
	if (!r)
		return;
	sodium_memzero(r, sizeof(*r));
	free(r);
}
