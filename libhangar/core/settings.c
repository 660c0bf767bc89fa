/*
 * The HANGAR_* settings: one registry for the library's own settings and
 * those each provider declares (struct hangar_setting_def, table version 3).
 * A wrong value fails hangar_ctx_new(), hangar_provider_register() or
 * hangar_ctx_set() with a message naming the variable, so a
 * misconfiguration surfaces when the context opens, not on first use.
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

#include "module.h"
#include "util/sjson.h"
#include "context.h"
#include "environment.h"

#define MASK "********"

static int check_provider_name(const char *name, const char *value);
static int check_tiers(const char *name, const char *value);
static int check_hedge(const char *name, const char *value);
static int check_environments(const char *name, const char *value);
static int check_insecure_registries(const char *name, const char *value);

/* The library's own settings, indexed by enum hsetting. */
static const struct hangar_setting_def core_defs[HS_COUNT + 1] = {
	[HS_DEFAULT_PROVIDER] = { "HANGAR_DEFAULT_PROVIDER", HANGAR_SETTING_TYPE_STRING, 0, "local", 0, 0, NULL,
				  "provider for creates that name none", check_provider_name },
	[HS_STATE_DIR] = { "HANGAR_STATE_DIR", HANGAR_SETTING_TYPE_PATH, 0, NULL, 0, 0, NULL,
			   "where sandbox records live", NULL },
	[HS_SANDBOX_TIMEOUT] = { "HANGAR_SANDBOX_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "300", 0,
				 366LL * 86400, NULL, "a new sandbox's lifetime (0: no limit)", NULL },
	[HS_EXEC_TIMEOUT] = { "HANGAR_EXEC_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "120", 1, 7LL * 86400, NULL,
			      "a command's in-sandbox timeout", NULL },
	[HS_REQUEST_TIMEOUT] = { "HANGAR_REQUEST_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 1, 86400, NULL,
				 "one request to a sandbox or provider", NULL },
	[HS_OUTPUT_LIMIT] = { "HANGAR_OUTPUT_LIMIT_BYTES", HANGAR_SETTING_TYPE_INT, 0, "1048576", 2, 1LL << 32, NULL,
			      "output kept per stream of a command", NULL },
	[HS_READ_LIMIT] = { "HANGAR_READ_LIMIT_BYTES", HANGAR_SETTING_TYPE_INT, 0, "10485760", 1, 1LL << 32, NULL,
			    "the largest file read into memory", NULL },
	[HS_COPY_LIMIT] = { "HANGAR_COPY_LIMIT_BYTES", HANGAR_SETTING_TYPE_INT, 0, "4294967296", 1, 1LL << 40, NULL,
			    "the largest file copied out of a sandbox", NULL },
	[HS_COPY_TIMEOUT] = { "HANGAR_COPY_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "3600", 1, 86400, NULL,
			      "a whole copy out of a sandbox", NULL },
	[HS_SECRET_KEY] = { "HANGAR_SECRET_KEY", HANGAR_SETTING_TYPE_STRING,
			    HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
			    "seals secrets kept in the state store", NULL },
	[HS_TIERS] = { "HANGAR_TIERS", HANGAR_SETTING_TYPE_JSON, 0, "{\"fast\":[\"e2b\"]}", 0, 0, NULL,
		       "tier -> provider names in order", check_tiers },
	[HS_TIER_COOLDOWN] = { "HANGAR_TIER_COOLDOWN_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 0, 86400, NULL,
			       "how long a full or unreachable provider is skipped", NULL },
	[HS_TIER_HEDGE] = { "HANGAR_TIER_HEDGE", HANGAR_SETTING_TYPE_JSON, 0, "{}", 0, 0, NULL,
			    "tier -> hedge delay in milliseconds", check_hedge },
	[HS_SECRET_KEY_PREVIOUS] = { "HANGAR_SECRET_KEY_PREVIOUS", HANGAR_SETTING_TYPE_STRING,
				     HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
				     "earlier secret keys, comma-separated, still tried when opening checkpoints", NULL },
	[HS_CHECKPOINT_STORE] = { "HANGAR_CHECKPOINT_STORE", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0,
				  0, NULL, "where checkpoints are kept: file://DIR or s3://BUCKET/PREFIX", NULL },
	[HS_S3_ENDPOINT] = { "HANGAR_S3_ENDPOINT", HANGAR_SETTING_TYPE_URL, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
			     "the S3-compatible service of an s3:// checkpoint store", NULL },
	[HS_S3_REGION] = { "HANGAR_S3_REGION", HANGAR_SETTING_TYPE_STRING, 0, "us-east-1", 0, 0, NULL,
			   "the region S3 requests are signed for", NULL },
	[HS_S3_ACCESS_KEY_ID] = { "HANGAR_S3_ACCESS_KEY_ID", HANGAR_SETTING_TYPE_STRING,
				  HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
				  "the access key id of the S3 service", NULL },
	[HS_S3_SECRET_ACCESS_KEY] = { "HANGAR_S3_SECRET_ACCESS_KEY", HANGAR_SETTING_TYPE_STRING,
				      HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
				      "the secret access key of the S3 service", NULL },
	[HS_ENVIRONMENTS_FILE] = { "HANGAR_ENVIRONMENTS_FILE", HANGAR_SETTING_TYPE_PATH, HANGAR_SETTING_OPTIONAL, "",
				   0, 0, NULL,
				   "named sandbox descriptions, JSON ($XDG_CONFIG_HOME/hangar/environments.json)",
				   check_environments },
	[HS_WORKSPACE] = { "HANGAR_WORKSPACE", HANGAR_SETTING_TYPE_PATH, 0, "/workspace", 0, 0, NULL,
			   "the directory in a sandbox that checkpoints keep", NULL },
	[HS_CHECKPOINT_MAX_BYTES] = { "HANGAR_CHECKPOINT_MAX_BYTES", HANGAR_SETTING_TYPE_INT, 0, "8589934592", 1024,
				      1LL << 44, NULL, "the largest checkpoint stored (sealed bytes)", NULL },
	[HS_CHECKPOINT_TIMEOUT] = { "HANGAR_CHECKPOINT_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "3600", 1, 86400,
				    NULL, "a whole checkpoint capture, restore or export", NULL },
	[HS_STORE] = { "HANGAR_STORE", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "",
		       0, 0, NULL, "the state store: a postgresql:// URL, or unset for hangar.db in the state directory",
		       hmodules_check_setting },
	[HS_SESSION_HOT_RESUME_MINUTES] = { "HANGAR_SESSION_HOT_RESUME_MINUTES", HANGAR_SETTING_TYPE_INT, 0, "1440", 0,
					    525600, NULL, "how long a suspended session's sandbox stays parked (0: never parked)",
					    NULL },
	[HS_SESSION_HOT_RESUME_MAX] = { "HANGAR_SESSION_HOT_RESUME_MAX", HANGAR_SETTING_TYPE_INT, 0, "20", 0, 100000, NULL,
					"most sandboxes parked for hot resume at once", NULL },
	[HS_SESSION_CHECK_SECONDS] = { "HANGAR_SESSION_CHECK_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "10", 1, 600, NULL,
				       "how long a resumed parked sandbox has to answer a command", NULL },
	[HS_MAX_SANDBOXES] = { "HANGAR_MAX_SANDBOXES", HANGAR_SETTING_TYPE_INT, 0, "0", 0, 1000000, NULL,
			       "most sandboxes the state store records at once, paused ones included (0: no limit)",
			       NULL },
	[HS_SESSION_BUSY_WAIT] = { "HANGAR_SESSION_BUSY_WAIT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 0, 3600, NULL,
				   "how long a session call waits while another caller changes the session", NULL },
	[HS_IMAGE_DIR] = { "HANGAR_IMAGE_DIR", HANGAR_SETTING_TYPE_PATH, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
			   "the image store (unset: images in the state directory)", NULL },
	[HS_REGISTRY_AUTH_FILE] = { "HANGAR_REGISTRY_AUTH_FILE", HANGAR_SETTING_TYPE_PATH, HANGAR_SETTING_OPTIONAL, "",
				    0, 0, NULL,
				    "a docker config.json whose auths log in to image registries "
				    "($DOCKER_CONFIG/config.json, ~/.docker/config.json)", NULL },
	[HS_REGISTRY_INSECURE] = { "HANGAR_REGISTRY_INSECURE", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "",
				   0, 0, NULL, "image registries (host[:port], comma-separated) reached over plain http",
				   check_insecure_registries },
	[HS_REGISTRY_CA_FILE] = { "HANGAR_REGISTRY_CA_FILE", HANGAR_SETTING_TYPE_PATH, HANGAR_SETTING_OPTIONAL, "", 0,
				  0, NULL, "PEM certificates trusted for image registries besides the system's", NULL },
	[HS_REGISTRY_STALL] = { "HANGAR_REGISTRY_STALL_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 1, 3600, NULL,
				"how long an image registry may send nothing before a pull fails", NULL },
	[HS_IMAGE_CACHE_MB] = { "HANGAR_IMAGE_CACHE_MB", HANGAR_SETTING_TYPE_INT, 0, "20480", 1, 1LL << 30, NULL,
				"the image store's size cap in MiB: unpacked layers past it are refused, gc keeps under it",
				NULL },
	[HS_COUNT] = { NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

/* A file named explicitly must exist and be well formed (the default place may be empty). */
static int check_environments(const char *name, const char *value)
{
	struct cJSON *root;
	int rc;

	(void)name;
	rc = env_file_load(value, 0, &root);
	cJSON_Delete(root);
	return rc;
}

/* host[:port] entries, comma-separated, spaces around them allowed: what a registry reference starts with. */
static int check_insecure_registries(const char *name, const char *value)
{
	const char *p = value;

	while (*p) {
		size_t n = strcspn(p, ","), b = 0, e = n;

		while (b < e && p[b] == ' ')
			b++;
		while (e > b && p[e - 1] == ' ')
			e--;
		if (e == b || strspn(p + b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") < e - b)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must be registry hosts (host[:port]) separated by commas, not \"%s\"", name, value);
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The tiers a create may ask for. */
static const char *const tier_names[] = { "fast", "isolated", "default", "heavy" };

static int valid_provider_name(const char *v)
{
	size_t n = strlen(v);

	return n > 0 && n <= 32 && strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int check_provider_name(const char *name, const char *value)
{
	if (!valid_provider_name(value))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "%s must be a provider name ([a-z0-9_-], at most 32), not \"%s\"", name, value);
	return 0;
}

static int valid_tier(const char *t)
{
	for (size_t i = 0; i < sizeof(tier_names) / sizeof(tier_names[0]); i++)
		if (!strcmp(t, tier_names[i]))
			return 1;
	return 0;
}

/*
 * A JSON setting's value, strictly: one value, no duplicate members, valid
 * UTF-8. NULL with HANGAR_ECONFIG naming the setting and where it breaks.
 */
static cJSON *setting_json(const char *name, const char *value)
{
	char err[256];
	cJSON *json = sjson_parse(value, strlen(value), 0, err, sizeof(err));

	if (!json)
		herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s is not strict JSON: %s", name, err);
	return json;
}

static int check_tiers(const char *name, const char *value)
{
	cJSON *json = setting_json(name, value);
	int rc = json ? 0 : HANGAR_ECONFIG;

	for (const cJSON *t = json ? json->child : NULL; t && !rc; t = t->next) {
		if (!valid_tier(t->string)) {
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				  "%s: unknown tier \"%s\" (tiers: fast, isolated, default, heavy)", name, t->string);
		} else if (!cJSON_IsArray(t)) {
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: tier \"%s\" must list provider names",
				  name, t->string);
		} else {
			for (const cJSON *p = t->child; p && !rc; p = p->next)
				if (!cJSON_IsString(p) || !valid_provider_name(p->valuestring))
					rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
						  "%s: tier \"%s\" lists something that is not a provider name",
						  name, t->string);
		}
	}
	cJSON_Delete(json);
	return rc;
}

static int check_hedge(const char *name, const char *value)
{
	cJSON *json = setting_json(name, value);
	int rc = json ? 0 : HANGAR_ECONFIG;

	for (const cJSON *t = json ? json->child : NULL; t && !rc; t = t->next) {
		if (!valid_tier(t->string))
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: unknown tier \"%s\"", name, t->string);
		else if (!cJSON_IsNumber(t) || t->valuedouble < 1 || t->valuedouble > 600000 ||
			 t->valuedouble != (double)(int64_t)t->valuedouble)
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				  "%s: the delay for tier \"%s\" must be milliseconds from 1 to 600000", name,
				  t->string);
	}
	cJSON_Delete(json);
	return rc;
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

/* HANGAR_[A-Z0-9_]+, short enough for messages and environments. */
static int valid_setting_name(const char *v)
{
	size_t n = v ? strlen(v) : 0;

	return n > 7 && n <= 64 && !strncmp(v, "HANGAR_", 7) &&
	       strspn(v + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n - 7;
}

static char *computed_default(enum hsetting s)
{
	char buf[PATH_MAX];
	const char *v;

	if (s != HS_STATE_DIR)
		return NULL;
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
}

/* Whether value is a whole number, with nothing around it ("12", "-3"). */
static int parse_int(const char *value, long long *out)
{
	const char *digits = value[0] == '-' ? value + 1 : value;
	char *end;

	if (*digits < '0' || *digits > '9')
		return 0;
	errno = 0;
	*out = strtoll(value, &end, 10);
	return !errno && !*end;
}

/* Validates value for d; on success stores its parsed number in *num. */
static int validate(const struct hangar_setting_def *d, const char *value, int64_t *num)
{
	const char *name = d->name;
	int rc = 0;

	*num = 0;
	if (!sjson_text_ok(value, strlen(value)))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s is not valid UTF-8", name);
	if ((d->flags & HANGAR_SETTING_OPTIONAL) && !*value)
		return 0;
	switch (d->type) {
	case HANGAR_SETTING_TYPE_STRING:
		if (!*value)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must not be empty", name);
		break;
	case HANGAR_SETTING_TYPE_PATH:
		if (value[0] != '/' || strlen(value) >= PATH_MAX - 64)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be an absolute path, not \"%s\"",
				    name, value);
		break;
	case HANGAR_SETTING_TYPE_INT: {
		long long v;

		if (!parse_int(value, &v) || v < d->min || v > d->max)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must be a whole number from %" PRId64 " to %" PRId64 ", not \"%s\"", name,
				    d->min, d->max, value);
		*num = v;
		break;
	}
	case HANGAR_SETTING_TYPE_CHOICE: {
		size_t n = strlen(value);
		int found = 0;

		for (const char *c = d->choices; c && *c && !found;) {
			size_t len = strcspn(c, "|");

			found = len == n && !strncmp(c, value, n);
			c += len + (c[len] == '|');
		}
		if (!found)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be one of %s, not \"%s\"", name,
				    d->choices ? d->choices : "", value);
		break;
	}
	case HANGAR_SETTING_TYPE_URL:
		if (!valid_url(value))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "%s must be an http:// or https:// URL, not \"%s\"", name, value);
		break;
	case HANGAR_SETTING_TYPE_HOST:
		if (!valid_host(value))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be a domain name, not \"%s\"",
				    name, value);
		break;
	case HANGAR_SETTING_TYPE_JSON: {
		cJSON *json = setting_json(name, value);
		int is_object = cJSON_IsObject(json);

		cJSON_Delete(json);
		if (!json)
			return HANGAR_ECONFIG;
		if (!is_object)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be a JSON object", name);
		break;
	}
	case HANGAR_SETTING_TYPE_BOOL:
		if (!strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "1"))
			*num = 1;
		else if (!strcmp(value, "off") || !strcmp(value, "false") || !strcmp(value, "0"))
			*num = 0;
		else
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s must be \"on\" or \"off\", not \"%s\"",
				    name, value);
		break;
	default:
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "setting %s has an unknown type %u", name,
			    (unsigned)d->type);
	}
	if (d->validate) {
		herr_clear();
		rc = d->validate(name, value);
		if (rc) {
			/* A validator that forgot to say why still names the setting. */
			if (hangar_error_last()->code == HANGAR_OK || !strstr(hangar_error_last()->message, name))
				herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s: \"%s\" is not accepted%s%s", name, value,
				     *hangar_error_last()->message ? ": " : "", hangar_error_last()->message);
			return herr_recode(HANGAR_ECONFIG);
		}
	}
	return 0;
}

static const char *default_of(const struct setting *s)
{
	if (s->computed)
		return s->computed;
	return s->def->default_value ? s->def->default_value : "";
}

static int assign(struct setting *s, const char *value, int source)
{
	int64_t num;
	char *copy = NULL;
	int r;

	if (!value) {
		r = validate(s->def, default_of(s), &num);
		if (r && *default_of(s))
			return r;
		source = HANGAR_SETTING_DEFAULT;
	} else {
		r = validate(s->def, value, &num);
		if (r)
			return r;
		copy = strdup(value);
		if (!copy)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	free(s->value);
	s->value = copy;
	s->source = source;
	s->num = num;
	return 0;
}

static struct setting *find(hangar_ctx *ctx, const char *name)
{
	for (size_t i = 0; i < ctx->nsettings; i++)
		if (!strcmp(ctx->settings[i].def->name, name))
			return &ctx->settings[i];
	return NULL;
}

/* Reads one new setting from the environment (if the context does) and validates it. */
static int load_one(hangar_ctx *ctx, struct setting *s)
{
	const char *v = ctx->from_env ? getenv(s->def->name) : NULL;

	/* An empty variable counts as unset, as shells make that easy to do by accident. */
	if (v && !*v)
		v = NULL;
	return assign(s, v, v ? HANGAR_SETTING_ENVIRONMENT : HANGAR_SETTING_DEFAULT);
}

static void drop_from(hangar_ctx *ctx, size_t keep)
{
	while (ctx->nsettings > keep) {
		struct setting *s = &ctx->settings[--ctx->nsettings];

		free(s->value);
		free(s->computed);
		memset(s, 0, sizeof(*s));
	}
}

int settings_load(hangar_ctx *ctx, int from_env)
{
	ctx->from_env = from_env;
	ctx->settings = calloc(HS_COUNT + 16, sizeof(*ctx->settings));
	if (!ctx->settings)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	ctx->settings_cap = HS_COUNT + 16;
	for (int i = 0; i < HS_COUNT; i++) {
		struct setting *s = &ctx->settings[ctx->nsettings++];
		int r;

		s->def = &core_defs[i];
		s->computed = computed_default((enum hsetting)i);
		if ((r = load_one(ctx, s)) != 0)
			return r;
	}
	return 0;
}

/* Whether a provider's declaration of a setting is well formed, its default valid. */
static int check_def(const char *provider, const struct hangar_setting_def *d)
{
	int64_t num;

	if (!valid_setting_name(d->name))
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "provider %s: setting names must match HANGAR_[A-Z0-9_]{1,57}", provider);
	if (d->type < HANGAR_SETTING_TYPE_STRING || d->type > HANGAR_SETTING_TYPE_CHOICE ||
	    (d->type == HANGAR_SETTING_TYPE_INT && d->min > d->max) ||
	    (d->type == HANGAR_SETTING_TYPE_CHOICE && (!d->choices || !*d->choices)) ||
	    (d->flags & ~(HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL | HANGAR_SETTING_FIXED)))
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "provider %s: the declaration of %s is malformed (type, bounds, choices or flags)", provider,
			    d->name);
	/* The one default must itself be valid: a provider bug, not a configuration. */
	if (((d->default_value && *d->default_value) || !(d->flags & HANGAR_SETTING_OPTIONAL)) &&
	    validate(d, d->default_value ? d->default_value : "", &num)) {
		herr_prefix("provider %s: the default of %s is invalid", provider, d->name);
		return herr_recode(HANGAR_EINVAL);
	}
	return 0;
}

int settings_check_defs(const char *provider, const struct hangar_setting_def *defs)
{
	size_t n = 0;
	int r;

	for (; defs && defs[n].name; n++) {
		if (n >= 256)
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "provider %s declares more than 256 settings",
				    provider);
		if ((r = check_def(provider, &defs[n])) != 0)
			return r;
		for (size_t k = 0; k < n; k++)
			if (!strcmp(defs[k].name, defs[n].name))
				return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT, "provider %s declares %s twice",
					    provider, defs[n].name);
	}
	return 0;
}

int settings_add(hangar_ctx *ctx, struct hangar_provider *owner, const struct hangar_setting_def *defs)
{
	size_t keep = ctx->nsettings, n = 0;

	if (!defs)
		return 0;
	while (defs[n].name)
		n++;
	if (n > 256)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "provider %s declares more than 256 settings",
			    owner->ops.name);
	if (ctx->nsettings + n > ctx->settings_cap) {
		size_t cap = ctx->nsettings + n + 16;
		struct setting *grown = realloc(ctx->settings, cap * sizeof(*grown));

		if (!grown)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		memset(grown + ctx->settings_cap, 0, (cap - ctx->settings_cap) * sizeof(*grown));
		ctx->settings = grown;
		ctx->settings_cap = cap;
	}
	for (size_t i = 0; i < n; i++) {
		const struct hangar_setting_def *d = &defs[i];
		struct setting *s;
		int r;

		if (find(ctx, d->name)) {
			drop_from(ctx, keep);
			return herr(HANGAR_EEXISTS, HANGAR_ERRCAT_ARGUMENT,
				    "provider %s: the setting %s is already declared on this context", owner->ops.name,
				    d->name);
		}
		if ((r = check_def(owner->ops.name, d)) != 0) {
			drop_from(ctx, keep);
			return r;
		}
		s = &ctx->settings[ctx->nsettings++];
		s->def = d;
		s->owner = owner;
		if ((r = load_one(ctx, s)) != 0) {
			drop_from(ctx, keep);
			return r;
		}
	}
	return 0;
}

void settings_free(hangar_ctx *ctx)
{
	drop_from(ctx, 0);
	free(ctx->settings);
	ctx->settings = NULL;
	ctx->settings_cap = 0;
}

const char *hctx_str(hangar_ctx *ctx, enum hsetting s)
{
	return ctx->settings[s].value ? ctx->settings[s].value : default_of(&ctx->settings[s]);
}

int64_t hctx_int(hangar_ctx *ctx, enum hsetting s)
{
	return ctx->settings[s].num;
}

static const char *value_of(const struct setting *s)
{
	return s->value ? s->value : default_of(s);
}

int hangar_ctx_set(hangar_ctx *ctx, const char *name, const char *value)
{
	struct setting *s;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name, "name is NULL");
	HCHECK_TEXT(name, "name");
	s = find(ctx, name);
	if (!s)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "unknown setting %s", name);
	{
		char what[96];

		/* Named, as every refusal of a setting's value is. */
		snprintf(what, sizeof(what), "the value of %s", s->def->name);
		HCHECK_TEXT(value, what);
	}
	if (s->owner && (s->def->flags & HANGAR_SETTING_FIXED) && provider_in_use(s->owner)) {
		int64_t num;
		int r = value ? validate(s->def, value, &num) : 0;

		if (r)
			return r;
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_CONFIG,
			    "%s cannot change: the %s provider of this context is already in use", name,
			    s->owner->ops.name);
	}
	return assign(s, value, HANGAR_SETTING_EXPLICIT);
}

int hangar_ctx_get(hangar_buf *out, hangar_ctx *ctx, const char *name)
{
	struct setting *s;

	HCHECK_ARG(out, "out is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name, "name is NULL");
	HCHECK_TEXT(name, "name");
	s = find(ctx, name);
	if (!s)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "unknown setting %s", name);
	free(out->ptr);
	out->ptr = strdup(value_of(s));
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
	struct setting *s;

	if (!ctx || !name || !(s = find(ctx, name)))
		return NULL;
	return value_of(s);
}

/* The setting a typed getter reads: found and of type (0: any). */
static struct setting *typed(hangar_ctx *ctx, const char *name, uint32_t type, const void *out)
{
	struct setting *s;

	if (!out || !ctx || !name) {
		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: out, ctx and name are required");
		return NULL;
	}
	if (!(s = find(ctx, name))) {
		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "unknown setting %s", name);
		return NULL;
	}
	if (type && s->def->type != type) {
		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "setting %s is not of the type asked for", name);
		return NULL;
	}
	return s;
}

int hangar_sys_ctx_setting_string(const char **out, hangar_ctx *ctx, const char *name)
{
	struct setting *s = typed(ctx, name, 0, out);

	if (!s)
		return HANGAR_EINVAL;
	*out = value_of(s);
	return 0;
}

int hangar_sys_ctx_setting_int(int64_t *out, hangar_ctx *ctx, const char *name)
{
	struct setting *s = typed(ctx, name, HANGAR_SETTING_TYPE_INT, out);

	if (!s)
		return HANGAR_EINVAL;
	*out = s->num;
	return 0;
}

int hangar_sys_ctx_setting_bool(int32_t *out, hangar_ctx *ctx, const char *name)
{
	struct setting *s = typed(ctx, name, HANGAR_SETTING_TYPE_BOOL, out);

	if (!s)
		return HANGAR_EINVAL;
	*out = s->num != 0;
	return 0;
}

int hangar_sys_ctx_setting_json(const char **out, hangar_ctx *ctx, const char *name)
{
	struct setting *s = typed(ctx, name, HANGAR_SETTING_TYPE_JSON, out);

	if (!s)
		return HANGAR_EINVAL;
	/* An optional JSON setting left unset reads as the empty object. */
	*out = *value_of(s) ? value_of(s) : "{}";
	return 0;
}

static int walk(hangar_ctx *ctx, int all, const struct hangar_provider *owner, hangar_setting_fn fn,
		void *payload)
{
	for (size_t i = 0; i < ctx->nsettings; i++) {
		const struct setting *s = &ctx->settings[i];
		const char *v = value_of(s);
		int r;

		if (!all && s->owner != owner)
			continue;
		r = fn(s->def->name, (s->def->flags & HANGAR_SETTING_SECRET) && *v ? MASK : v, s->source, payload);
		if (r)
			return r;
	}
	return 0;
}

int hangar_ctx_foreach_setting(hangar_ctx *ctx, hangar_setting_fn fn, void *payload)
{
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	return walk(ctx, 1, NULL, fn, payload);
}

int hangar_ctx_foreach_setting_of(hangar_ctx *ctx, const char *provider, hangar_setting_fn fn, void *payload)
{
	struct hangar_provider *p = NULL;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	HCHECK_TEXT(provider, "provider");
	if (provider) {
		for (p = ctx->providers; p; p = p->next)
			if (!strcmp(p->ops.name, provider))
				break;
		if (!p)
			return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no provider named %s", provider);
	}
	return walk(ctx, 0, p, fn, payload);
}
