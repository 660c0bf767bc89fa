/* HTTP plumbing of the control API: replies, request bodies, JSON renderings, libmicrohttpd callbacks. */
#define _GNU_SOURCE
#include "fake-e2b.h"

/* ---------------------------------------------------------- HTTP: responses */

void reply_header(struct reply *r, const char *k, const char *v)
{
	if (r->nhdr >= 8)
		return;
	snprintf(r->hdr[r->nhdr][0], sizeof(r->hdr[0][0]), "%s", k);
	snprintf(r->hdr[r->nhdr][1], sizeof(r->hdr[0][1]), "%s", v);
	r->nhdr++;
}

static void reply_set(struct reply *r, unsigned status, char *body, const char *ctype)
{
	free(r->body);
	r->status = status;
	r->body = body;
	r->len = body ? strlen(body) : 0;
	r->ctype = ctype;
}

void reply_json(struct reply *r, unsigned status, cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	reply_set(r, status, s, "application/json; charset=utf-8");
}

void reply_empty(struct reply *r, unsigned status)
{
	reply_set(r, status, NULL, NULL);
}

void reply_text(struct reply *r, unsigned status, const char *text)
{
	reply_set(r, status, strdup(text), "text/plain; charset=utf-8");
}

void reply_error(struct reply *r, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(o, "code", status);
	cJSON_AddStringToObject(o, "message", msg);
	reply_json(r, status, o);
}

/* An unmatched route: gin's text on E2B, an empty body on axum [Cube]. */
void reply_no_route(struct reply *r)
{
	if (is_cube())
		reply_empty(r, 404);
	else
		reply_text(r, 404, "404 page not found");
}

void reply_405(struct reply *r, const char *allow)
{
	reply_empty(r, 405);
	reply_header(r, "Allow", allow);
}

/* -------------------------------------------------------- HTTP: request I/O */

const char *hdr(const struct req *q, const char *name)
{
	return MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, name);
}

const char *arg(const struct req *q, const char *name)
{
	return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

static int content_type_json(const struct req *q)
{
	const char *ct = hdr(q, "Content-Type");
	size_t n = strlen("application/json");

	if (!ct || strncasecmp(ct, "application/json", n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/*
 * The body as a JSON object. E2B: a missing body is {} when allow_empty, other
 * problems are 400 {"code","message"}. Cube (axum's Json extractor): 415, 400
 * as plain text [Cube].
 */
cJSON *body_object(struct req *q, struct reply *r, int allow_empty)
{
	cJSON *o;

	if (is_cube()) {
		if (!content_type_json(q)) {
			reply_text(r, 415, "Expected request with `Content-Type: application/json`");
			return NULL;
		}
		o = cJSON_ParseWithLength(q->body ? q->body : "", q->len);
		if (!o) {
			reply_text(r, 400, q->len ? "Failed to parse the request body as JSON: syntax error"
						  : "Failed to parse the request body as JSON: EOF while parsing a value at line 1 column 0");
			return NULL;
		}
		if (!cJSON_IsObject(o)) {
			cJSON_Delete(o);
			reply_text(r, 422, "Failed to deserialize the JSON body into the target type: invalid type: expected struct");
			return NULL;
		}
		return o;
	}
	if (q->len == 0 && allow_empty)
		return cJSON_CreateObject();
	o = cJSON_ParseWithLength(q->body ? q->body : "", q->len);
	if (!o || !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		reply_error(r, 400, "Error when parsing request: request body has an error: failed to decode request body");
		return NULL;
	}
	return o;
}

/* A field of the wrong type: 422 text on Cube, 400 JSON on E2B. */
void reply_bad_field(struct reply *r, const char *field, const char *want)
{
	char msg[256];

	if (is_cube()) {
		snprintf(msg, sizeof(msg),
			 "Failed to deserialize the JSON body into the target type: %s: invalid type, expected %s",
			 field, want);
		reply_text(r, 422, msg);
	} else {
		reply_error(r, 400, "Error when parsing request: field \"%s\" must be %s", field, want);
	}
}

void reply_missing_field(struct reply *r, const char *field)
{
	char msg[256];

	if (is_cube()) {
		snprintf(msg, sizeof(msg),
			 "Failed to deserialize the JSON body into the target type: missing field `%s`", field);
		reply_text(r, 422, msg);
	} else {
		reply_error(r, 400, "Error when parsing request: property \"%s\" is missing", field);
	}
}

/* Reads an optional integer field; -2 means wrong type (reply set). */
int int_field(cJSON *o, const char *name, int64_t *out, int *present, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	*present = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble) {
		reply_bad_field(r, name, "an integer");
		return -2;
	}
	*out = (int64_t)v->valuedouble;
	*present = 1;
	return 0;
}

int bool_field(cJSON *o, const char *name, int *out, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v)) {
		reply_bad_field(r, name, "a boolean");
		return -2;
	}
	*out = cJSON_IsTrue(v);
	return 1;
}

/* A {string:string} map or absent; -2 on a bad shape (reply set). */
int string_map(cJSON *o, const char *name, cJSON **out, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name), *e;

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v)) {
		reply_bad_field(r, name, "an object of strings");
		return -2;
	}
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e)) {
			reply_bad_field(r, name, "an object of strings");
			return -2;
		}
	}
	*out = cJSON_Duplicate(v, 1);
	return 0;
}

/* ---------------------------------------------------------- JSON renderings */

cJSON *sandbox_json_locked(const struct sandbox *sb, enum view v)
{
	cJSON *o = cJSON_CreateObject();
	int64_t end = expires_wall_ms(sb);

	cJSON_AddStringToObject(o, "templateID", sb->template_id);
	cJSON_AddStringToObject(o, "sandboxID", sb->id);
	if (!is_cube() && sb->alias)
		cJSON_AddStringToObject(o, "alias", sb->alias);
	if (is_cube()) {
		char id[40];

		if (v == V_CONNECT) {
			snprintf(id, sizeof(id), "node-%.8s", sb->id);
		} else if (v == V_CREATE) {
			random_uuid(id);
		} else {
			snprintf(id, sizeof(id), "node-%.8s", sb->id);
		}
		cJSON_AddStringToObject(o, "clientID", id);
	} else {
		cJSON_AddStringToObject(o, "clientID", E2B_CLIENT_ID);
	}
	cJSON_AddStringToObject(o, "envdVersion", ENVD_VERSION);
	if (v == V_CREATE || v == V_CONNECT) {
		if (is_cube()) {
			/* envdAccessToken is never present; the traffic token only on create [Cube]. */
			if (v == V_CREATE && sb->traffic_token[0])
				cJSON_AddStringToObject(o, "trafficAccessToken", sb->traffic_token);
			cJSON_AddStringToObject(o, "domain", g.domain ? g.domain : "cube.app");
		} else {
			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "envdAccessToken", sb->envd_token);
			if (sb->traffic_token[0])
				cJSON_AddStringToObject(o, "trafficAccessToken", sb->traffic_token);
			else
				cJSON_AddNullToObject(o, "trafficAccessToken");
			if (g.domain)
				cJSON_AddStringToObject(o, "domain", g.domain);
			else
				cJSON_AddNullToObject(o, "domain");
		}
		return o;
	}
	add_time(o, "startedAt", sb->started_ms);
	if (end != NEVER)
		add_time(o, "endAt", end);
	else if (!is_cube())
		add_time(o, "endAt", sb->started_ms);
	cJSON_AddNumberToObject(o, "cpuCount", sb->cpu);
	cJSON_AddNumberToObject(o, "memoryMB", sb->mem_mb);
	cJSON_AddNumberToObject(o, "diskSizeMB", is_cube() ? 0 : sb->disk_mb);
	cJSON_AddItemToObject(o, "metadata", sb->metadata ? cJSON_Duplicate(sb->metadata, 1) : cJSON_CreateObject());
	cJSON_AddStringToObject(o, "state", sb->state == SB_PAUSED ? "paused" : "running");
	cJSON_AddItemToObject(o, "volumeMounts", cJSON_CreateArray());
	if (v == V_DETAIL) {
		if (is_cube()) {
			cJSON_AddStringToObject(o, "domain", g.domain ? g.domain : "cube.app");
		} else {
			cJSON *lc = cJSON_CreateObject();

			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "envdAccessToken", sb->envd_token);
			if (sb->allow_internet < 0)
				cJSON_AddNullToObject(o, "allowInternetAccess");
			else
				cJSON_AddBoolToObject(o, "allowInternetAccess", sb->allow_internet);
			if (g.domain)
				cJSON_AddStringToObject(o, "domain", g.domain);
			else
				cJSON_AddNullToObject(o, "domain");
			if (sb->network)
				cJSON_AddItemToObject(o, "network", cJSON_Duplicate(sb->network, 1));
			cJSON_AddBoolToObject(lc, "autoResume", sb->auto_resume);
			cJSON_AddStringToObject(lc, "onTimeout", sb->auto_pause ? "pause" : "kill");
			cJSON_AddItemToObject(o, "lifecycle", lc);
			if (sb->state == SB_PAUSED)
				cJSON_AddStringToObject(o, "pauseMode", sb->pause_full ? "full" : "filesystem");
		}
	}
	return o;
}

/* ------------------------------------------------------- HTTP: MHD plumbing */

static void split_path(struct req *q)
{
	char *save = NULL;

	free(q->pathbuf);
	q->pathbuf = strdup(q->url);
	q->nseg = 0;
	if (!q->pathbuf)
		return;
	for (char *t = strtok_r(q->pathbuf, "/", &save); t && q->nseg < 12;
	     t = strtok_r(NULL, "/", &save))
		q->segs[q->nseg++] = t;
}

static enum MHD_Result queue_reply(struct MHD_Connection *conn, struct reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"",
					       r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(r->body);
		return MHD_NO;
	}
	r->body = NULL;
	if (r->ctype)
		MHD_add_response_header(resp, "Content-Type", r->ctype);
	for (int i = 0; i < r->nhdr; i++)
		MHD_add_response_header(resp, r->hdr[i][0], r->hdr[i][1]);
	ret = MHD_queue_response(conn, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/*
 * Makes an answer a strict parser must refuse: "duplicate" repeats the
 * object's first member with another value ({"a":1,...} becomes
 * {"a":1,"a":"mangled",...}), "trailing" puts a second value after it.
 */
static void mangle_reply(struct reply *r, const char *how)
{
	const char *colon;
	char *out = NULL;
	int n = -1;

	if (!r->body || r->len == 0 || r->body[0] != '{')
		return;
	if (!strcmp(how, "trailing")) {
		n = asprintf(&out, "%.*s {}", (int)r->len, r->body);
	} else if (!strcmp(how, "duplicate") && r->body[1] == '"' && (colon = strstr(r->body, "\":"))) {
		int name = (int)(colon + 2 - r->body) - 1; /* "name": without the brace */

		n = asprintf(&out, "{%.*s\"mangled\",%.*s", name, r->body + 1, (int)r->len - 1, r->body + 1);
	}
	if (n < 0)
		return;
	free(r->body);
	r->body = out;
	r->len = (size_t)n;
}

enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *q = *con_cls;
	struct reply r = { 0 };
	struct fault f;

	(void)cls;
	(void)version;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		q->conn = conn;
		q->method = method;
		q->url = strdup(url);
		*con_cls = q;
		if (!q->url)
			return MHD_NO;
		split_path(q);
		classify(q);
		if (strncmp(url, "/_fake/", 7) != 0) {
			struct fault *peek = NULL;

			/* A dropping fault closes before anything is answered. */
			pthread_mutex_lock(&g.lock);
			for (struct fault *x = g.faults; x; x = x->next)
				if (!strcmp(x->route, "any") || !strcmp(x->route, q->route)) {
					peek = x;
					break;
				}
			if (peek && peek->drop && !peek->after) {
				int delay = peek->delay_ms;

				pthread_mutex_unlock(&g.lock);
				if (take_fault(q->route, &f)) {
					vlog("%s %s: fault: dropping the connection", method, url);
					if (delay > 0)
						wait_ms(delay);
					return MHD_NO;
				}
			} else {
				pthread_mutex_unlock(&g.lock);
			}
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!q->too_big) {
			if (q->len + *upload_size > MAX_BODY) {
				q->too_big = 1;
			} else {
				if (q->len + *upload_size + 1 > q->cap) {
					size_t cap = (q->len + *upload_size + 1) * 2;
					char *b = realloc(q->body, cap);

					if (!b)
						return MHD_NO;
					q->body = b;
					q->cap = cap;
				}
				memcpy(q->body + q->len, upload, *upload_size);
				q->len += *upload_size;
				q->body[q->len] = '\0';
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (strncmp(url, "/_fake/", 7) != 0 && take_fault(q->route, &f)) {
		if (f.after) {
			/* The platform acts (a create makes its sandbox), then its answer is late or lost. */
			dispatch(q, &r);
			if (f.delay_ms > 0)
				wait_ms(f.delay_ms);
			if (f.drop) {
				vlog("%s %s → %u, then the connection dropped unanswered", method, url, r.status);
				free(r.body);
				return MHD_NO;
			}
			vlog("%s %s → %u, %d ms late", method, url, r.status, f.delay_ms);
			return queue_reply(conn, &r);
		}
		if (f.delay_ms > 0)
			wait_ms(f.delay_ms);
		if (f.drop)
			return MHD_NO;
		if (f.no_route) {
			/* As if the platform had no such route: nothing is done. */
			vlog("%s %s: fault: no such route", method, url);
			reply_no_route(&r);
			return queue_reply(conn, &r);
		}
		if (f.status > 0) {
			char ra[16];

			vlog("%s %s: fault: %d", method, url, f.status);
			if (f.message[0])
				reply_error(&r, (unsigned)f.status, "%s", f.message);
			else
				reply_error(&r, (unsigned)f.status, "injected fault (%s)", q->route);
			if (f.retry_after >= 0) {
				snprintf(ra, sizeof(ra), "%d", f.retry_after);
				reply_header(&r, "Retry-After", ra);
			}
			return queue_reply(conn, &r);
		}
		q->repeat_token = f.repeat_token;
		q->make_public = f.make_public;
		q->fork_errors = f.fork_errors;
		if (f.mangle[0]) {
			dispatch(q, &r);
			mangle_reply(&r, f.mangle);
			vlog("%s %s → %u, mangled (%s)", method, url, r.status, f.mangle);
			return queue_reply(conn, &r);
		}
	}
	dispatch(q, &r);
	vlog("%s %s → %u", method, url, r.status);
	return queue_reply(conn, &r);
}

void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *q = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!q)
		return;
	free(q->url);
	free(q->pathbuf);
	free(q->body);
	free(q);
	*con_cls = NULL;
}
