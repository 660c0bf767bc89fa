/*
 * Reading one image's record for a sandbox (rootfs.h). The store is
 * another writer's: every record is read strictly, each name and digest in
 * it checked before it becomes part of a path, and the record is read again
 * once the use lock is held, so a removal that ran between the look-up and
 * the lock is seen rather than trusted.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "hangar/sys/provider.h"
#include "util/sjson.h"
#include "image/img.h"
#include "image/rootfs.h"

#define RECORD_MAX (1 << 20) /* one image's record */
#define REF_MAX 1024
#define HEX_LEN 64
#define PREFIX_MIN 12

int image_dir(hangar_ctx *ctx, char *buf, size_t size)
{
	const char *set = hangar_sys_ctx_setting(ctx, "HANGAR_IMAGE_DIR");
	int n;

	if (set && *set)
		n = snprintf(buf, size, "%s", set);
	else
		n = snprintf(buf, size, "%s/images", hangar_sys_ctx_setting(ctx, "HANGAR_STATE_DIR"));
	if (n < 0 || (size_t)n >= size || buf[0] != '/')
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_IMAGE_DIR: \"%s\" is not an absolute path of at most %zu bytes", buf,
					size - 1);
	return 0;
}

static int is_hex(const char *s, size_t n)
{
	return strspn(s, "0123456789abcdef") >= n;
}

/* 1 when s is "sha256:" and 64 lowercase hex digits. */
static int is_digest(const char *s)
{
	return s && !strncmp(s, "sha256:", 7) && strlen(s) == 7 + HEX_LEN && is_hex(s + 7, HEX_LEN);
}

/* The whole of a small regular file at dirfd/name, not through a link; NULL with errno. */
static char *read_at(int dirfd, const char *name, size_t max)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	char *buf = NULL;
	size_t have = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
		errno = S_ISREG(st.st_mode) ? EFBIG : EINVAL;
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto out;
	while (have < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + have, (size_t)st.st_size - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			buf = NULL;
			errno = n < 0 ? errno : EIO;
			goto out;
		}
		have += (size_t)n;
	}
	buf[have] = '\0';
out:
	close(fd);
	return buf;
}

/* images/<hex>.json, parsed strictly; NULL when missing or not one JSON object. */
static cJSON *read_record(int images, const char *hex)
{
	char name[HEX_LEN + 8];
	char *text;
	cJSON *root;

	snprintf(name, sizeof(name), "%s.json", hex);
	text = read_at(images, name, RECORD_MAX);
	if (!text)
		return NULL;
	root = sjson_parse(text, strlen(text), 0, NULL, 0);
	free(text);
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

static int has_name(const cJSON *rec, const char *ref)
{
	const cJSON *n;

	cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(rec, "names"))
		if (cJSON_IsString(n) && !strcmp(n->valuestring, ref))
			return 1;
	return 0;
}

/*
 * The hex digest of the image ref names, looked for in images/ (an open
 * directory): 0 with hex filled, or an error set.
 */
static int find(int images, const char *given, char hex[HEX_LEN + 1])
{
	char ref[1100], err[160];
	size_t rlen;
	int prefix, named = 0, matches = 0, fd;
	DIR *d;
	struct dirent *de;

	/* A name as the store records it: normalised, as hangar_image_inspect() finds it too. */
	rlen = strlen(given);
	prefix = rlen >= PREFIX_MIN && rlen <= HEX_LEN && is_hex(given, rlen);
	if (prefix || is_digest(given))
		snprintf(ref, sizeof(ref), "%s", given);
	else if (img_ref_normalise(given, ref, sizeof(ref), err, sizeof(err)) < 0)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%.200s\": %s", given, err);
	fd = dup(images);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (is_digest(ref)) {
		memcpy(hex, ref + 7, HEX_LEN + 1);
		if (fd >= 0 && !d)
			close(fd);
		if (d)
			closedir(d);
		return 0;
	}
	if (!d) {
		if (fd >= 0)
			close(fd);
		return hangar_sys_error(HANGAR_EOS, 0, errno, "cannot read the image store's records");
	}
	while ((de = readdir(d))) {
		const char *nm = de->d_name;
		char h[HEX_LEN + 1];
		cJSON *rec;

		if (strlen(nm) != HEX_LEN + 5 || strcmp(nm + HEX_LEN, ".json") || !is_hex(nm, HEX_LEN))
			continue;
		if (prefix && !named && !strncmp(nm, ref, rlen)) {
			if (matches++ == 0)
				memcpy(hex, nm, HEX_LEN);
		}
		memcpy(h, nm, HEX_LEN);
		h[HEX_LEN] = '\0';
		rec = read_record(images, h);
		if (rec && has_name(rec, ref)) {
			memcpy(hex, h, HEX_LEN + 1);
			named = 1;
		}
		cJSON_Delete(rec);
		if (named)
			break;
	}
	closedir(d);
	hex[HEX_LEN] = '\0';
	if (named || matches == 1)
		return 0;
	if (matches > 1)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": that prefix names %d images; give more digits",
					ref, matches);
	return hangar_sys_error(HANGAR_ENOTFOUND, 0, 0, "no image \"%s\" in the image store", ref);
}

static void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* A NULL-terminated copy of a JSON array of strings (absent: empty); NULL when it is not one or out of memory. */
static char **strv_of(const cJSON *arr)
{
	int n = arr ? cJSON_GetArraySize(arr) : 0, i = 0;
	char **v;
	const cJSON *e;

	if (arr && !cJSON_IsArray(arr))
		return NULL;
	v = calloc((size_t)n + 1, sizeof(char *));
	if (!v)
		return NULL;
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e) || !(v[i++] = strdup(e->valuestring))) {
			strv_free(v);
			return NULL;
		}
	}
	return v;
}

/* A config string member ("" when absent); NULL when it is there but not a string, or out of memory. */
static char *config_str(const cJSON *config, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, name);

	if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
		return NULL;
	return strdup(cJSON_IsString(v) ? v->valuestring : "");
}

/* Each layer's root, bottom to top, once layer.json says it is complete. 0, or an error set. */
static int take_layers(const char *dir, const char *ref, const cJSON *layers, struct image_rootfs *out)
{
	int n = cJSON_GetArraySize(layers), i = 0;
	const cJSON *l;

	if (!cJSON_IsArray(layers) || n < 1 || n > IMAGE_ROOTFS_MAX_LAYERS)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": its record names %d layers (1 to %d can be used)",
					ref, n, IMAGE_ROOTFS_MAX_LAYERS);
	out->layers = calloc((size_t)n + 1, sizeof(char *));
	if (!out->layers)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	cJSON_ArrayForEach(l, layers) {
		char path[PATH_MAX];
		struct stat st;

		if (!cJSON_IsString(l) || !is_digest(l->valuestring))
			return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": a layer of its record is not sha256:<hex>",
						ref);
		snprintf(path, sizeof(path), "%s/layers/%s/layer.json", dir, l->valuestring + 7);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
			return hangar_sys_error(HANGAR_ECREATE, 0, errno,
						"image \"%s\": layer %s is not complete in the image store (pull or "
						"import the image again)",
						ref, l->valuestring);
		snprintf(path, sizeof(path), "%s/layers/%s/root", dir, l->valuestring + 7);
		if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			return hangar_sys_error(HANGAR_ECREATE, 0, errno, "image \"%s\": layer %s has no root directory",
						ref, l->valuestring);
		if (!(out->layers[i++] = strdup(path)))
			return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	}
	return 0;
}

/* The record of image hex, checked, into out. 0, or an error set. */
static int take_record(int images, const char *dir, const char *ref, const char *hex, struct image_rootfs *out)
{
	cJSON *rec = read_record(images, hex);
	const cJSON *digest = cJSON_GetObjectItemCaseSensitive(rec, "digest");
	const cJSON *config = cJSON_GetObjectItemCaseSensitive(rec, "config");
	int r;

	if (!rec)
		return hangar_sys_error(errno == ENOENT ? HANGAR_ENOTFOUND : HANGAR_EOS, 0, errno,
					errno == ENOENT ? "no image \"%s\" in the image store"
							: "image \"%s\": its record cannot be read",
					ref);
	if (!cJSON_IsString(digest) || strcmp(digest->valuestring + (strncmp(digest->valuestring, "sha256:", 7) ? 0 : 7),
					      hex) ||
	    (config && !cJSON_IsObject(config))) {
		cJSON_Delete(rec);
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": its record is not an image record of %s", ref,
					hex);
	}
	snprintf(out->digest, sizeof(out->digest), "sha256:%s", hex);
	r = take_layers(dir, ref, cJSON_GetObjectItemCaseSensitive(rec, "layers"), out);
	if (r == 0) {
		out->env = strv_of(cJSON_GetObjectItemCaseSensitive(config, "Env"));
		out->workdir = config_str(config, "WorkingDir");
		out->user = config_str(config, "User");
		if (!out->env || !out->workdir || !out->user)
			r = hangar_sys_error(HANGAR_EINVAL, 0, 0,
					     "image \"%s\": its config's Env, WorkingDir or User is not as the store writes it",
					     ref);
		else if (out->workdir[0] && out->workdir[0] != '/')
			r = hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": WorkingDir \"%s\" is not absolute", ref,
					     out->workdir);
	}
	for (char **e = out->env; r == 0 && e && *e; e++)
		if (!strchr(*e, '=') || **e == '=')
			r = hangar_sys_error(HANGAR_EINVAL, 0, 0, "image \"%s\": Env entry \"%s\" is not NAME=VALUE", ref, *e);
	cJSON_Delete(rec);
	return r;
}

/* The store, only when it is the caller's alone (it holds set-id files). Its descriptor, or an error set. */
static int open_store(const char *dir, const char *ref, int *images)
{
	char path[PATH_MAX];
	struct stat st;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return hangar_sys_error(errno == ENOENT ? HANGAR_ENOTFOUND : HANGAR_EOS, 0, errno,
					"no image \"%s\": the image store %s %s", ref, dir,
					errno == ENOENT ? "does not exist" : "cannot be opened");
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_IMAGE_DIR: %s must belong to uid %u and be writable by it alone", dir,
					(unsigned)geteuid());
	}
	snprintf(path, sizeof(path), "%s/images", dir);
	*images = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	close(fd);
	if (*images < 0)
		return hangar_sys_error(errno == ENOENT ? HANGAR_ENOTFOUND : HANGAR_EOS, 0, errno,
					"no image \"%s\" in the image store %s", ref, dir);
	return 0;
}

/* IMAGE_DIR/use/<hex>.lock, made when missing, held shared. 0, or an error set. */
static int lock_use(const char *dir, const char *hex, struct image_rootfs *out)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/use", dir);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return hangar_sys_error(HANGAR_EOS, 0, errno, "cannot create %s", path);
	snprintf(path, sizeof(path), "%s/use/%s.lock", dir, hex);
	out->use_path = strdup(path);
	if (!out->use_path)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	out->use_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out->use_fd < 0)
		return hangar_sys_error(HANGAR_EOS, 0, errno, "cannot open %s", path);
	/* A removal holds it exclusively for as long as it takes to remove: wait that long. */
	while (flock(out->use_fd, LOCK_SH) < 0)
		if (errno != EINTR)
			return hangar_sys_error(HANGAR_EOS, 0, errno, "cannot lock %s", path);
	return 0;
}

int image_rootfs_get(hangar_ctx *ctx, const char *ref, struct image_rootfs *out)
{
	char dir[PATH_MAX - 128], hex[HEX_LEN + 1];
	int images = -1, r;

	if (!out)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image_rootfs_get: out is NULL");
	memset(out, 0, sizeof(*out));
	out->use_fd = -1;
	if (!ref || !*ref || strlen(ref) > REF_MAX || !sjson_text_ok(ref, strlen(ref)))
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "an image reference is 1 to %d bytes of UTF-8", REF_MAX);
	r = image_dir(ctx, dir, sizeof(dir));
	if (r == 0)
		r = open_store(dir, ref, &images);
	if (r == 0)
		r = find(images, ref, hex);
	/* Locked first, then read: what a removal took away meanwhile is not used. */
	if (r == 0)
		r = lock_use(dir, hex, out);
	if (r == 0)
		r = take_record(images, dir, ref, hex, out);
	if (images >= 0)
		close(images);
	if (r < 0)
		image_rootfs_release(out);
	return r;
}

void image_rootfs_release(struct image_rootfs *r)
{
	if (!r)
		return;
	strv_free(r->layers);
	strv_free(r->env);
	free(r->workdir);
	free(r->user);
	free(r->use_path);
	if (r->use_fd >= 0)
		close(r->use_fd);
	memset(r, 0, sizeof(*r));
	r->use_fd = -1;
}

/* The name of uid in a passwd text, into buf. 0, or -1 when none. */
static int name_of_uid(const char *text, const char *uid, char *buf, size_t size)
{
	size_t ulen = strlen(uid);

	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n'), *c1, *c2, *c3;

		if (!end)
			end = line + strlen(line);
		c1 = memchr(line, ':', (size_t)(end - line));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
		c3 = c2 ? memchr(c2 + 1, ':', (size_t)(end - c2 - 1)) : NULL;
		if (c3 && (size_t)(c3 - c2 - 1) == ulen && !strncmp(c2 + 1, uid, ulen) && (size_t)(c1 - line) < size &&
		    c1 > line) {
			snprintf(buf, size, "%.*s", (int)(c1 - line), line);
			return 0;
		}
		line = *end ? end + 1 : end;
	}
	return -1;
}

/* layer/etc/passwd, a regular file reached through no link; NULL when none. */
static char *layer_passwd(const char *layer)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int dir = open(layer, O_PATH | O_DIRECTORY | O_CLOEXEC), fd;
	char *text;

	if (dir < 0)
		return NULL;
	fd = (int)syscall(SYS_openat2, dir, "etc", &how, sizeof(how));
	close(dir);
	if (fd < 0)
		return NULL;
	text = read_at(fd, "passwd", RECORD_MAX);
	close(fd);
	return text;
}

int image_rootfs_subids(unsigned *need)
{
	struct img_subids ids;

	*need = 2 * IMG_SUBIDS_SLOT;
	return img_subids_image(&ids) == 0;
}

int image_rootfs_check_owners(const struct image_rootfs *r)
{
	struct img_subids ids;
	struct stat st;

	if (img_subids_image(&ids) < 0)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_CONFIG, "uid %u has no image range of subordinate ids",
			    (unsigned)geteuid());
	for (char **l = r->layers; *l; l++) {
		if (stat(*l, &st) < 0)
			return herr_os(HANGAR_EOS, errno, "cannot read layer %s", *l);
		if (st.st_uid < ids.uid || st.st_uid - ids.uid >= ids.count || st.st_gid < ids.gid ||
		    st.st_gid - ids.gid >= ids.count)
			return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_CONFIG,
				    "image %s: layer %s is owned by %u:%u, outside uid %u's image range (%u:%u, gids "
				    "%u:%u): it was stored before that range was the caller's; remove the image "
				    "(`hangar image rm`) and import or pull it again",
				    r->digest, *l, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)geteuid(), ids.uid,
				    ids.count, ids.gid, ids.count);
	}
	return 0;
}

int image_rootfs_user_name(const struct image_rootfs *r, char *buf, size_t size)
{
	size_t n = strcspn(r->user ? r->user : "", ":"), count = 0;
	char uid[16];

	buf[0] = '\0';
	if (!r->user || !n)
		return 0;
	if (n >= size || n >= 256)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image %s: User \"%s\" is too long", r->digest, r->user);
	if (strspn(r->user, "0123456789") < n) {
		snprintf(buf, size, "%.*s", (int)n, r->user);
		return 0;
	}
	if (n >= sizeof(uid))
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image %s: User \"%s\" is not a uid", r->digest, r->user);
	snprintf(uid, sizeof(uid), "%.*s", (int)n, r->user);
	while (r->layers[count])
		count++;
	/* The topmost layer that has a passwd file is the one the sandbox sees. */
	while (count-- > 0) {
		char *text = layer_passwd(r->layers[count]);
		int found;

		if (!text)
			continue;
		found = name_of_uid(text, uid, buf, size) == 0;
		free(text);
		if (found)
			return 0;
		break;
	}
	/* The sandbox's own root and user, which the jail adds where the image lacks them. */
	if (!strcmp(uid, "0") || !strcmp(uid, "1000")) {
		snprintf(buf, size, "%s", strcmp(uid, "0") ? "user" : "root");
		return 0;
	}
	return hangar_sys_error(HANGAR_EINVAL, 0, 0, "image %s: User \"%s\": uid %s has no entry in its /etc/passwd",
				r->digest, r->user, uid);
}
