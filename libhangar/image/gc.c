/*
 * Garbage collection of the image store, always under IMAGE_DIR/lock.
 *
 * What may go: tmp/ entries whose maker is dead (their names carry its
 * process identity); layer directories no record names, complete or not,
 * when their lock is free (an import holds it from unpacking until its
 * record names the layer); blobs no record names (imports write blobs and
 * their record together under the store's lock); use/ files of images that
 * are gone. Then, over the size cap, whole images, least recently stored
 * first, skipping any whose use/ lock a sandbox holds.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/img.h"

struct refs {
	char (*layers)[IMG_HEX_LEN + 1];
	size_t n_layers, cap_layers;
	char (*blobs)[IMG_HEX_LEN + 1];
	size_t n_blobs, cap_blobs;
	struct img_dated *images;
	size_t n_images, cap_images;
	struct img_store *s;
};

static int push(void **v, size_t *n, size_t *cap, size_t elem)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		void *p = realloc(*v, c * elem);

		if (!p)
			return -1;
		*v = p;
		*cap = c;
	}
	(*n)++;
	return 0;
}

static int has(char (*v)[IMG_HEX_LEN + 1], size_t n, const char *hex)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], hex))
			return 1;
	return 0;
}

static int add_ref(const char *hex, void *payload)
{
	struct refs *r = payload;
	struct img_record rec;

	if (img_record_read(r->s, hex, &rec) != 0) {
		herr_clear();
		return 0;
	}
	for (size_t i = 0; i < rec.n_layers; i++) {
		if (push((void **)&r->layers, &r->n_layers, &r->cap_layers, sizeof(*r->layers)) < 0)
			goto oom;
		strcpy(r->layers[r->n_layers - 1], rec.layers[i] + 7);
	}
	if (push((void **)&r->blobs, &r->n_blobs, &r->cap_blobs, sizeof(*r->blobs)) < 0)
		goto oom;
	strcpy(r->blobs[r->n_blobs - 1], rec.digest + 7);
	if (push((void **)&r->blobs, &r->n_blobs, &r->cap_blobs, sizeof(*r->blobs)) < 0)
		goto oom;
	strcpy(r->blobs[r->n_blobs - 1], rec.config_digest + 7);
	if (push((void **)&r->images, &r->n_images, &r->cap_images, sizeof(*r->images)) < 0)
		goto oom;
	strcpy(r->images[r->n_images - 1].hex, hex);
	r->images[r->n_images - 1].created_us = rec.created_us;
	img_record_free(&rec);
	return 0;
oom:
	img_record_free(&rec);
	return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

static void refs_free(struct refs *r)
{
	free(r->layers);
	free(r->blobs);
	free(r->images);
	memset(r, 0, sizeof(*r));
}

static int refs_load(struct img_store *s, struct refs *r)
{
	memset(r, 0, sizeof(*r));
	r->s = s;
	return img_record_each(s, add_ref, r);
}

/* Removes layers/<hex> (and its lock file) when no import holds its lock. */
static void drop_layer(struct img_store *s, const char *hex, uint64_t *freed)
{
	char path[128];
	uint64_t size = 0;
	int fd = img_layer_lock(s, hex, IMG_LOCK_PIN, F_WRLCK, 0);

	if (fd < 0)
		return; /* an import holds it */
	snprintf(path, sizeof(path), "layers/%s", hex);
	if (!img_layer_complete(s, hex, &size))
		size = img_tree_size(s->dirfd, path);
	if (img_rmtree(s->dirfd, path) == 0) {
		*freed += size;
		snprintf(path, sizeof(path), "layers/%s.lock", hex);
		unlinkat(s->dirfd, path, 0);
	}
	close(fd);
}

static void drop_blob(struct img_store *s, const char *hex, uint64_t *freed)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "blobs/sha256/%s", hex);
	if (fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && unlinkat(s->dirfd, path, 0) == 0)
		*freed += (uint64_t)st.st_size;
}

int img_drop_unused(struct img_store *s, const struct img_record *gone, uint64_t *freed)
{
	struct refs r;
	int rc = refs_load(s, &r);

	if (rc) {
		refs_free(&r);
		return rc;
	}
	for (size_t i = 0; i < gone->n_layers; i++)
		if (!has(r.layers, r.n_layers, gone->layers[i] + 7))
			drop_layer(s, gone->layers[i] + 7, freed);
	if (!has(r.blobs, r.n_blobs, gone->digest + 7))
		drop_blob(s, gone->digest + 7, freed);
	if (!has(r.blobs, r.n_blobs, gone->config_digest + 7))
		drop_blob(s, gone->config_digest + 7, freed);
	refs_free(&r);
	return 0;
}

/* Calls fn for each entry name of dirfd-relative dir. */
static void each_entry(struct img_store *s, const char *dir, void (*fn)(struct img_store *, const char *, void *),
		       void *payload)
{
	int fd = openat(s->dirfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	/* Names first, then the work: fn may remove entries. */
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (push((void **)&names, &n, &cap, sizeof(char *)) < 0 || !(names[n - 1] = strdup(e->d_name))) {
			if (n)
				n--;
			break;
		}
	}
	closedir(d);
	for (size_t i = 0; i < n; i++) {
		fn(s, names[i], payload);
		free(names[i]);
	}
	free(names);
}

struct sweep {
	struct refs *r;
	uint64_t *freed;
};

static void sweep_tmp(struct img_store *s, const char *name, void *payload)
{
	struct sweep *w = payload;
	char identity[160], path[300];
	char *dash;

	snprintf(identity, sizeof(identity), "%s", name);
	if ((dash = strrchr(identity, '-')) != NULL)
		*dash = '\0';
	if (!hproc_dead(identity))
		return;
	snprintf(path, sizeof(path), "tmp/%s", name);
	*w->freed += img_tree_size(s->dirfd, path);
	img_rmtree(s->dirfd, path);
}

static void sweep_layer(struct img_store *s, const char *name, void *payload)
{
	struct sweep *w = payload;
	char hex[IMG_HEX_LEN + 1], path[128];
	struct stat st;
	size_t n = strlen(name);

	if (n == IMG_HEX_LEN + 5 && !strcmp(name + IMG_HEX_LEN, ".lock")) {
		memcpy(hex, name, IMG_HEX_LEN);
		hex[IMG_HEX_LEN] = '\0';
		snprintf(path, sizeof(path), "layers/%s", hex);
		/* A lock without its layer: removed when nobody holds it. */
		if (img_hex_ok(hex, IMG_HEX_LEN) && fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			img_layer_lock_sweep(s, hex);
		return;
	}
	if (!img_hex_ok(name, IMG_HEX_LEN))
		return;
	if (has(w->r->layers, w->r->n_layers, name) && img_layer_complete(s, name, NULL))
		return;
	drop_layer(s, name, w->freed);
}

static void sweep_blob(struct img_store *s, const char *name, void *payload)
{
	struct sweep *w = payload;

	if (!has(w->r->blobs, w->r->n_blobs, name))
		drop_blob(s, name, w->freed);
}

static void sweep_use(struct img_store *s, const char *name, void *payload)
{
	struct sweep *w = payload;
	char hex[IMG_HEX_LEN + 1], path[128];
	size_t n = strlen(name);
	int fd;

	(void)w;
	if (n != IMG_HEX_LEN + 5 || strcmp(name + IMG_HEX_LEN, ".lock") != 0)
		return;
	memcpy(hex, name, IMG_HEX_LEN);
	hex[IMG_HEX_LEN] = '\0';
	snprintf(path, sizeof(path), "images/%s.json", hex);
	if (faccessat(s->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return;
	if (!img_in_use(s, hex, &fd) && fd >= 0) {
		snprintf(path, sizeof(path), "use/%s", name);
		unlinkat(s->dirfd, path, 0);
		close(fd);
	}
}

/* Removes images, oldest first and none in use, until the store's layers fit in limit. */
static int shrink(struct img_store *s, uint64_t limit, uint64_t *freed)
{
	struct refs r;
	int rc = refs_load(s, &r);

	if (rc) {
		refs_free(&r);
		return rc;
	}
	if (r.n_images)
		qsort(r.images, r.n_images, sizeof(*r.images), img_dated_oldest_first);
	for (size_t i = 0; i < r.n_images && img_store_used(s) > limit; i++) {
		struct img_record rec;
		char path[128];
		int use_fd = -1;

		if (img_in_use(s, r.images[i].hex, &use_fd))
			continue;
		if (img_record_read(s, r.images[i].hex, &rec) == 0) {
			snprintf(path, sizeof(path), "images/%s.json", r.images[i].hex);
			if (unlinkat(s->dirfd, path, 0) == 0)
				img_drop_unused(s, &rec, freed);
			img_record_free(&rec);
		}
		herr_clear();
		if (use_fd >= 0)
			close(use_fd);
	}
	refs_free(&r);
	return 0;
}

int img_gc(uint64_t *out_freed, hangar_ctx *ctx, uint64_t max_bytes)
{
	struct img_store s;
	struct refs r;
	struct sweep w;
	int rc;

	*out_freed = 0;
	if ((rc = img_store_open(&s, ctx)) != 0)
		return rc;
	if ((rc = img_store_lock(&s)) != 0 || (rc = refs_load(&s, &r)) != 0) {
		img_store_close(&s);
		return rc;
	}
	w.r = &r;
	w.freed = out_freed;
	each_entry(&s, "tmp", sweep_tmp, &w);
	img_sweep_pulls(&s, out_freed);
	each_entry(&s, "layers", sweep_layer, &w);
	each_entry(&s, "blobs/sha256", sweep_blob, &w);
	each_entry(&s, "use", sweep_use, &w);
	refs_free(&r);
	rc = shrink(&s, max_bytes ? max_bytes : s.cap_bytes, out_freed);
	img_store_close(&s);
	return rc;
}
