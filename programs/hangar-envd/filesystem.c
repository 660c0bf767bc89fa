/*
 * The envd protocol's filesystem.Filesystem service: Stat, ListDir,
 * MakeDir, Move and Remove; the watch RPCs live in watch.c, EntryInfo in
 * entry.c.
 *
 * Unlike upstream, which does all of it as root, every method runs with the
 * request user's file credentials (creds.h): the user can see, make, move
 * and remove exactly what they could from a shell, and a link planted in
 * the sandbox leads nowhere the user could not go. A refusal by the kernel
 * is permission_denied.
 */
#define _GNU_SOURCE
#include "envd.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "creds.h"
#include "entry.h"
#include "pjson.h"
#include "request.h"
#include "watch.h"

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

/*
 * ListDir walks iteratively with its own stack of open directory listings:
 * handlers run on 256 KiB connection-thread stacks, and a recursion per
 * level would not survive a deep tree.
 */
struct walk_frame {
	struct dirent **names;  /* scandir result, in name order */
	int n;
	int next;
	char *real;             /* the directory on disk */
	char *rel;              /* its path below the listed directory ("" at the top) */
	uint32_t level;         /* depth of its entries (1 = direct children) */
};

struct walk {
	const char *shown;      /* the directory as requested, for EntryInfo.path */
	uint32_t depth;
	cJSON *entries;
	struct rpc_error *err;
	struct walk_frame *frames;
	size_t nframes;
	size_t capframes;
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

/* Opens a directory listing on top of the stack. Takes real and rel. */
static int walk_push(struct walk *w, char *real, char *rel, uint32_t level)
{
	struct walk_frame *f;
	struct dirent **names;
	int n;

	n = scandir(real, &names, skip_dots, name_order);
	if (n < 0) {
		int e = errno;

		free(real);
		free(rel);
		/* Vanished since its parent was read, or closed to the user: its
		 * entry is listed, its contents are not. */
		if ((e == ENOENT || e == EACCES) && level > 1)
			return 0;
		return rpc_fail(w->err, envd_fs_code(e), "error reading directory: %s", strerror(e));
	}
	if (w->nframes == w->capframes) {
		size_t cap = w->capframes ? w->capframes * 2 : 8;

		f = realloc(w->frames, cap * sizeof(*f));
		if (!f) {
			while (n--)
				free(names[n]);
			free(names);
			free(real);
			free(rel);
			return rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
		}
		w->frames = f;
		w->capframes = cap;
	}
	w->frames[w->nframes++] = (struct walk_frame){
		.names = names, .n = n, .real = real, .rel = rel, .level = level,
	};
	return 0;
}

static void walk_pop(struct walk *w)
{
	struct walk_frame *f = &w->frames[--w->nframes];

	for (int i = f->next; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
	free(f->real);
	free(f->rel);
}

/* One directory entry: record it, then descend when it is a real directory. */
static int walk_entry(struct walk *w, const struct walk_frame *f, const char *name)
{
	char *real = NULL, *rel = NULL, *shown = NULL;
	struct stat st;
	cJSON *e;
	int rc = 0;

	if (asprintf(&real, "%s/%s", f->real, name) < 0)
		real = NULL;
	if (asprintf(&rel, "%s%s%s", f->rel, *f->rel ? "/" : "", name) < 0)
		rel = NULL;
	if (asprintf(&shown, "%s/%s", w->shown, rel ? rel : "") < 0)
		shown = NULL;
	if (!real || !rel || !shown) {
		rc = rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
		goto out;
	}
	if (lstat(real, &st) < 0) {
		if (errno != ENOENT) /* else it vanished since the directory was read */
			rc = rpc_fail(w->err, envd_fs_code(errno), "error reading directory: lstat %s: %s", real,
				      strerror(errno));
		goto out;
	}
	envd_clean_path(shown);
	e = envd_entry_from_stat(real, &st);
	if (!e) {
		rc = rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
		goto out;
	}
	cJSON_ReplaceItemInObject(e, "path", cJSON_CreateString(shown));
	cJSON_AddItemToArray(w->entries, e);
	if (S_ISDIR(st.st_mode) && f->level < w->depth) {
		rc = walk_push(w, real, rel, f->level + 1); /* f is stale from here on */
		real = rel = NULL;
	}
out:
	free(real);
	free(rel);
	free(shown);
	return rc;
}

/* Pre-order, each directory's entries in name order, like Go's WalkDir. */
static int walk_tree(struct walk *w, const char *top)
{
	char *real = strdup(top), *rel = strdup("");
	int rc;

	if (!real || !rel) {
		free(real);
		free(rel);
		return rpc_fail(w->err, CONNECT_INTERNAL, "out of memory");
	}
	rc = walk_push(w, real, rel, 1);
	while (rc == 0 && w->nframes) {
		struct walk_frame *f = &w->frames[w->nframes - 1];
		struct dirent *de;

		if (f->next == f->n) {
			walk_pop(w);
			continue;
		}
		de = f->names[f->next++];
		rc = walk_entry(w, f, de->d_name);
		free(de);
	}
	while (w->nframes)
		walk_pop(w);
	free(w->frames);
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
		return rpc_fail(err, envd_fs_code(errno), "error resolving symlink: %s", strerror(errno));
	}
	if (stat(real, &st) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "directory not found: %s", path);
		return rpc_fail(err, envd_fs_code(errno), "error getting file info: %s", strerror(errno));
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
	rc = walk_tree(&w, real);
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
		return rpc_fail(err, envd_fs_code(errno), "error getting file info: stat %s: %s", path,
				strerror(errno));
	rc = envd_ensure_dirs(path);
	if (rc < 0)
		return rpc_fail(err, envd_fs_code(-rc), "error making directory %s: %s", path,
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
		return rpc_fail(err, envd_fs_code(errno), "error getting source file info: %s", strerror(errno));
	}
	parent_dir(dst, parent, sizeof(parent));
	rc = envd_ensure_dirs(parent);
	if (rc < 0)
		return rpc_fail(err, envd_fs_code(-rc), "error ensuring directories %s: %s", parent,
				rc == -ENOTDIR ? "path is a file" : strerror(-rc));
	if (rename(src, dst) < 0) {
		if (errno == ENOENT)
			return rpc_fail(err, CONNECT_NOT_FOUND, "source file not found: rename %s %s: %s", src,
					dst, strerror(errno));
		return rpc_fail(err, envd_fs_code(errno), "error renaming: rename %s %s: %s", src, dst,
				strerror(errno));
	}
	return entry_response(dst, out, err);
}

/* ---- Remove ------------------------------------------------------------- */

/* One open directory of a removal, and its name in the one above. */
struct rm_frame {
	DIR *d;
	char *name; /* NULL for the top */
};

static int rm_push(struct rm_frame **st, size_t *n, size_t *cap, int fd, const char *name)
{
	struct rm_frame f = { .d = fdopendir(fd), .name = name ? strdup(name) : NULL };

	if (!f.d || (name && !f.name)) {
		int e = f.d ? ENOMEM : errno;

		if (f.d)
			closedir(f.d);
		else
			close(fd);
		free(f.name);
		return -e;
	}
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		struct rm_frame *p = realloc(*st, c * sizeof(*p));

		if (!p) {
			closedir(f.d);
			free(f.name);
			return -ENOMEM;
		}
		*st = p;
		*cap = c;
	}
	(*st)[(*n)++] = f;
	return 0;
}

/*
 * Empties the directory open on fd (which it takes). Works on descriptors
 * with O_NOFOLLOW all the way down, so a symlink swapped in mid-walk is
 * unlinked, never followed out of the tree. Iterative, with the open
 * directories on the heap: connection threads have small stacks.
 */
static int remove_contents(int fd)
{
	struct rm_frame *st = NULL;
	size_t n = 0, cap = 0;
	int rc = rm_push(&st, &n, &cap, fd, NULL);

	while (rc == 0 && n) {
		struct rm_frame *top = &st[n - 1];
		struct dirent *de;
		int sub;

		errno = 0;
		de = readdir(top->d);
		if (!de) {
			char *name = top->name;

			if (errno) {
				rc = -errno;
				break;
			}
			closedir(top->d);
			n--;
			if (n && unlinkat(dirfd(st[n - 1].d), name, AT_REMOVEDIR) < 0 && errno != ENOENT)
				rc = -errno;
			free(name);
			continue;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* d_type may be DT_UNKNOWN or stale: EISDIR says "try it as a directory". */
		if (de->d_type != DT_DIR) {
			if (unlinkat(dirfd(top->d), de->d_name, 0) == 0 || errno == ENOENT)
				continue;
			if (errno != EISDIR) {
				rc = -errno;
				break;
			}
		}
		sub = openat(dirfd(top->d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 && (errno == ENOTDIR || errno == ELOOP)) {
			/* Replaced by a non-directory since readdir: just unlink that. */
			if (unlinkat(dirfd(top->d), de->d_name, 0) == 0 || errno == ENOENT)
				continue;
		}
		if (sub < 0) {
			if (errno == ENOENT)
				continue;
			rc = -errno;
			break;
		}
		rc = rm_push(&st, &n, &cap, sub, de->d_name);
	}
	while (n) {
		closedir(st[n - 1].d);
		free(st[n - 1].name);
		n--;
	}
	free(st);
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
		return rpc_fail(err, envd_fs_code(-rc), "error removing file or directory %s: %s", path,
				strerror(-rc));
	*out = cJSON_CreateObject();
	return 0;
}

/* ---- the service -------------------------------------------------------- */

static int as_user(struct envd_req *r, struct envd_creds *saved, struct rpc_error *err)
{
	int rc = envd_creds_enter(&r->user, saved);

	if (rc < 0)
		return rpc_fail(err, rc == -EPERM ? CONNECT_PERMISSION_DENIED : CONNECT_INTERNAL,
				"cannot act as user '%s': %s", r->user.name, strerror(-rc));
	return 0;
}

static int unary_as_user(rpc_unary_fn fn, struct envd_req *r, const cJSON *in, cJSON **out,
			 struct rpc_error *err)
{
	struct envd_creds saved;
	int rc;

	if (as_user(r, &saved, err))
		return (int)err->code;
	rc = fn(r, in, out, err);
	envd_creds_leave(&saved);
	return rc;
}

/* A watch started here inherits the credentials: its thread is created inside the scope. */
static int stream_as_user(rpc_stream_fn fn, struct envd_req *r, const cJSON *in, struct envd_stream *s,
			  struct rpc_error *err)
{
	struct envd_creds saved;
	int rc;

	if (as_user(r, &saved, err))
		return (int)err->code;
	rc = fn(r, in, s, err);
	envd_creds_leave(&saved);
	return rc;
}

#define AS_USER_UNARY(fn)                                                                          \
	static int fn##_as_user(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err) \
	{                                                                                          \
		return unary_as_user(fn, r, in, out, err);                                         \
	}

AS_USER_UNARY(fs_stat)
AS_USER_UNARY(fs_list_dir)
AS_USER_UNARY(fs_make_dir)
AS_USER_UNARY(fs_move)
AS_USER_UNARY(fs_remove)
AS_USER_UNARY(watch_rpc_create)
AS_USER_UNARY(watch_rpc_get_events)
AS_USER_UNARY(watch_rpc_remove)

static int watch_dir_as_user(struct envd_req *r, const cJSON *in, struct envd_stream *s, struct rpc_error *err)
{
	return stream_as_user(watch_rpc_watch_dir, r, in, s, err);
}

const struct rpc_method filesystem_methods[] = {
	{ "/filesystem.Filesystem/Stat", fs_stat_as_user, NULL },
	{ "/filesystem.Filesystem/ListDir", fs_list_dir_as_user, NULL },
	{ "/filesystem.Filesystem/MakeDir", fs_make_dir_as_user, NULL },
	{ "/filesystem.Filesystem/Move", fs_move_as_user, NULL },
	{ "/filesystem.Filesystem/Remove", fs_remove_as_user, NULL },
	{ "/filesystem.Filesystem/WatchDir", NULL, watch_dir_as_user },
	{ "/filesystem.Filesystem/CreateWatcher", watch_rpc_create_as_user, NULL },
	{ "/filesystem.Filesystem/GetWatcherEvents", watch_rpc_get_events_as_user, NULL },
	{ "/filesystem.Filesystem/RemoveWatcher", watch_rpc_remove_as_user, NULL },
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
