/* Helpers shared by the checkpoint suites. */
#pragma once

#include <check.h>
#include <stddef.h>

#include "hangar/hangar.h"

/* A growing byte buffer, usable as a seal_sink or blob sink. */
struct bytes {
	unsigned char *p;
	size_t n, cap;
	int calls;
};
int bytes_sink(void *payload, const void *data, size_t len);
void bytes_free(struct bytes *b);

/* Deterministic pseudo-random bytes (malloc'd). */
unsigned char *pattern(size_t n, unsigned seed);

/* A fresh temporary directory (malloc'd path), removed by rm_tree. */
char *temp_dir(void);
void rm_tree(const char *dir);

/* A context that ignores the environment, its state in dir. */
hangar_ctx *test_ctx(const char *state_dir);

#define must(call, what)                                                                          \
	do {                                                                                      \
		int must_rc_ = (call);                                                            \
		ck_assert_msg(must_rc_ == 0, "%s: %d %s", what, must_rc_, hangar_error_last()->message); \
	} while (0)
