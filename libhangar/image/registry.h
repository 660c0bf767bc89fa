/*
 * Pulling an image from a registry over the OCI distribution API into an
 * OCI image layout directory, through libhangar/net. Internal: the image
 * store imports the layout this writes.
 *
 * What a registry is trusted with, and what it is not:
 *  - every blob and manifest is checked against its sha256 before it is
 *    kept; a blob is written as blobs/sha256/<hex>.partial and renamed only
 *    once its digest matched;
 *  - plain http only for a loopback registry or one named in
 *    HANGAR_REGISTRY_INSECURE; https otherwise, with the system's CAs and
 *    HANGAR_REGISTRY_CA_FILE;
 *  - only a blob GET follows a redirect, one, to https (or to loopback http
 *    when the registry itself is reached over http), without credentials;
 *  - credentials (the auths of a docker config.json) go to the registry's
 *    host and to a token service of the same site, never elsewhere, and are
 *    never part of a message.
 *
 * One fetch at a time per directory: a fetch removes the .partial files it
 * finds there when it starts.
 */
#pragma once

#include <stdint.h>

#include "hangar/hangar.h"

/* The largest manifest or index read (bytes). */
#define REGISTRY_MANIFEST_MAX (4u << 20)
/* The largest image config read (bytes). */
#define REGISTRY_CONFIG_MAX (8u << 20)

struct registry_progress {
	/*
	 * Called on the calling thread as the fetch goes: phase "manifest" (resolved),
	 * "blob" (bytes of blob_digest arriving), "cached" (a blob already in the
	 * directory, verified), "done". A non-zero return cancels (HANGAR_ECANCELED).
	 */
	int (*fn)(void *ud, const char *phase, const char *blob_digest, uint64_t done, uint64_t total,
		  uint32_t blobs_done, uint32_t blobs_total);
	void *ud;
	/* Polled while waiting on the network; non-zero cancels. Optional. */
	int (*cancel)(void *ud);
};

/*
 * Fetches reference ([REGISTRY/]NAME[:TAG|@sha256:HEX]; docker.io and
 * library/ by default) for this host's platform (linux and this machine's
 * architecture, and variant on arm) into the OCI image layout at dir, made
 * if missing: oci-layout, index.json naming exactly the one image manifest
 * (annotation org.opencontainers.image.ref.name: the normalised reference)
 * and blobs/sha256/<hex> of that manifest, its config and its layers.
 * Blobs already there are verified and kept, or deleted and fetched again.
 * *out_digest: "sha256:<hex>" of the manifest, the caller's to free.
 * Returns 0, or a negative HANGAR_E* code with the error naming the
 * registry, the blob and what went wrong: HANGAR_EINVAL (reference),
 * HANGAR_ENOTFOUND, HANGAR_EREFUSED (credentials), HANGAR_EUNAVAILABLE,
 * HANGAR_ETIMEOUT, HANGAR_EPROTOCOL (a digest or answer we refuse),
 * HANGAR_ETOOLARGE, HANGAR_EUNSUPPORTED (schema 1, foreign layers),
 * HANGAR_EFILE, HANGAR_ECANCELED, HANGAR_ECONFIG.
 */
int registry_fetch(hangar_ctx *ctx, const char *reference, const char *dir, const struct registry_progress *p,
		   char **out_digest);

/*
 * The digest of the manifest reference names for this host's platform, as
 * registry_fetch() would fetch it, asking for the manifest (and index) only.
 * Same errors as registry_fetch().
 */
int registry_resolve(hangar_ctx *ctx, const char *reference, char **out_digest);

/* Normalises a reference: "debian" -> "docker.io/library/debian:latest". 0 or HANGAR_EINVAL. */
int registry_ref_normalize(const char *reference, char **out);
