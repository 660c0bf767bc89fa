/*
 * The stage: the sandbox's own files, made ready for bwrap to bind when the
 * jail gives the sandbox user namespaces of its own.
 *
 * As root, the child builds what bwrap binds in a mount namespace of its
 * own, at STAGE (a directory every uid can cross, unlike a state directory
 * under /root, which the sandbox's unprivileged ids could not reach):
 *   STAGE/etc   its /etc (etc.c): an overlay, read-only, of STAGE/own over
 *               the shared template over the host's /etc (or, where that
 *               cannot be, the template with the own files and the host's
 *               subdirectories bound over it); an image sandbox's is an
 *               empty directory (its /etc is the image's)
 *   STAGE/own   the sandbox's own /etc files, written here (etc_own_text),
 *               and a whiteout over each host name it hides (etc_hidden)
 *   STAGE/hangar  the sandbox's /run/hangar, read-only, bound whole by
 *               bwrap (stage_hangar): hangar-envd; hangar-envd-archive, its
 *               checkpoint worker, when there is one beside it;
 *               hangar-envd-init, the sandbox's pid 1, when there is one
 *               beside it; lib/, image sandboxes: hangar-envd's loader and
 *               libraries (envdrt.c)
 *   STAGE/dev   its /dev (stage_dev), bound whole by bwrap
 *   STAGE/rw    a tmpfs of disk_mb: workspace/, home/, tmp/, so a sandbox
 *               writes nothing to the host's disk and runs out of space at
 *               its limit (ENOSPC); an image sandbox's writable layer too
 *               (upper/, work/)
 *   STAGE/snapshot  a sandbox from a snapshot: the snapshot's layer, under
 *               workspace/, home/, tmp/ and root/ in rw (snaplayer.c)
 *   STAGE/root  the sandbox's root, bound whole by bwrap: an image
 *               sandbox's, its layers under that writable layer (image.c);
 *               else a tmpfs with every mount point of the sandbox but
 *               /proc bound in (stage_host_root)
 * The sources are opened first (O_PATH), since STAGE may hide the state
 * directory. Unprivileged, bwrap binds the sandbox's directory directly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "jail.h"

#define STAGE "/run"
#define STAGE_FALLBACK "/tmp"

/* What the stage binds, opened before it is mounted. */
struct sources {
	int etc, envd, worker, init; /* etc, worker, init: -1 when there is none (etc: an image's) */
	const struct envd_runtime *rt; /* image sandboxes: lib[0] the loader, then rt->libs */
	int lib[ENVD_RUNTIME_MAX + 1];
};

static void close_sources(struct sources *f)
{
	int *all[] = { &f->etc, &f->envd, &f->worker, &f->init };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
	for (size_t i = 0; f->rt && i <= f->rt->n; i++)
		if (f->lib[i] >= 0) {
			close(f->lib[i]);
			f->lib[i] = -1;
		}
}

/* Image sandboxes: the loader and libraries, opened into f->lib. 0, or -1 with errno. */
static int open_runtime(struct sources *f, const struct jail_spec *s)
{
	if (!s->image)
		return 0;
	f->rt = envd_runtime_find(s->envd);
	if (!f->rt) {
		errno = ENOEXEC;
		return -1;
	}
	for (size_t i = 0; i <= f->rt->n; i++)
		f->lib[i] = -1;
	for (size_t i = 0; i <= f->rt->n; i++) {
		f->lib[i] = open(i ? f->rt->libs[i - 1].path : f->rt->loader, O_PATH | O_CLOEXEC);
		if (f->lib[i] < 0)
			return -1;
	}
	return 0;
}

static int open_sources(struct sources *f, const struct jail_spec *s)
{
	const char *template = etc_template();
	char worker[PATH_MAX];
	int bad = 0;

	/* An image's /etc is its own (image.c): only the host's /usr needs the template. */
	if (!s->image && !template) {
		errno = EINVAL;
		return -1;
	}
	if (!s->image) {
		f->etc = open(template, O_PATH | O_CLOEXEC | O_NOFOLLOW | O_DIRECTORY);
		bad |= f->etc < 0;
	}
	f->envd = open(s->envd, O_PATH | O_CLOEXEC);
	/* No worker: the sandbox starts without checkpoints, as bwrap.c's add_envd says. */
	if (envd_beside_path(s->envd, ENVD_WORKER_NAME, worker, sizeof(worker)) == 0)
		f->worker = open(worker, O_PATH | O_CLOEXEC);
	/* The init was found when bwrap's command line named it: it must be there. */
	if (s->init[0])
		f->init = open(s->init, O_PATH | O_CLOEXEC);
	if (bad || f->envd < 0 || (s->init[0] && f->init < 0)) {
		int e = errno;

		close_sources(f);
		errno = e;
		return -1;
	}
	return 0;
}

const char *stage_dir(void)
{
	struct stat st;

	return stat(STAGE, &st) == 0 && S_ISDIR(st.st_mode) ? STAGE : STAGE_FALLBACK;
}

/* at/name into out. 0, or -1 with errno ENAMETOOLONG. */
static int path_in(char *out, size_t size, const char *at, const char *name)
{
	if (snprintf(out, size, "%s/%s", at, name) >= (int)size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* A nosuid, nodev tmpfs of opts (and owner's) at at/name, its path into out. 0, or -1 with errno. */
static int tmpfs_in(char *out, size_t size, const char *at, const char *name, const char *opts, unsigned owner)
{
	char all[128];

	if (path_in(out, size, at, name) < 0)
		return -1;
	snprintf(all, sizeof(all), "%s,uid=%u,gid=%u", opts, owner, owner);
	if (mkdir(out, 0700) < 0)
		return -1;
	return mount("hangar", out, "tmpfs", MS_NOSUID | MS_NODEV, all);
}

static int bind_fd(int fd, const char *at, const char *name, int file)
{
	char src[64], dst[PATH_MAX];

	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	if (path_in(dst, sizeof(dst), at, name) < 0)
		return -1;
	if (file) {
		int m = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (m < 0)
			return -1;
		close(m);
	} else if (mkdir(dst, 0755) < 0) {
		return -1;
	}
	return mount(src, dst, NULL, MS_BIND, NULL);
}

/* bind_fd of a file, then read-only, nosuid and nodev. 0, or -1 with errno. */
static int bind_fd_ro(int fd, const char *at, const char *name)
{
	char dst[PATH_MAX];

	if (bind_fd(fd, at, name, 1) < 0)
		return -1;
	snprintf(dst, sizeof(dst), "%s/%s", at, name); /* fits: bind_fd checked */
	return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/* at/lib: what open_runtime opened, each under its name, read-only. 0, or -1 with errno. */
static int bind_runtime(const struct sources *f, const char *at)
{
	char lib[PATH_MAX];

	if (!f->rt)
		return 0;
	if (path_in(lib, sizeof(lib), at, "lib") < 0)
		return -1;
	if (mkdir(lib, 0755) < 0)
		return -1;
	for (size_t i = 0; i <= f->rt->n; i++)
		if (bind_fd_ro(f->lib[i], lib, i ? f->rt->libs[i - 1].name : f->rt->loader_name) < 0)
			return -1;
	return 0;
}

static int mkdir_in(const char *at, const char *name)
{
	char path[PATH_MAX];

	if (path_in(path, sizeof(path), at, name) < 0)
		return -1;
	return mkdir(path, 0755);
}

/*
 * The sandbox's own /etc files, written to STAGE/own (the stage's memory
 * file system: no inode of the state directory's disk per file). 0, or -1
 * with errno.
 */
static int write_own(const char *at, const struct jail_spec *s)
{
	const char *const *names;
	char src[PATH_MAX];
	size_t n = etc_own(s->meta->network, &names);
	int own, r = 0;

	if (mkdir_in(at, "own") < 0 || snprintf(src, sizeof(src), "%s/own", at) >= (int)sizeof(src) ||
	    (own = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = etc_own_text(i) ? write_text_at(own, names[i], etc_own_text(i)) : -EINVAL;
	close(own);
	if (r < 0)
		errno = -r;
	return r < 0 ? -1 : 0;
}

/*
 * STAGE/etc as one read-only overlay: STAGE/own (the sandbox's own files,
 * and a whiteout for each name of the host's it hides) over the template
 * over the host's /etc, whose subdirectories show through as they are.
 * One mount where binds took some tens: bwrap reads the whole mount table
 * for each of its own binds, so each mount here made all of them slower.
 * 0, or -1 with errno (the caller then binds instead: overlay_etc_undo).
 */
static int overlay_etc(const char *at, const struct sources *f)
{
	char *const *names;
	char own[PATH_MAX], etc[PATH_MAX], opts[PATH_MAX + 64];
	size_t n = etc_hidden(&names);
	int dfd, r = 0;

	if (snprintf(own, sizeof(own), "%s/own", at) >= (int)sizeof(own) ||
	    snprintf(etc, sizeof(etc), "%s/etc", at) >= (int)sizeof(etc) ||
	    snprintf(opts, sizeof(opts), "lowerdir=%s:/proc/self/fd/%d:/etc", own, f->etc) >= (int)sizeof(opts)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	dfd = open(own, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return -1;
	/* A whiteout (a character device 0:0) is one node anybody may make (Linux 5.8). */
	for (size_t i = 0; r == 0 && i < n; i++)
		if (mknodat(dfd, names[i], S_IFCHR | 0000, makedev(0, 0)) < 0)
			r = -1;
	close(dfd);
	if (r < 0 || mkdir(etc, 0755) < 0)
		return -1;
	return mount("overlay", etc, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts);
}

/* What a failed overlay_etc left: the whiteouts, so STAGE/own holds the own files alone again. */
static void overlay_etc_undo(const char *at)
{
	char *const *names;
	char own[PATH_MAX], etc[PATH_MAX];
	size_t n = etc_hidden(&names);
	int dfd;

	snprintf(own, sizeof(own), "%s/own", at);
	snprintf(etc, sizeof(etc), "%s/etc", at);
	rmdir(etc);
	dfd = open(own, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dfd < 0)
		return;
	for (size_t i = 0; i < n; i++)
		unlinkat(dfd, names[i], 0);
	close(dfd);
}

/* Binds the own files over the template's placeholders at STAGE/etc. 0, or -1 with errno. */
static int bind_own(const char *at, const struct jail_spec *s)
{
	const char *const *names;
	char src[PATH_MAX], dst[PATH_MAX];
	size_t n = etc_own(s->meta->network, &names);

	for (size_t i = 0; i < n; i++) {
		if (snprintf(src, sizeof(src), "%s/own/%s", at, names[i]) >= (int)sizeof(src) ||
		    snprintf(dst, sizeof(dst), "%s/etc/%s", at, names[i]) >= (int)sizeof(dst)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	return 0;
}

/*
 * Where an overlay cannot be made (no overlayfs; before Linux 5.11 in a user
 * namespace): the host's /etc subdirectories over the template's mount
 * points at STAGE/etc, then the whole of STAGE/etc read-only, nosuid and
 * nodev in one step where the kernel can (mount_setattr, Linux 5.12), else
 * mount by mount. bwrap binds STAGE/etc recursively and read-only, and finds
 * nothing left to remount. 0, or -1 with errno.
 */
static int bind_host_dirs(const char *at)
{
	struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	char *const *names;
	size_t n;
	char etc[PATH_MAX], src[PATH_MAX], dst[PATH_MAX];
	int setattr;

	n = etc_host_dirs(&names);
	if (path_in(etc, sizeof(etc), at, "etc") < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		snprintf(src, sizeof(src), "/etc/%s", names[i]);
		if (path_in(dst, sizeof(dst), etc, names[i]) < 0)
			return -1;
		if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
			return -1;
	}
	setattr = (int)syscall(SYS_mount_setattr, AT_FDCWD, etc, AT_RECURSIVE, &ro, sizeof(ro));
	if (setattr == 0 || errno != ENOSYS)
		return setattr;
	for (size_t i = 0; i < n; i++)
		if (snprintf(dst, sizeof(dst), "%s/%s", etc, names[i]) >= (int)sizeof(dst) ||
		    mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
			return -1;
	return 0;
}

/*
 * STAGE/etc: an image's is an empty directory (its /etc is the image's own,
 * image.c); else the own files written, then the overlay, or the template
 * bound with the own files and the host's directories bound over it.
 * HANGAR_JAIL_ETC=binds asks for the binds (the tests of both). 0, or -1
 * with errno.
 */
static int stage_etc(const char *at, const struct jail_spec *s, const struct sources *f)
{
	const char *want = getenv("HANGAR_JAIL_ETC");

	if (s->image)
		return mkdir_in(at, "etc");
	if (write_own(at, s) < 0)
		return -1;
	if (!(want && !strcmp(want, "binds"))) {
		if (overlay_etc(at, f) == 0)
			return 0;
		overlay_etc_undo(at);
	}
	return bind_fd(f->etc, at, "etc", 0) < 0 || bind_own(at, s) < 0 || bind_host_dirs(at) < 0 ? -1 : 0;
}

static int mkdir_owned(const char *at, const char *name, unsigned owner, mode_t mode)
{
	char path[PATH_MAX];

	if (path_in(path, sizeof(path), at, name) < 0)
		return -1;
	if (mkdir(path, mode) < 0 || chown(path, owner, owner) < 0 || chmod(path, mode) < 0)
		return -1;
	return 0;
}

/* A symlink at/name to target. 0, or -1 with errno. */
static int symlink_in(const char *at, const char *name, const char *target)
{
	char path[PATH_MAX];

	if (path_in(path, sizeof(path), at, name) < 0)
		return -1;
	return symlink(target, path);
}

/*
 * STAGE/dev: the sandbox's /dev, as bwrap's --dev would make it, with a
 * /dev/shm of shm_mb for every user. bwrap reads the whole mount table
 * again for each mount it makes, some 0.1 ms each; made here, the nine
 * mounts cost bwrap one bind and one reading. A tmpfs of the sandbox's
 * root (sroot) with the host's null, zero, full, random, urandom and tty
 * bound in (the only devices it has: the tmpfs and /dev/shm are nodev), a
 * devpts instance of its own, and the usual links. 0, or -1 with errno.
 */
static int stage_dev(const char *at, const struct jail_spec *s, unsigned sroot)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = { { "fd", "/proc/self/fd" },	   { "stdin", "/proc/self/fd/0" },
						{ "stdout", "/proc/self/fd/1" }, { "stderr", "/proc/self/fd/2" },
						{ "core", "/proc/kcore" },	   { "ptmx", "pts/ptmx" } };
	char dev[PATH_MAX], path[PATH_MAX + 16], src[32], opts[64];

	if (tmpfs_in(dev, sizeof(dev), at, "dev", "mode=0755", sroot) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/%s", dev, nodes[i]);
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			return -1;
		close(fd);
		if (mount(src, path, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlink_in(dev, links[i][0], links[i][1]) < 0)
			return -1;
	snprintf(path, sizeof(path), "%s/pts", dev);
	if (mkdir(path, 0755) < 0 ||
	    mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") < 0)
		return -1;
	snprintf(opts, sizeof(opts), "mode=01777,size=%llu", (unsigned long long)s->shm_mb << 20);
	return tmpfs_in(path, sizeof(path), dev, "shm", opts, sroot);
}

/*
 * STAGE/hangar: envd's own small file system, /run/hangar in the sandbox,
 * where nothing can be planted, not even by a file operation envd makes for
 * root: a tmpfs of the sandbox's root (sroot), 0700, with envd, its worker,
 * its init and (images) its runtime bound in, then all of it read-only.
 * Made here, it costs bwrap one bind where it made five mounts, each with
 * a reading of the whole mount table. 0, or -1 with errno.
 */
static int stage_hangar(const char *at, const struct sources *f, unsigned sroot)
{
	const char *names[] = { "hangar-envd", ENVD_INIT_NAME, ENVD_WORKER_NAME };
	int fds[] = { f->envd, f->init, f->worker };
	char dir[PATH_MAX];

	if (tmpfs_in(dir, sizeof(dir), at, "hangar", "mode=0700,size=64k", sroot) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0 && bind_fd_ro(fds[i], dir, names[i]) < 0)
			return -1;
	if (bind_runtime(f, dir) < 0)
		return -1;
	return mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/*
 * The path from bound at root/to, recursively, and made read-only, nosuid
 * and nodev if ro (at once where the kernel can,
 * mount_setattr, Linux 5.12; else the top mount, as a bind of a directory
 * without mounts below it is). The mount point, a directory, is made. 0, or
 * -1 with errno.
 */
static int bind_at(const char *from, const char *root, const char *to, int ro)
{
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	char dst[PATH_MAX];

	if (path_in(dst, sizeof(dst), root, to) < 0 || (mkdir(dst, 0755) < 0 && errno != EEXIST) ||
	    mount(from, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
		return -1;
	if (!ro || syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof(attr)) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

/* at/name (never a mount point: a mount's root would be changed) made owner's. 0, or -1 with errno. */
static int own_in(const char *at, const char *name, unsigned owner)
{
	char path[PATH_MAX];

	return path_in(path, sizeof(path), at, name) < 0 ? -1 : lchown(path, owner, owner);
}

/*
 * STAGE/root where the sandbox's /usr is the host's: a tmpfs of the
 * sandbox's root (sroot), writable by it as bwrap's own root is, its
 * directories and links its too, holding
 * every mount of the sandbox but /proc, which only bwrap can make in the
 * sandbox's pid namespace: /usr read-only and /bin and the like as the host
 * has them (links into /usr, or its directories read-only), /etc, /root,
 * /workspace, /home/user and /tmp (the stage's rw), /var/tmp (a link to
 * /tmp), /run/hangar and /dev. bwrap binds it whole with --dev-bind, so
 * that what may hold a device is said here, mount by mount: only /dev's
 * nodes and devpts may. One bind and one reading of the mount table where
 * bwrap made some twenty mounts, each with its reading. 0, or -1 with errno.
 */
static int stage_host_root(const char *at, unsigned sroot)
{
	static const char *const rw[][2] = { { "root", "root" }, { "workspace", "workspace" },
					     { "home", "home/user" }, { "tmp", "tmp" } };
	static const char *const dirs[] = { "proc", "home", "run", "var" };
	char root[PATH_MAX], path[PATH_MAX + 32];

	if (tmpfs_in(root, sizeof(root), at, "root", "mode=0755", sroot) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (mkdir_owned(root, dirs[i], sroot, 0755) < 0)
			return -1;
	if (bind_at("/usr", root, "usr", 1) < 0)
		return -1;
	for (const char *const *name = usr_tops; *name; name++) {
		char target[PATH_MAX], host[PATH_MAX];
		int kind = host_top(*name, target, sizeof(target));

		snprintf(host, sizeof(host), "/%s", *name);
		if ((kind == 'd' && bind_at(host, root, *name, 1) < 0) ||
		    (kind == 'l' && (symlink_in(root, *name, target) < 0 || own_in(root, *name, sroot) < 0)))
			return -1;
	}
	snprintf(path, sizeof(path), "%s/etc", at);
	if (bind_at(path, root, "etc", 1) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(rw) / sizeof(rw[0]); i++) {
		snprintf(path, sizeof(path), "%s/rw/%s", at, rw[i][0]);
		if (bind_at(path, root, rw[i][1], 0) < 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/var", root);
	if (symlink_in(path, "tmp", "../tmp") < 0 || own_in(path, "tmp", sroot) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/hangar", at);
	if (bind_at(path, root, "run/hangar", 0) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/dev", at);
	return bind_at(path, root, "dev", 0);
}

/*
 * Unmounts, in the child's namespace alone, what bwrap would otherwise copy
 * into the sandbox's namespace and read through again with every mount it
 * makes (it reads the whole mount table each time): the host's /sys,
 * /dev/shm and /dev/pts, which no sandbox sees and bwrap does not use, and,
 * once the root is laid out (laid_out), the stage's parts it was bound
 * from. That halves the table bwrap reads. Best effort: a mount an
 * unprivileged caller's namespace received locked stays.
 */
static void stage_trim(const char *at, int laid_out)
{
	static const char *const parts[] = { "etc", "hangar", "rw", "dev", "snapshot" };
	static const char *const host[] = { "/sys", "/dev/shm", "/dev/pts" };
	char path[PATH_MAX];

	for (size_t i = 0; laid_out && i < sizeof(parts) / sizeof(parts[0]); i++)
		if (path_in(path, sizeof(path), at, parts[i]) == 0)
			(void)umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	/* A host may have mounted one over another there: each, up to a few. */
	for (size_t i = 0; i < sizeof(host) / sizeof(host[0]); i++)
		for (int n = 0; n < 4 && umount2(host[i], MNT_DETACH | UMOUNT_NOFOLLOW) == 0; n++)
			;
}

/*
 * In the child: the stage (see above), as host root before it enters the
 * sandbox's user namespace, or (an unprivileged caller's subordinate ids) as
 * root of that namespace, which owns the mount namespace made here. 0, or -1
 * with a message said.
 */
int stage_build(const struct jail_spec *s, const struct uid_range *r)
{
	const char *at = stage_dir();
	char rw[PATH_MAX], opts[64];
	struct sources f = { .etc = -1, .envd = -1, .worker = -1, .init = -1 };
	int snap = -1;
	/*
	 * The sandbox's envd (its namespace's root) and root (top of that
	 * namespace, root of the commands' namespace below) as the stage's
	 * builder names them: inside already (sub), or on the host.
	 */
	unsigned sroot = r->sub ? 0 : r->base, top = sroot + uid_range_top(r);

	/* Opened in the new namespace (a bind takes its source from the caller's own mounts). */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    open_sources(&f, s) < 0 || open_runtime(&f, s) < 0 || snaplayer_open(s, &snap) < 0 ||
	    mount("hangar", at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0) {
		say("cannot make a mount namespace: %s", strerror(errno));
		return -1;
	}
	if (stage_etc(at, s, &f) < 0 || stage_hangar(at, &f, sroot) < 0) {
		say("cannot stage the sandbox's files: %s", strerror(errno));
		close_sources(&f);
		return -1;
	}
	close_sources(&f);
	snprintf(rw, sizeof(rw), "%s/rw", at);
	snprintf(opts, sizeof(opts), "mode=0755,size=%um", s->disk_mb);
	if (mkdir(rw, 0755) < 0 || mount("hangar", rw, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0 ||
	    mkdir_owned(rw, "workspace", sroot + 1000, 0755) < 0 || mkdir_owned(rw, "home", sroot + 1000, 0755) < 0 ||
	    mkdir_owned(rw, "tmp", top, 01777) < 0 || mkdir_owned(rw, "root", top, 0700) < 0) {
		say("cannot make the sandbox's %u MB file system: %s", s->disk_mb, strerror(errno));
		return -1;
	}
	if (stage_dev(at, s, sroot) < 0) {
		say("cannot make the sandbox's /dev: %s", strerror(errno));
		return -1;
	}
	if (snaplayer_mount(s, r, at, snap) < 0)
		return -1;
	if (s->image && image_root_build(s, r, at) < 0)
		return -1;
	if (!s->image && stage_host_root(at, sroot) < 0) {
		say("cannot make the sandbox's root: %s", strerror(errno));
		return -1;
	}
	stage_trim(at, !s->image);
	return 0;
}
