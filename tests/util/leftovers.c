/* Killing what a failed test left running, and finding a process's child by name (leftovers.h). */
#include "leftovers.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

void kill_local_leftovers(hangar_ctx *ctx, const char *state_dir)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/local", state_dir);
	d = opendir(dir);
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
