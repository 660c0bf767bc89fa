/*
 * The HANGAR_* settings: names, defaults, validation, masking. A wrong value
 * fails hangar_ctx_new() or hangar_ctx_set() with a message naming the
 * variable, so a misconfiguration surfaces at open time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "context.h"

enum kind { K_STRING, K_NAME, K_PATH, K_UINT, K_ONOFF, K_CHOICE, K_URL, K_HOST, K_JSON };

struct setting_def {
	const char *name;
	enum kind kind;
	const char *fallback;   /* NULL: computed */
	int64_t min, max;       /* K_UINT */
	int secret;
	const char *choices;    /* K_CHOICE: "a|b|c" */
	int optional;           /* "" (unset) is a valid value */
	int (*check)(const char *name, const cJSON *json); /* K_JSON: the shape */
};

static int check_templates(const char *name, const cJSON *json);
static int check_tiers(const char *name, const cJSON *json);
static int check_hedge(const char *name, const cJSON *json);

static const struct setting_def defs[HS_COUNT] = {
	[HS_DEFAULT_PROVIDER] = { "HANGAR_DEFAULT_PROVIDER", K_NAME, "local", 0, 0, 0 },
	[HS_STATE_DIR] = { "HANGAR_STATE_DIR", K_PATH, NULL, 0, 0, 0 },
	[HS_ENVD_PATH] = { "HANGAR_ENVD_PATH", K_PATH, NULL, 0, 0, 0 },
	[HS_JAIL_PATH] = { "HANGAR_JAIL_PATH", K_PATH, NULL, 0, 0, 0 },
	[HS_BWRAP_PATH] = { "HANGAR_BWRAP_PATH", K_STRING, "bwrap", 0, 0, 0 },
	[HS_LOCAL_NETWORK] = { "HANGAR_LOCAL_NETWORK", K_ONOFF, "on", 0, 0, 0 },
	[HS_LOCAL_FREEZER] = { "HANGAR_LOCAL_FREEZER", K_CHOICE, "auto", 0, 0, 0, "auto|v2|v1|none" },
	[HS_LOCAL_MEMORY_MB] = { "HANGAR_LOCAL_MEMORY_MB", K_UINT, "2048", 16, 1LL << 22, 0 },
	[HS_LOCAL_PIDS] = { "HANGAR_LOCAL_PIDS", K_UINT, "512", 8, 1LL << 22, 0 },
	[HS_LOCAL_CPUS] = { "HANGAR_LOCAL_CPUS", K_UINT, "2", 1, 1024, 0 },
	[HS_LOCAL_DISK_MB] = { "HANGAR_LOCAL_DISK_MB", K_UINT, "1024", 1, 1LL << 24, 0 },
	[HS_LOCAL_UID_RANGE] = { "HANGAR_LOCAL_UID_RANGE", K_STRING, "", 0, 0, 0, NULL, 1 },
	[HS_SANDBOX_TIMEOUT] = { "HANGAR_SANDBOX_TIMEOUT_SECONDS", K_UINT, "300", 0, 366LL * 86400, 0 },
	[HS_EXEC_TIMEOUT] = { "HANGAR_EXEC_TIMEOUT_SECONDS", K_UINT, "120", 1, 7LL * 86400, 0 },
	[HS_REQUEST_TIMEOUT] = { "HANGAR_REQUEST_TIMEOUT_SECONDS", K_UINT, "60", 1, 86400, 0 },
	[HS_OUTPUT_LIMIT] = { "HANGAR_OUTPUT_LIMIT_BYTES", K_UINT, "1048576", 2, 1LL << 32, 0 },
	[HS_READ_LIMIT] = { "HANGAR_READ_LIMIT_BYTES", K_UINT, "10485760", 0, 1LL << 32, 0 },
	[HS_SECRET_KEY] = { "HANGAR_SECRET_KEY", K_STRING, "", 0, 0, 1, NULL, 1 },
	[HS_E2B_FLAVOR] = { "HANGAR_E2B_FLAVOR", K_CHOICE, "cloud", 0, 0, 0, "cloud|selfhosted|cube" },
	[HS_E2B_API_URL] = { "HANGAR_E2B_API_URL", K_URL, "", 0, 0, 0, NULL, 1 },
	[HS_E2B_DOMAIN] = { "HANGAR_E2B_DOMAIN", K_HOST, "e2b.app", 0, 0, 0 },
	[HS_E2B_SANDBOX_URL] = { "HANGAR_E2B_SANDBOX_URL", K_URL, "", 0, 0, 0, NULL, 1 },
	[HS_E2B_API_KEY] = { "HANGAR_E2B_API_KEY", K_STRING, "", 0, 0, 1, NULL, 1 },
	[HS_E2B_ALLOW_UNAUTHENTICATED_ENVD] = { "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", K_ONOFF, "false", 0, 0, 0 },
	[HS_E2B_ENVIRONMENT_TEMPLATES] = { "HANGAR_E2B_ENVIRONMENT_TEMPLATES", K_JSON, "{}", 0, 0, 0, NULL, 0,
					   check_templates },
	[HS_E2B_REQUEST_TIMEOUT] = { "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", K_UINT, "60", 1, 86400, 0 },
	[HS_E2B_TEMPLATE_BUILD_TIMEOUT] = { "HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS", K_UINT, "1800", 1,
					    7LL * 86400, 0 },
	[HS_TIERS] = { "HANGAR_TIERS", K_JSON, "{\"fast\":[\"e2b\"]}", 0, 0, 0, NULL, 0, check_tiers },
	[HS_TIER_COOLDOWN] = { "HANGAR_TIER_COOLDOWN_SECONDS", K_UINT, "60", 0, 86400, 0 },
	[HS_TIER_HEDGE] = { "HANGAR_TIER_HEDGE", K_JSON, "{}", 0, 0, 0, NULL, 0, check_hedge },
};

/* The tiers a create may ask for. */
static const char *const tier_names[] = { "fast", "isolated", "default", "heavy" };

static int valid_provider_name(const char *v)
{
	size_t n = strlen(v);

	return n > 0 && n <= 32 && strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int valid_tier(const char *t)
{
	for (size_t i = 0; i < sizeof(tier_names) / sizeof(tier_names[0]); i++)
		if (!strcmp(t, tier_names[i]))
			return 1;
	return 0;
}

static int check_templates(const char *name, const cJSON *json)
{
	for (const cJSON *e = json->child; e; e = e->next)
		if (!cJSON_IsString(e) || !*e->valuestring || !*e->string)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must map environment names to template ids (strings); \"%s\" does not",
				    name, e->string ? e->string : "");
	return 0;
}

static int check_tiers(const char *name, const cJSON *json)
{
	for (const cJSON *t = json->child; t; t = t->next) {
		if (!valid_tier(t->string))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s: unknown tier \"%s\" (tiers: fast, isolated, default, heavy)", name, t->string);
		if (!cJSON_IsArray(t))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s: tier \"%s\" must list provider names", name, t->string);
		for (const cJSON *p = t->child; p; p = p->next)
			if (!cJSON_IsString(p) || !valid_provider_name(p->valuestring))
				return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
					    "%s: tier \"%s\" lists something that is not a provider name", name,
					    t->string);
	}
	return 0;
}

static int check_hedge(const char *name, const cJSON *json)
{
	for (const cJSON *t = json->child; t; t = t->next) {
		if (!valid_tier(t->string))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: unknown tier \"%s\"", name, t->string);
		if (!cJSON_IsNumber(t) || t->valuedouble < 1 || t->valuedouble > 600000 ||
		    t->valuedouble != (double)(int64_t)t->valuedouble)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s: the delay for tier \"%s\" must be milliseconds from 1 to 600000", name,
				    t->string);
	}
	return 0;
}

static int valid_url(const char *v)
{
	const char *host;

	if (!strncmp(v, "http://", 7))
		host = v + 7;
	else if (!strncmp(v, "https://", 8))
		host = v + 8;
	else
		return 0;
	return *host && *host != '/' && !strpbrk(v, " \t\r\n\"<>\\^`|");
}

static int valid_host(const char *v)
{
	size_t n = strlen(v);

	return n > 0 && n < 254 && v[0] != '.' && v[0] != '-' && v[n - 1] != '.' &&
	       strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") == n;
}

static char *computed_default(enum hsetting s)
{
	char buf[PATH_MAX];
	const char *v;

	switch (s) {
	case HS_STATE_DIR:
		v = getenv("XDG_STATE_HOME");
		if (v && v[0] == '/') {
			snprintf(buf, sizeof(buf), "%s/hangar", v);
		} else {
			struct passwd *pw = getpwuid(getuid());

			v = getenv("HOME");
			if (!v || !*v)
				v = pw ? pw->pw_dir : "/tmp";
			snprintf(buf, sizeof(buf), "%s/.local/state/hangar", v);
		}
		return strdup(buf);
	case HS_ENVD_PATH:
		return strdup(HANGAR_ENVD_INSTALL_PATH);
	case HS_JAIL_PATH:
		return strdup(HANGAR_JAIL_INSTALL_PATH);
	default:
		return NULL;
	}
}

/* Validates value for setting s; on success stores its parsed number in *num. */
static int validate(enum hsetting s, const char *value, int64_t *num)
{
	const struct setting_def *d = &defs[s];

	*num = 0;
	if (d->optional && !*value)
		return 0;
	switch (d->kind) {
	case K_STRING:
		if (!*value)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must not be empty", d->name);
		return 0;
	case K_NAME:
		if (!*value || strlen(value) > 32 || strspn(value, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(value))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must be a provider name ([a-z0-9_-], at most 32), not \"%s\"", d->name, value);
		return 0;
	case K_PATH:
		if (value[0] != '/' || strlen(value) >= PATH_MAX - 64)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be an absolute path, not \"%s\"",
				    d->name, value);
		return 0;
	case K_UINT: {
		char *end;
		long long v;

		errno = 0;
		v = strtoll(value, &end, 10);
		if (errno || end == value || *end || v < d->min || v > d->max)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must be a whole number from %" PRId64 " to %" PRId64 ", not \"%s\"", d->name,
				    d->min, d->max, value);
		*num = v;
		return 0;
	}
	case K_CHOICE: {
		size_t n = strlen(value);

		for (const char *c = d->choices; *c;) {
			size_t len = strcspn(c, "|");

			if (len == n && !strncmp(c, value, n))
				return 0;
			c += len + (c[len] == '|');
		}
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be one of %s, not \"%s\"", d->name,
			    d->choices, value);
	}
	case K_URL:
		if (!valid_url(value))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be an http:// or https:// URL, not \"%s\"",
				    d->name, value);
		return 0;
	case K_HOST:
		if (!valid_host(value))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be a domain name, not \"%s\"",
				    d->name, value);
		return 0;
	case K_JSON: {
		cJSON *json = cJSON_Parse(value);
		int r;

		if (!cJSON_IsObject(json)) {
			cJSON_Delete(json);
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be a JSON object", d->name);
		}
		r = d->check ? d->check(d->name, json) : 0;
		cJSON_Delete(json);
		return r;
	}
	case K_ONOFF:
		if (!strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "1"))
			*num = 1;
		else if (!strcmp(value, "off") || !strcmp(value, "false") || !strcmp(value, "0"))
			*num = 0;
		else
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be \"on\" or \"off\", not \"%s\"",
				    d->name, value);
		return 0;
	}
	return 0;
}

static const char *default_of(hangar_ctx *ctx, enum hsetting s)
{
	return defs[s].fallback ? defs[s].fallback : (ctx->defaults[s] ? ctx->defaults[s] : "");
}

static int assign(hangar_ctx *ctx, enum hsetting s, const char *value, int source)
{
	int64_t num;
	char *copy = NULL;
	int r;

	if (!value) {
		r = validate(s, default_of(ctx, s), &num);
		if (r && *default_of(ctx, s))
			return r;
		source = HANGAR_SETTING_DEFAULT;
	} else {
		r = validate(s, value, &num);
		if (r)
			return r;
		copy = strdup(value);
		if (!copy)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	free(ctx->settings[s].value);
	ctx->settings[s].value = copy;
	ctx->settings[s].source = source;
	ctx->settings[s].num = num;
	return 0;
}

int settings_load(hangar_ctx *ctx, int from_env)
{
	for (int s = 0; s < HS_COUNT; s++)
		ctx->defaults[s] = computed_default((enum hsetting)s);
	for (int s = 0; s < HS_COUNT; s++) {
		const char *v = from_env ? getenv(defs[s].name) : NULL;
		int r;

		/* An empty variable counts as unset, as shells make that easy to do by accident. */
		if (v && !*v)
			v = NULL;
		r = assign(ctx, (enum hsetting)s, v, v ? HANGAR_SETTING_ENVIRONMENT : HANGAR_SETTING_DEFAULT);
		if (r)
			return r;
	}
	return 0;
}

void settings_free(hangar_ctx *ctx)
{
	for (int s = 0; s < HS_COUNT; s++) {
		free(ctx->settings[s].value);
		free(ctx->defaults[s]);
	}
}

static int find(const char *name)
{
	for (int s = 0; s < HS_COUNT; s++)
		if (!strcmp(defs[s].name, name))
			return s;
	return -1;
}

const char *hctx_str(hangar_ctx *ctx, enum hsetting s)
{
	return ctx->settings[s].value ? ctx->settings[s].value : default_of(ctx, s);
}

int64_t hctx_int(hangar_ctx *ctx, enum hsetting s)
{
	return ctx->settings[s].num;
}

int hctx_bool(hangar_ctx *ctx, enum hsetting s)
{
	return ctx->settings[s].num != 0;
}

int hangar_ctx_set(hangar_ctx *ctx, const char *name, const char *value)
{
	int s;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name, "name is NULL");
	s = find(name);
	if (s < 0)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "unknown setting %s", name);
	if (s == HS_E2B_FLAVOR) {
		/* The e2b provider's table depends on it: swap it, unless it is in use. */
		int r = provider_e2b_flavour_check(ctx, value ? value : defs[s].fallback);

		if (r == 0)
			r = assign(ctx, (enum hsetting)s, value, HANGAR_SETTING_EXPLICIT);
		if (r == 0)
			provider_e2b_flavour_changed(ctx, hctx_str(ctx, HS_E2B_FLAVOR));
		return r;
	}
	return assign(ctx, (enum hsetting)s, value, HANGAR_SETTING_EXPLICIT);
}

int hangar_ctx_get(hangar_buf *out, hangar_ctx *ctx, const char *name)
{
	int s;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name, "name is NULL");
	s = find(name);
	if (s < 0)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "unknown setting %s", name);
	free(out->ptr);
	out->ptr = strdup(hctx_str(ctx, (enum hsetting)s));
	if (!out->ptr) {
		out->size = 0;
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	out->size = strlen(out->ptr);
	out->reserved = out->size + 1;
	return 0;
}

const char *hangar_sys_ctx_setting(hangar_ctx *ctx, const char *name)
{
	int s;

	if (!ctx || !name || (s = find(name)) < 0)
		return NULL;
	return hctx_str(ctx, (enum hsetting)s);
}

int hangar_ctx_foreach_setting(hangar_ctx *ctx, hangar_setting_fn fn, void *payload)
{
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	for (int s = 0; s < HS_COUNT; s++) {
		const char *v = hctx_str(ctx, (enum hsetting)s);
		int r = fn(defs[s].name, defs[s].secret && *v ? "********" : v, ctx->settings[s].source, payload);

		if (r)
			return r;
	}
	return 0;
}
