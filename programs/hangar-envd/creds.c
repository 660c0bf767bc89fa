/* File access with a request user's credentials (see creds.h). */
#define _GNU_SOURCE
#include "creds.h"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int envd_user_groups(const struct envd_user *u, gid_t *groups, int max)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static char name[64];
	static gid_t gid, cached[ENVD_MAX_GROUPS];
	static int ncached;
	static struct timespec mtime;
	struct stat st;
	int n;

	if (stat("/etc/group", &st) < 0)
		memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&mu);
	if (strcmp(name, u->name) != 0 || gid != u->gid || st.st_mtim.tv_sec != mtime.tv_sec ||
	    st.st_mtim.tv_nsec != mtime.tv_nsec) {
		n = ENVD_MAX_GROUPS;
		if (getgrouplist(u->name, u->gid, cached, &n) < 0)
			n = 0;
		ncached = n;
		snprintf(name, sizeof(name), "%s", u->name);
		gid = u->gid;
		mtime = st.st_mtim;
	}
	n = ncached < max ? ncached : max;
	memcpy(groups, cached, (size_t)n * sizeof(gid_t));
	pthread_mutex_unlock(&mu);
	return n;
}

/* The thread's effective capabilities: all it is permitted (raise) or none. */
static int set_effective(int raise)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d)); /* valgrind does not know capget fills all of it */

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].effective = raise ? d[i].permitted : 0;
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	return 0;
}

/* setgroups(2) for this thread only (glibc's wrapper changes every thread). */
static int thread_setgroups(int n, const gid_t *groups)
{
	if (syscall(SYS_setgroups, (size_t)n, groups) < 0)
		return -errno;
	return 0;
}

/* setfsuid and setfsgid report no errors: read the value back to know. */
static int thread_setfsid(uid_t uid, gid_t gid)
{
	setfsgid(gid);
	if ((gid_t)setfsgid((gid_t)-1) != gid)
		return -EPERM;
	setfsuid(uid);
	if ((uid_t)setfsuid((uid_t)-1) != uid)
		return -EPERM;
	return 0;
}

unsigned envd_outer_id(unsigned id)
{
	return id == 0 && envd_cfg.root_id ? (unsigned)envd_cfg.root_id : id;
}

unsigned envd_inner_id(unsigned id)
{
	return envd_cfg.root_id && id == (unsigned)envd_cfg.root_id ? 0 : id;
}

__attribute__((no_sanitize_address)) int envd_inner_enter(void)
{
	if (envd_cfg.inner_userns < 0)
		return 0;
	/* Root of the namespace first, so that leaving root for a user then drops every capability, as it does here. */
	if (syscall(SYS_setns, envd_cfg.inner_userns, (long)CLONE_NEWUSER) < 0 ||
	    syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
		return -1;
	/*
	 * A cgroup namespace of its own, rooted where it is now: the sandbox's
	 * cgroups. The daemon's (bwrap's) may be rooted higher, at the jail's:
	 * the jail can move the sandbox into its cgroup v1 limits after bwrap
	 * made it (hangar-jail's adopt.c). Only a kernel without cgroup
	 * namespaces (EINVAL) goes on without.
	 */
	if (syscall(SYS_unshare, (long)CLONE_NEWCGROUP) < 0 && errno != EINVAL)
		return -1;
	/* Entering gave every capability in the namespace: keep no more than the daemon holds. */
	for (int cap = 0; cap <= envd_cfg.cap_last && cap < 64; cap++)
		if (!(envd_cfg.caps >> cap & 1) && syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -1;
	return 0;
}

int envd_creds_enter(const struct envd_user *u, struct envd_creds *saved)
{
	gid_t groups[ENVD_MAX_GROUPS];
	int n, rc, root = u->uid == 0;

	memset(saved, 0, sizeof(*saved));
	/*
	 * With one uid for the whole sandbox (-single-uid), any other user
	 * would be the daemon itself with another name: refused, as commands are.
	 */
	if (envd_cfg.single_uid && u->uid != geteuid())
		return -EPERM;
	/* Root acts as itself, unless the sandbox's root is another uid (root_id). */
	if (!envd_cfg.is_root || (root && !envd_cfg.root_id))
		return 0;
	saved->fsuid = (uid_t)setfsuid((uid_t)-1);
	saved->fsgid = (gid_t)setfsgid((gid_t)-1);
	saved->ngroups = getgroups(ENVD_MAX_GROUPS, saved->groups);
	if (saved->ngroups < 0)
		return -errno;
	/* A thread born inside a scope has no effective capabilities yet. */
	rc = set_effective(1);
	if (rc < 0)
		return rc;
	n = envd_user_groups(u, groups, ENVD_MAX_GROUPS);
	for (int i = 0; i < n; i++)
		groups[i] = (gid_t)envd_outer_id((unsigned)groups[i]);
	saved->active = 1;
	rc = thread_setgroups(n, groups);
	if (rc == 0)
		rc = thread_setfsid((uid_t)envd_outer_id((unsigned)u->uid), (gid_t)envd_outer_id((unsigned)u->gid));
	/*
	 * Changing the fsuid away from 0 already dropped the file capabilities;
	 * the others (CAP_SYS_PTRACE for /proc, CAP_SYS_ADMIN, ...) go too. The
	 * sandbox's root (root_id) keeps them, as root acting as itself would.
	 */
	if (rc == 0)
		rc = set_effective(root);
	if (rc < 0) {
		envd_creds_leave(saved);
		return rc;
	}
	return 0;
}

void envd_creds_leave(struct envd_creds *saved)
{
	if (!saved->active)
		return;
	if (set_effective(1) < 0 || thread_setfsid(saved->fsuid, saved->fsgid) < 0 ||
	    thread_setgroups(saved->ngroups, saved->groups) < 0) {
		fprintf(stderr, "hangar-envd: cannot restore a thread's credentials: %s\n", strerror(errno));
		abort();
	}
	saved->active = 0;
}
