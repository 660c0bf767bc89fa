/*
 * The envd client: Connect-JSON unary calls and server streams, and the
 * /files routes, on libcurl. Every provider's sandboxes are reached through
 * it. Answers are untrusted: frames, bodies and inflated files are capped,
 * compressed RPC answers are refused, every call has a deadline.
 *
 * Errors are reported through the thread's hangar error (core/internal.h)
 * and returned as HANGAR_E* codes; struct envd_status gives the details the
 * sandbox layer needs to classify them further.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"
#include "util/connect.h"
#include "hangar/types.h"

struct hmodule;

/* Where a sandbox's envd is and how to talk to it. Strings are owned by the
 * endpoint's owner; the client only reads them during a call. */
struct envd_endpoint {
	const char *base_url;           /* "http://host:port"; "http://localhost" with a socket */
	const char *socket_path;        /* unix socket, or NULL */
	const char *ca_file;            /* PEM CAs trusted for https besides the system's, or NULL */
	const char *access_token;       /* X-Access-Token, or NULL */
	const char *const *headers;     /* extra "Name: value" lines, NULL-terminated, or NULL */
	const char *user;               /* default Basic-auth user, or NULL */
};

struct envd_call {
	const struct envd_endpoint *ep;
	const char *user;               /* overrides ep->user when not NULL */
	int64_t deadline_ms;            /* whole request, 0: none */
	int64_t stall_ms;               /* give up when no byte moves for this long, 0: never
					   (for transfers of any size, which have no whole deadline) */
	int64_t connect_timeout_ms;     /* Connect-Timeout-Ms to send; <= 0: none */
	int keepalive_sec;              /* Keepalive-Ping-Interval to send; 0: none */
	int (*cancel)(void *arg);       /* polled with cancel_arg while waiting; non-zero aborts (returns ENVD_CANCELLED) */
	void *cancel_arg;
};

/* Extra outcome details of the last call. */
struct envd_status {
	int transport_failed;           /* no HTTP answer at all (refused, reset, DNS, …) */
	int timed_out;                  /* our deadline passed */
	int http_status;                /* 0 when no answer */
	enum connect_code code;         /* the Connect code of an error answer, else CONNECT_OK */
};

/* Returned when call->cancel stopped a call. */
#define ENVD_CANCELLED 1

/* Limits on what a sandbox may send us. */
#define ENVD_MAX_FRAME (4u << 20)          /* one stream message */
#define ENVD_MAX_UNARY (32u << 20)         /* one unary answer */

struct envd_client;

int envd_client_new(struct envd_client **out);
/* The context's client (its connection pool), made on first use; NULL with the error set. */
struct envd_client *envd_client_of(hangar_ctx *ctx);
/* The envd layer's per-context state (core/module.h). */
extern const struct hmodule envd_module;
void envd_client_free(struct envd_client *c);

/*
 * Unary call: POST <method> with req as JSON; *resp gets the answer (a new
 * object the caller deletes). Returns 0 or a HANGAR_E* code; st (may be NULL)
 * gets the details. Connect codes map as: not_found → HANGAR_ENOTFOUND,
 * already_exists → HANGAR_EEXISTS, invalid_argument / failed_precondition /
 * out_of_range → HANGAR_EINVAL, deadline_exceeded → HANGAR_ETIMEOUT,
 * resource_exhausted → HANGAR_ECAPACITY, unauthenticated / permission_denied
 * → HANGAR_EREFUSED, unavailable → HANGAR_EUNAVAILABLE, unimplemented →
 * HANGAR_EUNSUPPORTED, others → HANGAR_EPROTOCOL. Transport failures →
 * HANGAR_EUNAVAILABLE, our deadline → HANGAR_ETIMEOUT, a malformed,
 * compressed or oversized answer → HANGAR_EPROTOCOL.
 */
int envd_unary(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
	       cJSON **resp, struct envd_status *st);

/* Called per stream message; return non-zero to stop (the call then returns ENVD_CANCELLED). */
typedef int (*envd_msg_fn)(const cJSON *msg, void *ctx);

/*
 * Server-streaming call. Messages are delivered in order on the calling
 * thread. Returns 0 when the stream ended cleanly ({} end envelope), a
 * mapped HANGAR_E* code when it ended with an error (same table as unary),
 * HANGAR_EPROTOCOL when it broke off without an end envelope or sent a frame
 * over ENVD_MAX_FRAME, or ENVD_CANCELLED.
 */
int envd_stream(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
		envd_msg_fn cb, void *cbctx, struct envd_status *st);

/*
 * GET /files into memory. More than limit bytes (by Content-Length, or as
 * counted, or after inflating) → HANGAR_ETOOLARGE; nothing is kept. 404 →
 * HANGAR_EFILE, 400 (a directory) → HANGAR_EFILE, 401 → HANGAR_EREFUSED.
 * gzip answers are inflated with the limit applied to the output.
 */
int envd_file_read(struct envd_client *c, const struct envd_call *call, const char *path, size_t limit,
		   struct hbuf *out, struct envd_status *st);
/*
 * GET /files streamed into fd. More than limit bytes (by Content-Length
 * before a byte is written, or as counted after inflating) →
 * HANGAR_ETOOLARGE, with what was written left for the caller to remove;
 * limit 0: any size.
 */
int envd_file_download(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		       uint64_t limit, struct envd_status *st);
/* POST /files (application/octet-stream) from memory. 507 → HANGAR_ECAPACITY; 400/500 → HANGAR_EFILE. */
int envd_file_write(struct envd_client *c, const struct envd_call *call, const char *path, const void *data,
		    size_t len, struct envd_status *st);
/* POST /files streamed from fd (any size). */
int envd_file_upload(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		     struct envd_status *st);
/* Receives a body's bytes as they come; 0 or a reported code (which stops the transfer). */
typedef int (*envd_sink)(void *payload, const void *data, size_t len);
/* GET /files streamed to sink, under limit bytes (0: any size) counted after inflating. */
int envd_file_fetch(struct envd_client *c, const struct envd_call *call, const char *path, uint64_t limit,
		    envd_sink sink, void *payload, struct envd_status *st);
/* POST /files with a body read from source as it is made (sent chunked, never resent): source
 * returns bytes, 0 at the end, or -1 with the error reported, which aborts the upload. */
int envd_file_upload_from(struct envd_client *c, const struct envd_call *call, const char *path,
			  ssize_t (*source)(void *payload, char *buf, size_t len), void *payload,
			  struct envd_status *st);

/*
 * hangar-envd's checkpoint routes (the E2B envd answers 404 to them).
 * GET /hangar/v1/info: *archive gets the archive endpoint's version, 0 when
 * envd answers anything else than {"archive":N}; an error only when no answer.
 */
int envd_hangar_info(struct envd_client *c, const struct envd_call *call, int *archive, struct envd_status *st);
/* GET /hangar/v1/archive?path=ws&select=...: the tar.zst body to sink as it
 * comes; selection gets X-Hangar-Selection ("git" or "all"). A body that
 * breaks off is HANGAR_EPROTOCOL. */
int envd_archive_get(struct envd_client *c, const struct envd_call *call, const char *ws, const char *select,
		     envd_sink sink, void *payload, char selection[8], struct envd_status *st);
struct envd_archive_counts {
	uint64_t files, dirs, symlinks, bytes;
};
/* PUT /hangar/v1/archive?path=ws&mode=replace|merge with a plain tar read
 * from source (chunked; source returning -1 aborts the upload, so envd
 * commits nothing). A refused member (400) is HANGAR_EREFUSED, 413
 * HANGAR_ETOOLARGE, 507 HANGAR_ECAPACITY; envd's message is kept. */
int envd_archive_put(struct envd_client *c, const struct envd_call *call, const char *ws, const char *mode,
		     ssize_t (*source)(void *payload, char *buf, size_t len), void *payload,
		     struct envd_archive_counts *counts, struct envd_status *st);

/* GET /health: 0 when it answers 204/200. */
int envd_health(struct envd_client *c, const struct envd_call *call, struct envd_status *st);
