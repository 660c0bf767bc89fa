/*
 * Logging in to a registry: the credentials of a docker config.json, and
 * the answer to a 401's challenge (a bearer token from the registry's token
 * service, or basic credentials). Credentials go only to the registry and
 * to a token service of its own site, are wiped from memory after use and
 * never enter a message.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "registry-int.h"
#include "util/buf.h"
#include "util/pjson.h"
#include "util/sjson.h"

#define TOKEN_ANSWER_MAX (1u << 20)
#define AUTH_FILE_MAX (1u << 20)

/* The value of param in a challenge's parameter list (k=v or k="v", comma-separated), or 0 when absent. */
static int challenge_param(const char *params, const char *key, char *out, size_t cap)
{
	const char *p = params;
	size_t kl = strlen(key);

	while (*p) {
		const char *k;
		size_t kn, o = 0;
		int match;

		while (*p == ' ' || *p == ',')
			p++;
		k = p;
		while (*p && *p != '=' && *p != ',')
			p++;
		kn = (size_t)(p - k);
		while (kn > 0 && k[kn - 1] == ' ')
			kn--;
		match = kn == kl && strncasecmp(k, key, kl) == 0;
		if (*p != '=')
			continue;
		p++;
		while (*p == ' ')
			p++;
		if (*p == '"') {
			p++;
			while (*p && *p != '"') {
				if (*p == '\\' && p[1])
					p++;
				if (match && o + 1 < cap)
					out[o++] = *p;
				p++;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ',' && *p != ' ') {
				if (match && o + 1 < cap)
					out[o++] = *p;
				p++;
			}
		}
		if (match) {
			out[o] = '\0';
			return 1;
		}
	}
	return 0;
}

static int set_basic(struct fetch *f, char **out)
{
	char *plain = NULL, *b64;
	int n;

	n = asprintf(&plain, "%s:%s", f->user, f->pass);
	if (n < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	b64 = pjson_b64_encode(plain, (size_t)n);
	sodium_memzero(plain, (size_t)n);
	free(plain);
	if (!b64)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	n = asprintf(out, "Basic %s", b64);
	sodium_memzero(b64, strlen(b64));
	free(b64);
	if (n < 0) {
		*out = NULL;
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	return 0;
}

void reg_drop_authz(struct fetch *f)
{
	if (f->authz) {
		sodium_memzero(f->authz, strlen(f->authz));
		free(f->authz);
		f->authz = NULL;
	}
}

/* GET the token service's realm for a bearer token: f->authz = "Bearer <token>". */
static int get_token(struct fetch *f, const char *params)
{
	char realm[2048] = "", service[512] = "", scope[1024] = "", rscheme[8], rauth[300], rhost[256];
	char *url = NULL, *esc_service = NULL, *esc_scope = NULL, *basic = NULL, *default_scope = NULL;
	struct net_request rq;
	struct answer a;
	cJSON *root = NULL;
	const char *tok = NULL;
	char err[160];
	int rc;

	memset(&a, 0, sizeof(a));
	if (!challenge_param(params, "realm", realm, sizeof(realm)) ||
	    reg_url_split(realm, rscheme, sizeof(rscheme), rauth, sizeof(rauth)) != 0) {
		reg_quote(err, sizeof(err), realm, strlen(realm));
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: its bearer challenge names no usable token service (realm \"%s\")",
			    f->r.registry, err);
	}
	reg_host_only(rauth, rhost, sizeof(rhost));
	if (!strcmp(rscheme, "http") && !reg_http_allowed(f->ctx, rauth))
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: its token service %s is plain http; only https is used for tokens "
			    "(or a host in HANGAR_REGISTRY_INSECURE)", f->r.registry, rauth);
	challenge_param(params, "service", service, sizeof(service));
	if (!challenge_param(params, "scope", scope, sizeof(scope))) {
		if (asprintf(&default_scope, "repository:%s:pull", f->r.name) < 0)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		snprintf(scope, sizeof(scope), "%s", default_scope);
		free(default_scope);
	}
	esc_service = net_escape(service);
	esc_scope = net_escape(scope);
	if (!esc_service || !esc_scope ||
	    asprintf(&url, "%s%s%s%s%sscope=%s", realm, strchr(realm, '?') ? "&" : "?", service[0] ? "service=" : "",
		     service[0] ? esc_service : "", service[0] ? "&" : "", esc_scope) < 0) {
		url = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	net_request_init(&rq);
	rq.url = url;
	rq.max_body = TOKEN_ANSWER_MAX;
	rq.timeout_ms = a.timeout_ms = f->timeout_ms;
	rq.stall_ms = f->stall_ms;
	rq.extra_ca_file = f->ca_file;
	rq.on_header = reg_on_header;
	rq.ud = &a;
	/* The credentials go to a token service of the registry's own site only. */
	if (f->user && reg_same_site(f->host, rhost)) {
		if ((rc = set_basic(f, &basic)) != 0 || (rc = net_header_add(&rq, "Authorization: %s", basic)) != 0) {
			net_request_fini(&rq);
			goto out;
		}
	}
	net_perform(f->pool, &rq, &a.res);
	net_request_fini(&rq);
	if (a.res.cls != NET_OK) {
		char what[300];

		snprintf(what, sizeof(what), "a token for %.280s", scope);
		rc = reg_net_fail(f, &a, rauth, what, HANGAR_EPROTOCOL);
		if (a.res.cls == NET_HTTP_STATUS && a.res.http_status == 401 && f->user && !reg_same_site(f->host, rhost))
			herr_prefix("credentials are only sent to the registry's own site, not to this token service");
		goto out;
	}
	root = sjson_parse(a.res.body.data, a.res.body.len, 0, err, sizeof(err));
	if (root) {
		cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "token");

		if (!cJSON_IsString(t) || !t->valuestring[0])
			t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
		if (cJSON_IsString(t) && t->valuestring[0])
			tok = t->valuestring;
	}
	if (!tok || strlen(tok) > 65536 || strpbrk(tok, "\r\n")) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			  "registry %s: the token service %s answered without a usable token%s%s", f->r.registry, rauth,
			  root ? "" : ": ", root ? "" : err);
		goto out;
	}
	reg_drop_authz(f);
	if (asprintf(&f->authz, "Bearer %s", tok) < 0) {
		f->authz = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (root) {
		cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "token");

		if (cJSON_IsString(t))
			sodium_memzero(t->valuestring, strlen(t->valuestring));
		t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
		if (cJSON_IsString(t))
			sodium_memzero(t->valuestring, strlen(t->valuestring));
		cJSON_Delete(root);
	}
	if (a.res.body.data)
		sodium_memzero(a.res.body.data, a.res.body.len);
	net_result_fini(&a.res);
	if (basic) {
		sodium_memzero(basic, strlen(basic));
		free(basic);
	}
	free(esc_service);
	free(esc_scope);
	free(url);
	return rc;
}

/* Answers a 401's challenge: a bearer token, or basic credentials. */
int reg_authenticate(struct fetch *f, const char *challenge, const char *what)
{
	if (!strncasecmp(challenge, "Bearer ", 7))
		return get_token(f, challenge + 7);
	if (!strncasecmp(challenge, "Basic", 5) && (challenge[5] == ' ' || !challenge[5])) {
		if (!f->user)
			return herr_http(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER, 401, NULL,
					 "registry %s: %s needs a user name and password, and the auth file "
					 "(HANGAR_REGISTRY_AUTH_FILE, else the docker config.json) has none for %s",
					 f->r.registry, what, f->r.registry);
		reg_drop_authz(f);
		return set_basic(f, &f->authz);
	}
	{
		char q[120];

		reg_quote(q, sizeof(q), challenge, strlen(challenge));
		return herr_http(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER, 401, NULL,
				 "registry %s: %s asks for authentication we do not speak (\"%s\")", f->r.registry, what,
				 q[0] ? q : "no WWW-Authenticate");
	}
}

/* "https://host:port/v1/" and the like -> host:port, lower-cased. */
static void auth_key(const char *k, char *out, size_t cap)
{
	const char *s = strstr(k, "://");

	s = s ? s + 3 : k;
	snprintf(out, cap, "%.*s", (int)strcspn(s, "/"), s);
	for (char *c = out; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (!strcmp(out, "index.docker.io") || !strcmp(out, "registry-1.docker.io"))
		snprintf(out, cap, "docker.io");
}

int reg_load_credentials(struct fetch *f)
{
	const char *set = hctx_str(f->ctx, HS_REGISTRY_AUTH_FILE);
	char *path = NULL, *text = NULL, err[160];
	cJSON *root = NULL, *auths, *e;
	struct stat st;
	int fd = -1, rc = 0, explicit = set && set[0];
	ssize_t got;

	if (explicit) {
		path = strdup(set);
	} else if (getenv("DOCKER_CONFIG") && getenv("DOCKER_CONFIG")[0]) {
		if (asprintf(&path, "%s/config.json", getenv("DOCKER_CONFIG")) < 0)
			path = NULL;
	} else {
		const char *home = getenv("HOME");
		struct passwd *pw;

		if ((!home || !home[0]) && (pw = getpwuid(geteuid())))
			home = pw->pw_dir;
		if (!home || !home[0])
			return 0;
		if (asprintf(&path, "%s/.docker/config.json", home) < 0)
			path = NULL;
	}
	if (!path)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (explicit || errno != ENOENT)
			rc = herr_os(HANGAR_ECONFIG, errno, "registry %s: cannot read the auth file %s%s", f->r.registry,
				     path, explicit ? " (HANGAR_REGISTRY_AUTH_FILE)" : "");
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)AUTH_FILE_MAX) {
		rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "registry %s: the auth file %s is not a regular file of at most 1 MiB",
			  f->r.registry, path);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	got = read(fd, text, (size_t)st.st_size);
	if (got != st.st_size) {
		rc = herr_os(HANGAR_ECONFIG, got < 0 ? errno : EIO, "registry %s: cannot read the auth file %s", f->r.registry, path);
		goto out;
	}
	root = sjson_parse(text, (size_t)got, 0, err, sizeof(err));
	if (!root) {
		rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "registry %s: the auth file %s is not strict JSON: %s",
			  f->r.registry, path, err);
		goto out;
	}
	auths = cJSON_GetObjectItemCaseSensitive(root, "auths");
	if (!cJSON_IsObject(auths))
		auths = NULL;
	cJSON_ArrayForEach(e, auths)
	{
		char key[300];
		const cJSON *a, *u, *pw;

		auth_key(e->string, key, sizeof(key));
		if (strcmp(key, f->r.registry) != 0)
			continue;
		a = cJSON_GetObjectItemCaseSensitive(e, "auth");
		u = cJSON_GetObjectItemCaseSensitive(e, "username");
		pw = cJSON_GetObjectItemCaseSensitive(e, "password");
		if (cJSON_IsString(a) && a->valuestring[0]) {
			unsigned char *dec = NULL;
			size_t dl = 0;
			char *colon;

			if (pjson_b64_decode(a->valuestring, strlen(a->valuestring), &dec, &dl) != 0 || !dec ||
			    !(colon = memchr(dec, ':', dl)) || memchr(dec, '\0', dl)) {
				if (dec) {
					sodium_memzero(dec, dl);
					free(dec);
				}
				rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
					  "registry %s: the auth file %s has an \"auth\" for it that is not base64 of user:password",
					  f->r.registry, path);
				goto out;
			}
			f->user = strndup((char *)dec, (size_t)(colon - (char *)dec));
			f->pass = strndup(colon + 1, dl - (size_t)(colon + 1 - (char *)dec));
			sodium_memzero(dec, dl);
			free(dec);
		} else if (cJSON_IsString(u) && cJSON_IsString(pw)) {
			f->user = strdup(u->valuestring);
			f->pass = strdup(pw->valuestring);
		} else {
			continue;
		}
		if (!f->user || !f->pass)
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		else if (strpbrk(f->user, "\r\n") || strpbrk(f->pass, "\r\n"))
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				  "registry %s: the credentials for it in %s hold a line break", f->r.registry, path);
		break;
	}
out:
	if (text) {
		sodium_memzero(text, (size_t)st.st_size);
		free(text);
	}
	if (root) {
		/* Wipe the parsed copies of every secret before freeing. */
		cJSON *a2 = cJSON_GetObjectItemCaseSensitive(root, "auths");

		if (!cJSON_IsObject(a2))
			a2 = NULL;
		cJSON_ArrayForEach(e, a2)
		{
			cJSON *x;

			cJSON_ArrayForEach(x, e)
			if (cJSON_IsString(x))
				sodium_memzero(x->valuestring, strlen(x->valuestring));
		}
		cJSON_Delete(root);
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}
