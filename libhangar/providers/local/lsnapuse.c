/* A local snapshot's deferred deletion: lsnapuse.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lsnapuse.h"

static int flock_retry(int fd, int how)
{
	int r;

	while ((r = flock(fd, how)) < 0 && errno == EINTR)
		;
	return r;
}

static int gate(const char *dir, int how)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), e;

	if (fd < 0)
		return -1;
	if (flock_retry(fd, how) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int lsnap_gate(const char *dir)
{
	return gate(dir, LOCK_EX);
}

/* Where dir goes while it is removed: .del-<its name> beside it. 0, or -ENAMETOOLONG. */
static int del_path(const char *dir, char *out, size_t size)
{
	const char *base = strrchr(dir, '/');
	int n;

	if (!base || !base[1])
		return -EINVAL;
	n = snprintf(out, size, "%.*s/%s%s", (int)(base - dir), dir, LSNAP_DEL_PREFIX, base + 1);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int lsnap_reap(const char *dir, int flags, lsnap_rm_fn rm)
{
	char path[PATH_MAX], gone[PATH_MAX];
	int g, use = -1, fd, r;

	if ((r = del_path(dir, gone, sizeof(gone))) < 0)
		return r;
	g = gate(dir, flags & LSNAP_NOWAIT ? LOCK_EX | LOCK_NB : LOCK_EX);
	if (g < 0)
		return errno == EWOULDBLOCK ? 0 : -errno;
	/*
	 * Under the gate, the directory may have been renamed since it was
	 * opened (a reaper before us): by its path, it is then gone.
	 */
	snprintf(path, sizeof(path), "%s/%s", dir, LSNAP_RELEASE);
	if (flags & LSNAP_MARK) {
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			r = -errno;
			goto out;
		}
		close(fd);
	} else if (access(path, F_OK) < 0) {
		r = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/use", dir);
	use = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (use < 0) {
		r = -errno;
		goto out;
	}
	if (flock_retry(use, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? 0 : -errno;
		goto out;
	}
	/* Out of the way first, so that no create finds a half-removed snapshot. */
	if (rename(dir, gone) < 0) {
		r = -errno;
		goto out;
	}
	r = rm ? rm(gone) : 0;
	r = r < 0 ? r : 1;
out:
	if (use >= 0)
		close(use);
	close(g);
	return r;
}

int lsnap_reap_leftover(const char *deldir, lsnap_rm_fn rm)
{
	int fd = open(deldir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (flock_retry(fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? 0 : -errno;
		close(fd);
		return r;
	}
	r = rm(deldir);
	close(fd);
	return r < 0 ? r : 1;
}
