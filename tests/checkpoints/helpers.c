#define _GNU_SOURCE
#include "helpers.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int bytes_sink(void *payload, const void *data, size_t len)
{
	struct bytes *b = payload;

	if (b->n + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;

		while (cap < b->n + len)
			cap *= 2;
		b->p = realloc(b->p, cap);
		ck_assert_ptr_nonnull(b->p);
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
	b->calls++;
	return 0;
}

void bytes_free(struct bytes *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

unsigned char *pattern(size_t n, unsigned seed)
{
	unsigned char *p = malloc(n ? n : 1);
	uint64_t x = 0x9e3779b97f4a7c15ULL ^ seed;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
	return p;
}

char *temp_dir(void)
{
	char *d = strdup("/tmp/hangar-ckpt-XXXXXX");

	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

hangar_ctx *test_ctx(const char *state_dir)
{
	hangar_ctx *ctx = NULL;

	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), "state dir");
	return ctx;
}
