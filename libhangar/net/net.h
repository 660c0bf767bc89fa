/*
 * The HTTP layer: every request libhangar makes (to a sandbox's envd, to a
 * platform's control API, an S3 store) goes through net_perform(), on
 * libcurl. Nothing else in the library includes <curl/curl.h> or calls
 * curl (tests/abi/check-http-layer.py fails the build's tests if it does).
 *
 * What every request gets, whoever makes it:
 *  - libcurl loaded (curl-dl.c: not linked, see util/dl.h) and initialised
 *    once per process, thread-safely, on the first request (net_global_init);
 *  - HTTP/1.1 over http or https only, redirects never followed (a 3xx is an
 *    answer like any other, so a credential is never carried to another host);
 *  - no compression offered and none undone by curl: an answer whose
 *    Content-Encoding, Connect-Content-Encoding or Transfer-Encoding names a
 *    compression is refused before its body is read, unless the request
 *    takes gzip raw (allow_gzip) to inflate it under its own limit;
 *  - bodies consumed as they arrive, under a cap checked against the
 *    announced length and against the bytes counted, error bodies kept only
 *    up to a small cap;
 *  - deadlines: connecting, the whole request, and "nothing moved";
 *  - connection reuse through a pool of easy handles (net_pool).
 *
 * The outcome is one struct net_result whose class says what happened in
 * the terms callers decide on (a peer that cannot be reached, a deadline, an
 * HTTP status, an answer we refuse); its other fields give the details.
 * net_perform() reports nothing on the thread's hangar error: the callers
 * know what the request was for and word the error themselves.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/buf.h"

/* Connecting never waits longer than this, whatever the request's deadline. */
#define NET_CONNECT_TIMEOUT_MS 10000
/* Default cap on the body of an answer that is not 2xx (what we quote from it). */
#define NET_ERROR_BODY_MAX (64u << 10)
/* Retry-After values over this (seconds) are ignored. */
#define NET_RETRY_AFTER_MAX 86400

enum net_class {
	NET_OK = 0,             /* a 2xx answer, its whole body delivered */
	NET_HTTP_STATUS,        /* an answer with another status (http_status); body holds its start */
	NET_UNREACHABLE,        /* no connection: DNS, refused, unreachable, TLS handshake; nothing was sent */
	NET_DROPPED,            /* the connection broke after the request went out, before any answer:
				   the peer may have acted on it */
	NET_TIMEOUT,            /* a deadline passed (timeout says which; connected says whether
				   the request may have gone out) */
	NET_PROTOCOL,           /* an answer we refuse (protocol says why) */
	NET_ABORTED,            /* a callback of the request stopped it, and reported why */
	NET_CANCELLED,          /* the request's cancel hook asked to stop */
	NET_LOCAL,              /* the request could not be made here: out of memory, a bad URL,
				   a protocol outside http/https */
};

enum net_timeout {
	NET_TIMEOUT_NONE = 0,
	NET_TIMEOUT_CONNECT,    /* no connection within the connect deadline: nothing was sent */
	NET_TIMEOUT_TOTAL,      /* the whole request's deadline */
	NET_TIMEOUT_STALL,      /* no byte moved for stall_ms */
};

enum net_protocol {
	NET_PROTO_NONE = 0,
	NET_PROTO_OVERSIZED,    /* announced or counted over max_body */
	NET_PROTO_ENCODED,      /* a compression we did not accept (encoding_name says which) */
	NET_PROTO_NOT_HTTP,     /* something answered, but not HTTP/1.x */
	NET_PROTO_TRUNCATED,    /* a 2xx answer broke off before its end */
};

enum net_encoding {
	NET_ENC_NONE = 0,       /* no encoding header */
	NET_ENC_IDENTITY,
	NET_ENC_GZIP,
	NET_ENC_OTHER,          /* anything else, or headers that disagree */
};

struct net_result {
	enum net_class cls;
	enum net_timeout timeout;       /* with NET_TIMEOUT */
	enum net_protocol protocol;     /* with NET_PROTOCOL */
	int http_status;                /* the final status, 0 when no answer arrived */
	int connected;                  /* a connection was up and the request about to go out */
	int retry_after_s;              /* Retry-After (delay-seconds or HTTP-date), -1 when absent */
	int64_t content_length;         /* announced, -1 when not */
	enum net_encoding encoding;     /* of the final answer */
	char encoding_name[32];         /* as the peer spelled it, printable */
	int64_t connect_timeout_ms;     /* the connect deadline that applied */
	int64_t elapsed_ms;
	int out_of_memory;              /* with NET_LOCAL: memory ran out (else a bad request) */
	int curl_code;                  /* for diagnostics only */
	char detail[256];               /* what went wrong below HTTP, one printable line, or "" */
	struct hbuf body;               /* 2xx body when the request has no on_body; else the start of
					   a non-2xx answer's body. Freed by net_result_fini. */
};

/*
 * Callbacks run on the thread that called net_perform. Those returning int
 * stop the request when they return non-zero (class NET_ABORTED); they
 * report the reason themselves.
 */
struct net_request {
	const char *method;             /* NULL: GET, or POST when a body or reader is given; HEAD reads no body */
	const char *url;
	const char *unix_socket;        /* connect here instead of the URL's host, or NULL */

	/* request body: in memory, or read as it goes */
	const void *body;
	size_t body_len;
	int has_body;                   /* send body/body_len (an empty body too) */
	ssize_t (*read)(void *ud, char *buf, size_t len);  /* bytes, 0 at the end, < 0 stops */
	int (*seek)(void *ud, int64_t offset);             /* rewind for a resend; 0, or -1 cannot */
	int64_t upload_size;            /* with read: the length to announce, -1 for chunked */

	/* deadlines (milliseconds) */
	int64_t connect_timeout_ms;     /* 0: NET_CONNECT_TIMEOUT_MS; never over timeout_ms */
	int64_t timeout_ms;             /* the whole request, 0: none */
	int64_t stall_ms;               /* fail when no byte moves for this long, 0: never */

	/* what we accept */
	size_t max_body;                /* cap on a 2xx body as received, 0: none */
	size_t max_error_body;          /* cap on what is kept of another answer, 0: NET_ERROR_BODY_MAX */
	int allow_gzip;                 /* a gzip answer is accepted and handed over raw */
	int fresh_connect;              /* never reuse a connection (a request that must not be resent) */
	const char *extra_ca_file;      /* PEM certificates trusted for https besides the system's, or NULL */
	long upload_buffer;             /* with read: bytes per read call and send, 0 for curl's default */
	long download_buffer;           /* bytes per receive (and on_body call at most), 0 for curl's default */

	/*
	 * AWS Signature Version 4, computed here: provider "aws:amz:REGION:SERVICE"
	 * and the key pair. Set on the handle for this request only and taken off
	 * it afterwards, so an idle pooled handle holds no credential; never in
	 * a message. The caller's strings are borrowed, not copied.
	 */
	const char *aws_sigv4;
	const char *auth_user;          /* with aws_sigv4: the access key id */
	const char *auth_secret;        /* with aws_sigv4: the secret access key */

	/* hooks, each optional */
	int (*cancel)(void *ud);        /* polled while waiting (at most every 20 ms, at least once a second); non-zero: NET_CANCELLED */
	void (*on_header)(void *ud, const char *name, size_t nlen, const char *value, size_t vlen);
					/* every response header line; name NULL when a new header
					   block starts (after a 1xx) and the last one is void */
	int (*on_answer)(void *ud, const struct net_result *res);
					/* the final headers are in and passed our checks */
	int (*on_body)(void *ud, const char *data, size_t len);
					/* the body of a 2xx answer, as it arrives */
	void *ud;

	void *headers_;                 /* private: see net_header_add */
};

/*
 * Loads and initialises libcurl once for the process; 0, or HANGAR_EOS
 * reported (naming the library when it cannot be loaded). Thread-safe.
 */
int net_global_init(void);

/* 1 when libcurl is loaded (loading it now if need be), else 0 with *why set (curl-dl.c). Thread-safe. */
int curl_loaded(const char **why);

/*
 * A pool of idle easy handles and a DNS cache shared among them. A handle
 * keeps its live connections, and the pool hands out the one that last
 * talked to the same endpoint. Thread-safe; any thread may use any handle,
 * one at a time. max_idle is how many idle handles are kept.
 */
struct net_pool;
int net_pool_new(struct net_pool **out, size_t max_idle);
void net_pool_free(struct net_pool *p);

/* Zeroes a request (upload_size -1). */
void net_request_init(struct net_request *rq);
/* Appends a request header line "Name: value" (printf format). Lines with CR or LF are refused
 * (HANGAR_EINVAL); 0 or a reported HANGAR_E* code. Every line is wiped from memory when freed. */
int net_header_add(struct net_request *rq, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees what net_header_add made. */
void net_request_fini(struct net_request *rq);

/*
 * Runs one request and fills res (which the caller releases with
 * net_result_fini, whatever the outcome). pool may be NULL (a handle just for
 * this request). Returns res->cls.
 */
enum net_class net_perform(struct net_pool *pool, struct net_request *rq, struct net_result *res);
void net_result_fini(struct net_result *res);

/* Short English name of a class, for messages ("unreachable", "timeout", ...). */
const char *net_class_name(enum net_class cls);

/* Percent-escapes s for a URL query; NULL when out of memory. free() the result. */
char *net_escape(const char *s);
