/*
 * A sandbox made from a snapshot (libhangar/providers/local/snapshot.h):
 * its /workspace, /home/user, /tmp and /root start as the snapshot's.
 *
 * The snapshot's layer is shared by every sandbox made from it and never
 * written: each of the four is an overlay whose lower layer is the
 * snapshot's tree, mounted read-only through an idmapped mount (the
 * snapshot holds the ids the commands saw, which uid_range_idmap maps into
 * this sandbox's own range, as image.c does for an image's layers), and
 * whose upper layer is in the stage's rw file system. What the sandbox
 * writes, a file it changes copied up included, counts towards its disk
 * limit and goes with it; another sandbox of the same snapshot sees none
 * of it.
 *
 * An unprivileged caller's snapshot is owned in its image range already
 * (libhangar/providers/local/snapshot-sub.c), which the jail gives to every
 * sandbox made from it as to its image sandboxes: the layer is a plain
 * read-only bind, and the overlays are mounted inside the sandbox's user
 * namespace with `userxattr`, as image.c mounts an image's.
 *
 * A snapshot of an image sandbox also holds that sandbox's writable layer
 * (upper/, whiteouts and opaque directories kept: user.overlay.* for an
 * unprivileged caller's, which its userxattr overlay reads), which image.c
 * puts between the image's layers and the new sandbox's own.
 *
 * The jail holds the snapshot's use lock shared for as long as it lives, so
 * the snapshot cannot be deleted under it. At its end it lets go of it and
 * reaps the snapshot (lsnapuse.h): one released to go once unused (a
 * session fork's) goes with its last sandbox. Root removes it; an
 * unprivileged jail cannot remove files owned in its caller's image range,
 * so it only renames it out of the way, and the library finishes the
 * removal at its next clean-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jail.h"
#include "lsnapuse.h"
#include "lstate.h"

/* The use lock, held until the jail exits, however it exits, and the snapshot's directory. */
static int use_lock = -1;
static char use_dir[PATH_MAX];

int snaplayer_hold(const struct lmeta *m)
{
	char path[PATH_MAX];

	if (!m->snapshot)
		return 0;
	if (snprintf(use_dir, sizeof(use_dir), "%s", m->snapshot) >= (int)sizeof(use_dir)) {
		say("snapshot directory %.64s... is too long", m->snapshot);
		use_dir[0] = '\0';
		return -1;
	}
	snprintf(path, sizeof(path), "%s/use", m->snapshot);
	use_lock = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (use_lock < 0 || flock(use_lock, LOCK_SH | LOCK_NB) < 0) {
		say("cannot hold snapshot %s's use lock: %s", m->snapshot, strerror(errno));
		return -1;
	}
	return 0;
}

static int rm_root(const char *path)
{
	return lstate_rmtree_at(AT_FDCWD, path);
}

void snaplayer_release(void)
{
	int r;

	if (!use_dir[0])
		return;
	/* Our use goes first: a reap looks for uses after it. */
	if (use_lock >= 0)
		close(use_lock);
	use_lock = -1;
	r = lsnap_reap(use_dir, 0, geteuid() == 0 ? rm_root : NULL);
	if (r < 0 && r != -ENOENT)
		say("cannot remove released snapshot %s: %s", use_dir, strerror(-r));
	use_dir[0] = '\0';
}

int snaplayer_open(const struct jail_spec *s, int *layer)
{
	char path[PATH_MAX];

	*layer = -1;
	if (!s->meta->snapshot)
		return 0;
	snprintf(path, sizeof(path), "%s/layer", s->meta->snapshot);
	*layer = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return *layer < 0 ? -1 : 0;
}

/* The layer, idmapped with userns (-1: as it is) and read-only, at dst. 0, or -1 with errno. */
static int mount_idmapped(int layer, int userns, const char *dst)
{
	struct mount_attr attr = {
		.attr_set = (userns >= 0 ? MOUNT_ATTR_IDMAP : 0) | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
			    MOUNT_ATTR_NODEV,
		.userns_fd = userns >= 0 ? (uint64_t)userns : 0,
	};
	int t = open_tree(layer, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH), rc = -1, e;

	if (t < 0)
		return -1;
	if (mount_setattr(t, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0 && mkdir(dst, 0755) == 0 &&
	    move_mount(t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) == 0)
		rc = 0;
	e = errno;
	close(t);
	errno = e;
	return rc;
}

/*
 * rw/name: an overlay of lower/name under an upper layer beside it, which
 * takes rw/name's owner and mode; userxattr inside a user namespace.
 */
static int overlay_at(const char *rw, const char *lower, const char *name, int userxattr)
{
	char merged[256], upper[256], work[256], opts[1024];
	struct stat st;

	/* The stage is a short path (stage_dir()), the names shorter. */
	snprintf(merged, sizeof(merged), "%.200s/%.16s", rw, name);
	snprintf(upper, sizeof(upper), "%.200s/.upper-%.16s", rw, name);
	snprintf(work, sizeof(work), "%.200s/.work-%.16s", rw, name);
	if (stat(merged, &st) < 0 || mkdir(upper, 0700) < 0 || chown(upper, st.st_uid, st.st_gid) < 0 ||
	    chmod(upper, st.st_mode & 07777) < 0 || mkdir(work, 0700) < 0)
		return -1;
	snprintf(opts, sizeof(opts), "lowerdir=%.200s/%.16s,upperdir=%s,workdir=%s%s", lower, name, upper, work,
		 userxattr ? ",userxattr" : "");
	return mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts);
}

int snaplayer_mount(const struct jail_spec *s, const struct uid_range *r, const char *at, int layer)
{
	static const char *const names[] = { "workspace", "home", "tmp", "root" };
	char lower[PATH_MAX], rw[PATH_MAX];
	int userns;

	if (layer < 0)
		return 0;
	if (r->sub && !r->image) {
		say("sandbox %s: a sandbox from an unprivileged caller's snapshot needs its image range", s->meta->id);
		close(layer);
		return -1;
	}
	/* Inside the namespace already (sub): the layer's owners are this sandbox's ids as they are. */
	userns = r->sub ? -1 : uid_range_idmap(r);
	snprintf(lower, sizeof(lower), "%s/snapshot", at);
	if ((!r->sub && userns < 0) || mount_idmapped(layer, userns, lower) < 0) {
		say("cannot mount snapshot %s with the sandbox's ids: %s", s->meta->snapshot, strerror(errno));
		if (userns >= 0)
			close(userns);
		close(layer);
		return -1;
	}
	if (userns >= 0)
		close(userns);
	close(layer);
	snprintf(rw, sizeof(rw), "%s/rw", at);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (overlay_at(rw, lower, names[i], r->sub) < 0) {
			say("cannot put the sandbox's /%s over its snapshot's: %s", names[i], strerror(errno));
			return -1;
		}
	return 0;
}
