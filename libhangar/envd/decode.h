/*
 * What the envd client makes of a sandbox's bytes, apart from the transport:
 * the Connect stream (envelopes → messages → the end message) and the /files
 * download body (identity or gzip, under a limit). Pure functions of the
 * bytes fed in, so tests/fuzz/fuzz-envd-client.c drives them directly.
 *
 * Every failure is reported on the thread's hangar error where it is seen
 * and returned as a HANGAR_E* code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "util/buf.h"
#include "client.h"
#include "util/connect.h"
#include "net/net.h"

/* envd's message as quoted in ours. */
#define ENVD_MSG_MAX 400
/* Most we allocate on a Content-Length's word. */
#define ENVD_PREALLOC_MAX (64u << 20)

/* Copies an untrusted message into one printable, bounded line. */
void envd_clean_message(char *dst, size_t cap, const char *src);

/* The HANGAR_E* code for a Connect error code (table in client.h). */
int envd_hangar_code(enum connect_code code);

/*
 * Reports a Connect error answer of the call named what: code (CONNECT_OK
 * counts as unknown) and envd's message (may be NULL). *code_out (may be
 * NULL) gets the code used. Returns the mapped HANGAR_E* code.
 */
int envd_connect_error(const char *what, int http_status, enum connect_code code, const char *message,
		       enum connect_code *code_out);

/* A server stream's body. */
struct envd_stream_dec {
	struct envelope_decoder env;
	const char *what;
	int http_status;
	envd_msg_fn cb;
	void *cbctx;
	int ended;                      /* the end-of-stream message came */
	int end_rc;                     /* and what it said: 0 or a reported code */
	enum connect_code code;         /* the Connect code of an error end, else CONNECT_OK */
	int fail;                       /* a reported code that stopped the stream */
	int stopped;                    /* cb asked to stop */
};

void envd_stream_dec_init(struct envd_stream_dec *d, const char *what, int http_status, envd_msg_fn cb,
			  void *cbctx);
/* Bytes of the body as they come: 0, or -1 when the stream must stop (d->stopped or d->fail says why). */
int envd_stream_dec_feed(struct envd_stream_dec *d, const char *data, size_t len);
/* The body ended: end_rc when the end message came, else HANGAR_EPROTOCOL (reported). */
int envd_stream_dec_finish(struct envd_stream_dec *d);
void envd_stream_dec_free(struct envd_stream_dec *d);

/* A GET /files body, into memory under a limit or into an fd. */
struct envd_file_dec {
	const char *what;
	int http_status;
	size_t limit;                   /* into memory: most bytes kept (after inflating) */
	int fd;                         /* >= 0: write here instead (limit applies too) */
	int (*sink)(void *payload, const void *data, size_t len);
					/* when set: hand the bytes here instead (limit applies too);
					   it returns 0 or a reported code */
	void *sink_payload;
	uint64_t written;               /* bytes written to fd */
	struct hbuf body;               /* into memory: the file */
	z_stream z;
	int z_live, z_done;
};

void envd_file_dec_init(struct envd_file_dec *d, const char *what, size_t limit, int fd);
/* The answer's headers: refuses an encoding we do not decode, or an announced length over the limit. */
int envd_file_dec_begin(struct envd_file_dec *d, int http_status, enum net_encoding enc, const char *enc_name,
			int64_t content_length);
int envd_file_dec_feed(struct envd_file_dec *d, const char *data, size_t len);
/* The body ended: a gzip stream must have ended too. */
int envd_file_dec_finish(struct envd_file_dec *d);
void envd_file_dec_free(struct envd_file_dec *d);
