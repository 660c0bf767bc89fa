/*
 * File access with a request user's credentials (creds.c).
 *
 * hangar-envd runs as root so it can act for any user of the sandbox, but a
 * file operation made for a user must be one that user could make: what
 * they may read, write, create or remove, which links the kernel lets them
 * follow, which processes' /proc entries they may open. So every filesystem
 * handler and every /files open, mkdir, truncate and metadata change runs
 * between envd_creds_enter() and envd_creds_leave(), which give the thread
 * (and only it) the user's file system uid and gid, their supplementary
 * groups, and no effective capabilities.
 *
 * Only the calling thread changes: Linux keeps credentials per thread, and
 * the raw setgroups system call is used because glibc's setgroups() changes
 * every thread of the process. A thread created inside a scope starts with
 * the user's credentials.
 */
#pragma once

#include <sys/types.h>

#include "envd.h"

#define ENVD_MAX_GROUPS 256

/* What envd_creds_leave() restores. */
struct envd_creds {
	int active;              /* 0: the scope changed nothing */
	uid_t fsuid;
	gid_t fsgid;
	int ngroups;
	gid_t groups[ENVD_MAX_GROUPS];
};

/*
 * The calling thread takes u's file credentials. A no-op (saved->active 0)
 * when the daemon cannot switch users (it does not run as root) or u is
 * root. Returns 0, or -errno with the thread's credentials unchanged.
 */
int envd_creds_enter(const struct envd_user *u, struct envd_creds *saved);

/* Gives the calling thread back what envd_creds_enter() saved. Aborts the
 * daemon if the kernel refuses: a thread left half-switched must not serve
 * the next request. */
void envd_creds_leave(struct envd_creds *saved);

/* u's supplementary groups (getgrouplist, cached until /etc/group changes),
 * at most max of them; returns how many. */
int envd_user_groups(const struct envd_user *u, gid_t *groups, int max);
