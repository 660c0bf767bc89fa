/*
 * file://DIR: one file per blob. A blob is written under a dot-name unique
 * to the writer in the same directory, fsynced, renamed over its final name
 * and the directory fsynced, so a crash or a full disk at any point leaves
 * either the previous blob or the new one, whole, never a partial one under
 * the final name. Dot-names are never blob names, so a reader cannot pick up
 * a temporary file a crashed writer left behind.
 *
 * A dot-name carries its writer's process identity (".NAME~IDENTITY.tmp",
 * hproc_identity()), so the next write into the directory sweeps what a
 * killed writer of this machine left at once; one of unknown making is
 * swept once it is a day old.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "blobstore.h"

struct file_store {
	struct blobstore base;
	int dirfd;
	char dir[PATH_MAX];
};

struct file_writer {
	struct blob_writer base;
	int fd;
	char name[129];
	char tmp[256];
};

#define STALE_TMP_SECONDS 86400

/* Removes the temporary files of writers that no longer run. */
static void sweep_dead_writers(struct file_store *fs)
{
	int fd = openat(fs->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	time_t now = time(NULL);

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		const char *n = e->d_name, *tilde = strrchr(n, '~');
		size_t len = strlen(n);
		char identity[128];
		struct stat st;
		int dead;

		if (n[0] != '.' || len < 5 || strcmp(n + len - 4, ".tmp") != 0)
			continue;
		if (tilde && (size_t)(n + len - 4 - tilde - 1) < sizeof(identity)) {
			snprintf(identity, sizeof(identity), "%.*s", (int)(n + len - 4 - tilde - 1), tilde + 1);
			dead = hproc_dead(identity);
		} else {
			dead = fstatat(fs->dirfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			       now - st.st_mtime > STALE_TMP_SECONDS;
		}
		if (dead && unlinkat(fs->dirfd, n, 0) == 0)
			hangar_sys_log(fs->base.ctx, HANGAR_LOG_INFO, "checkpoint store %s: swept %s, left by a writer that stopped",
				       fs->dir, n);
	}
	closedir(d);
}

static struct file_store *fs_of(struct blobstore *bs)
{
	return (struct file_store *)bs;
}

static int write_begin(struct blob_writer **out, struct blobstore *bs, const char *name)
{
	struct file_store *fs = fs_of(bs);
	struct file_writer *w = calloc(1, sizeof(*w));
	char identity[128];

	if (!w)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	sweep_dead_writers(fs);
	hproc_identity(identity, sizeof(identity));
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->tmp, sizeof(w->tmp), ".%s~%s.tmp", name, identity);
	w->fd = openat(fs->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		int e = errno;

		free(w);
		return herr_os(HANGAR_EOS, e, "cannot create a checkpoint in %s", fs->dir);
	}
	w->base.bs = bs;
	*out = &w->base;
	return 0;
}

static int write_data(struct blob_writer *bw, const void *data, size_t len)
{
	struct file_writer *w = (struct file_writer *)bw;
	const char *p = data;

	while (len) {
		ssize_t n = write(w->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return herr_os(HANGAR_EOS, n < 0 ? errno : EIO, "writing checkpoint %s in %s", w->name,
				       fs_of(bw->bs)->dir);
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void drop(struct file_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	unlinkat(fs_of(w->base.bs)->dirfd, w->tmp, 0);
	free(w);
}

static int commit(struct blob_writer *bw)
{
	struct file_writer *w = (struct file_writer *)bw;
	struct file_store *fs = fs_of(bw->bs);
	int rc = 0, fd = w->fd;

	w->fd = -1;
	if (fsync(fd) < 0)
		rc = herr_os(HANGAR_EOS, errno, "writing checkpoint %s in %s", w->name, fs->dir);
	if (close(fd) < 0 && rc == 0)
		rc = herr_os(HANGAR_EOS, errno, "writing checkpoint %s in %s", w->name, fs->dir);
	if (rc == 0 && renameat(fs->dirfd, w->tmp, fs->dirfd, w->name) < 0)
		rc = herr_os(HANGAR_EOS, errno, "keeping checkpoint %s in %s", w->name, fs->dir);
	if (rc < 0) {
		drop(w);
		return rc;
	}
	/* The rename is durable only once the directory is. */
	if (fsync(fs->dirfd) < 0)
		rc = herr_os(HANGAR_EOS, errno, "keeping checkpoint %s in %s", w->name, fs->dir);
	free(w);
	return rc;
}

static void abort_write(struct blob_writer *bw)
{
	drop((struct file_writer *)bw);
}

static int open_blob(struct file_store *fs, const char *name)
{
	int fd = openat(fs->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return errno == ENOENT ? herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s in %s", name,
					      fs->dir)
				       : herr_os(HANGAR_EOS, errno, "cannot open checkpoint %s in %s", name, fs->dir);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "checkpoint %s in %s is not a regular file", name,
			    fs->dir);
	}
	return fd;
}

static int read_blob(struct blobstore *bs, const char *name, blob_sink sink, void *payload)
{
	struct file_store *fs = fs_of(bs);
	int fd = open_blob(fs, name), rc = 0;
	char *buf;

	if (fd < 0)
		return fd;
	buf = malloc(1 << 16);
	if (!buf) {
		close(fd);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 16);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = herr_os(HANGAR_EOS, errno, "reading checkpoint %s in %s", name, fs->dir);
			break;
		}
		if (n == 0 || (rc = sink(payload, buf, (size_t)n)) < 0)
			break;
	}
	free(buf);
	close(fd);
	return rc;
}

static int del(struct blobstore *bs, const char *name)
{
	struct file_store *fs = fs_of(bs);

	if (unlinkat(fs->dirfd, name, 0) < 0)
		return errno == ENOENT ? herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s in %s", name,
					      fs->dir)
				       : herr_os(HANGAR_EOS, errno, "cannot delete checkpoint %s in %s", name, fs->dir);
	fsync(fs->dirfd);
	return 0;
}

static int exists(struct blobstore *bs, const char *name)
{
	struct file_store *fs = fs_of(bs);
	struct stat st;

	if (fstatat(fs->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : herr_os(HANGAR_EOS, errno, "cannot examine checkpoint %s in %s", name, fs->dir);
	return S_ISREG(st.st_mode);
}

static void free_store(struct blobstore *bs)
{
	struct file_store *fs = fs_of(bs);

	close(fs->dirfd);
	hangar_ctx_unref(bs->ctx);
	free(bs->url);
	free(fs);
}

static const struct blob_ops file_ops = {
	.write_begin = write_begin,
	.write = write_data,
	.commit = commit,
	.abort = abort_write,
	.read = read_blob,
	.del = del,
	.exists = exists,
	.free = free_store,
};

int blobstore_file_open(struct blobstore **out, hangar_ctx *ctx, const char *dir)
{
	struct file_store *fs;
	size_t n = strlen(dir);
	int rc;

	*out = NULL;
	if (dir[0] != '/' || n >= sizeof(fs->dir) - 1)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_CHECKPOINT_STORE: a file:// store names an absolute directory");
	if ((rc = hmkdirs(dir, "HANGAR_CHECKPOINT_STORE")) < 0)
		return rc;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	memcpy(fs->dir, dir, n + 1);
	fs->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->dirfd < 0) {
		rc = herr_os(HANGAR_ECONFIG, errno, "HANGAR_CHECKPOINT_STORE: cannot open %s", dir);
		free(fs);
		return rc;
	}
	if (asprintf(&fs->base.url, "file://%s", dir) < 0) {
		close(fs->dirfd);
		free(fs);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	fs->base.ops = &file_ops;
	fs->base.ctx = hangar_ctx_ref(ctx);
	*out = &fs->base;
	return 0;
}
