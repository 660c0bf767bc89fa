/*
 * hangar-envd's checks of restore member names and the quoting of names in
 * error messages (ckpt_restore.c, ckpt_worker.c). The endpoints themselves are
 * tested against a real daemon in tests/envd/test_archive.py.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "envd.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

void envd_log(const char *fmt, ...)
{
	(void)fmt;
}

static void accepted(const char *name, const char *want_norm)
{
	const char *norm = (const char *)1;
	const char *why = ckpt_name_refusal(name, &norm);

	ck_assert_msg(why == NULL, "'%s' refused: %s", name, why);
	if (want_norm)
		ck_assert_str_eq(norm, want_norm);
	else
		ck_assert_ptr_null(norm);
}

static void refused(const char *name, const char *why_part)
{
	const char *norm;
	const char *why = ckpt_name_refusal(name, &norm);

	ck_assert_msg(why != NULL, "'%s' accepted", name ? name : "(null)");
	ck_assert_msg(strstr(why, why_part), "'%s': %s", name ? name : "(null)", why);
	ck_assert_ptr_null(norm);
}

START_TEST(plain_names)
{
	accepted("a", "a");
	accepted("a/b/c.txt", "a/b/c.txt");
	accepted("dir/", "dir/");
	accepted(".git/HEAD", ".git/HEAD");
	accepted("..a/b..", "..a/b..");
	accepted("a/.../b", "a/.../b");
	accepted("sub/.hangar-restore-x", "sub/.hangar-restore-x");
}
END_TEST

START_TEST(leading_dot_slash)
{
	accepted("./a", "a");
	accepted("././/a/b", "a/b");
	accepted("./", NULL);
	accepted(".", NULL);
}
END_TEST

START_TEST(escapes)
{
	refused(NULL, "no name");
	refused("", "no name");
	refused("/etc/passwd", "absolute");
	refused("..", "'..'");
	refused("../x", "'..'");
	refused("a/../../x", "'..'");
	refused("a/..", "'..'");
	refused("./../x", "'..'");
	refused("a//../x", "'..'");
	refused(".hangar-restore-abc", "reserved");
	refused("./.hangar-restore-abc/x", "reserved");
}
END_TEST

START_TEST(name_length)
{
	char *name = malloc(CKPT_MAX_NAME + 2);

	memset(name, 'n', CKPT_MAX_NAME);
	name[CKPT_MAX_NAME] = '\0';
	accepted(name, name);
	name[CKPT_MAX_NAME] = 'n';
	name[CKPT_MAX_NAME + 1] = '\0';
	refused(name, "longer than 4096");
	free(name);
}
END_TEST

START_TEST(quoting)
{
	char out[64];
	char long_name[200];

	ckpt_quote_name("plain/name.txt", out, sizeof(out));
	ck_assert_str_eq(out, "plain/name.txt");
	ckpt_quote_name("tab\there \"q\" \\ \xc3\xa9\x7f", out, sizeof(out));
	ck_assert_str_eq(out, "tab\\x09here \\\"q\\\" \\\\ \\xc3\\xa9\\x7f");
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	ckpt_quote_name(long_name, out, sizeof(out));
	ck_assert_uint_lt(strlen(out), sizeof(out));
	ck_assert_str_eq(out + strlen(out) - 3, "...");
}
END_TEST

static Suite *ckpt_suite(void)
{
	Suite *s = suite_create("envd-ckpt");
	TCase *tc = tcase_create("names");

	tcase_add_test(tc, plain_names);
	tcase_add_test(tc, leading_dot_slash);
	tcase_add_test(tc, escapes);
	tcase_add_test(tc, name_length);
	tcase_add_test(tc, quoting);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ckpt_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
