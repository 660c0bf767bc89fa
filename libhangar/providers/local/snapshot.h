/*
 * Snapshots of local sandboxes: a sandbox's writable files (/workspace,
 * /home/user, /tmp, /root), copied once, while the sandbox is frozen, into a
 * read-only layer that sandboxes created from the snapshot start from. Files
 * only: no process, no memory.
 *
 * $HANGAR_STATE_DIR/local/snapshots/<snap-id>/   mode 0700, root's
 *   record.json   {"id", "name", "parent", "template", "network", "created_at_us"}
 *   use           flock()ed shared by every sandbox made from it (its jail, for
 *                 as long as it lives), exclusively by a deletion
 *   layer/        workspace/, home/, tmp/, root/: the files, owned by the ids the
 *                 sandbox's commands saw (0 is their root, 1000 `user`), which
 *                 each child's jail maps into its own id range (an idmapped mount)
 *
 * A snapshot is laid out under .new-<snap-id> and renamed into place when
 * complete; a deletion renames it to .del-<snap-id> before removing it.
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
 * img->use_fd, for the caller to release once the jail holds its own. 0, or
 * an error set (HANGAR_ENOTFOUND: no such snapshot).
 */
int local_snapshot_use(const struct local *l, const struct hangar_create_opts *opts, struct lmeta *m,
		       struct image_rootfs *img);

/* Deletes snapshot id: 0, HANGAR_EGONE (none), HANGAR_EBUSY (a sandbox uses it) or an error set. */
int local_snapshot_delete(struct local *l, const char *id);

/*
 * Copies the tree of directory src (the sandbox's, through /proc/PID/root,
 * opened O_RDONLY) to name in dst, which must not exist: regular files (holes kept, hard links
 * kept), directories, symbolic links (never followed) and FIFOs (never
 * opened); sockets and devices are left out. Owners are mapped from the
 * sandbox's host ids (base, top: uid_map) to the ids its commands saw.
 * 0, or -errno with why in msg.
 */
int local_snapshot_copy(int src, int dst, const char *name, unsigned base, unsigned top, char *msg, size_t size);

/* The provider's slots (include/hangar/sys/provider.h). */
int local_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id);
uint64_t local_capabilities(void *state);
int local_snapshot_delete_slot(void *state, const char *snapshot_id);
