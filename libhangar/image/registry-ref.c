/*
 * Image references ([REGISTRY/]NAME[:TAG][@sha256:HEX], normalised as
 * docker does) and the hosts a fetch may talk to, and how.
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

static int is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int reg_digest_ok(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != DIGEST_LEN)
		return 0;
	for (int i = 7; i < DIGEST_LEN; i++)
		if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
			return 0;
	return 1;
}

/* One path component: [a-z0-9]+ joined by ".", "_", "__" or runs of "-". */
static int component_ok(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return 0;
	while (i < n) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '.' || (s[i] == '_' && s[i + 1] != '_'))
			i++;
		else if (s[i] == '_' && i + 1 < n && s[i + 1] == '_')
			i += 2;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return 0;
		if (i >= n || !is_lower_alnum(s[i]))
			return 0;
	}
	return 1;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255)
		return 0;
	while (*s) {
		size_t c = strcspn(s, "/");

		if (!component_ok(s, c))
			return 0;
		s += c;
		if (*s == '/' && !*++s)
			return 0;
	}
	return 1;
}

static int tag_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* host[:port] or [v6][:port]; a port 1..65535. */
int reg_authority_ok(const char *s)
{
	const char *port = NULL;
	size_t hn;

	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || e == s + 1 || strspn(s + 1, "0123456789abcdefABCDEF:.") != (size_t)(e - s - 1))
			return 0;
		if (e[1] == ':')
			port = e + 2;
		else if (e[1])
			return 0;
	} else {
		hn = strcspn(s, ":");
		if (hn == 0 || hn > 253 ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != hn ||
		    s[0] == '.' || s[0] == '-' || s[hn - 1] == '.' || s[hn - 1] == '-')
			return 0;
		if (s[hn] == ':')
			port = s + hn + 1;
	}
	if (port) {
		size_t pn = strlen(port);
		long v;

		if (pn == 0 || pn > 5 || strspn(port, "0123456789") != pn)
			return 0;
		v = strtol(port, NULL, 10);
		if (v < 1 || v > 65535)
			return 0;
	}
	return 1;
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
	char *s, *at, *slash, *colon, *path;
	int rc = HANGAR_ENOMEM;

	memset(r, 0, sizeof(*r));
	if (!reference || !reference[0])
		return ref_bad("", "it is empty");
	if (strlen(reference) > 1024)
		return ref_bad(reference, "longer than 1024 bytes");
	for (const char *c = reference; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return ref_bad(reference, "a character outside printable ASCII");
	if (!(s = strdup(reference)))
		goto nomem;
	if ((at = strchr(s, '@'))) {
		*at++ = '\0';
		if (!reg_digest_ok(at)) {
			rc = ref_bad(reference, "a digest must be sha256: and 64 lower-case hex digits");
			goto out;
		}
		if (!(r->digest = strdup(at)))
			goto nomem;
	}
	path = s;
	slash = strchr(s, '/');
	if (slash && (memchr(s, '.', (size_t)(slash - s)) || memchr(s, ':', (size_t)(slash - s)) ||
		      (slash - s == 9 && strncmp(s, "localhost", 9) == 0) || s[0] == '[')) {
		*slash = '\0';
		if (!reg_authority_ok(s)) {
			rc = ref_bad(reference, "the registry must be host[:port]");
			goto out;
		}
		for (char *c = s; *c && *c != ':'; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		if (!strcmp(s, "index.docker.io") || !strcmp(s, "registry-1.docker.io"))
			r->registry = strdup("docker.io");
		else
			r->registry = strdup(s);
		path = slash + 1;
	} else {
		r->registry = strdup("docker.io");
	}
	if (!r->registry)
		goto nomem;
	colon = strrchr(path, ':');
	if (colon && !strchr(colon, '/')) {
		*colon++ = '\0';
		if (!tag_ok(colon)) {
			rc = ref_bad(reference, "a tag is [A-Za-z0-9_.-], at most 128, not starting with . or -");
			goto out;
		}
		if (!(r->tag = strdup(colon)))
			goto nomem;
	}
	if (!name_ok(path)) {
		rc = ref_bad(reference,
			     "a name is lower-case components ([a-z0-9] joined by ., _, __ or -) separated by /");
		goto out;
	}
	if (!strcmp(r->registry, "docker.io") && !strchr(path, '/')) {
		if (asprintf(&r->name, "library/%s", path) < 0) {
			r->name = NULL;
			goto nomem;
		}
	} else if (!(r->name = strdup(path)))
		goto nomem;
	if (!r->tag && !r->digest && !(r->tag = strdup("latest")))
		goto nomem;
	r->api_host = strdup(!strcmp(r->registry, "docker.io") ? "registry-1.docker.io" : r->registry);
	if (!r->api_host ||
	    asprintf(&r->normal, "%s/%s%s%s%s%s", r->registry, r->name, r->tag ? ":" : "", r->tag ? r->tag : "",
		     r->digest ? "@" : "", r->digest ? r->digest : "") < 0) {
		r->normal = NULL;
		goto nomem;
	}
	free(s);
	return 0;
nomem:
	rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
out:
	free(s);
	reg_ref_free(r);
	return rc;
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
	return reg_authority_ok(authority) ? 0 : -1;
}

/* Untrusted text quoted in a message: printable ASCII, bounded. */
void reg_quote(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; src && i < n && src[i] && o + 1 < cap; i++)
		dst[o++] = ((unsigned char)src[i] < 0x20 || (unsigned char)src[i] >= 0x7f) ? '?' : src[i];
	dst[o] = '\0';
}
