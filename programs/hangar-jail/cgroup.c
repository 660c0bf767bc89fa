/*
 * The sandbox's freezer cgroup: where pausing freezes it (the library writes
 * its freezer file) and where teardown finds every process it still has.
 * cgroup v2 (below HANGAR_JAIL_CGROUP, the jail's own cgroup, or the root),
 * else the v1 freezer hierarchy, else none (pausing is SIGSTOP).
 *
 * How the sandbox gets into its cgroups, and why that way: moving a whole
 * process (a pid written to cgroup.procs, or to tasks) takes the kernel's
 * cgroup threadgroup lock as a writer, one lock for every hierarchy, and
 * the first writer after a quiet spell waits for an RCU grace period, 6 to
 * 20 ms, unless a hierarchy is mounted with favordynmods. So no process is
 * moved that way on a create's path:
 *   - where the freezer is a cgroup v2, bwrap's child is born in it
 *     (clone3 with CLONE_INTO_CGROUP, Linux 5.7: spawn.c), which takes the
 *     lock only as a reader;
 *   - into a cgroup v1 (the v1 freezer, the v1 limits of limits.c), that
 *     child moves itself, still single-threaded, by writing "0" to the
 *     cgroup's tasks file: a thread moving itself takes no such lock
 *     (Linux 5.17, and the stable kernels it went back to), and being the
 *     process's only thread it moves the whole process.
 * Only where clone3 is refused (an older kernel, or a seccomp profile that
 * denies it) does the child join a cgroup v2 by its pid, and wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/* Tries to make parent/hangar/<id> with the freezer file `file`. */
static int try_cgroup(struct freezer *f, const char *id, const char *kind, const char *parent, const char *file)
{
	char hangar[PATH_MAX], path[PATH_MAX], probe[PATH_MAX + 32];

	if (snprintf(hangar, sizeof(hangar), "%s/hangar", parent) >= (int)sizeof(hangar) ||
	    snprintf(path, sizeof(path), "%s/%s", hangar, id) >= (int)sizeof(path))
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
	snprintf(f->kind, sizeof(f->kind), "%s", kind);
	snprintf(f->path, sizeof(f->path), "%s", path);
	return 0;
}

/* cgroup v2 mounted at v2root: below HANGAR_JAIL_CGROUP, the jail's own cgroup, or the root. 0 or -1. */
static int setup_v2(struct freezer *f, const char *id, const char *v2root)
{
	const char *base = limits_v2_base(); /* HANGAR_JAIL_CGROUP: a cgroup that can hand limits down */
	char own[PATH_MAX], parent[PATH_MAX];

	if (base) {
		if (try_cgroup(f, id, "v2", base, "cgroup.freeze") == 0)
			return 0;
		say("cannot make the sandbox's cgroup in HANGAR_JAIL_CGROUP %s: %s", base, strerror(errno));
	}
	if (own_cgroup(NULL, own, sizeof(own)) == 0 && strcmp(own, "/") != 0 &&
	    snprintf(parent, sizeof(parent), "%s%s", v2root, own) < (int)sizeof(parent) &&
	    try_cgroup(f, id, "v2", parent, "cgroup.freeze") == 0)
		return 0;
	return try_cgroup(f, id, "v2", v2root, "cgroup.freeze");
}

/* Where the cgroup v2 hierarchy is mounted (a hybrid host's unified one), or NULL. */
static const char *v2_root(void)
{
	if (exists("/sys/fs/cgroup/cgroup.controllers"))
		return "/sys/fs/cgroup";
	if (exists("/sys/fs/cgroup/unified/cgroup.controllers"))
		return "/sys/fs/cgroup/unified"; /* hybrid hierarchy */
	return NULL;
}

/* Whether HANGAR_JAIL_FREEZER lets the freezer be of kind ("v2", "v1" or "none"). */
static int freezer_allowed(const char *kind)
{
	const char *want = getenv("HANGAR_JAIL_FREEZER");

	if (!want || !*want || !strcmp(want, "auto"))
		return strcmp(kind, "none") != 0;
	return !strcmp(want, kind);
}

void freezer_setup(struct freezer *f, const char *id)
{
	const char *v2root = v2_root();

	snprintf(f->kind, sizeof(f->kind), "none");
	f->path[0] = '\0';
	if (v2root && freezer_allowed("v2") && setup_v2(f, id, v2root) == 0)
		return;
	if (freezer_allowed("v1") && exists("/sys/fs/cgroup/freezer/tasks") &&
	    try_cgroup(f, id, "v1", "/sys/fs/cgroup/freezer", "freezer.state") == 0)
		return;
	if (!freezer_allowed("none"))
		say("no freezer cgroup available; pausing will stop processes with SIGSTOP");
}

const char *freezer_v2(const struct freezer *f)
{
	return !strcmp(f->kind, "v2") ? f->path : NULL;
}

const char *freezer_v2_relative(const struct freezer *f)
{
	const char *root = freezer_v2(f) ? v2_root() : NULL;
	size_t n = root ? strlen(root) : 0;

	return root && !strncmp(f->path, root, n) && f->path[n] == '/' ? f->path + n : NULL;
}

void freezer_record(const struct freezer *f, const char *dir)
{
	char text[PATH_MAX + 16], path[PATH_MAX];

	if (!strcmp(f->kind, "none"))
		snprintf(text, sizeof(text), "none\n");
	else
		snprintf(text, sizeof(text), "%s %s\n", f->kind, f->path);
	snprintf(path, sizeof(path), "%s/cgroup", dir);
	lstate_write_atomic(path, text, strlen(text), 0600);
}

int freezer_join(const struct freezer *f)
{
	char procs[PATH_MAX + 32], self[32];
	int v1 = !strcmp(f->kind, "v1");

	if (!strcmp(f->kind, "none"))
		return 0;
	/* v1: this thread, the only one, moving itself; v2 has no such move for a whole process. */
	snprintf(procs, sizeof(procs), "%s/%s", f->path, v1 ? "tasks" : "cgroup.procs");
	snprintf(self, sizeof(self), "%d", v1 ? 0 : (int)getpid());
	if (lstate_write_str(procs, self) < 0) {
		say("cannot join cgroup %s: %s", f->path, strerror(errno));
		return -1;
	}
	return 0;
}

void freezer_thaw(const struct freezer *f)
{
	char path[PATH_MAX + 32];

	if (!strcmp(f->kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", f->path);
		lstate_write_str(path, "0");
	} else if (!strcmp(f->kind, "v1")) {
		snprintf(path, sizeof(path), "%s/freezer.state", f->path);
		lstate_write_str(path, "THAWED");
	}
}

void freezer_kill(const struct freezer *f, int64_t deadline)
{
	char path[PATH_MAX + 32];

	if (!strcmp(f->kind, "none"))
		return;
	if (!strcmp(f->kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.kill", f->path);
		lstate_write_str(path, "1"); /* absent before Linux 5.14: the loop below does it */
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", f->path);
	while (clock_mono_ms() < deadline) {
		FILE *in = fopen(path, "re");
		int pid, any = 0;

		if (!in)
			return;
		while (fscanf(in, "%d", &pid) == 1) {
			any = 1;
			kill(pid, SIGKILL);
			reap(0, NULL);
			wait_gone(pid, deadline);
			reap(0, NULL);
		}
		fclose(in);
		if (!any)
			return;
	}
}

void freezer_remove(const struct freezer *f)
{
	char parent[PATH_MAX], *slash;

	if (!strcmp(f->kind, "none"))
		return;
	if (rmdir(f->path) < 0 && errno != ENOENT)
		say("cannot remove cgroup %s: %s", f->path, strerror(errno));
	/* And .../hangar once empty, which would keep a delegated base from being removed. */
	snprintf(parent, sizeof(parent), "%s", f->path);
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		rmdir(parent); /* fails while another sandbox is in it: left for the last one */
	}
}
