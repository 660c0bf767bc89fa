/*
 * What GET and POST /files share. Every open, mkdir, truncate and metadata
 * change of a transfer is made with the request user's credentials
 * (creds.h), and never through a /proc magic link; only regular files are
 * streamed: a device, FIFO or socket, or a file of a kernel
 * pseudo-filesystem (/proc, /sys, ...), is refused before it is read from
 * or written to.
 */
#define _GNU_SOURCE
#include "files_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

const char *files_username(const struct envd_req *r)
{
	const char *u = envd_req_query(r, "username");

	return u ? u : envd_cfg.default_user;
}

unsigned files_lookup_user(const char *name, struct envd_user *u, char *msg, size_t msgsz)
{
	if (!name) {
		snprintf(msg, msgsz, "username not provided");
		return 400;
	}
	if (envd_user_lookup(name, u) < 0) {
		snprintf(msg, msgsz, "error looking up user '%s': user: unknown user %s", name, name);
		return 401;
	}
	return 0;
}

unsigned files_act_as(const struct envd_user *u, struct envd_creds *creds, char *msg, size_t msgsz)
{
	int rc = envd_creds_enter(u, creds);

	if (rc == 0)
		return 0;
	snprintf(msg, msgsz, "cannot act as user '%s': %s", u->name, strerror(-rc));
	return rc == -EPERM ? 403 : 500;
}

/* ---- what may be streamed ------------------------------------------------ */

/*
 * Opens path as the calling thread's credentials allow, refusing to pass
 * through a /proc magic link (/proc/<pid>/fd/N, .../cwd, .../root): those
 * lead to whatever another process holds open, past the permissions of the
 * directories on the way. Kernels without openat2 (before 5.6), or a seccomp
 * filter that hides it, fall back to open(), where only the user's
 * credentials protect.
 */
int files_open_no_magic(const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)flags,
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
		return (int)fd;
	return open(path, flags, mode);
}

/* What a non-regular file is, for messages. */
const char *files_kind_name(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFDIR:
		return "a directory";
	case S_IFLNK:
		return "a symbolic link";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	}
	return "not a regular file";
}

/*
 * Files of the kernel's pseudo-filesystems look regular but are views of
 * the kernel or of processes, envd's own among them (/proc/self/environ,
 * /proc/<envd>/mem): reading or writing one is never a file transfer.
 */
static int on_pseudo_fs(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return 1;
	switch ((unsigned long)sf.f_type & 0xffffffffUL) {
	case PROC_SUPER_MAGIC:
	case SYSFS_MAGIC:
	case DEBUGFS_MAGIC:
	case TRACEFS_MAGIC:
	case SECURITYFS_MAGIC:
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
	case BPF_FS_MAGIC:
	case EFIVARFS_MAGIC:
		return 1;
	}
	return 0;
}

/* The status and message for a path that cannot be streamed; 0 when it can. */
unsigned files_refuse_kind(const char *path, const struct stat *st, int fd, char *msg, size_t msgsz)
{
	if (S_ISDIR(st->st_mode)) {
		snprintf(msg, msgsz, "path '%s' is a directory", path);
		return 400;
	}
	if (!S_ISREG(st->st_mode)) {
		snprintf(msg, msgsz, "path '%s' is %s: only regular files can be read or written", path,
			 files_kind_name(st->st_mode));
		return 400;
	}
	if (fd >= 0 && on_pseudo_fs(fd)) {
		snprintf(msg, msgsz, "path '%s' is on a kernel pseudo-filesystem (/proc, /sys, ...): only regular "
			 "files can be read or written", path);
		return 400;
	}
	return 0;
}
