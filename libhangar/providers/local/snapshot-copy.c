/*
 * The copy behind a local snapshot: a frozen sandbox's writable tree, read
 * through /proc/PID/root, written under the snapshot's directory.
 *
 * The tree is the sandbox's, so nothing in it is trusted: every name is
 * opened relative to its parent's descriptor without following a symbolic
 * link, a link is copied as a link, a FIFO is made anew (never opened, so
 * the copy cannot block on it), and sockets and devices are left out.
 * Holes are kept (SEEK_DATA), so a sparse file of a terabyte costs what it
 * holds; hard links stay links, so one file linked a thousand times is
 * copied once. The tree cannot grow while it is copied (the sandbox is
 * frozen), so the copy ends, and costs at most what the sandbox's file
 * system holds.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "snapshot.h"

struct link {
	dev_t dev;
	ino_t ino;
	char *path; /* its copy, relative to the destination's top */
};

struct lsnap_copy {
	int top;            /* the destination's top directory */
	unsigned base, top_id;
	const struct lsnap_ids *ids; /* NULL: base and top_id say */
	int overlay;                 /* an upper layer: whiteouts kept, and trusted.overlay.* (1), user.overlay.* (2) */
	struct link *links; /* open addressing on ino; n used of cap (a power of two) */
	size_t n, cap;
	char rel[PATH_MAX]; /* the directory being copied, relative to top ("" at the top) */
	char *msg;
	size_t msg_size;
};

/*
 * The id written for h (a uid, or a gid when gid): as ids says, else the id
 * the sandbox's commands saw for host id h: root is base + top, others
 * base + themselves.
 */
static unsigned canon(const struct lsnap_copy *c, unsigned h, int gid)
{
	if (c->ids) {
		const struct lsnap_seg *seg = gid ? c->ids->gid : c->ids->uid;
		size_t n = gid ? c->ids->ng : c->ids->nu;

		for (size_t i = 0; i < n; i++)
			if (h >= seg[i].from && h - seg[i].from < seg[i].count)
				return seg[i].to + (h - seg[i].from);
		return c->ids->nobody;
	}
	if (h == c->base + c->top_id)
		return 0;
	if (h > c->base && h < c->base + c->top_id)
		return h - c->base;
	return 65534; /* envd's, or none of the sandbox's: nobody */
}

static int fail(struct lsnap_copy *c, int e, const char *what, const char *name)
{
	if (!c->msg[0])
		snprintf(c->msg, c->msg_size, "%s %.200s%s%.200s: %s", what, c->rel, c->rel[0] ? "/" : "", name,
			 strerror(e));
	return -e;
}

static struct link *link_slot(struct lsnap_copy *c, dev_t dev, ino_t ino)
{
	size_t i = (size_t)(ino * 0x9e3779b97f4a7c15ULL) & (c->cap - 1);

	while (c->links[i].path && (c->links[i].ino != ino || c->links[i].dev != dev))
		i = (i + 1) & (c->cap - 1);
	return &c->links[i];
}

/* Remembers the copy of a file with more than one link at rel/name. 0 or -ENOMEM. */
static int link_add(struct lsnap_copy *c, const struct stat *st, const char *name)
{
	struct link *s;

	if (c->n * 2 >= c->cap) {
		struct link *old = c->links;
		size_t oldcap = c->cap;

		c->cap = c->cap ? c->cap * 2 : 64;
		c->links = calloc(c->cap, sizeof(*c->links));
		if (!c->links) {
			c->links = old;
			c->cap = oldcap;
			return -ENOMEM;
		}
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].path)
				*link_slot(c, old[i].dev, old[i].ino) = old[i];
		free(old);
	}
	s = link_slot(c, st->st_dev, st->st_ino);
	if (asprintf(&s->path, "%s%s%s", c->rel, c->rel[0] ? "/" : "", name) < 0) {
		s->path = NULL;
		return -ENOMEM;
	}
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	c->n++;
	return 0;
}

/*
 * An upper layer's overlayfs attributes (an opaque directory, a redirect:
 * trusted.overlay.*, or user.overlay.* for an overlay mounted with
 * userxattr in a user namespace) from in to out, so that the copy hides and
 * renames in the layers below it as the original did. 0 or -errno.
 */
static int copy_overlay_attrs(const struct lsnap_copy *c, int in, int out)
{
	const char *prefix = c->overlay == 2 ? "user.overlay." : "trusted.overlay.";
	char names[4096], value[4096];
	ssize_t n;

	if (!c->overlay)
		return 0;
	n = flistxattr(in, names, sizeof(names));
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (char *name = names; name < names + n; name += strlen(name) + 1) {
		ssize_t v;

		if (strncmp(name, prefix, strlen(prefix)) != 0)
			continue;
		v = fgetxattr(in, name, value, sizeof(value));
		if (v < 0 || fsetxattr(out, name, value, (size_t)v, 0) < 0)
			return -errno;
	}
	return 0;
}

/* Owner, mode and times of the copy fd as the source's st says. */
static int set_attrs(const struct lsnap_copy *c, int fd, const struct stat *st)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (fchown(fd, canon(c, st->st_uid, 0), canon(c, st->st_gid, 1)) < 0 || fchmod(fd, st->st_mode & 07777) < 0 ||
	    futimens(fd, ts) < 0)
		return -errno;
	return 0;
}

/* The bytes of in (its holes left as holes) into out, then its size. 0 or -errno. */
static int copy_data(int in, int out, off_t size)
{
	char buf[65536];
	off_t off = 0;

	while (off < size) {
		off_t data = lseek(in, off, SEEK_DATA), hole;

		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0)
			return -errno;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > size)
			hole = size;
		for (off_t at = data; at < hole;) {
			size_t want = (size_t)(hole - at);
			loff_t from = at, to = at;
			off_t sf = at;
			ssize_t n = copy_file_range(in, &from, out, &to, want, 0);

			/* Across file systems (tmpfs to the state directory's): the kernel's splice, no copy here. */
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
				n = lseek(out, at, SEEK_SET) < 0 ? -1 : sendfile(out, in, &sf, want);
				if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
					n = pread(in, buf, want < sizeof(buf) ? want : sizeof(buf), at);
					if (n > 0 && pwrite(out, buf, (size_t)n, at) != n)
						return errno ? -errno : -EIO;
				}
			}
			if (n < 0)
				return -errno;
			if (n == 0)
				break;
			at += n;
		}
		off = hole;
	}
	return ftruncate(out, size) < 0 ? -errno : 0;
}

static int copy_file(struct lsnap_copy *c, int sdir, int ddir, const char *name, const struct stat *st)
{
	int in, out, r;
	struct stat now;

	if (st->st_nlink > 1) {
		struct link *s = link_slot(c, st->st_dev, st->st_ino);

		if (s->path)
			return linkat(c->top, s->path, ddir, name, 0) < 0 ? fail(c, errno, "cannot link", name) : 0;
	}
	in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (in < 0)
		return fail(c, errno, "cannot open", name);
	if (fstat(in, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino) {
		close(in);
		return fail(c, EAGAIN, "changed while copied:", name);
	}
	out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return fail(c, errno, "cannot create", name);
	}
	r = copy_data(in, out, now.st_size);
	if (r == 0)
		r = copy_overlay_attrs(c, in, out);
	if (r < 0)
		fail(c, -r, "cannot copy", name);
	else if ((r = set_attrs(c, out, &now)) < 0)
		fail(c, -r, "cannot set the owner of", name);
	close(in);
	close(out);
	if (r == 0 && st->st_nlink > 1 && (r = link_add(c, st, name)) < 0)
		fail(c, -r, "cannot remember", name);
	return r;
}

static int copy_dir(struct lsnap_copy *c, int sdir, int ddir, int depth);

/* Directory name of sdir into ddir, with what it holds. */
static int copy_subdir(struct lsnap_copy *c, int sdir, int ddir, const char *name, const struct stat *st, int depth)
{
	size_t had = strlen(c->rel);
	int s, d, r;

	if (depth >= LSNAP_DEPTH_MAX)
		return fail(c, ELOOP, "too many directories deep at", name);
	if (mkdirat(ddir, name, 0700) < 0)
		return fail(c, errno, "cannot make", name);
	s = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0 || d < 0) {
		r = fail(c, errno, "cannot open", name);
	} else if (snprintf(c->rel + had, sizeof(c->rel) - had, "%s%s", had ? "/" : "", name) >=
		   (int)(sizeof(c->rel) - had)) {
		c->rel[had] = '\0';
		r = fail(c, ENAMETOOLONG, "too long a path at", name);
	} else {
		r = copy_dir(c, s, d, depth + 1);
		c->rel[had] = '\0';
		if (r == 0 && (r = copy_overlay_attrs(c, s, d)) < 0)
			fail(c, -r, "cannot copy the overlay attributes of", name);
		if (r == 0 && (r = set_attrs(c, d, st)) < 0)
			fail(c, -r, "cannot set the owner of", name);
	}
	if (s >= 0)
		close(s);
	if (d >= 0)
		close(d);
	return r;
}

static int copy_entry(struct lsnap_copy *c, int sdir, int ddir, const char *name, int depth)
{
	struct stat st;
	char target[PATH_MAX];
	ssize_t n;

	if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(c, errno, "cannot stat", name);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		return copy_file(c, sdir, ddir, name, &st);
	case S_IFDIR:
		return copy_subdir(c, sdir, ddir, name, &st, depth);
	case S_IFLNK:
		n = readlinkat(sdir, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(c, errno, "cannot read link", name);
		target[n] = '\0';
		if (symlinkat(target, ddir, name) < 0 ||
		    fchownat(ddir, name, canon(c, st.st_uid, 0), canon(c, st.st_gid, 1), AT_SYMLINK_NOFOLLOW) < 0)
			return fail(c, errno, "cannot make link", name);
		return 0;
	case S_IFIFO:
		if (mknodat(ddir, name, S_IFIFO | 0600, 0) < 0 ||
		    fchownat(ddir, name, canon(c, st.st_uid, 0), canon(c, st.st_gid, 1), AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(ddir, name, st.st_mode & 0777, 0) < 0)
			return fail(c, errno, "cannot make FIFO", name);
		return 0;
	case S_IFCHR:
		/* An upper layer's whiteout: the file of that name below is deleted. */
		if (c->overlay && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0) {
			if (mknodat(ddir, name, S_IFCHR | 0, makedev(0, 0)) < 0 ||
			    fchownat(ddir, name, canon(c, st.st_uid, 0), canon(c, st.st_gid, 1),
				     AT_SYMLINK_NOFOLLOW) < 0)
				return fail(c, errno, "cannot make whiteout", name);
		}
		return 0;
	default:
		return 0; /* sockets and devices: nothing a new sandbox could use */
	}
}

static int copy_dir(struct lsnap_copy *c, int sdir, int ddir, int depth)
{
	int fd = dup(sdir), r = 0;
	struct dirent *de;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		r = fail(c, errno, "cannot read", ".");
		if (fd >= 0)
			close(fd);
		return r;
	}
	while (r == 0) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				r = fail(c, errno, "cannot read", ".");
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		r = copy_entry(c, sdir, ddir, de->d_name, depth);
	}
	closedir(d);
	return r;
}

int local_snapshot_copy(int src, int dst, const char *name, unsigned base, unsigned top, const struct lsnap_ids *ids,
			int overlay, char *msg, size_t size)
{
	struct lsnap_copy c = { .top = dst, .base = base, .top_id = top, .ids = ids, .overlay = overlay, .msg = msg,
				.msg_size = size };
	struct stat st;
	int d = -1, r;

	msg[0] = '\0';
	if (fstat(src, &st) < 0 || !S_ISDIR(st.st_mode))
		return fail(&c, errno ? errno : ENOTDIR, "cannot read", ".");
	/* Hard links are named from dst: rel starts at name. */
	snprintf(c.rel, sizeof(c.rel), "%s", name);
	c.cap = 64;
	c.links = calloc(c.cap, sizeof(*c.links));
	if (!c.links)
		return -ENOMEM;
	if (mkdirat(dst, name, 0700) < 0 || (d = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		r = fail(&c, errno, "cannot make", ".");
	else if ((r = copy_dir(&c, src, d, 0)) == 0 &&
		 ((r = copy_overlay_attrs(&c, src, d)) < 0 || (r = set_attrs(&c, d, &st)) < 0))
		fail(&c, -r, "cannot set the owner of", ".");
	if (d >= 0)
		close(d);
	for (size_t i = 0; i < c.cap; i++)
		free(c.links[i].path);
	free(c.links);
	return r;
}
