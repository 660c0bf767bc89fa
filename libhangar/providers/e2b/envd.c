/*
 * Reaching a sandbox's envd: where it is (its URL and the routing headers)
 * and what it takes (envd's access token, and the traffic token from the
 * answer or sealed in the state store), with the rules that refuse a
 * sandbox lacking them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"

#define TRAFFIC_HEADER "e2b-traffic-access-token"
#define TEXT_(x) #x
#define TEXT(x) TEXT_(x)
#define ENVD_PORT_TEXT TEXT(ENVD_PORT)

static int e2b_own_domain(const char *d)
{
	static const char *const own[] = { "e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev" };

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcmp(d, own[i]))
			return 1;
	return 0;
}

/* Replaces every {sandbox_id} in tmpl, and every {port} by port. NULL when out of memory. */
static char *fill_url(const char *tmpl, const char *id, const char *port)
{
	struct hbuf b = HBUF_INIT;

	while (*tmpl) {
		if (!strncmp(tmpl, "{sandbox_id}", 12)) {
			if (hbuf_puts(&b, id) < 0)
				goto fail;
			tmpl += 12;
		} else if (!strncmp(tmpl, "{port}", 6)) {
			if (hbuf_puts(&b, port) < 0)
				goto fail;
			tmpl += 6;
		} else {
			if (hbuf_put(&b, tmpl, 1) < 0)
				goto fail;
			tmpl++;
		}
	}
	return b.data ? hbuf_steal(&b) : strdup("");
fail:
	hbuf_free(&b);
	return NULL;
}

/*
 * Where port of the sandbox is: the override with its placeholders filled
 * (port may be the library's "{port}" placeholder, left for it to fill), or
 * <port>-<id>.<domain>; for envd's port only, E2B's shared host routed by
 * header on E2B's own domains. NULL when out of memory.
 */
static char *port_url(struct e2b *e, const char *id, const char *domain, const char *port)
{
	char *url = NULL;

	if (e->sandbox_url)
		return fill_url(e->sandbox_url, id, port);
	if (!strcmp(port, ENVD_PORT_TEXT) && e2b_own_domain(domain)) {
		if (asprintf(&url, "https://sandbox.%s", domain) < 0)
			return NULL;
	} else if (asprintf(&url, "https://%s-%s.%s", port, id, domain) < 0) {
		return NULL;
	}
	return url;
}

/*
 * Where the sandbox's envd is (port_url()), and where its user ports are,
 * for a trusted caller of the library (hangar_sandbox_port_endpoint()):
 * the platform's edge routes every port. E2b-Sandbox-Id and
 * E2b-Sandbox-Port go with every request, as the SDKs do.
 */
int e2b_describe_envd(struct e2b *e, const char *id, const char *answer_domain, hangar_sys_sandbox *out)
{
	const char *domain = answer_domain ? answer_domain : e->domain;
	char *url, *ports;
	int rc;

	if (answer_domain && !e2b_valid_domain(answer_domain))
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the control API answered a malformed domain");
	url = port_url(e, id, domain, ENVD_PORT_TEXT);
	ports = port_url(e, id, domain, "{port}");
	if (!url || !ports) {
		free(url);
		free(ports);
		return e2b_oom();
	}
	rc = hangar_sys_sandbox_set_envd_url(out, url);
	if (rc == 0)
		rc = hangar_sys_sandbox_set_port_url(out, ports);
	free(url);
	free(ports);
	if (rc == 0 && e->ca_file)
		rc = hangar_sys_sandbox_set_envd_ca_file(out, e->ca_file);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_header(out, "E2b-Sandbox-Id", id);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_header(out, "E2b-Sandbox-Port", ENVD_PORT_TEXT);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_port_header(out, "E2b-Sandbox-Id", id);
	if (rc == 0)
		rc = hangar_sys_sandbox_add_port_header(out, "E2b-Sandbox-Port", "{port}");
	return rc;
}

/*
 * Fills out from a Sandbox answer (create, connect): envd endpoint, tokens.
 * The traffic token comes from the answer, else from the sealed store.
 * Applies the envd-token rules; *refused tells the caller a rule refused it.
 */
int e2b_describe(struct e2b *e, const char *id, const cJSON *j, hangar_sys_sandbox *out, int *refused)
{
	const char *envd_token = e2b_jstr(j, "envdAccessToken");
	const char *traffic = e2b_jstr(j, "trafficAccessToken");
	const char *tpl = e2b_jstr(j, "templateID");
	hangar_buf sealed = HANGAR_BUF_INIT;
	int rc;

	*refused = 0;
	rc = hangar_sys_sandbox_set_id(out, id);
	if (rc == 0)
		rc = e2b_describe_envd(e, id, e2b_jstr(j, "domain"), out);
	if (rc == 0 && tpl)
		rc = hangar_sys_sandbox_set_template(out, tpl);
	if (rc)
		return rc;
	if (!traffic) {
		int g = hangar_sys_secret_get(&sealed, e->ctx, id, TRAFFIC_SECRET);

		if (g == 0)
			traffic = sealed.ptr;
		else if (g != HANGAR_ENOTFOUND && e->fl->traffic_token_once)
			/* Kept only by us, and the edge wants it on every port: without it nothing would work. */
			return g;
	}
	if (!envd_token && !traffic) {
		*refused = 1;
		rc = hangar_sys_error(HANGAR_EREFUSED, 0, 0,
				      "e2b: sandbox %s has neither an envd access token nor a traffic token: "
				      "anyone who can reach it could run commands in it",
				      id);
	} else if (!envd_token && !e->allow_unauth) {
		*refused = 1;
		rc = hangar_sys_error(HANGAR_EREFUSED, 0, 0,
				      "e2b: sandbox %s has no envd access token; set "
				      "HANGAR_E2B_ALLOW_UNAUTHENTICATED_ENVD=true only on a private network",
				      id);
	}
	if (rc == 0 && envd_token)
		rc = hangar_sys_sandbox_set_access_token(out, envd_token);
	/* Public traffic is off: the platform's edge wants it on every port (on Cube, envd's too). */
	if (rc == 0 && traffic)
		rc = hangar_sys_sandbox_add_header(out, TRAFFIC_HEADER, traffic);
	if (rc == 0 && traffic)
		rc = hangar_sys_sandbox_add_port_header(out, TRAFFIC_HEADER, traffic);
	if (sealed.ptr)
		explicit_bzero(sealed.ptr, sealed.size);
	hangar_buf_dispose(&sealed);
	return rc;
}

/* A newer traffic token than the sealed one (E2B rotates them on resume). */
void e2b_reseal(struct e2b *e, const char *id, const cJSON *j)
{
	const char *traffic = e2b_jstr(j, "trafficAccessToken");
	hangar_sys_saved_error saved;

	if (!traffic)
		return;
	hangar_sys_error_save(&saved);
	if (hangar_sys_secret_put(e->ctx, id, TRAFFIC_SECRET, traffic) != 0)
		hangar_sys_log(e->ctx, HANGAR_LOG_DEBUG, "e2b: traffic token of %s not kept", id);
	hangar_sys_error_restore(&saved);
}
