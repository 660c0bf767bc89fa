/*
 * A local sandbox's limits and what it uses of them, from the dir/limits
 * file its jail writes (programs/hangar-jail/limits.c) and the cgroups it
 * names: metrics (memory, processes, CPUs, disk) and limit events as log entries (the
 * OOM killer, refused forks, a full file system).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <dirent.h>
#include <unistd.h>

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"
#include "util/clock.h"
#include "lstate.h"
#include "usage.h"

static const char *const controllers[3] = { "memory", "pids", "cpu" };

const char *usage_cgroup_root = "/sys/fs/cgroup/";

/* 1 when path is a cgroup directory of this sandbox's (no "..", under usage_cgroup_root, naming id). */
static int sane_cgroup(const char *path, const char *id)
{
	return !strncmp(path, usage_cgroup_root, strlen(usage_cgroup_root)) && strstr(path, id) &&
	       !strstr(path, "..");
}

int usage_read_limits(const char *dir, const char *id, struct usage_limits *u)
{
	char path[PATH_MAX], *text, *line, *save = NULL;

	memset(u, 0, sizeof(*u));
	snprintf(path, sizeof(path), "%s/limits", dir);
	text = lstate_read_file(path, 64 * 1024, NULL);
	if (!text)
		return -errno;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[16], kind[8], cg[PATH_MAX];
		unsigned long long v;
		int i = -1, at = 0;

		if (sscanf(line, "%15s %7s %n", key, kind, &at) != 2)
			continue;
		for (int k = 0; k < 3; k++)
			if (!strcmp(key, controllers[k]))
				i = k;
		if (i >= 0 && !strcmp(kind, "none")) {
			/* "memory none WHY": nothing limits it, and why. */
			snprintf(u->why[i], sizeof(u->why[i]), "%s", line + at);
		} else if (i == 1 && !strcmp(kind, "rlimit")) {
			u->rlimit_pids = 1;
		} else if (i >= 0 && sscanf(line, "%15s %3s %4095s", key, kind, cg) == 3 && cg[0] == '/') {
			if (sane_cgroup(cg, id) && strlen(cg) < sizeof(u->cgroup[i])) {
				strcpy(u->cgroup[i], cg);
				u->v2[i] = !strcmp(kind, "v2");
			}
		} else if (sscanf(line, "%15s %llu", key, &v) == 2) {
			if (!strcmp(key, "memory_mb"))
				u->memory_mb = v;
			else if (!strcmp(key, "pids"))
				u->pids = v;
			else if (!strcmp(key, "cpus"))
				u->cpus = v;
			else if (!strcmp(key, "disk_mb"))
				u->disk_mb = v;
		}
	}
	free(text);
	return 0;
}

/* The value of "key N" in a cgroup's flat-keyed file, or -1. */
static long long keyed(const char *cg, const char *file, const char *key)
{
	char path[PATH_MAX + 64], *text, *p;
	long long v = -1;
	size_t kl = strlen(key);

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	text = lstate_read_file(path, 64 * 1024, NULL);
	if (!text)
		return -1;
	for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ') {
			v = atoll(p + kl + 1);
			break;
		}
	free(text);
	return v;
}

static long long single(const char *cg, const char *file)
{
	char path[PATH_MAX + 64], *text;
	long long v;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	text = lstate_read_file(path, 4096, NULL);
	if (!text)
		return -1;
	v = atoll(text);
	free(text);
	return v;
}

/* The sandbox's pid 1 on the host: the jail's child (bwrap), then bwrap's child. 0 when none. */
static int sandbox_init(int jail_pid)
{
	int pid = lstate_jail_child(jail_pid);

	return pid > 0 ? lstate_first_child(pid) : 0;
}

#define TREE_MAX 65536

/*
 * Tasks (threads) of pid and every process below it, as pids.current and
 * RLIMIT_NPROC count them: each thread's children, since a child belongs
 * to the thread that forked it. At most TREE_MAX processes; 0 when pid is gone.
 */
static long long tree_tasks(int pid)
{
	int *stack = malloc(TREE_MAX * sizeof(int)), n = 0;
	long long tasks = 0;

	if (!stack)
		return 0;
	stack[n++] = pid;
	for (int seen = 0; n > 0 && seen < TREE_MAX; seen++) {
		char path[64];
		int p = stack[--n];
		DIR *d;
		struct dirent *de;

		snprintf(path, sizeof(path), "/proc/%d/task", p);
		d = opendir(path);
		while (d && (de = readdir(d))) {
			char cpath[320];
			FILE *f;
			int c;

			if (de->d_name[0] == '.')
				continue;
			tasks++;
			snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", p, de->d_name);
			f = fopen(cpath, "re");
			while (f && n < TREE_MAX && fscanf(f, "%d", &c) == 1)
				stack[n++] = c;
			if (f)
				fclose(f);
		}
		if (d)
			closedir(d);
	}
	free(stack);
	return tasks;
}

int usage_metric(const char *dir, const char *id, int jail_pid, hangar_sandbox_metric *m)
{
	struct usage_limits u;
	struct statvfs vfs;
	char path[96];
	int init, r = usage_read_limits(dir, id, &u);

	if (r < 0)
		return r;
	memset(m, 0, sizeof(*m));
	m->version = HANGAR_SANDBOX_METRIC_VERSION;
	m->size = sizeof(*m);
	m->timestamp_us = clock_wall_us();
	/* A limit is reported only where it holds (the record says which do). */
	if (USAGE_HOLDS(&u, 2))
		m->cpu_count = (uint32_t)u.cpus;
	if (u.cgroup[0][0]) {
		long long used = single(u.cgroup[0], u.v2[0] ? "memory.current" : "memory.usage_in_bytes");

		m->mem_total_bytes = u.memory_mb << 20;
		m->mem_used_bytes = used > 0 ? (uint64_t)used : 0;
	}
	if (USAGE_HOLDS(&u, 1))
		m->pids_max = u.pids <= UINT32_MAX ? (uint32_t)u.pids : UINT32_MAX;
	if (u.cgroup[1][0]) {
		long long used = single(u.cgroup[1], "pids.current");

		m->pids_used = used > 0 && used <= UINT32_MAX ? (uint32_t)used : 0;
	} else if (jail_pid > 0) {
		/* No pids cgroup counts them: bwrap and everything below it, as RLIMIT_NPROC does. */
		long long used = tree_tasks(lstate_jail_child(jail_pid));

		m->pids_used = used > 0 && used <= UINT32_MAX ? (uint32_t)used : 0;
	}
	init = sandbox_init(jail_pid);
	snprintf(path, sizeof(path), "/proc/%d/root/workspace", init);
	if (init > 0 && statvfs(path, &vfs) == 0) {
		m->disk_total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
		m->disk_used_bytes = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
	} else {
		m->disk_total_bytes = u.disk_mb << 20;
	}
	return 0;
}

long long usage_oom_kills(const char *dir, const char *id)
{
	struct usage_limits u;

	if (usage_read_limits(dir, id, &u) < 0 || !u.cgroup[0][0])
		return -1;
	/* v1's oom_control has an oom_kill line since Linux 4.13; v2's memory.events always. */
	return keyed(u.cgroup[0], u.v2[0] ? "memory.events" : "memory.oom_control", "oom_kill");
}

int usage_events(const char *dir, const char *id, int jail_pid, char msgs[USAGE_EVENTS][USAGE_MSG_MAX],
		 const char **levels)
{
	struct usage_limits u;
	struct hangar_sandbox_metric m;
	int n = 0, r = usage_read_limits(dir, id, &u);

	if (r < 0)
		return r;
	if (u.cgroup[0][0]) {
		long long kills = usage_oom_kills(dir, id);

		if (kills > 0) {
			snprintf(msgs[n], USAGE_MSG_MAX, "memory limit of %llu MB reached: the OOM killer killed %lld process%s",
				 u.memory_mb, kills, kills == 1 ? "" : "es");
			levels[n++] = "error";
		}
	}
	if (u.cgroup[1][0]) {
		long long refused = keyed(u.cgroup[1], "pids.events", "max");

		if (refused > 0) {
			snprintf(msgs[n], USAGE_MSG_MAX, "process limit of %llu reached: %lld fork%s refused", u.pids, refused,
				 refused == 1 ? "" : "s");
			levels[n++] = "warn";
		}
	}
	if (usage_metric(dir, id, jail_pid, &m) == 0 && m.disk_total_bytes > 0 &&
	    m.disk_used_bytes >= m.disk_total_bytes) {
		snprintf(msgs[n], USAGE_MSG_MAX, "disk limit of %llu MB reached: the sandbox's file system is full", u.disk_mb);
		levels[n++] = "warn";
	}
	/* What does not hold, and why, as the jail recorded it (a record without a line for it: no reason). */
	for (int i = 0; i < 3; i++)
		if (!USAGE_HOLDS(&u, i)) {
			static const char *const what[3] = { "memory", "process count", "CPU time" };

			snprintf(msgs[n], USAGE_MSG_MAX, "the sandbox's %s is not limited%s%s", what[i],
				 u.why[i][0] ? ": " : "", u.why[i]);
			levels[n++] = "warn";
		}
	return n;
}

void usage_remove_cgroups(const char *dir, const char *id)
{
	struct usage_limits u;

	if (usage_read_limits(dir, id, &u) < 0)
		return;
	for (int i = 0; i < 3; i++) {
		char *slash;

		if (!u.cgroup[i][0] || u.v2[i] || rmdir(u.cgroup[i]) < 0)
			continue;
		/* The jail's hangar/ too once empty (limits.c), so it never holds up the cgroup it is in. */
		slash = strrchr(u.cgroup[i], '/');
		*slash = '\0';
		slash = strrchr(u.cgroup[i], '/');
		if (slash && !strcmp(slash, "/hangar"))
			rmdir(u.cgroup[i]);
	}
}
