/*
 * hangar_image_import(): an OCI image layout directory, a `docker save` /
 * `podman save` archive or a root-filesystem tarball into the store.
 *
 * What path is comes from its content: a directory with an oci-layout file
 * is a layout; an archive (tar, gzip or zstd, by magic) whose top level
 * holds manifest.json is docker's format, one with oci-layout and
 * index.json a layout in a tar; any other archive is a root filesystem.
 * An image archive's files are first copied into tmp/ (regular files only,
 * each name checked), then read as a layout is. Every blob is checked
 * against its digest before it is used; the record is written last, under
 * the store's lock, once every layer it names is complete.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "image/img.h"
#include "util/clock.h"
#include "util/sjson.h"

/* One import's options and progress. */
struct import {
	struct img_store *s;
	int rootfs_pin;            /* a rootfs's layer, pinned from its making to its record */
	hangar_image_opts o;
	hangar_image_progress p;
	char layer[80];
};

static int report(struct import *im, const char *phase)
{
	im->p.phase = phase;
	im->p.layer = im->layer;
	if (im->o.cancel && im->o.cancel(im->o.cancel_payload))
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled");
	if (im->o.progress && im->o.progress(&im->p, im->o.progress_payload))
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "the import was canceled");
	return 0;
}

static int on_bytes(uint64_t bytes, void *payload)
{
	struct import *im = payload;

	im->p.bytes_done += bytes;
	return report(im, "unpack") != 0;
}

/* ---- storing an image -------------------------------------------------------------------- */

struct image {
	char *manifest, *config;           /* the documents' bytes */
	size_t manifest_len, config_len;
	struct img_manifest m;
	struct img_config c;
	char **names;                      /* normalised, NULL-terminated */
	size_t n_names;
	int *layer_fds;                    /* open blobs, one per layer */
};

static int add_name(struct image *img, const char *name)
{
	char norm[1100], err[160];
	char **v;

	if (img_ref_normalise(name, norm, sizeof(norm), err, sizeof(err)) < 0)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: image name %s: %s", name, err);
	for (size_t i = 0; i < img->n_names; i++)
		if (!strcmp(img->names[i], norm))
			return 0;
	if (!(v = realloc(img->names, (img->n_names + 2) * sizeof(char *))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	img->names = v;
	if (!(v[img->n_names] = strdup(norm)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	v[++img->n_names] = NULL;
	return 0;
}

static void image_free(struct image *img)
{
	if (img->layer_fds)
		for (size_t i = 0; i < img->m.n_layers; i++)
			if (img->layer_fds[i] >= 0)
				close(img->layer_fds[i]);
	free(img->layer_fds);
	for (size_t i = 0; i < img->n_names; i++)
		free(img->names[i]);
	free(img->names);
	free(img->manifest);
	free(img->config);
	img_manifest_free(&img->m);
	img_config_free(&img->c);
}

static int write_blob(struct img_store *s, const char *digest, const char *data, size_t len)
{
	char path[128];
	struct stat st;
	int rc;

	snprintf(path, sizeof(path), "blobs/sha256/%s", digest + 7);
	if (fstatat(s->dirfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len)
		return 0;
	rc = img_write_atomic(s->dirfd, path, data, len, 0444);
	return rc < 0 ? herr_os(HANGAR_EOS, -rc, "cannot write %s/%s", s->dir, path) : 0;
}

/* Takes name off every image but keep_hex (one name names one image). */
struct unname {
	struct img_store *s;
	const char *const *names;
	const char *keep_hex;
	int rc;
};

static int unname_one(const char *hex, void *payload)
{
	struct unname *u = payload;
	struct img_record r;
	size_t i, j, k;
	int changed = 0;

	if (!strcmp(hex, u->keep_hex) || img_record_read(u->s, hex, &r) != 0)
		return 0;
	for (i = j = 0; r.names[i]; i++) {
		int drop = 0;

		for (k = 0; u->names[k]; k++)
			drop |= !strcmp(r.names[i], u->names[k]);
		if (drop) {
			free(r.names[i]);
			changed = 1;
		} else {
			r.names[j++] = r.names[i];
		}
	}
	r.names[j] = NULL;
	if (changed && (u->rc = img_record_write(u->s, &r)) != 0) {
		img_record_free(&r);
		return 1;
	}
	img_record_free(&r);
	return 0;
}

static int store_record(struct img_store *s, struct image *img, const char *digest, uint64_t size)
{
	struct img_record r, old;
	struct unname un;
	int rc, had;

	memset(&r, 0, sizeof(r));
	if ((rc = img_store_lock(s)) != 0)
		return rc;
	if ((rc = write_blob(s, digest, img->manifest, img->manifest_len)) != 0 ||
	    (rc = write_blob(s, img->m.config.digest, img->config, img->config_len)) != 0)
		goto out;
	had = img_record_read(s, digest + 7, &old) == 0;
	herr_clear();
	strcpy(r.digest, digest);
	strcpy(r.config_digest, img->m.config.digest);
	r.os = img->c.os;
	r.architecture = img->c.architecture;
	r.layers = img->c.diff_ids;
	r.n_layers = img->c.n_diff_ids;
	r.size = size;
	r.created_us = had ? old.created_us : clock_wall_us();
	r.config = img->c.config;
	/* Names: the ones it had and the new ones. */
	if (had)
		for (size_t i = 0; old.names[i]; i++)
			if ((rc = add_name(img, old.names[i])) != 0)
				goto out_old;
	r.names = img->names ? img->names : (char *[]){ NULL };
	r.n_names = img->n_names;
	if ((rc = img_record_write(s, &r)) != 0)
		goto out_old;
	un = (struct unname){ s, (const char *const *)r.names, digest + 7, 0 };
	if (img->n_names)
		img_record_each(s, unname_one, &un);
	rc = un.rc;
out_old:
	if (had)
		img_record_free(&old);
out:
	img_store_unlock(s);
	return rc;
}

/* Verifies each layer blob, makes each layer, then writes the record. */
static int give_digest(hangar_buf *out, const char *digest)
{
	char *p = strdup(digest);

	if (!p)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	hangar_buf_dispose(out);
	out->ptr = p;
	out->size = strlen(p);
	out->reserved = out->size + 1;
	return 0;
}

static int store_image(struct import *im, struct image *img, hangar_buf *out_digest, const char *rootfs_digest,
		       uint64_t *out_size)
{
	struct img_store *s = im->s;
	char digest[80];
	int *locks, rc = 0;
	uint64_t size = 0;
	size_t i, n = img->m.n_layers;

	if (img->c.n_diff_ids != n)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
			    "the image's config names %zu layers (rootfs.diff_ids) and its manifest %zu", img->c.n_diff_ids, n);
	if (strcmp(img->c.os, "linux") != 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "the image is for %s, not linux", img->c.os);
	if (!(locks = malloc((n ? n : 1) * sizeof(int))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (i = 0; i < n; i++)
		locks[i] = -1;
	im->p.layers_total = (uint32_t)n;
	for (i = 0; i < n; i++)
		im->p.bytes_total += img->m.layers[i].size;
	for (i = 0; i < n && !rc; i++) {
		struct img_desc *d = &img->m.layers[i];
		struct img_unpack u = { 0 };
		uint64_t got;
		uint64_t before = im->p.bytes_done;

		snprintf(im->layer, sizeof(im->layer), "%s", d->digest);
		if ((rc = report(im, "unpack")) != 0)
			break;
		/* The blob is what the manifest says before a byte of it is unpacked. */
		if (!rootfs_digest) {
			if ((rc = img_hash_fd(img->layer_fds[i], digest, &got)) < 0) {
				rc = herr_os(HANGAR_EOS, -rc, "cannot read layer %s", d->digest);
				break;
			}
			if (strcmp(digest, d->digest) != 0 || got != d->size) {
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
					  "blob %s does not match its digest (its content is %s, %" PRIu64 " bytes)", d->digest,
					  digest, got);
				break;
			}
		}
		u.blob_fd = img->layer_fds[i];
		u.blob_name = d->digest;
		u.want_compression = img_layer_media_compression(d->media_type);
		u.diff_id = rootfs_digest ? NULL : img->c.diff_ids[i];
		u.progress = on_bytes;
		u.payload = im;
		rc = img_layer_make(s, &u, &locks[i]);
		if (rc == 1)
			rc = 0;
		if (rc)
			break;
		if (rootfs_digest) {
			/* A rootfs's config is made now that its diff_id is known (see import_rootfs). */
			free(img->c.diff_ids[0]);
			img->c.diff_ids[0] = strdup(u.diff_id_out);
			if (!img->c.diff_ids[0]) {
				rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
				break;
			}
		}
		size += u.size;
		im->p.bytes_done = before + d->size;
		im->p.layers_done = (uint32_t)(i + 1);
		im->layer[0] = '\0';
		rc = report(im, "unpack");
	}
	*out_size = size;
	/* A rootfs's documents are made once its layer is known: its caller writes the record. */
	if (!rc && !rootfs_digest) {
		im->layer[0] = '\0';
		if ((rc = report(im, "store")) == 0) {
			img_hash_bytes(img->manifest, img->manifest_len, digest);
			rc = store_record(s, img, digest, size);
		}
		if (!rc)
			rc = give_digest(out_digest, digest);
	}
	if (!rc && rootfs_digest) {
		/* Its record comes later (import_rootfs): the pin goes with it. */
		im->rootfs_pin = locks[0];
		locks[0] = -1;
	}
	for (i = 0; i < n; i++)
		if (locks[i] >= 0)
			close(locks[i]);
	free(locks);
	return rc;
}

/* ---- the three kinds of input ------------------------------------------------------------ */

static int blob_path(const char *digest, char *out, size_t size)
{
	return snprintf(out, size, "blobs/sha256/%s", digest + 7) >= (int)size ? -1 : 0;
}

/* Reads and verifies a JSON blob (manifest, config, index) named by a descriptor. */
static int read_blob(struct img_source *src, const struct img_desc *d, char **text, size_t *len)
{
	char path[128], got[80];
	int rc;

	blob_path(d->digest, path, sizeof(path));
	if ((rc = img_src_read(src, path, text, len)) != 0) {
		if (rc == HANGAR_ENOTFOUND)
			herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "%s: blob %s is missing", src->label, d->digest);
		return rc;
	}
	img_hash_bytes(*text, *len, got);
	if (strcmp(got, d->digest) != 0 || *len != d->size) {
		free(*text);
		*text = NULL;
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: blob %s does not match its digest (its content is %s)",
			    src->label, d->digest, got);
	}
	return 0;
}

static int parse_docs(struct image *img, const char *label)
{
	char err[256];

	if (img_parse_manifest(img->manifest, img->manifest_len, &img->m, err, sizeof(err)) < 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s", label, err);
	return 0;
}

static int open_layers(struct img_source *src, struct image *img, char *const *paths)
{
	if (!(img->layer_fds = malloc((img->m.n_layers ? img->m.n_layers : 1) * sizeof(int))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (size_t i = 0; i < img->m.n_layers; i++)
		img->layer_fds[i] = -1;
	for (size_t i = 0; i < img->m.n_layers; i++) {
		char path[128];
		int rc;

		if (!paths)
			blob_path(img->m.layers[i].digest, path, sizeof(path));
		rc = img_src_open(src, paths ? paths[i] : path, &img->layer_fds[i]);
		if (rc == HANGAR_ENOTFOUND)
			return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "%s: blob %s is missing", src->label,
				    paths ? paths[i] : img->m.layers[i].digest);
		if (rc)
			return rc;
	}
	return 0;
}

/* The manifest of an index for this machine: linux and our architecture; nested indexes followed. */
static int pick(struct img_source *src, const char *text, size_t len, int depth, struct img_desc *out, char *name,
		size_t name_size, int *count)
{
	struct img_index ix;
	char err[256];
	int rc = 0;

	if (img_parse_index(text, len, &ix, err, sizeof(err)) < 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s", src->label, err);
	for (size_t i = 0; i < ix.n && !rc; i++) {
		struct img_index_entry *e = &ix.entries[i];
		int kind = img_media_kind(e->desc.media_type);

		if ((e->os[0] && strcmp(e->os, "linux")) || (e->architecture[0] && strcmp(e->architecture, img_host_arch())))
			continue;
		if (kind == 1) {
			if (!*count || strcmp(out->digest, e->desc.digest)) {
				if ((*count)++ == 0) {
					*out = e->desc;
					snprintf(name, name_size, "%s", e->name);
				}
			} else if (!name[0]) {
				snprintf(name, name_size, "%s", e->name);
			}
		} else if (kind == 2) {
			char *sub;
			size_t sub_len;
			char sub_name[512] = "";

			if (depth >= 4) {
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: indexes nest deeper than 4", src->label);
				break;
			}
			if ((rc = read_blob(src, &e->desc, &sub, &sub_len)) != 0)
				break;
			rc = pick(src, sub, sub_len, depth + 1, out, sub_name, sizeof(sub_name), count);
			free(sub);
			if (!rc && !name[0])
				snprintf(name, name_size, "%s", e->name[0] ? e->name : sub_name);
		}
	}
	img_index_free(&ix);
	return rc;
}

static int import_layout(struct import *im, struct img_source *src, hangar_buf *out)
{
	uint64_t size_unused;
	struct image img = { 0 };
	struct img_desc d;
	char *text = NULL, err[256], name[512] = "";
	size_t len;
	int rc, count = 0;
	cJSON *root;

	/* oci-layout says which version of the layout this is. */
	if ((rc = img_src_read(src, "oci-layout", &text, &len)) != 0) {
		if (rc == HANGAR_ENOTFOUND)
			herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
			     "%s is neither an OCI image layout (no oci-layout file) nor an archive", src->label);
		return hangar_error_last()->code;
	}
	root = sjson_parse(text, len, 0, err, sizeof(err));
	free(text);
	if (!cJSON_IsObject(root) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "imageLayoutVersion")) ||
	    strncmp(cJSON_GetObjectItemCaseSensitive(root, "imageLayoutVersion")->valuestring, "1.", 2) != 0) {
		cJSON_Delete(root);
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: oci-layout is not an image layout of version 1.x",
			    src->label);
	}
	cJSON_Delete(root);
	if ((rc = img_src_read(src, "index.json", &text, &len)) != 0)
		return rc;
	rc = pick(src, text, len, 0, &d, name, sizeof(name), &count);
	free(text);
	if (rc)
		return rc;
	if (count == 0)
		return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "%s holds no image for linux/%s", src->label,
			    img_host_arch());
	if (count > 1)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s holds %d images for linux/%s; import a layout of one", src->label, count,
			    img_host_arch());
	if ((rc = read_blob(src, &d, &img.manifest, &img.manifest_len)) != 0 || (rc = parse_docs(&img, src->label)) != 0)
		goto out;
	if ((rc = read_blob(src, &img.m.config, &img.config, &img.config_len)) != 0)
		goto out;
	if (img_parse_config(img.config, img.config_len, &img.c, err, sizeof(err)) < 0) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: blob %s: %s", src->label, img.m.config.digest, err);
		goto out;
	}
	/* A name annotation that is a whole reference is kept; a bare tag is not a name. */
	if (name[0] && (strchr(name, '/') || strchr(name, ':')) && add_name(&img, name) == HANGAR_ENOMEM) {
		rc = HANGAR_ENOMEM;
		goto out;
	}
	herr_clear();
	if (im->o.name && (rc = add_name(&img, im->o.name)) != 0)
		goto out;
	if ((rc = open_layers(src, &img, NULL)) != 0)
		goto out;
	rc = store_image(im, &img, out, NULL, &size_unused);
out:
	image_free(&img);
	return rc;
}

static cJSON *desc_json(const char *media_type, const char *digest, uint64_t size)
{
	cJSON *d = cJSON_CreateObject();

	if (d && cJSON_AddStringToObject(d, "mediaType", media_type) && cJSON_AddStringToObject(d, "digest", digest) &&
	    sjson_add_int64(d, "size", (int64_t)size))
		return d;
	cJSON_Delete(d);
	return NULL;
}

static const char *const layer_types[] = {
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
};

/* An OCI manifest for a config and layer blobs this import describes itself. */
static int make_manifest(struct image *img, const char *config_digest, size_t config_len, char *const *layer_digests,
			 const uint64_t *sizes, const int *compressions, size_t n)
{
	cJSON *root = cJSON_CreateObject(), *layers = NULL;
	char *text = NULL;

	if (root && sjson_add_int64(root, "schemaVersion", 2) &&
	    cJSON_AddStringToObject(root, "mediaType", "application/vnd.oci.image.manifest.v1+json") &&
	    cJSON_AddItemToObject(root, "config",
				  desc_json("application/vnd.oci.image.config.v1+json", config_digest, config_len)) &&
	    (layers = cJSON_AddArrayToObject(root, "layers")) != NULL) {
		size_t i;

		for (i = 0; i < n; i++)
			if (!cJSON_AddItemToArray(layers, desc_json(layer_types[compressions[i]], layer_digests[i], sizes[i])))
				break;
		if (i == n)
			text = cJSON_PrintUnformatted(root);
	}
	cJSON_Delete(root);
	if (!text)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	img->manifest = text;
	img->manifest_len = strlen(text);
	return 0;
}

static int import_docker(struct import *im, struct img_source *src, hangar_buf *out)
{
	uint64_t size_unused;
	struct image img = { 0 };
	char *text = NULL, err[256], cfg_digest[80];
	char **paths = NULL, **digests = NULL;
	uint64_t *sizes = NULL;
	int *comp = NULL, rc;
	const cJSON *entry, *v, *e;
	cJSON *root;
	size_t len, n = 0, i;

	if ((rc = img_src_read(src, "manifest.json", &text, &len)) != 0)
		return rc;
	root = sjson_parse(text, len, 0, err, sizeof(err));
	free(text);
	if (!root)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: manifest.json is not strict JSON: %s", src->label,
			    err);
	if (!cJSON_IsArray(root) || cJSON_GetArraySize(root) != 1) {
		rc = herr(cJSON_IsArray(root) && cJSON_GetArraySize(root) > 1 ? HANGAR_EINVAL : HANGAR_EREFUSED,
			  HANGAR_ERRCAT_ARGUMENT, "%s: manifest.json does not describe exactly one image", src->label);
		goto out;
	}
	entry = cJSON_GetArrayItem(root, 0);
	v = cJSON_GetObjectItemCaseSensitive(entry, "Config");
	if (!cJSON_IsString(v)) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: manifest.json's Config is not a string", src->label);
		goto out;
	}
	if ((rc = img_src_read(src, v->valuestring, &img.config, &img.config_len)) != 0)
		goto out;
	img_hash_bytes(img.config, img.config_len, cfg_digest);
	{
		/* A config named by its digest (docker's "<hex>.json", or blobs/sha256/<hex>) must match it. */
		const char *base = strrchr(v->valuestring, '/') ? strrchr(v->valuestring, '/') + 1 : v->valuestring;
		char hex[IMG_HEX_LEN + 1];

		if (strlen(base) >= IMG_HEX_LEN) {
			memcpy(hex, base, IMG_HEX_LEN);
			hex[IMG_HEX_LEN] = '\0';
			if (img_hex_ok(hex, IMG_HEX_LEN) && (base[IMG_HEX_LEN] == '\0' || !strcmp(base + IMG_HEX_LEN, ".json")) &&
			    strcmp(hex, cfg_digest + 7) != 0) {
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
					  "%s: blob %s does not match its digest (its content is %s)", src->label,
					  v->valuestring, cfg_digest);
				goto out;
			}
		}
	}
	if (img_parse_config(img.config, img.config_len, &img.c, err, sizeof(err)) < 0) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s: %s", src->label, v->valuestring, err);
		goto out;
	}
	v = cJSON_GetObjectItemCaseSensitive(entry, "Layers");
	if (!cJSON_IsArray(v) || (n = (size_t)cJSON_GetArraySize(v)) > IMG_MAX_LAYERS) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: manifest.json's Layers is not an array of paths",
			  src->label);
		goto out;
	}
	paths = calloc(n + 1, sizeof(char *));
	digests = calloc(n + 1, sizeof(char *));
	sizes = calloc(n + 1, sizeof(uint64_t));
	comp = calloc(n + 1, sizeof(int));
	if (!paths || !digests || !sizes || !comp) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	i = 0;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e)) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: manifest.json's Layers[%zu] is not a string",
				  src->label, i);
			goto out;
		}
		paths[i++] = e->valuestring;
	}
	/* The manifest docker's format lacks, made from the blobs as they are. */
	img.m.n_layers = n;
	if ((rc = open_layers(src, &img, paths)) != 0)
		goto out;
	for (i = 0; i < n; i++) {
		unsigned char head[4];
		ssize_t got;

		digests[i] = malloc(80);
		if (!digests[i]) {
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			goto out;
		}
		if ((rc = img_hash_fd(img.layer_fds[i], digests[i], &sizes[i])) < 0) {
			rc = herr_os(HANGAR_EOS, -rc, "%s: cannot read %s", src->label, paths[i]);
			goto out;
		}
		got = pread(img.layer_fds[i], head, sizeof(head), 0);
		comp[i] = img_sniff_compression(head, got > 0 ? (size_t)got : 0);
	}
	img.m.n_layers = 0;
	if ((rc = make_manifest(&img, cfg_digest, img.config_len, digests, sizes, comp, n)) != 0 ||
	    (rc = parse_docs(&img, src->label)) != 0)
		goto out;
	/* The archive's names are kept where they are names; "<none>:<none>" and the like are not. */
	v = cJSON_GetObjectItemCaseSensitive(entry, "RepoTags");
	if (cJSON_IsArray(v))
		cJSON_ArrayForEach(e, v) if (cJSON_IsString(e) && add_name(&img, e->valuestring) == HANGAR_ENOMEM) {
			rc = HANGAR_ENOMEM;
			goto out;
		}
	herr_clear();
	if (im->o.name && (rc = add_name(&img, im->o.name)) != 0)
		goto out;
	rc = store_image(im, &img, out, NULL, &size_unused);
out:
	if (digests)
		for (i = 0; i < n; i++)
			free(digests[i]);
	free(digests);
	free(paths);
	free(sizes);
	free(comp);
	cJSON_Delete(root);
	image_free(&img);
	return rc;
}

static int import_rootfs(struct import *im, int fd, const char *path, hangar_buf *out)
{
	struct image img = { 0 };
	char blob[80], *digests[2] = { blob, NULL }, err[256], cfg_digest[80];
	unsigned char head[4];
	uint64_t size, unpacked;
	ssize_t got;
	int comp, rc;
	cJSON *cfg, *config, *rootfs, *ids, *env;

	if (!im->o.name)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s is a root filesystem, not an image: opts->name is required", path);
	if ((rc = add_name(&img, im->o.name)) != 0)
		goto out;
	if ((rc = img_hash_fd(fd, blob, &size)) < 0) {
		rc = herr_os(HANGAR_EOS, -rc, "cannot read %s", path);
		goto out;
	}
	got = pread(fd, head, sizeof(head), 0);
	comp = img_sniff_compression(head, got > 0 ? (size_t)got : 0);
	/* One layer, unpacked first: its diff_id is known only then. */
	img.m.n_layers = 1;
	if (!(img.m.layers = calloc(1, sizeof(*img.m.layers))) || !(img.layer_fds = malloc(sizeof(int))) ||
	    !(img.c.diff_ids = calloc(2, sizeof(char *)))) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	img.layer_fds[0] = dup(fd);
	strcpy(img.m.layers[0].digest, blob);
	strcpy(img.m.layers[0].media_type, layer_types[comp]);
	img.m.layers[0].size = size;
	img.c.n_diff_ids = 1;
	strcpy(img.c.os, "linux");
	if ((rc = store_image(im, &img, out, blob, &unpacked)) != 0)
		goto out;
	/* Now the config and manifest, the same bytes for the same tarball. */
	cfg = cJSON_CreateObject();
	config = cfg ? cJSON_AddObjectToObject(cfg, "config") : NULL;
	env = config ? cJSON_AddArrayToObject(config, "Env") : NULL;
	rootfs = cfg ? cJSON_AddObjectToObject(cfg, "rootfs") : NULL;
	ids = rootfs ? cJSON_AddArrayToObject(rootfs, "diff_ids") : NULL;
	if (!env || !ids || !cJSON_AddStringToObject(cfg, "architecture", img_host_arch()) ||
	    !cJSON_AddStringToObject(cfg, "os", "linux") ||
	    !cJSON_AddItemToArray(env, cJSON_CreateString("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")) ||
	    !cJSON_AddStringToObject(rootfs, "type", "layers") ||
	    !cJSON_AddItemToArray(ids, cJSON_CreateString(img.c.diff_ids[0])) ||
	    !(img.config = cJSON_PrintUnformatted(cfg))) {
		cJSON_Delete(cfg);
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	cJSON_Delete(cfg);
	img.config_len = strlen(img.config);
	img_hash_bytes(img.config, img.config_len, cfg_digest);
	img_manifest_free(&img.m);
	close(img.layer_fds[0]);
	free(img.layer_fds);
	img.layer_fds = NULL;
	if ((rc = make_manifest(&img, cfg_digest, img.config_len, digests, &size, &comp, 1)) != 0 ||
	    (rc = parse_docs(&img, path)) != 0)
		goto out;
	img_config_free(&img.c);
	if (img_parse_config(img.config, img.config_len, &img.c, err, sizeof(err)) < 0) {
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: the config made for it: %s", path, err);
		goto out;
	}
	{
		char digest[80];
		/* The layer stays pinned (im->rootfs_pin) until the record names it. */
		if ((rc = report(im, "store")) == 0) {
			img_hash_bytes(img.manifest, img.manifest_len, digest);
			rc = store_record(im->s, &img, digest, unpacked);
		}
		if (!rc)
			rc = give_digest(out, digest);
	}
out:
	image_free(&img);
	return rc;
}

int img_import(hangar_buf *out, hangar_ctx *ctx, const char *path, const hangar_image_opts *opts)
{
	struct img_store s;
	struct import im;
	struct img_source src = { .dirfd = -1, .label = path };
	struct stat st;
	char work[256] = "", files[300];
	enum img_kind kind;
	int fd = -1, rc;

	memset(&im, 0, sizeof(im));
	im.rootfs_pin = -1;
	im.o = *opts;
	im.p.version = HANGAR_IMAGE_PROGRESS_VERSION;
	im.p.size = sizeof(im.p);
	im.p.phase = "unpack";
	im.p.layer = "";
	if ((rc = img_store_open(&s, ctx)) != 0)
		return rc;
	im.s = &s;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ENOENT ? herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no such file or directory: %s", path)
				     : herr_os(HANGAR_EOS, errno, "cannot open %s", path);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = herr_os(HANGAR_EOS, errno, "cannot stat %s", path);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		src.dirfd = fd;
		fd = -1;
		rc = import_layout(&im, &src, out);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s is neither a directory nor a file", path);
		goto out;
	}
	if ((rc = img_classify(fd, path, &kind)) != 0)
		goto out;
	if (kind == IMG_KIND_ROOTFS) {
		rc = import_rootfs(&im, fd, path, out);
		goto out;
	}
	if ((rc = img_tmp_dir(&s, work, sizeof(work))) != 0)
		goto out;
	snprintf(files, sizeof(files), "%s/files", work);
	if (mkdirat(s.dirfd, files, 0700) < 0) {
		rc = herr_os(HANGAR_EOS, errno, "cannot make %s/%s", s.dir, files);
		goto out;
	}
	if ((rc = img_extract(&s, fd, path, files, &src)) != 0)
		goto out;
	rc = kind == IMG_KIND_DOCKER ? import_docker(&im, &src, out) : import_layout(&im, &src, out);
out:
	if (im.rootfs_pin >= 0)
		close(im.rootfs_pin);
	img_source_free(&src);
	if (fd >= 0)
		close(fd);
	if (work[0])
		img_rmtree(s.dirfd, work);
	img_store_close(&s);
	return rc;
}
