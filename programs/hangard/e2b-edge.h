/*
 * The sandbox edge (e2b-edge.c, e2b-edge-http.c): envd and user-port
 * traffic of E2B's SDKs, routed to a sandbox and forwarded to it over an
 * HTTP/1.1 connection of its own: plain, or TLS to a platform's https envd
 * URL (e2b-edge-tls.c).
 */
#ifndef HANGARD_E2B_EDGE_H
#define HANGARD_E2B_EDGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The port envd answers on in every E2B sandbox: its traffic goes to the
 * sandbox's envd, any other port to a port the sandbox exposes. */
#define EDGE_ENVD_PORT 49983

/* ---- the upstream side (e2b-edge-http.c) ------------------------------------ */

/* A buffered reader of one upstream connection. */
struct up {
	int fd;
	void *tls;      /* the libcurl handle that owns fd and its TLS session, or NULL */
	char buf[16384];
	size_t pos, len;
	int eof;
};

/* Why an upstream wait ends early: non-zero stops it (the client left, or
 * hangard stops). Called about once a second while waiting. */
typedef int (*up_cancel_fn)(void *payload);

/*
 * Connects to "HOST:PORT" (an IP literal, or "localhost") or, with
 * socket_path non-empty, to that unix socket; -1 with errno on failure.
 */
int up_connect(const char *hostport, const char *socket_path, int timeout_ms);
/*
 * Connects to "HOST:PORT" over TLS, verifying the certificate against the
 * system's CAs and HANGARD_EDGE_CA_FILE: 0 with u->fd and u->tls set, or -1
 * with why in err.
 */
int up_connect_tls(struct up *u, const char *hostport, int timeout_ms, char *err, size_t errcap);
/* Sends or receives through the TLS session: bytes, 0 at end (recv only),
 * -1 with errno EAGAIN when it would block, -1 on error. */
ssize_t up_tls_send(struct up *u, const void *buf, size_t len);
ssize_t up_tls_recv(struct up *u, void *buf, size_t len);
/* Ends the TLS session and its connection (up_close does it for either). */
void up_tls_close(struct up *u);
/* Closes u's connection, plain or TLS. */
void up_close(struct up *u);

/* Writes all of buf within deadline_us (clock_mono_us()); 0 or -1. */
int up_write_all(struct up *u, const void *buf, size_t len, int64_t deadline_us, up_cancel_fn cancel, void *payload);
/* Reads what is there, or waits until deadline_us: bytes read, 0 at end, -1 on error or time. */
ssize_t up_read(struct up *u, char *out, size_t cap, int64_t deadline_us, up_cancel_fn cancel, void *payload);
/* One line without its CRLF into out (at most cap-1 bytes): 0, or -1 (too long, end, error, time). */
int up_line(struct up *u, char *out, size_t cap, int64_t deadline_us, up_cancel_fn cancel, void *payload);

/* Whether the upstream sent something already (an answer before the whole
 * request went up): 1, or 0. What it sent stays in u's buffer. */
int up_pending(struct up *u);

/* "http://HOST:PORT[/...]" or "https://..." -> "HOST:PORT" (port 80 or 443
 * when none): 0 for http, 1 for https, -1 for other schemes. */
int up_hostport(const char *url, char *out, size_t cap);

/* A connection to key (a socket path, or HOST:PORT) whose last answer
 * ended where its framing said: kept a few seconds for the next request. */
void up_keep(const char *key, struct up *u);
/* A kept connection to key still open with nothing to read: 0 with u's
 * fd and tls set, or -1. */
int up_take(const char *key, struct up *u);

/* Whether a request or response header is the connection's own (never
 * forwarded): Connection, Keep-Alive, Transfer-Encoding, ... */
int edge_hop_header(const char *name);

/* ---- where a sandbox's envd is (e2b-edge.c, kept by e2b-edge-cache.c) ------ */

/* Where a request goes upstream, with the headers the sandbox's endpoint asks for. */
struct target {
	char hostport[300];
	int tls;               /* hostport is an https envd's */
	char socket_path[4096];
	char *extra;           /* header lines the sandbox's endpoint asks for (tokens among them); malloc'd */
};

struct e2b_record;

/*
 * The envd target of a platform's sandbox (the e2b provider's) found for
 * E2B sandbox id under record rec, kept for EDGE_CACHE_MS: finding it asks
 * the platform's control API, a round trip to the platform on every
 * request otherwise. A kept target is used only while the record says the
 * same (the sandbox behind the id, its tokens' generation, how it is
 * paused); the platform's own edge answers for a sandbox it paused or
 * ended meanwhile, as it would have.
 */
#define EDGE_CACHE_MS 1000
/* 0 with t filled (t->extra the caller's to free), or -1: none kept. put keeps no socket path's target. */
int edge_cache_get(const char *id, const struct e2b_record *rec, struct target *t);
void edge_cache_put(const char *id, const struct e2b_record *rec, const struct target *t);
/* Forgets id's target: its sandbox did not answer there. */
void edge_cache_drop(const char *id);

/* ---- the request's sandbox (e2b-edge-route.c) ------------------------------ */

struct request;

/*
 * The sandbox and port the request is for, and whether its token lets it
 * reach them: 1 with id, port and *rec (the sandbox's record, the caller's
 * to dispose of) filled, 0 when the request is hangard's own API, -1 after
 * answering a refusal (400, 401, 500, 503).
 */
int edge_route(struct request *r, const char *url, const char *method, char id[65], unsigned *port,
	       struct e2b_record *rec);
/* An answer of the edge itself: Connect's error for envd's RPCs, else E2B's. */
void edge_reply(struct request *r, const char *url, unsigned status, const char *msg);

#endif
