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
 *
 * The commands' user namespace. In a local sandbox the jail gives the daemon
 * a user namespace below its own (-userns-fd), whose root is another uid,
 * root_id, of the daemon's namespace, and whose other ids are the same as
 * the daemon's. Every process the daemon starts for a user (commands and
 * archive workers) enters it first (envd_inner_enter), so the sandbox's
 * root has capabilities over that namespace only: it can neither signal,
 * trace nor read the daemon, which stays root of the namespace above, nor
 * touch files of the daemon's uid (its socket directory). File operations
 * made for root run with root_id as file system uid and gid and the
 * daemon's capabilities, so what they create is the sandbox root's.
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
 * root. Returns 0, or -errno with the thread's credentials unchanged:
 * -EPERM when the daemon runs every user as one uid (-single-uid) and u is
 * not that uid.
 */
int envd_creds_enter(const struct envd_user *u, struct envd_creds *saved);

/* Gives the calling thread back what envd_creds_enter() saved. Aborts the
 * daemon if the kernel refuses: a thread left half-switched must not serve
 * the next request. */
void envd_creds_leave(struct envd_creds *saved);

/*
 * In the child of a clone(CLONE_VM) about to become a request user: enters
 * the commands' user namespace when there is one, as its root, with the
 * daemon's bounding set. Raw system calls only. 0, or -1 with errno.
 */
int envd_inner_enter(void);

/* An id of the sandbox's /etc as the daemon's namespace sees it (root: root_id), and back. */
unsigned envd_outer_id(unsigned id);
unsigned envd_inner_id(unsigned id);

/* u's supplementary groups (getgrouplist, cached until /etc/group changes),
 * at most max of them; returns how many. */
int envd_user_groups(const struct envd_user *u, gid_t *groups, int max);
