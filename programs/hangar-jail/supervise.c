/*
 * Watching the sandbox and ending it: reaping children, the expiry timer
 * and the teardown that kills every process of the sandbox and removes
 * what the jail made for it.
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

/* Waits until pid has exited (it is our child or reparented to us), with a deadline. */
void wait_gone(pid_t pid, int64_t deadline)
{
	int fd = pidfd_open_(pid);

	if (fd < 0)
		return; /* already gone */
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) != 0)
			break;
	}
	close(fd);
}

/* The first child of pid (bwrap's child is the sandbox's pid 1), or 0. */
static pid_t ns_init(pid_t pid)
{
	char path[64];
	FILE *f;
	int child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &child) != 1)
		child = 0;
	fclose(f);
	return child;
}

/* Arms the timer for the expiry in meta.json; returns 0 when it already passed. */
int arm_timer(int tfd)
{
	struct lmeta m;
	struct itimerspec its = { 0 };
	int r = lstate_meta_read(jail_dir, &m);

	if (r < 0) {
		if (r == -ENOENT)
			return 0; /* the directory is gone: nothing left to supervise */
		say("cannot read meta.json: %s", strerror(-r));
		return 1; /* keep the current timer */
	}
	lstate_meta_clear(&m);
	if (m.expires_at_us > 0 && !m.paused) {
		if (m.expires_at_us <= now_us())
			return 0;
		its.it_value.tv_sec = m.expires_at_us / 1000000;
		its.it_value.tv_nsec = (m.expires_at_us % 1000000) * 1000;
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
	return 1;
}

void jail_teardown(pid_t bwrap, int bwrap_done)
{
	int64_t deadline = mono_ms() + TEARDOWN_DEADLINE_MS;
	char path[PATH_MAX];
	int r;

	/* Nothing is served from here on. */
	forget_token();
	/* A frozen task cannot die: thaw first. */
	thaw();
	if (!bwrap_done && bwrap > 0) {
		pid_t init = ns_init(bwrap);
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
			struct pollfd p = { fd, POLLIN, 0 };
			int64_t left = deadline - mono_ms();

			if (left > 0)
				poll(&p, 1, (int)left);
			close(fd);
		}
	}
	ports_stop();
	kill_cgroup_members(deadline);
	if (jail_slirp > 0) {
		kill(jail_slirp, SIGKILL);
		wait_gone(jail_slirp, deadline);
	}
	reap(0, NULL);
	limits_remove(&jail_lcg);
	if (strcmp(cg_kind, "none") != 0) {
		char *slash;

		if (rmdir(cg_path) < 0 && errno != ENOENT)
			say("cannot remove cgroup %s: %s", cg_path, strerror(errno));
		/* And .../hangar once empty, which would keep a delegated base from being removed. */
		slash = strrchr(cg_path, '/');
		if (slash) {
			*slash = '\0';
			rmdir(cg_path); /* fails while another sandbox is in it: left for the last one */
		}
	}
	snprintf(path, sizeof(path), "%s", jail_dir);
	r = lstate_rmtree_at(AT_FDCWD, path);
	if (r < 0)
		say("cannot remove %s: %s", path, strerror(-r));
	uid_range_release(jail_root, jail_id, &jail_ids);
}
