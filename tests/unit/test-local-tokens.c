/*
 * The local provider's memory of envd tokens
 * (libhangar/providers/local/tokens.c): an entry answers only for its own
 * id and jail pid, one id has one entry, the least recently used entry
 * makes way when all are taken, and forgetting drops it.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "providers/local/tokens.h"

static struct ltokens t;
static char buf[LTOKENS_MAX + 1];

static void setup(void)
{
	ltokens_init(&t);
}

static void teardown(void)
{
	ltokens_fini(&t);
}

static void id_of(char *out, int i)
{
	snprintf(out, LSTATE_ID_LEN + 1, "sb-%016x", (unsigned)i);
}

START_TEST(own_id_and_pid_only)
{
	ltokens_keep(&t, "sb-000000000000000a", 100, "token-a");
	ltokens_keep(&t, "sb-000000000000000b", 200, "token-b");
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 100, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "token-a");
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000b", 200, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "token-b");
	/* Another pid for the id is another jail: not this token. */
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 101, buf, sizeof(buf)), -1);
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000b", 100, buf, sizeof(buf)), -1);
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000c", 100, buf, sizeof(buf)), -1);
	/* Keeping for the id again replaces its entry. */
	ltokens_keep(&t, "sb-000000000000000a", 300, "token-a2");
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 100, buf, sizeof(buf)), -1);
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 300, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "token-a2");
	/* A buffer too small gets nothing, not a cut token. */
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 300, buf, 4), -1);
	ltokens_forget(&t, "sb-000000000000000a");
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000a", 300, buf, sizeof(buf)), -1);
	ck_assert_int_eq(ltokens_recall(&t, "sb-000000000000000b", 200, buf, sizeof(buf)), 0);
}
END_TEST

START_TEST(one_entry_per_id)
{
	char id[LSTATE_ID_LEN + 1], tok[32];

	/* Re-keeping one id many times must not take the other ids' places. */
	for (int i = 0; i < LTOKENS_SLOTS - 1; i++) {
		id_of(id, i);
		snprintf(tok, sizeof(tok), "t%d", i);
		ltokens_keep(&t, id, 1000 + i, tok);
	}
	for (int k = 0; k < 3 * LTOKENS_SLOTS; k++)
		ltokens_keep(&t, "sb-ffffffffffffffff", 5000 + k, "moving");
	for (int i = 0; i < LTOKENS_SLOTS - 1; i++) {
		id_of(id, i);
		snprintf(tok, sizeof(tok), "t%d", i);
		ck_assert_int_eq(ltokens_recall(&t, id, 1000 + i, buf, sizeof(buf)), 0);
		ck_assert_str_eq(buf, tok);
	}
	ck_assert_int_eq(ltokens_recall(&t, "sb-ffffffffffffffff", 5000 + 3 * LTOKENS_SLOTS - 1, buf, sizeof(buf)), 0);
}
END_TEST

START_TEST(least_recently_used_makes_way)
{
	char id[LSTATE_ID_LEN + 1];

	for (int i = 0; i < LTOKENS_SLOTS; i++) {
		id_of(id, i);
		ltokens_keep(&t, id, 1000 + i, "t");
	}
	/* 0 is used again: 1 is now the least recently used. */
	id_of(id, 0);
	ck_assert_int_eq(ltokens_recall(&t, id, 1000, buf, sizeof(buf)), 0);
	id_of(id, LTOKENS_SLOTS);
	ltokens_keep(&t, id, 9999, "newest");
	ck_assert_int_eq(ltokens_recall(&t, id, 9999, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "newest");
	id_of(id, 1);
	ck_assert_int_eq(ltokens_recall(&t, id, 1001, buf, sizeof(buf)), -1);
	for (int i = 0; i < LTOKENS_SLOTS; i++) {
		if (i == 1)
			continue;
		id_of(id, i);
		ck_assert_msg(ltokens_recall(&t, id, 1000 + i, buf, sizeof(buf)) == 0, "entry %d was dropped", i);
	}
}
END_TEST

START_TEST(refuses_what_it_cannot_keep)
{
	static char big[LTOKENS_MAX + 2];

	memset(big, 'x', sizeof(big) - 1);
	ltokens_keep(&t, "sb-0000000000000001", 10, big);
	ck_assert_int_eq(ltokens_recall(&t, "sb-0000000000000001", 10, buf, sizeof(buf)), -1);
	ltokens_keep(&t, "sb-0000000000000002", 0, "no pid");
	ck_assert_int_eq(ltokens_recall(&t, "sb-0000000000000002", 0, buf, sizeof(buf)), -1);
	ltokens_keep(&t, "sb-0000000000000003-and-longer-than-an-id", 10, "long id");
	ck_assert_int_eq(ltokens_recall(&t, "sb-0000000000000003-and-longer-than-an-id", 10, buf, sizeof(buf)), -1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("local-tokens");
	TCase *tc = tcase_create("tokens");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, own_id_and_pid_only);
	tcase_add_test(tc, one_entry_per_id);
	tcase_add_test(tc, least_recently_used_makes_way);
	tcase_add_test(tc, refuses_what_it_cannot_keep);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
