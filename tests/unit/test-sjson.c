/*
 * The strict JSON check (libhangar/util/sjson.c): what RFC 8259 and RFC
 * 3629 refuse is refused with the member's path, what they allow passes,
 * and integers are written exactly.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sjson.h"

/* Checks len bytes of text; the message when refused, "" when accepted. */
static const char *check_n(const char *text, size_t len, unsigned depth)
{
	static char err[256];

	memset(err, 'x', sizeof(err));
	if (sjson_check(text, len, depth, err, sizeof(err)) == 0) {
		ck_assert_str_eq(err, "");
		return "";
	}
	ck_assert_msg(err[0] != '\0', "refused without a message");
	ck_assert_msg(sjson_text_ok(err, strlen(err)), "the message is not UTF-8: %s", err);
	return err;
}

static const char *check(const char *text)
{
	return check_n(text, strlen(text), 0);
}

#define ck_refused(text, part)                                                                    \
	do {                                                                                      \
		const char *m_ = check(text);                                                     \
		ck_assert_msg(m_[0] && strstr(m_, part), "%s: want \"%s\" in \"%s\"", #text, part, m_); \
	} while (0)

#define ck_accepted(text)                                                                   \
	do {                                                                                \
		const char *m_ = check(text);                                               \
		ck_assert_msg(m_[0] == '\0', "%s: refused: %s", #text, m_);                 \
	} while (0)

/* ---- the grammar ---- */

START_TEST(accepts_rfc8259_values)
{
	ck_accepted("{}");
	ck_accepted(" \t\r\n{\"a\" : [1, -0, 0.5, -1.25e+10, 3E-2, true, false, null, \"\", {}]} \n");
	ck_accepted("\"text\"");
	ck_accepted("0");
	ck_accepted("[[]]");
	ck_accepted("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"");
	ck_accepted("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"");
	/* Names equal only before unescaping are different names. */
	ck_accepted("{\"a\":1,\"A\":2,\"a \":3}");
	/* The same name in two objects is no duplicate. */
	ck_accepted("{\"x\":{\"k\":1},\"y\":{\"k\":2}}");
}
END_TEST

START_TEST(refuses_what_follows_the_value)
{
	ck_refused("{\"command\":\"true\"} x", "data follows the value");
	ck_refused("{}{}", "data follows the value");
	ck_refused("1 2", "data follows the value");
	ck_refused("", "a value is expected");
	ck_refused("   ", "a value is expected");
}
END_TEST

START_TEST(refuses_malformed_numbers_and_literals)
{
	ck_refused("01", "data follows");
	ck_refused("+1", "unexpected byte 0x2B");
	ck_refused("1.", "number is malformed");
	ck_refused(".5", "unexpected byte");
	ck_refused("1e", "number is malformed");
	ck_refused("-", "number is malformed");
	ck_refused("0x10", "data follows");
	ck_refused("tru", "unexpected byte");
	ck_refused("nulll", "data follows");
	ck_refused("NaN", "unexpected byte");
	ck_refused("[1,]", "unexpected byte 0x5D");
	ck_refused("{\"a\":1,}", "member name");
	ck_refused("{'a':1}", "member name");
	ck_refused("{\"a\" 1}", "':'");
	ck_refused("[1 2]", "',' or ']'");
	ck_refused("{\"a\":1 \"b\":2}", "',' or '}'");
	ck_refused("\"open", "not closed");
	ck_refused("\"\\x\"", "unknown escape");
	ck_refused("\"\\u12G4\"", "four hex digits");
	ck_refused("\"tab\there\"", "control byte 0x09");
	/* A raw NUL is a control byte inside a string, and no JSON outside one. */
	ck_assert_ptr_nonnull(strstr(check_n("\"a\0b\"", 5, 0), "control byte 0x00"));
	ck_assert_ptr_nonnull(strstr(check_n("{}\0", 3, 0), "data follows"));
	/* A byte-order mark is not let through. */
	ck_refused("\xef\xbb\xbf{}", "unexpected byte 0xEF");
}
END_TEST

/* ---- strings: NUL, surrogates, UTF-8 ---- */

START_TEST(refuses_escaped_nul)
{
	ck_refused("{\"command\":\"echo a\\u0000; echo b\"}", "at /command (byte 18): a string holds \\u0000");
	ck_refused("{\"a\\u0000b\":1}", "\\u0000");
}
END_TEST

START_TEST(refuses_unpaired_surrogate_escapes)
{
	ck_refused("\"\\uD800\"", "high surrogate");
	ck_refused("\"\\uD800x\"", "high surrogate");
	ck_refused("\"\\uD800\\u0041\"", "high surrogate");
	ck_refused("\"\\uDBFF\\uDBFF\"", "high surrogate");
	ck_refused("\"\\uDC00\"", "low surrogate");
	ck_refused("\"\\uDE00\\uD83D\"", "low surrogate");
	ck_accepted("\"\\udbff\\udfff\"");
}
END_TEST

START_TEST(refuses_invalid_utf8)
{
	static const char *const bad[] = {
		"\"\xff\xfe\"",             /* never in UTF-8 */
		"\"\x80\"",                 /* a continuation alone */
		"\"\xc3\"",                 /* cut short */
		"\"\xc0\xaf\"",             /* overlong '/' */
		"\"\xc1\xbf\"",             /* overlong */
		"\"\xe0\x80\xaf\"",         /* overlong three bytes */
		"\"\xf0\x80\x80\xaf\"",     /* overlong four bytes */
		"\"\xed\xa0\x80\"",         /* U+D800 encoded */
		"\"\xed\xbf\xbf\"",         /* U+DFFF encoded */
		"\"\xf4\x90\x80\x80\"",     /* U+110000 */
		"\"\xf5\x80\x80\x80\"",     /* past the range */
		"\"\xe2\x82\"",             /* three-byte cut */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *m = check(bad[i]);
		ck_assert_msg(strstr(m, "not valid UTF-8"), "case %zu: %s", i, m);
	}
	ck_refused("{\"labels\":{\"k\":\"\xff\xfe\"}}", "at /labels/k (byte 16): a string is not valid UTF-8");
	ck_refused("{\"\xff\":1}", "at the top level");
	ck_refused("[\xff]", "not valid UTF-8");
}
END_TEST

START_TEST(text_ok)
{
	ck_assert_int_eq(sjson_text_ok("abc", 3), 1);
	ck_assert_int_eq(sjson_text_ok("", 0), 1);
	ck_assert_int_eq(sjson_text_ok("caf\xc3\xa9", 5), 1);
	ck_assert_int_eq(sjson_text_ok("a\0b", 3), 0);
	ck_assert_int_eq(sjson_text_ok("\xff\xfe", 2), 0);
	ck_assert_int_eq(sjson_text_ok("\xed\xa0\x80", 3), 0);
	ck_assert_int_eq(sjson_text_ok("\xc3", 1), 0);
	ck_assert_int_eq(sjson_text_ok("\xf4\x90\x80\x80", 4), 0);
}
END_TEST

/* One character at a time: its length, or 0 for what a writer must escape. */
START_TEST(char_len)
{
	ck_assert_uint_eq(sjson_char_len("a\xc3\xa9", 3), 1);
	ck_assert_uint_eq(sjson_char_len("\xc3\xa9x", 3), 2);
	ck_assert_uint_eq(sjson_char_len("\xe2\x9c\x93", 3), 3);
	ck_assert_uint_eq(sjson_char_len("\xf0\x9f\x98\x80", 4), 4);
	ck_assert_uint_eq(sjson_char_len("\xf0\x9f\x98\x80", 3), 0); /* cut short by len */
	ck_assert_uint_eq(sjson_char_len("\xff\xfe", 2), 0);
	ck_assert_uint_eq(sjson_char_len("\xc0\xaf", 2), 0);
	ck_assert_uint_eq(sjson_char_len("\xed\xa0\x80", 3), 0);
	ck_assert_uint_eq(sjson_char_len("\x80", 1), 0);
	ck_assert_uint_eq(sjson_char_len("", 1), 0);
	ck_assert_uint_eq(sjson_char_len("a", 0), 0);
}
END_TEST

/* ---- objects ---- */

START_TEST(refuses_duplicate_members)
{
	ck_refused("{\"timeout\":60,\"timeout\":-7}", "at the top level (byte 14): duplicate member \"timeout\"");
	/* Equal once unescaped. */
	ck_refused("{\"ab\":1,\"a\\u0062\":2}", "duplicate member \"ab\"");
	ck_refused("{\"\\u00e9\":1,\"\xc3\xa9\":2}", "duplicate member \"\xc3\xa9\"");
	ck_refused("{\"x\":1,\"y\":{\"k\":1,\"j\":2,\"k\":3}}", "at /y (byte");
	ck_refused("{\"a\":[{},{\"z\":1,\"z\":1}]}", "at /a/1 (byte");
	/* Far apart, among many. */
	char big[8192];
	size_t n = 0;
	n += (size_t)snprintf(big + n, sizeof(big) - n, "{\"dup\":0");
	for (int i = 0; i < 500; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, ",\"m%d\":%d", i, i);
	snprintf(big + n, sizeof(big) - n, ",\"dup\":1}");
	ck_assert_ptr_nonnull(strstr(check(big), "duplicate member \"dup\""));
}
END_TEST

START_TEST(paths_escape_slash_and_tilde)
{
	ck_refused("{\"a/b\":{\"c~d\":\"\\u0000\"}}", "at /a~1b/c~0d (byte");
	/* An empty name is a path segment of its own, and the first of all. */
	ck_refused("{\"\":{\"a\":\"\\u0000\"}}", "at //a (byte");
	ck_refused("{\"\":\"\\u0000\"}", "at / (byte");
}
END_TEST

START_TEST(nesting_is_bounded)
{
	char deep[1200];
	for (unsigned d = 1; d <= 40; d++) {
		memset(deep, '[', d);
		memset(deep + d, ']', d);
		const char *m = check_n(deep, 2 * d, 0);
		if (d <= SJSON_DEFAULT_DEPTH)
			ck_assert_msg(m[0] == '\0', "depth %u refused: %s", d, m);
		else
			ck_assert_msg(strstr(m, "nested deeper than 32"), "depth %u: %s", d, m);
	}
	memset(deep, '[', 600);
	memset(deep + 600, ']', 600);
	ck_assert_ptr_nonnull(strstr(check_n(deep, 1200, 100000), "nested deeper than 512"));
	ck_assert_str_eq(check_n("[[[]]]", 6, 3), "");
	ck_assert_ptr_nonnull(strstr(check_n("[[[]]]", 6, 2), "deeper than 2"));
	ck_assert_ptr_nonnull(strstr(check_n("{\"a\":{\"b\":{}}}", 13, 2), "at /a/b"));
}
END_TEST

START_TEST(messages_fit_and_stay_utf8)
{
	/* A long name of two-byte characters is cut on a character boundary. */
	char text[2048], err[40];
	size_t n = 0;
	text[n++] = '{';
	text[n++] = '"';
	for (int i = 0; i < 300; i++) {
		text[n++] = '\xc3';
		text[n++] = '\xa9';
	}
	memcpy(text + n, "\":\"\\u0000\"}", 11);
	n += 11;
	for (size_t cap = 1; cap < sizeof(err); cap++) {
		memset(err, 'x', sizeof(err));
		ck_assert_int_eq(sjson_check(text, n, 0, err, cap), -1);
		ck_assert_uint_lt(strlen(err), cap);
		ck_assert_msg(sjson_text_ok(err, strlen(err)), "cap %zu: cut inside a character", cap);
	}
	/* No message buffer at all is fine too. */
	ck_assert_int_eq(sjson_check(text, n, 0, NULL, 0), -1);
	ck_assert_int_eq(sjson_check("{}", 2, 0, NULL, 0), 0);
}
END_TEST

START_TEST(parse_gives_cjson_only_strict_text)
{
	char err[128];
	cJSON *doc = sjson_parse("{\"a\":[1,2]}", 11, 0, err, sizeof(err));
	ck_assert_ptr_nonnull(doc);
	ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "a")), 2);
	cJSON_Delete(doc);
	ck_assert_ptr_null(sjson_parse("{\"a\":1,\"a\":2}", 13, 0, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "duplicate"));
	/* The length bounds the text: what follows it is not read. */
	doc = sjson_parse("{}garbage", 2, 0, err, sizeof(err));
	ck_assert_ptr_nonnull(doc);
	cJSON_Delete(doc);
}
END_TEST

/* ---- exact integers ---- */

START_TEST(int64_written_exactly)
{
	static const struct {
		int64_t v;
		const char *text;
	} cases[] = {
		{ 0, "{\"v\":0}" },
		{ -1, "{\"v\":-1}" },
		{ INT64_C(1796175793014150), "{\"v\":1796175793014150}" },
		{ (INT64_C(1) << 53) + 1, "{\"v\":9007199254740993}" },
		{ INT64_MAX, "{\"v\":9223372036854775807}" },
		{ INT64_MIN, "{\"v\":-9223372036854775808}" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cJSON *o = cJSON_CreateObject();
		ck_assert_ptr_nonnull(sjson_add_int64(o, "v", cases[i].v));
		char *text = cJSON_PrintUnformatted(o);
		ck_assert_str_eq(text, cases[i].text);
		/* What it wrote is strict JSON. */
		ck_assert_int_eq(sjson_check(text, strlen(text), 0, NULL, 0), 0);
		free(text);
		cJSON_Delete(o);
	}
}
END_TEST

static Suite *sjson_suite(void)
{
	Suite *s = suite_create("sjson");
	TCase *tc = tcase_create("grammar");

	tcase_add_test(tc, accepts_rfc8259_values);
	tcase_add_test(tc, refuses_what_follows_the_value);
	tcase_add_test(tc, refuses_malformed_numbers_and_literals);
	suite_add_tcase(s, tc);

	tc = tcase_create("strings");
	tcase_add_test(tc, refuses_escaped_nul);
	tcase_add_test(tc, refuses_unpaired_surrogate_escapes);
	tcase_add_test(tc, refuses_invalid_utf8);
	tcase_add_test(tc, text_ok);
	tcase_add_test(tc, char_len);
	suite_add_tcase(s, tc);

	tc = tcase_create("objects");
	tcase_add_test(tc, refuses_duplicate_members);
	tcase_add_test(tc, paths_escape_slash_and_tilde);
	tcase_add_test(tc, nesting_is_bounded);
	tcase_add_test(tc, messages_fit_and_stay_utf8);
	tcase_add_test(tc, parse_gives_cjson_only_strict_text);
	suite_add_tcase(s, tc);

	tc = tcase_create("output");
	tcase_add_test(tc, int64_written_exactly);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sjson_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
