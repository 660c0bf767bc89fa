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
#include <unistd.h>

#include "../../core/internal.h"
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
		char key[16], kind[4], cg[PATH_MAX];
		unsigned long long v;

		if (sscanf(line, "%15s %3s %4095s", key, kind, cg) == 3 && cg[0] == '/') {
			for (int i = 0; i < 3; i++)
				if (!strcmp(key, controllers[i]) && sane_cgroup(cg, id) &&
				    strlen(cg) < sizeof(u->cgroup[i])) {
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
	char path[96];
	int pid = jail_pid;

	for (int depth = 0; depth < 2 && pid > 0; depth++) {
		FILE *f;
		int child = 0;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
		f = fopen(path, "re");
		if (!f || fscanf(f, "%d", &child) != 1)
			child = 0;
		if (f)
			fclose(f);
		pid = child;
	}
	return pid;
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
	m->timestamp_us = hnow_us();
	m->cpu_count = (uint32_t)u.cpus;
	m->mem_total_bytes = u.memory_mb << 20;
	if (u.cgroup[0][0]) {
		long long used = single(u.cgroup[0], u.v2[0] ? "memory.current" : "memory.usage_in_bytes");

		m->mem_used_bytes = used > 0 ? (uint64_t)used : 0;
	}
	/* Only where a cgroup enforces it (an unprivileged caller's sandboxes have none). */
	if (u.cgroup[1][0]) {
		long long used = single(u.cgroup[1], "pids.current");

		m->pids_max = u.pids <= UINT32_MAX ? (uint32_t)u.pids : UINT32_MAX;
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

int usage_events(const char *dir, const char *id, int jail_pid, char msgs[USAGE_EVENTS][256], const char **levels)
{
	struct usage_limits u;
	struct hangar_sandbox_metric m;
	int n = 0, r = usage_read_limits(dir, id, &u);

	if (r < 0)
		return r;
	if (u.cgroup[0][0]) {
		long long kills = usage_oom_kills(dir, id);

		if (kills > 0) {
			snprintf(msgs[n], 256, "memory limit of %llu MB reached: the OOM killer killed %lld process%s",
				 u.memory_mb, kills, kills == 1 ? "" : "es");
			levels[n++] = "error";
		}
	}
	if (u.cgroup[1][0]) {
		long long refused = keyed(u.cgroup[1], "pids.events", "max");

		if (refused > 0) {
			snprintf(msgs[n], 256, "process limit of %llu reached: %lld fork%s refused", u.pids, refused,
				 refused == 1 ? "" : "s");
			levels[n++] = "warn";
		}
	}
	if (usage_metric(dir, id, jail_pid, &m) == 0 && m.disk_total_bytes > 0 &&
	    m.disk_used_bytes >= m.disk_total_bytes) {
		snprintf(msgs[n], 256, "disk limit of %llu MB reached: the sandbox's file system is full", u.disk_mb);
		levels[n++] = "warn";
	}
	return n;
}

void usage_remove_cgroups(const char *dir, const char *id)
{
	struct usage_limits u;

	if (usage_read_limits(dir, id, &u) < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (u.cgroup[i][0] && !u.v2[i])
			rmdir(u.cgroup[i]);
}
