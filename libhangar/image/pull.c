/*
 * Pulling: a registry's image fetched into an OCI layout of the store's own
 * (pulls/<key>, one per normalised reference) and imported from there.
 *
 * The layout is kept across attempts, under a lock of its own
 * (pulls/<key>.lock). A second process pulling the same reference waits
 * for the first, and takes what it pulled (pulls/<key>.done: when it ended
 * and the image's digest) when that ended after the second one started
 * waiting: one download serves both. A pull killed at any point leaves only
 * blobs the next fetch checks before it uses them (and .partial files it
 * removes). Once the image is in the store the layout goes; gc removes one
 * whose pull is not running.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/versioned.h"
#include "util/clock.h"
#include "image/img.h"
#include "image/registry.h"

/* The layout's name for a normalised reference. */
static void pull_key(const char *ref, char out[32])
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof(h) + 1];

	crypto_hash_sha256(h, (const unsigned char *)ref, strlen(ref));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, 32, "%.24s", hex);
}

struct pulling {
	const hangar_image_opts *o;
	hangar_image_progress p;
};

static int on_fetch(void *ud, const char *phase, const char *blob, uint64_t done, uint64_t total, uint32_t blobs_done,
		    uint32_t blobs_total)
{
	struct pulling *pl = ud;

	(void)phase;
	pl->p.phase = "download";
	pl->p.layer = blob ? blob : "";
	pl->p.layers_done = blobs_done;
	pl->p.layers_total = blobs_total;
	pl->p.bytes_done = done;
	pl->p.bytes_total = total;
	return pl->o->progress ? pl->o->progress(&pl->p, pl->o->progress_payload) : 0;
}

static int on_cancel(void *ud)
{
	struct pulling *pl = ud;

	return pl->o->cancel && pl->o->cancel(pl->o->cancel_payload);
}

/* Takes pulls/<key>.lock, waiting for another pull of the same reference; cancel is asked meanwhile. */
static int lock_pull(struct img_store *s, const char *key, struct pulling *pl, int *fd)
{
	char name[64];

	snprintf(name, sizeof(name), "pulls/%s.lock", key);
	*fd = openat(s->dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*fd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot open %s/%s", s->dir, name);
	while (flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		struct timespec nap = { 0, 20 * 1000000L };

		if (errno != EWOULDBLOCK && errno != EINTR) {
			int e = errno;

			close(*fd);
			*fd = -1;
			return herr_os(HANGAR_EOS, e, "cannot lock %s/%s", s->dir, name);
		}
		if (on_cancel(pl)) {
			close(*fd);
			*fd = -1;
			return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the pull was cancelled");
		}
		/* Another process pulls the same image: its download is ours once it is done. */
		nanosleep(&nap, NULL);
	}
	return 0;
}

/*
 * When another process pulled this reference and ended after asked_us (we
 * waited for it), its image, if the store still has it: 0 with its digest
 * in out, else -1.
 */
static int taken_from_another(struct img_store *s, const char *key, int64_t asked_us, hangar_buf *out)
{
	char name[64], digest[80], hex[IMG_HEX_LEN + 1], *text = NULL;
	long long ended;
	size_t len;
	int ok;

	snprintf(name, sizeof(name), "pulls/%s.done", key);
	if (img_read_file(s->dirfd, name, 256, &text, &len) != 0) {
		herr_clear();
		return -1;
	}
	ok = sscanf(text, "%lld %79s", &ended, digest) == 2 && ended >= asked_us && img_digest_ok(digest) &&
	     img_find(s, digest, hex) == 0;
	free(text);
	herr_clear();
	if (!ok)
		return -1;
	hangar_buf_dispose(out);
	out->ptr = strdup(digest);
	if (!out->ptr)
		return -1;
	out->size = strlen(digest);
	out->reserved = out->size + 1;
	return 0;
}

int img_pull(hangar_buf *out, hangar_ctx *ctx, const char *reference, const hangar_image_opts *opts)
{
	struct pulling pl = { opts, { HANGAR_IMAGE_PROGRESS_VERSION, sizeof(pl.p), "download", "", 0, 0, 0, 0 } };
	struct registry_progress rp = { on_fetch, &pl, on_cancel };
	hangar_image_opts io = *opts;
	struct img_store s;
	char key[32], layout[sizeof(s.dir) + 64], *ref = NULL, *digest = NULL;
	int64_t asked_us;
	int lock = -1, rc;

	if ((rc = registry_ref_normalize(reference, &ref)) != 0)
		return rc;
	if ((rc = img_store_open(&s, ctx)) != 0)
		goto out;
	if (mkdirat(s.dirfd, "pulls", 0700) < 0 && errno != EEXIST) {
		rc = herr_os(HANGAR_EOS, errno, "cannot create %s/pulls", s.dir);
		goto close;
	}
	pull_key(ref, key);
	asked_us = clock_wall_us();
	if ((rc = lock_pull(&s, key, &pl, &lock)) != 0)
		goto close;
	if (taken_from_another(&s, key, asked_us, out) == 0) {
		rc = 0;
		goto unlock;
	}
	snprintf(layout, sizeof(layout), "%s/pulls/%s", s.dir, key);
	if ((rc = registry_fetch(ctx, ref, layout, &rp, &digest)) != 0)
		goto unlock;
	/* The store's name for it is the reference, normalised. */
	io.name = ref;
	rc = img_import(out, ctx, layout, &io);
	if (rc == 0) {
		char name[64], done[128];

		snprintf(name, sizeof(name), "pulls/%s", key);
		img_rmtree(s.dirfd, name);
		snprintf(name, sizeof(name), "pulls/%s.done", key);
		snprintf(done, sizeof(done), "%lld %s\n", (long long)clock_wall_us(), out->ptr);
		img_write_atomic(s.dirfd, name, done, strlen(done), 0600);
	}
unlock:
	close(lock);
close:
	img_store_close(&s);
out:
	free(digest);
	free(ref);
	return rc;
}

int img_sweep_pulls(struct img_store *s, uint64_t *freed)
{
	int fd = openat(s->dirfd, "pulls", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)) != NULL) {
		char lockname[128], dirname[128];
		size_t n = strlen(e->d_name);
		int lk;

		if (n != 29 || strcmp(e->d_name + 24, ".lock") != 0)
			continue;
		snprintf(lockname, sizeof(lockname), "pulls/%.29s", e->d_name);
		snprintf(dirname, sizeof(dirname), "pulls/%.24s", e->d_name);
		lk = openat(s->dirfd, lockname, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (lk < 0)
			continue;
		/* Only a layout whose pull is not running. */
		if (flock(lk, LOCK_EX | LOCK_NB) == 0) {
			*freed += img_tree_size(s->dirfd, dirname);
			/* The lock file stays: a pull waiting on it must not lose it. */
			img_rmtree(s->dirfd, dirname);
		}
		close(lk);
	}
	closedir(d);
	return 0;
}
