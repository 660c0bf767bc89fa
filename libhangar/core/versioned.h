/*
 * The rule for caller-filled structs that start with `uint32_t version;
 * uint32_t size;` (STYLE.md "Options and vtables"), in one place:
 *
 * - options (read by the library): a version the library does not know is
 *   refused; min(size, sizeof) bytes are copied into a zeroed full struct,
 *   so fields a caller built against an older header lacks read as 0;
 * - results (written by the library): filled as a full struct, then at most
 *   the caller's size is written back, so a caller built against an older,
 *   smaller struct is never written past.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/* The version and size every such struct starts with. */
struct hversioned {
	uint32_t version;
	uint32_t size;
};

#define HVERSIONED_MIN_SIZE ((uint32_t)sizeof(struct hversioned))

/* Checks a caller's struct header: HANGAR_EINVAL (reported) naming what, or 0. */
static inline int hversioned_check(const void *p, uint32_t known_version, const char *what)
{
	const struct hversioned *h = p;

	if (h->version < 1 || h->size < HVERSIONED_MIN_SIZE)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s is not initialised (use its _INIT or _init())", what);
	if (h->version > known_version)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s version %u is newer than this library knows (%u)", what,
			    (unsigned)h->version, (unsigned)known_version);
	return 0;
}

/*
 * Copies the caller's options src (NULL: all defaults) into dst, a full
 * struct of dst_size bytes, which is zeroed first; dst's size becomes
 * dst_size. 0 or HANGAR_EINVAL.
 */
static inline int hopts_copy(void *dst, size_t dst_size, const void *src, uint32_t known_version, const char *what)
{
	struct hversioned *d = dst;
	int rc;

	memset(dst, 0, dst_size);
	if (src) {
		const struct hversioned *s = src;

		rc = hversioned_check(src, known_version, what);
		if (rc)
			return rc;
		memcpy(dst, src, s->size < dst_size ? s->size : dst_size);
	} else {
		d->version = known_version;
	}
	d->size = (uint32_t)dst_size;
	return 0;
}

#define HOPTS_COPY(dst, src, known_version, what) hopts_copy(&(dst), sizeof(dst), (src), (known_version), (what))

/* Whether the field at [offset, offset + len) lies within the caller's struct. */
static inline int hresult_has(const void *out, size_t offset, size_t len)
{
	return offset + len <= ((const struct hversioned *)out)->size;
}

#define HRESULT_HAS(out, type, field) hresult_has((out), offsetof(type, field), sizeof(((type *)0)->field))

/*
 * Writes the full result (full_size bytes, the library's struct) into the
 * caller's out, at most out->size bytes of it; out keeps its own version
 * and size.
 */
static inline void hresult_store(void *out, const void *full, size_t full_size)
{
	struct hversioned *o = out;
	struct hversioned keep = *o;
	size_t n = o->size < full_size ? o->size : full_size;

	memcpy(out, full, n);
	*o = keep;
}
