#include "buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hbuf_reserve(struct hbuf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (extra > (size_t)-1 - b->len - 1)
		return -1;
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
	p = realloc(b->data, cap);
	if (!p)
		return -1;
	b->data = p;
	b->cap = cap;
	return 0;
}

int hbuf_put(struct hbuf *b, const void *data, size_t len)
{
	if (hbuf_reserve(b, len) < 0)
		return -1;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int hbuf_puts(struct hbuf *b, const char *s)
{
	return hbuf_put(b, s, strlen(s));
}

int hbuf_vprintf(struct hbuf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0 || hbuf_reserve(b, (size_t)n) < 0)
		return -1;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int hbuf_printf(struct hbuf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = hbuf_vprintf(b, fmt, ap);
	va_end(ap);
	return r;
}

void hbuf_clear(struct hbuf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void hbuf_free(struct hbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *hbuf_steal(struct hbuf *b)
{
	char *p;

	if (!b->data && hbuf_reserve(b, 0) < 0)
		return NULL;
	p = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

int hbuf_put_bounded(struct hbuf *b, const void *data, size_t len, size_t limit)
{
	size_t need;

	if (len > limit || b->len > limit - len)
		return 1;
	need = b->len + len + 1;
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < need)
			cap = cap > SIZE_MAX / 2 ? need : cap * 2;
		if (limit < SIZE_MAX && cap > limit + 1)
			cap = limit + 1;
		p = realloc(b->data, cap);
		if (!p)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}
