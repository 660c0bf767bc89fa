/*
 * E2B's templates and snapshots under /e2b, mapped onto what hangar has:
 * a templateID is an environment of HANGAR_ENVIRONMENTS_FILE, an image of
 * the image store (its digest, or one of its names), a template of the
 * default provider, a snapshot taken through /e2b, or E2B's "base" (the
 * provider's default). A create resolves a templateID in the same order
 * (e2b.c), so what these routes list a create can name. Templates are not
 * built here: an environment is published with `hangar environment
 * publish`, an image pulled or imported with `hangar image`.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "e2b.h"

enum kind { K_NONE, K_BASE, K_ENVIRONMENT, K_IMAGE, K_SNAPSHOT, K_PROVIDER };

/* One template as these routes show it. */
struct tmpl {
	enum kind kind;
	char *id;          /* its templateID */
	cJSON *names;      /* an array of strings: its names and aliases */
	char *status;      /* E2B's build status */
	int64_t created_us; /* 0: unknown */
};

static void tmpl_dispose(struct tmpl *t)
{
	free(t->id);
	cJSON_Delete(t->names);
	free(t->status);
	memset(t, 0, sizeof(*t));
}

static int tmpl_set(struct tmpl *t, enum kind kind, const char *id, const char *status, int64_t created_us)
{
	t->kind = kind;
	t->id = strdup(id);
	t->status = strdup(status);
	t->names = cJSON_CreateArray();
	t->created_us = created_us;
	return t->id && t->status && t->names ? 0 : -1;
}

static void add_name(struct tmpl *t, const char *name)
{
	if (name && name[0])
		cJSON_AddItemToArray(t->names, cJSON_CreateString(name));
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* E2B's build ids are UUIDs; a template here has one build, named from its
 * templateID so that it stays the same from answer to answer. */
static void build_id(char out[37], const char *template_id)
{
	unsigned char h[16];
	char hex[33];

	crypto_generichash(h, sizeof(h), (const unsigned char *)template_id, strlen(template_id), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12, hex + 16, hex + 20);
}

/* A provider's word for a template's state as one of E2B's four. */
static const char *build_status(const char *word)
{
	if (!word[0] || strcmp(word, "ready") == 0 || strcmp(word, "uploaded") == 0)
		return "ready";
	if (strcmp(word, "building") == 0 || strcmp(word, "waiting") == 0 || strcmp(word, "error") == 0)
		return word;
	if (strcmp(word, "failed") == 0)
		return "error";
	return "waiting";
}

/* ---- the sources ---- */

struct gather {
	struct tmpl *v;
	size_t n, cap;
	int failed;
};

static struct tmpl *gather_next(struct gather *g)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		struct tmpl *nv = realloc(g->v, cap * sizeof(*nv));
		if (!nv) {
			g->failed = 1;
			return NULL;
		}
		g->v = nv;
		g->cap = cap;
	}
	memset(&g->v[g->n], 0, sizeof(g->v[g->n]));
	return &g->v[g->n];
}

static void gather_free(struct gather *g)
{
	for (size_t i = 0; i < g->n; i++)
		tmpl_dispose(&g->v[i]);
	free(g->v);
}

static int gather_keep(struct gather *g, struct tmpl *t, int rc)
{
	if (rc < 0) {
		tmpl_dispose(t);
		g->failed = 1;
		return 1;
	}
	g->n++;
	return 0;
}

static int on_environment(const hangar_environment_info *e, void *payload)
{
	struct gather *g = payload;
	struct tmpl *t = gather_next(g);
	if (!t)
		return 1;
	int rc = tmpl_set(t, K_ENVIRONMENT, e->name, "ready", 0);
	if (rc == 0)
		add_name(t, e->name);
	return gather_keep(g, t, rc);
}

static int on_image(const hangar_image_info *i, void *payload)
{
	struct gather *g = payload;
	struct tmpl *t = gather_next(g);
	if (!t)
		return 1;
	int rc = tmpl_set(t, K_IMAGE, i->digest, "ready", i->created_us);
	for (size_t k = 0; rc == 0 && i->names && i->names[k]; k++)
		add_name(t, i->names[k]);
	return gather_keep(g, t, rc);
}

static int on_template(const hangar_template_info *i, void *payload)
{
	struct gather *g = payload;
	struct tmpl *t = gather_next(g);
	if (!t)
		return 1;
	int rc = tmpl_set(t, K_PROVIDER, i->template_id, build_status(i->status), 0);
	if (rc == 0)
		add_name(t, i->name);
	return gather_keep(g, t, rc);
}

struct snap_walk {
	struct gather *g;
	const char *caller;   /* NULL: everyone's */
};

static int on_snapshot(cJSON *snap, void *payload)
{
	struct snap_walk *w = payload;
	struct tmpl *t;
	cJSON *it;

	if (w->caller && strcmp(cJSON_GetObjectItemCaseSensitive(snap, "caller")->valuestring, w->caller) != 0)
		return 0;
	if (!(t = gather_next(w->g)))
		return 1;
	int rc = tmpl_set(t, K_SNAPSHOT, cJSON_GetObjectItemCaseSensitive(snap, "snapshotID")->valuestring, "ready",
			  (int64_t)cJSON_GetObjectItemCaseSensitive(snap, "createdUs")->valuedouble);
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(snap, "names")) if (rc == 0) add_name(t, it->valuestring);
	return gather_keep(w->g, t, rc);
}

/*
 * Every template, in the order a create resolves a templateID: the
 * environments, the images, the default provider's templates. A source the
 * setup lacks (no environments file, no image store, a provider that lists
 * none) adds nothing; any other failure is the answer's. 0, or a library
 * error code after which g holds nothing useful.
 */
static int gather_all(struct gather *g)
{
	int rc = hangar_environment_list(hangard->ctx, on_environment, g);
	if (rc < 0 && rc != HANGAR_ENOTFOUND && rc != HANGAR_EUNSUPPORTED)
		return rc;
	rc = hangar_image_list(hangard->ctx, on_image, g);
	if (rc < 0 && rc != HANGAR_ENOTFOUND && rc != HANGAR_EUNSUPPORTED)
		return rc;
	rc = hangar_template_list(hangard->ctx, NULL, on_template, g);
	if (rc < 0 && rc != HANGAR_EUNSUPPORTED)
		return rc;
	return g->failed ? HANGAR_ENOMEM : 0;
}

static int has_name(const struct tmpl *t, const char *name)
{
	cJSON *it;
	if (strcmp(t->id, name) == 0)
		return 1;
	cJSON_ArrayForEach(it, t->names) if (strcmp(it->valuestring, name) == 0) return 1;
	return 0;
}

/* Moves the one of g that name stands for into *out; 1 when there is one. */
static int take_named(struct gather *g, const char *name, struct tmpl *out)
{
	for (size_t i = 0; i < g->n; i++)
		if (has_name(&g->v[i], name)) {
			*out = g->v[i];
			memset(&g->v[i], 0, sizeof(g->v[i]));
			return 1;
		}
	return 0;
}

/* A source that has nothing of that name, or that this setup lacks: 0.
 * Any other failure stays. */
static int none_there(int rc)
{
	return rc == HANGAR_ENOTFOUND || rc == HANGAR_EINVAL || rc == HANGAR_EUNSUPPORTED ? 0 : rc;
}

/*
 * The template a templateID or name stands for, in a create's order; 0 with
 * *out filled (K_NONE when there is none), or a library error code.
 */
static int resolve(const char *name, struct tmpl *out)
{
	struct gather g = { 0 };
	struct snap_walk w = { &g, NULL };
	int rc;

	memset(out, 0, sizeof(*out));
	if (strcmp(name, "base") == 0)
		return tmpl_set(out, K_BASE, "base", "ready", 0) < 0 ? HANGAR_ENOMEM : 0;
	rc = none_there(hangar_environment_get(hangard->ctx, name, on_environment, &g));
	if (rc < 0 || take_named(&g, name, out))
		goto out;
	rc = hangar_image_inspect(hangard->ctx, name, on_image, &g);
	/* An image found by a digest's prefix or a short name: its own. */
	if (rc == 0 && g.n > 0 && g.v[g.n - 1].kind == K_IMAGE) {
		*out = g.v[g.n - 1];
		memset(&g.v[g.n - 1], 0, sizeof(g.v[0]));
		goto out;
	}
	if ((rc = none_there(rc)) < 0)
		goto out;
	if (e2b_snapshot_walk(on_snapshot, &w) < 0) {
		rc = HANGAR_EOS;
		goto out;
	}
	if (take_named(&g, name, out))
		goto out;
	rc = none_there(hangar_template_list(hangard->ctx, NULL, on_template, &g));
	if (rc == 0)
		take_named(&g, name, out);
out:
	if (rc >= 0 && g.failed)
		rc = HANGAR_ENOMEM;
	if (rc < 0)
		tmpl_dispose(out);
	gather_free(&g);
	return rc < 0 ? rc : 0;
}

/* ---- answers ---- */

/* Fills in the members Template and TemplateWithBuilds share. */
static void add_common(cJSON *o, const struct tmpl *t, const char *created)
{
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddBoolToObject(o, "public", t->kind == K_BASE);
	cJSON_AddItemToObject(o, "aliases", cJSON_Duplicate(t->names, 1));
	cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
	cJSON_AddStringToObject(o, "createdAt", created);
	cJSON_AddStringToObject(o, "updatedAt", created);
	cJSON_AddNullToObject(o, "lastSpawnedAt");
	sjson_add_int64(o, "spawnCount", 0);
}

/* E2B's Template; sizes are a create's (its tier's), so 0 here. */
static cJSON *template_json(const struct tmpl *t)
{
	char created[80], build[37];
	cJSON *o = cJSON_CreateObject();

	/* Unknown: the time of the answer, as an endless sandbox's endAt. */
	e2b_iso_time(created, t->created_us ? t->created_us : now_us());
	build_id(build, t->id);
	add_common(o, t, created);
	cJSON_AddStringToObject(o, "buildID", build);
	sjson_add_int64(o, "cpuCount", 0);
	sjson_add_int64(o, "memoryMB", 0);
	sjson_add_int64(o, "diskSizeMB", 0);
	cJSON_AddNullToObject(o, "createdBy");
	sjson_add_int64(o, "buildCount", 1);
	cJSON_AddStringToObject(o, "envdVersion", E2B_ENVD_VERSION);
	cJSON_AddStringToObject(o, "buildStatus", t->status);
	return o;
}

static void list_common(struct request *r, int v2)
{
	struct gather g = { 0 };
	const char *limit_q = request_query(r, "limit"), *next = request_query(r, "nextToken");
	long limit = 100, from = 0;
	char *end;
	int rc;

	if (v2 && limit_q) {
		limit = strtol(limit_q, &end, 10);
		if (*end || end == limit_q || limit < 1 || limit > 100) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"limit\" is a whole number from 1 to 100");
			return;
		}
	}
	/* A token is the position of the next one: the order is the same from
	 * answer to answer while nothing is added or removed. */
	if (v2 && next) {
		from = strtol(next, &end, 10);
		if (*end || end == next || from < 1 || from > 1000000) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"nextToken\" is not one this server gave");
			return;
		}
	}
	rc = gather_all(&g);
	if (rc < 0) {
		gather_free(&g);
		if (rc == HANGAR_ENOMEM)
			reply_error(r, 500, "os", rc, "out of memory listing the templates");
		else
			reply_hangar_error(r, rc);
		return;
	}
	cJSON *arr = cJSON_CreateArray();
	size_t i;
	for (i = (size_t)from; i < g.n && (!v2 || i < (size_t)(from + limit)); i++)
		cJSON_AddItemToArray(arr, template_json(&g.v[i]));
	reply_json(r, 200, arr);
	if (v2 && i < g.n) {
		char token[32];
		snprintf(token, sizeof(token), "%zu", i);
		reply_header(r, "X-Next-Token", token);
	}
	gather_free(&g);
}

void h_e2b_templates(struct request *r)
{
	list_common(r, 0);
}

void h_e2b_templates_v2(struct request *r)
{
	list_common(r, 1);
}

/* The template the path names, or -1 after answering (404 when none). */
static int open_template(struct request *r, const char *name, struct tmpl *t)
{
	int rc;

	if (!name[0] || strlen(name) > 512 || !sjson_text_ok(name, strlen(name))) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "a templateID is 1 to 512 bytes of text");
		return -1;
	}
	rc = resolve(name, t);
	if (rc == HANGAR_EOS || rc == HANGAR_ENOMEM) {
		/* Ours, not the library's: its last error says nothing of it. */
		reply_error(r, 500, "os", rc, "cannot read the snapshots' records or hold the templates");
		return -1;
	}
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return -1;
	}
	if (t->kind == K_NONE) {
		reply_error(r, 404, "not_found", HANGAR_ENOTFOUND,
			    "no environment, image, snapshot or template is named \"%.512s\"", name);
		return -1;
	}
	return 0;
}

/* TemplateWithBuilds: its one build, ready. */
void h_e2b_template_get(struct request *r)
{
	struct tmpl t;
	char created[80], build[37];

	if (open_template(r, request_param(r), &t) < 0)
		return;
	e2b_iso_time(created, t.created_us ? t.created_us : now_us());
	build_id(build, t.id);
	cJSON *o = cJSON_CreateObject(), *builds, *b;
	add_common(o, &t, created);
	builds = cJSON_AddArrayToObject(o, "builds");
	b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "buildID", build);
	cJSON_AddStringToObject(b, "status", t.status);
	cJSON_AddStringToObject(b, "createdAt", created);
	cJSON_AddStringToObject(b, "updatedAt", created);
	cJSON_AddStringToObject(b, "finishedAt", created);
	sjson_add_int64(b, "cpuCount", 0);
	sjson_add_int64(b, "memoryMB", 0);
	sjson_add_int64(b, "diskSizeMB", 0);
	cJSON_AddStringToObject(b, "envdVersion", E2B_ENVD_VERSION);
	cJSON_AddItemToArray(builds, b);
	reply_json(r, 200, o);
	tmpl_dispose(&t);
}

/* TemplateAliasResponse: the templateID a name stands for. */
void h_e2b_template_alias(struct request *r)
{
	struct tmpl t;

	if (open_template(r, request_param(r), &t) < 0)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "templateID", t.id);
	cJSON_AddBoolToObject(o, "public", t.kind == K_BASE);
	reply_json(r, 200, o);
	tmpl_dispose(&t);
}

/*
 * Only an image is removed here (hangar_image_remove(): 409 while a sandbox
 * uses it). The rest is refused, never forgotten quietly: an environment is
 * a line of HANGAR_ENVIRONMENTS_FILE, and the library deletes neither a
 * provider's template nor a snapshot.
 */
void h_e2b_template_delete(struct request *r)
{
	struct tmpl t;
	int rc;

	if (open_template(r, request_param(r), &t) < 0)
		return;
	switch (t.kind) {
	case K_IMAGE:
		rc = hangar_image_remove(hangard->ctx, t.id);
		if (rc < 0)
			reply_hangar_error(r, rc);
		else
			reply_empty(r, 204);
		break;
	case K_ENVIRONMENT:
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
			    "%s is an environment: remove it from HANGAR_ENVIRONMENTS_FILE", t.id);
		break;
	case K_SNAPSHOT:
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
			    "snapshots are not deleted through hangar: delete %s on its platform", t.id);
		break;
	default:
		reply_error(r, 400, "unsupported", HANGAR_EUNSUPPORTED,
			    "%s is the provider's template: hangar does not delete templates", t.id);
		break;
	}
	tmpl_dispose(&t);
}

/* ---- GET /snapshots ---- */

struct snap_list {
	cJSON **v;
	size_t n, cap;
	const char *caller, *sandbox, *name;
	int failed;
};

/* "name", "ns/name" or either with ":tag" matches a snapshot named so. */
static int name_matches(cJSON *snap, const char *want)
{
	cJSON *it;
	size_t wn = strcspn(want, ":");
	if (strcmp(cJSON_GetObjectItemCaseSensitive(snap, "snapshotID")->valuestring, want) == 0)
		return 1;
	cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(snap, "names")) {
		const char *n = it->valuestring, *slash = strrchr(n, '/');
		if (strcmp(n, want) == 0 || (slash && strcmp(slash + 1, want) == 0))
			return 1;
		/* Untagged here, tagged in the question: the default tag only. */
		if (want[wn] == ':' && strcmp(want + wn, ":default") == 0 &&
		    ((strlen(n) == wn && strncmp(n, want, wn) == 0) ||
		     (slash && strlen(slash + 1) == wn && strncmp(slash + 1, want, wn) == 0)))
			return 1;
	}
	return 0;
}

static int keep_snapshot(cJSON *snap, void *payload)
{
	struct snap_list *l = payload;

	if (strcmp(cJSON_GetObjectItemCaseSensitive(snap, "caller")->valuestring, l->caller) != 0 ||
	    (l->sandbox && strcmp(cJSON_GetObjectItemCaseSensitive(snap, "sandboxID")->valuestring, l->sandbox) != 0) ||
	    (l->name && !name_matches(snap, l->name)))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		cJSON **nv = realloc(l->v, cap * sizeof(*nv));
		if (!nv) {
			l->failed = 1;
			return 1;
		}
		l->v = nv;
		l->cap = cap;
	}
	if (!(l->v[l->n] = cJSON_Duplicate(snap, 1))) {
		l->failed = 1;
		return 1;
	}
	l->n++;
	return 0;
}

static int64_t created_of(const cJSON *snap)
{
	return (int64_t)cJSON_GetObjectItemCaseSensitive(snap, "createdUs")->valuedouble;
}

/* Newest first, then by id: the order pages follow. */
static int snap_newest_first(const void *a, const void *b)
{
	const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
	if (created_of(x) != created_of(y))
		return created_of(x) > created_of(y) ? -1 : 1;
	return strcmp(cJSON_GetObjectItemCaseSensitive(x, "snapshotID")->valuestring,
		      cJSON_GetObjectItemCaseSensitive(y, "snapshotID")->valuestring);
}

/*
 * The caller's snapshots (those its token took through /e2b), newest
 * first; sandboxID and name narrow them; pages of limit (1 to 100), the
 * next one from X-Next-Token, "CREATED_US.N" of the last one given.
 */
void h_e2b_snapshots(struct request *r)
{
	struct snap_list l = { 0 };
	const char *limit_q = request_query(r, "limit"), *next = request_query(r, "nextToken");
	long limit = 100;
	size_t from = 0, i;
	char *end;

	l.caller = request_token_name(r);
	l.sandbox = request_query(r, "sandboxID");
	l.name = request_query(r, "name");
	if (limit_q) {
		limit = strtol(limit_q, &end, 10);
		if (*end || end == limit_q || limit < 1 || limit > 100) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"limit\" is a whole number from 1 to 100");
			return;
		}
	}
	if (e2b_snapshot_walk(keep_snapshot, &l) < 0 || l.failed) {
		reply_error(r, 500, "os", HANGAR_EOS, "cannot read the snapshots' records");
		goto out;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), snap_newest_first);
	if (next) {
		long long created = strtoll(next, &end, 10);
		if (end == next || *end != '.' || !end[1] || strlen(end + 1) > 512) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"nextToken\" is not one this server gave");
			goto out;
		}
		/* Past the one the token names: older, or as old with a later id. */
		while (from < l.n && (created_of(l.v[from]) > created ||
				      (created_of(l.v[from]) == created &&
				       strcmp(cJSON_GetObjectItemCaseSensitive(l.v[from], "snapshotID")->valuestring,
					      end + 1) <= 0)))
			from++;
	}
	cJSON *arr = cJSON_CreateArray();
	for (i = from; i < l.n && i < from + (size_t)limit; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToObject(o, "snapshotID",
				      cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(l.v[i], "snapshotID"), 1));
		cJSON_AddItemToObject(o, "names", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(l.v[i], "names"), 1));
		cJSON_AddItemToArray(arr, o);
	}
	reply_json(r, 200, arr);
	if (i < l.n && i > 0) {
		char *token;
		if (asprintf(&token, "%" PRId64 ".%s", created_of(l.v[i - 1]),
			     cJSON_GetObjectItemCaseSensitive(l.v[i - 1], "snapshotID")->valuestring) >= 0) {
			reply_header(r, "X-Next-Token", token);
			free(token);
		}
	}
out:
	for (i = 0; i < l.n; i++)
		cJSON_Delete(l.v[i]);
	free(l.v);
}
