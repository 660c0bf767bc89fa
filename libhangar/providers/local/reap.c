/*
 * Waiting for the jails this process became the parent of.
 *
 * A jail detaches from the process that starts it, since it outlives the
 * call and that process, so its parent becomes the process that reaps
 * orphans: init, as a rule, which waits for it when it ends. But a caller
 * that is a child subreaper (PR_SET_CHILD_SUBREAPER: a service manager, a
 * container's init helper), or that is itself the first process of its
 * PID namespace (a program run as a container's entrypoint), becomes the
 * parent of every jail it starts; and a jail that ended stays a zombie
 * until that caller waits for it, one per sandbox for as long as the
 * caller runs, if it never waits for children it did not start.
 *
 * So the library waits for them itself, at each create, kill, list and
 * context's end: only where this process is such a reaper, only its
 * children that ended and are named hangar-jail, and each through a pidfd,
 * so that the status of none of the caller's own children is ever taken,
 * whatever a pid was reused for. A caller that waits for every child
 * (waitpid(-1)) is left nothing to find here, and loses nothing to it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "local.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Whether orphaned descendants of this process become its children. */
static int reaps_orphans(void)
{
	int sub = 0;

	return getpid() == 1 || (prctl(PR_GET_CHILD_SUBREAPER, &sub) == 0 && sub);
}

/* Whether /proc says pid is a zombie named hangar-jail whose parent is this process. */
static int ended_jail_of_ours(int pid)
{
	char path[64], buf[512], *close_paren;
	int ppid = 0, fd, n;
	char state = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) state ppid ...": comm may hold anything, so the last ')' ends it. */
	close_paren = strrchr(buf, ')');
	if (!close_paren || strncmp(buf + strcspn(buf, "("), "(hangar-jail)", 13) != 0 ||
	    sscanf(close_paren + 1, " %c %d", &state, &ppid) != 2)
		return 0;
	return state == 'Z' && ppid == getpid();
}

/* The one process named at pid, waited for if it is still an ended jail of ours. */
static void reap_one(int pid)
{
	siginfo_t si;
	int fd;

	if (!ended_jail_of_ours(pid))
		return;
	fd = local_pidfd_open(pid);
	if (fd < 0)
		return;
	/* Checked again through the pidfd's process: the pid may have been another's in between. */
	if (ended_jail_of_ours(pid)) {
		memset(&si, 0, sizeof(si));
		/* ECHILD: the caller waited for it first; EINVAL: a kernel before 5.4, which has no P_PIDFD. */
		(void)waitid((idtype_t)P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG);
	}
	close(fd);
}

void local_reap_jails(void)
{
	DIR *tasks;
	struct dirent *t;

	if (!reaps_orphans())
		return;
	/* An orphan goes to any live thread of its new parent: every thread's children are looked at. */
	tasks = opendir("/proc/self/task");
	if (!tasks)
		return;
	while ((t = readdir(tasks))) {
		char path[64];
		long pid;
		FILE *f;

		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/children", t->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		while (fscanf(f, "%ld", &pid) == 1)
			if (pid > 0)
				reap_one((int)pid);
		fclose(f);
	}
	closedir(tasks);
}
