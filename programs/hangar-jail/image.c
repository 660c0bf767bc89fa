/*
 * An image sandbox's root, for a root caller (the jail's own id range) and
 * for an unprivileged caller with subordinate ids (its image range).
 *
 * The image's layers are shared by every sandbox of the image and owned as
 * their tars say (0 is the image's root). Each is mounted read-only through
 * an idmapped mount whose user namespace maps ids as the commands'
 * namespace does (uid_range_idmap), so the commands see the image's files
 * owned by the ids the image gave them, root's by their root, and the host
 * sees nothing of theirs change. Over the layers, overlayfs puts a writable
 * layer of the sandbox's own in the stage's rw file system, so what the
 * sandbox writes anywhere (packages in /usr included) counts towards its
 * disk limit and vanishes with it; the shared layers are never written.
 *
 * Before bwrap runs, the jail writes into that writable layer what the
 * sandbox needs of its own: root and `user` in /etc/passwd and /etc/group
 * when the image lacks them, /etc/hostname, /etc/hosts, /etc/resolv.conf
 * (network on), and the mount points bwrap binds over. The image is not
 * trusted: every path is opened beneath the merged root without following a
 * symbolic link (openat2, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), and a
 * link where one of these files or directories should be is replaced, never
 * written through.
 *
 * An unprivileged caller's layers are already owned as the commands must
 * see them: the library unpacked them into its image range
 * (libhangar/image/subids.c), which this sandbox's user namespace maps
 * with the range's first id as the commands' root (uid_range_image). So
 * they are plain read-only binds, and the overlay is mounted inside that
 * namespace (Linux 5.11), with `userxattr`: its opaque directories and
 * redirects are user.overlay.* attributes, which the unpack writes and a
 * tmpfs upper layer keeps (Linux 6.6). The builder is root of that
 * namespace already, so the owners below are its names for them.
 *
 * Before 6.6, tmpfs refuses user.* attributes and overlayfs does not
 * refuse the mount: it warns in the kernel log and goes on without them,
 * and the sandbox breaks later and obscurely (a directory of the image
 * removed and made again fails with EIO, as its opaque mark cannot be
 * written). So the writable layer is asked first, and such a kernel is
 * refused at create, naming what it lacks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define ETC_MAX (1 << 20) /* the largest passwd or group read from an image */

/* The ids the commands see as root and as `user`, as the host (this builder) names them. */
struct owners {
	unsigned root, user;
};

static int beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
}

/*
 * Directory name in dirfd, made (owned by o->root, mode) when missing and
 * made anew when the image has something else there (a link, a file).
 * Its descriptor, or -1 with errno.
 */
static int dir_at(int dirfd, const char *name, mode_t mode, unsigned owner)
{
	struct stat st;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    unlinkat(dirfd, name, 0) < 0)
		return -1;
	if (mkdirat(dirfd, name, mode) == 0) {
		if (fchownat(dirfd, name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(dirfd, name, mode, 0) < 0)
			return -1;
	} else if (errno != EEXIST) {
		return -1;
	}
	fd = beneath(dirfd, name, O_PATH | O_DIRECTORY, 0);
	return fd;
}

/* Each directory of path (relative to root), as dir_at makes them. 0, or -1 with errno. */
static int dirs_at(int root, const char *path, mode_t mode, unsigned owner)
{
	char copy[PATH_MAX], *save = NULL;
	int fd = dup(root);

	if (fd < 0 || snprintf(copy, sizeof(copy), "%s", path) >= (int)sizeof(copy)) {
		if (fd >= 0)
			close(fd);
		return errno = ENAMETOOLONG, -1;
	}
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int next;

		if (!strcmp(c, ".") || !strcmp(c, "..")) {
			close(fd);
			return errno = EINVAL, -1;
		}
		next = dir_at(fd, c, mode, owner);
		close(fd);
		if (next < 0)
			return -1;
		fd = next;
	}
	close(fd);
	return 0;
}

/* Reads etc/name beneath etc (a regular file of at most ETC_MAX; anything else is none). NULL when none. */
static char *read_beneath(int etc, const char *name)
{
	int fd = beneath(etc, name, O_RDONLY | O_NONBLOCK, 0);
	char *text = NULL;
	struct stat st;
	size_t have = 0;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= ETC_MAX &&
	    (text = malloc((size_t)st.st_size + 1))) {
		while (have < (size_t)st.st_size) {
			ssize_t n = read(fd, text + have, (size_t)st.st_size - have);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			have += (size_t)n;
		}
		text[have] = '\0';
	}
	close(fd);
	return text;
}

/* Replaces etc/name by a file holding text, owned by owner (a link there is replaced, not followed). 0, or -1 with errno. */
static int replace_at(int etc, const char *name, const char *text, unsigned owner)
{
	char tmp[96];
	size_t len = strlen(text);
	int fd, e = 0;

	snprintf(tmp, sizeof(tmp), ".%s.hangar-new", name);
	unlinkat(etc, tmp, 0);
	fd = beneath(etc, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, text, len) != (ssize_t)len || fchown(fd, owner, owner) < 0 || fchmod(fd, 0644) < 0)
		e = errno ? errno : EIO;
	if (close(fd) < 0 && !e)
		e = errno;
	if (!e && renameat(etc, tmp, etc, name) < 0)
		e = errno;
	if (e) {
		unlinkat(etc, tmp, 0);
		return errno = e, -1;
	}
	return 0;
}

/* 1 when a passwd or group text has an entry named name. */
static int has_entry(const char *text, const char *name)
{
	size_t len = strlen(name);

	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (!strncmp(line, name, len) && line[len] == ':')
			return 1;
	return 0;
}

/* etc/name with the lines of add whose name (before ':') it lacks. 0, or -1 with errno. */
static int complete_at(int etc, const char *name, const char *const *add, unsigned owner)
{
	char *text = read_beneath(etc, name), *out;
	size_t len = text ? strlen(text) : 0, need = len + 2;
	int rc;

	for (const char *const *a = add; *a; a++)
		need += strlen(*a) + 1;
	out = malloc(need);
	if (!out) {
		free(text);
		return errno = ENOMEM, -1;
	}
	memcpy(out, text ? text : "", len + 1);
	if (len && out[len - 1] != '\n')
		strcat(out, "\n");
	for (const char *const *a = add; *a; a++) {
		char nm[64];

		snprintf(nm, sizeof(nm), "%.*s", (int)strcspn(*a, ":"), *a);
		if (!text || !has_entry(text, nm))
			strcat(out, *a);
	}
	rc = replace_at(etc, name, out, owner);
	free(out);
	free(text);
	return rc;
}

/* A shell the image has: bash when there is one, else sh. */
static const char *shell_of(int root)
{
	int fd = beneath(root, "bin/bash", O_PATH, 0);

	if (fd < 0)
		fd = beneath(root, "usr/bin/bash", O_PATH, 0);
	if (fd >= 0) {
		close(fd);
		return "/bin/bash";
	}
	return "/bin/sh";
}

/* The sandbox's own entries in the image's /etc, written into its writable layer. 0, or -1 said. */
static int write_etc(int root, const struct jail_spec *s, const struct owners *o)
{
	char user[160], rootline[160], text[512];
	const char *sh = shell_of(root);
	const char *passwd[] = { rootline, user, NULL };
	const char *group[] = { "root:x:0:\n", "user:x:1000:\n", NULL };
	int etc, rc;

	if (dirs_at(root, "etc", 0755, o->root) < 0 || (etc = beneath(root, "etc", O_PATH | O_DIRECTORY, 0)) < 0) {
		say("cannot make the image's /etc the sandbox's: %s", strerror(errno));
		return -1;
	}
	snprintf(rootline, sizeof(rootline), "root:x:0:0:root:/root:%s\n", sh);
	snprintf(user, sizeof(user), "user:x:1000:1000:user:/home/user:%s\n", sh);
	rc = complete_at(etc, "passwd", passwd, o->root);
	if (rc == 0)
		rc = complete_at(etc, "group", group, o->root);
	snprintf(text, sizeof(text), "%s\n", s->meta->id);
	if (rc == 0)
		rc = replace_at(etc, "hostname", text, o->root);
	snprintf(text, sizeof(text), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		 s->meta->id);
	if (rc == 0)
		rc = replace_at(etc, "hosts", text, o->root);
	/* With network, the resolver slirp4netns forwards to the host's (net.c). */
	if (rc == 0 && s->meta->network)
		rc = replace_at(etc, "resolv.conf", "nameserver " NET_DNS_ADDR "\n", o->root);
	if (rc < 0)
		say("cannot write the sandbox's /etc entries: %s", strerror(errno));
	close(etc);
	return rc;
}

/* Where bwrap mounts or binds, as directories of the image's root (links there replaced). 0, or -1 said. */
static int mount_points(int root, const struct jail_spec *s, const struct owners *o)
{
	static const char *const points[][2] = {
		{ "proc", "0555" }, { "dev", "0755" },	    { "run", "0755" },	    { "run/hangar", "0700" },
		{ "tmp", "1777" },  { "root", "0700" },	    { "workspace", "0755" }, { "home", "0755" },
		{ "home/user", "0755" },
	};

	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		if (dirs_at(root, points[i][0], (mode_t)strtoul(points[i][1], NULL, 8), o->root) < 0) {
			say("cannot make /%s in the image's root: %s", points[i][0], strerror(errno));
			return -1;
		}
	/* The commands' default directory, as a container's WORKDIR is, when the image lacks it. */
	if (s->workdir && strcmp(s->workdir, "/") && dirs_at(root, s->workdir + 1, 0755, o->root) < 0) {
		say("cannot make the image's WorkingDir %s: %s", s->workdir, strerror(errno));
		return -1;
	}
	return 0;
}

/* Layer path as an idmapped (userns >= 0) or plain, read-only mount at dst. 0, or -1 with errno. */
static int mount_layer(const char *path, int userns, const char *dst)
{
	struct mount_attr attr = {
		.attr_set = (userns >= 0 ? MOUNT_ATTR_IDMAP : 0) | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
			    MOUNT_ATTR_NODEV,
		.userns_fd = userns >= 0 ? (uint64_t)userns : 0,
	};
	int t = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC), rc = -1;

	if (t < 0)
		return -1;
	if (mount_setattr(t, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0 && mkdir(dst, 0755) == 0 &&
	    move_mount(t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) == 0)
		rc = 0;
	{
		int e = errno;

		close(t);
		errno = e;
	}
	return rc;
}

/* The running kernel's release, for a message. */
static const char *kernel_release(void)
{
	static struct utsname u;

	return uname(&u) == 0 ? u.release : "unknown";
}

/*
 * Whether the file system of dir keeps user extended attributes, as
 * overlayfs's `userxattr` needs of its upper layer: 1, 0 when it has none
 * (tmpfs before Linux 6.6), or -1 with errno.
 */
static int keeps_user_xattrs(const char *dir)
{
	static const char name[] = "user.hangar.probe";

	if (setxattr(dir, name, "1", 1, 0) < 0)
		return errno == EOPNOTSUPP ? 0 : -1;
	return removexattr(dir, name) < 0 ? -1 : 1;
}

/*
 * The overlay of n layers at dirs lower[] (bottom first) with upper and
 * work, at merged: "lowerdir+" one layer at a time (Linux 6.8), else the
 * one "lowerdir" string older kernels take; userxattr inside a user
 * namespace. 0, or -1 with errno.
 */
static int mount_overlay(char lower[][64], size_t n, const char *upper, const char *work, const char *merged,
			 int userxattr)
{
	char opts[PATH_MAX * 2];
	size_t used = 0;
	int fs = fsopen("overlay", FSOPEN_CLOEXEC), m, ok = fs >= 0;

	if (ok && userxattr)
		ok = fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) == 0;
	for (size_t i = n; ok && i-- > 0;)
		ok = fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", lower[i], 0) == 0;
	if (ok)
		ok = fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", upper, 0) == 0 &&
		     fsconfig(fs, FSCONFIG_SET_STRING, "workdir", work, 0) == 0 &&
		     fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0;
	if (ok) {
		m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		ok = m >= 0 && move_mount(m, "", AT_FDCWD, merged, MOVE_MOUNT_F_EMPTY_PATH) == 0;
		if (m >= 0)
			close(m);
		close(fs);
		return ok ? 0 : -1;
	}
	if (fs >= 0)
		close(fs);
	used = (size_t)snprintf(opts, sizeof(opts), "lowerdir=");
	for (size_t i = n; i-- > 0;)
		used += (size_t)snprintf(opts + used, sizeof(opts) - used, "%s%s", lower[i], i ? ":" : "");
	if (snprintf(opts + used, sizeof(opts) - used, ",upperdir=%s,workdir=%s%s", upper, work,
		     userxattr ? ",userxattr" : "") >=
	    (int)(sizeof(opts) - used))
		return errno = ENAMETOOLONG, -1;
	return mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts);
}

int image_root_build(const struct jail_spec *s, const struct uid_range *r, const char *stage)
{
	static char lower[LMETA_LAYERS_MAX][64];
	char upper[PATH_MAX], work[PATH_MAX], merged[PATH_MAX];
	/* Inside the namespace already (sub): its own names for the commands' root and user. */
	struct owners o = { r->sub ? uid_range_top(r) : r->base + uid_range_top(r), r->sub ? 1000 : r->base + 1000 };
	size_t n = 0;
	int userns = -1, root, rc, xattrs;

	if (r->sub && !r->image) {
		say("an unprivileged caller's image sandbox needs its image range");
		return -1;
	}
	if (!r->sub && (userns = uid_range_idmap(r)) < 0) {
		say("cannot make the user namespace of the image's idmapped mounts: %s", strerror(errno));
		return -1;
	}
	snprintf(lower[0], sizeof(lower[0]), "%s/layers", stage);
	if (mkdir(lower[0], 0755) < 0) {
		say("cannot stage the image's layers: %s", strerror(errno));
		close(userns);
		return -1;
	}
	for (char **l = s->image->layers; *l; l++, n++) {
		if (n >= LMETA_LAYERS_MAX) {
			say("the image has more than %d layers", LMETA_LAYERS_MAX);
			close(userns);
			return -1;
		}
		snprintf(lower[n], sizeof(lower[n]), "%s/layers/%zu", stage, n);
		if (mount_layer(*l, userns, lower[n]) < 0) {
			say("cannot mount layer %s read-only with the sandbox's ids: %s", *l, strerror(errno));
			if (userns >= 0)
				close(userns);
			return -1;
		}
	}
	if (userns >= 0)
		close(userns);
	/* From a snapshot of an image sandbox: its writable layer above the image's (snaplayer.c mounted it). */
	if (s->meta->snapshot && n < LMETA_LAYERS_MAX &&
	    snprintf(lower[n], sizeof(lower[n]), "%s/snapshot/upper", stage) > 0 && access(lower[n], F_OK) == 0)
		n++;
	snprintf(upper, sizeof(upper), "%s/rw/upper", stage);
	snprintf(work, sizeof(work), "%s/rw/work", stage);
	snprintf(merged, sizeof(merged), "%s/root", stage);
	if (mkdir(upper, 0755) < 0 || chown(upper, o.root, o.root) < 0 || mkdir(work, 0700) < 0 ||
	    mkdir(merged, 0755) < 0) {
		say("cannot make the image's writable root: %s", strerror(errno));
		return -1;
	}
	if (r->sub && (xattrs = keeps_user_xattrs(work)) <= 0) {
		if (xattrs == 0)
			say("an unprivileged caller's image sandbox needs user extended attributes on tmpfs, where "
			    "its writable layer lives (overlayfs with userxattr), which Linux has since 6.6: this "
			    "kernel (%s) lacks them; on it, this caller has the \"local\" template, and a root "
			    "caller's image sandboxes do not need them (see hangar(1), Images)",
			    kernel_release());
		else
			say("cannot ask the sandbox's file system for user extended attributes: %s", strerror(errno));
		return -1;
	}
	if (mount_overlay(lower, n, upper, work, merged, r->sub) < 0) {
		say("cannot make the image's writable root: %s", strerror(errno));
		return -1;
	}
	root = open(merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		say("cannot open the image's root: %s", strerror(errno));
		return -1;
	}
	rc = mount_points(root, s, &o) < 0 || write_etc(root, s, &o) < 0 ? -1 : 0;
	close(root);
	return rc;
}
