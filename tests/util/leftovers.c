/* Killing what a failed test left running, and finding a process's child by name (leftovers.h). */
#define _GNU_SOURCE
#include "leftovers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *run_of(const char *state_dir)
{
	static char buf[4][PATH_MAX];
	static unsigned next;
	char *out = buf[next++ % 4], link[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "%s/local/run", state_dir);
	n = readlink(link, out, PATH_MAX - 1);
	if (n > 0)
		out[n] = '\0';
	else
		snprintf(out, PATH_MAX, "%s/local", state_dir);
	return out;
}

void remove_run_dir(const char *state_dir)
{
	char link[PATH_MAX], target[PATH_MAX], cmd[PATH_MAX + 16];
	ssize_t n;

	snprintf(link, sizeof(link), "%s/local/run", state_dir);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	if (strchr(target, '\'') == NULL && snprintf(cmd, sizeof(cmd), "rm -rf '%s'", target) < (int)sizeof(cmd) &&
	    system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", target);
}

void kill_local_leftovers(hangar_ctx *ctx, const char *state_dir)
{
	struct dirent *de;
	DIR *d;

	d = opendir(run_of(state_dir));
	while (d && (de = readdir(d))) {
		hangar_sandbox *sb = NULL;

		if (de->d_name[0] == '.')
			continue;
		if (hangar_sandbox_attach(&sb, ctx, "local", de->d_name) == 0)
			hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	if (d)
		closedir(d);
	remove_run_dir(state_dir);
}

hangar_ctx *leftovers_ctx(const char *state_dir)
{
	hangar_ctx *ctx = NULL;

	if (hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV) != 0 || hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) != 0) {
		hangar_ctx_unref(ctx);
		return NULL;
	}
	if (getenv("HANGAR_ENVD_PATH"))
		hangar_ctx_set(ctx, "HANGAR_ENVD_PATH", getenv("HANGAR_ENVD_PATH"));
	if (getenv("HANGAR_JAIL_PATH"))
		hangar_ctx_set(ctx, "HANGAR_JAIL_PATH", getenv("HANGAR_JAIL_PATH"));
	return ctx;
}

void leftovers_watch(const char *state_dir, const char *remove)
{
	int p[2];
	pid_t pid;

	/* Close-on-exec: only this process (and forks that have not exec'd) keeps the write end. */
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		hangar_ctx *ctx = NULL;
		char c, cmd[PATH_MAX + 16];
		struct stat st;

		close(p[1]);
		/* Out of the test's process group, which the test runner kills once the test ends. */
		setsid();
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		/* As the state directory's owner, as the teardown would have: the test may have become another user. */
		if (stat(state_dir, &st) == 0 && geteuid() == 0 && st.st_uid != 0 &&
		    (setgid(st.st_gid) < 0 || setuid(st.st_uid) < 0))
			fprintf(stderr, "cannot become the owner of %s\n", state_dir);
		if (access(state_dir, F_OK) == 0 && (ctx = leftovers_ctx(state_dir)) != NULL)
			kill_local_leftovers(ctx, state_dir);
		hangar_ctx_unref(ctx);
		if (access(remove, F_OK) == 0 && snprintf(cmd, sizeof(cmd), "rm -rf '%s'", remove) < (int)sizeof(cmd) &&
		    system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", remove);
		_exit(0);
	}
	close(p[0]);
	if (pid < 0)
		close(p[1]);
	/* Otherwise p[1] stays open until this process ends: its end is the watcher's word. */
}

/* The pid of the child named comm of pid (from its children file in /proc), or 0. */
int proc_child_named(int pid, const char *comm)
{
	char path[PATH_MAX], name[64];
	int kid, found = 0;
	FILE *f, *c;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	f = fopen(path, "re");
	while (f && !found && fscanf(f, "%d", &kid) == 1) {
		snprintf(path, sizeof(path), "/proc/%d/comm", kid);
		c = fopen(path, "re");
		if (c && fgets(name, sizeof(name), c) && !strncmp(name, comm, strlen(comm)) &&
		    name[strlen(comm)] == '\n')
			found = kid;
		if (c)
			fclose(c);
	}
	if (f)
		fclose(f);
	return found;
}
