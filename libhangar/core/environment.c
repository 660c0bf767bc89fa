/*
 * Environments: named descriptions of a sandbox (tier, template per
 * provider, variables, lifetime, network, workspace, user), kept in one JSON
 * file (HANGAR_ENVIRONMENTS_FILE). The file is read and checked whole when
 * the context opens and when the setting changes, and read again at each
 * use, so an edit takes effect without reopening; an edit that breaks it
 * fails the next use with the same message naming the variable.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "util/buf.h"
#include "util/sjson.h"
#include "context.h"
#include "environment.h"
#include "versioned.h"

#define ENV_VAR "HANGAR_ENVIRONMENTS_FILE"
#define ENV_FILE_MAX (1u << 20)
#define ENV_MAX 1024
#define ENV_VARS_MAX 256

static const char *const tier_names[] = { "fast", "isolated", "default", "heavy" };

static int bad(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(const char *path, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: %s: %s", ENV_VAR, path, what);
}

int env_valid_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= 64 && s[0] != '.' && s[0] != '-' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int valid_var_name(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= 256 && !(s[0] >= '0' && s[0] <= '9') &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n;
}

static int valid_provider(const char *s)
{
	size_t n = strlen(s);

	return (n == 1 && s[0] == '*') ||
	       (n > 0 && n <= 32 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n);
}

/* A string member with no control bytes, at most max bytes. */
static int text_ok(const cJSON *v, size_t max)
{
	if (!cJSON_IsString(v) || strlen(v->valuestring) > max)
		return 0;
	for (const unsigned char *p = (const unsigned char *)v->valuestring; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

int env_valid_image(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= ENV_IMAGE_MAX && isalnum((unsigned char)s[0]) &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@") == n;
}

static int check_one(const char *path, const cJSON *def)
{
	const char *name = def->string;

	if (!env_valid_name(name))
		return bad(path, "\"%.64s\" is not an environment name ([A-Za-z0-9._-], at most 64)", name);
	if (!cJSON_IsObject(def))
		return bad(path, "environment \"%s\" must be a JSON object", name);
	for (const cJSON *m = def->child; m; m = m->next) {
		const char *k = m->string;

		if (!strcmp(k, "description")) {
			if (!text_ok(m, 1024))
				return bad(path, "environment \"%s\": description must be one line of text", name);
		} else if (!strcmp(k, "tier")) {
			int known = 0;

			for (size_t i = 0; cJSON_IsString(m) && i < sizeof(tier_names) / sizeof(tier_names[0]); i++)
				known |= !strcmp(m->valuestring, tier_names[i]);
			if (!known)
				return bad(path, "environment \"%s\": tier must be fast, isolated, default or heavy", name);
		} else if (!strcmp(k, "templates")) {
			if (!cJSON_IsObject(m))
				return bad(path, "environment \"%s\": templates must map provider names to templates",
					   name);
			for (const cJSON *t = m->child; t; t = t->next)
				if (!valid_provider(t->string) || !text_ok(t, 256) || !*t->valuestring)
					return bad(path,
						   "environment \"%s\": templates: \"%.32s\" must be a provider name "
						   "(or \"*\") mapped to a template",
						   name, t->string);
		} else if (!strcmp(k, "env")) {
			int n = 0;

			if (!cJSON_IsObject(m))
				return bad(path, "environment \"%s\": env must map variable names to strings", name);
			for (const cJSON *e = m->child; e; e = e->next, n++)
				if (n >= ENV_VARS_MAX || !valid_var_name(e->string) || !cJSON_IsString(e) ||
				    strlen(e->valuestring) > 65536)
					return bad(path, "environment \"%s\": env: \"%.64s\" must be a variable name "
						   "mapped to a string (at most %d of them)", name, e->string, ENV_VARS_MAX);
		} else if (!strcmp(k, "workspace")) {
			if (!text_ok(m, PATH_MAX - 1) || m->valuestring[0] != '/')
				return bad(path, "environment \"%s\": workspace must be an absolute path", name);
		} else if (!strcmp(k, "user")) {
			if (!text_ok(m, 64) || !*m->valuestring || strchr(m->valuestring, '/'))
				return bad(path, "environment \"%s\": user must be a user name", name);
		} else if (!strcmp(k, "timeout_sec")) {
			if (!cJSON_IsNumber(m) || m->valuedouble < 0 || m->valuedouble > 366.0 * 86400 ||
			    m->valuedouble != (double)(int64_t)m->valuedouble)
				return bad(path, "environment \"%s\": timeout_sec must be a whole number of seconds "
					   "from 0 to 31622400", name);
		} else if (!strcmp(k, "image")) {
			if (!env_valid_image(cJSON_IsString(m) ? m->valuestring : ""))
				return bad(path, "environment \"%s\": image must be an image reference "
					   "([REGISTRY/]NAME[:TAG][@sha256:HEX], at most 512 bytes)", name);
		} else if (!strcmp(k, "network")) {
			if (!cJSON_IsString(m) || (strcmp(m->valuestring, "on") && strcmp(m->valuestring, "off")))
				return bad(path, "environment \"%s\": network must be \"on\" or \"off\"", name);
		} else {
			return bad(path, "environment \"%s\": unknown member \"%.64s\" (known: description, tier, "
				   "templates, image, env, workspace, user, timeout_sec, network)", name, k);
		}
	}
	return 0;
}

/*
 * Reads path into a NUL-terminated buffer; *missing set when there is no such
 * file, or (lenient, for the default place) when it cannot be reached: a
 * caller whose HOME is another user's (sudo -u keeps it) has no file there.
 */
static int read_small(const char *path, char **out, size_t *len, int *missing, int lenient)
{
	struct hbuf b = HBUF_INIT;
	struct stat st;
	char chunk[8192];
	ssize_t n;
	int fd;

	*out = NULL;
	*missing = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT || (lenient && (errno == EACCES || errno == ENOTDIR))) {
			*missing = 1;
			return 0;
		}
		return herr_os(HANGAR_ECONFIG, errno, "%s: cannot open %s", ENV_VAR, path);
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return bad(path, "not a regular file");
	}
	while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			hbuf_free(&b);
			return herr_os(HANGAR_ECONFIG, e, "%s: cannot read %s", ENV_VAR, path);
		}
		if (b.len + (size_t)n > ENV_FILE_MAX) {
			close(fd);
			hbuf_free(&b);
			return bad(path, "larger than %u bytes", ENV_FILE_MAX);
		}
		if (hbuf_put(&b, chunk, (size_t)n) != 0) {
			close(fd);
			hbuf_free(&b);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	}
	close(fd);
	/* The buffer is kept NUL-terminated; an empty file gives "". */
	*len = b.len;
	*out = b.data ? hbuf_steal(&b) : strdup("");
	if (!*out)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	return 0;
}

int env_file_load(const char *path, int may_be_missing, struct cJSON **out)
{
	char *text, err[256];
	size_t len = 0;
	cJSON *root;
	int missing, rc, n = 0;

	*out = NULL;
	if ((rc = read_small(path, &text, &len, &missing, may_be_missing)) != 0)
		return rc;
	if (missing)
		return may_be_missing ? 0 : bad(path, "no such file");
	/* Strict: a member said twice (two "tier"s in one environment) or
	 * anything after the object is refused, naming where. */
	root = sjson_parse(text, len, 0, err, sizeof(err));
	free(text);
	if (!root)
		return bad(path, "not strict JSON: %s", err);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return bad(path, "not a JSON object of environments");
	}
	for (const cJSON *d = root->child; d; d = d->next) {
		if (++n > ENV_MAX) {
			cJSON_Delete(root);
			return bad(path, "more than %d environments", ENV_MAX);
		}
		if ((rc = check_one(path, d)) != 0) {
			cJSON_Delete(root);
			return rc;
		}
	}
	*out = root;
	return 0;
}

char *env_default_path(void)
{
	const char *v = getenv("XDG_CONFIG_HOME");
	char *out;

	if (v && v[0] == '/')
		return asprintf(&out, "%s/hangar/environments.json", v) < 0 ? NULL : out;
	v = getenv("HOME");
	if (!v || v[0] != '/')
		return NULL;
	return asprintf(&out, "%s/.config/hangar/environments.json", v) < 0 ? NULL : out;
}

/* The file the context's setting names (its default may be absent). */
static int load_ctx(hangar_ctx *ctx, cJSON **root, char **path)
{
	const char *p = hctx_str(ctx, HS_ENVIRONMENTS_FILE);
	char *def = NULL;
	int rc;

	if (!p || !*p) {
		def = env_default_path();
		if (!def) {
			*root = NULL;
			if (path)
				*path = NULL;
			return 0;
		}
		p = def;
	}
	rc = env_file_load(p, def != NULL, root);
	if (rc == 0 && path && !(*path = strdup(p)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	free(def);
	if (rc) {
		cJSON_Delete(*root);
		*root = NULL;
	}
	return rc;
}

int env_check_ctx(hangar_ctx *ctx)
{
	cJSON *root;
	int rc = load_ctx(ctx, &root, NULL);

	cJSON_Delete(root);
	return rc;
}

/* ---- resolving one for a create ------------------------------------------------------ */

void env_resolved_free(struct env_resolved *r)
{
	if (!r)
		return;
	cJSON_Delete(r->root);
	cJSON_Delete(r->for_tier);
	for (char **e = r->envv; e && *e; e++)
		free(*e);
	free(r->envv);
	free(r);
}

int env_resolve(hangar_ctx *ctx, const char *name, struct env_resolved **out)
{
	struct env_resolved *r;
	const cJSON *def, *m;
	char *path = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	if (!env_valid_name(name))
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: \"%.64s\" is not an environment name",
			    name);
	r = calloc(1, sizeof(*r));
	if (!r)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if ((rc = load_ctx(ctx, &r->root, &path)) != 0) {
		free(r);
		return rc;
	}
	def = cJSON_GetObjectItemCaseSensitive(r->root, name);
	if (!def) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_CONFIG, "no environment \"%s\" in %s", name,
			  path ? path : "(no " ENV_VAR ")");
		free(path);
		env_resolved_free(r);
		return rc;
	}
	free(path);
	r->def = def;
	r->name = def->string;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "tier")))
		r->tier = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "workspace")))
		r->workspace = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "user")))
		r->user = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "timeout_sec")))
		r->timeout_sec = (int64_t)m->valuedouble;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "network")))
		r->network = !strcmp(m->valuestring, "on") ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF;
	r->templates = cJSON_GetObjectItemCaseSensitive(def, "templates");
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "image")))
		r->image = m->valuestring;
	/* What the tier needs to pick a template per provider: the templates, and the image. */
	r->for_tier = r->templates ? cJSON_Duplicate(r->templates, 1) : cJSON_CreateObject();
	if (!r->for_tier || (r->image && (!cJSON_AddStringToObject(r->for_tier, ENV_IMAGE_KEY, r->image) ||
					  !cJSON_AddStringToObject(r->for_tier, ENV_NAME_KEY, r->name)))) {
		env_resolved_free(r);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	m = cJSON_GetObjectItemCaseSensitive(def, "env");
	for (const cJSON *e = m ? m->child : NULL; e; e = e->next)
		n++;
	r->envv = calloc(n + 1, sizeof(*r->envv));
	if (!r->envv) {
		env_resolved_free(r);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	n = 0;
	for (const cJSON *e = m ? m->child : NULL; e; e = e->next) {
		if (asprintf(&r->envv[n], "%s=%s", e->string, e->valuestring) < 0) {
			r->envv[n] = NULL;
			env_resolved_free(r);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		n++;
	}
	*out = r;
	return 0;
}

const char *env_template_for(const struct cJSON *templates, const char *provider)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(templates, provider);

	if (!t)
		t = cJSON_GetObjectItemCaseSensitive(templates, "*");
	return cJSON_IsString(t) ? t->valuestring : NULL;
}

const char *env_exact_template_for(const struct cJSON *templates, const char *provider)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(templates, provider);

	return cJSON_IsString(t) ? t->valuestring : NULL;
}

const char *env_image_of(const struct cJSON *templates, const char **environment)
{
	const cJSON *i = cJSON_GetObjectItemCaseSensitive(templates, ENV_IMAGE_KEY);
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(templates, ENV_NAME_KEY);

	if (environment)
		*environment = cJSON_IsString(n) ? n->valuestring : "";
	return cJSON_IsString(i) ? i->valuestring : NULL;
}

/* ---- the public listing -------------------------------------------------------------- */

static int report(const cJSON *def, hangar_environment_fn fn, void *payload)
{
	hangar_environment_info in = HANGAR_ENVIRONMENT_INFO_INIT;
	const cJSON *m;
	char *templates, *env;
	int rc;

	in.name = def->string;
	in.description = "";
	in.tier = "";
	in.workspace = "";
	in.user = "";
	in.image = "";
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "image")))
		in.image = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "description")))
		in.description = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "tier")))
		in.tier = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "workspace")))
		in.workspace = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "user")))
		in.user = m->valuestring;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "timeout_sec")))
		in.timeout_sec = (int64_t)m->valuedouble;
	if ((m = cJSON_GetObjectItemCaseSensitive(def, "network")))
		in.network = !strcmp(m->valuestring, "on") ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF;
	m = cJSON_GetObjectItemCaseSensitive(def, "templates");
	templates = m ? cJSON_PrintUnformatted(m) : strdup("{}");
	m = cJSON_GetObjectItemCaseSensitive(def, "env");
	env = m ? cJSON_PrintUnformatted(m) : strdup("{}");
	if (!templates || !env) {
		free(templates);
		free(env);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	in.templates_json = templates;
	in.env_json = env;
	rc = fn(&in, payload);
	free(templates);
	free(env);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

int hangar_environment_list(hangar_ctx *ctx, hangar_environment_fn fn, void *payload)
{
	const cJSON **v = NULL;
	cJSON *root;
	size_t n = 0;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	if ((rc = load_ctx(ctx, &root, NULL)) != 0)
		return rc;
	for (const cJSON *d = root ? root->child : NULL; d; d = d->next)
		n++;
	if (n && !(v = calloc(n, sizeof(*v)))) {
		cJSON_Delete(root);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	n = 0;
	for (const cJSON *d = root ? root->child : NULL; d; d = d->next)
		v[n++] = d;
	if (n)
		qsort(v, n, sizeof(*v), by_name);
	herr_clear();
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = report(v[i], fn, payload);
	free(v);
	cJSON_Delete(root);
	return rc;
}

int hangar_environment_get(hangar_ctx *ctx, const char *name, hangar_environment_fn fn, void *payload)
{
	const cJSON *def;
	cJSON *root;
	char *path = NULL;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name && env_valid_name(name), "name is not an environment name");
	HCHECK_ARG(fn, "fn is NULL");
	if ((rc = load_ctx(ctx, &root, &path)) != 0)
		return rc;
	def = root ? cJSON_GetObjectItemCaseSensitive(root, name) : NULL;
	if (!def) {
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_CONFIG, "no environment \"%s\" in %s", name,
			  path ? path : "(no " ENV_VAR ")");
	} else {
		herr_clear();
		rc = report(def, fn, payload);
	}
	free(path);
	cJSON_Delete(root);
	return rc;
}
