/*
 * hangar-envd-init: pid 1 of a local sandbox, in place of bubblewrap's own.
 *
 * A pid namespace needs a first process that reaps what is orphaned in it
 * (a command's background children, once the command is gone). bubblewrap
 * makes that process by forking itself, which costs each sandbox a second
 * copy of bwrap with its libraries relocated and its set-up's heap: about
 * 200 KiB. This program is the same job for a fraction of it: static, no
 * library to load, no allocation. bwrap runs it as pid 1 (--as-pid-1); it
 * starts its arguments (hangar-envd) as its only child, reaps every child
 * it is given, and ends with the status of the first when that one ends,
 * which ends the namespace and everything left in it.
 *
 * It keeps no descriptor of envd's (the socket, the pipes): they are closed
 * here once envd has them, so that envd's end of each is the only one.
 * Signals: as pid 1 it takes none that it has no handler for from inside
 * its namespace, and it sets none; from outside (the supervisor's SIGKILL)
 * it dies as any process does, and the namespace with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	pid_t main_pid;
	int status;

	if (argc < 2 || argv[1][0] != '/') {
		fputs("usage: hangar-envd-init /PROGRAM [ARG...]\n", stderr);
		return 2;
	}
	main_pid = fork();
	if (main_pid < 0) {
		fprintf(stderr, "hangar-envd-init: fork: %s\n", strerror(errno));
		return 126;
	}
	if (main_pid == 0) {
		execv(argv[1], argv + 1);
		fprintf(stderr, "hangar-envd-init: cannot run %s: %s\n", argv[1], strerror(errno));
		_exit(127);
	}
	/* Every descriptor past stderr is envd's now. A filter that refuses
	 * close_range leaves them open: they close when this ends. */
	syscall(SYS_close_range, 3U, ~0U, 0U);
	for (;;) {
		pid_t p = wait(&status);

		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			return 126; /* no child left: cannot happen before envd's end */
		if (p == main_pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	}
}
