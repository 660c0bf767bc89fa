/*
 * hangard: the HTTP control API over libhangar.
 *
 * The daemon links the public libhangar API only. libmicrohttpd's own
 * threads (a small pool, each with an epoll set) only move bytes: every
 * handler that calls into the library runs on hangard's worker pool while
 * its connection is suspended, so a slow sandbox or a slow client never
 * holds the threads that serve everyone else.
 */
#ifndef HANGARD_H
#define HANGARD_H

#include <hangar/hangar.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "sjson.h"   /* sjson_add_int64: every integer hangard writes */

struct MHD_Connection;
struct MHD_Response;

/* ---- configuration (config.c) --------------------------------------------- */

struct hangard_config {
	char *addr;
	unsigned port;
	char *tokens_file;
	char *tls_cert;
	char *tls_key;
	char *tmpdir;
	unsigned max_connections;
	unsigned idle_timeout_s;
	size_t max_body;
	uint64_t max_upload;
	size_t header_limit;
	unsigned threads;
	unsigned workers;
	unsigned queue;
	unsigned shutdown_s;
	size_t event_queue_bytes;
	unsigned event_heartbeat_s;
	unsigned token_rate;
	unsigned token_burst;
	unsigned reaper_interval_s;
	unsigned reaper_lease_s;
	char *sandbox_domain;
	unsigned sandbox_stall_s;
	char *edge_ca_file;
};

/** One NAME=VALUE the configuration holds, in the order it applies. */
struct hangard_setting {
	char *name;
	char *value;
};

/*
 * Reads the configuration: the file's KEY=VALUE lines, then HANGARD_*
 * variables of the environment, then the flags. HANGAR_* lines of the file
 * are returned in lib (applied to the library's context unless the
 * environment sets them). Prints what is wrong and returns -1.
 */
int config_load(struct hangard_config *cfg, struct hangard_setting **lib, size_t *n_lib, const char *file,
		const struct hangard_setting *flags, size_t n_flags);
void config_free(struct hangard_config *cfg, struct hangard_setting *lib, size_t n_lib);

/* ---- tokens (auth.c) -------------------------------------------------------- */

#define SCOPE_READ  0x1u
#define SCOPE_WRITE 0x2u
#define SCOPE_ADMIN 0x4u
#define SCOPE_SANDBOXES 0x8u   /* the E2B-compatible API under /e2b (e2b.c) */

struct token;
struct tokens;

/* Reads a tokens file; prints what is wrong (with the line) and returns NULL. */
struct tokens *tokens_load(const char *path);
void tokens_free(struct tokens *t);
/* The entry whose hash matches the presented token, or NULL. Constant time in
 * the token and over every entry. */
const struct token *tokens_find(const struct tokens *t, const char *presented);
const char *token_name(const struct token *tok);
/* Takes one request from the token's bucket (rate per second, up to burst);
 * 0 with *retry_s set when it is empty. rate 0: always 1. */
int tokens_admit(struct tokens *t, const struct token *tok, double rate, double burst, unsigned *retry_s);
int token_allows(const struct token *tok, unsigned scope);
/* The `hash-token` subcommand. */
int tokens_hash_main(int argc, char **argv);

/* ---- the server (server.c) ------------------------------------------------ */

struct request;
struct route;

typedef void (*route_fn)(struct request *r);
/* Fills the array of a listing route; returns 0 or a library error. */
typedef int (*list_fill_fn)(struct request *r, cJSON *arr);

/*
 * A body over its limit is still read, and thrown away, up to this many
 * bytes past the limit, so that a client that sends the whole body before
 * reading (most do) reads the 413 instead of a reset. A longer one
 * announced by Content-Length is answered at once; one that turns out
 * longer while it arrives has its connection closed without an answer
 * (libmicrohttpd takes none in the middle of a body).
 */
#define HANGARD_DRAIN_BYTES (UINT64_C(1) << 20)

#define ROUTE_INLINE 0x1u  /* never blocks: runs on the connection's thread */
#define ROUTE_UPLOAD 0x2u  /* the body streams to a temporary file */
#define ROUTE_NOAUTH 0x4u
#define ROUTE_E2B    0x8u  /* under /e2b: E2B's credentials, answers and errors (e2b.c) */

struct route {
	const char *method;
	const char *path;       /* a template: "/v1/sandboxes/{id}" */
	route_fn fn;
	unsigned scope;         /* SCOPE_*, 0 with ROUTE_NOAUTH */
	unsigned flags;
	/* Listing routes (h_list): {list_key: [...]} as fill makes it. */
	const char *list_key;
	list_fill_fn fill;
};

extern const struct route hangard_routes[];
extern const size_t hangard_n_routes;

struct server {
	struct hangard_config *cfg;
	hangar_ctx *ctx;
	struct tokens *tokens;
	uint64_t output_limit;      /* HANGAR_OUTPUT_LIMIT_BYTES, for truncated flags */
	volatile int stopping;
};

extern struct server *hangard;

/* Starts listening; writes the bound port to *port. */
int server_start(struct server *srv, unsigned *port);
/* Stops accepting, lets requests in flight finish within the bound, stops. */
void server_stop(struct server *srv);

/* What a handler reads from its request. */
const char *request_param(const struct request *r);      /* {id}, or NULL */
const char *request_query(const struct request *r, const char *key);
const char *request_header(const struct request *r, const char *key);
const char *request_body(const struct request *r, size_t *len);
const char *request_upload_path(const struct request *r, uint64_t *len);
const char *request_method(const struct request *r);
const char *request_token_name(const struct request *r);   /* "" without a token */
const struct route *request_route(const struct request *r);
struct MHD_Connection *request_connection(const struct request *r);
/* A hangar_cancel_fn for the library call of a handler, with the request as
 * payload: non-zero once the client has closed its connection (nobody will
 * read the answer) or a stop has run past its bound. Only from the handler,
 * before it answers. */
int request_abandoned(void *request);

/* A request's id: 16 hex digits and the NUL. */
#define REQUEST_ID_SIZE 17

/*
 * For a page libmicrohttpd makes itself (mhd-pages.c): the status its log
 * line said it answers (0 when none did) and, into id, the request id that
 * line carried, a fresh one when none did. Once per page.
 */
unsigned server_library_refusal(char id[REQUEST_ID_SIZE]);
/* The JSON error for a request libmicrohttpd refuses with status. */
cJSON *library_error_body(unsigned status);

/* What a handler answers: exactly one of these, once. */
void reply_json(struct request *r, unsigned status, cJSON *body);   /* takes body */
void reply_text(struct request *r, unsigned status, const char *type, const char *text, size_t len);
void reply_empty(struct request *r, unsigned status);
void reply_error(struct request *r, unsigned status, const char *kind, int code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The library's last error on this thread, mapped by errors.c. */
void reply_hangar_error(struct request *r, int code);
void reply_response(struct request *r, unsigned status, struct MHD_Response *resp);
/* One more header on the answer given (after reply_json() and the like). */
void reply_header(struct request *r, const char *name, const char *value);
/* The request-target as the client sent it (path and query, not decoded). */
const char *request_target(const struct request *r);
/* The answer set with reply_response() is ready: resumes the suspended
 * connection to send it (the edge's threads, e2b-edge.c). */
void request_deliver(struct request *r);
/* A streamed answer: resumes the connection now, so the handler may go on
 * producing. After this the handler must not touch r. */
void reply_stream_now(struct request *r, unsigned status, struct MHD_Response *resp);

/* Request bodies: the parsed JSON object, or NULL after answering 400. */
cJSON *request_json(struct request *r, const char *const *allowed);

/* ---- errors (errors.c) ------------------------------------------------------ */

/* The HTTP status for a libhangar error code. */
unsigned error_status(int code);
/* msg, or in buf a message without it when msg would show how the state
 * store is reached (host, port, database, user). */
const char *error_public_message(const char *msg, char *buf, size_t cap);

/* ---- streams (stream.c) ----------------------------------------------------- */

/* A byte queue between a producer thread and a response being sent. */
struct stream;
struct stream *stream_new(size_t max_bytes);
/* The response reading from it; the response holds a reference. */
struct MHD_Response *stream_response(struct stream *s, const char *content_type);
/* Appends; returns -1 when the queue is over its bound or closed (the reader
 * gave up), then the producer should stop. */
int stream_write(struct stream *s, const char *data, size_t len);
/* No more data: the response ends after what is queued. */
void stream_close(struct stream *s);
int stream_is_closed(struct stream *s);
void stream_unref(struct stream *s);
/* The connection the stream's response goes to: set before it is queued. */
void stream_attach(struct stream *s, struct MHD_Connection *conn);

/* ---- events and metrics ----------------------------------------------------- */

void events_init(struct server *srv);
void events_on_event(const char *name, const char *json, void *payload);
void events_close_all(void);
void metrics_record(size_t route, unsigned status, int64_t duration_us);
/* Renders the exposition; the sandbox gauges come from a list. */
char *metrics_render(hangar_ctx *ctx, size_t *len);
void metrics_count_fallback(void);

/* ---- the reaper (reaper.c) -------------------------------------------------- */

/* Starts the reaper's thread (none when HANGARD_REAPER_INTERVAL_SECONDS is 0). */
int reaper_start(struct server *srv);
/* Stops it after the pass in progress and gives the lease up. */
void reaper_stop(struct server *srv);
/* The reaper's lines of /metrics into buf; their length. */
size_t reaper_metrics(char *buf, size_t cap);

/* ---- request helpers (sandboxes.c) ---------------------------------------- */

cJSON *sandbox_json(const hangar_sandbox_info *info);
/* Adds string members to obj from pairs: key, value, ..., NULL. Returns obj. */
cJSON *add_strings(cJSON *obj, ...) __attribute__((sentinel));
/* Attaches to the sandbox the path names (?provider= narrows), or answers. */
hangar_sandbox *sandbox_open(struct request *r);
/* Optional members of a body; -1 after answering 400. */
int want_string(struct request *r, cJSON *doc, const char *key, const char **out);
int want_int(struct request *r, cJSON *doc, const char *key, double min, double max, int64_t *out);
/* *out is dflt when the member is missing or null, else 0 or 1. */
int want_bool(struct request *r, cJSON *doc, const char *key, int dflt, int *out);
/* {"K":"V"} -> NULL-terminated "K=V" (env_free()); *failed after answering. */
char **env_array(struct request *r, cJSON *doc, const char *key, int *failed);
void env_free(char **v);

/* ---- the E2B-compatible API (e2b.c, e2b-records.c) ------------------------- */

/* Where E2B's control API is mounted: an SDK's E2B_API_URL is
 * http(s)://HOST:PORT/e2b. */
#define E2B_PREFIX "/e2b"

/* {code, message}: E2B's error body, which its SDKs turn into their classes. */
cJSON *e2b_error_body(unsigned status, const char *message);
/* The status E2B answers for a library error (a gone sandbox is 404). */
unsigned e2b_error_status(int code);
/* Reads HANGAR_STATE_DIR and HANGAR_SECRET_KEY; -1 after printing why. */
int e2b_init(hangar_ctx *ctx);

void h_e2b_health(struct request *),
	h_e2b_create(struct request *),
	h_e2b_list(struct request *),
	h_e2b_list_v2(struct request *),
	h_e2b_get(struct request *),
	h_e2b_kill(struct request *),
	h_e2b_timeout(struct request *),
	h_e2b_refresh(struct request *),
	h_e2b_pause(struct request *),
	h_e2b_resume(struct request *),
	h_e2b_connect(struct request *),
	h_e2b_fork(struct request *),
	h_e2b_snapshot(struct request *),
	h_e2b_metrics(struct request *),
	h_e2b_logs(struct request *),
	h_e2b_templates(struct request *),
	h_e2b_templates_v2(struct request *),
	h_e2b_template_get(struct request *),
	h_e2b_template_delete(struct request *),
	h_e2b_template_alias(struct request *),
	h_e2b_snapshots(struct request *),
	h_e2b_unmapped(struct request *);

/* ---- the sandbox edge (e2b-edge.c) ------------------------------------------ */

struct edge;

/* The domain of sandbox host names (HANGARD_SANDBOX_DOMAIN): PORT-ID.DOMAIN
 * routes to a sandbox, and /e2b answers it as `domain`. NULL: none. */
void edge_set_domain(const char *domain);
const char *edge_domain(void);
/*
 * Once the headers are in: 0 when the request is not the edge's (hangard's
 * own API); 1 when it is, with *out the forwarding under way, or NULL after
 * answering (a refusal).
 */
int edge_begin(struct request *r, const char *url, const char *method, struct edge **out);
enum { EDGE_WAIT, EDGE_ANSWER, EDGE_FAIL };
/* The body's bytes (*size left: what did not fit), then its end (*size 0):
 * EDGE_WAIT, EDGE_ANSWER (queue the answer set), EDGE_FAIL (close). */
int edge_on_request(struct edge *e, struct request *r, const char *data, size_t *size);
/* The sandbox and port of its request's log line. */
void edge_log_fields(struct edge *e, cJSON *line);
/* The request completed: from on_completed. */
void edge_request_done(struct edge *e);
/* hangard stops: every forwarding ends. */
void edge_close_all(void);
/* hangard stopped: the envd targets the edge kept, tokens and all, are wiped (e2b-edge-cache.c). */
void edge_cache_clear(void);

/* ---- handlers --------------------------------------------------------------- */

/* Route handlers (route_fn). */
void h_livez(struct request *),
	h_readyz(struct request *),
	h_metrics(struct request *),
	h_openapi(struct request *),
	h_events(struct request *),
	h_list(struct request *),
	h_sandbox_create(struct request *),
	h_sandbox_get(struct request *),
	h_sandbox_kill(struct request *),
	h_sandbox_pause(struct request *),
	h_sandbox_resume(struct request *),
	h_sandbox_timeout(struct request *),
	h_sandbox_fork(struct request *),
	h_sandbox_snapshot(struct request *),
	h_exec(struct request *),
	h_exec_stream(struct request *),
	h_file_get(struct request *),
	h_file_put(struct request *),
	h_session_create(struct request *),
	h_session_get(struct request *),
	h_session_suspend(struct request *),
	h_session_resume(struct request *),
	h_session_archive(struct request *),
	h_session_delete(struct request *),
	h_session_fork(struct request *),
	h_session_keep(struct request *),
	h_checkpoint_get(struct request *),
	h_checkpoint_delete(struct request *),
	h_sandbox_checkpoint(struct request *),
	h_image_get(struct request *),
	h_image_delete(struct request *),
	h_image_pull(struct request *);
int fill_sandboxes(struct request *r, cJSON *arr);
int fill_images(struct request *r, cJSON *arr);
int fill_sessions(struct request *r, cJSON *arr);
int fill_session_checkpoints(struct request *r, cJSON *arr);

/* The embedded OpenAPI document (generated at build time). */
extern const char hangard_openapi[];
extern const size_t hangard_openapi_len;

#include "clock.h"   /* clock_mono_us() and the other clocks */

void log_line(cJSON *obj);   /* one JSON line on stderr; takes obj */

#endif
