/*
 * Watching the sandbox and ending it: reaping children, the expiry timer
 * and the teardown that kills every process of the sandbox and removes
 * what the jail made for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define TEARDOWN_DEADLINE_MS 10000

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Reaps every exited child; returns 1 when `watch` was among them. */
int reap(pid_t watch, int *status)
{
	int got = 0, st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == watch) {
			got = 1;
			if (status)
				*status = st;
		}
	return got;
}

/* Waits until the process of pidfd fd has exited, with a deadline. */
static void pidfd_gone(int fd, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) != 0)
			break;
	}
}

/* Waits until pid has exited (it is our child or reparented to us), with a deadline. */
void wait_gone(pid_t pid, int64_t deadline)
{
	int fd = pidfd_open_(pid);

	if (fd < 0)
		return; /* already gone */
	pidfd_gone(fd, deadline);
	close(fd);
}

/*
 * When the sandbox expires: meta.json's expiry, or none while paused or
 * without a lifetime. The library records the expiry once the sandbox runs;
 * a create that died before that (killed between the jail's start and the
 * record) leaves none, so the lifetime it asked for counts from the jail's
 * own start: no sandbox is left to run forever by a dead creator.
 */
static int64_t expiry_us(const struct jail *j, const struct lmeta *m)
{
	if (m->paused)
		return 0;
	if (m->expires_at_us > 0)
		return m->expires_at_us;
	if (m->timeout_sec > 0)
		return j->born_us + m->timeout_sec * 1000000;
	return 0;
}

/* Arms the timer for the sandbox's expiry; returns 0 when it already passed. */
static int arm_timer(const struct jail *j)
{
	struct lmeta m;
	struct itimerspec its = { 0 };
	int64_t at;
	int r = lstate_meta_read(j->dir, &m);

	if (r < 0) {
		if (r == -ENOENT)
			return 0; /* the directory is gone: nothing left to supervise */
		say("cannot read meta.json: %s", strerror(-r));
		return 1; /* keep the current timer */
	}
	at = expiry_us(j, &m);
	lstate_meta_clear(&m);
	if (at > 0) {
		if (at <= clock_wall_us())
			return 0;
		its.it_value.tv_sec = at / 1000000;
		its.it_value.tv_nsec = (at % 1000000) * 1000;
	}
	timerfd_settime(j->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	return 1;
}

/* Kills bwrap and the sandbox's pid 1, and waits for both: the whole sandbox, with or without a cgroup. */
static void kill_bwrap(pid_t bwrap, int64_t deadline)
{
	pid_t init = lstate_first_child(bwrap);
	int fd = init > 0 ? pidfd_open_(init) : -1;

	/*
	 * The pid namespace's init (bwrap's child) exits only once every
	 * process in the namespace is dead and reaped: waiting for it
	 * waits for the whole sandbox, with or without a cgroup.
	 */
	if (fd >= 0)
		syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
	kill(bwrap, SIGKILL);
	wait_gone(bwrap, deadline);
	if (fd >= 0) {
		pidfd_gone(fd, deadline);
		close(fd);
	}
}

void jail_teardown(struct jail *j, int bwrap_done)
{
	int64_t deadline = clock_mono_ms() + TEARDOWN_DEADLINE_MS;
	char path[PATH_MAX];
	int r;

	/* Nothing is served from here on. */
	forget_token();
	/* A frozen task cannot die: thaw first. */
	freezer_thaw(&j->freezer);
	if (!bwrap_done && j->bwrap_pid > 0)
		kill_bwrap(j->bwrap_pid, deadline);
	ports_stop();
	freezer_kill(&j->freezer, deadline);
	if (j->slirp > 0) {
		kill(j->slirp, SIGKILL);
		wait_gone(j->slirp, deadline);
	}
	reap(0, NULL);
	limits_remove(&j->lcg);
	freezer_remove(&j->freezer);
	snprintf(path, sizeof(path), "%s", j->dir);
	r = lstate_rmtree_at(AT_FDCWD, path);
	if (r < 0)
		say("cannot remove %s: %s", path, strerror(-r));
	uid_range_release(&j->ids);
	snaplayer_release();
}

/* What the loop does after an event. */
enum next { GO_ON, NEXT_POLL, STOP, BWRAP_GONE };

/* A signal: bwrap's exit (SIGCHLD), a new expiry (SIGHUP), or the end (SIGTERM, SIGINT). */
static enum next on_signal(const struct jail *j)
{
	struct signalfd_siginfo si;
	int status = 0;

	if (read(j->sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return NEXT_POLL;
	switch (si.ssi_signo) {
	case SIGCHLD:
		if (reap(j->bwrap_pid, &status)) {
			if (WIFEXITED(status))
				say("sandbox %s ended: bwrap exited with %d", j->id, WEXITSTATUS(status));
			else if (WIFSIGNALED(status))
				say("sandbox %s ended: bwrap killed by signal %d", j->id, WTERMSIG(status));
			return BWRAP_GONE;
		}
		return GO_ON;
	case SIGHUP:
		return arm_timer(j) ? GO_ON : STOP;
	default:
		say("sandbox %s killed", j->id);
		return STOP;
	}
}

/* The timer fired: the library may have moved the expiry since, so meta.json is asked again. */
static enum next on_timer(const struct jail *j)
{
	uint64_t ticks;

	if (read(j->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
		return NEXT_POLL;
	if (!arm_timer(j)) {
		say("sandbox %s expired", j->id);
		return STOP;
	}
	return GO_ON;
}

/*
 * Gives back the stack pages below `here` but for `keep` bytes: the set-up's
 * deepest calls (cgroup limits, the route flush, the image's mounts) dirtied
 * some 40 kB there that supervision never reaches again. Whatever goes that
 * deep later gets fresh zeroed pages, as a stack that never went there would.
 * Best effort: the memory is only a saving.
 */
static void stack_release(const void *here, size_t keep)
{
	uintptr_t at = (uintptr_t)here, lo = 0, hi = 0, top;
	long page = sysconf(_SC_PAGESIZE);
	char line[256];
	FILE *f = fopen("/proc/self/maps", "re");
	int found = 0;

	if (!f || page <= 0) {
		if (f)
			fclose(f);
		return;
	}
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%" SCNxPTR "-%" SCNxPTR, &lo, &hi) == 2 && lo <= at && at < hi;
	fclose(f);
	if (!found || at - lo <= keep)
		return;
	top = (at - keep) & ~((uintptr_t)page - 1);
	if (top > lo)
		(void)madvise((void *)lo, top - lo, MADV_DONTNEED);
}

int supervise(struct jail *j)
{
	enum next next = arm_timer(j) ? GO_ON : STOP;

	/*
	 * What the set-up allocated (the seccomp filter's compiler, bwrap's
	 * command line, the image's metadata) is freed by now: give its pages
	 * back, so the jail costs about 140 kB less for the rest of its life.
	 * The same for the stack the set-up went through, but for 8 kB below
	 * this frame.
	 */
	malloc_trim(0);
	stack_release(&next, 8192);

	while (next != STOP) {
		struct pollfd p[4] = { { j->sfd, POLLIN, 0 }, { j->tfd, POLLIN, 0 }, { j->lfd, POLLIN, 0 },
				       { j->pfd, POLLIN, 0 } };

		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			break;
		}
		next = p[0].revents & POLLIN ? on_signal(j) : GO_ON;
		if (next == BWRAP_GONE) {
			jail_teardown(j, 1);
			return 0;
		}
		if (next == GO_ON && (p[2].revents & POLLIN))
			token_serve(j->lfd);
		if (next == GO_ON && (p[3].revents & POLLIN))
			ports_serve(j->pfd, j->bwrap_pid);
		if (next == GO_ON && (p[1].revents & POLLIN))
			next = on_timer(j);
	}
	jail_teardown(j, 0);
	return 0;
}
