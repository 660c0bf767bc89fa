/*
 * The restore child (ckpt.h): extracts a tar or tar.zst body into a fresh
 * staging directory inside the workspace, and moves it into place only when
 * the body ended cleanly (the daemon's go-ahead) and the archive reached its
 * end-of-archive marker. Any failure removes the staging directory and
 * leaves the workspace as it was.
 *
 * Every member is checked before it is written: a name that is empty,
 * absolute, too long or has a ".." component, a hard link, a device, FIFO
 * or socket, a set-user-ID or set-group-ID bit, or file capabilities are
 * refused with the member named. libarchive only reads the tar; the members
 * are written here, each from a directory descriptor opened component by
 * component from the staging directory with O_NOFOLLOW, so every write
 * stays inside the staging directory and off any symbolic link (a member
 * whose path goes through one is refused). Owners are never restored:
 * everything belongs to the request user, whom this process is.
 *
 * The body is decompressed here rather than by libarchive so the plain tar
 * stream can be seen: libarchive reports the end of an archive the same way
 * whether it met the end-of-archive marker or the input simply stopped
 * between two members, and only the bytes tell a truncated archive apart.
 */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "buf.h"
#include "ckpt.h"

#define CHUNK (256 * 1024)
/* The plain stream's last bytes: libarchive never reads more than a chunk
 * and a block past where it stops, so the end marker is always in here. */
#define RING (4 * CHUNK)
#define STAGING_PREFIX ".hangar-restore-"

struct dir_fix {
	size_t off;                   /* its path in fixnames */
	mode_t mode;
	struct timespec mtime;
};

struct restore {
	const struct ckpt_restore_args *a;
	struct ckpt_note note;
	int ws;
	int stage;                    /* -1 until created */
	char stage_name[32];
	ZSTD_DStream *z;
	unsigned char *in, *out;
	size_t in_len, in_pos;
	int in_eof, z_open, z_full;
	unsigned char *ring;
	uint64_t fed;                 /* plain bytes handed to libarchive */
	/* the open directories along the current member's path (extract) */
	struct hbuf cur;              /* their path, relative to the staging directory */
	int *fds;
	size_t *ends;                 /* cur's length at each level */
	size_t depth, depth_cap;
	/* directories whose mode and time are set at the end */
	struct hbuf fixnames;
	struct dir_fix *fix;
	size_t nfix, fixcap;
};

const char *ckpt_name_refusal(const char *name, const char **norm)
{
	const char *s;

	*norm = NULL;
	if (!name || !*name)
		return "the member has no name";
	if (strlen(name) > CKPT_MAX_NAME)
		return "the name is longer than 4096 bytes";
	if (name[0] == '/')
		return "absolute names are not accepted";
	while (name[0] == '.' && name[1] == '/') {
		name += 2;
		while (*name == '/')
			name++;
	}
	for (s = name; *s;) {
		size_t n = strcspn(s, "/");

		if (n == 2 && s[0] == '.' && s[1] == '.')
			return "names with a '..' component are not accepted";
		s += n;
		while (*s == '/')
			s++;
	}
	if (!*name || strcmp(name, ".") == 0)
		return NULL; /* the workspace itself */
	if (strncmp(name, STAGING_PREFIX, sizeof(STAGING_PREFIX) - 1) == 0)
		return "names starting with " STAGING_PREFIX " are reserved";
	*norm = name;
	return NULL;
}

static int fail(struct restore *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct restore *r, int status, const char *fmt, ...)
{
	char msg[sizeof(r->note.message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ckpt_fail(&r->note, status, "%s", msg);
}

/* ---- the body ------------------------------------------------------------- */

static void ring_put(struct restore *r, const unsigned char *p, size_t n)
{
	while (n > 0) {
		size_t at = (size_t)(r->fed % RING), k = RING - at < n ? RING - at : n;

		memcpy(r->ring + at, p, k);
		r->fed += k;
		p += k;
		n -= k;
	}
}

/* Whether the 512 plain bytes from start were all zero (and are still known). */
static int ring_zero_block(const struct restore *r, uint64_t start)
{
	if (r->fed < start + 512 || r->fed - start > RING)
		return 0;
	for (uint64_t i = start; i < start + 512; i++)
		if (r->ring[i % RING])
			return 0;
	return 1;
}

static ssize_t read_body(int fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n;
}

static la_ssize_t body_read(struct archive *ar, void *cls, const void **buf)
{
	struct restore *r = cls;
	ssize_t n;

	if (!r->a->zstd) {
		n = read_body(r->a->data_fd, r->out, CHUNK);
		if (n < 0) {
			archive_set_error(ar, errno, "cannot read the request body");
			return -1;
		}
		ring_put(r, r->out, (size_t)n);
		*buf = r->out;
		return n;
	}
	for (;;) {
		ZSTD_inBuffer ib;
		ZSTD_outBuffer ob = { r->out, CHUNK, 0 };
		size_t ret;

		if (r->in_pos == r->in_len && !r->z_full) {
			if (r->in_eof) {
				if (r->z_open) {
					archive_set_error(ar, EINVAL,
							  "the zstd stream ends inside a frame");
					return -1;
				}
				return 0;
			}
			n = read_body(r->a->data_fd, r->in, CHUNK);
			if (n < 0) {
				archive_set_error(ar, errno, "cannot read the request body");
				return -1;
			}
			r->in_eof = n == 0;
			r->in_len = (size_t)n;
			r->in_pos = 0;
			continue;
		}
		ib = (ZSTD_inBuffer){ r->in, r->in_len, r->in_pos };
		ret = ZSTD_decompressStream(r->z, &ob, &ib);
		r->in_pos = ib.pos;
		if (ZSTD_isError(ret)) {
			archive_set_error(ar, EINVAL, "invalid zstd data: %s",
					  ZSTD_getErrorName(ret));
			return -1;
		}
		r->z_open = ret != 0;
		r->z_full = ob.pos == ob.size;
		if (ob.pos > 0) {
			ring_put(r, r->out, ob.pos);
			*buf = r->out;
			return (la_ssize_t)ob.pos;
		}
	}
}

/* ---- removing and moving --------------------------------------------------- */

/* Removes name under dfd, a whole tree if a directory, never following a link. */
static int remove_tree(int dfd, const char *name)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	/* A read-only directory of one's own must open up to be emptied. */
	if ((st.st_mode & 0700) != 0700)
		fchmod(fd, (st.st_mode & 07777) | 0700);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d)) != NULL) {
		int e;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		e = remove_tree(dirfd(d), de->d_name);
		if (e < 0 && rc == 0)
			rc = e;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && rc == 0)
		rc = -errno;
	return rc;
}

/*
 * renameat, and for a directory without write permission for its owner,
 * which Linux requires to move a directory to another parent (its ".."
 * changes), the bit is lent for the move.
 */
static int move_entry(int src, const char *name, int dst)
{
	struct stat st;
	int e;

	if (renameat(src, name, dst, name) == 0)
		return 0;
	e = errno;
	if (e == EACCES && fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
	    !(st.st_mode & S_IWUSR) && fchmodat(src, name, (st.st_mode & 07777) | S_IWUSR, 0) == 0) {
		if (renameat(src, name, dst, name) == 0) {
			fchmodat(dst, name, st.st_mode & 07777, 0);
			return 0;
		}
		e = errno;
		fchmodat(src, name, st.st_mode & 07777, 0);
	}
	return -e;
}

/* The names in dfd (without "." and "..", and at the top level of the
 * workspace without staging areas), NUL-separated; their count, or -errno. */
static long list_names(int dfd, struct hbuf *out, int skip_staging)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	long n = 0;
	DIR *d;

	hbuf_clear(out);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (skip_staging && strncmp(de->d_name, STAGING_PREFIX, sizeof(STAGING_PREFIX) - 1) == 0))
			continue;
		if (hbuf_put(out, de->d_name, strlen(de->d_name) + 1) < 0) {
			closedir(d);
			return -ENOMEM;
		}
		n++;
	}
	n = errno ? -errno : n;
	closedir(d);
	return n;
}

static int status_for(int e)
{
	if (e == EACCES || e == EPERM)
		return 403;
	if (e == ENOSPC || e == EDQUOT)
		return 507;
	return 500;
}

static int commit_fail(struct restore *r, const char *what, const char *name, int e)
{
	char qbuf[512];

	ckpt_quote_name(name, qbuf, sizeof(qbuf));
	return fail(r, status_for(e), "%s '%s' in '%s': %s", what, qbuf, r->a->path, strerror(e));
}

/* Moves every name in names (count n) from src to dst; on failure the
 * ones moved go back. */
static int move_all(struct restore *r, int src, int dst, const struct hbuf *names, long n, const char *what)
{
	const char *p = names->data;
	long i;
	int e = 0;

	for (i = 0; i < n; i++, p += strlen(p) + 1) {
		e = move_entry(src, p, dst);
		if (e < 0)
			break;
	}
	if (i == n)
		return 0;
	commit_fail(r, what, p, -e);
	for (const char *q = names->data; i > 0; i--, q += strlen(q) + 1)
		move_entry(dst, q, src);
	return -1;
}

static int random_name(int dfd, char *out, size_t outsz)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

	for (int tries = 0; tries < 16; tries++) {
		unsigned char rnd[8];
		char suffix[9];

		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			return -EIO;
		for (size_t i = 0; i < sizeof(rnd); i++)
			suffix[i] = alphabet[rnd[i] % (sizeof(alphabet) - 1)];
		suffix[8] = '\0';
		snprintf(out, outsz, STAGING_PREFIX "%s", suffix);
		if (mkdirat(dfd, out, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* replace: the old entries go aside, the new ones in, then the old ones away;
 * a failed move puts everything back. */
static int commit_replace(struct restore *r)
{
	struct hbuf old = HBUF_INIT, fresh = HBUF_INIT;
	char trash_name[32];
	long nold, nnew;
	int trash = -1, rc = -1, e;

	nold = list_names(r->ws, &old, 1);
	nnew = nold < 0 ? 0 : list_names(r->stage, &fresh, 0);
	if (nold < 0 || nnew < 0) {
		fail(r, 500, "cannot list '%s': %s", r->a->path, strerror((int)-(nold < 0 ? nold : nnew)));
		goto out;
	}
	e = random_name(r->ws, trash_name, sizeof(trash_name));
	if (e < 0) {
		fail(r, status_for(-e), "cannot create a directory in '%s': %s", r->a->path, strerror(-e));
		goto out;
	}
	trash = openat(r->ws, trash_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (trash < 0) {
		fail(r, 500, "cannot open '%s': %s", trash_name, strerror(errno));
		unlinkat(r->ws, trash_name, AT_REMOVEDIR);
		goto out;
	}
	if (move_all(r, r->ws, trash, &old, nold, "cannot move aside") < 0) {
		remove_tree(r->ws, trash_name);
		goto out;
	}
	if (move_all(r, r->stage, r->ws, &fresh, nnew, "cannot move in") < 0) {
		const char *p = old.data;

		for (long i = 0; i < nold; i++, p += strlen(p) + 1)
			move_entry(trash, p, r->ws);
		remove_tree(r->ws, trash_name);
		goto out;
	}
	remove_tree(r->ws, trash_name); /* left over: the next restore removes it */
	rc = 0;
out:
	if (trash >= 0)
		close(trash);
	hbuf_free(&old);
	hbuf_free(&fresh);
	return rc;
}

/* merge: each entry of src moves over dst's; directories on both sides merge. */
static int merge_dir(struct restore *r, int src, int dst)
{
	struct hbuf names = HBUF_INIT;
	long n = list_names(src, &names, 0);
	const char *p = names.data;
	int rc = 0;

	if (n < 0) {
		hbuf_free(&names);
		return fail(r, 500, "cannot list the staging directory: %s", strerror((int)-n));
	}
	for (long i = 0; rc == 0 && i < n; i++, p += strlen(p) + 1) {
		struct stat sst, dstt;
		int e;

		if (fstatat(src, p, &sst, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (fstatat(dst, p, &dstt, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT) {
				rc = commit_fail(r, "cannot replace", p, errno);
				break;
			}
		} else if (S_ISDIR(sst.st_mode) && S_ISDIR(dstt.st_mode)) {
			int sfd = openat(src, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int dfd = sfd < 0 ? -1 : openat(dst, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sfd < 0 || dfd < 0) {
				rc = commit_fail(r, "cannot merge", p, errno);
				if (sfd >= 0)
					close(sfd);
				break;
			}
			/* Entries must be able to leave the one and enter the other. */
			fchmod(sfd, 0700);
			if ((dstt.st_mode & 0700) != 0700)
				fchmod(dfd, (dstt.st_mode & 07777) | 0700);
			rc = merge_dir(r, sfd, dfd);
			if (rc == 0) {
				struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, sst.st_mtim };

				fchmod(dfd, sst.st_mode & 0777);
				futimens(dfd, ts);
			}
			close(sfd);
			close(dfd);
			if (rc == 0 && unlinkat(src, p, AT_REMOVEDIR) < 0)
				rc = commit_fail(r, "cannot merge", p, errno);
			continue;
		} else if (S_ISDIR(dstt.st_mode)) {
			e = remove_tree(dst, p);
			if (e < 0) {
				rc = commit_fail(r, "cannot replace", p, -e);
				break;
			}
		} else if (S_ISDIR(sst.st_mode) && unlinkat(dst, p, 0) < 0 && errno != ENOENT) {
			rc = commit_fail(r, "cannot replace", p, errno);
			break;
		}
		e = move_entry(src, p, dst);
		if (e < 0)
			rc = commit_fail(r, "cannot move in", p, -e);
	}
	hbuf_free(&names);
	return rc;
}

/* ---- extraction ------------------------------------------------------------ */

static const char *kind_refusal(const struct archive_entry *e)
{
	if (archive_entry_hardlink((struct archive_entry *)e))
		return "hard links are not accepted";
	switch (archive_entry_filetype((struct archive_entry *)e)) {
	case AE_IFREG:
	case AE_IFDIR:
	case AE_IFLNK:
		break;
	case AE_IFCHR:
		return "character devices are not accepted";
	case AE_IFBLK:
		return "block devices are not accepted";
	case AE_IFIFO:
		return "FIFOs are not accepted";
	case AE_IFSOCK:
		return "sockets are not accepted";
	default:
		return "members of this kind are not accepted";
	}
	if (archive_entry_mode((struct archive_entry *)e) & (S_ISUID | S_ISGID))
		return "set-user-ID and set-group-ID bits are not accepted";
	return NULL;
}

static int has_capabilities(struct archive_entry *e)
{
	const char *name;
	const void *value;
	size_t size;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
		if (name && strcmp(name, "security.capability") == 0)
			return 1;
	return 0;
}

static int member_fail(struct restore *r, int status, const char *name, const char *why)
{
	char qbuf[512];

	ckpt_quote_name(name ? name : "", qbuf, sizeof(qbuf));
	return fail(r, status, "member \"%s\": %s", qbuf, why);
}

/* ---- writing members --------------------------------------------------------- */

/*
 * Members are written relative to the staging directory through a stack of
 * open directories, each opened from its parent without following a
 * symbolic link: nothing is ever written through a link, whatever the
 * archive made before, and consecutive members of one directory reuse its
 * descriptor rather than walking the path again.
 */

/* The name's components without empty and "." ones, joined by '/'. */
static int normalize(const char *name, struct hbuf *out)
{
	hbuf_clear(out);
	for (const char *s = name; *s;) {
		size_t n = strcspn(s, "/");

		if (n > 0 && !(n == 1 && s[0] == '.')) {
			if ((out->len && hbuf_put(out, "/", 1) < 0) || hbuf_put(out, s, n) < 0)
				return -1;
		}
		s += n;
		while (*s == '/')
			s++;
	}
	return hbuf_put(out, "", 1) < 0 ? -1 : (out->len--, 0);
}

static void stack_pop(struct restore *r)
{
	r->depth--;
	close(r->fds[r->depth]);
	r->cur.len = r->depth ? r->ends[r->depth - 1] : 0;
}

static void stack_clear(struct restore *r)
{
	while (r->depth)
		stack_pop(r);
}

/*
 * The directory holding rel (normalized), opened component by component
 * from the staging directory without following a link; a missing one is
 * created (mode 0755), as for an archive that leaves a parent out. Returns
 * a descriptor the stack owns, or -errno (-ENOTDIR: a component is a file
 * or a symbolic link).
 */
static int open_parent(struct restore *r, const char *rel)
{
	const char *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash - rel) : 0, common;

	while (r->depth > 0) {
		size_t l = r->cur.len;

		if (l <= dlen && memcmp(r->cur.data, rel, l) == 0 && (l == dlen || rel[l] == '/'))
			break;
		stack_pop(r);
	}
	common = r->cur.len;
	while (common < dlen) {
		size_t start = common ? common + 1 : 0;
		const char *e = memchr(rel + start, '/', dlen - start);
		size_t end = e ? (size_t)(e - rel) : dlen;
		char comp[NAME_MAX + 1];
		int parent = r->depth ? r->fds[r->depth - 1] : r->stage;
		int fd;

		if (end - start > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, rel + start, end - start);
		comp[end - start] = '\0';
		fd = openat(parent, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT) {
			if (mkdirat(parent, comp, 0755) < 0 && errno != EEXIST)
				return -errno;
			fd = openat(parent, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0)
			return errno == ELOOP ? -ENOTDIR : -errno;
		if (r->depth == r->depth_cap) {
			size_t cap = r->depth_cap ? r->depth_cap * 2 : 32;
			int *f = realloc(r->fds, cap * sizeof(*f));
			size_t *en;

			if (f)
				r->fds = f;
			en = f ? realloc(r->ends, cap * sizeof(*en)) : NULL;
			if (!en) {
				close(fd);
				return -ENOMEM;
			}
			r->ends = en;
			r->depth_cap = cap;
		}
		r->cur.len = common;
		if (hbuf_put(&r->cur, rel + common, end - common) < 0) {
			close(fd);
			return -ENOMEM;
		}
		r->fds[r->depth] = fd;
		r->ends[r->depth] = end;
		r->depth++;
		common = end;
	}
	return r->depth ? r->fds[r->depth - 1] : r->stage;
}

static int write_fail(struct restore *r, const char *name, int e)
{
	if (e == ENOSPC || e == EDQUOT)
		return member_fail(r, 507, name, "not enough disk space");
	if (e == ENOTDIR)
		return member_fail(r, 400, name, "its path goes through a symbolic link or a file");
	if (e == EIO || e == ENOMEM || e == EMFILE || e == ENFILE)
		return member_fail(r, 500, name, strerror(e));
	return member_fail(r, 400, name, strerror(e));
}

/* Makes room for a new entry base in pfd: an entry already there (an
 * archive may name a path twice) goes, unless it is a directory that is
 * not empty. 0 or -errno. */
static int clear_slot(int pfd, const char *base)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (unlinkat(pfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		return errno == ENOTEMPTY ? -EEXIST : -errno;
	return 0;
}

static int write_file(struct restore *r, struct archive *ar, struct archive_entry *e, int pfd, const char *base,
		      const char *name)
{
	const struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
					{ archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	mode_t perm = archive_entry_perm(e) & 0777;
	int64_t size = archive_entry_size(e), end = 0;
	int fd, err;

	fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm);
	if (fd < 0 && errno == EEXIST) {
		if ((err = clear_slot(pfd, base)) < 0)
			return write_fail(r, name, -err);
		fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, perm);
	}
	if (fd < 0)
		return write_fail(r, name, errno);
	for (;;) {
		const void *buf;
		size_t n;
		la_int64_t off;
		int rc = archive_read_data_block(ar, &buf, &n, &off);

		if (rc == ARCHIVE_EOF)
			break;
		if (rc < ARCHIVE_WARN) {
			close(fd);
			return member_fail(r, 400, name, archive_error_string(ar));
		}
		for (size_t done = 0; done < n;) {
			ssize_t w = pwrite(fd, (const char *)buf + done, n - done, off + (off_t)done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				err = w < 0 ? errno : EIO;
				close(fd);
				return write_fail(r, name, err);
			}
			done += (size_t)w;
		}
		if (off + (int64_t)n > end)
			end = off + (int64_t)n;
		r->note.bytes += (int64_t)n;
	}
	/* A sparse member's last hole. */
	if ((end < size && ftruncate(fd, size) < 0) || futimens(fd, ts) < 0) {
		err = errno;
		close(fd);
		return write_fail(r, name, err);
	}
	if (close(fd) < 0 && errno != EINTR)
		return write_fail(r, name, errno);
	return 0;
}

static int write_symlink(struct restore *r, struct archive_entry *e, int pfd, const char *base, const char *name)
{
	const struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT },
					{ archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	const char *target = archive_entry_symlink(e);
	int err;

	if (!target || !*target)
		return member_fail(r, 400, name, "a symbolic link without a target");
	if (symlinkat(target, pfd, base) < 0) {
		if (errno != EEXIST)
			return write_fail(r, name, errno);
		if ((err = clear_slot(pfd, base)) < 0)
			return write_fail(r, name, -err);
		if (symlinkat(target, pfd, base) < 0)
			return write_fail(r, name, errno);
	}
	utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
	return 0;
}

/* Directories are made 0700 and get their mode and time once everything
 * in them is written (finish_dirs). */
static int write_dir(struct restore *r, struct archive_entry *e, int pfd, const char *base, const char *rel,
		     const char *name)
{
	struct stat st;
	struct dir_fix *f;

	if (mkdirat(pfd, base, 0700) < 0) {
		if (errno != EEXIST)
			return write_fail(r, name, errno);
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return write_fail(r, name, errno);
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(pfd, base, 0) < 0 || mkdirat(pfd, base, 0700) < 0)
				return write_fail(r, name, errno);
		} else {
			fchmodat(pfd, base, 0700, 0);
		}
	}
	if (r->nfix == r->fixcap) {
		size_t cap = r->fixcap ? r->fixcap * 2 : 256;

		f = realloc(r->fix, cap * sizeof(*f));
		if (!f)
			return fail(r, 500, "out of memory");
		r->fix = f;
		r->fixcap = cap;
	}
	f = &r->fix[r->nfix];
	f->off = r->fixnames.len;
	f->mode = archive_entry_perm(e) & 0777;
	f->mtime.tv_sec = archive_entry_mtime(e);
	f->mtime.tv_nsec = archive_entry_mtime_nsec(e);
	if (hbuf_put(&r->fixnames, rel, strlen(rel) + 1) < 0)
		return fail(r, 500, "out of memory");
	r->nfix++;
	return 0;
}

static int cmp_fix_desc(const void *x, const void *y, void *names)
{
	const struct dir_fix *a = x, *b = y;

	return strcmp((const char *)names + b->off, (const char *)names + a->off);
}

/* Each directory's mode and time, deepest first, so a directory that
 * allows no writing is closed only once what it holds is in place. */
static int finish_dirs(struct restore *r)
{
	if (r->nfix)
		qsort_r(r->fix, r->nfix, sizeof(*r->fix), cmp_fix_desc, r->fixnames.data);
	stack_clear(r);
	for (size_t i = 0; i < r->nfix; i++) {
		const char *rel = r->fixnames.data + r->fix[i].off;
		const char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;
		const struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, r->fix[i].mtime };
		int pfd = open_parent(r, rel);
		struct stat st;

		if (pfd < 0)
			return write_fail(r, rel, -pfd);
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue; /* replaced by a later member */
		if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0 || fchmodat(pfd, base, r->fix[i].mode, 0) < 0)
			return write_fail(r, rel, errno);
	}
	stack_clear(r);
	return 0;
}

static int extract(struct restore *r)
{
	struct archive *ar = archive_read_new();
	struct archive_entry *e;
	struct hbuf rel = HBUF_INIT;
	char last[512] = "";
	long count = 0;
	int rc = 0;

	if (!ar || archive_read_support_format_tar(ar) != ARCHIVE_OK) {
		rc = fail(r, 500, "cannot set up extraction");
		goto out;
	}
	if (archive_read_open(ar, r, NULL, body_read, NULL) != ARCHIVE_OK) {
		rc = fail(r, 400, "not a tar archive: %s", archive_error_string(ar));
		goto out;
	}
	/* Modes come from the archive, not from the umask. */
	umask(0);
	for (;;) {
		const char *name, *norm, *why, *base;
		la_int64_t before;
		int h, pfd;

		if (count > 0 && archive_read_data_skip(ar) < ARCHIVE_WARN) {
			rc = member_fail(r, 400, last, archive_error_string(ar));
			break;
		}
		before = archive_filter_bytes(ar, 0);
		h = archive_read_next_header(ar, &e);
		if (h == ARCHIVE_EOF) {
			la_int64_t after = archive_filter_bytes(ar, 0);

			if (after - before < 512 || !ring_zero_block(r, (uint64_t)after - 512))
				rc = fail(r, 400, "the archive is truncated: it ends without an end-of-archive marker%s%s%s",
					  last[0] ? " (after member \"" : "", last, last[0] ? "\")" : "");
			break;
		}
		if (h < ARCHIVE_WARN) {
			if (count == 0)
				rc = fail(r, 400, "not a tar archive: %s", archive_error_string(ar));
			else
				rc = fail(r, 400, "the archive is damaged after member \"%s\": %s", last,
					  archive_error_string(ar));
			break;
		}
		if (++count > CKPT_MAX_MEMBERS) {
			rc = fail(r, 413, "the archive has more than %d members", CKPT_MAX_MEMBERS);
			break;
		}
		name = archive_entry_pathname(e);
		ckpt_quote_name(name ? name : "", last, sizeof(last));
		why = ckpt_name_refusal(name, &norm);
		if (!why)
			why = kind_refusal(e);
		if (!why && has_capabilities(e))
			why = "file capabilities are not accepted";
		if (why) {
			rc = member_fail(r, 400, name, why);
			break;
		}
		if (!norm)
			continue; /* "./": the workspace itself */
		if (normalize(norm, &rel) < 0) {
			rc = fail(r, 500, "out of memory");
			break;
		}
		if (rel.len == 0)
			continue;
		pfd = open_parent(r, rel.data);
		if (pfd < 0) {
			rc = write_fail(r, name, -pfd);
			break;
		}
		base = strrchr(rel.data, '/');
		base = base ? base + 1 : rel.data;
		switch (archive_entry_filetype(e)) {
		case AE_IFREG:
			r->note.files++;
			rc = write_file(r, ar, e, pfd, base, name);
			break;
		case AE_IFDIR:
			r->note.dirs++;
			rc = write_dir(r, e, pfd, base, rel.data, name);
			break;
		default:
			r->note.symlinks++;
			rc = write_symlink(r, e, pfd, base, name);
			break;
		}
		if (rc < 0)
			break;
	}
	if (rc == 0)
		rc = finish_dirs(r);
	umask(022);
out:
	stack_clear(r);
	hbuf_free(&rel);
	archive_read_free(ar);
	return rc;
}

/* ---- the child ------------------------------------------------------------- */

static int open_workspace(struct restore *r)
{
	const char *p = r->a->path;
	struct hbuf names = HBUF_INIT;
	long n;
	int e;

	r->ws = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->ws < 0) {
		e = errno;
		if (e == ENOENT)
			return fail(r, 404, "path '%s' does not exist", p);
		if (e == ENOTDIR)
			return fail(r, 400, "path '%s' is not a directory", p);
		if (e == EACCES || e == EPERM)
			return fail(r, 403, "permission denied: user '%s' cannot open '%s'", r->a->user->name, p);
		return fail(r, 500, "cannot open '%s': %s", p, strerror(e));
	}
	/* One restore at a time per workspace: the next one's clean-up below
	 * must not take a staging directory still in use. */
	while (flock(r->ws, LOCK_EX) < 0)
		if (errno != EINTR)
			return fail(r, 500, "cannot lock '%s': %s", p, strerror(errno));
	if (faccessat(r->ws, ".", W_OK | X_OK, 0) < 0)
		return fail(r, 403, "permission denied: user '%s' cannot write '%s'", r->a->user->name, p);
	/* Staging areas a crash left behind. */
	n = list_names(r->ws, &names, 0);
	for (const char *s = names.data; n > 0; n--, s += strlen(s) + 1)
		if (strncmp(s, STAGING_PREFIX, sizeof(STAGING_PREFIX) - 1) == 0)
			remove_tree(r->ws, s);
	hbuf_free(&names);
	e = random_name(r->ws, r->stage_name, sizeof(r->stage_name));
	if (e < 0)
		return fail(r, status_for(-e), "cannot create the staging directory in '%s': %s", p, strerror(-e));
	r->stage = openat(r->ws, r->stage_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r->stage < 0 || fchdir(r->stage) < 0)
		return fail(r, 500, "cannot enter the staging directory: %s", strerror(errno));
	return 0;
}

/* The body's end: the rest is read, then the daemon says whether it ended cleanly. */
static int body_ended_cleanly(struct restore *r)
{
	char c;

	while (read_body(r->a->data_fd, r->in, CHUNK) > 0)
		;
	return read_body(r->a->go_fd, &c, 1) == 1 && c == 'g';
}

int ckpt_restore_child(const struct ckpt_restore_args *a)
{
	struct restore r = { .a = a, .ws = -1, .stage = -1 };
	int rc;

	setlocale(LC_CTYPE, "C.UTF-8");
	r.in = malloc(CHUNK);
	r.out = malloc(CHUNK);
	r.ring = calloc(1, RING);
	r.z = a->zstd ? ZSTD_createDStream() : NULL;
	if (!r.in || !r.out || !r.ring || (a->zstd && (!r.z || ZSTD_isError(ZSTD_initDStream(r.z)))))
		rc = fail(&r, 500, "out of memory");
	else
		rc = open_workspace(&r);
	if (rc == 0)
		rc = extract(&r);
	if (rc == 0 && !body_ended_cleanly(&r))
		rc = fail(&r, 400, "the request body broke off");
	if (rc == 0)
		rc = a->merge ? merge_dir(&r, r.stage, r.ws) : commit_replace(&r);
	if (r.ws >= 0 && r.stage >= 0) {
		if (fchdir(r.ws) < 0)
			rc = fail(&r, 500, "cannot leave the staging directory: %s", strerror(errno));
		remove_tree(r.ws, r.stage_name);
	}
	if (rc == 0)
		r.note.status = 200;
	ckpt_note_send(a->note_fd, &r.note);
	return rc == 0 ? 0 : 1;
}
