/*
 * libhangar: byte buffers the library fills and the caller releases.
 */
#ifndef HANGAR_BUFFER_H
#define HANGAR_BUFFER_H

#include "common.h"

HANGAR_BEGIN_DECL

/**
 * Bytes returned by the library. `ptr` is NUL-terminated (the terminator is
 * not counted in `size`) so text can be used directly; binary data may hold
 * NUL bytes of its own. Initialise with HANGAR_BUF_INIT; release with
 * hangar_buf_dispose(), which leaves it empty and reusable.
 */
typedef struct hangar_buf {
	char *ptr;
	size_t size;
	size_t reserved; /* the library's; do not touch */
} hangar_buf;

#define HANGAR_BUF_INIT { NULL, 0, 0 }

/**
 * Frees the memory of a buffer the library filled, and empties it.
 *
 * @param buf the buffer; NULL is allowed.
 *
 * **Ownership:** the caller owns buffers; after this call buf->ptr is NULL.
 * **Thread safety:** safe from any thread, on buffers not used concurrently.
 */
HANGAR_EXTERN(void) hangar_buf_dispose(hangar_buf *buf);

HANGAR_END_DECL

#endif
