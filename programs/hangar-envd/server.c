/*
 * The HTTP side of hangar-envd: routing, auth, CORS, Connect unary calls and
 * server streams on libmicrohttpd (one thread per connection).
 */
#define _GNU_SOURCE
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "buf.h"
#include "ckpt.h"
#include "envd.h"
#include "files.h"
#include "pjson.h"
#include "request.h"
#include "sjson.h"
#include "stream.h"

#define AUTH_FAILED_MESSAGE \
	"unauthorized access, please provide a valid access token or method signing if supported"

enum route {
	ROUTE_NONE,
	ROUTE_RPC,
	ROUTE_FILES_UPLOAD,
	ROUTE_CKPT_RESTORE,
	ROUTE_TOKEN,           /* POST /hangar/v1/token: its body is read first */
	ROUTE_DONE,            /* a response is queued or ready */
};

struct request_state {
	enum route route;
	const struct rpc_method *method;
	int streaming;
	struct hbuf body;
	int too_large;
	struct files_upload *upload;
	struct ckpt_restore *restore;
	struct envd_req req;
	char *url;
	struct MHD_Response *pending;   /* decided before the body was read */
	unsigned pending_status;
};

static struct MHD_Response *json_response(const char *json)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);

	if (resp)
		MHD_add_response_header(resp, "Content-Type", "application/json");
	return resp;
}

/* A Connect error for a unary call: status from the code, JSON body. */
static struct MHD_Response *connect_error(const struct rpc_error *err, unsigned *status)
{
	cJSON *o = cJSON_CreateObject();
	char *json;
	struct MHD_Response *resp;

	cJSON_AddStringToObject(o, "code", connect_code_name(err->code));
	if (err->message[0])
		cJSON_AddStringToObject(o, "message", err->message);
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	resp = json_response(json ? json : "{}");
	free(json);
	*status = (unsigned)connect_code_http_status(err->code);
	return resp;
}

static const char cors_expose[] =
	"Accept-Encoding, Content-Encoding, Connect-Accept-Encoding, Connect-Content-Encoding, "
	"Grpc-Encoding, Grpc-Accept-Encoding, Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, "
	"Location, Cache-Control, X-Content-Type-Options";

/*
 * Responses are held until the request body has been read (queuing one
 * earlier makes libmicrohttpd close the connection), except when a body
 * arrives for a request that was already refused.
 */
static __thread struct request_state *current;

struct query_check {
	char *msg;
	size_t msglen;
	int bad;
};

static enum MHD_Result query_arg_is_text(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
					 const char *value, size_t value_size)
{
	struct query_check *q = cls;

	(void)kind;
	if (!sjson_text_ok(key, key_size) || (value && !sjson_text_ok(value, value_size))) {
		snprintf(q->msg, q->msglen, "the query parameter %s holds a NUL or bytes that are not UTF-8",
			 sjson_text_ok(key, key_size) ? key : "(name)");
		q->bad = 1;
		return MHD_NO;
	}
	return MHD_YES;
}

/*
 * 1 when a query parameter, once percent-decoded, holds a NUL or is not
 * UTF-8 (msg says which): a path must never be cut at a %00.
 */
static int query_not_text(struct MHD_Connection *conn, char *msg, size_t msglen)
{
	struct query_check q = { msg, msglen, 0 };

	MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, query_arg_is_text, &q);
	return q.bad;
}

static enum MHD_Result queue_now(struct MHD_Connection *conn, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result r;

	if (!resp)
		return MHD_NO;
	if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin")) {
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
		MHD_add_response_header(resp, "Access-Control-Expose-Headers", cors_expose);
		MHD_add_response_header(resp, "Vary", "Origin");
	}
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, struct MHD_Response *resp)
{
	struct request_state *st = current;

	if (!resp)
		return MHD_NO;
	if (st && !st->pending) {
		st->pending = resp;
		st->pending_status = status;
		return MHD_YES;
	}
	return queue_now(conn, status, resp);
}

static enum MHD_Result flush_pending(struct request_state *st)
{
	struct MHD_Response *resp = st->pending;

	st->pending = NULL;
	return resp ? queue_now(st->req.conn, st->pending_status, resp) : MHD_YES;
}

static struct MHD_Response *empty_response(void)
{
	return MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
}

static struct MHD_Response *text_response(const char *text)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);

	if (resp)
		MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
	return resp;
}

static const struct rpc_method *find_method(const char *url)
{
	const struct rpc_method *tables[] = { process_methods, filesystem_methods };

	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct rpc_method *m = tables[t]; m->path; m++)
			if (strcmp(m->path, url) == 0)
				return m;
	return NULL;
}

/* "application/json; charset=utf-8" → matches "application/json". */
static int content_type_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	if (!ct || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static int parse_basic_user(const char *auth, char *out, size_t outsz)
{
	unsigned char *dec = NULL;
	size_t declen = 0, ulen;
	char *colon;

	if (!auth || strncasecmp(auth, "Basic ", 6) != 0)
		return 0;
	auth += 6;
	while (*auth == ' ')
		auth++;
	if (pjson_b64_decode(auth, strlen(auth), &dec, &declen) < 0)
		return 0;
	colon = memchr(dec, ':', declen);
	ulen = colon ? (size_t)(colon - (char *)dec) : declen;
	if (ulen == 0 || ulen >= outsz || memchr(dec, '\0', ulen)) {
		free(dec);
		return 0;
	}
	memcpy(out, dec, ulen);
	out[ulen] = '\0';
	free(dec);
	return 1;
}

static int parse_headers(struct request_state *st, struct rpc_error *err)
{
	struct envd_req *r = &st->req;
	const char *v;
	char user[64];

	r->timeout_ms = -1;
	v = envd_req_header(r, "Connect-Timeout-Ms");
	if (v) {
		char *end;
		long long ms;

		if (strlen(v) > 10 || !*v)
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: invalid timeout %s", v);
		ms = strtoll(v, &end, 10);
		if (*end || ms < 0)
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: invalid timeout %s", v);
		r->timeout_ms = ms;
	}
	r->keepalive_sec = ENVD_KEEPALIVE_DEFAULT;
	v = envd_req_header(r, "Keepalive-Ping-Interval");
	if (v) {
		char *end;
		long s = strtol(v, &end, 10);

		/* Upstream crashes on 0 or negative values; they mean "default" here. */
		if (!*end && end != v && s > 0)
			r->keepalive_sec = s > ENVD_KEEPALIVE_MAX ? ENVD_KEEPALIVE_MAX : (int)s;
	}
	v = envd_req_header(r, "Connect-Protocol-Version");
	if (v && strcmp(v, "1") != 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT,
				"connect-protocol-version must be \"1\": got \"%s\"", v);

	if (!parse_basic_user(envd_req_header(r, "Authorization"), user, sizeof(user)))
		snprintf(user, sizeof(user), "%s", envd_cfg.default_user);
	if (envd_user_lookup(user, &r->user) < 0)
		return rpc_fail(err, CONNECT_UNAUTHENTICATED, "invalid username: '%s'", user);
	return 0;
}

/* Everything but these needs X-Access-Token once a token is set. */
static int auth_exempt(const char *method, const char *url)
{
	if (strcmp(method, "GET") == 0)
		return strcmp(url, "/health") == 0 || strcmp(url, "/files") == 0;
	if (strcmp(method, "POST") == 0)
		return strcmp(url, "/files") == 0 || strcmp(url, "/init") == 0;
	return 0;
}

static enum MHD_Result answer_unary(struct request_state *st)
{
	struct rpc_error err = { 0 };
	cJSON *in, *out = NULL;
	unsigned status = 200;
	struct MHD_Response *resp;
	char why[256];
	int rc;

	/* Strict: a duplicate member, an escaped NUL or bad UTF-8 is refused
	 * here rather than read as cJSON would (first member, cut string). */
	in = sjson_parse(st->body.data ? st->body.data : "", st->body.len, 0, why, sizeof(why));
	if (!in || !cJSON_IsObject(in)) {
		cJSON_Delete(in);
		rpc_fail(&err, CONNECT_INVALID_ARGUMENT, "unmarshal message: malformed JSON request body%s%s",
			 in ? "" : ": ", in ? "" : why);
		return respond(st->req.conn, status, connect_error(&err, &status));
	}
	rc = st->method->unary(&st->req, in, &out, &err);
	cJSON_Delete(in);
	if (rc != 0 || !out) {
		cJSON_Delete(out);
		if (err.code == CONNECT_OK)
			rpc_fail(&err, CONNECT_INTERNAL, "internal error");
		return respond(st->req.conn, status, connect_error(&err, &status));
	}
	{
		char *json = cJSON_PrintUnformatted(out);

		cJSON_Delete(out);
		resp = json_response(json ? json : "{}");
		free(json);
	}
	return respond(st->req.conn, 200, resp);
}

struct one_envelope {
	int count;
	uint8_t flags;
	cJSON *msg;
	int bad_json;
	char why[256];
};

static int take_envelope(uint8_t flags, const char *payload, size_t len, void *ctx)
{
	struct one_envelope *e = ctx;

	if (++e->count > 1)
		return 1;
	e->flags = flags;
	e->msg = sjson_parse(payload, len, 0, e->why, sizeof(e->why));
	if (!e->msg || !cJSON_IsObject(e->msg))
		e->bad_json = 1;
	return 0;
}

/* Decodes the single request envelope of a server-streaming call. */
static cJSON *decode_stream_request(const char *body, size_t len, struct rpc_error *err)
{
	struct envelope_decoder d;
	struct one_envelope e = { 0 };
	enum envelope_status s;

	envelope_decoder_init(&d, ENVD_RPC_BODY_MAX);
	s = envelope_decoder_feed(&d, body, len, take_envelope, &e);
	if (s == ENVELOPE_OK)
		s = envelope_decoder_finish(&d);
	envelope_decoder_free(&d);
	if (s == ENVELOPE_STOPPED || e.count > 1) {
		cJSON_Delete(e.msg);
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: expected exactly one request message");
		return NULL;
	}
	if (s != ENVELOPE_OK) {
		cJSON_Delete(e.msg);
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: %s", envelope_status_str(s));
		return NULL;
	}
	if (e.count == 0) {
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: missing request message");
		return NULL;
	}
	if (e.flags != 0) {
		cJSON_Delete(e.msg);
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "protocol error: unexpected envelope flags 0x%02x", e.flags);
		return NULL;
	}
	if (e.bad_json) {
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "unmarshal message: malformed JSON request body%s%s",
			 e.msg ? "" : ": ", e.msg ? "" : e.why);
		cJSON_Delete(e.msg);
		return NULL;
	}
	return e.msg;
}

static struct MHD_Response *stream_response_for(struct envd_stream *s)
{
	struct MHD_Response *resp = envd_stream_response(s);

	if (resp)
		MHD_add_response_header(resp, "Content-Type", "application/connect+json");
	return resp;
}

/* Errors before the handler runs: still a 200 stream carrying only the end envelope. */
static enum MHD_Result stream_fail(struct MHD_Connection *conn, const struct rpc_error *err)
{
	struct envd_stream *s = envd_stream_new(conn, ENVD_KEEPALIVE_DEFAULT);
	struct MHD_Response *resp;

	if (!s)
		return MHD_NO;
	envd_stream_end(s, err->code, err->message);
	resp = stream_response_for(s);
	envd_stream_unref(s);
	return respond(conn, 200, resp);
}

static enum MHD_Result answer_stream(struct request_state *st)
{
	struct rpc_error err = { 0 };
	struct envd_stream *s;
	struct MHD_Response *resp;
	cJSON *in;
	int rc;

	in = decode_stream_request(st->body.data ? st->body.data : "", st->body.len, &err);
	if (!in)
		return stream_fail(st->req.conn, &err);
	s = envd_stream_new(st->req.conn, st->req.keepalive_sec);
	if (!s) {
		cJSON_Delete(in);
		return MHD_NO;
	}
	rc = st->method->stream(&st->req, in, s, &err);
	cJSON_Delete(in);
	if (rc != 0) {
		if (err.code == CONNECT_OK)
			rpc_fail(&err, CONNECT_INTERNAL, "internal error");
		envd_stream_end(s, err.code, err.message);
	}
	resp = stream_response_for(s);
	envd_stream_unref(s);
	return respond(st->req.conn, 200, resp);
}

/* ---- plain routes ------------------------------------------------------ */

static struct MHD_Response *no_store(struct MHD_Response *resp)
{
	if (resp)
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	return resp;
}




static enum MHD_Result answer_preflight(struct MHD_Connection *conn)
{
	struct MHD_Response *resp = empty_response();
	const char *hdrs = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");

	MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	MHD_add_response_header(resp, "Access-Control-Allow-Methods", "HEAD, GET, POST, PUT, PATCH, DELETE");
	if (hdrs)
		MHD_add_response_header(resp, "Access-Control-Allow-Headers", hdrs);
	MHD_add_response_header(resp, "Access-Control-Max-Age", "7200");
	MHD_add_response_header(resp, "Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
	return respond(conn, 204, resp);
}

static enum MHD_Result method_not_allowed(struct MHD_Connection *conn, const char *allow)
{
	struct MHD_Response *resp = text_response("405 method not allowed\n");

	if (resp)
		MHD_add_response_header(resp, "Allow", allow);
	return respond(conn, 405, resp);
}

/* hangar's own extensions (ckpt.h); upstream envd answers 404 to all of them. */
/*
 * POST /hangar/v1/token: the token in X-Hangar-New-Token replaces the one the
 * request was let in with (checked before this), once in the daemon's life.
 * A local sandbox started ahead of time for the warm pool gets its caller's
 * token this way, so whoever held the pool's token is refused from then on,
 * and with it, in the body, its caller's variables (vars.c): both or
 * neither take effect.
 */
static enum MHD_Result rotate_token(struct request_state *st)
{
	struct MHD_Connection *conn = st->req.conn;
	const char *fresh = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Hangar-New-Token");
	char why[256] = "", **vars = NULL;
	int r;

	if (st->too_large)
		return respond(conn, 413, envd_rest_error(413, "the body is larger than %u bytes", ENVD_VARS_BODY_MAX));
	if (st->body.len > 0 && !content_type_is(envd_req_header(&st->req, "Content-Type"), "application/json"))
		return respond(conn, 415, envd_rest_error(415, "the variables must come as application/json"));
	r = envd_vars_prepare(st->body.data, st->body.len, &vars, why, sizeof(why));
	if (r == -EINVAL)
		return respond(conn, 400, envd_rest_error(400, "bad variables: %s", why));
	if (r == 0)
		r = envd_token_rotate(fresh);
	if (r == 0)
		envd_vars_publish(vars);
	else
		free(vars);
	switch (r) {
	case 0:
		return respond(conn, 204, no_store(empty_response()));
	case -EALREADY:
		return respond(conn, 409, envd_rest_error(409, "the access token was replaced before"));
	case -EPERM:
		return respond(conn, 409, envd_rest_error(409, "this daemon has no access token to replace"));
	case -EINVAL:
		return respond(conn, 400, envd_rest_error(400, "X-Hangar-New-Token must be 1 to %d printable "
								 "characters without spaces", ENVD_TOKEN_MAX));
	default:
		return respond(conn, 500, envd_rest_error(500, "out of memory"));
	}
}

/* The token route reads its body (the variables), up to a bound, before it answers. */
static enum MHD_Result begin_token(struct request_state *st, struct MHD_Connection *conn, const char *method)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");

	if (strcmp(method, "POST") != 0)
		return method_not_allowed(conn, "POST");
	if (cl && strtoull(cl, NULL, 10) > ENVD_VARS_BODY_MAX)
		return respond(conn, 413, envd_rest_error(413, "the body is larger than %u bytes", ENVD_VARS_BODY_MAX));
	st->route = ROUTE_TOKEN;
	return MHD_YES;
}

static enum MHD_Result begin_hangar(struct request_state *st, struct MHD_Connection *conn, const char *method,
				   const char *url)
{
	struct MHD_Response *resp = NULL;
	unsigned status;

	st->route = ROUTE_DONE;
	if (strcmp(url, "/hangar/v1/token") == 0)
		return begin_token(st, conn, method);
	if (!ckpt_available())
		return respond(conn, 404, text_response("404 page not found\n"));
	if (strcmp(url, "/hangar/v1/info") == 0) {
		if (strcmp(method, "GET") != 0)
			return method_not_allowed(conn, "GET");
		resp = ckpt_info_response();
		return resp ? respond(conn, 200, resp) : MHD_NO;
	}
	if (strcmp(url, "/hangar/v1/archive") != 0)
		return respond(conn, 404, text_response("404 page not found\n"));
	if (strcmp(method, "GET") == 0) {
		status = ckpt_capture(&st->req, &resp);
		return resp ? respond(conn, status, resp) : MHD_NO;
	}
	if (strcmp(method, "PUT") != 0)
		return method_not_allowed(conn, "GET, PUT");
	st->restore = ckpt_restore_begin(&st->req);
	if (!st->restore)
		return respond(conn, 500, envd_rest_error(500, "out of memory"));
	st->route = ROUTE_CKPT_RESTORE;
	return MHD_YES;
}

/* The first call for a request: headers are in, the body is not. */
static enum MHD_Result begin_request(struct request_state *st, struct MHD_Connection *conn,
				     const char *method, const char *url)
{
	struct envd_req *r = &st->req;
	struct rpc_error err = { 0 };
	const char *ct;

	r->conn = conn;
	r->method = method;
	r->url = st->url;

	if (strcmp(method, "OPTIONS") == 0 &&
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin") &&
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
		st->route = ROUTE_DONE;
		return answer_preflight(conn);
	}

	if (!auth_exempt(method, url) && !envd_token_ok(envd_req_header(r, "X-Access-Token"))) {
		st->route = ROUTE_DONE;
		return respond(conn, 401, envd_rest_error(401, AUTH_FAILED_MESSAGE));
	}

	if (strncmp(url, "/process.Process/", 17) == 0 || strncmp(url, "/filesystem.Filesystem/", 23) == 0) {
		const struct rpc_method *m = find_method(url);

		st->route = ROUTE_DONE;
		if (!m)
			return respond(conn, 404, text_response("404 page not found\n"));
		if (strcmp(method, "POST") != 0) {
			struct MHD_Response *resp = text_response("405 method not allowed\n");

			MHD_add_response_header(resp, "Allow", "POST");
			return respond(conn, 405, resp);
		}
		ct = envd_req_header(r, "Content-Type");
		st->streaming = m->stream != NULL;
		if (!m->unary && !m->stream) {
			/* Client streaming (StreamInput) is not served. */
			if (content_type_is(ct, "application/connect+json")) {
				rpc_fail(&err, CONNECT_UNIMPLEMENTED, "%s is not implemented", url);
				return stream_fail(conn, &err);
			}
			rpc_fail(&err, CONNECT_UNIMPLEMENTED, "%s is not implemented", url);
			{
				unsigned status;
				struct MHD_Response *resp = connect_error(&err, &status);

				return respond(conn, status, resp);
			}
		}
		if (!content_type_is(ct, st->streaming ? "application/connect+json" : "application/json")) {
			struct MHD_Response *resp = text_response("415 unsupported media type\n");

			MHD_add_response_header(resp, "Accept-Post",
						st->streaming ? "application/connect+json" : "application/json");
			return respond(conn, 415, resp);
		}
		if (parse_headers(st, &err) != 0) {
			if (st->streaming)
				return stream_fail(conn, &err);
			{
				unsigned status;
				struct MHD_Response *resp = connect_error(&err, &status);

				return respond(conn, status, resp);
			}
		}
		st->method = m;
		st->route = ROUTE_RPC;
		return MHD_YES;
	}

	if (strcmp(url, "/health") == 0 && strcmp(method, "GET") == 0) {
		st->route = ROUTE_DONE;
		return respond(conn, 204, no_store(empty_response()));
	}
	if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0) {
		struct MHD_Response *resp = envd_metrics_response();

		st->route = ROUTE_DONE;
		if (!resp)
			return respond(conn, 500, empty_response());
		return respond(conn, 200, no_store(resp));
	}
	if (strcmp(url, "/envs") == 0 && strcmp(method, "GET") == 0) {
		st->route = ROUTE_DONE;
		return respond(conn, 200, no_store(envd_envs_response()));
	}
	if (strcmp(url, "/files") == 0 && (strcmp(method, "GET") == 0 || strcmp(method, "POST") == 0)) {
		int get = method[0] == 'G';
		char msg[256];
		int denied = query_not_text(conn, msg, sizeof(msg)) ? 400 :
			     envd_files_authorize(r, get ? "read" : "write", msg, sizeof(msg));
		struct MHD_Response *resp = NULL;
		unsigned status;

		if (denied) {
			st->route = ROUTE_DONE;
			if (denied == 400)
				return respond(conn, 400, text_response(msg));
			return respond(conn, (unsigned)denied, envd_rest_error(denied, "%s", msg));
		}
		if (get) {
			st->route = ROUTE_DONE;
			status = files_download(r, &resp);
			return respond(conn, status, resp);
		}
		st->upload = files_upload_begin(r, &status, &resp);
		if (!st->upload) {
			st->route = ROUTE_DONE;
			return respond(conn, status, resp);
		}
		st->route = ROUTE_FILES_UPLOAD;
		return MHD_YES;
	}
	if (strncmp(url, "/hangar/v1/", 11) == 0)
		return begin_hangar(st, conn, method, url);
	st->route = ROUTE_DONE;
	return respond(conn, 404, text_response("404 page not found\n"));
}

/*
 * Whether a refused request's body is too big to read and throw away. Small
 * bodies are drained first, so clients still writing them see the answer
 * instead of a reset; big or unknown-length ones are refused at once.
 */
#define REFUSED_BODY_DRAIN_MAX (256u * 1024)

static int body_too_big_to_drain(struct MHD_Connection *conn)
{
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");

	return (cl && strtoull(cl, NULL, 10) > REFUSED_BODY_DRAIN_MAX) || (te && strcasestr(te, "chunked"));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	struct request_state *st = *req_cls;
	enum MHD_Result r;

	(void)cls;
	(void)version;
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return MHD_NO;
		st->url = strdup(url);
		if (!st->url) {
			free(st);
			return MHD_NO;
		}
		*req_cls = st;
		st->req.conn = conn;
		current = st;
		r = begin_request(st, conn, method, st->url);
		current = NULL;
		/*
		 * Once body data flows libmicrohttpd accepts no response until it
		 * has all been read, so a refusal of a large body goes out now and
		 * the connection closes after it.
		 */
		if (r == MHD_YES && st->pending && body_too_big_to_drain(conn))
			return flush_pending(st);
		return r;
	}

	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		switch (st->route) {
		case ROUTE_RPC:
		case ROUTE_TOKEN:
			if (st->too_large ||
			    st->body.len + n > (st->route == ROUTE_RPC ? ENVD_RPC_BODY_MAX : ENVD_VARS_BODY_MAX)) {
				st->too_large = 1;
				hbuf_free(&st->body);
			} else if (hbuf_put(&st->body, upload_data, n) < 0) {
				st->too_large = 1;
			}
			break;
		case ROUTE_FILES_UPLOAD:
			files_upload_data(st->upload, upload_data, n);
			break;
		case ROUTE_CKPT_RESTORE:
			ckpt_restore_data(st->restore, upload_data, n);
			break;
		default:
			break; /* refused: the body is read and dropped */
		}
		return MHD_YES;
	}

	/* The whole body is in. */
	switch (st->route) {
	case ROUTE_RPC: {
		struct rpc_error err = { 0 };

		st->route = ROUTE_DONE;
		if (st->too_large) {
			rpc_fail(&err, CONNECT_RESOURCE_EXHAUSTED, "request message larger than %u bytes",
				 ENVD_RPC_BODY_MAX);
			if (st->streaming)
				return stream_fail(conn, &err);
			{
				unsigned status;
				struct MHD_Response *resp = connect_error(&err, &status);

				return respond(conn, status, resp);
			}
		}
		return st->streaming ? answer_stream(st) : answer_unary(st);
	}
	case ROUTE_FILES_UPLOAD: {
		struct MHD_Response *resp = NULL;
		unsigned status;

		st->route = ROUTE_DONE;
		status = files_upload_finish(st->upload, &resp);
		return respond(conn, status, resp);
	}
	case ROUTE_CKPT_RESTORE: {
		struct MHD_Response *resp = NULL;
		unsigned status;

		st->route = ROUTE_DONE;
		status = ckpt_restore_finish(st->restore, &resp);
		return respond(conn, status, resp);
	}
	case ROUTE_TOKEN:
		st->route = ROUTE_DONE;
		return rotate_token(st);
	default:
		return flush_pending(st);
	}
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct request_state *st = *req_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!st)
		return;
	if (st->pending)
		MHD_destroy_response(st->pending);
	if (st->upload)
		files_upload_free(st->upload);
	if (st->restore)
		ckpt_restore_free(st->restore);
	hbuf_free(&st->body);
	free(st->url);
	free(st);
	*req_cls = NULL;
}

/*
 * Returns memory to the system when the last connection closes, so an idle
 * daemon in every sandbox stays small after a burst of work.
 */
static atomic_int open_connections;

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_ctx,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	(void)conn;
	(void)socket_ctx;
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		atomic_fetch_add(&open_connections, 1);
	else if (atomic_fetch_sub(&open_connections, 1) == 1)
		malloc_trim(0);
}

static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "hangar-envd: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
		fprintf(stderr, "hangar-envd: cannot listen on %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	chmod(path, 0600);
	return fd;
}

static int listen_tcp(const char *addr, uint16_t port)
{
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd, one = 1;
	int v6 = 0;

	if (!addr || !*addr)
		addr = "0.0.0.0";
	if (inet_pton(AF_INET, addr, &sa4.sin_addr) != 1) {
		if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) != 1) {
			fprintf(stderr, "hangar-envd: invalid bind address: %s\n", addr);
			return -1;
		}
		v6 = 1;
	}
	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if ((v6 ? bind(fd, (struct sockaddr *)&sa6, sizeof(sa6)) : bind(fd, (struct sockaddr *)&sa4, sizeof(sa4))) < 0 ||
	    listen(fd, 512) < 0) {
		fprintf(stderr, "hangar-envd: cannot listen on %s:%u: %s\n", addr, port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

struct MHD_Daemon *server_start(struct server_opts *o)
{
	struct MHD_Daemon *d;
	int fd = o->listen_fd;

	if (fd < 0)
		fd = o->socket_path ? listen_unix(o->socket_path) : listen_tcp(o->bind_addr, o->port);
	if (fd < 0)
		return NULL;
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
			if (ss.ss_family == AF_INET)
				o->bound_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
			else if (ss.ss_family == AF_INET6)
				o->bound_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	/* libmicrohttpd's own messages (a client that went away, …) only with -v. */
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
				     (envd_cfg.verbose ? MHD_USE_ERROR_LOG : 0),
			     0, NULL, NULL, on_request, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ENVD_IDLE_TIMEOUT_SEC,
			     MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
			     MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
			     MHD_OPTION_THREAD_STACK_SIZE, (size_t)(256 * 1024),
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128 * 1024),
			     MHD_OPTION_CONNECTION_LIMIT, 4096u,
			     MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "hangar-envd: cannot start the HTTP server\n");
		close(fd);
	}
	return d;
}
