/*
 * File metadata as user.e2b.* extended attributes, where envd keeps it: an
 * upload's X-Metadata-* headers replace the whole set, and EntryInfo
 * reports it.
 *
 * Everything uses the l* calls: metadata belongs to the entry itself, and a
 * symlink must never redirect a write to wherever it points.
 */
#define _GNU_SOURCE
#include "envd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define META_PREFIX "user.e2b."
#define META_PREFIX_LEN (sizeof(META_PREFIX) - 1)
/* XATTR_NAME_MAX (255) minus the prefix. */
#define META_KEY_MAX (255 - META_PREFIX_LEN)
#define META_TOTAL_MAX 4096

static int printable(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return 0;
	return 1;
}

/* A filesystem that simply has no user xattrs: treated as "no metadata". */
static int unsupported(int e)
{
	return e == ENOTSUP || e == EOPNOTSUPP || e == ENOSYS;
}

/*
 * The NUL-separated list of xattr names of path (malloc'd, *len bytes), or
 * NULL with *len 0 when there are none. Returns 0 or -errno.
 */
static int list_names(const char *path, char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	for (int tries = 0; tries < 8; tries++) {
		ssize_t want = llistxattr(path, NULL, 0), got;
		char *buf;

		if (want < 0)
			return unsupported(errno) ? 0 : -errno;
		if (want == 0)
			return 0;
		buf = malloc((size_t)want);
		if (!buf)
			return -ENOMEM;
		got = llistxattr(path, buf, (size_t)want);
		if (got >= 0) {
			*out = buf;
			*len = (size_t)got;
			return 0;
		}
		free(buf);
		/* ERANGE: the list grew between the two calls; ask again. */
		if (errno != ERANGE)
			return unsupported(errno) ? 0 : -errno;
	}
	return -EAGAIN;
}

/* One xattr value as a NUL-terminated malloc'd string, or NULL. */
static char *get_value(const char *path, const char *name, size_t *len)
{
	for (int tries = 0; tries < 8; tries++) {
		ssize_t want = lgetxattr(path, name, NULL, 0), got;
		char *buf;

		if (want < 0)
			return NULL;
		buf = malloc((size_t)want + 1);
		if (!buf)
			return NULL;
		got = lgetxattr(path, name, buf, (size_t)want);
		if (got >= 0) {
			buf[got] = '\0';
			*len = (size_t)got;
			return buf;
		}
		free(buf);
		if (errno != ERANGE)
			return NULL;
	}
	return NULL;
}

cJSON *envd_metadata_read(const char *path)
{
	cJSON *obj = NULL;
	char *names;
	size_t len;

	if (list_names(path, &names, &len) < 0 || !names)
		return NULL;
	for (char *name = names; name < names + len; name += strlen(name) + 1) {
		const char *key = name + META_PREFIX_LEN;
		char *val;
		size_t vlen;

		if (strncmp(name, META_PREFIX, META_PREFIX_LEN) != 0 || !*key)
			continue;
		val = get_value(path, name, &vlen);
		if (!val)
			continue;
		/* Anything a client could not have written through the API is skipped. */
		if (printable(key, strlen(key)) && printable(val, vlen) && strlen(val) == vlen) {
			if (!obj)
				obj = cJSON_CreateObject();
			if (obj)
				cJSON_AddStringToObject(obj, key, val);
		}
		free(val);
	}
	free(names);
	return obj;
}

static int refuse(char *msg, size_t msgsz, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* -EINVAL, with the reason in msg unless msg is NULL. */
static int refuse(char *msg, size_t msgsz, const char *fmt, ...)
{
	va_list ap;

	if (msg) {
		va_start(ap, fmt);
		vsnprintf(msg, msgsz, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

int envd_metadata_check(const char *const *keys, const char *const *values, size_t n, char *msg, size_t msgsz)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		size_t klen, vlen;

		if (!keys[i] || !values[i])
			return refuse(msg, msgsz, "invalid metadata: a key or value is missing");
		klen = strlen(keys[i]);
		vlen = strlen(values[i]);
		if (klen == 0)
			return refuse(msg, msgsz, "invalid metadata: empty key");
		if (!printable(keys[i], klen) || !printable(values[i], vlen))
			return refuse(msg, msgsz, "invalid metadata: key '%s': keys and values must be "
				      "printable ASCII", printable(keys[i], klen) ? keys[i] : "?");
		if (klen > META_KEY_MAX)
			return refuse(msg, msgsz, "invalid metadata: key '%s' is longer than %d bytes", keys[i],
				      (int)META_KEY_MAX);
		total += META_PREFIX_LEN + klen + vlen;
	}
	if (total > META_TOTAL_MAX)
		return refuse(msg, msgsz, "invalid metadata: total size %zu exceeds %d bytes", total, META_TOTAL_MAX);
	return 0;
}

static int in_keys(const char *key, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(key, keys[i]) == 0)
			return 1;
	return 0;
}

/* Drops every user.e2b.* attribute whose key is not among keys. */
static int remove_stale(const char *path, const char *const *keys, size_t n)
{
	char *names;
	size_t len;
	int rc = list_names(path, &names, &len);

	if (rc < 0 || !names)
		return rc;
	for (char *name = names; name < names + len; name += strlen(name) + 1) {
		if (strncmp(name, META_PREFIX, META_PREFIX_LEN) != 0 ||
		    in_keys(name + META_PREFIX_LEN, keys, n))
			continue;
		if (lremovexattr(path, name) < 0 && errno != ENODATA && !unsupported(errno)) {
			rc = -errno;
			break;
		}
	}
	free(names);
	return rc;
}

int envd_metadata_write(const char *path, const char *const *keys, const char *const *values, size_t n)
{
	char name[META_PREFIX_LEN + META_KEY_MAX + 1];
	int rc = envd_metadata_check(keys, values, n, NULL, 0);

	if (rc < 0)
		return rc;
	/* Set the new values first, so a failure half way leaves the old set mostly intact. */
	for (size_t i = 0; i < n; i++) {
		memcpy(name, META_PREFIX, META_PREFIX_LEN);
		memcpy(name + META_PREFIX_LEN, keys[i], strlen(keys[i]) + 1);
		if (lsetxattr(path, name, values[i], strlen(values[i]), 0) < 0)
			return unsupported(errno) ? 0 : -errno;
	}
	return remove_stale(path, keys, n);
}
