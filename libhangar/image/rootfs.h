/*
 * A sandbox's root from the image store: the reader a provider uses to run
 * a sandbox on an image's layers (the local provider's create). It reads the
 * store's records as hangar-images(7) lays them out and writes nothing there
 * but its use lock. Internal: nothing here is exported from the library.
 */
#pragma once

#include <stddef.h>

#include "hangar/hangar.h"

/* The most layers an image may have here (overlayfs stacks at most 500). */
#define IMAGE_ROOTFS_MAX_LAYERS 128

struct image_rootfs {
	char digest[72];      /* "sha256:<hex>", the image's manifest digest */
	char **layers;        /* absolute paths of layers/<hex>/root, bottom -> top, NULL-terminated */
	char **env;           /* config Env, NULL-terminated */
	char *workdir, *user; /* config WorkingDir, User ("" when unset) */
	char *use_path;       /* IMAGE_DIR/use/<hex>.lock, for whoever holds the image after us */
	int use_fd;           /* use_path, flock(LOCK_SH) held, O_CLOEXEC; -1: none */
};

/*
 * Finds ref (an exact name, "sha256:<hex>", or a unique prefix of <hex> of
 * at least 12 digits) in the image store, checks that every layer it names
 * is complete (its layer.json present) and takes the image's shared use
 * lock, which a removal or a garbage collection of the image waits on.
 * 0 with *out filled (the caller's, to image_rootfs_release), or
 * HANGAR_ENOTFOUND (no image ref, naming it), HANGAR_EINVAL (a bad ref, a
 * prefix naming several images, a record that is not one), HANGAR_ECREATE
 * (a layer not complete) or HANGAR_ECONFIG / HANGAR_EOS (the store), each
 * with the error set and *out empty.
 */
int image_rootfs_get(hangar_ctx *ctx, const char *ref, struct image_rootfs *out);
/*
 * r's User ("name", "uid", either with ":group") as a user name, into buf:
 * "" when unset; a uid is looked up in the /etc/passwd of the topmost layer
 * that has one. 0, or HANGAR_EINVAL (no such uid, too long) with the error set.
 */
int image_rootfs_user_name(const struct image_rootfs *r, char *buf, size_t size);
/* Frees r and lets go of its use lock (when still held). NULL-safe. */
void image_rootfs_release(struct image_rootfs *r);

/*
 * 1 when the calling process, not root, has an image range of subordinate
 * ids (image/subids.c) its layers are unpacked into, so its sandboxes can
 * run images; 0 otherwise. *need: the ids of each it needs at least.
 */
int image_rootfs_subids(unsigned *need);

/*
 * For an unprivileged caller: checks that each layer of r is owned by its
 * image range, as an unpack with subordinate ids leaves it (not one stored
 * before it had them, nor for another range). 0, or HANGAR_EUNSUPPORTED
 * naming the layer and what to do.
 */
int image_rootfs_check_owners(const struct image_rootfs *r);

/*
 * IMAGE_DIR for ctx into buf: the setting HANGAR_IMAGE_DIR, else
 * <HANGAR_STATE_DIR>/images. 0, or HANGAR_ECONFIG with the error set.
 */
int image_dir(hangar_ctx *ctx, char *buf, size_t size);
