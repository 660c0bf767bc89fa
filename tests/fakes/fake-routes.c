/* Routing of the control API, and the /_fake/ test hooks. */
#define _GNU_SOURCE
#include "fake-e2b.h"

/* ------------------------------------------------------------ test hooks */

static void handle_fake(struct req *q, struct reply *r)
{
	if (strcmp(q->url, "/_fake/faults") == 0 && strcmp(q->method, "POST") == 0) {
		cJSON *b = cJSON_ParseWithLength(q->body ? q->body : "", q->len), *x;
		struct fault *f;

		if (!cJSON_IsObject(b)) {
			cJSON_Delete(b);
			reply_error(r, 400, "fault must be a JSON object");
			return;
		}
		f = calloc(1, sizeof(*f));
		x = cJSON_GetObjectItemCaseSensitive(b, "route");
		snprintf(f->route, sizeof(f->route), "%s", cJSON_IsString(x) ? x->valuestring : "any");
		x = cJSON_GetObjectItemCaseSensitive(b, "status");
		f->status = cJSON_IsNumber(x) ? x->valueint : 0;
		x = cJSON_GetObjectItemCaseSensitive(b, "count");
		f->count = cJSON_IsNumber(x) && x->valueint > 0 ? x->valueint : 1;
		x = cJSON_GetObjectItemCaseSensitive(b, "retry_after");
		f->retry_after = cJSON_IsNumber(x) ? x->valueint : -1;
		x = cJSON_GetObjectItemCaseSensitive(b, "delay_ms");
		f->delay_ms = cJSON_IsNumber(x) ? x->valueint : 0;
		f->drop = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "drop"));
		f->repeat_token = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "repeat_token"));
		f->make_public = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "public"));
		x = cJSON_GetObjectItemCaseSensitive(b, "fork_errors");
		f->fork_errors = cJSON_IsNumber(x) && x->valueint > 0 ? x->valueint : 0;
		f->after = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "after"));
		f->no_route = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "no_route"));
		x = cJSON_GetObjectItemCaseSensitive(b, "envd");
		if (cJSON_IsString(x))
			snprintf(f->envd, sizeof(f->envd), "%s", x->valuestring);
		x = cJSON_GetObjectItemCaseSensitive(b, "message");
		if (cJSON_IsString(x))
			snprintf(f->message, sizeof(f->message), "%s", x->valuestring);
		x = cJSON_GetObjectItemCaseSensitive(b, "mangle");
		if (cJSON_IsString(x))
			snprintf(f->mangle, sizeof(f->mangle), "%s", x->valuestring);
		cJSON_Delete(b);
		pthread_mutex_lock(&g.lock);
		{
			struct fault **pp = &g.faults;

			while (*pp)
				pp = &(*pp)->next;
			*pp = f;
		}
		pthread_mutex_unlock(&g.lock);
		reply_empty(r, 204);
	} else if (strcmp(q->url, "/_fake/faults") == 0 && strcmp(q->method, "DELETE") == 0) {
		pthread_mutex_lock(&g.lock);
		clear_faults_locked();
		pthread_mutex_unlock(&g.lock);
		reply_empty(r, 204);
	} else if (strcmp(q->url, "/_fake/sandboxes") == 0 && strcmp(q->method, "GET") == 0) {
		cJSON *a = cJSON_CreateArray();

		pthread_mutex_lock(&g.lock);
		for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
			cJSON *o;
			int64_t end;

			if (sb->state == SB_DEAD)
				continue;
			o = cJSON_CreateObject();
			end = expires_wall_ms(sb);
			cJSON_AddStringToObject(o, "id", sb->id);
			cJSON_AddStringToObject(o, "state", sb->state == SB_PAUSED ? "paused" : "running");
			cJSON_AddNumberToObject(o, "envd_pid", sb->envd_pid);
			cJSON_AddNumberToObject(o, "envd_port", sb->envd_port);
			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "token", sb->envd_token);
			else
				cJSON_AddNullToObject(o, "token");
			if (sb->traffic_token[0])
				cJSON_AddStringToObject(o, "traffic_token", sb->traffic_token);
			else
				cJSON_AddNullToObject(o, "traffic_token");
			if (end == NEVER)
				cJSON_AddNullToObject(o, "expires_at");
			else
				cJSON_AddNumberToObject(o, "expires_at", (double)end / 1000.0);
			cJSON_AddBoolToObject(o, "public", sb->public_traffic);
			cJSON_AddStringToObject(o, "template_id", sb->template_id);
			cJSON_AddItemToArray(a, o);
		}
		pthread_mutex_unlock(&g.lock);
		reply_json(r, 200, a);
	} else {
		reply_text(r, 404, "404 page not found");
	}
}

/* ----------------------------------------------------------------- routing */

static int seg_is(const struct req *q, int i, const char *s)
{
	return i < q->nseg && strcmp(q->segs[i], s) == 0;
}

static int is_method(const struct req *q, const char *m)
{
	return strcmp(q->method, m) == 0;
}

/* The route name faults match on. */
void classify(struct req *q)
{
	const char *n = "other";
	int v2 = seg_is(q, 0, "v2");
	int b = v2 ? 1 : 0;

	if (seg_is(q, 0, "health") && q->nseg == 1)
		n = "health";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 1)
		n = is_method(q, "POST") ? "create" : "list";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 2)
		n = is_method(q, "DELETE") ? "kill" : "get";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 3) {
		const char *a = q->segs[b + 2];

		if (!strcmp(a, "connect") || !strcmp(a, "pause") || !strcmp(a, "resume") ||
		    !strcmp(a, "timeout") || !strcmp(a, "fork"))
			n = a;
		else if (!strcmp(a, "refreshes"))
			n = "refresh";
		else if (!strcmp(a, "snapshots"))
			n = "snapshot";
	} else if (seg_is(q, 0, "snapshots"))
		n = "snapshots";
	else if (seg_is(q, b, "templates") || seg_is(q, 0, "v3"))
		n = "template";
	snprintf(q->route, sizeof(q->route), "%s", n);
}

/* Auth; 0 to go on, else the reply is set. */
static int check_auth(struct req *q, struct reply *r)
{
	const char *key = hdr(q, "X-API-Key");

	if (is_cube()) {
		const char *auth = hdr(q, "Authorization");
		char cred[512] = "";

		if (!g.api_key)
			return 0;
		if (auth && strncmp(auth, "Bearer ", 7) == 0) {
			const char *s = auth + 7;
			size_t n;

			while (*s == ' ' || *s == '\t')
				s++;
			n = strlen(s);
			while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
				n--;
			if (n >= sizeof(cred))
				n = sizeof(cred) - 1;
			memcpy(cred, s, n);
			cred[n] = '\0';
		}
		if (!cred[0] && key)
			snprintf(cred, sizeof(cred), "%s", key);
		if (!cred[0]) {
			reply_error(r, 401,
				    "Missing authentication: provide 'Authorization: Bearer <token>' or 'X-API-Key: <key>'");
			return -1;
		}
		if (strcmp(cred, g.api_key) != 0) {
			reply_error(r, 401, "Invalid API key or token");
			return -1;
		}
		return 0;
	}
	if (!key || !*key) {
		reply_error(r, 401, "Missing X-API-Key header");
		return -1;
	}
	if (g.api_key && strcmp(key, g.api_key) != 0) {
		reply_error(r, 401, "Invalid API key");
		return -1;
	}
	return 0;
}

static void route_e2b(struct req *q, struct reply *r)
{
	int n = q->nseg;
	const char *m = q->method;

	if (n == 1 && seg_is(q, 0, "health")) {
		if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
			reply_empty(r, 204);
		else
			reply_no_route(r);
		return;
	}
	if (check_auth(q, r) < 0)
		return;
	if (seg_is(q, 0, "sandboxes")) {
		if (n == 1 && !strcmp(m, "POST"))
			return handle_create(q, r, 0);
		if (n == 1 && !strcmp(m, "GET"))
			return handle_list(q, r, 0);
		if (n == 2 && seg_is(q, 1, "metrics") && !strcmp(m, "GET"))
			return handle_metrics_many(q, r);
		if (n == 2 && !strcmp(m, "GET"))
			return handle_get(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_kill(r, q->segs[1]);
		if (n == 3) {
			const char *id = q->segs[1], *a = q->segs[2];

			if (!strcmp(m, "POST")) {
				if (!strcmp(a, "connect"))
					return handle_connect(q, r, id, 0);
				if (!strcmp(a, "resume"))
					return handle_connect(q, r, id, 1);
				if (!strcmp(a, "pause"))
					return handle_pause(q, r, id);
				if (!strcmp(a, "timeout"))
					return handle_timeout(q, r, id);
				if (!strcmp(a, "refreshes"))
					return handle_refresh(q, r, id);
				if (!strcmp(a, "snapshots"))
					return handle_snapshot(q, r, id);
				if (!strcmp(a, "fork") && g.flavour == FL_CLOUD)
					return handle_fork(q, r, id);
			}
			if (!strcmp(m, "PUT") && !strcmp(a, "network"))
				return handle_network(q, r, id);
			if (!strcmp(m, "GET") && !strcmp(a, "metrics"))
				return handle_metrics(r, id);
			if (!strcmp(m, "GET") && !strcmp(a, "logs"))
				return handle_logs(r, id, 0);
		}
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes")) {
		if (n == 2 && !strcmp(m, "POST"))
			return handle_create(q, r, 1);
		if (n == 2 && !strcmp(m, "GET"))
			return handle_list(q, r, 1);
		if (n == 4 && seg_is(q, 3, "connect") && !strcmp(m, "POST"))
			return handle_connect(q, r, q->segs[2], 0);
		if (n == 4 && seg_is(q, 3, "logs") && !strcmp(m, "GET"))
			return handle_logs(r, q->segs[2], 1);
	} else if (n == 1 && seg_is(q, 0, "snapshots") && !strcmp(m, "GET")) {
		return handle_list_snapshots(q, r);
	} else if (n == 2 && seg_is(q, 0, "v3") && seg_is(q, 1, "templates") && !strcmp(m, "POST")) {
		return handle_v3_template(q, r);
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "templates")) {
		if (n == 2 && !strcmp(m, "GET"))
			return handle_e2b_templates_list(q, r);
		if (n == 5 && seg_is(q, 3, "builds") && !strcmp(m, "POST"))
			return handle_build_start(q, r, q->segs[2], q->segs[4]);
	} else if (seg_is(q, 0, "templates")) {
		if (n == 1 && !strcmp(m, "GET"))
			return handle_e2b_templates_list(q, r);
		if (n == 3 && seg_is(q, 1, "aliases") && !strcmp(m, "GET"))
			return handle_alias(r, q->segs[2]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_template_delete(q, r, q->segs[1]);
		if (n == 4 && seg_is(q, 2, "files") && !strcmp(m, "GET")) {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddBoolToObject(o, "present", 1);
			return reply_json(r, 201, o);
		}
		if (n == 5 && seg_is(q, 2, "builds") && seg_is(q, 4, "status") && !strcmp(m, "GET"))
			return handle_build_status(q, r, q->segs[1], q->segs[3]);
		if (n == 5 && seg_is(q, 2, "builds") && seg_is(q, 4, "logs") && !strcmp(m, "GET"))
			return handle_build_logs(r, q->segs[1], q->segs[3]);
	}
	reply_no_route(r);
}

/*
 * Cube: axum answers unknown paths 404 before auth, and a known path with the
 * wrong method 405 after auth [Cube].
 */
static void route_cube(struct req *q, struct reply *r)
{
	int n = q->nseg;
	const char *m = q->method, *allow = NULL;
	int get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");

	if (n == 1 && seg_is(q, 0, "health")) {
		if (get) {
			cJSON *o = cJSON_CreateObject();
			int live = 0;

			pthread_mutex_lock(&g.lock);
			for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next)
				live += sb->state != SB_DEAD;
			pthread_mutex_unlock(&g.lock);
			cJSON_AddStringToObject(o, "status", "ok");
			cJSON_AddNumberToObject(o, "sandboxes", live);
			reply_json(r, 200, o);
		} else {
			reply_405(r, "GET,HEAD");
		}
		return;
	}
	/* Find the route and its allowed methods first. */
	if (seg_is(q, 0, "sandboxes") && n == 1)
		allow = "GET,HEAD,POST";
	else if (seg_is(q, 0, "sandboxes") && n == 2)
		allow = "GET,HEAD,DELETE";
	else if (seg_is(q, 0, "sandboxes") && n == 3) {
		const char *a = q->segs[2];

		if (!strcmp(a, "logs"))
			allow = "GET,HEAD";
		else if (!strcmp(a, "pause") || !strcmp(a, "resume") || !strcmp(a, "connect") ||
			 !strcmp(a, "timeout") || !strcmp(a, "refreshes") || !strcmp(a, "snapshots") ||
			 !strcmp(a, "rollback"))
			allow = "POST";
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes") && n == 2)
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes") && n == 4 && seg_is(q, 3, "logs"))
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "snapshots") && n == 1)
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "templates")) {
		if (n == 1)
			allow = "GET,HEAD,POST";
		else if (n == 2 && seg_is(q, 1, "compat"))
			allow = "GET,HEAD";
		else if (n == 2)
			allow = "GET,HEAD,POST,DELETE,PATCH";
		else if (n == 3 && seg_is(q, 1, "aliases"))
			allow = "GET,HEAD";
		else if (n == 3 && seg_is(q, 2, "alias"))
			allow = "PUT";
		else if (n == 4 && seg_is(q, 2, "builds"))
			allow = "POST";
		else if (n == 5 && seg_is(q, 2, "builds") && (seg_is(q, 4, "status") || seg_is(q, 4, "logs")))
			allow = "GET,HEAD";
	}
	if (!allow) {
		reply_empty(r, 404);
		return;
	}
	if (check_auth(q, r) < 0)
		return;
	if (seg_is(q, 0, "sandboxes")) {
		if (n == 1 && post)
			return handle_create(q, r, 0);
		if (n == 1 && get)
			return handle_list(q, r, 0);
		if (n == 2 && get)
			return handle_get(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_kill(r, q->segs[1]);
		if (n == 3 && get && seg_is(q, 2, "logs"))
			return handle_logs(r, q->segs[1], 0);
		if (n == 3 && post) {
			const char *id = q->segs[1], *a = q->segs[2];

			if (!strcmp(a, "connect"))
				return handle_connect(q, r, id, 0);
			if (!strcmp(a, "resume"))
				return handle_connect(q, r, id, 1);
			if (!strcmp(a, "pause"))
				return handle_pause(q, r, id);
			if (!strcmp(a, "timeout"))
				return handle_timeout(q, r, id);
			if (!strcmp(a, "refreshes"))
				return handle_refresh(q, r, id);
			if (!strcmp(a, "snapshots")) {
				if (!valid_path_id(id))
					return reply_error(r, 400, "invalid path parameter sandboxID");
				return handle_snapshot(q, r, id);
			}
			if (!strcmp(a, "rollback")) {
				if (!valid_path_id(id))
					return reply_error(r, 400, "invalid path parameter sandboxID");
				return handle_rollback(q, r, id);
			}
		}
	} else if (seg_is(q, 0, "v2")) {
		if (n == 2 && get)
			return handle_list(q, r, 1);
		if (n == 4 && get)
			return handle_logs(r, q->segs[2], 1);
	} else if (seg_is(q, 0, "snapshots") && get) {
		return handle_list_snapshots(q, r);
	} else if (seg_is(q, 0, "templates")) {
		if (n == 1 && get)
			return handle_cube_templates_list(r);
		if (n == 1 && post)
			return handle_cube_template_create(q, r);
		if (n == 2 && seg_is(q, 1, "compat") && get)
			return reply_json(r, 200, cJSON_CreateArray());
		if (n == 2 && get)
			return handle_cube_template_get(r, q->segs[1]);
		if (n == 2 && post)
			return handle_cube_rebuild(q, r, q->segs[1], 1);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_template_delete(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "PATCH"))
			return reply_error(r, 501, "updating a template is not implemented");
		if (n == 3 && seg_is(q, 1, "aliases") && get) {
			if (!valid_path_id(q->segs[2]))
				return reply_error(r, 400, "invalid path parameter alias");
			return handle_alias(r, q->segs[2]);
		}
		if (n == 3 && !strcmp(m, "PUT"))
			return handle_cube_set_alias(q, r, q->segs[1]);
		if (n == 4 && post)
			return handle_cube_rebuild(q, r, q->segs[1], 0);
		if (n == 5 && get)
			return handle_cube_build_status(r, q->segs[1], q->segs[3], seg_is(q, 4, "logs"));
	}
	reply_405(r, allow);
}

void dispatch(struct req *q, struct reply *r)
{
	if (strncmp(q->url, "/_fake/", 7) == 0)
		return handle_fake(q, r);
	if (q->too_big) {
		if (is_cube())
			reply_text(r, 413, "Failed to buffer the request body: length limit exceeded");
		else
			reply_error(r, 413, "request body too large");
		return;
	}
	if (is_cube())
		route_cube(q, r);
	else
		route_e2b(q, r);
}
