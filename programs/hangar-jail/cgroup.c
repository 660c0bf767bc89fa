/*
 * The sandbox's freezer cgroup: where pausing freezes it (the library writes
 * its freezer file) and where teardown finds every process it still has.
 * cgroup v2 (below HANGAR_JAIL_CGROUP, the jail's own cgroup, or the root),
 * else the v1 freezer hierarchy, else none (pausing is SIGSTOP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

char cg_kind[8] = "none";
char cg_path[PATH_MAX];

/* Tries to make parent/hangar/<id> with the freezer file `file`. */
static int try_cgroup(const char *kind, const char *parent, const char *file)
{
	char hangar[PATH_MAX], path[PATH_MAX], probe[PATH_MAX + 32];

	if (snprintf(hangar, sizeof(hangar), "%s/hangar", parent) >= (int)sizeof(hangar) ||
	    snprintf(path, sizeof(path), "%s/%s", hangar, jail_id) >= (int)sizeof(path))
		return -1;
	if (mkdir(hangar, 0755) < 0 && errno != EEXIST)
		return -1;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	snprintf(probe, sizeof(probe), "%s/%s", path, file);
	if (access(probe, W_OK) < 0) {
		rmdir(path);
		return -1;
	}
	snprintf(cg_kind, sizeof(cg_kind), "%s", kind);
	snprintf(cg_path, sizeof(cg_path), "%s", path);
	return 0;
}

/* The jail's own cgroup v2 path ("0::/x/y" in /proc/self/cgroup), or NULL. */
static char *own_v2_cgroup(void)
{
	char *text = lstate_read_file("/proc/self/cgroup", 1 << 20, NULL), *line, *save = NULL, *res = NULL;

	if (!text)
		return NULL;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "0::", 3)) {
			res = strdup(line + 3);
			break;
		}
	free(text);
	return res;
}

void setup_cgroup(void)
{
	const char *want = getenv("HANGAR_JAIL_FREEZER");
	const char *v2root = NULL;

	if (!want || !*want)
		want = "auto";
	if (exists("/sys/fs/cgroup/cgroup.controllers"))
		v2root = "/sys/fs/cgroup";
	else if (exists("/sys/fs/cgroup/unified/cgroup.controllers"))
		v2root = "/sys/fs/cgroup/unified"; /* hybrid hierarchy */
	if (v2root && (!strcmp(want, "auto") || !strcmp(want, "v2"))) {
		char *own = own_v2_cgroup();
		const char *base = limits_v2_base(); /* HANGAR_JAIL_CGROUP: a cgroup that can hand limits down */
		char parent[PATH_MAX];

		if (base) {
			if (try_cgroup("v2", base, "cgroup.freeze") == 0) {
				free(own);
				return;
			}
			say("cannot make the sandbox's cgroup in HANGAR_JAIL_CGROUP %s: %s", base, strerror(errno));
		}
		if (own && strcmp(own, "/") != 0 &&
		    snprintf(parent, sizeof(parent), "%s%s", v2root, own) < (int)sizeof(parent) &&
		    try_cgroup("v2", parent, "cgroup.freeze") == 0) {
			free(own);
			return;
		}
		free(own);
		if (try_cgroup("v2", v2root, "cgroup.freeze") == 0)
			return;
	}
	if ((!strcmp(want, "auto") || !strcmp(want, "v1")) && exists("/sys/fs/cgroup/freezer/tasks") &&
	    try_cgroup("v1", "/sys/fs/cgroup/freezer", "freezer.state") == 0)
		return;
	if (strcmp(want, "none") != 0)
		say("no freezer cgroup available; pausing will stop processes with SIGSTOP");
}

void thaw(void)
{
	char path[PATH_MAX + 32];

	if (!strcmp(cg_kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", cg_path);
		lstate_write_str(path, "0");
	} else if (!strcmp(cg_kind, "v1")) {
		snprintf(path, sizeof(path), "%s/freezer.state", cg_path);
		lstate_write_str(path, "THAWED");
	}
}

/* SIGKILLs every process still in the sandbox's cgroup and waits for each. */
void kill_cgroup_members(int64_t deadline)
{
	char path[PATH_MAX + 32];

	if (!strcmp(cg_kind, "none"))
		return;
	if (!strcmp(cg_kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.kill", cg_path);
		lstate_write_str(path, "1"); /* absent before Linux 5.14: the loop below does it */
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg_path);
	while (mono_ms() < deadline) {
		FILE *f = fopen(path, "re");
		int pid, any = 0;

		if (!f)
			return;
		while (fscanf(f, "%d", &pid) == 1) {
			any = 1;
			kill(pid, SIGKILL);
			reap(0, NULL);
			wait_gone(pid, deadline);
			reap(0, NULL);
		}
		fclose(f);
		if (!any)
			return;
	}
}
