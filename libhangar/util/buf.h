/* Growable byte buffer shared by the library and hangar-envd. */
#pragma once

#include <stdarg.h>
#include <stddef.h>

struct hbuf {
	char *data;   /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap;
};

#define HBUF_INIT { NULL, 0, 0 }

/* All return 0, or -1 when memory runs out (the buffer is left as it was). */
int hbuf_reserve(struct hbuf *b, size_t extra);
int hbuf_put(struct hbuf *b, const void *data, size_t len);
int hbuf_puts(struct hbuf *b, const char *s);
int hbuf_printf(struct hbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hbuf_vprintf(struct hbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/*
 * Appends without letting the buffer hold more than limit bytes: the check
 * comes before the allocation, and the allocation is capped too, so data
 * from a peer never costs more than limit + 1 bytes. 0, 1 when it would go
 * over (nothing appended), -1 when memory runs out.
 */
int hbuf_put_bounded(struct hbuf *b, const void *data, size_t len, size_t limit);
void hbuf_clear(struct hbuf *b);
void hbuf_free(struct hbuf *b);
/* Hands the storage to the caller (never NULL on success) and empties the buffer. */
char *hbuf_steal(struct hbuf *b);
