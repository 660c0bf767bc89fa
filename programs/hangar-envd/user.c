/* Users, path resolution, directory creation and child environments. */
#define _GNU_SOURCE
#include "envd.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rpc_fail(struct rpc_error *err, enum connect_code code, const char *fmt, ...)
{
	va_list ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return (int)code;
}

enum connect_code envd_fs_code(int e)
{
	switch (e) {
	case EACCES:
	case EPERM:
		return CONNECT_PERMISSION_DENIED;
	case ENOSPC:
	case EDQUOT:
		return CONNECT_RESOURCE_EXHAUSTED;
	/* The file system is not in a state for it: the caller's to change, not a fault of the daemon. */
	case EROFS:
	case EXDEV:
	case EBUSY:
	case EISDIR:
	case ENOTEMPTY:
	case ELOOP:
	case ENAMETOOLONG:
	case EINVAL:
		return CONNECT_FAILED_PRECONDITION;
	default: /* ENOTDIR among them, as upstream envd has it */
		return CONNECT_INTERNAL;
	}
}

int envd_user_lookup(const char *name, struct envd_user *out)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (!name || !*name || strlen(name) >= sizeof(out->name))
		return -1;
	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return -1;
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", res->pw_name);
	out->uid = res->pw_uid;
	out->gid = res->pw_gid;
	snprintf(out->home, sizeof(out->home), "%s", res->pw_dir && *res->pw_dir ? res->pw_dir : "/");
	snprintf(out->shell, sizeof(out->shell), "%s", res->pw_shell ? res->pw_shell : "/bin/sh");
	return 0;
}

/*
 * Lexically cleans an absolute path in place: "//", "/./" and "/../" go.
 * Each kept component is written as "/name" at or before the position it was
 * read from, so the output never overtakes input not yet read.
 */
void envd_base_name(const char *path, char *out, size_t outsz)
{
	size_t end = strlen(path), start;

	while (end > 1 && path[end - 1] == '/')
		end--;
	if (end == 0 || (end == 1 && path[0] == '/')) {
		snprintf(out, outsz, "%s", end ? "/" : ".");
		return;
	}
	start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	snprintf(out, outsz, "%.*s", (int)(end - start), path + start);
}

void envd_clean_path(char *p)
{
	char *out = p, *in = p;

	while (*in) {
		char *seg;
		size_t len;

		while (*in == '/')
			in++;
		if (!*in)
			break;
		seg = in;
		while (*in && *in != '/')
			in++;
		len = (size_t)(in - seg);
		if (len == 1 && seg[0] == '.')
			continue;
		if (len == 2 && seg[0] == '.' && seg[1] == '.') {
			while (out > p && *--out != '/')
				;
			continue;
		}
		*out++ = '/';
		memmove(out, seg, len);
		out += len;
	}
	if (out == p)
		*out++ = '/';
	*out = '\0';
}

int envd_resolve_path(const struct envd_user *u, const char *in, char *out, size_t outsz,
		      struct rpc_error *err)
{
	const char *home = u->home[0] ? u->home : "/";
	int n;

	if (!in)
		in = "";
	if (!*in) {
		n = snprintf(out, outsz, "%s", envd_cfg.default_workdir ? envd_cfg.default_workdir : home);
	} else if (in[0] == '~') {
		if (in[1] != '\0' && in[1] != '/') {
			rpc_fail(err, CONNECT_INVALID_ARGUMENT, "path '%s' is invalid: ~user is not supported", in);
			return -1;
		}
		n = snprintf(out, outsz, "%s%s", home, in + 1);
		if (n >= 0 && (size_t)n < outsz)
			envd_clean_path(out);
	} else if (in[0] == '/') {
		n = snprintf(out, outsz, "%s", in);
	} else {
		n = snprintf(out, outsz, "%s/%s", home, in);
		if (n >= 0 && (size_t)n < outsz)
			envd_clean_path(out);
	}
	if (n < 0 || (size_t)n >= outsz) {
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "path is too long");
		return -1;
	}
	return 0;
}

int envd_ensure_dirs(const char *path)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1;; p++) {
		char c = *p;
		struct stat st;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (stat(tmp, &st) == 0) {
			if (!S_ISDIR(st.st_mode))
				return -ENOTDIR;
		} else if (errno == ENOENT) {
			if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
				return -errno;
		} else {
			return -errno;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	return 0;
}

/* Adds or replaces "K=V" in the list (keys compared up to '='). */
static void env_set(char **list, size_t *n, char *kv)
{
	size_t klen = strcspn(kv, "=");

	for (size_t i = 0; i < *n; i++)
		if (strncmp(list[i], kv, klen) == 0 && list[i][klen] == '=') {
			list[i] = kv;
			return;
		}
	list[(*n)++] = kv;
}

char **envd_build_env(const struct envd_user *u, char *const *extra)
{
	const char *path = getenv("PATH");
	char **defaults = envd_default_env();
	size_t count = 4, strbytes = 0, n = 0;
	char **list, *p;
	char *fixed[4];
	char pathbuf[PATH_MAX + 8], homebuf[300], userbuf[80], lognamebuf[80];

	snprintf(pathbuf, sizeof(pathbuf), "PATH=%s",
		 path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	snprintf(homebuf, sizeof(homebuf), "HOME=%s", u->home);
	snprintf(userbuf, sizeof(userbuf), "USER=%s", u->name);
	snprintf(lognamebuf, sizeof(lognamebuf), "LOGNAME=%s", u->name);
	fixed[0] = pathbuf;
	fixed[1] = homebuf;
	fixed[2] = userbuf;
	fixed[3] = lognamebuf;
	for (size_t i = 0; i < 4; i++)
		strbytes += strlen(fixed[i]) + 1;
	for (char **e = defaults; e && *e; e++, count++)
		strbytes += strlen(*e) + 1;
	for (char *const *e = extra; e && *e; e++, count++)
		strbytes += strlen(*e) + 1;

	list = malloc((count + 1) * sizeof(char *) + strbytes);
	if (!list)
		return NULL;
	p = (char *)(list + count + 1);
#define ADD(s)                                     \
	do {                                       \
		size_t l_ = strlen(s) + 1;         \
		memcpy(p, (s), l_);                \
		if (strchr(p, '='))                \
			env_set(list, &n, p);      \
		p += l_;                           \
	} while (0)
	for (size_t i = 0; i < 4; i++)
		ADD(fixed[i]);
	for (char **e = defaults; e && *e; e++)
		ADD(*e);
	for (char *const *e = extra; e && *e; e++)
		ADD(*e);
#undef ADD
	list[n] = NULL;
	return list;
}
