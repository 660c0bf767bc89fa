/*
 * Image references (libhangar/image/ref.c), the one reading the store and
 * a registry fetch share: a name is completed as docker completes it, what
 * comes out reads back as itself, and what docker's grammar refuses is
 * refused here too, with a reason.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/img.h"

/* ref normalised, or "!" followed by the reason it was refused. */
static const char *norm(const char *ref)
{
	static char out[1100];
	char err[160] = "", again[1100];

	if (img_ref_normalise(ref, out, sizeof(out), err, sizeof(err)) < 0) {
		ck_assert_str_ne(err, "");
		out[0] = '!';
		strcpy(out + 1, err);
		return out;
	}
	ck_assert_int_eq(img_ref_normalise(out, again, sizeof(again), err, sizeof(err)), 0);
	ck_assert_str_eq(out, again);
	return out;
}

START_TEST(names_are_completed_as_docker_does)
{
	const char *d = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	char ref[200], want[200];

	ck_assert_str_eq(norm("debian"), "docker.io/library/debian:latest");
	ck_assert_str_eq(norm("debian:12"), "docker.io/library/debian:12");
	ck_assert_str_eq(norm("user/app"), "docker.io/user/app:latest");
	ck_assert_str_eq(norm("index.docker.io/library/debian:12"), "docker.io/library/debian:12");
	ck_assert_str_eq(norm("registry-1.docker.io/debian"), "docker.io/library/debian:latest");
	ck_assert_str_eq(norm("Quay.IO/org/app:v1.2"), "quay.io/org/app:v1.2");
	ck_assert_str_eq(norm("localhost:5000/a/b"), "localhost:5000/a/b:latest");
	ck_assert_str_eq(norm("[::1]:5000/a"), "[::1]:5000/a:latest");
	ck_assert_str_eq(norm("a__b/c-----d/e.f_g"), "docker.io/a__b/c-----d/e.f_g:latest");
	snprintf(ref, sizeof(ref), "debian@%s", d);
	snprintf(want, sizeof(want), "docker.io/library/debian@%s", d);
	ck_assert_str_eq(norm(ref), want);
}
END_TEST

START_TEST(docker_grammar_is_kept)
{
	static const char *bad[] = { "", "Debian", "debian:", "debian@sha256:abc", "a//b", "a/", "-a", "a/../b",
				     "a..b", "a_-b", "a___b", "a.-b", "debian:.x", "host:99999/a", "host:0/a",
				     "-host.io/a", "[zz]/a", "deb ian", "deb\nian", "deb\x80ian", NULL };

	for (size_t i = 0; bad[i]; i++)
		ck_assert_msg(norm(bad[i])[0] == '!', "%s was taken as %s", bad[i], norm(bad[i]));
}
END_TEST

START_TEST(the_completed_repository_is_bounded)
{
	/* 255 bytes once "docker.io/library/" is added: the most docker takes. */
	size_t most = 255 - strlen("docker.io/library/");
	char name[2001], want[sizeof(name) + 32];

	memset(name, 'a', sizeof(name) - 1);
	name[most] = '\0';
	snprintf(want, sizeof(want), "docker.io/library/%s:latest", name);
	ck_assert_str_eq(norm(name), want);
	name[most] = 'a';
	name[most + 1] = '\0';
	ck_assert_str_eq(norm(name), "!longer than 255 bytes once completed (registry/name)");
	name[most + 1] = 'a';
	name[sizeof(name) - 1] = '\0';
	ck_assert_str_eq(norm(name), "!longer than 1023 bytes");
}
END_TEST

START_TEST(out_is_never_overrun)
{
	/* "docker.io/library/debian:latest" is 31 bytes and its NUL. */
	char out[33], err[160];

	memset(out, '#', sizeof(out));
	ck_assert_int_eq(img_ref_normalise("debian", out, 31, err, sizeof(err)), -1);
	ck_assert_str_eq(err, "longer than the room for it once completed");
	ck_assert_int_eq(out[0], '#');
	ck_assert_int_eq(img_ref_normalise("debian", out, 32, err, sizeof(err)), 0);
	ck_assert_str_eq(out, "docker.io/library/debian:latest");
	ck_assert_int_eq(out[32], '#');
}
END_TEST

static Suite *image_ref_suite(void)
{
	Suite *s = suite_create("image-ref");
	TCase *tc = tcase_create("normalise");

	tcase_add_test(tc, names_are_completed_as_docker_does);
	tcase_add_test(tc, docker_grammar_is_kept);
	tcase_add_test(tc, the_completed_repository_is_bounded);
	tcase_add_test(tc, out_is_never_overrun);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(image_ref_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
