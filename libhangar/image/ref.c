/*
 * Image references and digests: the one reading of [REGISTRY/]NAME[:TAG]
 * [@sha256:HEX] that the store and a registry fetch share, so a name one
 * takes the other cannot refuse. A name is normalised as docker does, so
 * "debian:12" and "docker.io/library/debian:12" are one name: a first
 * component with a dot or a colon, "localhost" or "[v6]" is a registry
 * (else docker.io, which index.docker.io and registry-1.docker.io are too);
 * docker.io's single-component names are under library/; no tag and no
 * digest means ":latest"; registry/name completed is at most 255 bytes.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/img.h"
#include "util/relpath.h"
#include "util/sjson.h"

int img_hex_ok(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == '\0';
}

int img_digest_ok(const char *s)
{
	return s && !strncmp(s, "sha256:", 7) && img_hex_ok(s + 7, IMG_HEX_LEN);
}

static int is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
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

/* Components separated by single slashes, none empty. */
static int path_ok(const char *s)
{
	if (!*s)
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

	if (n == 0 || n > IMG_TAG_MAX || s[0] == '.' || s[0] == '-')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int port_ok(const char *port)
{
	size_t n = strlen(port);
	long v;

	if (n == 0 || n > 5 || strspn(port, "0123456789") != n)
		return 0;
	v = strtol(port, NULL, 10);
	return v >= 1 && v <= 65535;
}

int img_authority_ok(const char *s)
{
	size_t hn;

	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || e == s + 1 || strspn(s + 1, "0123456789abcdefABCDEF:.") != (size_t)(e - s - 1))
			return 0;
		return e[1] == ':' ? port_ok(e + 2) : !e[1];
	}
	hn = strcspn(s, ":");
	if (hn == 0 || hn > 253 || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != hn ||
	    s[0] == '.' || s[0] == '-' || s[hn - 1] == '.' || s[hn - 1] == '-')
		return 0;
	return s[hn] == ':' ? port_ok(s + hn + 1) : 1;
}

/* Whether the part of a reference before its first slash names a registry rather than a path. */
static int names_registry(const char *s, size_t n)
{
	return memchr(s, '.', n) || memchr(s, ':', n) || (n == 9 && !strncmp(s, "localhost", 9)) || s[0] == '[';
}

static int refuse(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return -1;
}

/* Fills r->registry from host[:port] (host lower-cased, docker.io's aliases folded); -1 when it is not one. */
static int take_registry(struct img_ref *r, char *authority)
{
	if (strlen(authority) >= sizeof(r->registry) || !img_authority_ok(authority))
		return -1;
	for (char *c = authority; *c && *c != ':'; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (!strcmp(authority, "index.docker.io") || !strcmp(authority, "registry-1.docker.io"))
		authority = "docker.io";
	snprintf(r->registry, sizeof(r->registry), "%s", authority);
	return 0;
}

int img_ref_parse(const char *ref, struct img_ref *r, char *err, size_t errlen)
{
	char buf[IMG_REF_MAX + 1], *at, *slash, *colon, *path = buf;
	int w;

	memset(r, 0, sizeof(*r));
	if (!ref || !*ref)
		return refuse(err, errlen, "it is empty");
	if (strlen(ref) > IMG_REF_MAX)
		return refuse(err, errlen, "longer than 1023 bytes");
	for (const char *c = ref; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return refuse(err, errlen, "a character outside printable ASCII");
	strcpy(buf, ref);
	if ((at = strchr(buf, '@'))) {
		*at++ = '\0';
		if (!img_digest_ok(at))
			return refuse(err, errlen, "a digest must be sha256: and 64 lower-case hex digits");
		strcpy(r->digest, at);
	}
	slash = strchr(buf, '/');
	if (slash && names_registry(buf, (size_t)(slash - buf))) {
		*slash = '\0';
		if (take_registry(r, buf) < 0)
			return refuse(err, errlen, "the registry must be host[:port]");
		path = slash + 1;
	} else {
		strcpy(r->registry, "docker.io");
	}
	colon = strrchr(path, ':');
	if (colon && !strchr(colon, '/')) {
		*colon++ = '\0';
		if (!tag_ok(colon))
			return refuse(err, errlen, "a tag is [A-Za-z0-9_.-], at most 128, not starting with . or -");
		strcpy(r->tag, colon);
	}
	if (!path_ok(path))
		return refuse(err, errlen,
			      "a name is lower-case components ([a-z0-9] joined by ., _, __ or -) separated by /");
	/* As docker does, the bound is on the repository completed: "docker.io/library/" counts. */
	w = snprintf(r->name, sizeof(r->name), "%s%s",
		     !strcmp(r->registry, "docker.io") && !strchr(path, '/') ? "library/" : "", path);
	if (w < 0 || strlen(r->registry) + 1 + (size_t)w > IMG_REPO_MAX)
		return refuse(err, errlen, "longer than 255 bytes once completed (registry/name)");
	if (!r->tag[0] && !r->digest[0])
		strcpy(r->tag, "latest");
	w = snprintf(r->normal, sizeof(r->normal), "%s/%s%s%s%s%s", r->registry, r->name, r->tag[0] ? ":" : "",
		     r->tag, r->digest[0] ? "@" : "", r->digest);
	if (w < 0 || (size_t)w >= sizeof(r->normal))
		return refuse(err, errlen, "longer than a reference can be once completed");
	return 0;
}

int img_ref_normalise(const char *ref, char *out, size_t size, char *err, size_t errlen)
{
	struct img_ref r;

	if (img_ref_parse(ref, &r, err, errlen) < 0)
		return -1;
	if (strlen(r.normal) >= size)
		return refuse(err, errlen, "longer than the room for it once completed");
	strcpy(out, r.normal);
	return 0;
}

/*
 * A member's name made relative and canonical in out: "./a//b/" -> "a/b".
 * 0, 1 for the top itself, or -1 with why (absolute, "..", too long).
 */
int img_path_canon(const char *name, char *out, size_t size, const char **why)
{
	if (strlen(name) > IMG_MAX_NAME) {
		*why = "its name is longer than 4096 bytes";
		return -1;
	}
	return relpath_canon(name, out, size, why);
}

void img_quote(char *out, size_t size, const char *name)
{
	size_t o = 0, i = 0, n = strlen(name);

	while (i < n && o < IMG_QUOTE_MAX && o + 8 < size) {
		size_t c = sjson_char_len(name + i, n - i);

		if (c == 0 || (c == 1 && ((unsigned char)name[i] < 0x20 || name[i] == 0x7f))) {
			out[o++] = '?';
			i++;
			continue;
		}
		memcpy(out + o, name + i, c);
		o += c;
		i += c;
	}
	if (i < n && o + 4 <= size) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
}
