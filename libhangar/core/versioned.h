/*
 * The rule for caller-filled structs that start with `uint32_t version;
 * uint32_t size;` (libhangar(3), OPTION STRUCTURES), in one place:
 *
 * - initialising (the *_opts_init() calls): exactly the asked version's
 *   size is zeroed and stamped, from the struct's table of sizes below, so
 *   a caller built against an older, smaller struct is never written past;
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

/*
 * The size of every version of one public struct, oldest first: size[v - 1]
 * is what a caller built against version v has. A version's size is the
 * offset of the first field the next version appended (or today's sizeof),
 * which is never more than that version's own sizeof.
 */
struct hversions {
	const char *what;          /* "create options", for messages */
	uint32_t newest;           /* the newest version this library knows */
	const uint32_t *size;      /* newest entries */
};

/* One per public versioned struct (core/versions.c). */
extern const struct hversions hv_create_opts, hv_exec_opts, hv_process_opts, hv_copy_opts, hv_checkpoint_opts,
	hv_restore_opts, hv_session_opts, hv_session_fork_opts, hv_suspend_opts, hv_template_build_opts,
	hv_publish_opts, hv_image_opts;
extern const struct hversions hv_sandbox_info, hv_exec_result, hv_checkpoint_info, hv_session_info, hv_reap_result,
	hv_envd_endpoint, hv_port_endpoint, hv_image_info, hv_image_progress;

/*
 * Zeroes exactly v's size for version of p (a caller's struct) and stamps
 * version and that size. HANGAR_EINVAL (reported) for NULL or a version
 * v does not know, else 0.
 */
int hversioned_init(void *p, uint32_t version, const struct hversions *v);

/* Checks a caller's struct header: HANGAR_EINVAL (reported) naming what, or 0. */
static inline int hversioned_check(const void *p, const struct hversions *v, const char *what)
{
	const struct hversioned *h = p;

	if (h->version < 1 || h->size < HVERSIONED_MIN_SIZE)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s is not initialised (use its _INIT or _init())", what);
	if (h->version > v->newest)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s version %u is newer than this library knows (%u)", what,
			    (unsigned)h->version, (unsigned)v->newest);
	return 0;
}

/*
 * Copies the caller's options src (NULL: all defaults) into dst, a full
 * struct of dst_size bytes, which is zeroed first; dst's size becomes
 * dst_size. 0 or HANGAR_EINVAL.
 */
static inline int hopts_copy(void *dst, size_t dst_size, const void *src, const struct hversions *v, const char *what)
{
	struct hversioned *d = dst;
	int rc;

	memset(dst, 0, dst_size);
	if (src) {
		const struct hversioned *s = src;

		rc = hversioned_check(src, v, what);
		if (rc)
			return rc;
		memcpy(dst, src, s->size < dst_size ? s->size : dst_size);
	} else {
		d->version = v->newest;
	}
	d->size = (uint32_t)dst_size;
	return 0;
}

#define HOPTS_COPY(dst, src, versions, what) hopts_copy(&(dst), sizeof(dst), (src), &(versions), (what))

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
