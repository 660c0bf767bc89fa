/*
 * The connection side of hangard: libmicrohttpd in its own epoll threads,
 * a fixed pool of workers for everything that calls the library, and the
 * request's life from the first header to the log line.
 *
 * A request whose handler may block is suspended (MHD_suspend_connection)
 * while a worker runs it, then resumed to send the answer: libmicrohttpd's
 * threads never wait on a sandbox. The pool and its queue are bounded; a
 * full queue is 503 at once rather than an ever longer wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>
#include <sodium.h>

#include "body.h"
#include "hangard.h"
#include "sjson.h"

struct server *hangard;

enum phase {
	P_BODY,      /* receiving the body */
	P_RUNNING,   /* suspended, a worker runs the handler */
	P_READY,     /* an answer is waiting to be queued */
	P_SENT,      /* queued */
};

struct request {
	struct MHD_Connection *conn;
	int fd;                  /* the connection's socket, -1 until begun */
	size_t route;            /* index in hangard_routes, or SIZE_MAX */
	char method[16];
	char id[REQUEST_ID_SIZE];
	int begun;               /* request_begin ran */
	int e2b;                 /* under /e2b: errors in E2B's shape (e2b.c) */
	char *bad_target;        /* why the raw target is refused, or NULL */
	char *target;            /* the raw target, for the edge to forward */
	struct edge *edge;       /* forwarded to a sandbox (e2b-edge.c) */
	size_t target_len;       /* bytes of the request-target as sent */
	char *param;
	int64_t start_us;
	const struct token *tok;
	char *body;
	size_t body_len;
	int upload_fd;
	char *upload_path;
	uint64_t upload_len;
	int too_big;
	uint64_t received;       /* body bytes read, kept or not */
	enum phase phase;
	unsigned status;
	struct MHD_Response *resp;
	struct request *next;    /* in the work queue */
};

static struct MHD_Daemon *daemon_;
static char *tls_cert_pem, *tls_key_pem;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static struct request *queue_head, *queue_tail;
static unsigned queue_len;
static unsigned active;          /* requests begun and not completed */
static int pool_quit;
static pthread_t *workers;
static unsigned n_workers;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_line(cJSON *obj)
{
	struct timespec ts;
	char stamp[96];
	struct tm tm;
	char *text;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
	cJSON_AddStringToObject(obj, "time", stamp);
	text = cJSON_PrintUnformatted(obj);
	cJSON_Delete(obj);
	if (!text)
		return;
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s\n", text);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
	free(text);
}

/* ---- reading the request ---- */

const char *request_param(const struct request *r) { return r->param; }
const char *request_method(const struct request *r) { return r->method; }
const char *request_target(const struct request *r) { return r->target; }
const char *request_token_name(const struct request *r) { return r->tok ? token_name(r->tok) : ""; }
struct MHD_Connection *request_connection(const struct request *r) { return r->conn; }
const struct route *request_route(const struct request *r) { return &hangard_routes[r->route]; }

const char *request_query(const struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *request_header(const struct request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

const char *request_body(const struct request *r, size_t *len)
{
	*len = r->body_len;
	return r->body ? r->body : "";
}

const char *request_upload_path(const struct request *r, uint64_t *len)
{
	*len = r->upload_len;
	return r->upload_path;
}

cJSON *request_json(struct request *r, const char *const *allowed)
{
	char err[512];
	cJSON *doc = body_decode(r->body, r->body_len, allowed, err, sizeof(err));

	if (!doc)
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "%s", err);
	return doc;
}

/*
 * While a worker runs the handler the connection is suspended, and
 * libmicrohttpd does not look at its socket: a client that closes it is
 * only noticed when the answer is sent, and often not even then (the
 * kernel takes the answer's bytes before the peer's reset comes back). So
 * the socket is asked directly, without reading from it: the peer's FIN
 * (POLLRDHUP), a reset or an error means nobody will read the answer. A
 * client that only shuts its sending side down after the request looks the
 * same, and counts as gone.
 */
static int client_left(const struct request *r)
{
	struct pollfd p;

	if (r->fd < 0)
		return 0;
	p.fd = r->fd;
	p.events = POLLRDHUP;
	p.revents = 0;
	if (poll(&p, 1, 0) != 1)
		return 0;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int request_abandoned(void *request)
{
	return hangard->stopping == 2 || client_left(request);
}

/* ---- answering ---- */

void reply_response(struct request *r, unsigned status, struct MHD_Response *resp)
{
	if (r->resp) {
		/* A handler answers once; a second answer is a bug we keep out of the wire. */
		MHD_destroy_response(resp);
		return;
	}
	MHD_add_response_header(resp, "X-Request-Id", r->id);
	r->status = status;
	r->resp = resp;
}

void reply_header(struct request *r, const char *name, const char *value)
{
	if (r->resp)
		MHD_add_response_header(r->resp, name, value);
}

void reply_text(struct request *r, unsigned status, const char *type, const char *text, size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return;
	MHD_add_response_header(resp, "Content-Type", type);
	reply_response(r, status, resp);
}

void reply_json(struct request *r, unsigned status, cJSON *body)
{
	char *text = body ? cJSON_PrintUnformatted(body) : NULL;
	cJSON_Delete(body);
	if (!text) {
		reply_text(r, 500, "application/json",
			   "{\"error\":{\"kind\":\"nomem\",\"code\":-2,\"message\":\"out of memory\"}}\n", 66);
		return;
	}
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (line) {
		line[n] = '\n';
		line[n + 1] = '\0';
		text = line;
		n++;
	}
	struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	reply_response(r, status, resp);
}

void reply_empty(struct request *r, unsigned status)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	if (resp)
		reply_response(r, status, resp);
}

void reply_error(struct request *r, unsigned status, const char *kind, int code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *doc = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(doc, "error");

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r->e2b) {
		cJSON_Delete(doc);
		doc = e2b_error_body(status, msg);
	} else {
		cJSON_AddStringToObject(err, "kind", kind);
		sjson_add_int64(err, "code", code);
		cJSON_AddStringToObject(err, "message", msg);
	}
	reply_json(r, status, doc);
	/* Every 503 says when to ask again (the OpenAPI document promises it). */
	if (status == 503 && r->resp)
		MHD_add_response_header(r->resp, "Retry-After", "1");
}

cJSON *library_error_body(unsigned status)
{
	cJSON *doc = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(doc, "error");
	size_t limit = hangard->cfg->header_limit;
	char msg[256];
	const char *kind = "invalid";
	int code = HANGAR_EINVAL;

	switch (status) {
	case 414:
		kind = "uri_too_long";
		code = HANGAR_ETOOLARGE;
		snprintf(msg, sizeof(msg), "the request target is over twice the limit of %zu bytes", limit);
		break;
	case 431:
		kind = "headers_too_large";
		code = HANGAR_ETOOLARGE;
		snprintf(msg, sizeof(msg), "the request line and headers are over twice the limit of %zu bytes", limit);
		break;
	case 413:
		kind = "too_large";
		code = HANGAR_ETOOLARGE;
		snprintf(msg, sizeof(msg), "the declared body length is more than this server can take");
		break;
	case 505:
		snprintf(msg, sizeof(msg), "the HTTP version is not supported: speak HTTP/1.0 or HTTP/1.1");
		break;
	case 500:
		kind = "internal";
		code = HANGAR_EOS;
		snprintf(msg, sizeof(msg), "the HTTP server failed to handle the request");
		break;
	default:
		snprintf(msg, sizeof(msg), "the request is not valid HTTP/1.1 (a malformed line, header or chunk, "
					   "or no Host header)");
		break;
	}
	if (!doc || !err)
		return doc;
	cJSON_AddStringToObject(err, "kind", kind);
	sjson_add_int64(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	return doc;
}

void reply_hangar_error(struct request *r, int code)
{
	const hangar_error *e = hangar_error_last();
	const char *msg = e->code == code && e->message[0] ? e->message : hangar_strerror(code);
	char safe[512];
	unsigned status = error_status(code);
	cJSON *doc = cJSON_CreateObject(), *err = cJSON_AddObjectToObject(doc, "error");
	int retry = e->code == code ? e->retry_after_s : 0;

	if (r->e2b)
		status = e2b_error_status(code);
	/* Cancelled because the client left: 499, as other servers log a
	 * request whose client closed it, so that the log and the metrics do
	 * not count it as the server's failure. */
	if (code == HANGAR_ECANCELED && hangard->stopping != 2 && client_left(r))
		status = 499;
	if (r->e2b) {
		cJSON_Delete(doc);
		doc = e2b_error_body(status, error_public_message(msg, safe, sizeof(safe)));
		err = doc;
	} else {
		cJSON_AddStringToObject(err, "kind", hangar_error_name(code));
		sjson_add_int64(err, "code", code);
		cJSON_AddStringToObject(err, "message", error_public_message(msg, safe, sizeof(safe)));
	}
	if (status == 503 || code == HANGAR_EBUSY) {
		char secs[16];
		snprintf(secs, sizeof(secs), "%d", retry > 0 ? retry : 1);
		sjson_add_int64(err, "retry_after_s", retry > 0 ? retry : 1);
		reply_json(r, status, doc);
		if (r->resp)
			MHD_add_response_header(r->resp, "Retry-After", secs);
		return;
	}
	reply_json(r, status, doc);
}

static void deliver(struct request *r)
{
	pthread_mutex_lock(&pool_lock);
	r->phase = P_READY;
	pthread_mutex_unlock(&pool_lock);
	MHD_resume_connection(r->conn);
}

void request_deliver(struct request *r)
{
	deliver(r);
}

/* Set on a worker when its handler answered early: r may be gone after. */
static __thread int delivered_early;

void reply_stream_now(struct request *r, unsigned status, struct MHD_Response *resp)
{
	reply_response(r, status, resp);
	delivered_early = 1;
	deliver(r);
}

/* ---- the worker pool ---- */

static void run_handler(struct request *r)
{
	delivered_early = 0;
	hangard_routes[r->route].fn(r);
	if (delivered_early)
		return;
	if (!r->resp)
		reply_error(r, 500, "internal", HANGAR_EINVAL, "the handler gave no answer");
	deliver(r);
}

static void *worker_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct request *r;
		pthread_mutex_lock(&pool_lock);
		while (!queue_head && !pool_quit)
			pthread_cond_wait(&pool_cond, &pool_lock);
		if (!queue_head) {
			pthread_mutex_unlock(&pool_lock);
			return NULL;
		}
		r = queue_head;
		queue_head = r->next;
		if (!queue_head)
			queue_tail = NULL;
		queue_len--;
		pthread_mutex_unlock(&pool_lock);
		run_handler(r);
	}
}

static int submit(struct request *r)
{
	pthread_mutex_lock(&pool_lock);
	if (queue_len >= hangard->cfg->queue) {
		pthread_mutex_unlock(&pool_lock);
		return -1;
	}
	r->phase = P_RUNNING;
	r->next = NULL;
	if (queue_tail)
		queue_tail->next = r;
	else
		queue_head = r;
	queue_tail = r;
	queue_len++;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
	return 0;
}

/* ---- the request's life ---- */

/* The route for url and method. When the path is served for other methods
 * only, *method_mismatch is set and allow lists them ("GET, DELETE"). */
static size_t match_route(const char *url, const char *method, char **param, int *method_mismatch, char *allow,
			  size_t allow_cap)
{
	*method_mismatch = 0;
	allow[0] = '\0';
	for (size_t i = 0; i < hangard_n_routes; i++) {
		const char *t = hangard_routes[i].path, *u = url, *pstart = NULL;
		size_t plen = 0;
		while (*t && *u) {
			if (*t == '{') {
				const char *close = strchr(t, '}');
				pstart = u;
				while (*u && *u != '/')
					u++;
				plen = (size_t)(u - pstart);
				if (plen == 0)
					break;
				t = close + 1;
				continue;
			}
			if (*t != *u)
				break;
			t++;
			u++;
		}
		if (*t || *u)
			continue;
		if (strcmp(hangard_routes[i].method, method) != 0) {
			size_t n = strlen(allow);
			*method_mismatch = 1;
			snprintf(allow + n, allow_cap - n, "%s%s", n ? ", " : "", hangard_routes[i].method);
			continue;
		}
		free(*param);
		*param = pstart ? strndup(pstart, plen) : NULL;
		return i;
	}
	return SIZE_MAX;
}

static enum MHD_Result queue_now(struct request *r)
{
	enum MHD_Result ret;
	r->phase = P_SENT;
	if (!r->resp)
		return MHD_NO;
	ret = MHD_queue_response(r->conn, r->status, r->resp);
	MHD_destroy_response(r->resp);
	r->resp = NULL;
	return ret;
}

static int authenticate(struct request *r, const struct route *rt)
{
	const char *h = request_header(r, MHD_HTTP_HEADER_AUTHORIZATION), *key = NULL;
	int e2b = (rt->flags & ROUTE_E2B) != 0;

	if (rt->flags & ROUTE_NOAUTH)
		return 0;
	/* E2B's SDKs send their key as X-API-Key; its API takes a bearer token too. */
	if (e2b)
		key = request_header(r, "X-API-Key");
	if (!key && h && strncasecmp(h, "Bearer ", 7) == 0)
		key = h + 7;
	if (!key) {
		reply_error(r, 401, "unauthorized", HANGAR_EREFUSED,
			    e2b ? "an API key is required (X-API-Key or Authorization: Bearer)"
				: "a bearer token is required");
		MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer");
		return -1;
	}
	r->tok = tokens_find(hangard->tokens, key);
	if (!r->tok) {
		reply_error(r, 401, "unauthorized", HANGAR_EREFUSED, "the token is not valid");
		MHD_add_response_header(r->resp, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
		return -1;
	}
	if (!token_allows(r->tok, rt->scope)) {
		reply_error(r, 403, "forbidden", HANGAR_EREFUSED, "the token lacks the %s scope",
			    rt->scope == SCOPE_WRITE       ? "write"
			    : rt->scope == SCOPE_ADMIN     ? "admin"
			    : rt->scope == SCOPE_SANDBOXES ? "sandboxes"
							   : "read");
		return -1;
	}
	unsigned retry = 0;
	const struct hangard_config *cfg = hangard->cfg;
	if (!tokens_admit(hangard->tokens, r->tok, cfg->token_rate, cfg->token_burst, &retry)) {
		char secs[16];
		snprintf(secs, sizeof(secs), "%u", retry);
		reply_error(r, 429, "rate_limited", HANGAR_ECAPACITY, "over %u requests a second for this token",
			    cfg->token_rate);
		MHD_add_response_header(r->resp, "Retry-After", secs);
		return -1;
	}
	return 0;
}

static int open_upload(struct request *r)
{
	const char *dir = hangard->cfg->tmpdir;
	size_t n = strlen(dir) + 32;
	r->upload_path = malloc(n);
	if (!r->upload_path)
		return -1;
	snprintf(r->upload_path, n, "%s/upload-XXXXXX", dir);
	r->upload_fd = mkostemp(r->upload_path, O_CLOEXEC);
	if (r->upload_fd < 0) {
		free(r->upload_path);
		r->upload_path = NULL;
		return -1;
	}
	return 0;
}

/* A request's record, from its first line on (the target is not decoded yet). */
static void new_request_id(char id[REQUEST_ID_SIZE])
{
	unsigned char raw[(REQUEST_ID_SIZE - 1) / 2];

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(id, REQUEST_ID_SIZE, raw, sizeof(raw));
}

static struct request *request_new(struct MHD_Connection *conn, const char *target)
{
	struct request *r = calloc(1, sizeof(*r));
	char err[256];

	if (!r)
		return NULL;
	r->conn = conn;
	r->fd = -1;
	r->upload_fd = -1;
	r->route = SIZE_MAX;
	r->start_us = clock_mono_us();
	snprintf(r->method, sizeof(r->method), "-");
	new_request_id(r->id);
	if (target && target_check(target, err, sizeof(err)) < 0)
		r->bad_target = strdup(err);
	r->target_len = target ? strlen(target) : 0;
	if (target && !(r->target = strdup(target))) {
		free(r->bad_target);
		free(r);
		return NULL;
	}
	return r;
}

/*
 * libmicrohttpd calls this with the target as sent, before it decodes it
 * (where a %00 would end the C string), and keeps what it returns as the
 * request's context: the request exists, with its id, from its first line.
 */
static void *on_target(void *cls, const char *target, struct MHD_Connection *conn)
{
	(void)cls;
	return request_new(conn, target);
}

/* The body limit of the request's route. */
static uint64_t body_cap(const struct request *r)
{
	return (hangard_routes[r->route].flags & ROUTE_UPLOAD) ? hangard->cfg->max_upload : hangard->cfg->max_body;
}

static void reply_too_large(struct request *r)
{
	reply_error(r, 413, "too_large", HANGAR_ETOOLARGE, "the body is over the limit of %" PRIu64 " bytes",
		    body_cap(r));
}

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	*(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
	return MHD_YES;
}

/*
 * The request line and headers against HANGARD_HEADER_LIMIT_BYTES, answered
 * here (JSON, X-Request-Id, a log line): 414 for a target over it, 431 for
 * the whole over it. libmicrohttpd holds up to twice the limit (see
 * server_start), so only what is past that is refused by it instead.
 */
static int over_header_limit(struct request *r)
{
	size_t limit = hangard->cfg->header_limit, total = r->target_len + strlen(r->method) + 11;

	r->route = SIZE_MAX;
	if (r->target_len > limit) {
		reply_error(r, 414, "uri_too_long", HANGAR_ETOOLARGE,
			    "the request target is %zu bytes, over the limit of %zu", r->target_len, limit);
		return 1;
	}
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header_bytes, &total);
	if (total > limit) {
		reply_error(r, 431, "headers_too_large", HANGAR_ETOOLARGE,
			    "the request line and headers are %zu bytes, over the limit of %zu", total, limit);
		return 1;
	}
	return 0;
}

/* Once the headers are in: the route, the token, the declared length. */
static void request_begin(struct request *r, const char *url, const char *method)
{
	const union MHD_ConnectionInfo *info;
	char allow[64];
	int mismatch;

	/* In flight from here: a stop waits for it. One still sending its
	 * headers is not waited for, or a slow client could hold a stop. */
	r->begun = 1;
	info = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (info)
		r->fd = info->connect_fd;
	pthread_mutex_lock(&pool_lock);
	active++;
	pthread_mutex_unlock(&pool_lock);
	snprintf(r->method, sizeof(r->method), "%s", method);
	r->e2b = strncmp(url, E2B_PREFIX, strlen(E2B_PREFIX)) == 0 &&
		 (url[strlen(E2B_PREFIX)] == '/' || url[strlen(E2B_PREFIX)] == '\0');
	if (over_header_limit(r))
		return;
	if (r->bad_target) {
		r->route = SIZE_MAX;
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "%s", r->bad_target);
		return;
	}
	/* Envd's traffic and user ports of a sandbox, by its host name or
	 * E2B's headers, before hangard's own routes. */
	if (edge_begin(r, url, method, &r->edge))
		return;
	r->route = match_route(url, method, &r->param, &mismatch, allow, sizeof(allow));
	if (r->route == SIZE_MAX) {
		if (mismatch) {
			reply_error(r, 405, "method_not_allowed", HANGAR_EINVAL, "%s is not allowed here (Allow: %s)",
				    method, allow);
			if (r->resp)
				MHD_add_response_header(r->resp, MHD_HTTP_HEADER_ALLOW, allow);
		} else {
			reply_error(r, 404, "no_route", HANGAR_ENOTFOUND, "no such route");
		}
		return;
	}
	const struct route *rt = &hangard_routes[r->route];
	if (authenticate(r, rt) < 0)
		return;
	if (hangard->stopping) {
		reply_error(r, 503, "unavailable", HANGAR_EUNAVAILABLE, "the server is shutting down");
		return;
	}
	const char *cl = request_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > body_cap(r)) {
		/* Within the drain bound, read the body (and drop it) so that a
		 * client still sending reads the 413 rather than a reset. */
		if (strtoull(cl, NULL, 10) - body_cap(r) > HANGARD_DRAIN_BYTES)
			reply_too_large(r);
		else
			r->too_big = 1;
		return;
	}
	if ((rt->flags & ROUTE_UPLOAD) && open_upload(r) < 0)
		reply_error(r, 500, "os", HANGAR_EOS, "cannot make a temporary file: %s", strerror(errno));
}

static void take_body(struct request *r, const char *data, size_t size)
{
	const struct route *rt = &hangard_routes[r->route];
	r->received += size;
	if (r->too_big)
		return;
	if (rt->flags & ROUTE_UPLOAD) {
		if (r->upload_len + size > hangard->cfg->max_upload) {
			r->too_big = 1;
			return;
		}
		while (size) {
			ssize_t w = write(r->upload_fd, data, size);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				r->too_big = 2;
				return;
			}
			data += w;
			size -= (size_t)w;
			r->upload_len += (uint64_t)w;
		}
		return;
	}
	if (r->body_len + size > hangard->cfg->max_body) {
		r->too_big = 1;
		return;
	}
	char *nb = realloc(r->body, r->body_len + size + 1);
	if (!nb) {
		r->too_big = 2;
		return;
	}
	memcpy(nb + r->body_len, data, size);
	r->body = nb;
	r->body_len += size;
	r->body[r->body_len] = '\0';
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct request *r = *con_cls;
	(void)cls;
	(void)version;

	if (!r) {
		r = request_new(conn, NULL);
		if (!r)
			return MHD_NO;
		*con_cls = r;
	}
	if (!r->begun) {
		request_begin(r, url, method);
		if (r->resp)
			return queue_now(r);
		return MHD_YES;
	}
	if (r->phase == P_READY)
		return queue_now(r);
	/* libmicrohttpd may call once more after an answer was queued early. */
	if (r->phase != P_BODY)
		return MHD_YES;
	if (r->edge) {
		int rc = edge_on_request(r->edge, r, upload_data, upload_size);
		return rc == EDGE_ANSWER ? queue_now(r) : rc == EDGE_FAIL ? MHD_NO : MHD_YES;
	}
	if (*upload_size) {
		take_body(r, upload_data, *upload_size);
		*upload_size = 0;
		if (r->too_big == 1 && r->received > body_cap(r) + HANGARD_DRAIN_BYTES) {
			/* Past the drain bound. libmicrohttpd takes no answer while a
			 * body is arriving: the connection is closed without one. */
			r->status = 413;
			return MHD_NO;
		}
		return MHD_YES;
	}
	if (r->too_big == 1) {
		reply_too_large(r);
		return queue_now(r);
	}
	if (r->too_big) {
		reply_error(r, 500, "os", HANGAR_EOS, "cannot keep the body");
		return queue_now(r);
	}
	if (hangard_routes[r->route].flags & ROUTE_INLINE) {
		hangard_routes[r->route].fn(r);
		if (!r->resp)
			reply_error(r, 500, "internal", HANGAR_EINVAL, "the handler gave no answer");
		return queue_now(r);
	}
	MHD_suspend_connection(conn);
	if (submit(r) < 0) {
		MHD_resume_connection(conn);
		reply_error(r, 503, "capacity", HANGAR_ECAPACITY, "every worker is busy");
		return queue_now(r);
	}
	return MHD_YES;
}

/*
 * What libmicrohttpd last said it answered itself on this thread: it logs
 * its own error answers just before it makes the page (mhd-pages.c) and
 * completes their request. The id goes on the log line, on the page's
 * X-Request-Id and on the request's line, so the three agree.
 */
static __thread unsigned mhd_status;
static __thread char mhd_id[REQUEST_ID_SIZE];

unsigned server_library_refusal(char id[REQUEST_ID_SIZE])
{
	if (!mhd_id[0])
		new_request_id(mhd_id);
	memcpy(id, mhd_id, REQUEST_ID_SIZE);
	return mhd_status;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct request *r = *con_cls;
	(void)cls;
	(void)conn;
	if (!r)
		return;
	*con_cls = NULL;
	int64_t dur = clock_mono_us() - r->start_us;
	const char *tmpl = r->route == SIZE_MAX ? "-" : hangard_routes[r->route].path;
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "msg", "request");
	cJSON_AddStringToObject(line, "request_id", r->id);
	cJSON_AddStringToObject(line, "method", r->method);
	cJSON_AddStringToObject(line, "route", tmpl);
	sjson_add_int64(line, "status", r->status);
	cJSON_AddNumberToObject(line, "duration_ms", (double)dur / 1000.0);
	if (r->tok)
		cJSON_AddStringToObject(line, "token", token_name(r->tok));
	if (r->edge)
		edge_log_fields(r->edge, line);
	if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
		cJSON_AddBoolToObject(line, "aborted", 1);
	if (!r->begun)
		/* libmicrohttpd refused it before its headers were in (a malformed
		 * request, or headers over HANGARD_HEADER_LIMIT_BYTES: 431) and
		 * sent its own answer, which this process never sees. */
	{
		cJSON_AddStringToObject(line, "answered_by", "libmicrohttpd");
		if (mhd_status)
			cJSON_ReplaceItemInObject(line, "status", sjson_int64(mhd_status));
		if (mhd_id[0])
			cJSON_ReplaceItemInObject(line, "request_id", cJSON_CreateString(mhd_id));
	}
	mhd_status = 0;
	mhd_id[0] = '\0';
	log_line(line);
	metrics_record(r->route, r->status, dur);

	if (r->edge)
		edge_request_done(r->edge);
	if (r->resp)
		MHD_destroy_response(r->resp);
	if (r->upload_fd >= 0)
		close(r->upload_fd);
	if (r->upload_path) {
		unlink(r->upload_path);
		free(r->upload_path);
	}
	free(r->body);
	free(r->param);
	free(r->bad_target);
	free(r->target);
	if (r->begun) {
		pthread_mutex_lock(&pool_lock);
		active--;
		pthread_cond_broadcast(&idle_cond);
		pthread_mutex_unlock(&pool_lock);
	}
	free(r);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	cJSON *line;
	size_t n;
	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	const char *code = strstr(msg, "response code is ");
	line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "msg", "http");
	if (code) {
		mhd_status = (unsigned)strtoul(code + 17, NULL, 10);
		new_request_id(mhd_id);
		cJSON_AddStringToObject(line, "request_id", mhd_id);
		sjson_add_int64(line, "status", mhd_status);
	}
	cJSON_AddStringToObject(line, "detail", msg);
	log_line(line);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && n < (1 << 20) && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		} else if (buf) {
			buf[n] = '\0';
		}
	}
	fclose(f);
	return buf;
}

int server_start(struct server *srv, unsigned *port)
{
	struct hangard_config *cfg = srv->cfg;
	struct sockaddr_storage ss;
	struct MHD_OptionItem opts[16];
	/*
	 * Turbo: libmicrohttpd reads a new connection and writes an answer at
	 * once instead of first waiting for epoll to report the socket ready,
	 * which takes a loop iteration (and, on a busy machine, a scheduling
	 * delay) out of every request.
	 */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
			 MHD_USE_ERROR_LOG | MHD_USE_TURBO;
	size_t n = 0;

	hangard = srv;
	/* First, so that libmicrohttpd's complaints about the options after it come here too. */
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL };
	memset(&ss, 0, sizeof(ss));
	if (strchr(cfg->addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)cfg->port);
		if (inet_pton(AF_INET6, cfg->addr, &s6->sin6_addr) != 1)
			goto bad_addr;
		flags |= MHD_USE_IPv6;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)cfg->port);
		if (inet_pton(AF_INET, cfg->addr, &s4->sin_addr) != 1)
			goto bad_addr;
	}
	if (cfg->tls_cert || cfg->tls_key) {
		if (!cfg->tls_cert || !cfg->tls_key) {
			fprintf(stderr, "hangard: HANGARD_TLS_CERT and HANGARD_TLS_KEY go together\n");
			return -1;
		}
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			fprintf(stderr, "hangard: this libmicrohttpd has no TLS support\n");
			return -1;
		}
		tls_cert_pem = slurp(cfg->tls_cert);
		tls_key_pem = slurp(cfg->tls_key);
		if (!tls_cert_pem || !tls_key_pem) {
			fprintf(stderr, "hangard: cannot read %s\n", tls_cert_pem ? cfg->tls_key : cfg->tls_cert);
			return -1;
		}
		flags |= MHD_USE_TLS;
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, tls_cert_pem };
		opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, tls_key_pem };
	}
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, &ss };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)cfg->threads, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)cfg->max_connections, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)cfg->idle_timeout_s, NULL };
	/* Twice the limit: room for hangard to see, and answer, what is over it (over_header_limit). */
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)(2 * cfg->header_limit), NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_target, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL };
	opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

	n_workers = cfg->workers;
	workers = calloc(n_workers, sizeof(*workers));
	if (!workers)
		return -1;
	for (unsigned i = 0; i < n_workers; i++)
		if (pthread_create(&workers[i], NULL, worker_main, NULL) != 0) {
			n_workers = i;
			fprintf(stderr, "hangard: cannot start workers\n");
			return -1;
		}
	daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!daemon_) {
		fprintf(stderr, "hangard: cannot listen on %s port %u\n", cfg->addr, cfg->port);
		return -1;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : cfg->port;
	return 0;

bad_addr:
	fprintf(stderr, "hangard: HANGARD_ADDR %s is not an IP address\n", cfg->addr);
	return -1;
}

/* Waits until no request is in flight or the deadline passes; 0 when idle. */
static int wait_idle(int64_t deadline_us)
{
	int rc = 0;
	pthread_mutex_lock(&pool_lock);
	while (active > 0) {
		int64_t left = deadline_us - clock_mono_us();
		struct timespec ts;
		if (left <= 0) {
			rc = -1;
			break;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		if (left > 100000)
			left = 100000;
		ts.tv_nsec += (long)(left * 1000);
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&idle_cond, &pool_lock, &ts);
	}
	pthread_mutex_unlock(&pool_lock);
	return rc;
}

void server_stop(struct server *srv)
{
	cJSON *line;
	int clean;

	srv->stopping = 1;
	if (daemon_) {
		MHD_socket fd = MHD_quiesce_daemon(daemon_);
		if (fd != MHD_INVALID_SOCKET)
			close(fd);
	}
	/* Event streams and forwarded streams never end on their own: end them first. */
	events_close_all();
	edge_close_all();
	clean = wait_idle(clock_mono_us() + (int64_t)srv->cfg->shutdown_s * 1000000) == 0;
	if (!clean) {
		/* Past the bound: commands in flight are cancelled (their cancel
		 * callbacks read stopping == 2) and get a few seconds to answer. */
		srv->stopping = 2;
		clean = wait_idle(clock_mono_us() + 5000000) == 0;
	}
	line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "msg", clean ? "stopped" : "stopped with requests in flight");
	log_line(line);

	pthread_mutex_lock(&pool_lock);
	pool_quit = 1;
	pthread_cond_broadcast(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
	if (clean) {
		for (unsigned i = 0; i < n_workers; i++)
			pthread_join(workers[i], NULL);
		if (daemon_)
			MHD_stop_daemon(daemon_);
		free(workers);
		free(tls_cert_pem);
		free(tls_key_pem);
		edge_cache_clear(); /* the sandboxes' tokens it holds */
	}
	/* Otherwise a worker is still inside the library: stopping the daemon
	 * under a suspended connection is undefined, so the process exits with
	 * them, as the bound promised. */
	daemon_ = NULL;
}
