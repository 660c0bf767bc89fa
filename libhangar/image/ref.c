/*
 * Image references and digests. A name is normalised as docker does, so
 * "debian:12" and "docker.io/library/debian:12" are one name: a first
 * component with a dot or a colon, or "localhost", is a registry (else
 * docker.io); docker.io's single-component names are under library/; no
 * tag and no digest means ":latest".
 */
#define _GNU_SOURCE
#include <stdio.h>
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

/* A path component of a repository: [a-z0-9]+ joined by one of . _ __ -+ */
static int component_ok(const char *s, size_t n)
{
	size_t i;

	if (!n || n > 255)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c != '.' && c != '_' && c != '-')
			return 0;
		if (i == 0 || i == n - 1)
			return 0;
	}
	return 1;
}

static int tag_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 128 || s[0] == '.' || s[0] == '-')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int host_ok(const char *s, size_t n)
{
	size_t i;

	if (!n || n > 255)
		return 0;
	for (i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]", s[i]))
			return 0;
	return 1;
}

int img_ref_normalise(const char *ref, char *out, size_t size, char *err, size_t errlen)
{
	char buf[1024], *digest = NULL, *tag = NULL, *slash, *path, *host = NULL;
	const char *p;
	size_t n;
	int w;

	if (!ref || !*ref || strlen(ref) >= sizeof(buf)) {
		snprintf(err, errlen, "an image name is empty or longer than %zu bytes", sizeof(buf) - 1);
		return -1;
	}
	strcpy(buf, ref);
	if ((digest = strchr(buf, '@')) != NULL) {
		*digest++ = '\0';
		if (!img_digest_ok(digest)) {
			snprintf(err, errlen, "the digest of an image name is not sha256:<64 hex digits>");
			return -1;
		}
	}
	slash = strchr(buf, '/');
	if (slash && (memchr(buf, '.', (size_t)(slash - buf)) || memchr(buf, ':', (size_t)(slash - buf)) ||
		      ((size_t)(slash - buf) == 9 && !strncmp(buf, "localhost", 9)))) {
		host = buf;
		*slash = '\0';
		path = slash + 1;
		if (!host_ok(host, strlen(host))) {
			snprintf(err, errlen, "the registry of an image name is not a host name");
			return -1;
		}
	} else {
		path = buf;
	}
	slash = strrchr(path, '/');
	tag = strchr(slash ? slash : path, ':');
	if (tag) {
		*tag++ = '\0';
		if (!tag_ok(tag)) {
			snprintf(err, errlen, "the tag of an image name is not [A-Za-z0-9_.-], at most 128");
			return -1;
		}
	}
	for (p = path;;) {
		const char *e = strchr(p, '/');

		n = e ? (size_t)(e - p) : strlen(p);
		if (!component_ok(p, n)) {
			snprintf(err, errlen, "an image name's path is not lower-case [a-z0-9._-] components");
			return -1;
		}
		if (!e)
			break;
		p = e + 1;
	}
	if (!host)
		host = "docker.io";
	if (!strcmp(host, "index.docker.io"))
		host = "docker.io";
	w = snprintf(out, size, "%s/%s%s%s%s%s%s", host, !strcmp(host, "docker.io") && !strchr(path, '/') ? "library/" : "",
		     path, tag || !digest ? ":" : "", tag ? tag : (!digest ? "latest" : ""), digest ? "@" : "",
		     digest ? digest : "");
	/* Completed (registry, library/, :latest), a name must still be one this function takes. */
	if (w < 0 || (size_t)w >= size || (size_t)w >= sizeof(buf)) {
		snprintf(err, errlen, "an image name is longer than %zu bytes once completed", sizeof(buf) - 1);
		return -1;
	}
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
