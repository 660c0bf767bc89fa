/*
 * libhangar: the image store, OCI images kept on this machine.
 *
 * An image is imported (from an OCI image layout directory, a `docker save`
 * or `podman save` archive, or a plain root-filesystem tarball) into the
 * store (HANGAR_IMAGE_DIR, else the images directory of HANGAR_STATE_DIR).
 * Its layers are unpacked once, checked member by member, and shared by
 * every image that has them; local sandboxes are made from them.
 * hangar-images(7) describes the store's files.
 */
#ifndef HANGAR_IMAGE_H
#define HANGAR_IMAGE_H

#include "buffer.h"
#include "common.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** Where an import stands, as its progress callback sees it. Strings are borrowed. */
typedef struct hangar_image_progress {
	uint32_t version;
	uint32_t size;
	const char *phase;          /**< "download", "unpack" or "store" */
	const char *layer;          /**< the layer's blob digest ("sha256:..."), or "" between layers */
	uint32_t layers_done;       /**< layers complete so far */
	uint32_t layers_total;      /**< layers of the image */
	uint64_t bytes_done;        /**< layer bytes read so far (as stored: compressed) */
	uint64_t bytes_total;       /**< layer bytes of the whole image */
} hangar_image_progress;

#define HANGAR_IMAGE_PROGRESS_VERSION 1

/**
 * Receives an import's progress on the calling thread; p is valid during
 * the call only. A non-zero return cancels the import (HANGAR_ECANCELED).
 */
typedef int (*hangar_image_progress_fn)(const hangar_image_progress *p, void *payload);

/** Options for hangar_image_import(). Zero means default for every field. */
typedef struct hangar_image_opts {
	uint32_t version;
	uint32_t size;
	const char *name;                    /**< a name to give the image ("debian:12"); required for a rootfs tarball */
	hangar_image_progress_fn progress;   /**< progress, or NULL */
	void *progress_payload;
	int (*cancel)(void *payload);        /**< asked between steps; non-zero cancels, or NULL */
	void *cancel_payload;
} hangar_image_opts;

#define HANGAR_IMAGE_OPTS_VERSION 1
#define HANGAR_IMAGE_OPTS_INIT HANGAR_STRUCT_INIT(hangar_image_opts, HANGAR_IMAGE_OPTS_VERSION)

/** @param version HANGAR_IMAGE_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_image_opts_init(hangar_image_opts *opts, uint32_t version);

/**
 * Imports an image into the store, without a network.
 *
 * path is an OCI image layout directory, a `docker save` / `podman save`
 * archive (tar, gzip or zstd), or a root-filesystem tarball (tar, gzip or
 * zstd), told apart by content, never by the file's name. A rootfs tarball
 * becomes a one-layer image with an OCI manifest and config of its own;
 * opts->name is then required. Names an archive or layout carries are kept,
 * and opts->name is added; a name moves off an image that had it.
 *
 * Every blob is checked against its digest before it is used and every
 * layer's uncompressed stream against the config's diff_id; members are
 * refused, naming them, when they could write outside the layer (absolute
 * or ".." paths, through a symlink, hard links to what the layer did not
 * write before), are device nodes or sockets, or are sparse.
 *
 * @param out_digest receives "sha256:<hex>", the image's manifest digest.
 * @param ctx        the context.
 * @param path       the layout directory or archive.
 * @param opts       options, or NULL for defaults.
 * @return 0, HANGAR_EINVAL (a bad argument or name; a rootfs without a
 *         name), HANGAR_ENOTFOUND (no such path, a blob the manifest names
 *         is missing), HANGAR_EREFUSED (hostile or malformed content: the
 *         message names the member or blob), HANGAR_ETOOLARGE (a layer
 *         passes HANGAR_IMAGE_CACHE_MB), HANGAR_ECANCELED, HANGAR_EOS.
 *         On an error nothing half-made is kept.
 *
 * **Ownership:** release out_digest with hangar_buf_dispose(); opts is not
 * kept after the call.
 * **Thread safety:** safe from any thread and any process at once: two
 * imports of one layer unpack it once.
 */
HANGAR_EXTERN(int) hangar_image_import(hangar_buf *out_digest, hangar_ctx *ctx, const char *path,
				       const hangar_image_opts *opts);

/**
 * Pulls an image from its registry into the store (the OCI distribution
 * API, through the library's one HTTP layer).
 *
 * reference is [REGISTRY/]NAME[:TAG|@sha256:HEX] (docker.io and library/
 * by default, :latest without a tag or digest); the image for this
 * machine's platform is taken from an index or manifest list. Every blob
 * is checked against its digest before it is used; the store names the
 * image by the normalised reference ("docker.io/library/debian:12").
 * Credentials, plain-http registries, extra CAs and the stall deadline are
 * the HANGAR_REGISTRY_* settings (libhangar(3)). A second pull of the same
 * reference while one runs, here or in another process, waits for it and
 * takes its image; a pull killed at any point leaves nothing a later pull
 * or create trusts (what it fetched is verified again before use).
 * Progress reports phase "download" per blob, then the import's "unpack"
 * and "store".
 *
 * @param out_digest receives "sha256:<hex>", the image's manifest digest.
 * @param opts       NULL for the defaults; name is not used (the reference names it).
 * @return 0; HANGAR_EINVAL (a malformed reference), HANGAR_ENOTFOUND (no
 *         such image or tag), HANGAR_EREFUSED (credentials refused),
 *         HANGAR_EUNAVAILABLE, HANGAR_ETIMEOUT, HANGAR_EPROTOCOL (a digest
 *         or answer refused), HANGAR_ETOOLARGE, HANGAR_EUNSUPPORTED (schema
 *         1, foreign layers), HANGAR_ECANCELED, HANGAR_ECONFIG, HANGAR_EOS,
 *         or what hangar_image_import() returns for its content.
 * **Ownership:** release out_digest with hangar_buf_dispose().
 * **Thread safety:** safe; progress and cancel run on the calling thread.
 */
HANGAR_EXTERN(int) hangar_image_pull(hangar_buf *out_digest, hangar_ctx *ctx, const char *reference,
				     const hangar_image_opts *opts);

/** One stored image, as hangar_image_list() and hangar_image_inspect() report it. */
typedef struct hangar_image_info {
	uint32_t version;
	uint32_t size;
	const char *digest;               /**< "sha256:<hex>" of its manifest */
	const char *const *names;         /**< its names, NULL-terminated (may be empty) */
	const char *config_digest;        /**< "sha256:<hex>" of its config */
	const char *os;                   /**< "linux" */
	const char *architecture;         /**< "amd64", "arm64", ... */
	uint64_t size_bytes;              /**< its layers' unpacked sizes, summed */
	uint32_t layer_count;
	uint32_t reserved0;
	const char *const *layers;        /**< diff_ids, bottom to top, NULL-terminated */
	const char *const *env;           /**< the config's Env ("K=V"), NULL-terminated */
	const char *workdir;              /**< the config's WorkingDir, "" when none */
	const char *user;                 /**< the config's User, "" when none */
	int64_t created_us;               /**< when it was stored, microseconds since the epoch */
	int32_t in_use;                   /**< 1 when a sandbox uses it */
	uint32_t reserved1;
} hangar_image_info;

#define HANGAR_IMAGE_INFO_VERSION 1

/** Called per image; return non-zero to stop. info is valid during the call only. */
typedef int (*hangar_image_fn)(const hangar_image_info *info, void *payload);

/**
 * Lists the stored images, newest first.
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL, HANGAR_EOS.
 * **Ownership:** info is valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_image_list(hangar_ctx *ctx, hangar_image_fn fn, void *payload);

/**
 * Reports one image: ref is a name ("debian:12", normalised as a pull
 * would), "sha256:<hex>", or a prefix of at least 12 hex digits that
 * names one image.
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL (a malformed or
 *         ambiguous ref), HANGAR_ENOTFOUND (naming ref), HANGAR_EOS.
 * **Ownership:** info is valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_image_inspect(hangar_ctx *ctx, const char *ref, hangar_image_fn fn, void *payload);

/**
 * Removes an image and its names. Its layers go at once when no other image
 * has them (else with hangar_image_gc()).
 *
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND, HANGAR_EBUSY (a sandbox uses
 *         it), HANGAR_EOS.
 * **Thread safety:** safe from any thread and process.
 */
HANGAR_EXTERN(int) hangar_image_remove(hangar_ctx *ctx, const char *ref);

/**
 * Collects garbage: work of dead imports, incomplete layers, layers and
 * blobs no image names; then, while the store is larger than max_bytes
 * (0: HANGAR_IMAGE_CACHE_MB), the least recently stored images no sandbox
 * uses. Never removes what a sandbox uses or an import is making.
 *
 * @param out_freed receives the bytes freed (unpacked layer sizes and
 *                  blobs), or NULL.
 * @return 0, HANGAR_EINVAL, HANGAR_EOS.
 * **Thread safety:** safe from any thread and process.
 */
HANGAR_EXTERN(int) hangar_image_gc(uint64_t *out_freed, hangar_ctx *ctx, uint64_t max_bytes);

HANGAR_END_DECL

#endif
