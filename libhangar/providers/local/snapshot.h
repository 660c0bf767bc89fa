/*
 * Snapshots of local sandboxes: a sandbox's writable files (/workspace,
 * /home/user, /tmp, /root), copied once, while the sandbox is frozen, into a
 * read-only layer that sandboxes created from the snapshot start from. Files
 * only: no process, no memory.
 *
 * $HANGAR_STATE_DIR/local/snapshots/<snap-id>/   mode 0700, the caller's
 *   record.json   {"id", "name", "parent", "template", "network", "created_at_us",
 *                 "image": the image's digest, for a snapshot of an image sandbox}
 *   use           flock()ed shared by every sandbox made from it (its jail, for
 *                 as long as it lives), exclusively by a deletion
 *   release       when it was released: deleted once no sandbox uses it (a
 *                 session fork's snapshot; lsnapuse.h); the directory itself
 *                 is flock()ed as the gate of that deletion
 *   layer/        workspace/, home/, tmp/, root/ (and upper/, an image sandbox's
 *                 writable layer over the image's): the files, owned by the ids the
 *                 sandbox's commands saw (0 is their root, 1000 `user`), which
 *                 each child's jail maps into its own id range (an idmapped mount);
 *                 an unprivileged caller's are owned in its image range
 *                 instead, where its children run (snapshot-sub.c)
 *
 * A snapshot is laid out under .new-<snap-id> and renamed into place when
 * complete; a deletion renames it to .del-<snap-id> before removing it, and
 * a .del-<snap-id> whose gate is free is a removal left unfinished.
 */
#pragma once

#include <stddef.h>

#include "image/rootfs.h"
#include "local.h"

#define LSNAP_PREFIX "snap-"
#define LSNAP_ID_LEN 21 /* "snap-" + 16 lowercase hex digits */
#define LSNAP_DEPTH_MAX 128 /* the deepest directory a snapshot copies */

/* 1 when id is "snap-" followed by 16 lowercase hex digits. */
int local_snapshot_valid_id(const char *id);

/*
 * A create from snapshot opts->template_id: records it in m (its directory,
 * its network unless opts chose one) and takes its use lock shared into
 * img->use_fd, or for a snapshot of an image sandbox into *snap_fd (img
 * then holds the image), for the caller to release once the jail holds its
 * own. 0, or an error set (HANGAR_ENOTFOUND: no such snapshot).
 */
int local_snapshot_use(const struct local *l, const struct hangar_create_opts *opts, struct lmeta *m,
		       struct image_rootfs *img, int *snap_fd);

/*
 * create.c: the template name ("local", or an image of the store, found,
 * locked in *img and recorded in m->image). 0, or an error set.
 */
int local_find_template(const struct local *l, const char *name, struct lmeta *m, struct image_rootfs *img);
/* Deletes snapshot id: 0, HANGAR_EGONE (none), HANGAR_EBUSY (a sandbox uses it) or an error set. */
int local_snapshot_delete(struct local *l, const char *id);

/*
 * Copies the tree of directory src (the sandbox's, through /proc/PID/root,
 * opened O_RDONLY) to name in dst, which must not exist: regular files (holes kept, hard links
 * kept), directories, symbolic links (never followed) and FIFOs (never
 * opened); sockets and devices are left out, but with overlay (src is an
 * overlayfs upper layer) a whiteout (a 0:0 character device) is kept, and
 * so are the trusted.overlay.* attributes (opaque directories), or with
 * overlay 2 the user.overlay.* ones (an overlay with userxattr). Owners are
 * mapped from the
 * sandbox's host ids (base, top: uid_map) to the ids its commands saw, or,
 * when ids is not NULL, as ids says. 0, or -errno with why in msg.
 */
struct lsnap_seg {
	unsigned from, to, count; /* ids from..from+count-1 as the copier sees them are written as to.. */
};
struct lsnap_ids {
	struct lsnap_seg uid[16], gid[16];
	size_t nu, ng;
	unsigned nobody; /* what an id of no segment is written as */
};
int local_snapshot_copy(int src, int dst, const char *name, unsigned base, unsigned top, const struct lsnap_ids *ids,
			int overlay, char *msg, size_t size);

/*
 * An unprivileged caller's snapshots (snapshot-sub.c): owned in its image
 * range, copied and removed by a forked child that is root of a user
 * namespace mapping the image range (0..1023), the caller (1024) and the
 * parent's slot (p_*, at 2048; p_count 0: none, the parent runs in the
 * image range).
 */
struct lsnap_sub {
	unsigned img_uid, img_gid;
	unsigned p_uid, p_gid, p_count, p_gcount;
	struct lsnap_ids ids; /* the parent's ids as the child sees them -> the image range's */
};
/*
 * 1 when the caller is not root and has an image range (two slots of
 * subordinate ids or more), and l's HANGAR_LOCAL_SUBIDS is not off.
 */
int local_snapshot_sub_ok(const struct local *l);
/* The plan for copying the sandbox whose pid 1 is init. 0, or -1 with why in msg. */
int local_snapshot_sub_plan(int init, struct lsnap_sub *s, char *msg, size_t size);
/* fn(arg, msg, size) in that child: its result (0 or -errno), and its msg. */
int local_snapshot_sub_run(const struct lsnap_sub *s, int (*fn)(void *arg, char *msg, size_t size), void *arg,
			   char *msg, size_t size);
/* Removes path (a snapshot's directory) in that child. 0 or -errno. */
int local_snapshot_sub_rmtree(const char *path);

/* The provider's slots (include/hangar/sys/provider.h). */
int local_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id);
int local_snapshot_held(void *state, const char *id, const char *name, hangar_buf *out_id);
uint64_t local_capabilities(void *state);
int local_snapshot_delete_slot(void *state, const char *snapshot_id);
int local_snapshot_release_slot(void *state, const char *snapshot_id);
int local_snapshot_list(void *state, int (*fn)(const struct hangar_snapshot_info *info, void *payload), void *payload);

/*
 * A use of snapshot dir (its path, as meta.json's "snapshot" says) was
 * dropped (its sandbox's jail ended): removes it if it was released and
 * that was the last, or finishes its removal if a jail left it renamed.
 * Failures are logged.
 */
void local_snapshot_reap(struct local *l, const char *dir);
/*
 * The same for every released snapshot and every unfinished removal, and
 * removes what a snapshot's maker that died left half-made: the clean-up
 * of list.
 */
void local_snapshot_sweep(struct local *l);
/* local_init's and local_fini's: the snapshots the context holds (none yet; each released at the end). */
void local_snapshot_holds_init(struct local *l);
void local_snapshot_holds_fini(struct local *l);
