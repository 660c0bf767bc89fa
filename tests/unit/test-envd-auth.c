/*
 * hangar-envd access token and /files signatures (auth.c).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envd.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

/*
 * Known answers. Each expected signature is "v1_" + unpadded standard base64
 * of SHA-256 over the documented input string, computed independently with
 *   python3 -c 'import hashlib,base64,sys; s=sys.argv[1];
 *     print("v1_"+base64.b64encode(hashlib.sha256(s.encode()).digest()).decode().rstrip("="))' '<input>'
 * where <input> is the string shown in the "in" column (path:op:user:token[:expiration]).
 */
static const struct {
	const char *path, *op, *user, *token;
	int64_t expiration;
	const char *in; /* documentation only: what was hashed */
	const char *want;
} vectors[] = {
	{ "/home/user/file.txt", "read", "user", "secret-token", -1,
	  "/home/user/file.txt:read:user:secret-token", "v1_zHygmZHya6YZpCta3CaERYvMAEAIMuvPCRTHisdJyfc" },
	{ "/home/user/file.txt", "write", "user", "secret-token", 1760372011,
	  "/home/user/file.txt:write:user:secret-token:1760372011",
	  "v1_FutEx+eBK1l7GIF7WAJa393brtQEIl+CeMiAqlgmjuo" },
	/* Absent path and username hash as empty strings. */
	{ NULL, "read", NULL, "", -1, ":read::", "v1_C7+NupbDAIwikcNXhNkhkXQo7jVzhmElKieFp0oChf8" },
	{ "", "read", "", "", -1, ":read::", "v1_C7+NupbDAIwikcNXhNkhkXQo7jVzhmElKieFp0oChf8" },
	/* Expiration 0 is a real expiration (only negative means none); the path is raw, unresolved. */
	{ "relative/x", "write", "root", "tok", 0, "relative/x:write:root:tok:0",
	  "v1_BhqqlPyxt7QDA0PQaQqK1sCivpvb5KIdd2BkhQ0O+6g" },
	/* UTF-8 in the path is hashed as bytes. */
	{ "/tmp/\xc3\xbc.txt", "read", NULL, "t", -1, "/tmp/\xc3\xbc.txt:read::t",
	  "v1_54k0vFrYPa6006dqO4FHK8+gR/zVPG1Vq/vE5J27hAM" },
};

START_TEST(signature_known_answers)
{
	char out[48];

	memset(out, 'X', sizeof(out));
	envd_files_signature(vectors[_i].path, vectors[_i].op, vectors[_i].user, vectors[_i].token,
			     vectors[_i].expiration, out);
	ck_assert_msg(memchr(out, '\0', sizeof(out)) != NULL, "signature not terminated");
	ck_assert_msg(strcmp(out, vectors[_i].want) == 0, "hash of \"%s\": got %s, want %s", vectors[_i].in,
		      out, vectors[_i].want);
}
END_TEST

START_TEST(signature_shape)
{
	char a[48], b[48];

	envd_files_signature("/x", "read", "u", "tok", -1, a);
	/* v1_ + 43 characters (32 bytes, unpadded), no '=' anywhere. */
	ck_assert_uint_eq(strlen(a), 46);
	ck_assert_int_eq(strncmp(a, "v1_", 3), 0);
	ck_assert_ptr_null(strchr(a, '='));
	/* Every input takes part. */
	envd_files_signature("/y", "read", "u", "tok", -1, b);
	ck_assert_str_ne(a, b);
	envd_files_signature("/x", "write", "u", "tok", -1, b);
	ck_assert_str_ne(a, b);
	envd_files_signature("/x", "read", "v", "tok", -1, b);
	ck_assert_str_ne(a, b);
	envd_files_signature("/x", "read", "u", "tok2", -1, b);
	ck_assert_str_ne(a, b);
	envd_files_signature("/x", "read", "u", "tok", 1, b);
	ck_assert_str_ne(a, b);
	envd_files_signature("/x", "read", "u", "tok", -1, b);
	ck_assert_str_eq(a, b);
}
END_TEST

START_TEST(token_not_configured)
{
	envd_cfg.token = NULL;
	ck_assert_int_eq(envd_token_ok(NULL), 1);
	ck_assert_int_eq(envd_token_ok(""), 1);
	ck_assert_int_eq(envd_token_ok("anything"), 1);
}
END_TEST

START_TEST(token_configured)
{
	static char token[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

	envd_cfg.token = token;
	ck_assert_int_eq(envd_token_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"), 1);
	ck_assert_int_eq(envd_token_ok(NULL), 0);
	ck_assert_int_eq(envd_token_ok(""), 0);
	/* wrong: one character differs */
	ck_assert_int_eq(envd_token_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeF"), 0);
	/* a prefix */
	ck_assert_int_eq(envd_token_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde"), 0);
	ck_assert_int_eq(envd_token_ok("0"), 0);
	/* longer */
	ck_assert_int_eq(envd_token_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"), 0);
	ck_assert_int_eq(envd_token_ok("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef "), 0);
	envd_cfg.token = NULL;
}
END_TEST

/* A pooled sandbox's handover: the new token opens the daemon, the old one no longer does; once only. */
START_TEST(token_rotated_once)
{
	envd_cfg.token = strdup("pool-token");
	ck_assert_ptr_nonnull(envd_cfg.token);
	ck_assert_int_eq(envd_token_rotate(NULL), -EINVAL);
	ck_assert_int_eq(envd_token_rotate(""), -EINVAL);
	ck_assert_int_eq(envd_token_rotate("with space"), -EINVAL);
	ck_assert_int_eq(envd_token_rotate("line\nend"), -EINVAL);
	ck_assert_int_eq(envd_token_ok("pool-token"), 1);
	ck_assert_int_eq(envd_token_rotate("caller-token"), 0);
	ck_assert_int_eq(envd_token_ok("pool-token"), 0);
	ck_assert_int_eq(envd_token_ok("caller-token"), 1);
	ck_assert_int_eq(envd_token_rotate("third-token"), -EALREADY);
	ck_assert_int_eq(envd_token_ok("third-token"), 0);
	ck_assert_int_eq(envd_token_ok("caller-token"), 1);
	free(envd_cfg.token);
	envd_cfg.token = NULL;
}
END_TEST

START_TEST(token_rotate_open_daemon)
{
	envd_cfg.token = NULL;
	ck_assert_int_eq(envd_token_rotate("a-token"), -EPERM);
	ck_assert_int_eq(envd_token_ok("anything"), 1);
}
END_TEST

static Suite *auth_suite(void)
{
	Suite *s = suite_create("envd-auth");
	TCase *tc;

	tc = tcase_create("signature");
	tcase_add_loop_test(tc, signature_known_answers, 0, (int)(sizeof(vectors) / sizeof(vectors[0])));
	tcase_add_test(tc, signature_shape);
	suite_add_tcase(s, tc);

	tc = tcase_create("token");
	tcase_add_test(tc, token_not_configured);
	tcase_add_test(tc, token_configured);
	tcase_add_test(tc, token_rotated_once);
	tcase_add_test(tc, token_rotate_open_daemon);
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
