/*
 * Starting bwrap: a child that joins the sandbox's cgroups, moves into its
 * user and network namespaces (built with the parent's help) and runs bwrap.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/*
 * Runs bwrap; keep[] (the token pipe, the sandbox's descriptors) are the
 * close-on-exec descriptors it keeps. With range, the child first moves into
 * a user namespace of its own whose ids the parent maps to the range.
 */
pid_t spawn_bwrap(char **argv, const int *keep, size_t nkeep, const struct uid_range *range,
			 const char *envd, unsigned disk_mb, int inner_at)
{
	char procs[PATH_MAX + 32];
	int up[2] = { -1, -1 }, down[2] = { -1, -1 };
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_path);
	if (range && (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0))
		return -1;
	pid = fork();
	if (pid > 0 && range) {
		int ok;

		close(up[1]);
		close(down[0]);
		ok = wait_byte(up[0]) == 0;
		if (ok && uid_range_map(pid, range) < 0) {
			say("cannot map the sandbox's user namespace to %u..%u: %s", range->base,
			    range->base + range->count - 1, strerror(errno));
			ok = 0;
		}
		/* Either way the child goes on: on failure it reads EOF and exits. */
		if (ok && write(down[1], "g", 1) != 1)
			ok = 0;
		close(up[0]);
		close(down[1]);
		return pid;
	}
	if (pid != 0)
		return pid;
	forget_token(); /* envd gets it from the pipe; bwrap has no use for it */
	for (size_t i = 0; i < nkeep; i++)
		if (fcntl(keep[i], F_SETFD, 0) < 0) {
			say("cannot pass descriptor %d on: %s", keep[i], strerror(errno));
			_exit(126);
		}
	/* The child joins the freezer cgroup first, so bwrap and everything under it is in it. */
	if (strcmp(cg_kind, "none") != 0) {
		char self[32];

		snprintf(self, sizeof(self), "%d", (int)getpid());
		if (lstate_write_str(procs, self) < 0) {
			say("cannot join cgroup %s: %s", cg_path, strerror(errno));
			_exit(126);
		}
	}
	if (limits_join(&jail_lcg, getpid()) < 0) {
		say("cannot join the sandbox's limit cgroups: %s", strerror(errno));
		_exit(126);
	}
	if (range && range->sub) {
		close(up[0]);
		close(down[1]);
		/*
		 * newuidmap maps only a process the caller owns, as /proc shows
		 * it: dumpable (no token is left here; bwrap's exec decides
		 * afresh). The stage is built inside, where the mounts are ours.
		 */
		prctl(PR_SET_DUMPABLE, 1);
		if (enter_userns(up[1], down[0]) < 0 || build_stage(envd, range, disk_mb) < 0 ||
		    inner_userns(range, inner_at) < 0 || own_netns() < 0)
			_exit(126);
		close(up[1]);
		close(down[0]);
	} else if (range) {
		close(up[0]);
		close(down[1]);
		if (build_stage(envd, range, disk_mb) < 0 || enter_userns(up[1], down[0]) < 0 ||
		    inner_userns(range, inner_at) < 0 || own_netns() < 0)
			_exit(126);
		close(up[1]);
		close(down[0]);
	}
	{
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL); /* commands in the sandbox must not inherit SIG_IGN */
	}
	execv(argv[0], argv);
	say("cannot run %s: %s", argv[0], strerror(errno));
	_exit(127);
}
