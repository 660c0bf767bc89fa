/* Listings: sandboxes and snapshots, with paging. */
#define _GNU_SOURCE
#include "fake-e2b.h"

static int url_decode(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
			char h[3] = { p[1], p[2], 0 };

			*w++ = (char)strtol(h, NULL, 16);
			p += 2;
		} else if (*p == '+') {
			*w++ = ' ';
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	return 0;
}

/* metadata "k=v&k2=v2" (each part URL-encoded) → object. */
static cJSON *parse_metadata_query(const char *s)
{
	cJSON *o = cJSON_CreateObject();
	char *copy, *save = NULL;

	if (!s || !*s)
		return o;
	copy = strdup(s);
	for (char *t = strtok_r(copy, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(t, '=');

		if (!eq)
			continue;
		*eq = '\0';
		url_decode(t);
		url_decode(eq + 1);
		cJSON_DeleteItemFromObjectCaseSensitive(o, t);
		cJSON_AddStringToObject(o, t, eq + 1);
	}
	free(copy);
	return o;
}

static int metadata_matches(const struct sandbox *sb, cJSON *want)
{
	cJSON *e;

	cJSON_ArrayForEach(e, want) {
		cJSON *have = sb->metadata ? cJSON_GetObjectItemCaseSensitive(sb->metadata, e->string) : NULL;

		if (!cJSON_IsString(have) || strcmp(have->valuestring, e->valuestring) != 0)
			return 0;
	}
	return 1;
}

static int sort_desc;

static int cmp_started(const void *a, const void *b)
{
	const struct sandbox *x = *(struct sandbox *const *)a, *y = *(struct sandbox *const *)b;
	int c = (x->started_ms > y->started_ms) - (x->started_ms < y->started_ms);

	if (!c)
		c = strcmp(x->id, y->id);
	return sort_desc ? -c : c;
}

/* limit 1..100 (default 100) and nextToken (an offset); -1 after a 400. */
int page_args(struct req *q, struct reply *r, long *limit, long *offset)
{
	const char *l = arg(q, "limit"), *t = arg(q, "nextToken");
	char *end;

	*limit = 100;
	*offset = 0;
	if (l) {
		*limit = strtol(l, &end, 10);
		if (*end || *limit < 1 || *limit > 100) {
			reply_error(r, 400, "limit must be between 1 and 100");
			return -1;
		}
	}
	if (t && *t) {
		if (strncmp(t, "fake.", 5) != 0 || (*offset = strtol(t + 5, &end, 10)) < 0 || *end) {
			reply_error(r, 400, "invalid nextToken");
			return -1;
		}
	}
	/* --page-size: a server may send fewer than asked for; clients must follow the token. */
	if (g.page_size > 0 && *limit > g.page_size)
		*limit = g.page_size;
	return 0;
}

void next_token_header(struct reply *r, long next, const char *name)
{
	char v[32];

	snprintf(v, sizeof(v), "fake.%ld", next);
	reply_header(r, name, v);
}

/* The X-Next-Token of a page: more after next, or (a fault) the request's own token again. */
static void page_token(struct req *q, struct reply *r, int more, long next, const char *name)
{
	const char *t = arg(q, "nextToken");

	if (q->repeat_token)
		reply_header(r, name, t && *t ? t : "fake.0");
	else if (more)
		next_token_header(r, next, name);
}

/* GET /v2/sandboxes (v2=1) or GET /sandboxes. */
void handle_list(struct req *q, struct reply *r, int v2)
{
	int want_running = 1, want_paused = !v2 ? is_cube() : 1;
	long limit = 100, offset = 0;
	const char *st = arg(q, "state"), *order = arg(q, "order"), *tpl = arg(q, "template");
	cJSON *meta = parse_metadata_query(arg(q, "metadata")), *out;
	struct sandbox **v = NULL;
	size_t n = 0, cap = 0, running = 0;

	if (v2 && st && *st) {
		if (is_cube()) {
			/* Only the single literals filter; anything else means no filter [Cube]. */
			if (strcmp(st, "running") == 0)
				want_paused = 0;
			else if (strcmp(st, "paused") == 0)
				want_running = 0;
		} else {
			char *copy = strdup(st), *save = NULL;

			want_running = want_paused = 0;
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				if (strcmp(t, "running") == 0)
					want_running = 1;
				else if (strcmp(t, "paused") == 0)
					want_paused = 1;
				else {
					free(copy);
					cJSON_Delete(meta);
					reply_error(r, 400, "invalid state '%s'", t);
					return;
				}
			}
			free(copy);
		}
	}
	if (v2 && !is_cube()) {
		if (page_args(q, r, &limit, &offset) < 0) {
			cJSON_Delete(meta);
			return;
		}
		if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
			cJSON_Delete(meta);
			reply_error(r, 400, "invalid order");
			return;
		}
	} else if (v2) {
		const char *l = arg(q, "limit");

		limit = l ? atol(l) : 100;
		if (limit < 0)
			limit = 100;
	} else {
		limit = is_cube() ? 200 : LONG_MAX;
	}
	pthread_mutex_lock(&g.lock);
	for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
		if (sb->state == SB_DEAD)
			continue;
		if (sb->state == SB_RUNNING ? !want_running : !want_paused)
			continue;
		if (!metadata_matches(sb, meta))
			continue;
		if (tpl && *tpl && strcmp(sb->template_id, tpl) != 0 && !(sb->alias && strcmp(sb->alias, tpl) == 0))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				abort();
		}
		v[n++] = sb;
		if (sb->state == SB_RUNNING)
			running++;
	}
	sort_desc = !(order && strcmp(order, "asc") == 0);
	if (n)
		qsort(v, n, sizeof(*v), cmp_started);
	out = cJSON_CreateArray();
	for (size_t i = (size_t)offset; i < n && (long)(i - (size_t)offset) < limit; i++)
		cJSON_AddItemToArray(out, sandbox_json_locked(v[i], V_LISTED));
	pthread_mutex_unlock(&g.lock);
	if (v2 && !is_cube()) {
		char num[32];

		page_token(q, r, (size_t)offset + (size_t)limit < n, offset + limit, "X-Next-Token");
		if (want_running) {
			snprintf(num, sizeof(num), "%zu", running);
			reply_header(r, "X-Total-Running", num);
		}
	}
	free(v);
	cJSON_Delete(meta);
	reply_json(r, 200, out);
}

void handle_list_snapshots(struct req *q, struct reply *r)
{
	long limit, offset;
	const char *sid = arg(q, "sandboxID"), *name = arg(q, "name");
	cJSON *out;
	long i = 0;
	int more = 0;

	if (page_args(q, r, &limit, &offset) < 0)
		return;
	out = cJSON_CreateArray();
	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next) {
		cJSON *o;

		if (!t->is_snapshot || t->deleted)
			continue;
		if (sid && *sid && strcmp(t->origin, sid) != 0)
			continue;
		if (name && *name && !(t->alias && strcmp(t->alias, name) == 0))
			continue;
		if (i++ < offset)
			continue;
		if (i > offset + limit) {
			more = 1;
			break;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "snapshotID", t->snap_id);
		cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
		if (is_cube()) {
			cJSON_AddStringToObject(o, "status", "READY");
			cJSON_AddStringToObject(o, "originSandboxID", t->origin);
			add_time(o, "createdAt", t->created_ms);
			add_time(o, "updatedAt", t->created_ms);
		}
		cJSON_AddItemToArray(out, o);
	}
	pthread_mutex_unlock(&g.lock);
	page_token(q, r, more, offset + limit, is_cube() ? "x-next-token" : "X-Next-Token");
	reply_json(r, 200, out);
}
