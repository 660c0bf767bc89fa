/*
 * The sandbox's cgroup v1 limits, joined beside bwrap's start.
 *
 * Moving a process into a cgroup v1 cgroup waits, on a host whose
 * hierarchies are mounted without favordynmods, for an RCU grace period:
 * some 8 ms of every create, with the child stopped before bwrap. Where the
 * child is born in the sandbox's cgroup v2 (the freezer's, CLONE_INTO_CGROUP:
 * spawn.c), that cgroup lists every process of the sandbox, whatever it
 * forks; so the child goes straight on to bwrap, and a short-lived process
 * of the jail's, the adopter, moves what the cgroup lists into the v1 limit
 * cgroups while bwrap and envd start. The library takes the sandbox only
 * once the adopter has said "limits" on the ready pipe, beside envd's
 * "ready": nothing of the caller's runs in it before every process of it is
 * held by its limits.
 *
 * The adopter moves every listed process, then reads the list again, until
 * one reading lists exactly the processes it moved the round before. Then
 * every process is in place: nothing but the adopter moves them, a process
 * listed is moved whatever its parent did, and one forked since by a process
 * in place is born in place. What bwrap and envd took before their move
 * (some 0.7 MiB of memory) stays charged to the jail's cgroup, which holds
 * the sandbox's when the caller's cgroup can: recent kernels refuse to
 * move cgroup v1 charges (move_charge_at_immigrate). The sandbox's own
 * usage and limit count what it takes once held.
 *
 * A move names its process by pid, and a pid can name another process once
 * its own has ended. So each is held by a pidfd, checked to be in the
 * sandbox's cgroup v2 before its move, and checked alive after it: alive,
 * the move moved it. A process that ended in between is left; before the
 * sandbox is ready only bwrap and envd run there, and they end only with it.
 *
 * Only for a root jail: cgroup v1 lets a process other than root move only
 * processes of its own uid, and the sandbox's are not. Otherwise, as where
 * the child is not born in a cgroup v2, the child joins its limits itself
 * before bwrap, and the jail says "limits" at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define ADOPT_DEADLINE_MS 10000 /* the sandbox is killed if its processes are not all in place by then */
#define ADOPT_MAX 1024          /* processes a sandbox may have before it is ready */

static const char LIMITS_LINE[] = "limits\n";

int limits_adopt_wanted(const struct limit_cgroups *c, int born_in)
{
	if (!born_in || geteuid() != 0)
		return 0;
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		if (c->path[i][0] && !c->v2[i])
			return 1;
	return 0;
}

int limits_say_held(int ready_fd)
{
	return write(ready_fd, LIMITS_LINE, sizeof(LIMITS_LINE) - 1) == (ssize_t)(sizeof(LIMITS_LINE) - 1) ? 0 : -1;
}

/* Whether /proc/pid/cgroup puts pid in the cgroup v2 rel. */
static int in_v2(pid_t pid, const char *rel)
{
	char file[64], path[PATH_MAX];

	snprintf(file, sizeof(file), "/proc/%d/cgroup", (int)pid);
	return proc_cgroup(file, NULL, path, sizeof(path)) == 0 && !strcmp(path, rel);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* The processes procs lists, sorted, into pids. How many, or -1 with errno (E2BIG: more than ADOPT_MAX). */
static int list_procs(const char *procs, pid_t *pids)
{
	FILE *f = fopen(procs, "re");
	int n = 0, pid;

	if (!f)
		return -1;
	while (fscanf(f, "%d", &pid) == 1) {
		if (n == ADOPT_MAX) {
			fclose(f);
			return errno = E2BIG, -1;
		}
		pids[n++] = pid;
	}
	fclose(f);
	qsort(pids, (size_t)n, sizeof(pids[0]), cmp_pid);
	return n;
}

static int ended(int pidfd)
{
	struct pollfd p = { pidfd, POLLIN, 0 };

	return poll(&p, 1, 0) == 1;
}

/* Moves pid into the limit cgroups if it is the sandbox's. 0 (moved, or ended), or -1 with errno. */
static int adopt_one(const struct limit_cgroups *c, const char *rel, pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0), r, e;

	if (fd < 0)
		return errno == ESRCH ? 0 : -1;
	if (!in_v2(pid, rel) || ended(fd)) {
		close(fd);
		return 0; /* ended, its pid maybe another's now */
	}
	r = limits_join(c, pid);
	e = errno;
	if (r < 0 && ended(fd))
		r = 0;
	close(fd);
	return r < 0 ? (errno = e, -1) : 0;
}

/* Closes every descriptor above 2 but those in keep (sorted, -1s first). */
static void close_all_but(const int *keep, size_t n)
{
	unsigned from = 3;

	for (size_t i = 0; i < n; i++) {
		if (keep[i] < (int)from)
			continue;
		if ((unsigned)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
		from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* The adopter: moves, reads again, until in place; then says so on ready_fd. Never returns. */
static void __attribute__((noreturn)) adopt(const struct limit_cgroups *c, const struct freezer *f, int bwrap_fd,
					    int ready_fd)
{
	static pid_t moved[ADOPT_MAX], listed[ADOPT_MAX];
	int64_t deadline = clock_mono_ms() + ADOPT_DEADLINE_MS;
	char procs[PATH_MAX + 32];
	const char *rel = freezer_v2_relative(f);
	int nmoved = -1, n;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", f->path);
	if (!rel) {
		say("sandbox cgroup %s is not below a cgroup v2 hierarchy", f->path);
		goto fail;
	}
	for (;;) {
		n = list_procs(procs, listed);
		if (n < 0) {
			say("cannot list the processes of %s: %s", procs, strerror(errno));
			goto fail;
		}
		if (n == 0)
			_exit(1); /* the sandbox ended before it was ready: the jail says why */
		if (n == nmoved && !memcmp(listed, moved, (size_t)n * sizeof(listed[0]))) {
			mark("limits-held");
			if (limits_say_held(ready_fd) < 0)
				_exit(1); /* the library is gone */
			_exit(0);
		}
		for (int i = 0; i < n; i++)
			if (adopt_one(c, rel, listed[i]) < 0) {
				say("cannot move process %d into the sandbox's limit cgroups: %s", (int)listed[i],
				    strerror(errno));
				goto fail;
			}
		memcpy(moved, listed, (size_t)n * sizeof(listed[0]));
		nmoved = n;
		if (clock_mono_ms() > deadline) {
			say("the sandbox's processes were still not all in its limit cgroups after %d s",
			    ADOPT_DEADLINE_MS / 1000);
			goto fail;
		}
	}
fail:
	/* The whole sandbox goes: bwrap's exit has the jail tear it down. */
	snprintf(procs, sizeof(procs), "%s/cgroup.kill", f->path);
	lstate_write_str(procs, "1");
	syscall(SYS_pidfd_send_signal, bwrap_fd, SIGKILL, NULL, 0);
	_exit(1);
}

int limits_adopt(const struct limit_cgroups *c, const struct freezer *f, pid_t bwrap, int ready_fd)
{
	int bwrap_fd = (int)syscall(SYS_pidfd_open, bwrap, 0), adopter_fd;
	pid_t jail = getpid(), pid;

	if (bwrap_fd < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int keep[] = { ready_fd, bwrap_fd, timeline_descriptor() };

		/* Dies with the jail; keeps nothing of the jail's whose EOF someone waits for. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != jail)
			_exit(1);
		qsort(keep, sizeof(keep) / sizeof(keep[0]), sizeof(keep[0]), cmp_int);
		close_all_but(keep, sizeof(keep) / sizeof(keep[0]));
		adopt(c, f, bwrap_fd, ready_fd);
	}
	close(bwrap_fd);
	if (pid < 0)
		return -1;
	adopter_fd = (int)syscall(SYS_pidfd_open, pid, 0); /* our child, not reaped yet: it is the adopter */
	if (adopter_fd < 0) {
		kill(pid, SIGKILL);
		return -1;
	}
	return adopter_fd;
}
