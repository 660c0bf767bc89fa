/*
 * hangard's bearer tokens (programs/hangard/auth.c): tokens_find compares
 * the presented token's hash with every entry of the tokens file, each with
 * sodium_memcmp, and goes on past a match, so neither timing nor the order
 * of the file tells a caller where, or how near, a guess was.
 *
 * A timing test would flake; this one counts. It links auth.c alone and
 * defines sodium_memcmp itself (the program's definition wins over the
 * shared library's), recording which entry each call compared before
 * handing it to libsodium's. Swapping in memcmp, strcmp or bcmp, or
 * stopping at the first match, changes the count.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hangard.h"

#define N 16
#define HASH_BYTES crypto_generichash_BYTES

static char tokens[N][48];
static unsigned char hashes[N][HASH_BYTES];
static unsigned char presented[HASH_BYTES]; /* the hash tokens_find is expected to compare */
static unsigned calls, other_calls, seen[N];

int sodium_memcmp(const void *const b1, const void *const b2, size_t len)
{
	static int (*real)(const void *const, const void *const, size_t);
	const void *entry;

	if (!real) {
		*(void **)&real = dlsym(RTLD_NEXT, "sodium_memcmp");
		if (!real)
			abort();
	}
	/* One side is the presented hash, the other an entry (the same bytes when it matches). */
	entry = len == HASH_BYTES && memcmp(b1, presented, len) == 0 ? b2 : b1;
	calls++;
	if (len != HASH_BYTES)
		other_calls++;
	else
		for (unsigned i = 0; i < N; i++)
			if (memcmp(entry, hashes[i], HASH_BYTES) == 0)
				seen[i]++;
	return real(b1, b2, len);
}

static struct tokens *table;

static void setup(void)
{
	char path[] = "/tmp/test-hangard-auth-XXXXXX", hex[2 * HASH_BYTES + 1];
	int fd = mkstemp(path);
	FILE *f;

	ck_assert_int_ge(sodium_init(), 0);
	ck_assert_int_ge(fd, 0);
	f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# name scopes hash\n");
	for (unsigned i = 0; i < N; i++) {
		snprintf(tokens[i], sizeof(tokens[i]), "tok-%02u-%08x", i, randombytes_random());
		crypto_generichash(hashes[i], HASH_BYTES, (const unsigned char *)tokens[i], strlen(tokens[i]), NULL, 0);
		sodium_bin2hex(hex, sizeof(hex), hashes[i], HASH_BYTES);
		fprintf(f, "entry%u read blake2b:%s\n", i, hex);
	}
	ck_assert_int_eq(fclose(f), 0);
	table = tokens_load(path);
	unlink(path);
	ck_assert_ptr_nonnull(table);
}

static void teardown(void)
{
	tokens_free(table);
	table = NULL;
}

static const struct token *find(const char *tok)
{
	crypto_generichash(presented, HASH_BYTES, (const unsigned char *)tok, strlen(tok), NULL, 0);
	calls = other_calls = 0;
	memset(seen, 0, sizeof(seen));
	return tokens_find(table, tok);
}

/* Every entry compared once, with sodium_memcmp over the whole hash, and nothing else compared. */
static void assert_every_entry_compared_once(void)
{
	ck_assert_uint_eq(calls, N);
	ck_assert_uint_eq(other_calls, 0);
	for (unsigned i = 0; i < N; i++)
		ck_assert_msg(seen[i] == 1, "entry %u of %u compared %u times", i, N, seen[i]);
}

/* _i is the matching entry's place: the first, the last, and every one between. */
START_TEST(match_at_every_place_costs_every_entry)
{
	char name[16];
	const struct token *tok = find(tokens[_i]);

	ck_assert_ptr_nonnull(tok);
	snprintf(name, sizeof(name), "entry%d", _i);
	ck_assert_str_eq(token_name(tok), name);
	assert_every_entry_compared_once();
}
END_TEST

START_TEST(no_match_costs_every_entry)
{
	ck_assert_ptr_null(find("not-a-token-of-this-file"));
	assert_every_entry_compared_once();
	/* One byte off the first entry's token: as far as the comparisons go, any other guess. */
	char near[sizeof(tokens[0])];
	memcpy(near, tokens[0], sizeof(near));
	near[strlen(near) - 1] ^= 1;
	ck_assert_ptr_null(find(near));
	assert_every_entry_compared_once();
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("hangard-auth");
	TCase *tc = tcase_create("tokens_find");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, match_at_every_place_costs_every_entry, 0, N);
	tcase_add_test(tc, no_match_costs_every_entry);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(auth_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
