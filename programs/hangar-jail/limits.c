/*
 * A sandbox's resource limits: memory, processes and CPU in cgroups.
 *
 * cgroup v2 when the sandbox's v2 cgroup (the freezer's, from hangar-jail.c)
 * has the controller, which takes a delegated or root hierarchy whose parent
 * enables it; otherwise the cgroup v1 controller of that name, in
 * /sys/fs/cgroup/<controller>/hangar/<id>. A controller found in neither is
 * reported once and left unlimited (the size of the sandbox's file system
 * and of /dev/shm is enforced elsewhere, by tmpfs).
 *
 * The jail records what it set in dir/limits, one "key value" per line,
 * for the library (usage in `hangar sandbox info`, limit events in `hangar
 * sandbox logs`, clean-up after a jail that died):
 *   memory_mb N / pids N / cpus N / disk_mb N
 *   memory v1|v2 PATH / pids v1|v2 PATH / cpu v1|v2 PATH
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

static const char *const controllers[LIMIT_CONTROLLERS] = { "memory", "pids", "cpu" };

const char *limits_v1_root = "/sys/fs/cgroup";

static int has(const char *cg, const char *file)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return access(path, W_OK) == 0;
}

static int set(const char *cg, const char *file, const char *value)
{
	char path[PATH_MAX + 64];
	int r;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	r = lstate_write_str(path, value);
	if (r < 0)
		say("cannot set %s to %s: %s", path, value, strerror(-r));
	return r;
}

/* v2: asks the parent of cg to hand controller down to cg (best effort). */
static void v2_enable(const char *cg, const char *controller)
{
	char parent[PATH_MAX], path[PATH_MAX + 32], op[32];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", cg);
	slash = strrchr(parent, '/');
	if (!slash)
		return;
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", parent);
	snprintf(op, sizeof(op), "+%s", controller);
	lstate_write_str(path, op);
}

static int v1_make(const char *controller, const char *id, char *out, size_t size)
{
	char hangar[PATH_MAX];

	snprintf(hangar, sizeof(hangar), "%s/%s", limits_v1_root, controller);
	if (access(hangar, F_OK) < 0)
		return -1;
	snprintf(hangar, sizeof(hangar), "%s/%s/hangar", limits_v1_root, controller);
	if (mkdir(hangar, 0755) < 0 && errno != EEXIST)
		return -1;
	if (snprintf(out, size, "%s/%s", hangar, id) >= (int)size)
		return -1;
	if (mkdir(out, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static void apply(struct limit_cgroups *c, int i, const struct limits *l)
{
	const char *cg = c->path[i];
	int v2 = c->v2[i];
	char v[64];

	switch (i) {
	case 0:
		snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_mb << 20);
		if (v2) {
			set(cg, "memory.max", v);
			if (has(cg, "memory.swap.max"))
				set(cg, "memory.swap.max", "0");
		} else {
			set(cg, "memory.limit_in_bytes", v);
			if (has(cg, "memory.memsw.limit_in_bytes"))
				set(cg, "memory.memsw.limit_in_bytes", v);
		}
		break;
	case 1:
		snprintf(v, sizeof(v), "%u", l->pids);
		set(cg, "pids.max", v);
		break;
	case 2:
		if (v2) {
			snprintf(v, sizeof(v), "%u 100000", l->cpus * 100000);
			set(cg, "cpu.max", v);
		} else {
			set(cg, "cpu.cfs_period_us", "100000");
			snprintf(v, sizeof(v), "%u", l->cpus * 100000);
			set(cg, "cpu.cfs_quota_us", v);
		}
		break;
	}
}

void limits_setup(struct limit_cgroups *c, const struct limits *l, const char *id, const char *v2_cgroup)
{
	static const char *const v2_files[LIMIT_CONTROLLERS] = { "memory.max", "pids.max", "cpu.max" };

	memset(c, 0, sizeof(*c));
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		if (v2_cgroup && *v2_cgroup) {
			if (!has(v2_cgroup, v2_files[i]))
				v2_enable(v2_cgroup, controllers[i]);
			if (has(v2_cgroup, v2_files[i])) {
				snprintf(c->path[i], sizeof(c->path[i]), "%s", v2_cgroup);
				c->v2[i] = 1;
				apply(c, i, l);
				continue;
			}
		}
		if (v1_make(controllers[i], id, c->path[i], sizeof(c->path[i])) == 0) {
			apply(c, i, l);
			continue;
		}
		c->path[i][0] = '\0';
		say("no %s cgroup controller: the sandbox's %s is not limited", controllers[i],
		    i == 0 ? "memory" : i == 1 ? "process count" : "CPU time");
	}
}

int limits_join(const struct limit_cgroups *c, pid_t pid)
{
	char path[PATH_MAX + 32], text[32];

	snprintf(text, sizeof(text), "%d", (int)pid);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		if (!c->path[i][0] || c->v2[i])
			continue; /* v2: the freezer's cgroup, joined already */
		snprintf(path, sizeof(path), "%s/cgroup.procs", c->path[i]);
		if (lstate_write_str(path, text) < 0)
			return -1;
	}
	return 0;
}

void limits_remove(const struct limit_cgroups *c)
{
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		if (c->path[i][0] && !c->v2[i] && rmdir(c->path[i]) < 0 && errno != ENOENT)
			say("cannot remove cgroup %s: %s", c->path[i], strerror(errno));
}

int limits_record(const char *dir, const struct limit_cgroups *c, const struct limits *l)
{
	char text[4 * PATH_MAX], path[PATH_MAX];
	size_t n;

	n = (size_t)snprintf(text, sizeof(text), "memory_mb %u\npids %u\ncpus %u\ndisk_mb %u\n", l->memory_mb,
			     l->pids, l->cpus, l->disk_mb);
	for (int i = 0; i < LIMIT_CONTROLLERS && n < sizeof(text); i++)
		if (c->path[i][0])
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s %s %s\n", controllers[i],
					      c->v2[i] ? "v2" : "v1", c->path[i]);
	if (n >= sizeof(text))
		return -ENAMETOOLONG;
	snprintf(path, sizeof(path), "%s/limits", dir);
	return lstate_write_atomic(path, text, n, 0644);
}
