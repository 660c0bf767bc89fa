/* The on-disk state of a local sandbox: meta.json, atomic writes, removal. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lstate.h"
#include "util/clock.h"
#include "util/sjson.h"

#define META_MAX (256 * 1024)

int lstate_random_hex(char *out, size_t n)
{
	unsigned char rnd[64];
	static const char digits[] = "0123456789abcdef";

	if (n > sizeof(rnd))
		return -EINVAL;
	errno = 0;
	if (getrandom(rnd, n, 0) != (ssize_t)n)
		return errno ? -errno : -EIO;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[rnd[i] >> 4];
		out[2 * i + 1] = digits[rnd[i] & 15];
	}
	out[2 * n] = '\0';
	explicit_bzero(rnd, n);
	return 0;
}

int lstate_valid_id(const char *id)
{
	if (!id || strncmp(id, "sb-", 3) != 0 || strlen(id) != LSTATE_ID_LEN)
		return 0;
	return strspn(id + 3, "0123456789abcdef") == LSTATE_ID_LEN - 3;
}

int lstate_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, err = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (!err && fchmod(fd, mode) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

char *lstate_read_file(const char *path, size_t max, size_t *len)
{
	struct stat st;
	size_t have = 0, cap = 256;
	char *buf = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), e = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		e = errno ? errno : EINVAL;
		if (fstat(fd, &st) == 0)
			e = EINVAL;
		goto fail;
	}
	/* Read to the end: /proc and cgroup files report a size of 0. */
	for (;;) {
		ssize_t n;

		if (have + 1 >= cap || !buf) {
			char *nb;

			if (buf)
				cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				e = ENOMEM;
				goto fail;
			}
			buf = nb;
		}
		n = read(fd, buf + have, cap - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = errno;
			goto fail;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max) {
			e = EFBIG;
			goto fail;
		}
	}
	close(fd);
	buf[have] = '\0';
	if (len)
		*len = have;
	return buf;
fail:
	close(fd);
	free(buf);
	errno = e;
	return NULL;
}

static void strv_free(char **v)
{
	for (char **e = v; e && *e; e++)
		free(*e);
	free(v);
}

int lstate_meta_set_env(struct lmeta *m, const char *const *env)
{
	size_t n = 0;

	strv_free(m->env);
	m->env = NULL;
	for (const char *const *e = env; e && *e; e++)
		n++;
	if (!n)
		return 0;
	m->env = calloc(n + 1, sizeof(char *));
	if (!m->env)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(m->env[i] = strdup(env[i])))
			return -ENOMEM; /* what was copied goes with lstate_meta_clear() */
	return 0;
}

void lstate_meta_clear(struct lmeta *m)
{
	strv_free(m->env);
	m->env = NULL;
	free(m->template_id);
	m->template_id = NULL;
	free(m->snapshot);
	m->snapshot = NULL;
	strv_free(m->image.layers);
	strv_free(m->image.env);
	free(m->image.workdir);
	free(m->image.user);
	free(m->image.use_lock);
	memset(&m->image, 0, sizeof(m->image));
}

/* A NULL-terminated copy of a JSON array of strings; -EINVAL when it is not one. */
static int strv_read(const cJSON *arr, char ***out)
{
	int n = cJSON_GetArraySize(arr), i = 0;
	const cJSON *e;

	if (!cJSON_IsArray(arr))
		return -EINVAL;
	*out = calloc((size_t)n + 1, sizeof(char *));
	if (!*out)
		return -ENOMEM;
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e))
			return -EINVAL;
		if (!((*out)[i++] = strdup(e->valuestring)))
			return -ENOMEM;
	}
	return 0;
}

/* A string member, copied; -EINVAL when it is not one. */
static int str_read(const cJSON *o, const char *name, char **out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsString(v))
		return -EINVAL;
	*out = strdup(v->valuestring);
	return *out ? 0 : -ENOMEM;
}

/* meta.json's "image", when there is one: every layer an absolute path. 0 or -errno. */
static int image_read(const cJSON *root, struct lmeta_image *im)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "image");
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "digest");
	int r;

	if (!o)
		return 0;
	if (!cJSON_IsObject(o) || !cJSON_IsString(d) || strlen(d->valuestring) >= sizeof(im->digest) ||
	    strncmp(d->valuestring, "sha256:", 7) != 0)
		return -EINVAL;
	strcpy(im->digest, d->valuestring);
	if ((r = strv_read(cJSON_GetObjectItemCaseSensitive(o, "layers"), &im->layers)) < 0 ||
	    (r = strv_read(cJSON_GetObjectItemCaseSensitive(o, "env"), &im->env)) < 0 ||
	    (r = str_read(o, "workdir", &im->workdir)) < 0 || (r = str_read(o, "user", &im->user)) < 0 ||
	    (r = str_read(o, "use_lock", &im->use_lock)) < 0)
		return r;
	if (!im->layers[0] || im->use_lock[0] != '/')
		return -EINVAL;
	for (char **l = im->layers; *l; l++)
		if ((*l)[0] != '/')
			return -EINVAL;
	return 0;
}

/* Adds a JSON array of strings v under name to o. 1, or 0 when out of memory. */
static int strv_add(cJSON *o, const char *name, char *const *v)
{
	cJSON *arr = cJSON_AddArrayToObject(o, name);

	for (char *const *e = v; arr && e && *e; e++)
		if (!cJSON_AddItemToArray(arr, cJSON_CreateString(*e)))
			return 0;
	return arr != NULL;
}

/* meta.json's "image" for im, when it names one. 1, or 0 when out of memory. */
static int image_write(cJSON *root, const struct lmeta_image *im)
{
	cJSON *o;

	if (!im->digest[0])
		return 1;
	o = cJSON_AddObjectToObject(root, "image");
	return o && cJSON_AddStringToObject(o, "digest", im->digest) && strv_add(o, "layers", im->layers) &&
	       strv_add(o, "env", im->env) && cJSON_AddStringToObject(o, "workdir", im->workdir ? im->workdir : "") &&
	       cJSON_AddStringToObject(o, "user", im->user ? im->user : "") &&
	       cJSON_AddStringToObject(o, "use_lock", im->use_lock ? im->use_lock : "");
}

static int64_t num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
}

static int copy_str(char *dst, size_t size, const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
		return -EINVAL;
	strcpy(dst, v->valuestring);
	return 0;
}

int lstate_meta_read(const char *dir, struct lmeta *m)
{
	char path[PATH_MAX];
	const cJSON *env, *state;
	cJSON *root;
	char *text;
	int r = 0;

	memset(m, 0, sizeof(*m));
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	text = lstate_read_file(path, META_MAX, NULL);
	if (!text)
		return -errno;
	/* Strict, as every JSON the project reads: one object, each member once. */
	root = sjson_parse(text, strlen(text), 0, NULL, 0);
	free(text);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return -EINVAL;
	}
	if (copy_str(m->id, sizeof(m->id), root, "id") < 0 || !lstate_valid_id(m->id) ||
	    str_read(root, "template", &m->template_id) < 0)
		r = -EINVAL;
	if (r == 0)
		r = image_read(root, &m->image);
	if (r == 0 && cJSON_GetObjectItemCaseSensitive(root, "snapshot") &&
	    ((r = str_read(root, "snapshot", &m->snapshot)) < 0 || m->snapshot[0] != '/'))
		r = -EINVAL;
	m->created_at_us = num(root, "created_at_us");
	m->timeout_sec = num(root, "timeout_sec");
	m->expires_at_us = num(root, "expires_at_us");
	m->jail_pid = (int)num(root, "jail_pid");
	m->network = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "network"));
	m->unprivileged = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "unprivileged"));
	state = cJSON_GetObjectItemCaseSensitive(root, "state");
	if (!cJSON_IsString(state))
		r = -EINVAL;
	else
		m->paused = strcmp(state->valuestring, "paused") == 0;
	env = cJSON_GetObjectItemCaseSensitive(root, "env");
	if (r == 0 && cJSON_IsArray(env) && cJSON_GetArraySize(env) > 0) {
		int n = cJSON_GetArraySize(env), i = 0;
		const cJSON *e;

		m->env = calloc((size_t)n + 1, sizeof(char *));
		if (!m->env)
			r = -ENOMEM;
		cJSON_ArrayForEach(e, env) {
			if (r < 0)
				break;
			if (!cJSON_IsString(e))
				r = -EINVAL;
			else if (!(m->env[i++] = strdup(e->valuestring)))
				r = -ENOMEM;
		}
	}
	cJSON_Delete(root);
	if (r < 0)
		lstate_meta_clear(m);
	return r;
}

int lstate_meta_write(const char *dir, const struct lmeta *m)
{
	char path[PATH_MAX];
	cJSON *root = cJSON_CreateObject(), *env = cJSON_CreateArray();
	char *text = NULL;
	int ok = root && env, r;

	if (ok) {
		cJSON_AddItemToObject(root, "env", env);
		env = NULL;
		for (char **e = m->env; e && *e && ok; e++)
			ok = cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "env"), cJSON_CreateString(*e));
		ok = ok && cJSON_AddStringToObject(root, "id", m->id) &&
		     cJSON_AddNumberToObject(root, "created_at_us", (double)m->created_at_us) &&
		     cJSON_AddNumberToObject(root, "timeout_sec", (double)m->timeout_sec) &&
		     cJSON_AddNumberToObject(root, "expires_at_us", (double)m->expires_at_us) &&
		     cJSON_AddStringToObject(root, "template", m->template_id ? m->template_id : "local") &&
		     image_write(root, &m->image) &&
		     (!m->snapshot || cJSON_AddStringToObject(root, "snapshot", m->snapshot)) &&
		     cJSON_AddBoolToObject(root, "network", m->network) &&
		     cJSON_AddStringToObject(root, "state", m->paused ? "paused" : "running") &&
		     cJSON_AddBoolToObject(root, "unprivileged", m->unprivileged) &&
		     cJSON_AddNumberToObject(root, "jail_pid", m->jail_pid);
	}
	if (ok)
		text = cJSON_Print(root);
	cJSON_Delete(root);
	cJSON_Delete(env);
	if (!text)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/meta.json", dir);
	r = lstate_write_atomic(path, text, strlen(text), 0600);
	free(text);
	return r;
}

DIR *lstate_opendir_at(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0) {
		int e = errno;

		close(fd);
		errno = e;
	}
	return d;
}

static int rmtree_dir(int dirfd, const char *name, dev_t dev)
{
	DIR *d;
	struct dirent *de;
	int fd, err = 0;

	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES) {
		/* A directory its owner made unreadable (chmod 0): it is ours to remove. */
		if (fchmodat(dirfd, name, 0700, 0) == 0)
			fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		err = -errno;
		close(fd);
		return err;
	}
	while ((errno = 0, de = readdir(d))) {
		struct stat st;
		int r;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT && !err)
				err = -errno;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev) {
				/* A mount point: never descend into another file system. */
				if (!err)
					err = -EXDEV;
				continue;
			}
			r = rmtree_dir(fd, de->d_name, dev);
			if (r == 0 && unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT)
				r = -errno;
		} else {
			r = unlinkat(fd, de->d_name, 0) < 0 && errno != ENOENT ? -errno : 0;
		}
		if (r < 0 && !err)
			err = r;
	}
	closedir(d);
	return err;
}

int lstate_rmtree_at(int dirfd, const char *name)
{
	struct stat st;
	int r;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	r = rmtree_dir(dirfd, name, st.st_dev);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int lstate_jail_pid(const char *dir)
{
	char path[PATH_MAX], *text, *end;
	long pid;

	snprintf(path, sizeof(path), "%s/jail.pid", dir);
	text = lstate_read_file(path, 64, NULL);
	if (!text)
		return 0;
	pid = strtol(text, &end, 10);
	if (end == text || (*end && *end != '\n') || pid <= 1 || pid > INT_MAX)
		pid = 0;
	free(text);
	return (int)pid;
}

int lstate_is_jail(int pid, const char *id)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd, prog = 0, mine = 0;

	if (pid <= 1)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0; /* gone, or a zombie */
	buf[n] = '\0';
	/* argv[0] names the program; the sandbox's directory (ending in its id) follows. */
	for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
		const char *slash = strrchr(a, '/');
		const char *base = slash ? slash + 1 : a;

		if (a == buf)
			prog = strcmp(base, "hangar-jail") == 0;
		else if (strcmp(base, id) == 0)
			mine = 1;
	}
	return prog && mine;
}

int lstate_write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

int lstate_first_child(int pid)
{
	char path[64];
	FILE *f;
	int child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &child) != 1)
		child = 0;
	fclose(f);
	return child;
}

/* pid's command name (/proc/PID/comm) into out, without its newline. 0, or -1. */
static int read_comm(int pid, char *out, size_t size)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, out, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return 0;
}

int lstate_jail_child(int jail_pid)
{
	char path[64], own[32], comm[32];
	int child, found = 0;
	FILE *f;

	if (read_comm(jail_pid, own, sizeof(own)) < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", jail_pid, jail_pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* A fork that has not exec'd has its parent's name; bwrap is exec'd. */
	while (!found && fscanf(f, "%d", &child) == 1)
		if (read_comm(child, comm, sizeof(comm)) == 0 && strcmp(comm, own) != 0)
			found = child;
	fclose(f);
	return found;
}

/* ---- the creation's timeline ------------------------------------------------------ */

int lstate_timeline_open(const char *dir)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/timeline", dir) >= (int)sizeof(path))
		return -1;
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
}

void lstate_timeline_mark(int fd, const char *phase)
{
	lstate_timeline_mark_at(fd, phase, clock_mono_us());
}

void lstate_timeline_mark_at(int fd, const char *phase, int64_t at_us)
{
	char line[96];
	int n;

	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%.60s %lld\n", phase, (long long)at_us);
	/* A timeline is for reading; a sandbox does not fail for want of one. */
	if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) < 0)
		return;
}

int lstate_timeline_text(const char *dir, char *out, size_t size)
{
	char path[PATH_MAX], phase[64];
	long long at, prev = -1;
	size_t used = 0;
	FILE *f;

	*out = '\0';
	if (snprintf(path, sizeof(path), "%s/timeline", dir) >= (int)sizeof(path) || !(f = fopen(path, "re")))
		return -1;
	while (fscanf(f, "%63s %lld", phase, &at) == 2) {
		int n = snprintf(out + used, size - used, "%s%s +%.1f", used ? " " : "", phase,
				 prev < 0 ? 0.0 : (double)(at - prev) / 1000.0);

		if (n < 0 || (size_t)n >= size - used)
			break;
		used += (size_t)n;
		prev = at;
	}
	fclose(f);
	return used ? 0 : -1;
}
