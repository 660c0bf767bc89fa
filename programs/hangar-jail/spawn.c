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
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/*
 * The parent's half of the user namespace: waits for the child's unshare,
 * maps range onto it, lets it go on. up[0] is left in *ns_ready, where the
 * child writes once more when its network namespace is made (or closes it
 * by dying), or closed with -1 there when the child was not let go on.
 */
static void map_child(pid_t pid, const struct uid_range *range, int up[2], int down[2], int *ns_ready)
{
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
	close(down[1]);
	if (ok) {
		*ns_ready = up[0];
	} else {
		close(up[0]);
		*ns_ready = -1;
	}
}

/* The descriptors bwrap keeps across its exec (close-on-exec until now). 0, or -1 said. */
static int keep_fds(const struct jail_spec *s)
{
	const int keep[] = { s->token_fd, s->seccomp_fd, s->listen_fd, s->info_fd, s->ready_fd };

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (keep[i] >= 0 && fcntl(keep[i], F_SETFD, 0) < 0) {
			say("cannot pass descriptor %d on: %s", keep[i], strerror(errno));
			return -1;
		}
	return 0;
}

/*
 * The child's half: into the sandbox's user namespace (range), mapped by
 * the parent; the stage built; the commands' namespace and the network
 * namespace made. 0, or -1 said.
 */
static int enter_namespaces(const struct jail *j, const struct uid_range *range, int up[2], int down[2])
{
	close(up[0]);
	close(down[1]);
	if (range->sub) {
		/*
		 * newuidmap maps only a process the caller owns, as /proc shows
		 * it: dumpable (no token is left here; bwrap's exec decides
		 * afresh). The stage is built inside, where the mounts are ours.
		 */
		prctl(PR_SET_DUMPABLE, 1);
		if (enter_userns(up[1], down[0]) < 0 || stage_build(&j->spec, range) < 0)
			return -1;
	} else if (stage_build(&j->spec, range) < 0 || enter_userns(up[1], down[0]) < 0) {
		return -1;
	}
	if (inner_userns(range, j->spec.inner_fd) < 0 || own_netns() < 0)
		return -1;
	/*
	 * The network namespace is there: with network on, the jail starts
	 * slirp4netns on it while bwrap starts (net.c). Off, the jail reads
	 * nothing more here (and may have closed its end).
	 */
	if (j->spec.meta->network && write(up[1], "n", 1) != 1)
		return -1;
	close(up[1]);
	close(down[0]);
	return 0;
}

/*
 * In the child: the sandbox's cgroups (the freezer's unless it was born
 * there, born_in; then its v1 limits), then (range) its namespaces, then
 * bwrap.
 */
static void __attribute__((noreturn)) run_bwrap(const struct jail *j, const struct uid_range *range, int up[2],
						int down[2], int born_in)
{
	sigset_t none;

	forget_token(); /* envd gets it from the pipe; bwrap has no use for it */
	if (keep_fds(&j->spec) < 0)
		_exit(126);
	/* The child joins its cgroups first, so bwrap and everything under it is in them. */
	if (!born_in && freezer_join(&j->freezer) < 0)
		_exit(126);
	if (limits_join(&j->lcg) < 0) {
		say("cannot join the sandbox's limit cgroups: %s", strerror(errno));
		_exit(126);
	}
	mark("child-cgroups");
	if (range && enter_namespaces(j, range, up, down) < 0)
		_exit(126);
	mark("child-namespaces");
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL); /* commands in the sandbox must not inherit SIG_IGN */
	execv(j->argv.v[0], j->argv.v);
	say("cannot run %s: %s", j->argv.v[0], strerror(errno));
	_exit(127);
}

/*
 * A child born in the sandbox's cgroup v2 (clone3 with CLONE_INTO_CGROUP,
 * Linux 5.7), rather than one that moves itself there: moving a whole
 * process takes the kernel's cgroup migration lock as a writer, and the
 * first writer after a quiet spell waits for an RCU grace period, 6 to
 * 20 ms (cgroup.c). As
 * fork(): the pid, 0 in the child, -1 with errno; -2 when it cannot be
 * done here (no cgroup v2 freezer, or an older kernel), for a fork and a
 * join instead.
 */
static pid_t fork_into_cgroup(const struct freezer *f)
{
	struct clone_args args;
	pid_t pid;
	int cg;

	if (strcmp(f->kind, "v2") != 0)
		return -2;
	cg = open(f->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return -2;
	memset(&args, 0, sizeof(args));
	args.flags = CLONE_INTO_CGROUP;
	args.exit_signal = SIGCHLD;
	args.cgroup = (uint64_t)cg;
	pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (pid != 0)
		close(cg);
	if (pid < 0 && (errno == ENOSYS || errno == EINVAL || errno == E2BIG || errno == EOPNOTSUPP ||
			errno == EBUSY || errno == EPERM))
		return -2;
	return pid;
}

/*
 * With the jail's own user namespace (j->ids), the child first moves into
 * a user namespace of its own whose ids the parent maps to the range
 * (spawn_bwrap_map).
 */
pid_t spawn_bwrap(const struct jail *j, struct bwrap_pipes *p)
{
	const struct uid_range *range = uid_range_owned(&j->ids) ? &j->ids : NULL;
	pid_t pid;

	p->up[0] = p->up[1] = p->down[0] = p->down[1] = -1;
	if (range && (pipe2(p->up, O_CLOEXEC) < 0 || pipe2(p->down, O_CLOEXEC) < 0))
		return -1; /* spawn_bwrap_map closes what was made */
	pid = fork_into_cgroup(&j->freezer);
	if (pid == 0)
		run_bwrap(j, range, p->up, p->down, 1);
	if (pid == -2)
		pid = fork();
	if (pid == 0)
		run_bwrap(j, range, p->up, p->down, 0);
	return pid;
}

int spawn_bwrap_map(const struct jail *j, pid_t pid, struct bwrap_pipes *p)
{
	int ns_ready = -1;

	if (pid > 0 && uid_range_owned(&j->ids)) {
		map_child(pid, &j->ids, p->up, p->down, &ns_ready);
		return ns_ready;
	}
	for (int i = 0; i < 2; i++) {
		if (p->up[i] >= 0)
			close(p->up[i]);
		if (p->down[i] >= 0)
			close(p->down[i]);
		p->up[i] = p->down[i] = -1;
	}
	return -1;
}
