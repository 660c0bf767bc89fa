/*
 * Where running local sandboxes keep their directories: on a memory file
 * system, not on the state directory's disk.
 *
 * A running sandbox's directory (lstate.h) holds its sockets, pid file,
 * record and timeline: some fifteen small files made at its create and
 * removed at its end, which mean nothing once the machine restarts (the
 * sandbox does not survive it). On a disk file system each costs an inode,
 * and one where many were freed lately (ext4 without a journal checks each
 * free inode it meets for a recent delete) takes the longer to find one the
 * faster sandboxes come and go. So, when HANGAR_LOCAL_RUN_DIR is "auto" (the
 * default) and the state directory is not on a tmpfs already, they go to
 *
 *   BASE/hangar-<euid>/r-XXXXXX/   mode 0700, BASE the first tmpfs of /run
 *                                  (root only) and /dev/shm
 *
 * which the state directory names by its link local/run, made under the
 * flock of local/run.lock by the first process that needs it (again after a
 * reboot emptied the tmpfs). Every process of the state directory follows
 * that link, so they all see the same sandboxes. Once linked, the runtime
 * directory gets a link back, owner, to the state directory's local/: a
 * runtime directory whose state directory no longer links to it (removed,
 * or linked elsewhere) is stale, and is removed by the next process to set
 * up a runtime directory under the same BASE/hangar-<euid>, once no sandbox
 * is left in it. HANGAR_LOCAL_RUN_DIR=PATH uses PATH as BASE, whatever file
 * system it is on; "state" keeps the directories in the state directory.
 *
 * Only directories of the state directory's owner, reached without
 * following a link planted by anyone else, are taken (made mode 0700 again
 * if this uid opened its own up): on a world-writable /dev/shm, another
 * user can only make the choice fall back to the state directory. Root in
 * another uid's state directory (a test's teardown killing what that uid
 * left) follows that uid's link but never makes or replaces one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "local.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* A runtime directory with no owner link yet this old was left by a process that died making it. */
#define UNLINKED_STALE_SEC 3600

static int on_tmpfs_fd(int fd)
{
	struct statfs sf;

	return fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC;
}

/*
 * 1 when fd is a directory owner owns, mode 0700; made 0700 again if it is
 * this uid's and this uid opened it up (nobody else could have).
 */
static int private_of(int fd, uid_t owner)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != owner)
		return 0;
	return (st.st_mode & 07777) == 0700 || (owner == geteuid() && fchmod(fd, 0700) == 0);
}

/*
 * Opens BASE/hangar-<euid>, made when missing: a descriptor of a directory
 * this uid owns, 0700, not reached through a link; or -1.
 */
static int open_parent(const char *base, char *path, size_t size)
{
	int fd;

	if (snprintf(path, size, "%s/hangar-%u", base, (unsigned)geteuid()) >= (int)size)
		return -1;
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && !private_of(fd, geteuid())) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* 1 when the runtime directory path is short enough for every socket of a sandbox in it. */
static int fits_sockets(const char *path)
{
	return strlen(path) + strlen(SOCKET_SUFFIX) < sizeof(((struct sockaddr_un *)0)->sun_path);
}

/*
 * 1 when target (local/run's) is a runtime directory of this state
 * directory: an absolute path whose parent and itself are owner's (the
 * state directory's: no one else is trusted more than it is), 0700,
 * neither a link, and short enough.
 */
static int usable(const char *target, uid_t owner)
{
	const char *slash = strrchr(target, '/');
	char parent[PATH_MAX];
	int pfd, fd, ok;

	if (target[0] != '/' || !slash || slash == target || !fits_sockets(target) ||
	    (size_t)(slash - target) >= sizeof(parent) || !strncmp(slash + 1, "..", 2))
		return 0;
	memcpy(parent, target, (size_t)(slash - target));
	parent[slash - target] = '\0';
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return 0;
	fd = private_of(pfd, owner) ? openat(pfd, slash + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	ok = fd >= 0 && private_of(fd, owner);
	if (fd >= 0)
		close(fd);
	close(pfd);
	return ok;
}

/* The target of link name in dfd into buf (PATH_MAX): 0, or -1 when there is no such link. */
static int read_link(int dfd, const char *name, char *buf)
{
	ssize_t n = readlinkat(dfd, name, buf, PATH_MAX - 1);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* 1 when the runtime directory name in parent holds a sandbox, or one being made. */
static int holds_sandboxes(int parent, const char *name)
{
	DIR *d = lstate_opendir_at(parent, name);
	struct dirent *de;
	int found = 0;

	if (!d)
		return 1; /* unreadable: leave it */
	while (!found && (de = readdir(d)))
		found = !strncmp(de->d_name, "sb-", 3) || !strncmp(de->d_name, ".new-", 5);
	closedir(d);
	return found;
}

/*
 * Removes the stale runtime directories under parent (path): those whose
 * state directory no longer links to them, and those never linked back
 * that are older than UNLINKED_STALE_SEC; never one that holds a sandbox.
 */
static void sweep(int parent, const char *path)
{
	DIR *d = lstate_opendir_at(parent, ".");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char owner[PATH_MAX], link[PATH_MAX], mine[PATH_MAX + 264], at[PATH_MAX + 8];
		struct stat st;
		int stale;

		if (strncmp(de->d_name, "r-", 2) || fstatat(parent, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		snprintf(at, sizeof(at), "%s/owner", de->d_name);
		if (read_link(parent, at, owner) < 0) {
			stale = time(NULL) - st.st_mtime > UNLINKED_STALE_SEC;
		} else {
			int ofd = open(owner, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			snprintf(mine, sizeof(mine), "%s/%s", path, de->d_name);
			stale = ofd < 0 || read_link(ofd, "run", link) < 0 || strcmp(link, mine) != 0;
			if (ofd >= 0)
				close(ofd);
		}
		if (stale && !holds_sandboxes(parent, de->d_name))
			lstate_rmtree_at(parent, de->d_name);
	}
	closedir(d);
}

/*
 * Makes a runtime directory under base for the state directory's local/
 * (rootfd, root) and links local/run to it, the caller holding
 * local/run.lock. Its path into out (PATH_MAX): 0, or -1 (none made).
 */
static int make_under(const char *base, int rootfd, const char *root, char *out)
{
	char parent[PATH_MAX];
	int pfd = open_parent(base, parent, sizeof(parent)), r = -1;

	if (pfd < 0)
		return -1;
	sweep(pfd, parent);
	if (snprintf(out, PATH_MAX, "%s/r-XXXXXX", parent) < PATH_MAX && fits_sockets(out) && mkdtemp(out)) {
		const char *name = strrchr(out, '/') + 1;
		char at[64];

		/* local/run first, owner after: a runtime directory with an owner is linked (sweep). */
		(void)unlinkat(rootfd, "run.new", 0);
		snprintf(at, sizeof(at), "%s/owner", name);
		if (symlinkat(out, rootfd, "run.new") == 0 && renameat(rootfd, "run.new", rootfd, "run") == 0 &&
		    symlinkat(root, pfd, at) == 0)
			r = 0;
		else
			lstate_rmtree_at(pfd, name);
	}
	close(pfd);
	return r;
}

/* 1 when path, a BASE candidate of "auto", is a directory on a tmpfs. */
static int tmpfs_base(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ok;

	if (fd < 0)
		return 0;
	ok = on_tmpfs_fd(fd);
	close(fd);
	return ok;
}

int local_run_dir(struct local *l)
{
	const char *set = hangar_sys_ctx_setting(l->ctx, "HANGAR_LOCAL_RUN_DIR");
	const char *auto_bases[] = { geteuid() == 0 ? "/run" : NULL, "/dev/shm" };
	char target[PATH_MAX];
	int rootfd, lock = -1, found = -1;
	struct stat st;

	if (!set || !*set)
		set = "auto";
	if (!strcmp(set, "state"))
		goto in_state;
	rootfd = open(l->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0 || fstat(rootfd, &st) < 0) {
		int e = errno;

		if (rootfd >= 0)
			close(rootfd);
		return hangar_sys_error(HANGAR_ECONFIG, 0, e, "HANGAR_STATE_DIR: cannot open %s", l->root);
	}
	if (!strcmp(set, "auto") && on_tmpfs_fd(rootfd)) {
		close(rootfd);
		goto in_state;
	}
	/* Unlocked first: once the link is made, every later process only reads it. */
	if (read_link(rootfd, "run", target) == 0 && usable(target, st.st_uid))
		found = 0;
	/*
	 * Root in another uid's state directory (a teardown killing what that
	 * uid left) uses its runtime directory, but never links it elsewhere.
	 */
	if (found < 0 && st.st_uid != geteuid()) {
		close(rootfd);
		goto in_state;
	}
	if (found < 0) {
		lock = openat(rootfd, "run.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		while (lock >= 0 && flock(lock, LOCK_EX) < 0 && errno == EINTR)
			;
		if (read_link(rootfd, "run", target) == 0 && usable(target, st.st_uid))
			found = 0;
		if (found < 0 && strcmp(set, "auto")) {
			found = make_under(set, rootfd, l->root, target);
		} else {
			for (size_t i = 0; found < 0 && i < sizeof(auto_bases) / sizeof(auto_bases[0]); i++)
				if (auto_bases[i] && tmpfs_base(auto_bases[i]))
					found = make_under(auto_bases[i], rootfd, l->root, target);
		}
		if (lock >= 0)
			close(lock);
	}
	close(rootfd);
	if (found < 0 && strcmp(set, "auto"))
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_LOCAL_RUN_DIR: cannot make a runtime directory under \"%s\" (it must be "
					"an existing directory, short enough for the sandboxes' sockets, where "
					"hangar-%u is this user's alone)", set, (unsigned)geteuid());
	if (found < 0)
		goto in_state;
	l->run = strdup(target);
	return l->run ? 0 : hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
in_state:
	l->run = strdup(l->root);
	return l->run ? 0 : hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
}
