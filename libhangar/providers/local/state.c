/*
 * A local sandbox's directory as the library sees it: its path and its
 * lock, whether its jail lives, and clearing away what a dead one left;
 * and waiting on a jail: its pidfd, and reads from its pipe and sockets
 * that end at a deadline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"
#include "snapshot.h"
#include "usage.h"

/* run's length was checked at init, so this always fits DIR_MAX. */
void local_sandbox_dir(char *buf, size_t size, const struct local *l, const char *id)
{
	if (snprintf(buf, size, "%s/%s", l->run, id) >= (int)size)
		buf[0] = '\0';
}

int local_pidfd_open(int pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

int local_pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Waits for a pidfd to report its process gone; 1 when it did before the deadline. */
int local_pidfd_wait(int pidfd, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd p = { pidfd, POLLIN, 0 };
		int64_t left = deadline_ms - clock_mono_ms();
		int r;

		if (left <= 0)
			return 0;
		r = poll(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return 0;
	}
}

int local_pidfd_stop(int pidfd)
{
	int stuck;

	local_pidfd_signal(pidfd, SIGTERM);
	stuck = !local_pidfd_wait(pidfd, clock_mono_ms() + KILL_DEADLINE_MS);
	if (stuck) {
		/* bwrap dies with it (--die-with-parent). */
		local_pidfd_signal(pidfd, SIGKILL);
		local_pidfd_wait(pidfd, clock_mono_ms() + KILL_DEADLINE_MS);
	}
	local_reap_jails(); /* the jail just ended: its caller may be its parent */
	return stuck;
}

int local_read_until(int fd, char *buf, size_t size, int64_t deadline_ms, int (*stop)(const char *buf, size_t have),
		     size_t *have)
{
	*have = 0;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline_ms - clock_mono_ms();
		ssize_t n;
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + *have, size - *have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		*have += (size_t)n;
		if (*have == size || (stop && stop(buf, *have)))
			return 0;
	}
}

/* Opens and flocks dir/lock; -1 with errno (EWOULDBLOCK with LOCK_NB). */
int local_lock(const char *dir, int how)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	while (flock(fd, how) < 0) {
		int e = errno;

		if (e == EINTR)
			continue;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

void local_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

enum local_liveness local_liveness(const char *dir, const char *id, int *jail_pid)
{
	int pid = lstate_jail_pid(dir), fd;

	*jail_pid = pid;
	if (pid > 0)
		return lstate_is_jail(pid, id) ? LOCAL_ALIVE : LOCAL_DEAD;
	/* No jail yet: a create holding the lock is still starting it. */
	fd = local_lock(dir, LOCK_SH | LOCK_NB);
	if (fd < 0 && errno == EWOULDBLOCK)
		return LOCAL_CREATING;
	local_unlock(fd);
	return LOCAL_DEAD;
}

/* Undoes what a dead jail left behind: a thawed, empty cgroup and the directory. */
void local_clean_stale(struct local *l, const char *id)
{
	char dir[DIR_MAX], path[PATH_MAX], *cg, *snapshot = NULL;
	struct lmeta m;
	int fd, pid;

	ltokens_forget(&l->tokens, id);
	local_sandbox_dir(dir, sizeof(dir), l, id);
	fd = local_lock(dir, LOCK_EX | LOCK_NB);
	if (fd < 0 && errno != ENOENT)
		return; /* someone is working on it */
	/* Re-check under the lock: the jail may have started meanwhile. */
	if (local_liveness(dir, id, &pid) == LOCAL_ALIVE) {
		local_unlock(fd);
		return;
	}
	snprintf(path, sizeof(path), "%s/cgroup", dir);
	cg = lstate_read_file(path, PATH_MAX + 8, NULL);
	if (cg && (!strncmp(cg, "v1 /sys/fs/cgroup/", 18) || !strncmp(cg, "v2 /sys/fs/cgroup/", 18))) {
		cg[strcspn(cg, "\n")] = '\0';
		if (strstr(cg, id) && !strstr(cg, "..") && local_remove_cgroup(cg[1] == '2', cg + 3) < 0)
			hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: cannot remove cgroup %s of dead sandbox %s: %s",
			     cg + 3, id, strerror(errno));
	}
	free(cg);
	usage_remove_cgroups(dir, id);
	/* Made from a snapshot: its dead jail's use is gone, perhaps the last of one released. */
	if (lstate_meta_read(dir, &m) == 0) {
		snapshot = m.snapshot;
		m.snapshot = NULL;
		lstate_meta_clear(&m);
	}
	hangar_sys_log(l->ctx, HANGAR_LOG_INFO, "local: removing dead sandbox %s", id);
	lstate_rmtree_at(AT_FDCWD, dir);
	local_unlock(fd);
	if (snapshot)
		local_snapshot_reap(l, snapshot);
	free(snapshot);
}

/*
 * Past its lifetime the jail is tearing the sandbox down: envd may be gone
 * already while the supervisor still runs. It is gone to callers from that
 * moment, never merely unreachable, and its lifetime cannot be extended.
 */
int local_past_lifetime(const char *id, const struct lmeta *m)
{
	if (m->paused || m->expires_at_us <= 0 || m->expires_at_us > clock_wall_us())
		return 0;
	return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its lifetime ran out)", id);
}

int local_find_running(struct local *l, const char *id, char *dir, size_t size, int *jail_pid)
{
	struct stat st;

	if (!lstate_valid_id(id))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no local sandbox %s (not a local sandbox id)", id);
	local_sandbox_dir(dir, size, l, id);
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no local sandbox %s (killed, expired or never created)",
					id);
	switch (local_liveness(dir, id, jail_pid)) {
	case LOCAL_ALIVE:
		return 0;
	case LOCAL_CREATING:
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is still being created", id);
	case LOCAL_DEAD:
		break;
	}
	local_clean_stale(l, id);
	return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor died)", id);
}

int local_meta_failed(const char *id, int r)
{
	if (r == -ENOENT)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id);
	return hangar_sys_error(HANGAR_EOS, 0, -r, "local sandbox %s: cannot read or write meta.json", id);
}

int local_find_alive(struct local *l, const char *id, char *dir, size_t size, int *jail_pid)
{
	struct lmeta m;
	int r = local_find_running(l, id, dir, size, jail_pid);

	if (r || lstate_meta_read(dir, &m) < 0)
		return r; /* an unreadable meta.json: the caller reads it again and says so */
	r = local_past_lifetime(id, &m);
	lstate_meta_clear(&m);
	return r;
}
