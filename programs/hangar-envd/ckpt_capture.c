/*
 * The capture child (ckpt.h): selects what a workspace keeps and writes it
 * as a pax tar compressed with zstd level 1 onto the data pipe.
 *
 * Two passes over names, one over data. The first collects every path to
 * keep (git's list, or a walk) and checks the user may read each of them,
 * so a file the user cannot read, a directory they cannot list or a failed
 * git fails the request with a status and the path named, before the body
 * starts: a checkpoint that silently lacks a file is worse than none. The
 * paths are then sorted, which puts every directory before what it holds,
 * and the second pass opens each one again, component by component without
 * following a symbolic link, and streams it. Memory grows with the number
 * of paths kept, never with their contents.
 *
 * What changes between the passes is taken as it is in the second: a path
 * gone by then is left out; a file that shrinks or grows while read is cut
 * or padded to the size in its header.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "ckpt.h"

#define READ_CHUNK (128 * 1024)
#define STAGING_PREFIX ".hangar-restore-"

struct capture {
	const struct ckpt_capture_args *a;
	struct ckpt_note note;
	int ws;                       /* the workspace directory */
	struct hbuf names;            /* kept paths, each NUL-terminated */
	size_t *offs;                 /* where each starts in names */
	size_t n, cap;
	/* the open directories along the current path (pass two) */
	struct hbuf cur;              /* their path, "" for the workspace */
	int *fds;
	size_t *ends;                 /* cur's length at each level */
	size_t depth, depth_cap;
	struct archive *ar;
	struct archive_entry *entry;
	char *buf;
};

static int fail(struct capture *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct capture *c, int status, const char *fmt, ...)
{
	char msg[sizeof(c->note.message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ckpt_fail(&c->note, status, "%s", msg);
}

static const char *q(const char *name, char *buf, size_t max)
{
	ckpt_quote_name(name, buf, max);
	return buf;
}

#define QNAME(name) q((name), qbuf, sizeof(qbuf))

/* The top-level names a capture never keeps. */
static int excluded_top(const char *name)
{
	return strncmp(name, STAGING_PREFIX, sizeof(STAGING_PREFIX) - 1) == 0;
}

static int add_path(struct capture *c, const char *rel, size_t len)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 1024;
		size_t *o = realloc(c->offs, cap * sizeof(*o));

		if (!o)
			return fail(c, 500, "out of memory");
		c->offs = o;
		c->cap = cap;
	}
	c->offs[c->n] = c->names.len;
	if (hbuf_put(&c->names, rel, len) < 0 || hbuf_put(&c->names, "", 1) < 0)
		return fail(c, 500, "out of memory");
	c->n++;
	return 0;
}

/* ---- pass one: what to keep ---------------------------------------------- */

/* Adds everything under the directory dfd (taken) whose path is path. */
static int walk(struct capture *c, int dfd, struct hbuf *path)
{
	DIR *d = fdopendir(dfd);
	size_t base = path->len;
	struct dirent *de;
	char qbuf[512];
	int rc = 0;

	if (!d) {
		close(dfd);
		return fail(c, 500, "cannot read directory '%s': %s", QNAME(path->data), strerror(errno));
	}
	while (rc == 0) {
		struct stat st;
		const char *name;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				rc = fail(c, 500, "cannot read directory '%s': %s", QNAME(base ? path->data : "."),
					  strerror(errno));
			break;
		}
		name = de->d_name;
		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || (base == 0 && excluded_top(name)))
			continue;
		path->len = base;
		if ((base && hbuf_put(path, "/", 1) < 0) || hbuf_puts(path, name) < 0) {
			rc = fail(c, 500, "out of memory");
			break;
		}
		if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = fail(c, errno == EACCES ? 403 : 500, "cannot read '%s': %s", QNAME(path->data),
					  strerror(errno));
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				if (errno == EACCES || errno == EPERM)
					rc = fail(c, 403, "permission denied: user '%s' cannot read directory '%s'",
						  c->a->user->name, QNAME(path->data));
				else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
					rc = fail(c, 500, "cannot open directory '%s': %s", QNAME(path->data),
						  strerror(errno));
				continue;
			}
			rc = add_path(c, path->data, path->len);
			if (rc == 0)
				rc = walk(c, sub, path);
			else
				close(sub);
		} else if (S_ISREG(st.st_mode)) {
			if (faccessat(dirfd(d), name, R_OK, 0) < 0 && errno != ENOENT) {
				rc = fail(c, errno == EACCES ? 403 : 500, "permission denied: user '%s' cannot read '%s'",
					  c->a->user->name, QNAME(path->data));
				continue;
			}
			rc = add_path(c, path->data, path->len);
		} else if (S_ISLNK(st.st_mode)) {
			rc = add_path(c, path->data, path->len);
		}
		/* Devices, FIFOs and sockets are never kept. */
	}
	path->len = base;
	if (path->data)
		path->data[base] = '\0';
	closedir(d);
	return rc;
}

/* ---- the directory stack -------------------------------------------------- */

static void stack_pop(struct capture *c)
{
	c->depth--;
	close(c->fds[c->depth]);
	c->cur.len = c->depth ? c->ends[c->depth - 1] : 0;
	c->cur.data[c->cur.len] = '\0';
}

/*
 * The directory holding rel, opened component by component from the
 * workspace without following a symbolic link. Returns a descriptor owned
 * by the stack (the workspace's when rel has no '/'), or -errno.
 */
static int open_parent(struct capture *c, const char *rel)
{
	const char *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash - rel) : 0;
	size_t common = 0;

	/* Keep the levels that are a prefix of rel's directory. */
	while (c->depth > 0) {
		size_t l = c->cur.len;

		if (l <= dlen && memcmp(c->cur.data, rel, l) == 0 && (l == dlen || rel[l] == '/'))
			break;
		stack_pop(c);
	}
	common = c->cur.len;
	while (common < dlen) {
		size_t start = common ? common + 1 : 0;
		const char *e = memchr(rel + start, '/', dlen - start);
		size_t end = e ? (size_t)(e - rel) : dlen;
		char comp[NAME_MAX + 1];
		int parent = c->depth ? c->fds[c->depth - 1] : c->ws;
		int fd;

		if (end - start > NAME_MAX || end == start)
			return -ENAMETOOLONG;
		memcpy(comp, rel + start, end - start);
		comp[end - start] = '\0';
		fd = openat(parent, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (c->depth == c->depth_cap) {
			size_t cap = c->depth_cap ? c->depth_cap * 2 : 32;
			int *f = realloc(c->fds, cap * sizeof(*f));
			size_t *en;

			if (f)
				c->fds = f;
			en = f ? realloc(c->ends, cap * sizeof(*en)) : NULL;
			if (!en) {
				close(fd);
				return -ENOMEM;
			}
			c->ends = en;
			c->depth_cap = cap;
		}
		if (hbuf_put(&c->cur, rel + c->cur.len, end - c->cur.len) < 0) {
			close(fd);
			return -ENOMEM;
		}
		c->fds[c->depth] = fd;
		c->ends[c->depth] = end;
		c->depth++;
		common = end;
	}
	return c->depth ? c->fds[c->depth - 1] : c->ws;
}

static const char *base_of(const char *rel)
{
	const char *s = strrchr(rel, '/');

	return s ? s + 1 : rel;
}

/* ---- pass one with git ----------------------------------------------------- */

static char *find_git(char **envp)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	char buf[PATH_MAX];

	for (char **e = envp; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			path = *e + 5;
	while (*path) {
		size_t n = strcspn(path, ":");
		int len = snprintf(buf, sizeof(buf), "%.*s/git", (int)n, path);
		struct stat st;

		if (n > 0 && path[0] == '/' && len > 0 && (size_t)len < sizeof(buf) && stat(buf, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return strdup(buf);
		path += n + (path[n] == ':');
	}
	return NULL;
}

/*
 * Runs git ls-files in the workspace and collects its NUL-separated output
 * in out. Its own configuration cannot make it run a program here
 * (fsmonitor off), and the workspace counts as safe whoever owns it: the
 * capture runs as the request user, who may read it.
 */
static int git_list(struct capture *c, const char *git, struct hbuf *out)
{
	int o[2] = { -1, -1 }, e[2] = { -1, -1 };
	char errbuf[512];
	size_t errlen = 0;
	int status = 0, o_open = 1, e_open = 1;
	pid_t pid;
	char *argv[] = { "git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*", "-C", (char *)c->a->path,
			 "ls-files", "-z", "--cached", "--others", "--exclude-standard", NULL };

	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) {
		if (o[0] >= 0) {
			close(o[0]);
			close(o[1]);
		}
		return fail(c, 500, "cannot run git: %s", strerror(errno));
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (null < 0 || dup2(null, 0) < 0 || dup2(o[1], 1) < 0 || dup2(e[1], 2) < 0)
			_exit(127);
		execve(git, argv, c->a->envp);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	if (pid < 0) {
		close(o[0]);
		close(e[0]);
		return fail(c, 500, "cannot run git: %s", strerror(errno));
	}
	while (o_open || e_open) {
		struct pollfd p[2] = { { .fd = o_open ? o[0] : -1, .events = POLLIN },
				       { .fd = e_open ? e[0] : -1, .events = POLLIN } };
		char tmp[65536];
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents) {
			n = read(o[0], tmp, sizeof(tmp));
			if (n > 0 && hbuf_put(out, tmp, (size_t)n) < 0) {
				fail(c, 500, "out of memory");
				break;
			}
			if (n == 0 || (n < 0 && errno != EINTR))
				o_open = 0;
		}
		if (p[1].revents) {
			n = read(e[0], tmp, sizeof(tmp));
			if (n > 0) {
				/* Keep the start: git says what went wrong first. */
				size_t take = (size_t)n < sizeof(errbuf) - 1 - errlen ? (size_t)n : sizeof(errbuf) - 1 - errlen;

				memcpy(errbuf + errlen, tmp, take);
				errlen += take;
			}
			if (n == 0 || (n < 0 && errno != EINTR))
				e_open = 0;
		}
	}
	close(o[0]);
	close(e[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (c->note.status && c->note.status != 200)
		return -1;
	errbuf[errlen] = '\0';
	while (errlen > 0 && (errbuf[errlen - 1] == '\n' || errbuf[errlen - 1] == ' '))
		errbuf[--errlen] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return fail(c, 500, "git ls-files failed in '%s' (status %d): %s", c->a->path,
			    WIFEXITED(status) ? WEXITSTATUS(status) : -1, errbuf);
	return 0;
}

/* Adds one path git listed (and, with walk, all under it when a directory). */
static int add_listed(struct capture *c, const char *rel, struct hbuf *path)
{
	struct stat st;
	char qbuf[512];
	int pfd = open_parent(c, rel);
	const char *base = base_of(rel);

	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
		return 0; /* gone, or no longer under a directory */
	if (pfd == -EACCES || pfd == -EPERM)
		return fail(c, 403, "permission denied: user '%s' cannot reach '%s'", c->a->user->name, QNAME(rel));
	if (pfd < 0)
		return fail(c, 500, "cannot reach '%s': %s", QNAME(rel), strerror(-pfd));
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0; /* a tracked file deleted in the work tree */
		return fail(c, errno == EACCES ? 403 : 500, "cannot read '%s': %s", QNAME(rel), strerror(errno));
	}
	if (S_ISREG(st.st_mode)) {
		if (faccessat(pfd, base, R_OK, 0) < 0 && errno != ENOENT)
			return fail(c, errno == EACCES ? 403 : 500, "permission denied: user '%s' cannot read '%s'",
				    c->a->user->name, QNAME(rel));
		return add_path(c, rel, strlen(rel));
	}
	if (S_ISLNK(st.st_mode))
		return add_path(c, rel, strlen(rel));
	if (S_ISDIR(st.st_mode)) {
		/* A submodule or a nested repository: kept whole. */
		int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			return errno == ENOENT ? 0
			       : fail(c, errno == EACCES ? 403 : 500, "cannot read directory '%s': %s", QNAME(rel),
				      strerror(errno));
		if (add_path(c, rel, strlen(rel)) < 0) {
			close(fd);
			return -1;
		}
		hbuf_clear(path);
		if (hbuf_puts(path, rel) < 0) {
			close(fd);
			return fail(c, 500, "out of memory");
		}
		return walk(c, fd, path);
	}
	return 0;
}

/* A safe relative name from git: no empty, "." or ".." component. */
static int plain_relative(const char *rel)
{
	if (rel[0] == '/' || !rel[0])
		return 0;
	for (const char *s = rel; *s;) {
		size_t n = strcspn(s, "/");

		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return 0;
		s += n + (s[n] == '/');
	}
	return 1;
}

static int select_git(struct capture *c, const char *git)
{
	struct hbuf out = HBUF_INIT, path = HBUF_INIT, lastdir = HBUF_INIT;
	int fd, rc;

	rc = git_list(c, git, &out);
	/* .git whole, then what git lists. */
	fd = rc == 0 ? openat(c->ws, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (rc == 0) {
		rc = add_path(c, ".git", 4);
		if (rc == 0 && fd >= 0 && hbuf_puts(&path, ".git") == 0)
			rc = walk(c, fd, &path);
		else if (fd >= 0)
			close(fd);
	}
	for (size_t off = 0; rc == 0 && off < out.len;) {
		char *rel = out.data + off;
		size_t len = strlen(rel);
		char *slash;

		off += len + 1;
		while (len > 0 && rel[len - 1] == '/')
			rel[--len] = '\0'; /* "dir/": a nested repository */
		if (!plain_relative(rel))
			continue;
		if (excluded_top(rel) || (strncmp(rel, ".git", 4) == 0 && (rel[4] == '\0' || rel[4] == '/')))
			continue;
		/* Its directories, once per run of paths in the same one. */
		slash = strrchr(rel, '/');
		if (slash && ((size_t)(slash - rel) != lastdir.len || memcmp(lastdir.data, rel, lastdir.len) != 0)) {
			for (char *s = strchr(rel, '/'); s && rc == 0; s = strchr(s + 1, '/'))
				rc = add_path(c, rel, (size_t)(s - rel));
			hbuf_clear(&lastdir);
			if (hbuf_put(&lastdir, rel, (size_t)(slash - rel)) < 0)
				rc = fail(c, 500, "out of memory");
		}
		if (rc == 0)
			rc = add_listed(c, rel, &path);
	}
	hbuf_free(&out);
	hbuf_free(&path);
	hbuf_free(&lastdir);
	return rc;
}

static int select_all(struct capture *c)
{
	struct hbuf path = HBUF_INIT;
	int fd = openat(c->ws, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return fail(c, 500, "cannot read '%s': %s", c->a->path, strerror(errno));
	if (hbuf_puts(&path, "") < 0) {
		close(fd);
		return fail(c, 500, "out of memory");
	}
	rc = walk(c, fd, &path);
	hbuf_free(&path);
	return rc;
}

static int cmp_names(const void *x, const void *y, void *names)
{
	return strcmp((const char *)names + *(const size_t *)x, (const char *)names + *(const size_t *)y);
}

/* Sorted and without repeats: a directory now comes before what it holds. */
static void sort_unique(struct capture *c)
{
	size_t k = 0;

	if (c->n == 0)
		return; /* an empty selection: no array to sort (qsort_r wants one) */
	qsort_r(c->offs, c->n, sizeof(*c->offs), cmp_names, c->names.data);
	for (size_t i = 0; i < c->n; i++)
		if (k == 0 || strcmp(c->names.data + c->offs[k - 1], c->names.data + c->offs[i]) != 0)
			c->offs[k++] = c->offs[i];
	c->n = k;
}

/* ---- pass two: the stream -------------------------------------------------- */

static int write_header(struct capture *c, const char *rel, const struct stat *st, const char *target)
{
	struct archive_entry *e = c->entry;
	char qbuf[512];
	int r;

	archive_entry_clear(e);
	if (S_ISDIR(st->st_mode)) {
		char *name = malloc(strlen(rel) + 2);

		if (!name)
			return fail(c, 500, "out of memory");
		sprintf(name, "%s/", rel);
		archive_entry_copy_pathname(e, name);
		free(name);
		archive_entry_set_filetype(e, AE_IFDIR);
	} else if (S_ISLNK(st->st_mode)) {
		archive_entry_copy_pathname(e, rel);
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_copy_symlink(e, target);
	} else {
		archive_entry_copy_pathname(e, rel);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_size(e, st->st_size);
	}
	archive_entry_set_perm(e, st->st_mode & 0777);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	r = archive_write_header(c->ar, e);
	if (r < ARCHIVE_WARN)
		return fail(c, 500, "cannot write the header of '%s': %s", QNAME(rel), archive_error_string(c->ar));
	return 0;
}

static int stream_file(struct capture *c, const char *rel, int pfd)
{
	const char *base = base_of(rel);
	char qbuf[512];
	struct stat st;
	off_t left;
	int fd = openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == ENXIO || errno == ENOTDIR)
			return 0; /* gone or no longer a file */
		return fail(c, errno == EACCES ? 403 : 500, "cannot open '%s': %s", QNAME(rel), strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (write_header(c, rel, &st, NULL) < 0) {
		close(fd);
		return -1;
	}
	for (left = st.st_size; left > 0;) {
		ssize_t n = read(fd, c->buf, left < READ_CHUNK ? (size_t)left : READ_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return fail(c, 500, "read error in '%s': %s", QNAME(rel), strerror(errno));
		}
		if (n == 0)
			break; /* shrank: the rest is padded */
		if (archive_write_data(c->ar, c->buf, (size_t)n) < 0) {
			close(fd);
			return fail(c, 500, "cannot write '%s': %s", QNAME(rel), archive_error_string(c->ar));
		}
		left -= n;
	}
	close(fd);
	if (archive_write_finish_entry(c->ar) < ARCHIVE_WARN)
		return fail(c, 500, "cannot write '%s': %s", QNAME(rel), archive_error_string(c->ar));
	return 0;
}

static int stream_one(struct capture *c, const char *rel)
{
	char qbuf[512], target[PATH_MAX + 1];
	struct stat st;
	int pfd = open_parent(c, rel);
	const char *base = base_of(rel);
	ssize_t n;

	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
		return 0;
	if (pfd < 0)
		return fail(c, pfd == -EACCES ? 403 : 500, "cannot reach '%s': %s", QNAME(rel), strerror(-pfd));
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return fail(c, 500, "cannot read '%s': %s", QNAME(rel), strerror(errno));
	}
	if (S_ISREG(st.st_mode))
		return stream_file(c, rel, pfd);
	if (S_ISDIR(st.st_mode))
		return write_header(c, rel, &st, NULL);
	if (!S_ISLNK(st.st_mode))
		return 0;
	n = readlinkat(pfd, base, target, sizeof(target));
	if (n < 0)
		return errno == ENOENT || errno == EINVAL ? 0
		       : fail(c, 500, "cannot read the link '%s': %s", QNAME(rel), strerror(errno));
	if ((size_t)n >= sizeof(target))
		return fail(c, 500, "the target of the link '%s' is too long", QNAME(rel));
	target[n] = '\0';
	return write_header(c, rel, &st, target);
}

static int open_writer(struct capture *c)
{
	c->ar = archive_write_new();
	c->entry = archive_entry_new();
	c->buf = malloc(READ_CHUNK);
	if (!c->ar || !c->entry || !c->buf)
		return fail(c, 500, "out of memory");
	if (archive_write_set_format_pax_restricted(c->ar) != ARCHIVE_OK ||
	    archive_write_add_filter_zstd(c->ar) != ARCHIVE_OK ||
	    archive_write_set_filter_option(c->ar, "zstd", "compression-level", "1") != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(c->ar, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(c->ar, c->a->data_fd) != ARCHIVE_OK)
		return fail(c, 500, "cannot set up the archive writer: %s", archive_error_string(c->ar));
	return 0;
}

int ckpt_capture_child(const struct ckpt_capture_args *a)
{
	struct capture c = { .a = a, .ws = -1 };
	char *git = NULL;
	int rc = 0, use_git = 0;
	struct stat st;

	/* Names are read and written as UTF-8 in pax headers. */
	setlocale(LC_CTYPE, "C.UTF-8");
	c.ws = open(a->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c.ws < 0) {
		int e = errno;

		if (e == ENOENT)
			rc = fail(&c, 404, "path '%s' does not exist", a->path);
		else if (e == ENOTDIR)
			rc = fail(&c, 400, "path '%s' is not a directory", a->path);
		else if (e == EACCES || e == EPERM)
			rc = fail(&c, 403, "permission denied: user '%s' cannot read '%s'", a->user->name, a->path);
		else
			rc = fail(&c, 500, "cannot open '%s': %s", a->path, strerror(e));
	}
	if (rc == 0 && !a->select_all && fstatat(c.ws, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    (git = find_git(a->envp)) != NULL)
		use_git = 1;
	if (rc == 0)
		rc = use_git ? select_git(&c, git) : select_all(&c);
	free(git);
	if (rc == 0) {
		sort_unique(&c);
		rc = open_writer(&c);
	}
	if (rc < 0) {
		ckpt_note_send(a->note_fd, &c.note);
		return 1;
	}
	c.note.status = 200;
	snprintf(c.note.selection, sizeof(c.note.selection), "%s", use_git ? "git" : "all");
	ckpt_note_send(a->note_fd, &c.note);

	for (size_t i = 0; rc == 0 && i < c.n; i++)
		rc = stream_one(&c, c.names.data + c.offs[i]);
	if (rc == 0 && archive_write_close(c.ar) != ARCHIVE_OK)
		rc = fail(&c, 500, "cannot finish the archive: %s", archive_error_string(c.ar));
	if (rc < 0) {
		ckpt_note_send(a->note_fd, &c.note);
		return 1;
	}
	/* The child exits now: the kernel frees the rest. */
	archive_write_free(c.ar);
	return 0;
}
