/* A local sandbox's limits and usage (usage.c), for local.c. */
#pragma once

#include <limits.h>

#include <hangar/sandbox.h>

struct usage_limits {
	unsigned long long memory_mb, pids, cpus, disk_mb;
	char cgroup[3][PATH_MAX];   /* memory, pids, cpu; "": no cgroup limits it */
	int v2[3];
	int rlimit_pids;            /* pids held by RLIMIT_NPROC ("pids rlimit N") */
	char why[3][512];           /* "X none WHY": why nothing limits it ("" when not said) */
};

/* 1 when the jail recorded that limit i (memory, pids, cpu) holds. */
#define USAGE_HOLDS(u, i) ((u)->cgroup[i][0] || ((i) == 1 && (u)->rlimit_pids))

#define USAGE_EVENTS 6 /* three limits reached, three that do not hold */
#define USAGE_MSG_MAX 768

/* Where every cgroup dir/limits may name lies, with a trailing slash: /sys/fs/cgroup/ (tests point it elsewhere). */
extern const char *usage_cgroup_root;

/* Reads dir/limits. 0 or -errno. */
int usage_read_limits(const char *dir, const char *id, struct usage_limits *u);
/*
 * One sample now: memory and disk used against the limits, the CPU count,
 * processes. A limit that does not hold is 0 (mem_total_bytes, cpu_count,
 * pids_max); processes are counted even then. 0 or -errno.
 */
int usage_metric(const char *dir, const char *id, int jail_pid, hangar_sandbox_metric *m);
/* The limits the sandbox has hit, and those that do not hold, as log lines with their levels: how many, or -errno. */
int usage_events(const char *dir, const char *id, int jail_pid, char msgs[USAGE_EVENTS][USAGE_MSG_MAX],
		 const char **levels);
/* How many processes the OOM killer killed in the sandbox's memory cgroup, or -1 (none, unreadable). */
long long usage_oom_kills(const char *dir, const char *id);
/* Removes the v1 limit cgroups a dead jail left (they must be empty). */
void usage_remove_cgroups(const char *dir, const char *id);
