/*
 * The filesystem.Filesystem service (BEHAVIOUR.md §7): EntryInfo, Stat,
 * ListDir, MakeDir, Move and Remove. The watch RPCs live in watch.c.
 *
 * envd runs as root and the run-as user only decides how paths resolve and
 * who owns what is created; no permission checks are made as that user.
 */
#define _GNU_SOURCE
#include "envd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pjson.h"
#include "watch.h"

/* ---- EntryInfo ---------------------------------------------------------- */

/*
 * Go's FileMode.String(): one letter per type or special bit, in the order
 * of "dalTLDpSugct?" ('-' when there is none), then the nine rwx bits. Only
 * the letters a Linux stat can produce are reachable here.
 */
static void mode_string(mode_t m, char out[24])
{
	size_t w = 0;
	static const char rwx[] = "rwxrwxrwx";

	switch (m & S_IFMT) {
	case S_IFDIR:
		out[w++] = 'd';
		break;
	case S_IFLNK:
		out[w++] = 'L';
		break;
	case S_IFBLK:
		out[w++] = 'D';
		break;
	case S_IFCHR:
		out[w++] = 'D';
		break;
	case S_IFIFO:
		out[w++] = 'p';
		break;
	case S_IFSOCK:
		out[w++] = 'S';
		break;
	}
	if (m & S_ISUID)
		out[w++] = 'u';
	if (m & S_ISGID)
		out[w++] = 'g';
	if (S_ISCHR(m))
		out[w++] = 'c';
	if (m & S_ISVTX)
		out[w++] = 't';
	if (w == 0)
		out[w++] = '-';
	for (int i = 0; i < 9; i++)
		out[w++] = (m & (1u << (8 - i))) ? rwx[i] : '-';
	out[w] = '\0';
}

/* The user or group name for an id, or the id in decimal when unknown. */
static void id_name(int is_group, unsigned id, char *out, size_t outsz)
{
	size_t bufsz = 4096;

	for (int tries = 0; tries < 6; tries++, bufsz *= 4) {
		char *buf = malloc(bufsz);
		int rc, found = 0;

		if (!buf)
			break;
		if (is_group) {
			struct group gr, *res = NULL;

			rc = getgrgid_r((gid_t)id, &gr, buf, bufsz, &res);
			if (rc == 0 && res) {
				snprintf(out, outsz, "%s", res->gr_name);
				found = 1;
			}
		} else {
			struct passwd pw, *res = NULL;

			rc = getpwuid_r((uid_t)id, &pw, buf, bufsz, &res);
			if (rc == 0 && res) {
				snprintf(out, outsz, "%s", res->pw_name);
				found = 1;
			}
		}
		free(buf);
		if (found)
			return;
		/* Only a too-small buffer is worth another try. */
		if (rc != ERANGE)
			break;
	}
	snprintf(out, outsz, "%u", id);
}

/* Like Go's filepath.Base: the last element, trailing slashes ignored. */
static void base_name(const char *path, char *out, size_t outsz)
{
	size_t end = strlen(path), start;

	while (end > 1 && path[end - 1] == '/')
		end--;
	if (end == 1 && path[0] == '/') {
		snprintf(out, outsz, "/");
		return;
	}
	start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	snprintf(out, outsz, "%.*s", (int)(end - start), path + start);
}

/* Type and permission bits as upstream reports them: a symlink takes both
 * from its final target, and a dangling one has neither. */
static void entry_type(const char *path, const struct stat *lst, const char **type, unsigned *mode)
{
	struct stat st;
	const struct stat *eff = lst;

	*type = NULL;
	*mode = 0;
	if (S_ISLNK(lst->st_mode)) {
		if (stat(path, &st) < 0)
			return;
		eff = &st;
	}
	if (S_ISREG(eff->st_mode))
		*type = "FILE_TYPE_FILE";
	else if (S_ISDIR(eff->st_mode))
		*type = "FILE_TYPE_DIRECTORY";
	*mode = (unsigned)(eff->st_mode & 0777);
}

/* EntryInfo from an lstat result; path is what the client sees. */
static cJSON *entry_from_stat(const char *path, const struct stat *lst)
{
	cJSON *e = cJSON_CreateObject();
	char name[NAME_MAX + 2], perms[24], owner[64], group[64], ts[40];
	const char *type;
	unsigned mode;
	cJSON *meta;

	if (!e)
		return NULL;
	base_name(path, name, sizeof(name));
	entry_type(path, lst, &type, &mode);
	mode_string(lst->st_mode, perms);
	id_name(0, lst->st_uid, owner, sizeof(owner));
	id_name(1, lst->st_gid, group, sizeof(group));

	cJSON_AddStringToObject(e, "name", name);
	if (type)
		cJSON_AddStringToObject(e, "type", type);
	cJSON_AddStringToObject(e, "path", path);
	pjson_add_int64(e, "size", (int64_t)lst->st_size);
	if (mode)
		cJSON_AddNumberToObject(e, "mode", mode);
	cJSON_AddStringToObject(e, "permissions", perms);
	cJSON_AddStringToObject(e, "owner", owner);
	cJSON_AddStringToObject(e, "group", group);
	if (lst->st_mtim.tv_sec || lst->st_mtim.tv_nsec) {
		pjson_format_timestamp(ts, (int64_t)lst->st_mtim.tv_sec, lst->st_mtim.tv_nsec);
		cJSON_AddStringToObject(e, "modifiedTime", ts);
	}
	if (S_ISLNK(lst->st_mode)) {
		char *target = realpath(path, NULL);

		cJSON_AddStringToObject(e, "symlinkTarget", target ? target : path);
		free(target);
	}
	meta = envd_metadata_read(path);
	if (meta)
		cJSON_AddItemToObject(e, "metadata", meta);
	return e;
}

cJSON *envd_entry_info(const char *path, struct rpc_error *err)
{
	struct stat st;
	cJSON *e;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			rpc_fail(err, CONNECT_NOT_FOUND, "file not found: lstat %s: %s", path, strerror(errno));
		else
			rpc_fail(err, CONNECT_INTERNAL, "error getting file info: lstat %s: %s", path,
				 strerror(errno));
		return NULL;
	}
	e = entry_from_stat(path, &st);
	if (!e)
		rpc_fail(err, CONNECT_INTERNAL, "out of memory");
	return e;
}

/* ---- request helpers ---------------------------------------------------- */

/* Reads a string field and resolves it as a path for the request's user. */
static int req_path(struct envd_req *r, const cJSON *in, const char *field, char *out, size_t outsz,
		    struct rpc_error *err)
{
	const char *p = "";

	if (pjson_string(in, field, NULL, &p) < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid %s: expected a string", field);
	return envd_resolve_path(&r->user, p, out, outsz, err) < 0 ? (int)err->code : 0;
}

/* Wraps an entry as {"entry":…}. */
static int entry_response(const char *path, cJSON **out, struct rpc_error *err)
{
	cJSON *e = envd_entry_info(path, err);

	if (!e)
		return (int)err->code;
	*out = cJSON_CreateObject();
	if (!*out) {
		cJSON_Delete(e);
		return rpc_fail(err, CONNECT_INTERNAL, "out of memory");
	}
	cJSON_AddItemToObject(*out, "entry", e);
	return 0;
}

/* ---- Stat --------------------------------------------------------------- */

static int fs_stat(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	char path[PATH_MAX];

	if (req_path(r, in, "path", path, sizeof(path), err))
		return (int)err->code;
	return entry_response(path, out, err);
}

/* ---- ListDir ------------------------------------------------------------ */

struct walk {
	const char *shown;      /* the directory as requested, for EntryInfo.path */
	uint32_t depth;
	cJSON *entries;
	struct rpc_error *err;
};

/* Go's byte-wise order, independent of the locale. */
static int name_order(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_dots(const struct dirent *d)
{
	return strcmp(d->d_name, ".") != 0 && strcmp(d->d_name, "..") != 0;
}

/*
 * Lexically cleans an absolute path in place, as Go's filepath.Clean. Each
 * kept element is written as "/name" at out, which never passes in, so
 * nothing is overwritten before it has been read.
 */
void fs_clean_abs(char *p)
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

static int walk_dir(struct walk *w, const char *real, const char *rel, uint32_t level);

/* One directory entry: record it, then descend when it is a real directory. */
static int walk_entry(struct walk *w, const char *real, const char *rel, uint32_t level)
{
	struct stat st;
	char shown[PATH_MAX];
	cJSON *e;

	if (lstat(real, &st) < 0) {
		if (errno == ENOENT)
			return 0; /* vanished since the directory was read */
		return rpc_fail(w->err, CONNECT_INTERNAL, "error reading directory: lstat %s: %s", real,
				strerror(errno));
	}
	if (snprintf(shown, sizeof(shown), "%s/%s", w->shown, rel) >= (int)sizeof(shown))
		return rpc_fail(w->err, CONNECT_INTERNAL, "path too long: %s/%s", w->shown, rel);
	fs_clean_abs(shown);
	e = entry_from_stat(real, &st);
	if (!e)
		return rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
	cJSON_ReplaceItemInObject(e, "path", cJSON_CreateString(shown));
	cJSON_AddItemToArray(w->entries, e);
	if (S_ISDIR(st.st_mode) && level < w->depth)
		return walk_dir(w, real, rel, level + 1);
	return 0;
}

/* Lists real (relative name rel, "" for the top) in lexical order. */
static int walk_dir(struct walk *w, const char *real, const char *rel, uint32_t level)
{
	struct dirent **names;
	int n, rc = 0;

	n = scandir(real, &names, skip_dots, name_order);
	if (n < 0) {
		if (errno == ENOENT && *rel)
			return 0;
		return rpc_fail(w->err, CONNECT_INTERNAL, "error reading directory %s: %s", real, strerror(errno));
	}
	for (int i = 0; i < n; i++) {
		char *child_real = NULL, *child_rel = NULL;

		if (rc == 0) {
			if (asprintf(&child_real, "%s/%s", real, names[i]->d_name) < 0)
				child_real = NULL;
			if (asprintf(&child_rel, "%s%s%s", rel, *rel ? "/" : "", names[i]->d_name) < 0)
				child_rel = NULL;
			if (child_real && child_rel)
				rc = walk_entry(w, child_real, child_rel, level);
			else
				rc = rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
		}
		free(child_real);
		free(child_rel);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* The directory a ListDir walks: the path with every symlink resolved. */
static int list_dir_target(const char *path, char *real, struct rpc_error *err)
{
	struct stat st;

	if (!realpath(path, real)) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "path %s does not exist", path);
		if (errno == ELOOP)
			return rpc_fail(err, CONNECT_FAILED_PRECONDITION,
					"cyclic symlink or chain >255 links at \"%s\"", path);
		if (errno == ENOTDIR)
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "path is not a directory: %s", path);
		return rpc_fail(err, CONNECT_INTERNAL, "error resolving symlink: %s", strerror(errno));
	}
	if (stat(real, &st) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "directory not found: %s", path);
		return rpc_fail(err, CONNECT_INTERNAL, "error getting file info: %s", strerror(errno));
	}
	if (!S_ISDIR(st.st_mode))
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "path is not a directory: %s", path);
	return 0;
}

static int fs_list_dir(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	char path[PATH_MAX], real[PATH_MAX];
	struct walk w = { .err = err, .depth = 0 };
	int rc;

	if (pjson_uint32(in, "depth", NULL, &w.depth) < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid depth");
	if (w.depth == 0)
		w.depth = 1;
	if (req_path(r, in, "path", path, sizeof(path), err) || list_dir_target(path, real, err))
		return (int)err->code;
	w.shown = path;
	w.entries = cJSON_CreateArray();
	if (!w.entries)
		return rpc_fail(err, CONNECT_INTERNAL, "out of memory");
	rc = walk_dir(&w, real, "", 1);
	if (rc) {
		cJSON_Delete(w.entries);
		return rc;
	}
	*out = cJSON_CreateObject();
	if (cJSON_GetArraySize(w.entries) > 0)
		cJSON_AddItemToObject(*out, "entries", w.entries);
	else
		cJSON_Delete(w.entries);
	return 0;
}

/* ---- MakeDir ------------------------------------------------------------ */

static int fs_make_dir(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	if (req_path(r, in, "path", path, sizeof(path), err))
		return (int)err->code;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return rpc_fail(err, CONNECT_ALREADY_EXISTS, "directory already exists: %s", path);
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT,
				"path already exists but it is not a directory: %s", path);
	}
	if (errno != ENOENT)
		return rpc_fail(err, CONNECT_INTERNAL, "error getting file info: stat %s: %s", path, strerror(errno));
	rc = envd_ensure_dirs(&r->user, path);
	if (rc < 0)
		return rpc_fail(err, CONNECT_INTERNAL, "error making directory %s: %s", path,
				rc == -ENOTDIR ? "path is a file" : strerror(-rc));
	return entry_response(path, out, err);
}

/* ---- Move --------------------------------------------------------------- */

/* The parent directory of an absolute path ("/" for top-level names). */
static void parent_dir(const char *path, char *out, size_t outsz)
{
	size_t end = strlen(path);

	while (end > 1 && path[end - 1] == '/')
		end--;
	while (end > 0 && path[end - 1] != '/')
		end--;
	while (end > 1 && path[end - 1] == '/')
		end--;
	snprintf(out, outsz, "%.*s", (int)(end ? end : 1), end ? path : "/");
}

static int fs_move(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	char src[PATH_MAX], dst[PATH_MAX], parent[PATH_MAX];
	struct stat st;
	int rc;

	if (req_path(r, in, "source", src, sizeof(src), err) ||
	    req_path(r, in, "destination", dst, sizeof(dst), err))
		return (int)err->code;
	/* lstat, not stat: a dangling symlink is still something that can move. */
	if (lstat(src, &st) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "source file not found: lstat %s: %s", src,
					strerror(errno));
		return rpc_fail(err, CONNECT_INTERNAL, "error getting source file info: %s", strerror(errno));
	}
	parent_dir(dst, parent, sizeof(parent));
	rc = envd_ensure_dirs(&r->user, parent);
	if (rc < 0)
		return rpc_fail(err, CONNECT_INTERNAL, "error ensuring directories %s: %s", parent,
				rc == -ENOTDIR ? "path is a file" : strerror(-rc));
	if (rename(src, dst) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "source file not found: rename %s %s: %s", src,
					dst, strerror(errno));
		return rpc_fail(err, CONNECT_INTERNAL, "error renaming: rename %s %s: %s", src, dst,
				strerror(errno));
	}
	return entry_response(dst, out, err);
}

/* ---- Remove ------------------------------------------------------------- */

/*
 * Empties the directory open on fd (which it closes). Works on descriptors
 * with O_NOFOLLOW all the way down, so a symlink swapped in mid-walk is
 * unlinked, never followed out of the tree.
 */
static int remove_contents(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		const char *name = de->d_name;
		int sub;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		/* d_type may be DT_UNKNOWN or stale: EISDIR says "try it as a directory". */
		if (de->d_type != DT_DIR) {
			if (unlinkat(dirfd(d), name, 0) == 0 || errno == ENOENT)
				continue;
			if (errno != EISDIR) {
				rc = -errno;
				break;
			}
		}
		sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 && (errno == ENOTDIR || errno == ELOOP)) {
			/* Replaced by a non-directory since readdir: just unlink that. */
			if (unlinkat(dirfd(d), name, 0) == 0 || errno == ENOENT)
				continue;
		}
		if (sub < 0) {
			if (errno == ENOENT)
				continue;
			rc = -errno;
			break;
		}
		rc = remove_contents(sub);
		if (rc == 0 && unlinkat(dirfd(d), name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = -errno;
		if (rc)
			break;
	}
	if (!de && errno && rc == 0)
		rc = -errno;
	closedir(d);
	return rc;
}

/* rm -rf: a missing path is success. */
static int remove_tree(const char *path)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = remove_contents(fd);
	if (rc == 0 && rmdir(path) < 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

static int fs_remove(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	char path[PATH_MAX];
	int rc;

	if (req_path(r, in, "path", path, sizeof(path), err))
		return (int)err->code;
	rc = remove_tree(path);
	if (rc < 0)
		return rpc_fail(err, CONNECT_INTERNAL, "error removing file or directory %s: %s", path,
				strerror(-rc));
	*out = cJSON_CreateObject();
	return 0;
}

/* ---- the service -------------------------------------------------------- */

const struct rpc_method filesystem_methods[] = {
	{ "/filesystem.Filesystem/Stat", fs_stat, NULL },
	{ "/filesystem.Filesystem/ListDir", fs_list_dir, NULL },
	{ "/filesystem.Filesystem/MakeDir", fs_make_dir, NULL },
	{ "/filesystem.Filesystem/Move", fs_move, NULL },
	{ "/filesystem.Filesystem/Remove", fs_remove, NULL },
	{ "/filesystem.Filesystem/WatchDir", NULL, watch_rpc_watch_dir },
	{ "/filesystem.Filesystem/CreateWatcher", watch_rpc_create, NULL },
	{ "/filesystem.Filesystem/GetWatcherEvents", watch_rpc_get_events, NULL },
	{ "/filesystem.Filesystem/RemoveWatcher", watch_rpc_remove, NULL },
	{ NULL, NULL, NULL },
};

int filesystem_service_init(void)
{
	return watch_service_init();
}

void filesystem_service_shutdown(void)
{
	watch_service_shutdown();
}
