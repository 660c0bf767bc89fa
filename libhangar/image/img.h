/*
 * The image store's internals, private to libhangar/image: its directory
 * and locks (store.c), image records (record.c), references and names
 * (ref.c), the OCI documents (oci.c), where blobs come from (source.c),
 * layer unpacking (unpack.c) and making (layer.c), imports (import.c) and
 * gc (gc.c).
 * The files it keeps are described in hangar-images(7).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/internal.h"

struct cJSON;

#define IMG_HEX_LEN 64
/* The largest JSON document (manifest, index, config, docker's manifest.json) read. */
#define IMG_JSON_MAX (4u << 20)
/* The most members one layer may have, and the longest member name. */
#define IMG_MAX_MEMBERS 1000000u
#define IMG_MAX_NAME 4096u
/* The most layers one image may have. */
#define IMG_MAX_LAYERS 1000u

/*
 * Loads libarchive if it is not yet (archive-dl.c: it is not linked, see
 * util/dl.h); 0, or HANGAR_EOS reported naming it. Called before a reader
 * is made. Thread-safe.
 */
int img_archive_load(void);

/* ---- the store's directory (store.c) -------------------------------------------- */

struct img_store {
	char dir[4096];       /* IMAGE_DIR */
	int dirfd;            /* IMAGE_DIR, O_PATH|O_DIRECTORY */
	int lockfd;           /* IMAGE_DIR/lock while held, else -1 */
	uint64_t cap_bytes;   /* HANGAR_IMAGE_CACHE_MB in bytes */
	char identity[128];   /* this process, for tmp/ names */
};

/* Opens (creating, 0700) the store of ctx. 0 or an error (reported). */
int img_store_open(struct img_store *s, hangar_ctx *ctx);
void img_store_close(struct img_store *s);
/* flock(LOCK_EX) on IMAGE_DIR/lock, and its release. */
int img_store_lock(struct img_store *s);
void img_store_unlock(struct img_store *s);

/* A fresh, empty directory tmp/<identity>-<n> (n made unique); its name in out. */
int img_tmp_dir(struct img_store *s, char *out, size_t size);
/* Removes dirfd-relative path and everything under it, never following a symlink. 0 or -errno. */
int img_rmtree(int dirfd, const char *path);
/* The bytes under dirfd-relative path (files' st_blocks are not used: st_size). */
uint64_t img_tree_size(int dirfd, const char *path);

/*
 * The per-layer lock file, layers/<hex>.lock, holds two locks (open file
 * description locks on one byte each, so that one process can hold both
 * on two descriptors): the pin, held F_RDLCK by every import from before it
 * looks at the layer until its record names it, and F_WRLCK by gc (without
 * waiting) before it removes the layer; and the maker's, held F_WRLCK
 * while one import makes the layer, so a second one waits and then uses
 * it. Returns the fd (>= 0), -EWOULDBLOCK when wait is 0 and it is held,
 * or another -errno. A file gc unlinked meanwhile is opened again.
 */
#define IMG_LOCK_PIN 0
#define IMG_LOCK_MAKE 1
int img_layer_lock(struct img_store *s, const char *hex, int which, int type, int wait);
/* Unlinks layers/<hex>.lock when there is no layer of it and nobody holds its pin. */
void img_layer_lock_sweep(struct img_store *s, const char *hex);
/* Whether layers/<hex>/layer.json exists: 1, 0. Its size in *size when 1. */
int img_layer_complete(struct img_store *s, const char *hex, uint64_t *size);
/* The summed sizes of every complete layer. */
uint64_t img_store_used(struct img_store *s);

/* Writes data to dirfd-relative path atomically (a temp file beside it, then rename), with mode. */
int img_write_atomic(int dirfd, const char *path, const void *data, size_t len, mode_t mode);
/* Reads all of dirfd-relative path, at most max bytes, NUL-terminated, into *out (malloc'd). -errno, -EFBIG. */
int img_read_file(int dirfd, const char *path, size_t max, char **out, size_t *len);

/* ---- image records (record.c) ---------------------------------------------------- */

struct img_record {
	char digest[80];          /* sha256:<hex> */
	char config_digest[80];
	char *os, *architecture;
	char **names;             /* NULL-terminated */
	size_t n_names;
	char **layers;            /* diff_ids, NULL-terminated */
	size_t n_layers;
	uint64_t size;
	int64_t created_us;
	char **env;               /* NULL-terminated */
	char *workdir, *user;
	struct cJSON *config;     /* the "config" member as stored */
};

/* An image and when it was stored, for ordering (qsort: oldest first, then by hex). */
struct img_dated {
	char hex[IMG_HEX_LEN + 1];
	int64_t created_us;
};
int img_dated_oldest_first(const void *a, const void *b);

/* Reads images/<hex>.json. 0, HANGAR_ENOTFOUND or HANGAR_EREFUSED (reported). */
int img_record_read(struct img_store *s, const char *hex, struct img_record *r);
/* Parses a record's text; 0 or -1 with err set. */
int img_record_parse(const char *text, size_t len, struct img_record *r, char *err, size_t errlen);
/* Writes images/<hex>.json atomically. */
int img_record_write(struct img_store *s, const struct img_record *r);
void img_record_free(struct img_record *r);
/* Calls fn for the hex of every image record; stops at non-zero. */
int img_record_each(struct img_store *s, int (*fn)(const char *hex, void *payload), void *payload);
/* Finds ref (a name, sha256:<hex>, a prefix of >= 12 digits) into hex (65 bytes). Errors reported. */
int img_find(struct img_store *s, const char *ref, char *hex);
/* Whether use/<hex>.lock is held by someone (a sandbox). 1, 0. When 0 and keep_fd is not NULL,
 * the lock is taken LOCK_EX and its fd left in *keep_fd (-1 when the file does not exist). */
int img_in_use(struct img_store *s, const char *hex, int *keep_fd);

/* ---- references (ref.c) --------------------------------------------------------- */

#define IMG_REF_MAX 1023  /* the longest reference read */
#define IMG_REPO_MAX 255  /* the longest registry/name once completed */
#define IMG_TAG_MAX 128

/* A reference read and completed: "debian" is docker.io, library/debian, latest. */
struct img_ref {
	char registry[264];            /* host[:port], host lower-cased; docker.io by default */
	char name[IMG_REPO_MAX + 1];   /* "library/debian" */
	char tag[IMG_TAG_MAX + 1];     /* "" when there is none (a digest alone) */
	char digest[8 + IMG_HEX_LEN];  /* "sha256:<hex>" or "" */
	char normal[IMG_REPO_MAX + IMG_TAG_MAX + 80]; /* registry/name[:tag][@digest] */
};

/* Reads and normalises ref into r; 0, or -1 with why (a short phrase) in err. */
int img_ref_parse(const char *ref, struct img_ref *r, char *err, size_t errlen);
/* Normalises a reference ("debian:12" -> "docker.io/library/debian:12"); 0 or -1 with why in err. */
int img_ref_normalise(const char *ref, char *out, size_t size, char *err, size_t errlen);
/* Whether s is host[:port] or [v6][:port], a port being 1..65535. */
int img_authority_ok(const char *s);
/* Whether s is "sha256:" and 64 lower-case hex digits. */
int img_digest_ok(const char *s);
/* Whether s is n lower-case hex digits (and nothing else). */
int img_hex_ok(const char *s, size_t n);
/* A member's name made relative and canonical ("./a//b/" -> "a/b"): 0, 1 for the top
 * itself, or -1 with why (absolute, a ".." component, longer than IMG_MAX_NAME or size). */
int img_path_canon(const char *name, char *out, size_t size, const char **why);
/*
 * A name from an archive as messages quote it: valid UTF-8 (a byte that is
 * not part of a character, or a control, becomes '?'), cut after
 * IMG_QUOTE_MAX bytes with "...", so a hostile name neither breaks a
 * message nor crowds out the reason. size must be at least 16.
 */
#define IMG_QUOTE_MAX 200
void img_quote(char *out, size_t size, const char *name);

/* ---- OCI documents (oci.c) ------------------------------------------------------ */

struct img_desc {
	char media_type[128];
	char digest[80];
	uint64_t size;
};

struct img_manifest {
	struct img_desc config;
	struct img_desc *layers;
	size_t n_layers;
};

struct img_config {
	char os[32], architecture[32];
	char **diff_ids;          /* NULL-terminated */
	size_t n_diff_ids;
	struct cJSON *config;     /* the "config" member (Env, WorkingDir, User, ...), or NULL */
};

/* One manifest of an index, with its platform and names. */
struct img_index_entry {
	struct img_desc desc;
	char os[32], architecture[32], variant[16];
	char name[512];           /* io.containerd.image.name or org.opencontainers.image.ref.name, or "" */
};

struct img_index {
	struct img_index_entry *entries;
	size_t n;
};

/*
 * Parsers of untrusted documents: strict JSON (sjson), every field checked.
 * Return 0, or -1 with a message in err naming the field at fault.
 */
int img_parse_manifest(const char *text, size_t len, struct img_manifest *m, char *err, size_t errlen);
int img_parse_config(const char *text, size_t len, struct img_config *c, char *err, size_t errlen);
int img_parse_index(const char *text, size_t len, struct img_index *ix, char *err, size_t errlen);
/* Whether a media type is a manifest (1), an index (2), or neither (0). */
int img_media_kind(const char *media_type);
/* The compression a layer's media type says: 0 none, 1 gzip, 2 zstd, -1 not a layer type. */
int img_layer_media_compression(const char *media_type);
void img_manifest_free(struct img_manifest *m);
void img_config_free(struct img_config *c);
void img_index_free(struct img_index *ix);
/* This machine's architecture in OCI's words ("amd64", "arm64", ...). */
const char *img_host_arch(void);

/* ---- unpacking a layer (unpack.c) ----------------------------------------------- */

struct img_progress_state;

struct img_unpack {
	/* in */
	int blob_fd;              /* the layer blob, read from its start */
	const char *blob_name;    /* for messages: "sha256:..." or the archive's name */
	int want_compression;     /* -1: any; else 0/1/2 as img_layer_media_compression() */
	const char *diff_id;      /* the expected "sha256:<hex>", or NULL to compute it */
	uint64_t max_bytes;       /* the unpacked bytes allowed */
	/* progress: called with compressed bytes read since the last call; non-zero cancels */
	int (*progress)(uint64_t bytes, void *payload);
	void *payload;
	/* ids 0..max_id-1 only (an unprivileged caller's image range, subids.c); 0: any */
	unsigned max_id;
	/* out */
	char diff_id_out[80];
	uint64_t size;            /* unpacked bytes */
	uint64_t files;           /* members */
};

/*
 * An unprivileged caller's image range (subids.c): IMG_SUBIDS_SLOT uids
 * from uid and gids from gid, the last slot of its subordinate ranges.
 */
#define IMG_SUBIDS_SLOT 1024u /* SUBIDS_SLOT (util/subids.h) */
struct img_subids {
	unsigned uid, gid, count;
};
/* The calling process's image range: 0, or -1 (root, or no usable subordinate ids). */
int img_subids_image(struct img_subids *r);
/*
 * Runs fn(arg) in a forked child that is root of a user namespace mapping
 * 0..count-1 onto the image range and count onto the caller; fn's result
 * and last error come back, and out_size bytes at out (when fn succeeded).
 * subids_progress (util/subids.h), called in the child, calls
 * progress(bytes, payload) in the parent and returns its answer.
 */
int img_subids_run(const struct img_subids *r, int (*fn)(void *), void *arg, void *out, size_t out_size,
		   int (*progress)(uint64_t bytes, void *payload), void *payload);

/*
 * Unpacks a layer blob into the empty directory rootfd (an open
 * O_DIRECTORY fd). 0, or HANGAR_EREFUSED / HANGAR_ETOOLARGE /
 * HANGAR_ECANCELED / HANGAR_EOS (reported, naming the member). The caller
 * removes what was written on failure.
 */
int img_unpack(int rootfd, struct img_unpack *u);
/* The compression of a stream from its first bytes: 0 none, 1 gzip, 2 zstd. */
int img_sniff_compression(const unsigned char *head, size_t n);

/*
 * Makes layers/<diff hex> from blob_fd when it is not complete yet, under
 * the layer's lock, and leaves that lock held LOCK_SH in *lock_fd so gc
 * keeps the layer until the caller's record names it. When diff_id is
 * NULL it is computed and written to u->diff_id_out.
 */
int img_layer_make(struct img_store *s, struct img_unpack *u, int *lock_fd);

/* ---- where an import's blobs come from (source.c) ---------------------------------- */

/* A member of an image archive copied into tmp/: a file, or a link to another member. */
struct img_member {
	char *name;        /* normalised */
	char *link;        /* a symlink's or hard link's target, normalised; NULL for a file */
	unsigned idx;      /* the copy's name in the files directory */
};

/* A layout directory, or an image archive's files copied into tmp/. */
struct img_source {
	int dirfd;                 /* the layout directory, or tmp/<...>/files */
	int archive;
	struct img_member *m;
	size_t n, cap;
	const char *label;         /* the path, for messages */
};

enum img_kind { IMG_KIND_ROOTFS, IMG_KIND_DOCKER, IMG_KIND_LAYOUT };

/* Opens name (a path in the layout or archive) for reading: a regular file, beneath it. Errors reported. */
int img_src_open(struct img_source *s, const char *name, int *fd);
/* Reads name whole, at most IMG_JSON_MAX bytes, into *text (malloc'd, NUL-terminated). */
int img_src_read(struct img_source *s, const char *name, char **text, size_t *len);
void img_source_free(struct img_source *s);
/* What the archive open as fd is, from its members' names. */
int img_classify(int fd, const char *path, enum img_kind *kind);
/* Copies an image archive's files into files_dir (relative to the store) as the source s. */
int img_extract(struct img_store *st, int fd, const char *path, const char *files_dir, struct img_source *s);
/* "sha256:<hex>" and size of what fd holds, read from its start (and left there). 0 or -errno. */
int img_hash_fd(int fd, char digest[80], uint64_t *size);
void img_hash_bytes(const char *data, size_t len, char digest[80]);

/* ---- the operations (import.c, gc.c), behind the public calls of api.c ------------- */

int img_import(hangar_buf *out, hangar_ctx *ctx, const char *path, const hangar_image_opts *opts);
int img_gc(uint64_t *out_freed, hangar_ctx *ctx, uint64_t max_bytes);
/* Pulls reference from its registry into the store (pull.c). */
int img_pull(hangar_buf *out, hangar_ctx *ctx, const char *reference, const hangar_image_opts *opts);
/* Removes the layouts of pulls that are not running (pulls/); counts their bytes in *freed. */
int img_sweep_pulls(struct img_store *s, uint64_t *freed);
/* Removes the layers and blobs of a removed record that no remaining record names. */
int img_drop_unused(struct img_store *s, const struct img_record *gone, uint64_t *freed);
