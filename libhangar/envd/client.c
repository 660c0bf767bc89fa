/*
 * The envd client (client.h) on the HTTP layer (net/net.h).
 *
 * Every request is one struct xfer: the net request and its result, and the
 * decoder the response body goes to (decode.h). The body is consumed as it
 * arrives (never buffered by curl), so every limit is applied before the
 * bytes are kept: a hostile daemon can make a call fail, never make us
 * allocate more than the limit that applies.
 *
 * Connections are reused through the client's net_pool of easy handles, not
 * through curl's shared connection cache, which curl documents as unsafe
 * between concurrent threads (curl KNOWN_BUGS "A shared connection cache is
 * not thread-safe", still so in 7.88): see net/net.c.
 *
 * Errors: callbacks run on the calling thread (the transfer is synchronous),
 * so the decoders report with herr() right where the problem is seen and
 * the code is remembered in x->fail; the outcome of the transfer is then
 * decided in one place, xfer_perform(), from the net layer's classification.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "decode.h"
#include "core/internal.h"
#include "core/module.h"
#include "net/net.h"
#include "util/pjson.h"
#include "util/sjson.h"

#define POOL_MAX 32                     /* idle easy handles kept */
#define ERRBODY_MAX (64u << 10)         /* body of an error answer we look at */
#define WRITE_ANSWER_MAX (1u << 20)     /* POST /files answer: a small JSON array */

struct envd_client {
	struct net_pool *pool;
};

int envd_client_new(struct envd_client **out)
{
	struct envd_client *c;
	int rc;

	HCHECK_ARG(out, "out");
	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((rc = net_pool_new(&c->pool, POOL_MAX)) != 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void envd_client_free(struct envd_client *c)
{
	if (!c)
		return;
	net_pool_free(c->pool);
	free(c);
}

/* ---- the context's client ------------------------------------------------- */

/* Made on first use: a context that never reaches a sandbox never pays for a pool. */
struct envd_module_state {
	pthread_mutex_t mu;
	struct envd_client *client;
};

static int envd_module_open(hangar_ctx *ctx, void *state)
{
	struct envd_module_state *m = state;

	(void)ctx;
	pthread_mutex_init(&m->mu, NULL);
	return 0;
}

static void envd_module_close(hangar_ctx *ctx, void *state)
{
	struct envd_module_state *m = state;

	(void)ctx;
	envd_client_free(m->client);
	pthread_mutex_destroy(&m->mu);
}

const struct hmodule envd_module = { "envd", sizeof(struct envd_module_state), envd_module_open, envd_module_close,
				     NULL };

struct envd_client *envd_client_of(hangar_ctx *ctx)
{
	struct envd_module_state *m = hctx_module(ctx, &envd_module);
	struct envd_client *c;

	pthread_mutex_lock(&m->mu);
	if (!m->client && envd_client_new(&m->client) != 0)
		m->client = NULL;
	c = m->client;
	pthread_mutex_unlock(&m->mu);
	if (!c)
		herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot set up the envd client");
	return c;
}

/* ---- one transfer ---------------------------------------------------------- */

enum xfer_kind {
	XK_UNARY,       /* body: one JSON message, capped at ENVD_MAX_UNARY */
	XK_STREAM,      /* body: envelopes, each handed to the caller */
	XK_FILE_MEM,    /* GET /files into memory, capped at the caller's limit */
	XK_FILE_FD,     /* GET /files into an fd */
	XK_WRITE,       /* POST /files: a small JSON answer */
	XK_HEALTH,      /* GET /health: no body expected */
	XK_INFO,        /* GET /hangar/v1/info: a small JSON answer */
	XK_ARCHIVE_GET, /* GET /hangar/v1/archive: the body to the caller's sink */
	XK_ARCHIVE_PUT, /* PUT /hangar/v1/archive: a body from the caller, a small JSON answer */
};

struct xfer {
	struct envd_client *c;
	const struct envd_call *call;
	struct envd_status *st;
	enum xfer_kind kind;
	const char *what;               /* names the call in messages: method or route */
	struct net_request rq;
	struct net_result res;
	char *url;
	char *reqbody;                  /* owned request body, if any */

	/* how the callbacks ended it */
	int fail;                       /* a HANGAR_E* code, already reported */
	int cancelled;                  /* the stream's callback asked to stop */

	struct envd_stream_dec sdec;    /* XK_STREAM */
	struct envd_file_dec fdec;      /* XK_FILE_* */

	/* GET /hangar/v1/archive */
	envd_sink sink;
	void *sink_payload;
	char selection[8];

	/* PUT /hangar/v1/archive: the body from the caller */
	ssize_t (*source)(void *payload, char *buf, size_t len);
	void *source_payload;

	/* POST /files from an fd */
	int fd;
	off_t up_start;
	int64_t up_size;                /* -1: unknown, sent chunked */
	int64_t up_sent;
};

static int xfail(struct xfer *x, int code)
{
	if (!x->fail)
		x->fail = code;
	return -1;
}

static int xfer_success_status(const struct xfer *x)
{
	return x->res.http_status == 200 || (x->kind == XK_HEALTH && x->res.http_status == 204);
}

static int is_file_get(const struct xfer *x)
{
	return x->kind == XK_FILE_MEM || x->kind == XK_FILE_FD;
}

static int cancel_cb(void *ud)
{
	const struct xfer *x = ud;

	return x->call->cancel && x->call->cancel(x->call->cancel_arg);
}

/* The answer's headers are in (and passed the net layer's checks). */
static int answer_cb(void *ud, const struct net_result *res)
{
	struct xfer *x = ud;
	int rc;

	if (res->http_status != 200)
		return 0; /* an error body is read bounded, whatever it claims */
	if (x->kind == XK_STREAM)
		x->sdec.http_status = res->http_status;
	if (is_file_get(x) &&
	    (rc = envd_file_dec_begin(&x->fdec, res->http_status, res->encoding, res->encoding_name,
				      res->content_length)) != 0)
		return xfail(x, rc);
	return 0;
}

static int body_cb(void *ud, const char *data, size_t len)
{
	struct xfer *x = ud;
	int rc;

	if (x->res.http_status != 200)
		return 0; /* another 2xx: not envd's answer; its body is of no use */
	if (x->kind == XK_ARCHIVE_GET) {
		if ((rc = x->sink(x->sink_payload, data, len)) != 0)
			return xfail(x, rc);
		return 0;
	}
	if (x->kind == XK_STREAM) {
		if (envd_stream_dec_feed(&x->sdec, data, len) == 0)
			return 0;
		if (x->sdec.stopped)
			x->cancelled = 1;
		else
			xfail(x, x->sdec.fail);
		return -1;
	}
	if ((rc = envd_file_dec_feed(&x->fdec, data, len)) != 0)
		return xfail(x, rc);
	return 0;
}

/* ---- request bodies from an fd ---------------------------------------------- */

static ssize_t read_cb(void *ud, char *buf, size_t want)
{
	struct xfer *x = ud;
	ssize_t got;

	if (x->up_size >= 0) {
		if (x->up_sent >= x->up_size)
			return 0;
		if ((int64_t)want > x->up_size - x->up_sent)
			want = (size_t)(x->up_size - x->up_sent);
	}
	do
		got = read(x->fd, buf, want);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return xfail(x, herr_os(HANGAR_EOS, errno, "%s: reading fd %d", x->what, x->fd));
	if (got == 0 && x->up_size >= 0)
		/* We announced a Content-Length; sending less would leave envd waiting. */
		return xfail(x, herr(HANGAR_EFILE, HANGAR_ERRCAT_OS, "%s: the file shrank while it was sent", x->what));
	x->up_sent += got;
	return got;
}

static int seek_cb(void *ud, int64_t offset)
{
	struct xfer *x = ud;

	if (x->up_size < 0 || lseek(x->fd, x->up_start + (off_t)offset, SEEK_SET) < 0)
		return -1;
	x->up_sent = offset;
	return 0;
}

/* ---- setting a transfer up ---------------------------------------------------- */

static int valid_header_value(const char *s)
{
	for (; *s; s++)
		if (*s == '\r' || *s == '\n')
			return 0;
	return 1;
}

static int add_auth_headers(struct xfer *x)
{
	const struct envd_endpoint *ep = x->call->ep;
	const char *user = x->call->user ? x->call->user : ep->user;
	int rc = 0;

	if (ep->access_token && *ep->access_token) {
		if (!valid_header_value(ep->access_token))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: access token");
		rc = net_header_add(&x->rq, "X-Access-Token: %s", ep->access_token);
	}
	for (const char *const *h = ep->headers; !rc && h && *h; h++) {
		if (!valid_header_value(*h) || !strchr(*h, ':'))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: extra header line");
		rc = net_header_add(&x->rq, "%s", *h);
	}
	if (!rc && user && *user) {
		/* envd picks the user from Basic auth: "<user>:" with no password. */
		char *pair = NULL, *b64;

		if (asprintf(&pair, "%s:", user) < 0)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		b64 = pjson_b64_encode(pair, strlen(pair));
		free(pair);
		if (!b64)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		rc = net_header_add(&x->rq, "Authorization: Basic %s", b64);
		free(b64);
	}
	return rc;
}

/* X-Hangar-Selection of an archive answer: "git" or "all". */
static void header_cb(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct xfer *x = ud;
	static const char hdr[] = "X-Hangar-Selection";

	if (!name) {
		x->selection[0] = '\0';
		return;
	}
	if (nlen == sizeof(hdr) - 1 && strncasecmp(name, hdr, nlen) == 0) {
		if (vlen == 3 && !memcmp(value, "git", 3))
			strcpy(x->selection, "git");
		else if (vlen == 3 && !memcmp(value, "all", 3))
			strcpy(x->selection, "all");
	}
}

static int xfer_begin(struct xfer *x, struct envd_client *c, const struct envd_call *call, enum xfer_kind kind,
		      const char *what, struct envd_status *st)
{
	memset(x, 0, sizeof(*x));
	net_request_init(&x->rq);
	x->fd = -1;
	x->up_size = -1;
	x->kind = kind;
	x->what = what;
	x->st = st;
	x->call = call;
	x->c = c;
	envd_stream_dec_init(&x->sdec, what, 0, NULL, NULL);
	envd_file_dec_init(&x->fdec, what, 0, -1);
	if (st)
		memset(st, 0, sizeof(*st));
	HCHECK_ARG(c, "client");
	HCHECK_ARG(call && call->ep && call->ep->base_url && *call->ep->base_url, "call endpoint");
	x->rq.unix_socket = call->ep->socket_path;
	x->rq.extra_ca_file = call->ep->ca_file;
	x->rq.timeout_ms = call->deadline_ms > 0 ? call->deadline_ms : 0;
	x->rq.stall_ms = call->stall_ms > 0 ? call->stall_ms : 0;
	x->rq.cancel = cancel_cb;
	x->rq.on_answer = answer_cb;
	x->rq.max_error_body = ERRBODY_MAX;
	x->rq.ud = x;
	switch (kind) {
	case XK_UNARY: x->rq.max_body = ENVD_MAX_UNARY; break;
	case XK_WRITE: x->rq.max_body = WRITE_ANSWER_MAX; break;
	case XK_HEALTH: x->rq.max_body = ERRBODY_MAX; break; /* no body expected; a bounded one is tolerated */
	case XK_INFO: x->rq.max_body = ERRBODY_MAX; break;
	case XK_ARCHIVE_PUT: x->rq.max_body = WRITE_ANSWER_MAX; break;
	case XK_ARCHIVE_GET:
		x->rq.on_body = body_cb;
		x->rq.on_header = header_cb;
		break;
	case XK_STREAM: x->rq.on_body = body_cb; break;
	case XK_FILE_MEM:
	case XK_FILE_FD:
		/* We inflate /files ourselves, so the limit applies to the output. */
		x->rq.allow_gzip = 1;
		x->rq.on_body = body_cb;
		break;
	}
	return add_auth_headers(x);
}

/* base_url + path (+ ?query), without doubling the slash. */
static int set_url(struct xfer *x, const char *path, const char *query)
{
	const char *base = x->call->ep->base_url;
	size_t blen = strlen(base);
	struct hbuf url = HBUF_INIT;

	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	if (hbuf_put(&url, base, blen) < 0 || hbuf_printf(&url, "%s%s%s%s", path[0] == '/' ? "" : "/", path,
							    query ? "?" : "", query ? query : "") < 0) {
		hbuf_free(&url);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	free(x->url);
	x->url = url.data;
	x->rq.url = x->url;
	return 0;
}

static void xfer_end(struct xfer *x)
{
	net_request_fini(&x->rq);
	net_result_fini(&x->res);
	free(x->url);
	free(x->reqbody);
	envd_stream_dec_free(&x->sdec);
	envd_file_dec_free(&x->fdec);
}

/* ---- outcome ------------------------------------------------------------------ */

static int timeout_error(struct xfer *x)
{
	if (x->st)
		x->st->timed_out = 1;
	switch (x->res.timeout) {
	case NET_TIMEOUT_CONNECT:
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "%s: connecting to envd took longer than %lld ms",
			    x->what, (long long)x->res.connect_timeout_ms);
	case NET_TIMEOUT_STALL:
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "%s: nothing moved for %lld ms", x->what,
			    (long long)x->call->stall_ms);
	default:
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET,
			    "%s: no complete answer within the call deadline of %lld ms", x->what,
			    (long long)x->call->deadline_ms);
	}
}

static int protocol_error(struct xfer *x)
{
	const struct net_result *res = &x->res;
	int status = res->http_status;

	switch (res->protocol) {
	case NET_PROTO_ENCODED:
		if (is_file_get(x))
			return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, status, NULL,
					 "%s: unsupported Content-Encoding %s", x->what, res->encoding_name);
		/* We never offer compression on RPCs; an answer that uses it anyway is not envd. */
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, status, NULL,
				 "%s: envd sent a compressed answer (%s) that was not asked for", x->what,
				 res->encoding_name);
	case NET_PROTO_OVERSIZED:
		if (res->content_length >= 0 && (uint64_t)res->content_length > x->rq.max_body)
			return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, status, NULL,
					 "%s: answer of %lld bytes is over the %zu-byte limit", x->what,
					 (long long)res->content_length, x->rq.max_body);
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, status, NULL,
				 "%s: answer over the %zu-byte limit", x->what, x->rq.max_body);
	case NET_PROTO_NOT_HTTP:
		/* Something answered, but not in HTTP/1.1 (HTTP/0.9 garbage, a weird status line). */
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "%s: not an HTTP answer: %s", x->what,
			    res->detail);
	default:
		if (x->kind == XK_STREAM && x->sdec.ended)
			return 0; /* the end message counts, whatever happened to the connection after it */
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, status, NULL, "%s: %s: %s", x->what,
				 x->kind == XK_STREAM ? "stream ended without an end message" : "answer broke off",
				 res->detail);
	}
}

/*
 * Runs the transfer and reports everything but the meaning of an HTTP error
 * status, which depends on the route. Returns 0 when an answer is at hand
 * (a success status with its whole body, or an error status with the start of
 * its body: see xfer_success_status), ENVD_CANCELLED, or a reported code.
 */
static int xfer_perform(struct xfer *x)
{
	enum net_class cls = net_perform(x->c->pool, &x->rq, &x->res);

	if (x->st)
		x->st->http_status = x->res.http_status;
	if (x->cancelled || cls == NET_CANCELLED)
		return ENVD_CANCELLED;
	if (x->fail)
		return x->fail;
	switch (cls) {
	case NET_OK:
	case NET_HTTP_STATUS:
		return 0;
	case NET_TIMEOUT:
		return timeout_error(x);
	case NET_UNREACHABLE:
	case NET_DROPPED:
		if (x->st)
			x->st->transport_failed = 1;
		if (!x->call->ep->socket_path)
			/* The address, so a certificate error names the host it is about. */
			return herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "%s: envd at %s unreachable: %s", x->what,
				    x->call->ep->base_url, x->res.detail);
		return herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "%s: envd unreachable: %s", x->what,
			    x->res.detail);
	case NET_PROTOCOL:
		return protocol_error(x);
	case NET_LOCAL:
		if (x->res.out_of_memory)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "%s: out of memory", x->what);
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "%s: cannot reach envd at this address: %s",
			    x->what, x->res.detail);
	default:
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "%s: the transfer stopped (%s)", x->what,
			    net_class_name(cls));
	}
}

/*
 * A sandbox's answer as strict JSON (one value, no duplicate members, valid
 * UTF-8), or NULL: a hostile envd could otherwise say two things in one
 * answer and let cJSON pick. An error body that is not strict is ignored
 * and the status speaks; a success answer that is not is a protocol error.
 */
static cJSON *answer_json(struct xfer *x)
{
	char err[160];

	return sjson_parse(x->res.body.data ? x->res.body.data : "", x->res.body.len, 0, err, sizeof(err));
}

/* The same for an answer that must be a JSON object: NULL with HANGAR_EPROTOCOL saying why. */
static cJSON *answer_object(struct xfer *x)
{
	char err[160];
	cJSON *j = sjson_parse(x->res.body.data ? x->res.body.data : "", x->res.body.len, 0, err, sizeof(err));

	if (!j) {
		herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, x->res.http_status, NULL,
			  "%s: the answer is not strict JSON: %s", x->what, err);
		return NULL;
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, x->res.http_status, NULL,
			  "%s: the answer is not a JSON object", x->what);
		return NULL;
	}
	return j;
}

/*
 * An RPC answered with an HTTP error. Its body is Connect's {"code":"…",
 * "message":…}; other bodies (envd's token middleware sends {"code":401,…},
 * a proxy sends HTML) leave the status to speak, as Connect clients do.
 */
static int rpc_http_error(struct xfer *x)
{
	enum connect_code code = connect_code_from_http_status(x->res.http_status);
	const char *message = NULL;
	cJSON *j = NULL;
	int rc;

	if (x->res.body.len)
		j = answer_json(x);
	if (cJSON_IsObject(j)) {
		const cJSON *jc = cJSON_GetObjectItemCaseSensitive(j, "code");
		const cJSON *jm = cJSON_GetObjectItemCaseSensitive(j, "message");

		if (cJSON_IsString(jc))
			code = connect_code_from_name(jc->valuestring);
		if (cJSON_IsString(jm))
			message = jm->valuestring;
	}
	rc = envd_connect_error(x->what, x->res.http_status, code, message, x->st ? &x->st->code : NULL);
	cJSON_Delete(j);
	return rc;
}

static int files_code_for(long status)
{
	switch (status) {
	case 400: /* a directory, a bad path */
	case 404:
	case 500: /* envd's own stat/open/mkdir failures: the path is unusable */
		return HANGAR_EFILE;
	case 401:
	case 403:
		return HANGAR_EREFUSED;
	case 406:
		return HANGAR_EPROTOCOL;
	case 429:
	case 507:
		return HANGAR_ECAPACITY;
	default:
		return status >= 500 ? HANGAR_EUNAVAILABLE : HANGAR_EPROTOCOL;
	}
}

/*
 * /files answered with an HTTP error: envd's REST shape {"code":<int>,
 * "message":…}, or Connect's when its user middleware refused us.
 */
static int files_http_error(struct xfer *x)
{
	const char *message = NULL, *provider_code = NULL;
	int status = x->res.http_status;
	char msg[ENVD_MSG_MAX];
	cJSON *j = NULL;
	int rc;

	if (x->res.body.len)
		j = answer_json(x);
	if (cJSON_IsObject(j)) {
		const cJSON *jc = cJSON_GetObjectItemCaseSensitive(j, "code");
		const cJSON *jm = cJSON_GetObjectItemCaseSensitive(j, "message");

		if (cJSON_IsString(jm))
			message = jm->valuestring;
		if (cJSON_IsString(jc)) {
			enum connect_code code = connect_code_from_name(jc->valuestring);

			provider_code = connect_code_name(code);
			if (x->st)
				x->st->code = code;
		}
	}
	if (message && *message) {
		envd_clean_message(msg, sizeof(msg), message);
		rc = herr_http(files_code_for(status), HANGAR_ERRCAT_SANDBOX, status, provider_code, "%s: %s",
			       x->what, msg);
	} else {
		rc = herr_http(files_code_for(status), HANGAR_ERRCAT_SANDBOX, status, provider_code,
			       "%s: envd answered HTTP %d", x->what, status);
	}
	cJSON_Delete(j);
	return rc;
}

/* ---- RPCs ------------------------------------------------------------------------ */

static int valid_method(const char *m)
{
	if (!m || !*m)
		return 0;
	for (; *m; m++)
		if (!((*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') || (*m >= '0' && *m <= '9') ||
		      *m == '.' || *m == '/' || *m == '_' || *m == '-'))
			return 0;
	return 1;
}

static int rpc_setup(struct xfer *x, const char *method, const char *content_type)
{
	int rc = set_url(x, method, NULL);

	x->rq.method = "POST";
	if (!rc)
		rc = net_header_add(&x->rq, "Content-Type: %s", content_type);
	/* Compression is never offered: an answer we cannot cap before inflating is not worth it. */
	if (!rc)
		rc = net_header_add(&x->rq, "Connect-Accept-Encoding: identity");
	if (!rc && x->call->connect_timeout_ms > 0)
		rc = net_header_add(&x->rq, "Connect-Timeout-Ms: %lld", (long long)x->call->connect_timeout_ms);
	return rc;
}

/*
 * The request body, or NULL with the error set. cJSON writes the bytes of a
 * string as they are, so text that is not UTF-8 and slipped past a public
 * call's own check is refused here rather than sent: a sandbox is never
 * asked to guess what it means.
 */
static char *request_json(struct xfer *x, const cJSON *req)
{
	char *json = req ? cJSON_PrintUnformatted(req) : strdup("{}");

	if (!json) {
		herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		return NULL;
	}
	if (!sjson_text_ok(json, strlen(json))) {
		free(json);
		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
		     "invalid argument: %s: the request holds text that is not valid UTF-8", x->what);
		return NULL;
	}
	return json;
}

int envd_unary(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
	       cJSON **resp, struct envd_status *st)
{
	struct xfer x;
	cJSON *j;
	int rc;

	if (resp)
		*resp = NULL;
	rc = xfer_begin(&x, c, call, XK_UNARY, method ? method : "envd call", st);
	if (!rc && (!resp || !valid_method(method)))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s", resp ? "method" : "resp");
	if (!rc)
		rc = rpc_setup(&x, method, "application/json");
	if (!rc)
		rc = net_header_add(&x.rq, "Connect-Protocol-Version: 1");
	if (!rc && !(x.reqbody = request_json(&x, req)))
		rc = hangar_error_last()->code;
	if (!rc) {
		x.rq.body = x.reqbody;
		x.rq.body_len = strlen(x.reqbody);
		x.rq.has_body = 1;
		rc = xfer_perform(&x);
	}
	if (rc == 0 && !xfer_success_status(&x))
		rc = rpc_http_error(&x);
	if (rc == 0) {
		j = answer_object(&x);
		if (j)
			*resp = j;
		else
			rc = HANGAR_EPROTOCOL;
	}
	xfer_end(&x);
	return rc;
}

int envd_stream(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
		envd_msg_fn cb, void *cbctx, struct envd_status *st)
{
	struct xfer x;
	char *json = NULL;
	size_t len;
	int rc;

	rc = xfer_begin(&x, c, call, XK_STREAM, method ? method : "envd stream", st);
	x.sdec.cb = cb;
	x.sdec.cbctx = cbctx;
	if (!rc && (!cb || !valid_method(method)))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s", cb ? "method" : "cb");
	if (!rc)
		rc = rpc_setup(&x, method, "application/connect+json");
	if (!rc && call->keepalive_sec > 0)
		rc = net_header_add(&x.rq, "Keepalive-Ping-Interval: %d", call->keepalive_sec);
	/* The request of a server stream is exactly one envelope. */
	if (!rc && !(json = request_json(&x, req)))
		rc = hangar_error_last()->code;
	if (!rc && !(x.reqbody = malloc(CONNECT_ENVELOPE_HEADER + strlen(json))))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc) {
		len = strlen(json);
		connect_envelope_header((uint8_t *)x.reqbody, 0, (uint32_t)len);
		memcpy(x.reqbody + CONNECT_ENVELOPE_HEADER, json, len);
		x.rq.body = x.reqbody;
		x.rq.body_len = CONNECT_ENVELOPE_HEADER + len;
		x.rq.has_body = 1;
		rc = xfer_perform(&x);
	}
	free(json);
	if (rc == 0 && !xfer_success_status(&x))
		rc = rpc_http_error(&x); /* e.g. 401 from the token check, 404 from an older envd */
	else if (rc == 0) {
		rc = envd_stream_dec_finish(&x.sdec);
		if (st && x.sdec.ended)
			st->code = x.sdec.code;
	}
	xfer_end(&x);
	return rc;
}

/* ---- /files ------------------------------------------------------------------------ */

/*
 * Text that goes into a URL's query is UTF-8, as into a request's JSON:
 * percent-escaping would carry any bytes, and the sandbox would have to
 * guess what they mean.
 */
static int url_text_ok(struct xfer *x, const char *const *texts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (texts[i] && !sjson_text_ok(texts[i], strlen(texts[i])))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
				    "invalid argument: %s: the request holds text that is not valid UTF-8", x->what);
	return 0;
}

/* ?path=<path>[&username=<user>], escaped. */
static int files_setup(struct xfer *x, const char *path)
{
	const char *user = x->call->user ? x->call->user : x->call->ep->user;
	char *epath, *euser = NULL;
	struct hbuf q = HBUF_INIT;
	int rc = url_text_ok(x, (const char *const[]){ path, user }, 2);

	if (rc)
		return rc;
	epath = net_escape(path);
	if (user && *user)
		euser = net_escape(user);
	if (!epath || (user && *user && !euser) ||
	    hbuf_printf(&q, "path=%s%s%s", epath, euser ? "&username=" : "", euser ? euser : "") < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc)
		rc = set_url(x, "/files", q.data);
	free(epath);
	free(euser);
	hbuf_free(&q);
	return rc;
}

/* GET /files into the file decoder; the caller has set it up. */
static int files_get(struct xfer *x, const char *path)
{
	int rc;

	if (!path || !*path)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: path");
	rc = files_setup(x, path);
	/* gzip is offered because we inflate it ourselves, under the limit. */
	if (!rc)
		rc = net_header_add(&x->rq, "Accept-Encoding: gzip");
	if (!rc)
		rc = xfer_perform(x);
	if (rc == 0 && !xfer_success_status(x))
		rc = files_http_error(x);
	if (rc == 0)
		rc = envd_file_dec_finish(&x->fdec);
	return rc;
}

int envd_file_read(struct envd_client *c, const struct envd_call *call, const char *path, size_t limit,
		   struct hbuf *out, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_FILE_MEM, "GET /files", st);
	if (!rc && !out)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: out");
	x.fdec.limit = limit;
	if (!rc)
		rc = files_get(&x, path);
	/* An empty file still comes back as a (NUL-terminated) buffer. */
	if (!rc && !x.fdec.body.data && hbuf_reserve(&x.fdec.body, 0) < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc) {
		hbuf_free(out);
		*out = x.fdec.body;
		memset(&x.fdec.body, 0, sizeof(x.fdec.body));
	}
	xfer_end(&x);
	return rc;
}

int envd_file_download(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		       uint64_t limit, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_FILE_FD, "GET /files", st);
	if (!rc && fd < 0)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: fd");
	x.fdec.fd = fd;
	x.fdec.limit = limit && limit < SIZE_MAX ? (size_t)limit : SIZE_MAX;
	if (!rc)
		rc = files_get(&x, path);
	xfer_end(&x);
	return rc;
}

/* POST /files with the body set up by the caller; the answer is a JSON array. */
static int files_post(struct xfer *x, const char *path)
{
	cJSON *j;
	int rc;

	if (!path || !*path)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: path");
	x->rq.method = "POST";
	rc = files_setup(x, path);
	if (!rc)
		rc = net_header_add(&x->rq, "Content-Type: application/octet-stream");
	if (!rc)
		rc = xfer_perform(x);
	if (rc == 0 && !xfer_success_status(x))
		return files_http_error(x);
	if (rc != 0)
		return rc;
	/* envd sets no Content-Type here (Go sniffs text/plain): parse regardless. */
	j = answer_json(x);
	rc = cJSON_IsArray(j) ? 0
			      : herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, x->res.http_status, NULL,
					  "%s: the answer is not a strict JSON array", x->what);
	cJSON_Delete(j);
	return rc;
}

int envd_file_write(struct envd_client *c, const struct envd_call *call, const char *path, const void *data,
		    size_t len, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_WRITE, "POST /files", st);
	if (!rc && !data && len)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: data");
	if (!rc) {
		x.rq.body = data;
		x.rq.body_len = len;
		x.rq.has_body = 1;
		rc = files_post(&x, path);
	}
	xfer_end(&x);
	return rc;
}

/* The size to announce: what is left of a regular file from its offset, else -1 (chunked). */
static void upload_size(struct xfer *x)
{
	struct stat sb;
	off_t pos;

	if (fstat(x->fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	pos = lseek(x->fd, 0, SEEK_CUR);
	if (pos < 0)
		return;
	x->up_start = pos;
	x->up_size = sb.st_size > pos ? (int64_t)(sb.st_size - pos) : 0;
}

int envd_file_upload(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		     struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_WRITE, "POST /files", st);
	if (!rc && fd < 0)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: fd");
	x.fd = fd;
	if (!rc) {
		upload_size(&x);
		x.rq.read = read_cb;
		x.rq.seek = seek_cb;
		x.rq.upload_size = x.up_size;
		rc = files_post(&x, path);
	}
	xfer_end(&x);
	return rc;
}

int envd_health(struct envd_client *c, const struct envd_call *call, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_HEALTH, "GET /health", st);
	if (!rc)
		rc = set_url(&x, "/health", NULL);
	if (!rc)
		rc = xfer_perform(&x);
	/* Anything but 204/200 (a 502 from an edge proxy, say) means not serving. */
	if (rc == 0 && !xfer_success_status(&x))
		rc = herr_http(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_SANDBOX, x.res.http_status, NULL,
			       "%s: envd answered HTTP %d", x.what, x.res.http_status);
	xfer_end(&x);
	return rc;
}

/* ---- hangar-envd's own routes ------------------------------------------------------ */

int envd_hangar_info(struct envd_client *c, const struct envd_call *call, int *archive, struct envd_status *st)
{
	struct xfer x;
	int rc;

	*archive = 0;
	rc = xfer_begin(&x, c, call, XK_INFO, "GET /hangar/v1/info", st);
	if (!rc)
		rc = set_url(&x, "/hangar/v1/info", NULL);
	if (!rc)
		rc = xfer_perform(&x);
	if (rc == 0 && x.res.http_status == 200) {
		cJSON *j = answer_json(&x);
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "archive");

		if (cJSON_IsNumber(a) && a->valuedouble >= 1 && a->valuedouble < 1000)
			*archive = (int)a->valuedouble;
		cJSON_Delete(j);
	}
	xfer_end(&x);
	return rc == ENVD_CANCELLED ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "GET /hangar/v1/info: cancelled")
				    : rc;
}

/* ?path=<ws>&<key>=<value>[&username=<user>], escaped. */
static int archive_url(struct xfer *x, const char *ws, const char *key, const char *value)
{
	const char *user = x->call->user ? x->call->user : x->call->ep->user;
	char *epath, *evalue, *euser = NULL;
	struct hbuf q = HBUF_INIT;
	int rc = url_text_ok(x, (const char *const[]){ ws, value, user }, 3);

	if (rc)
		return rc;
	epath = net_escape(ws);
	evalue = net_escape(value);
	if (user && *user)
		euser = net_escape(user);
	if (!epath || !evalue || (user && *user && !euser) ||
	    hbuf_printf(&q, "path=%s&%s=%s%s%s", epath, key, evalue, euser ? "&username=" : "", euser ? euser : "") < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc)
		rc = set_url(x, "/hangar/v1/archive", q.data);
	free(epath);
	free(evalue);
	free(euser);
	hbuf_free(&q);
	return rc;
}

static int archive_outcome(struct xfer *x, int rc)
{
	if (rc == ENVD_CANCELLED)
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "%s: cancelled", x->what);
	if (rc == 0 && !xfer_success_status(x)) {
		rc = files_http_error(x);
		if (x->res.http_status == 413)
			rc = herr_recode(HANGAR_ETOOLARGE);
		else if (x->res.http_status == 400 && x->kind == XK_ARCHIVE_PUT)
			rc = herr_recode(HANGAR_EREFUSED);
	}
	return rc;
}

int envd_archive_get(struct envd_client *c, const struct envd_call *call, const char *ws, const char *select,
		     envd_sink sink, void *payload, char selection[8], struct envd_status *st)
{
	struct xfer x;
	int rc;

	selection[0] = '\0';
	rc = xfer_begin(&x, c, call, XK_ARCHIVE_GET, "GET /hangar/v1/archive", st);
	if (!rc && (!ws || *ws != '/' || !sink))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: workspace or sink");
	x.sink = sink;
	x.sink_payload = payload;
	if (!rc)
		rc = archive_url(&x, ws, "select", select);
	if (!rc)
		rc = xfer_perform(&x);
	rc = archive_outcome(&x, rc);
	if (rc == 0 && !x.selection[0])
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "%s: no X-Hangar-Selection in the answer", x.what);
	if (rc == 0)
		memcpy(selection, x.selection, sizeof(x.selection));
	xfer_end(&x);
	return rc;
}

static ssize_t source_cb(void *ud, char *buf, size_t want)
{
	struct xfer *x = ud;
	ssize_t n = x->source(x->source_payload, buf, want);

	if (n < 0)
		return xfail(x, hangar_error_last()->code ? hangar_error_last()->code : HANGAR_EOS);
	return n;
}

int envd_archive_put(struct envd_client *c, const struct envd_call *call, const char *ws, const char *mode,
		     ssize_t (*source)(void *payload, char *buf, size_t len), void *payload,
		     struct envd_archive_counts *counts, struct envd_status *st)
{
	struct xfer x;
	int rc;

	memset(counts, 0, sizeof(*counts));
	rc = xfer_begin(&x, c, call, XK_ARCHIVE_PUT, "PUT /hangar/v1/archive", st);
	if (!rc && (!ws || *ws != '/' || !source))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: workspace or source");
	x.source = source;
	x.source_payload = payload;
	x.rq.method = "PUT";
	x.rq.read = source_cb;
	x.rq.upload_size = -1;
	/* A body that is read as it is made cannot be sent twice. */
	x.rq.fresh_connect = 1;
	/* Bulk: fewer, larger chunks and sends. */
	x.rq.upload_buffer = 1L << 20;
	if (!rc)
		rc = archive_url(&x, ws, "mode", mode);
	if (!rc)
		rc = net_header_add(&x.rq, "Content-Type: application/x-tar");
	if (!rc)
		rc = xfer_perform(&x);
	rc = archive_outcome(&x, rc);
	if (rc == 0) {
		cJSON *j = answer_object(&x);
		const char *keys[] = { "files", "dirs", "symlinks", "bytes" };
		uint64_t *dst[] = { &counts->files, &counts->dirs, &counts->symlinks, &counts->bytes };

		if (!j)
			rc = HANGAR_EPROTOCOL;
		for (int i = 0; rc == 0 && i < 4; i++) {
			const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);

			if (cJSON_IsNumber(v) && v->valuedouble >= 0)
				*dst[i] = (uint64_t)v->valuedouble;
		}
		cJSON_Delete(j);
	}
	xfer_end(&x);
	return rc;
}

int envd_file_fetch(struct envd_client *c, const struct envd_call *call, const char *path, uint64_t limit,
		    envd_sink sink, void *payload, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_FILE_FD, "GET /files", st);
	if (!rc && !sink)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: sink");
	x.fdec.sink = sink;
	x.fdec.sink_payload = payload;
	x.fdec.limit = limit && limit < SIZE_MAX ? (size_t)limit : SIZE_MAX;
	if (!rc)
		rc = files_get(&x, path);
	xfer_end(&x);
	return rc == ENVD_CANCELLED ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "GET /files: cancelled") : rc;
}

int envd_file_upload_from(struct envd_client *c, const struct envd_call *call, const char *path,
			  ssize_t (*source)(void *payload, char *buf, size_t len), void *payload,
			  struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_WRITE, "POST /files", st);
	if (!rc && !source)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: source");
	x.source = source;
	x.source_payload = payload;
	x.rq.read = source_cb;
	x.rq.upload_size = -1;
	x.rq.fresh_connect = 1;
	if (!rc)
		rc = files_post(&x, path);
	xfer_end(&x);
	return rc == ENVD_CANCELLED ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "POST /files: cancelled") : rc;
}
