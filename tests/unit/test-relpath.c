/*
 * Archive member names made canonical (libhangar/util/relpath.c), the one
 * rule the checkpoint checker and the image unpacker share: what comes out
 * is what a member is looked up and made by, so two spellings of one path
 * must come out the same and nothing that leaves the top may come out.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "relpath.h"

/* name's canonical form, or "!" followed by the reason it was refused. */
static const char *canon(const char *name, size_t size)
{
	static char out[512];
	static char refused[300];
	const char *why = NULL;
	char *buf = malloc(size ? size : 1);
	int r;

	ck_assert_ptr_nonnull(buf);
	memset(buf, '#', size ? size : 1);
	r = relpath_canon(name, buf, size, &why);
	if (r < 0) {
		ck_assert_ptr_nonnull(why);
		free(buf);
		strcpy(refused, "!");
		strncat(refused, why, sizeof(refused) - 2);
		return refused;
	}
	ck_assert_uint_le(strlen(buf) + 1, size);
	ck_assert_int_eq(r, buf[0] == '\0');
	strcpy(out, buf);
	free(buf);
	return out;
}

START_TEST(spellings_of_one_path_agree)
{
	ck_assert_str_eq(canon("a/b", 64), "a/b");
	ck_assert_str_eq(canon("./a//b/", 64), "a/b");
	ck_assert_str_eq(canon("a/./b/.", 64), "a/b");
	ck_assert_str_eq(canon("a///./b", 64), "a/b");
	ck_assert_str_eq(canon("...", 64), "...");
	ck_assert_str_eq(canon("..a/b..", 64), "..a/b..");
}
END_TEST

START_TEST(the_top_is_empty)
{
	ck_assert_str_eq(canon("", 8), "");
	ck_assert_str_eq(canon(".", 8), "");
	ck_assert_str_eq(canon("./", 8), "");
	ck_assert_str_eq(canon(".//./", 8), "");
}
END_TEST

START_TEST(leaving_the_top_is_refused)
{
	ck_assert_str_eq(canon("..", 64), "!its path has a .. component");
	ck_assert_str_eq(canon("a/../../etc", 64), "!its path has a .. component");
	ck_assert_str_eq(canon("a/..", 64), "!its path has a .. component");
	ck_assert_str_eq(canon("/etc/passwd", 64), "!its path is absolute");
}
END_TEST

START_TEST(out_is_never_overrun)
{
	/* The output is never longer than the name: its length plus one always fits. */
	ck_assert_str_eq(canon("a", 2), "a");
	ck_assert_str_eq(canon("ab/cd", 6), "ab/cd");
	ck_assert_str_eq(canon("./ab//cd/", 6), "ab/cd");
	ck_assert_str_eq(canon("ab/cd", 5), "!its name is too long");
	ck_assert_str_eq(canon("a", 1), "!its name is too long");
	ck_assert_str_eq(canon("a", 0), "!its name is too long");
}
END_TEST

static Suite *relpath_suite(void)
{
	Suite *s = suite_create("relpath");
	TCase *tc = tcase_create("canon");

	tcase_add_test(tc, spellings_of_one_path_agree);
	tcase_add_test(tc, the_top_is_empty);
	tcase_add_test(tc, leaving_the_top_is_refused);
	tcase_add_test(tc, out_is_never_overrun);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(relpath_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
