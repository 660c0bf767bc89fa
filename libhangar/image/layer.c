/*
 * One layer into the store: layers/<diff hex>/ made at most once, however
 * many imports want it at the same time.
 *
 * layers/<hex>.lock serialises the makers: a maker holds it LOCK_EX while
 * it unpacks into tmp/, renames the result into layers/<hex>/ and writes
 * layer.json last; everyone then holds it LOCK_SH until its image record
 * names the layer, so gc (which takes it LOCK_EX | LOCK_NB) never removes a
 * layer an import is about to name. A maker killed at any point leaves a
 * tmp/ entry or a layer directory without layer.json: neither is used, the
 * next maker replaces it, gc removes it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/img.h"
#include "util/subids.h"

static int write_layer_json(struct img_store *s, const char *hex, const struct img_unpack *u)
{
	char path[128], text[256];
	int n, rc;

	n = snprintf(text, sizeof(text), "{\"diff_id\":\"sha256:%s\",\"size\":%" PRIu64 ",\"files\":%" PRIu64 "}\n",
		     hex, u->size, u->files);
	snprintf(path, sizeof(path), "layers/%s/layer.json", hex);
	rc = img_write_atomic(s->dirfd, path, text, (size_t)n, 0444);
	if (rc < 0)
		return herr_os(HANGAR_EOS, -rc, "cannot write %s/%s", s->dir, path);
	return 0;
}

/* Moves the unpacked tmp dir into layers/<hex> under the layer's LOCK_EX; drops it when another won. */
static int commit(struct img_store *s, const char *tmp, const char *hex, const struct img_unpack *u)
{
	char path[128];

	if (img_layer_complete(s, hex, NULL)) {
		img_rmtree(s->dirfd, tmp);
		return 0;
	}
	snprintf(path, sizeof(path), "layers/%s", hex);
	/* A directory without layer.json is a killed maker's: never used, replaced. */
	img_rmtree(s->dirfd, path);
	if (renameat(s->dirfd, tmp, s->dirfd, path) < 0) {
		int e = errno;

		img_rmtree(s->dirfd, tmp);
		return herr_os(HANGAR_EOS, e, "cannot move layer sha256:%s into %s/layers", hex, s->dir);
	}
	return write_layer_json(s, hex, u);
}

struct unpack_job {
	struct img_store *s;
	struct img_unpack *u;
	const char *root;
	int forward; /* in img_subids_run's child: progress goes to the parent */
	/* what the child's unpack found, sent back to the parent */
	struct {
		char diff_id_out[80];
		uint64_t size, files;
	} out;
};

static int unpack_at(void *arg)
{
	struct unpack_job *j = arg;
	int rootfd, rc;

	if (j->forward && j->u->progress) {
		j->u->progress = subids_progress;
		j->u->payload = NULL;
	}
	if (mkdirat(j->s->dirfd, j->root, 0755) < 0 ||
	    (rootfd = openat(j->s->dirfd, j->root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return herr_os(HANGAR_EOS, errno, "cannot make %s/%s", j->s->dir, j->root);
	rc = img_unpack(rootfd, j->u);
	close(rootfd);
	memcpy(j->out.diff_id_out, j->u->diff_id_out, sizeof(j->out.diff_id_out));
	j->out.size = j->u->size;
	j->out.files = j->u->files;
	return rc;
}

static int unpack_into_tmp(struct img_store *s, struct img_unpack *u, char *tmp, size_t size)
{
	char root[4200];
	struct unpack_job j = { .s = s, .u = u, .root = root };
	struct img_subids ids;
	uint64_t used = img_store_used(s);
	int rc;

	if ((rc = img_tmp_dir(s, tmp, size)) != 0)
		return rc;
	snprintf(root, sizeof(root), "%s/root", tmp);
	u->max_bytes = used >= s->cap_bytes ? 0 : s->cap_bytes - used;
	/* An unprivileged caller with subordinate ids: owners as the tar says, within its image range (subids.c). */
	if (img_subids_image(&ids) == 0) {
		u->max_id = ids.count;
		j.forward = 1;
		rc = img_subids_run(&ids, unpack_at, &j, &j.out, sizeof(j.out), u->progress, u->payload);
		if (rc >= 0) {
			memcpy(u->diff_id_out, j.out.diff_id_out, sizeof(u->diff_id_out));
			u->size = j.out.size;
			u->files = j.out.files;
		}
	} else {
		rc = unpack_at(&j);
	}
	if (rc)
		img_rmtree(s->dirfd, tmp);
	return rc;
}

int img_layer_make(struct img_store *s, struct img_unpack *u, int *pin_fd)
{
	char tmp[256] = "", hex[IMG_HEX_LEN + 1];
	const char *name;
	int pin = -1, make = -1, rc;

	*pin_fd = -1;
	if (!u->diff_id) {
		/* A rootfs: its diff_id is known only once unpacked, into tmp/ (which gc leaves to live makers). */
		if ((rc = unpack_into_tmp(s, u, tmp, sizeof(tmp))) != 0)
			return rc;
	}
	strcpy(hex, u->diff_id ? u->diff_id + 7 : u->diff_id_out + 7);
	name = u->diff_id ? u->diff_id : u->diff_id_out;
	if ((pin = img_layer_lock(s, hex, IMG_LOCK_PIN, F_RDLCK, 1)) < 0) {
		rc = herr_os(HANGAR_EOS, -pin, "cannot lock layer %s", name);
		pin = -1;
		goto out;
	}
	if (img_layer_complete(s, hex, &u->size)) {
		rc = 1; /* there already: pinned until the record names it */
		goto out;
	}
	if ((make = img_layer_lock(s, hex, IMG_LOCK_MAKE, F_WRLCK, 1)) < 0) {
		rc = herr_os(HANGAR_EOS, -make, "cannot lock layer %s", name);
		make = -1;
		goto out;
	}
	if (img_layer_complete(s, hex, &u->size)) {
		rc = 1; /* another import made it while this one waited */
		goto out;
	}
	if (u->diff_id && (rc = unpack_into_tmp(s, u, tmp, sizeof(tmp))) != 0)
		goto out;
	rc = commit(s, tmp, hex, u);
	tmp[0] = '\0';
out:
	if (!u->diff_id && tmp[0] && rc != 0)
		img_rmtree(s->dirfd, tmp);
	if (make >= 0)
		close(make);
	if (rc < 0) {
		if (pin >= 0)
			close(pin);
		/* Nothing came of it: its lock file goes unless someone else holds it. */
		img_layer_lock_sweep(s, hex);
		return rc;
	}
	*pin_fd = pin;
	return rc;
}
