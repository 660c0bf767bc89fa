/* Killing what a failed test left running (leftovers.h). */
#include "leftovers.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>

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
