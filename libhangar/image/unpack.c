/*
 * Unpacking one layer: a tar stream (plain, gzip or zstd, told by its first
 * bytes) written into an empty directory in overlayfs' format.
 *
 * The stream is decompressed here, not by libarchive, so that the bytes
 * libarchive parses are exactly the bytes hashed for the diff_id, the
 * trailing blocks after the tar's end included. libarchive parses the tar
 * only; nothing of its extraction code is used. Every write goes through
 * openat2() with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS from the layer's root, so no member, however it is
 * named, reaches outside the layer or through a symlink an earlier member
 * made; names are also normalised and refused first, so the message names
 * the member and the fault.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <zlib.h>
#include <zstd.h>

#include "image/img.h"

#define IN_CHUNK (128u << 10)
#define OUT_CHUNK (256u << 10)

int img_sniff_compression(const unsigned char *head, size_t n)
{
	if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b)
		return 1;
	if (n >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)
		return 2;
	return 0;
}

static const char *const compression_names[] = { "uncompressed", "gzip", "zstd" };

/* ---- the decompressing, hashing reader libarchive reads from ---------------------- */

struct reader {
	int fd;
	int kind;                        /* 0 none, 1 gzip, 2 zstd */
	unsigned char in[IN_CHUNK];
	size_t in_len, in_pos;
	int in_eof;
	unsigned char out[OUT_CHUNK];
	z_stream z;
	int z_live, z_end;
	ZSTD_DCtx *zd;
	int zstd_frame_done;
	crypto_hash_sha256_state sha;
	uint64_t raw_bytes, plain_bytes, reported;
	int err;                         /* an errno of the read, or EBADMSG for corrupt data */
	struct img_unpack *u;
	int canceled;
};

static int fill(struct reader *r)
{
	ssize_t n;

	if (r->in_pos < r->in_len || r->in_eof)
		return 0;
	do
		n = read(r->fd, r->in, sizeof(r->in));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		r->err = errno;
		return -1;
	}
	r->in_pos = 0;
	r->in_len = (size_t)n;
	r->in_eof = n == 0;
	r->raw_bytes += (uint64_t)n;
	if (r->u->progress && r->raw_bytes - r->reported >= (1u << 20)) {
		if (r->u->progress(r->raw_bytes - r->reported, r->u->payload)) {
			r->canceled = 1;
			return -1;
		}
		r->reported = r->raw_bytes;
	}
	return 0;
}

/* Produces the next plain bytes into r->out; the count, 0 at the end, -1 on an error. */
static ssize_t produce(struct reader *r)
{
	for (;;) {
		if (fill(r) < 0)
			return -1;
		if (r->kind == 0) {
			size_t n = r->in_len - r->in_pos;

			if (!n)
				return 0;
			memcpy(r->out, r->in + r->in_pos, n);
			r->in_pos += n;
			return (ssize_t)n;
		}
		if (r->kind == 1) {
			int zr;

			if (r->z_end) {
				/* gzip may be several members back to back (RFC 1952). */
				if (r->in_pos == r->in_len && r->in_eof)
					return 0;
				if (r->in_pos == r->in_len)
					continue;
				if (inflateReset(&r->z) != Z_OK) {
					r->err = EBADMSG;
					return -1;
				}
				r->z_end = 0;
			}
			r->z.next_in = r->in + r->in_pos;
			r->z.avail_in = (uInt)(r->in_len - r->in_pos);
			r->z.next_out = r->out;
			r->z.avail_out = sizeof(r->out);
			zr = inflate(&r->z, Z_NO_FLUSH);
			r->in_pos = r->in_len - r->z.avail_in;
			if (zr == Z_STREAM_END)
				r->z_end = 1;
			else if (zr != Z_OK && zr != Z_BUF_ERROR) {
				r->err = EBADMSG;
				return -1;
			}
			if (sizeof(r->out) - r->z.avail_out)
				return (ssize_t)(sizeof(r->out) - r->z.avail_out);
			if (r->in_eof && r->in_pos == r->in_len) {
				if (!r->z_end) {
					r->err = EBADMSG; /* cut short */
					return -1;
				}
				return 0;
			}
			continue;
		}
		{
			ZSTD_inBuffer in = { r->in + r->in_pos, r->in_len - r->in_pos, 0 };
			ZSTD_outBuffer out = { r->out, sizeof(r->out), 0 };
			size_t zr;

			if (in.size == 0 && r->in_eof) {
				if (!r->zstd_frame_done) {
					r->err = EBADMSG;
					return -1;
				}
				return 0;
			}
			zr = ZSTD_decompressStream(r->zd, &out, &in);
			r->in_pos += in.pos;
			if (ZSTD_isError(zr)) {
				r->err = EBADMSG;
				return -1;
			}
			r->zstd_frame_done = zr == 0;
			if (out.pos)
				return (ssize_t)out.pos;
		}
	}
}

static la_ssize_t reader_read(struct archive *a, void *payload, const void **buf)
{
	struct reader *r = payload;
	ssize_t n = produce(r);

	(void)a;
	if (n < 0)
		return -1;
	crypto_hash_sha256_update(&r->sha, r->out, (unsigned long long)n);
	r->plain_bytes += (uint64_t)n;
	*buf = r->out;
	return n;
}

/* ---- writing beneath the root -------------------------------------------------------- */

static int beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

struct dir_meta {
	char *path;
	size_t seq;                  /* the order it came in: the last of one path wins */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec mtime;
};

/*
 * The paths of regular files this layer wrote, which hard links may name:
 * a hash set (open addressing, FNV-1a), so a layer of many links is not
 * quadratic.
 */
struct nameset {
	char **slot;
	size_t n, cap;               /* cap: a power of two, at most half full */
};

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

static int nameset_has(const struct nameset *s, const char *name)
{
	if (!s->cap)
		return 0;
	for (size_t i = name_hash(name) & (s->cap - 1); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (!strcmp(s->slot[i], name))
			return 1;
	return 0;
}

static int nameset_put(char **slot, size_t cap, char *name)
{
	size_t i = name_hash(name) & (cap - 1);

	while (slot[i]) {
		if (!strcmp(slot[i], name))
			return 0;
		i = (i + 1) & (cap - 1);
	}
	slot[i] = name;
	return 1;
}

static int nameset_add(struct nameset *s, const char *name)
{
	char *copy;

	if (nameset_has(s, name))
		return 0;
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		char **slot = calloc(cap, sizeof(char *));

		if (!slot)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i])
				nameset_put(slot, cap, s->slot[i]);
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	if (!(copy = strdup(name)))
		return -1;
	s->n += (size_t)nameset_put(s->slot, s->cap, copy);
	return 0;
}

static void nameset_free(struct nameset *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i]);
	free(s->slot);
}

struct unpack {
	struct img_unpack *u;
	int rootfd;
	int root_user;               /* we are root: owners as the tar says */
	int trusted;                 /* host root: trusted.* xattrs too (not in a user namespace) */
	const int *canceled;         /* the reader's: a read that failed because the caller canceled */
	struct dir_meta *dirs;
	size_t n_dirs, cap_dirs;
	struct nameset files;
	char member[IMG_MAX_NAME + 1];   /* the member at work, for messages */
};

static void quote_member(struct unpack *x, const char *name)
{
	img_quote(x->member, sizeof(x->member), name);
}

static int refuse(struct unpack *x, const char *why)
{
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s: member \"%s\" is refused: %s", x->u->blob_name,
		    x->member, why);
}

static int os_fail(struct unpack *x, int e, const char *what)
{
	if (e == ELOOP || e == EXDEV)
		return refuse(x, "it would be written through a symlink or outside the layer");
	return herr_os(HANGAR_EOS, e, "layer %s: member \"%s\": cannot %s", x->u->blob_name, x->member, what);
}

/*
 * Opens the parent directory of rel beneath the root, one component at a
 * time, making missing ones (0755; a later member may set their metadata).
 * A component that is a symlink fails with ELOOP: nothing is written
 * through one.
 */
static int open_parent(struct unpack *x, const char *rel, const char **base)
{
	char comp[IMG_MAX_NAME + 1];
	const char *p = rel, *slash;
	int d = dup(x->rootfd);

	if (d < 0)
		return -errno;
	while ((slash = strchr(p, '/')) != NULL) {
		size_t n = (size_t)(slash - p);
		int nd;

		memcpy(comp, p, n);
		comp[n] = '\0';
		nd = beneath(d, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
		if (nd == -ENOENT) {
			if (mkdirat(d, comp, 0755) < 0 && errno != EEXIST) {
				nd = -errno;
				close(d);
				return nd;
			}
			nd = beneath(d, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0);
		}
		if (nd == -ENOTDIR) {
			struct stat st;

			/* An earlier member's symlink: nothing is written through it. */
			if (fstatat(d, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				nd = -ELOOP;
		}
		close(d);
		if (nd < 0)
			return nd;
		d = nd;
		p = slash + 1;
	}
	*base = p;
	return d;
}

/* Removes what a later member replaces (not a directory it may reuse). */
static int clear_name(struct unpack *x, int pfd, const char *base, int keep_dir)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : os_fail(x, errno, "look at it");
	if (S_ISDIR(st.st_mode)) {
		if (keep_dir)
			return 1;
		if (img_rmtree(pfd, base) < 0)
			return os_fail(x, errno, "replace the directory");
		return 0;
	}
	if (unlinkat(pfd, base, 0) < 0)
		return os_fail(x, errno, "replace it");
	return 0;
}

static int set_owner_mode_times(struct unpack *x, int fd, struct archive_entry *e)
{
	struct timespec ts[2];

	if (x->root_user && fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0)
		return os_fail(x, errno, "set its owner");
	/* After chown, which clears set-id bits. */
	if (fchmod(fd, archive_entry_mode(e) & 07777) < 0)
		return os_fail(x, errno, "set its mode");
	ts[0].tv_sec = archive_entry_mtime(e);
	ts[0].tv_nsec = archive_entry_mtime_nsec(e);
	ts[1] = ts[0];
	if (futimens(fd, ts) < 0)
		return os_fail(x, errno, "set its times");
	return 0;
}

static int write_data(struct unpack *x, struct archive *a, int fd)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;

	for (;;) {
		r = archive_read_data_block(a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK)
			return -1;
		x->u->size += len;
		if (x->u->size > x->u->max_bytes)
			return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_ARGUMENT,
				    "layer %s: member \"%s\" takes the layer past the image store's room (%llu bytes "
				    "left under HANGAR_IMAGE_CACHE_MB)",
				    x->u->blob_name, x->member, (unsigned long long)x->u->max_bytes);
		for (const char *p = buf; len;) {
			ssize_t w = pwrite(fd, p, len, off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return os_fail(x, errno, "write it");
			p += w;
			off += w;
			len -= (size_t)w;
		}
	}
}

static int whiteout(struct unpack *x, int pfd, const char *base)
{
	static const char opq[] = ".wh..wh..opq";

	if (!strcmp(base, opq)) {
		int d = beneath(pfd, ".", O_RDONLY | O_DIRECTORY, 0);

		if (d < 0)
			return os_fail(x, -d, "open its directory");
		if (x->trusted && fsetxattr(d, "trusted.overlay.opaque", "y", 1, 0) < 0) {
			close(d);
			return os_fail(x, errno, "mark its directory opaque (trusted.overlay.opaque)");
		}
		if (fsetxattr(d, "user.overlay.opaque", "y", 1, 0) < 0) {
			int e = errno;

			close(d);
			return os_fail(x, e, "mark its directory opaque (user.overlay.opaque)");
		}
		close(d);
		return 0;
	}
	base += 4;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return refuse(x, "it is a whiteout of nothing");
	{
		int rc = clear_name(x, pfd, base, 0);

		if (rc < 0)
			return rc;
	}
	if (mknodat(pfd, base, S_IFCHR | 0000, makedev(0, 0)) < 0)
		return os_fail(x, errno, "make its whiteout");
	return 0;
}

/* Kept for the end, in the order directories came: finish_dirs() applies the last of each path. */
static int add_dir_meta(struct unpack *x, const char *rel, struct archive_entry *e)
{
	struct dir_meta *m;

	if (x->n_dirs == x->cap_dirs) {
		size_t cap = x->cap_dirs ? x->cap_dirs * 2 : 64;
		struct dir_meta *v = realloc(x->dirs, cap * sizeof(*v));

		if (!v)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		x->dirs = v;
		x->cap_dirs = cap;
	}
	m = &x->dirs[x->n_dirs];
	if (!(m->path = strdup(rel)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	m->seq = x->n_dirs++;
	m->mode = archive_entry_mode(e) & 07777;
	m->uid = (uid_t)archive_entry_uid(e);
	m->gid = (gid_t)archive_entry_gid(e);
	m->mtime.tv_sec = archive_entry_mtime(e);
	m->mtime.tv_nsec = archive_entry_mtime_nsec(e);
	return 0;
}

static int by_path_then_seq(const void *a, const void *b)
{
	const struct dir_meta *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	return c ? c : (x->seq < y->seq ? -1 : x->seq > y->seq);
}

/*
 * Directories' owners, modes and times last: writing into them changed their
 * times. In reverse path order, so a directory comes before its parent (a
 * parent's mode cannot lock its children out first), and for each path only
 * the last entry the layer gave.
 */
static int finish_dirs(struct unpack *x)
{
	const char *done = NULL;

	if (x->n_dirs)
		qsort(x->dirs, x->n_dirs, sizeof(*x->dirs), by_path_then_seq);
	for (size_t i = x->n_dirs; i-- > 0;) {
		struct dir_meta *m = &x->dirs[i];
		struct timespec ts[2] = { m->mtime, m->mtime };
		int fd;

		if (done && !strcmp(done, m->path))
			continue;
		done = m->path;
		fd = m->path[0] ? beneath(x->rootfd, m->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0) : dup(x->rootfd);
		quote_member(x, m->path);
		/* A later member replaced the directory (or a whiteout removed it): nothing to set. */
		if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
			continue;
		if (fd < 0)
			return os_fail(x, -fd, "open the directory");
		if ((x->root_user && fchown(fd, m->uid, m->gid) < 0) || fchmod(fd, m->mode) < 0 ||
		    futimens(fd, ts) < 0) {
			int e = errno;

			close(fd);
			return os_fail(x, e, "set the directory's owner, mode or times");
		}
		close(fd);
	}
	return 0;
}

/* A hard link to the file open as O_PATH fd: AT_EMPTY_PATH as root, else through /proc. */
static int hard_link(int fd, int pfd, const char *base)
{
	char proc[64];

	if (linkat(fd, "", pfd, base, AT_EMPTY_PATH) == 0)
		return 0;
	if (errno != ENOENT && errno != EPERM)
		return -1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return linkat(AT_FDCWD, proc, pfd, base, AT_SYMLINK_FOLLOW);
}

static int one_member(struct unpack *x, struct archive *a, struct archive_entry *e)
{
	char rel[IMG_MAX_NAME + 2], target[IMG_MAX_NAME + 2];
	const char *name = archive_entry_pathname(e), *why = NULL, *base = NULL, *link;
	mode_t type = archive_entry_filetype(e);
	int r, pfd, fd, rc = 0;

	quote_member(x, name ? name : "?");
	if (!name)
		return refuse(x, "its name cannot be read");
	r = img_path_canon(name, rel, sizeof(rel), &why);
	if (r < 0)
		return refuse(x, why);
	if (archive_entry_sparse_count(e) > 0)
		return refuse(x, "it is a sparse file");
	/*
	 * An unprivileged caller's layers are owned within its image range
	 * (subids.c): an owner beyond it would be unmapped there, so the
	 * sandboxes could not show it. Refused, never owned by someone else.
	 */
	if (x->u->max_id && (archive_entry_uid(e) < 0 || archive_entry_gid(e) < 0 ||
			     (uint64_t)archive_entry_uid(e) >= x->u->max_id ||
			     (uint64_t)archive_entry_gid(e) >= x->u->max_id)) {
		char why_id[160];

		snprintf(why_id, sizeof(why_id),
			 "it is owned by %lld:%lld, beyond the %u ids of an unprivileged caller's image range "
			 "(see hangar-images(7))",
			 (long long)archive_entry_uid(e), (long long)archive_entry_gid(e), x->u->max_id);
		return refuse(x, why_id);
	}
	link = archive_entry_hardlink(e);
	/*
	 * A root filesystem made by a bootstrap tool carries /dev's nodes; a
	 * sandbox's /dev is its own, so they are left out, never made. A
	 * device node anywhere else refuses the layer.
	 */
	if ((type == AE_IFCHR || type == AE_IFBLK) && !link && !strncmp(rel, "dev/", 4))
		return 0;
	if (r == 1) {
		/* The layer's root itself: only its metadata. */
		if (type != AE_IFDIR || link)
			return refuse(x, "the layer's root is not a directory");
		return add_dir_meta(x, "", e);
	}
	pfd = open_parent(x, rel, &base);
	if (pfd < 0)
		return pfd == -ENOTDIR ? refuse(x, "a component of its path is not a directory")
				       : os_fail(x, -pfd, "open its directory");
	if (!strncmp(base, ".wh.", 4)) {
		if (link || type != AE_IFREG)
			rc = refuse(x, "a whiteout that is not a plain file");
		else
			rc = whiteout(x, pfd, base);
		close(pfd);
		return rc;
	}
	if (link) {
		struct stat st;
		int tfd;

		r = img_path_canon(link, target, sizeof(target), &why);
		if (r != 0) {
			close(pfd);
			return refuse(x, r < 0 ? "its hard link's target is absolute or has a .. component"
					       : "its hard link names the layer's root");
		}
		if (!nameset_has(&x->files, target)) {
			close(pfd);
			return refuse(x, "it is a hard link to a file not written before it in this layer");
		}
		tfd = beneath(x->rootfd, target, O_PATH | O_NOFOLLOW, 0);
		if (tfd < 0 || fstat(tfd, &st) < 0 || !S_ISREG(st.st_mode)) {
			if (tfd >= 0)
				close(tfd);
			close(pfd);
			return refuse(x, "its hard link's target is not a regular file of this layer");
		}
		if (clear_name(x, pfd, base, 0) < 0 || hard_link(tfd, pfd, base) < 0) {
			int eno = errno;

			close(tfd);
			close(pfd);
			return hangar_error_last()->code == HANGAR_EREFUSED ? HANGAR_EREFUSED : os_fail(x, eno, "link it");
		}
		close(tfd);
		close(pfd);
		return nameset_add(&x->files, rel) < 0 ? herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory") : 0;
	}
	switch (type) {
	case AE_IFREG:
		if ((rc = clear_name(x, pfd, base, 0)) < 0)
			break;
		fd = beneath(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
		if (fd < 0) {
			rc = os_fail(x, -fd, "create it");
			break;
		}
		rc = write_data(x, a, fd);
		if (rc == -1 && *x->canceled)
			rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled");
		else if (rc == -1)
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s: member \"%s\": %s", x->u->blob_name,
				  x->member, archive_error_string(a) ? archive_error_string(a) : "its data cannot be read");
		if (!rc)
			rc = set_owner_mode_times(x, fd, e);
		close(fd);
		if (!rc && nameset_add(&x->files, rel) < 0)
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		break;
	case AE_IFDIR:
		if ((r = clear_name(x, pfd, base, 1)) < 0) {
			rc = r;
			break;
		}
		if (r == 0 && mkdirat(pfd, base, 0700) < 0) {
			rc = os_fail(x, errno, "make the directory");
			break;
		}
		rc = add_dir_meta(x, rel, e);
		break;
	case AE_IFLNK: {
		const char *to = archive_entry_symlink(e);
		struct timespec ts[2];

		if (!to || !*to) {
			rc = refuse(x, "a symlink without a target");
			break;
		}
		if ((rc = clear_name(x, pfd, base, 0)) < 0)
			break;
		if (symlinkat(to, pfd, base) < 0) {
			rc = os_fail(x, errno, "make the symlink");
			break;
		}
		if (x->root_user &&
		    fchownat(pfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0) {
			rc = os_fail(x, errno, "set the symlink's owner");
			break;
		}
		ts[0].tv_sec = archive_entry_mtime(e);
		ts[0].tv_nsec = archive_entry_mtime_nsec(e);
		ts[1] = ts[0];
		if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
			rc = os_fail(x, errno, "set the symlink's times");
		break;
	}
	case AE_IFIFO:
		if ((rc = clear_name(x, pfd, base, 0)) < 0)
			break;
		if (mkfifoat(pfd, base, 0600) < 0) {
			rc = os_fail(x, errno, "make the fifo");
			break;
		}
		fd = beneath(pfd, base, O_PATH | O_NOFOLLOW, 0);
		if (fd < 0) {
			rc = os_fail(x, -fd, "open the fifo");
			break;
		} else {
			char proc[64];
			struct timespec ts[2];

			/* fchmod and fchown do not take O_PATH descriptors: through /proc/self/fd. */
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			if ((x->root_user && chown(proc, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0) ||
			    chmod(proc, archive_entry_mode(e) & 07777) < 0) {
				rc = os_fail(x, errno, "set the fifo's owner or mode");
			} else {
				ts[0].tv_sec = archive_entry_mtime(e);
				ts[0].tv_nsec = 0;
				ts[1] = ts[0];
				utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
			}
			close(fd);
		}
		break;
	case AE_IFCHR:
	case AE_IFBLK:
		rc = refuse(x, "it is a device node");
		break;
	case AE_IFSOCK:
		rc = refuse(x, "it is a socket");
		break;
	default:
		rc = refuse(x, "it is of a kind a layer may not hold");
		break;
	}
	close(pfd);
	return rc;
}

int img_unpack(int rootfd, struct img_unpack *u)
{
	struct reader *r = calloc(1, sizeof(*r));
	struct unpack x = {
		.u = u, .rootfd = rootfd, .root_user = geteuid() == 0, .trusted = geteuid() == 0 && !u->max_id,
	};
	struct archive *a = NULL;
	struct archive_entry *e;
	unsigned char hash[crypto_hash_sha256_BYTES];
	int rc = 0, ar, probe;

	/* Without openat2 (Linux 5.6) nothing could be written safely: refuse, no fallback. */
	if ((probe = beneath(rootfd, ".", O_PATH | O_DIRECTORY, 0)) < 0) {
		free(r);
		return probe == -ENOSYS ? herr(HANGAR_EOS, HANGAR_ERRCAT_OS,
					       "unpacking a layer needs openat2(), Linux 5.6 or later; this kernel has none")
					: herr_os(HANGAR_EOS, -probe, "cannot open the layer's directory");
	}
	close(probe);
	if (!r)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	r->fd = u->blob_fd;
	r->u = u;
	x.canceled = &r->canceled;
	u->size = u->files = 0;
	crypto_hash_sha256_init(&r->sha);
	if (fill(r) < 0) {
		rc = herr_os(HANGAR_EOS, r->err, "cannot read layer %s", u->blob_name);
		goto out;
	}
	r->kind = img_sniff_compression(r->in, r->in_len);
	if (u->want_compression >= 0 && u->want_compression != r->kind) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s is %s, but its media type says %s",
			  u->blob_name, compression_names[r->kind], compression_names[u->want_compression]);
		goto out;
	}
	if (r->kind == 1) {
		if (inflateInit2(&r->z, 15 + 16) != Z_OK) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			goto out;
		}
		r->z_live = 1;
	} else if (r->kind == 2) {
		if (!(r->zd = ZSTD_createDCtx())) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			goto out;
		}
		/* A window past 128 MiB is refused rather than allocated. */
		ZSTD_DCtx_setParameter(r->zd, ZSTD_d_windowLogMax, 27);
	}
	if ((rc = img_archive_load()) != 0)
		goto out;
	a = archive_read_new();
	if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_support_filter_none(a) != ARCHIVE_OK) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	if (archive_read_open(a, r, NULL, reader_read, NULL) != ARCHIVE_OK) {
		rc = r->canceled ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled")
				 : herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s is not a tar stream: %s",
					u->blob_name, archive_error_string(a) ? archive_error_string(a) : "unreadable");
		goto out;
	}
	while ((ar = archive_read_next_header(a, &e)) == ARCHIVE_OK || ar == ARCHIVE_WARN) {
		if (++u->files > IMG_MAX_MEMBERS) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s has more than %u members", u->blob_name,
				  IMG_MAX_MEMBERS);
			goto out;
		}
		if ((rc = one_member(&x, a, e)) != 0)
			goto out;
	}
	if (ar != ARCHIVE_EOF) {
		rc = r->canceled ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled")
		     : r->err && r->err != EBADMSG
			     ? herr_os(HANGAR_EOS, r->err, "cannot read layer %s", u->blob_name)
			     : herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "layer %s is not a valid tar stream: %s",
				    u->blob_name, r->err == EBADMSG ? "its compressed data is corrupt"
						  : archive_error_string(a) ? archive_error_string(a) : "unreadable");
		goto out;
	}
	/* The diff_id covers the whole stream: what follows the tar's end too. */
	for (;;) {
		const void *buf;
		la_ssize_t n = reader_read(a, r, &buf);

		if (n < 0) {
			rc = r->canceled ? herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled")
					 : herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
						"layer %s: its compressed data is corrupt", u->blob_name);
			goto out;
		}
		if (n == 0)
			break;
	}
	if (u->progress && r->raw_bytes > r->reported && u->progress(r->raw_bytes - r->reported, u->payload)) {
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled");
		goto out;
	}
	crypto_hash_sha256_final(&r->sha, hash);
	strcpy(u->diff_id_out, "sha256:");
	sodium_bin2hex(u->diff_id_out + 7, sizeof(u->diff_id_out) - 7, hash, sizeof(hash));
	if (u->diff_id && strcmp(u->diff_id, u->diff_id_out) != 0) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
			  "layer %s: its uncompressed content is %s, not the diff_id %s its config names", u->blob_name,
			  u->diff_id_out, u->diff_id);
		goto out;
	}
	rc = finish_dirs(&x);
out:
	if (a)
		archive_read_free(a);
	if (r->z_live)
		inflateEnd(&r->z);
	ZSTD_freeDCtx(r->zd);
	free(r);
	for (size_t i = 0; i < x.n_dirs; i++)
		free(x.dirs[i].path);
	free(x.dirs);
	nameset_free(&x.files);
	return rc;
}
