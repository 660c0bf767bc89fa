/*
 * Image references as a fetch needs them (read by img_ref_parse(), the
 * store's own reading) and the hosts a fetch may talk to, and how.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "registry-int.h"

void reg_ref_free(struct ref *r)
{
	free(r->registry);
	free(r->api_host);
	free(r->name);
	free(r->tag);
	free(r->digest);
	free(r->normal);
	memset(r, 0, sizeof(*r));
}

static int ref_bad(const char *reference, const char *why)
{
	char shown[128];
	size_t o = 0;

	for (size_t i = 0; reference[i] && o + 1 < sizeof(shown); i++)
		shown[o++] = ((unsigned char)reference[i] < 0x20 || (unsigned char)reference[i] >= 0x7f) ? '?' : reference[i];
	shown[o] = '\0';
	return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid image reference \"%s\": %s", shown, why);
}

int reg_ref_parse(const char *reference, struct ref *r)
{
	struct img_ref ir;
	char why[160];

	memset(r, 0, sizeof(*r));
	if (img_ref_parse(reference, &ir, why, sizeof(why)) < 0)
		return ref_bad(reference ? reference : "", why);
	r->registry = strdup(ir.registry);
	r->api_host = strdup(!strcmp(ir.registry, "docker.io") ? "registry-1.docker.io" : ir.registry);
	r->name = strdup(ir.name);
	r->tag = ir.tag[0] ? strdup(ir.tag) : NULL;
	r->digest = ir.digest[0] ? strdup(ir.digest) : NULL;
	r->normal = strdup(ir.normal);
	if (!r->registry || !r->api_host || !r->name || (ir.tag[0] && !r->tag) || (ir.digest[0] && !r->digest) ||
	    !r->normal) {
		reg_ref_free(r);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	return 0;
}

int registry_ref_normalize(const char *reference, char **out)
{
	struct ref r;
	int rc;

	HCHECK_ARG(out, "out");
	*out = NULL;
	if ((rc = reg_ref_parse(reference, &r)) != 0)
		return rc;
	*out = r.normal;
	r.normal = NULL;
	reg_ref_free(&r);
	return 0;
}

/* The host of host[:port] or [v6][:port], without brackets, into out. */
void reg_host_only(const char *authority, char *out, size_t cap)
{
	size_t n;

	if (authority[0] == '[') {
		n = strcspn(authority + 1, "]");
		snprintf(out, cap, "%.*s", (int)n, authority + 1);
	} else {
		n = strcspn(authority, ":");
		snprintf(out, cap, "%.*s", (int)n, authority);
	}
	for (char *c = out; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
}

int reg_host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!strcmp(host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

/* Whether authority (host[:port]) may be reached over plain http. */
int reg_http_allowed(hangar_ctx *ctx, const char *authority)
{
	const char *list = hctx_str(ctx, HS_REGISTRY_INSECURE);
	char host[256];

	reg_host_only(authority, host, sizeof(host));
	if (reg_host_is_loopback(host))
		return 1;
	while (list && *list) {
		size_t n = strcspn(list, ","), b = 0, e = n;
		char entry[300];

		while (b < e && list[b] == ' ')
			b++;
		while (e > b && list[e - 1] == ' ')
			e--;
		snprintf(entry, sizeof(entry), "%.*s", (int)(e - b), list + b);
		if (strcasecmp(entry, authority) == 0)
			return 1;
		/* An entry without a port names the host on any port. */
		if (entry[0] == '[' ? !strstr(entry, "]:") : !strchr(entry, ':')) {
			char eh[256];

			reg_host_only(entry, eh, sizeof(eh));
			if (!strcmp(eh, host))
				return 1;
		}
		list += n;
		if (*list == ',')
			list++;
	}
	return 0;
}

/*
 * Whether a token service at realm_host may see the registry's credentials:
 * the same host, or (for DNS names) a host under the registry's parent
 * domain when that parent has at least two labels (registry-1.docker.io and
 * auth.docker.io).
 */
int reg_same_site(const char *registry_host, const char *realm_host)
{
	const char *parent;
	size_t pl, rl;
	struct in6_addr a;

	if (!strcmp(registry_host, realm_host))
		return 1;
	if (inet_pton(AF_INET, registry_host, &a) == 1 || inet_pton(AF_INET6, registry_host, &a) == 1)
		return 0;
	parent = strchr(registry_host, '.');
	if (!parent || !strchr(parent + 1, '.'))
		return 0;
	pl = strlen(parent);
	rl = strlen(realm_host);
	return rl > pl && strcmp(realm_host + rl - pl, parent) == 0;
}

/* Splits an http(s) URL: scheme ("http"/"https") and authority (host[:port]). -1 when it is not one. */
int reg_url_split(const char *url, char *scheme, size_t scap, char *authority, size_t acap)
{
	const char *rest;
	size_t an;

	if (!strncasecmp(url, "https://", 8)) {
		snprintf(scheme, scap, "https");
		rest = url + 8;
	} else if (!strncasecmp(url, "http://", 7)) {
		snprintf(scheme, scap, "http");
		rest = url + 7;
	} else {
		return -1;
	}
	an = strcspn(rest, "/?#");
	if (an == 0 || an >= acap || memchr(rest, '@', an))
		return -1;
	snprintf(authority, acap, "%.*s", (int)an, rest);
	return img_authority_ok(authority) ? 0 : -1;
}

/* Untrusted text quoted in a message: printable ASCII, bounded. */
void reg_quote(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; src && i < n && src[i] && o + 1 < cap; i++)
		dst[o++] = ((unsigned char)src[i] < 0x20 || (unsigned char)src[i] >= 0x7f) ? '?' : src[i];
	dst[o] = '\0';
}
