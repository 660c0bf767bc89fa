/*
 * The e2b provider's instance, settings and table, shared by its flavours
 * (e2b.h), and the rules every one of its files keeps.
 *
 * Security rules:
 *   - every sandbox is created with network.allowPublicTraffic=false, so the
 *     platform's edge wants the traffic token, which only we hold;
 *   - envd's access token lives in memory only (the sandbox description);
 *     after a restart connect fetches it again;
 *   - the traffic token is sealed into the state store at create
 *     (hangar_sys_secret_put) because CubeAPI hands it out only then, and is
 *     used whenever connect hands none out;
 *   - a sandbox whose envd takes no token is refused and killed unless
 *     HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD is on, and refused and killed
 *     regardless when it has no traffic token either (it is public);
 *   - ids from the API are checked before they enter a URL path;
 *   - a kill that protects security (a refused sandbox, or one an unanswered
 *     create may have made) is retried until its deadline, and its failure is
 *     reported with the sandbox's id: it may still be running;
 *   - every create carries a client-made id in its metadata (E2B_CREATE_ID_KEY):
 *     when its answer never comes, the sandbox it may have made is looked for
 *     by that id and killed before the caller (or a tier) goes elsewhere.
 * A paused sandbox is never connected implicitly: connecting resumes it, so
 * connect() reads its state first and only calls the connect route (which on
 * a running sandbox merely extends its lifetime) to learn its tokens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/sjson.h"
#include "api.h"
#include "decode.h"
#include "e2b.h"

struct e2b_known {                  /* what we remember of a sandbox between calls */
	char id[E2B_ID_MAX + 1];
	int64_t timeout_sec;        /* its lifetime, restarted on resume */
	struct e2b_known *next;
};

/* A declared setting's value: validated when the context opened, never NULL. */
static const char *setting(hangar_ctx *ctx, const char *name)
{
	const char *v = "";

	hangar_sys_ctx_setting_string(&v, ctx, name);
	return v;
}

static int64_t setting_int(hangar_ctx *ctx, const char *name)
{
	int64_t v = 0;

	hangar_sys_ctx_setting_int(&v, ctx, name);
	return v;
}

int e2b_oom(void)
{
	return hangar_sys_error(HANGAR_ENOMEM, 0, 0, "out of memory");
}

int e2b_bad_id(const char *id)
{
	return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: invalid sandbox id (it must match [A-Za-z0-9_-]{1,64})");
}

void e2b_remember(struct e2b *e, const char *id, int64_t timeout_sec)
{
	struct e2b_known *k;

	pthread_mutex_lock(&e->mu);
	for (k = e->known; k; k = k->next)
		if (!strcmp(k->id, id))
			break;
	if (!k && (k = calloc(1, sizeof(*k)))) {
		snprintf(k->id, sizeof(k->id), "%s", id);
		k->next = e->known;
		e->known = k;
	}
	if (k)
		k->timeout_sec = timeout_sec;
	pthread_mutex_unlock(&e->mu);
}

int64_t e2b_remembered_timeout(struct e2b *e, const char *id)
{
	int64_t t = e->default_timeout;

	pthread_mutex_lock(&e->mu);
	for (struct e2b_known *k = e->known; k; k = k->next)
		if (!strcmp(k->id, id)) {
			t = k->timeout_sec;
			break;
		}
	pthread_mutex_unlock(&e->mu);
	return t;
}

void e2b_forget(struct e2b *e, const char *id)
{
	pthread_mutex_lock(&e->mu);
	for (struct e2b_known **kp = &e->known; *kp; kp = &(*kp)->next)
		if (!strcmp((*kp)->id, id)) {
			struct e2b_known *k = *kp;

			*kp = k->next;
			free(k);
			break;
		}
	pthread_mutex_unlock(&e->mu);
}

static void e2b_fini(void *state)
{
	struct e2b *e = state;

	if (!e)
		return;
	e2b_api_fini(&e->api);
	while (e->known) {
		struct e2b_known *k = e->known;

		e->known = k->next;
		free(k);
	}
	pthread_mutex_destroy(&e->mu);
	cJSON_Delete(e->templates);
	free(e->domain);
	free(e->sandbox_url);
	free(e->ca_file);
	free(e);
}

const struct e2b_flavour *e2b_flavour_named(const char *name)
{
	static const struct e2b_flavour *const all[] = { &e2b_flavour_cloud, &e2b_flavour_selfhosted,
							 &e2b_flavour_cube };

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* A CA file larger than the HTTP layer reads is not one. */
#define CA_FILE_MAX (32u << 20)

static int ca_file_error(const char *path, int err, const char *why)
{
	hangar_sys_error(HANGAR_ECONFIG, 0, err, "e2b: the CA file %s (HANGAR_E2B_CA_FILE) %s", path, why);
	hangar_sys_error_category(HANGAR_ERRCAT_CONFIG);
	return HANGAR_ECONFIG;
}

/*
 * HANGAR_E2B_CA_FILE must be a readable file holding a PEM certificate,
 * checked when the provider is set up: a wrong file would otherwise surface
 * as a certificate error on the first request, blaming the platform.
 */
static int check_ca_file(const char *path)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----";
	FILE *f = fopen(path, "re");
	struct stat st;
	char *data = NULL;
	size_t got = 0;
	int rc;

	if (!f)
		return ca_file_error(path, errno, "cannot be read");
	if (fstat(fileno(f), &st) != 0)
		rc = ca_file_error(path, errno, "cannot be read");
	else if (!S_ISREG(st.st_mode))
		rc = ca_file_error(path, 0, "is not a regular file");
	else if (st.st_size > (off_t)CA_FILE_MAX)
		rc = ca_file_error(path, 0, "is larger than 32 MiB");
	else if (!(data = malloc((size_t)st.st_size + 1)))
		rc = e2b_oom();
	else if ((got = fread(data, 1, (size_t)st.st_size, f)) < (size_t)st.st_size && ferror(f))
		rc = ca_file_error(path, errno ? errno : EIO, "cannot be read");
	else if (!memmem(data, got, begin, sizeof(begin) - 1))
		rc = ca_file_error(path, 0, "holds no PEM certificate");
	else
		rc = 0;
	free(data);
	fclose(f);
	return rc;
}

static int e2b_init(void **state, hangar_ctx *ctx, void *data)
{
	const struct e2b_flavour *fl = e2b_flavour_named(setting(ctx, "HANGAR_E2B_FLAVOR"));
	const char *api_url = setting(ctx, "HANGAR_E2B_API_URL");
	const char *key = setting(ctx, "HANGAR_E2B_API_KEY");
	const char *sandbox_url = setting(ctx, "HANGAR_E2B_SANDBOX_URL");
	const char *ca_file = setting(ctx, "HANGAR_E2B_CA_FILE");
	char *base = NULL;
	struct e2b *e;
	int rc;

	(void)data;
	*state = NULL;
	if (!fl)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_E2B_FLAVOR names no flavour of the e2b provider");
	if (fl->need_key && !*key)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_E2B_API_KEY must be set for the %s flavour of the e2b provider",
					fl->name);
	if (fl->need_api_url && !*api_url)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_E2B_API_URL must be set for the %s flavour of the e2b provider",
					fl->name);
	if (*ca_file && (rc = check_ca_file(ca_file)) != 0)
		return rc;
	e = calloc(1, sizeof(*e));
	if (!e)
		return e2b_oom();
	pthread_mutex_init(&e->mu, NULL);
	e->ctx = ctx;
	e->fl = fl;
	e->domain = strdup(setting(ctx, "HANGAR_E2B_DOMAIN"));
	e->sandbox_url = *sandbox_url ? strdup(sandbox_url) : NULL;
	e->ca_file = *ca_file ? strdup(ca_file) : NULL;
	{
		int32_t allow = 0;
		const char *templates = "{}";

		hangar_sys_ctx_setting_bool(&allow, ctx, "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD");
		e->allow_unauth = allow;
		hangar_sys_ctx_setting_json(&templates, ctx, "HANGAR_E2B_ENVIRONMENT_TEMPLATES");
		/* Checked when it was set (check_templates). */
		e->templates = sjson_parse(templates, strlen(templates), 0, NULL, 0);
	}
	e->default_timeout = setting_int(ctx, "HANGAR_SANDBOX_TIMEOUT_SECONDS");
	e->build_timeout_ms = setting_int(ctx, "HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS") * 1000;
	if (!e->domain || (*sandbox_url && !e->sandbox_url) || (*ca_file && !e->ca_file) || !e->templates) {
		e2b_fini(e);
		return e2b_oom();
	}
	if (*api_url)
		base = strdup(api_url);
	else if (asprintf(&base, "https://api.%s", e->domain) < 0)
		base = NULL;
	if (!base) {
		e2b_fini(e);
		return e2b_oom();
	}
	rc = e2b_api_init(&e->api, ctx, base, *key ? key : NULL,
			  setting_int(ctx, "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS") * 1000);
	free(base);
	if (rc) {
		e2b_fini(e); /* e2b_api_init() leaves nothing to release when it fails */
		return rc;
	}
	e->api.ca_file = e->ca_file;
	*state = e;
	return 0;
}

static uint64_t e2b_capabilities(void *state)
{
	const struct e2b *e = state;

	return e->fl->capabilities;
}

/* HANGAR_E2B_ENVIRONMENT_TEMPLATES maps environment names to template ids. */
static int check_templates(const char *name, const char *value)
{
	char err[160];
	cJSON *json = sjson_parse(value, strlen(value), 0, err, sizeof(err));
	int rc = 0;

	if (!json)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "%s is not strict JSON: %s", name, err);
	for (const cJSON *t = json ? json->child : NULL; t && !rc; t = t->next)
		if (!cJSON_IsString(t) || !*t->valuestring || !*t->string)
			rc = hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					      "%s must map environment names to template ids (strings); \"%s\" does not",
					      name, t->string ? t->string : "");
	cJSON_Delete(json);
	return rc;
}

/* The e2b provider's settings, each with its one default. */
static const struct hangar_setting_def e2b_settings[] = {
	{ "HANGAR_E2B_FLAVOR", HANGAR_SETTING_TYPE_CHOICE, HANGAR_SETTING_FIXED, "cloud", 0, 0, "cloud|selfhosted|cube",
	  "which platform: E2B's cloud, self-hosted E2B, or CubeSandbox", NULL },
	{ "HANGAR_E2B_API_URL", HANGAR_SETTING_TYPE_URL, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "the control API (default https://api.<domain>; required for cube)", NULL },
	{ "HANGAR_E2B_DOMAIN", HANGAR_SETTING_TYPE_HOST, 0, "e2b.app", 0, 0, NULL,
	  "sandbox host names are <port>-<id>.<domain>", NULL },
	{ "HANGAR_E2B_SANDBOX_URL", HANGAR_SETTING_TYPE_URL, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "where envd is reached, if not at the domain", NULL },
	{ "HANGAR_E2B_CA_FILE", HANGAR_SETTING_TYPE_PATH, HANGAR_SETTING_OPTIONAL | HANGAR_SETTING_FIXED, "", 0, 0,
	  NULL, "PEM certificates trusted for the control API and envd besides the system's", NULL },
	{ "HANGAR_E2B_API_KEY", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_SECRET | HANGAR_SETTING_OPTIONAL, "", 0, 0,
	  NULL, "the API key (required for cloud and selfhosted)", NULL },
	{ "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD", HANGAR_SETTING_TYPE_BOOL, 0, "false", 0, 0, NULL,
	  "accept an envd that takes no token (private networks only)", NULL },
	{ "HANGAR_E2B_ENVIRONMENT_TEMPLATES", HANGAR_SETTING_TYPE_JSON, 0, "{}", 0, 0, NULL,
	  "template name -> platform template id", check_templates },
	{ "HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "60", 1, 86400, NULL,
	  "one control-API call", NULL },
	{ "HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS", HANGAR_SETTING_TYPE_INT, 0, "1800", 1, 7LL * 86400, NULL,
	  "a template build", NULL },
	{ NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

/*
 * Not offered, and said why: the platforms route a sandbox's port at
 * <port>-<id>.<domain>, but every sandbox is created with public traffic off
 * (see the top of this file), so that host answers 403 to a request without
 * the traffic token, which is given only to a trusted caller
 * (hangar_sandbox_port_endpoint(), from the description envd.c makes), never
 * in an address anyone may print. A bare host name would reach nothing.
 */
static int e2b_expose_port(void *state, const char *id, uint32_t port, hangar_buf *out_addr)
{
	struct e2b *e = state;

	(void)out_addr;
	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
				"e2b: the %s flavour cannot expose port %u: its host %u-%s.<domain> wants the "
				"sandbox's traffic token (public traffic is off), which stays in the library",
				e->fl->name, (unsigned)port, (unsigned)port, id);
}

/*
 * One table for every flavour: init reads HANGAR_E2B_FLAVOR and reports that
 * flavour's capabilities; the slots a flavour lacks answer
 * HANGAR_EUNSUPPORTED from the flavour's rules. Before init it claims only
 * what every flavour has.
 */
const struct hangar_provider_ops e2b_provider_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "e2b",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_TEMPLATES,
	.init = e2b_init,
	.fini = e2b_fini,
	.create = e2b_create,
	.connect = e2b_connect,
	.kill = e2b_kill,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.set_timeout = e2b_set_timeout,
	.list = e2b_list,
	.pause_filesystem = e2b_pause_filesystem,
	.snapshot = e2b_snapshot,
	.template_build = e2b_template_build,
	.template_list = e2b_template_list,
	.fork = e2b_fork,
	.metrics = e2b_metrics,
	.logs = e2b_logs,
	.settings = e2b_settings,
	.get_capabilities = e2b_capabilities,
	.expose_port = e2b_expose_port,
};
