/*
 * Proto3 JSON helpers (libhangar/util/pjson.c): field lookup by JSON and
 * proto name, the typed getters, base64 and timestamps.
 */
#include <check.h>
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjson.h"

static cJSON *parse(const char *json)
{
	cJSON *o = cJSON_Parse(json);

	ck_assert_msg(o != NULL, "test JSON does not parse: %s", json);
	return o;
}

/* ---- lookup ------------------------------------------------------------- */

START_TEST(field_camel_and_snake)
{
	cJSON *o = parse("{\"exitCode\":3,\"signal_expiration\":4,\"both\":1,\"both_x\":2,\"nul\":null}");
	const cJSON *it;

	it = pjson_field(o, "exitCode", "exit_code");
	ck_assert_ptr_nonnull(it);
	ck_assert_int_eq(it->valueint, 3);
	it = pjson_field(o, "signalExpiration", "signal_expiration");
	ck_assert_ptr_nonnull(it);
	ck_assert_int_eq(it->valueint, 4);
	/* The JSON name wins when both spellings are present. */
	it = pjson_field(o, "both", "both_x");
	ck_assert_int_eq(it->valueint, 1);
	ck_assert_ptr_null(pjson_field(o, "signalExpiration", NULL));
	ck_assert_ptr_null(pjson_field(o, "missing", "also_missing"));
	/* Names are case-sensitive. */
	ck_assert_ptr_null(pjson_field(o, "exitcode", "EXIT_CODE"));
	/* null is the same as absent. */
	ck_assert_ptr_null(pjson_field(o, "nul", NULL));
	cJSON_Delete(o);
}
END_TEST

START_TEST(field_on_non_objects)
{
	cJSON *a = parse("[{\"x\":1}]");
	cJSON *s = parse("\"x\"");

	ck_assert_ptr_null(pjson_field(a, "x", NULL));
	ck_assert_ptr_null(pjson_field(s, "x", NULL));
	ck_assert_ptr_null(pjson_field(NULL, "x", "x"));
	cJSON_Delete(a);
	cJSON_Delete(s);
}
END_TEST

/* ---- getters: present / absent / null / wrong type ---------------------- */

START_TEST(get_string)
{
	cJSON *o = parse("{\"cmd\":\"/bin/sh\",\"empty\":\"\",\"num\":1,\"arr\":[],\"nul\":null,\"snake_name\":\"s\"}");
	const char *v = "untouched";

	ck_assert_int_eq(pjson_string(o, "cmd", NULL, &v), 1);
	ck_assert_str_eq(v, "/bin/sh");
	ck_assert_int_eq(pjson_string(o, "empty", NULL, &v), 1);
	ck_assert_str_eq(v, "");
	ck_assert_int_eq(pjson_string(o, "snakeName", "snake_name", &v), 1);
	ck_assert_str_eq(v, "s");
	v = "untouched";
	ck_assert_int_eq(pjson_string(o, "missing", NULL, &v), 0);
	ck_assert_int_eq(pjson_string(o, "nul", NULL, &v), 0);
	ck_assert_str_eq(v, "untouched");
	ck_assert_int_eq(pjson_string(o, "num", NULL, &v), -1);
	ck_assert_int_eq(pjson_string(o, "arr", NULL, &v), -1);
	ck_assert_str_eq(v, "untouched");
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_bool)
{
	cJSON *o = parse("{\"t\":true,\"f\":false,\"n\":1,\"s\":\"true\",\"nul\":null}");
	int v = 7;

	ck_assert_int_eq(pjson_bool(o, "t", NULL, &v), 1);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(pjson_bool(o, "f", NULL, &v), 1);
	ck_assert_int_eq(v, 0);
	v = 7;
	ck_assert_int_eq(pjson_bool(o, "missing", NULL, &v), 0);
	ck_assert_int_eq(pjson_bool(o, "nul", NULL, &v), 0);
	ck_assert_int_eq(pjson_bool(o, "n", NULL, &v), -1);
	ck_assert_int_eq(pjson_bool(o, "s", NULL, &v), -1);
	ck_assert_int_eq(v, 7);
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_uint32)
{
	cJSON *o = parse("{\"zero\":0,\"max\":4294967295,\"over\":4294967296,\"neg\":-1,"
			 "\"str\":\"4294967295\",\"strover\":\"4294967296\",\"frac\":1.5,"
			 "\"b\":true,\"o\":{},\"nul\":null,\"pid\":1234,\"exp\":1e3}");
	uint32_t v = 99;

	ck_assert_int_eq(pjson_uint32(o, "zero", NULL, &v), 1);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(pjson_uint32(o, "max", NULL, &v), 1);
	ck_assert_uint_eq(v, UINT32_MAX);
	ck_assert_int_eq(pjson_uint32(o, "str", NULL, &v), 1);
	ck_assert_uint_eq(v, UINT32_MAX);
	ck_assert_int_eq(pjson_uint32(o, "pid", NULL, &v), 1);
	ck_assert_uint_eq(v, 1234);
	ck_assert_int_eq(pjson_uint32(o, "exp", NULL, &v), 1);
	ck_assert_uint_eq(v, 1000);
	v = 99;
	ck_assert_int_eq(pjson_uint32(o, "missing", NULL, &v), 0);
	ck_assert_int_eq(pjson_uint32(o, "nul", NULL, &v), 0);
	ck_assert_int_eq(pjson_uint32(o, "over", NULL, &v), -1);
	ck_assert_int_eq(pjson_uint32(o, "neg", NULL, &v), -1);
	ck_assert_int_eq(pjson_uint32(o, "strover", NULL, &v), -1);
	ck_assert_int_eq(pjson_uint32(o, "frac", NULL, &v), -1);
	ck_assert_int_eq(pjson_uint32(o, "b", NULL, &v), -1);
	ck_assert_int_eq(pjson_uint32(o, "o", NULL, &v), -1);
	ck_assert_uint_eq(v, 99);
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_int32)
{
	cJSON *o = parse("{\"min\":-2147483648,\"max\":2147483647,\"under\":-2147483649,"
			 "\"over\":2147483648,\"s\":\"-5\",\"bad\":\"5x\",\"empty\":\"\"}");
	int32_t v = 99;

	ck_assert_int_eq(pjson_int32(o, "min", NULL, &v), 1);
	ck_assert_int_eq(v, INT32_MIN);
	ck_assert_int_eq(pjson_int32(o, "max", NULL, &v), 1);
	ck_assert_int_eq(v, INT32_MAX);
	ck_assert_int_eq(pjson_int32(o, "s", NULL, &v), 1);
	ck_assert_int_eq(v, -5);
	v = 99;
	ck_assert_int_eq(pjson_int32(o, "missing", NULL, &v), 0);
	ck_assert_int_eq(pjson_int32(o, "under", NULL, &v), -1);
	ck_assert_int_eq(pjson_int32(o, "over", NULL, &v), -1);
	ck_assert_int_eq(pjson_int32(o, "bad", NULL, &v), -1);
	ck_assert_int_eq(pjson_int32(o, "empty", NULL, &v), -1);
	ck_assert_int_eq(v, 99);
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_int64_strings)
{
	cJSON *o = parse("{\"max\":\"9223372036854775807\",\"min\":\"-9223372036854775808\","
			 "\"over\":\"9223372036854775808\",\"under\":\"-9223372036854775809\","
			 "\"five\":\"5\",\"frac\":\"1.5\",\"hex\":\"0x10\",\"junk\":\"12abc\",\"empty\":\"\"}");
	int64_t v = 99;

	ck_assert_int_eq(pjson_int64(o, "max", NULL, &v), 1);
	ck_assert(v == INT64_MAX);
	ck_assert_int_eq(pjson_int64(o, "min", NULL, &v), 1);
	ck_assert(v == INT64_MIN);
	ck_assert_int_eq(pjson_int64(o, "five", NULL, &v), 1);
	ck_assert(v == 5);
	v = 99;
	ck_assert_int_eq(pjson_int64(o, "over", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "under", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "frac", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "hex", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "junk", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "empty", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "missing", NULL, &v), 0);
	ck_assert(v == 99);
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_int64_numbers)
{
	cJSON *o = parse("{\"n\":-42,\"p53\":9007199254740992,\"m53\":-9007199254740992,"
			 "\"frac\":0.25,\"huge\":1e19,\"nhuge\":-1e19,\"b\":false,\"a\":[1]}");
	int64_t v = 99;

	ck_assert_int_eq(pjson_int64(o, "n", NULL, &v), 1);
	ck_assert(v == -42);
	ck_assert_int_eq(pjson_int64(o, "p53", NULL, &v), 1);
	ck_assert(v == INT64_C(9007199254740992));
	ck_assert_int_eq(pjson_int64(o, "m53", NULL, &v), 1);
	ck_assert(v == -INT64_C(9007199254740992));
	v = 99;
	ck_assert_int_eq(pjson_int64(o, "frac", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "huge", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "nhuge", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "b", NULL, &v), -1);
	ck_assert_int_eq(pjson_int64(o, "a", NULL, &v), -1);
	ck_assert(v == 99);
	cJSON_Delete(o);
}
END_TEST

/*
 * 2^63 as a JSON number: a double holds it exactly, but it is one past
 * INT64_MAX, so it is out of range (converting it would be undefined
 * behaviour). -2^63 is INT64_MIN exactly and in range.
 */
START_TEST(get_int64_number_edges)
{
	cJSON *o = parse("{\"p63\":9223372036854775808,\"m63\":-9223372036854775808}");
	int64_t v = 99;

	ck_assert_int_eq(pjson_int64(o, "p63", NULL, &v), -1);
	ck_assert(v == 99);
	ck_assert_int_eq(pjson_int64(o, "m63", NULL, &v), 1);
	ck_assert(v == INT64_MIN);
	cJSON_Delete(o);
}
END_TEST

static const char *const signal_names[] = { "SIGNAL_UNSPECIFIED", "SIGNAL_SIGTERM", "SIGNAL_SIGKILL" };
static const int signal_values[] = { 0, 15, 9 };

START_TEST(get_enum)
{
	cJSON *o = parse("{\"byName\":\"SIGNAL_SIGKILL\",\"byNum\":15,\"unknownNum\":77,"
			 "\"unknownName\":\"SIGNAL_SIGHUP\",\"lower\":\"signal_sigkill\",\"frac\":1.5,"
			 "\"big\":4294967296,\"b\":true,\"nul\":null,\"sig_snake\":\"SIGNAL_SIGTERM\"}");
	int v = -7;

	ck_assert_int_eq(pjson_enum(o, "byName", NULL, signal_names, signal_values, 3, &v), 1);
	ck_assert_int_eq(v, 9);
	ck_assert_int_eq(pjson_enum(o, "sigSnake", "sig_snake", signal_names, signal_values, 3, &v), 1);
	ck_assert_int_eq(v, 15);
	ck_assert_int_eq(pjson_enum(o, "byNum", NULL, signal_names, signal_values, 3, &v), 1);
	ck_assert_int_eq(v, 15);
	/* proto3 enums are open: an unknown number is kept for the caller to judge. */
	ck_assert_int_eq(pjson_enum(o, "unknownNum", NULL, signal_names, signal_values, 3, &v), 1);
	ck_assert_int_eq(v, 77);
	v = -7;
	ck_assert_int_eq(pjson_enum(o, "missing", NULL, signal_names, signal_values, 3, &v), 0);
	ck_assert_int_eq(pjson_enum(o, "nul", NULL, signal_names, signal_values, 3, &v), 0);
	ck_assert_int_eq(pjson_enum(o, "unknownName", NULL, signal_names, signal_values, 3, &v), -1);
	ck_assert_int_eq(pjson_enum(o, "lower", NULL, signal_names, signal_values, 3, &v), -1);
	ck_assert_int_eq(pjson_enum(o, "frac", NULL, signal_names, signal_values, 3, &v), -1);
	ck_assert_int_eq(pjson_enum(o, "big", NULL, signal_names, signal_values, 3, &v), -1);
	ck_assert_int_eq(pjson_enum(o, "b", NULL, signal_names, signal_values, 3, &v), -1);
	ck_assert_int_eq(v, -7);
	cJSON_Delete(o);
}
END_TEST

START_TEST(get_bytes)
{
	cJSON *o = parse("{\"stdin\":\"aGVsbG8=\",\"pty\":\"aGVsbG8\",\"url\":\"-_8=\",\"bad\":\"a$b=\","
			 "\"n\":5,\"empty\":\"\",\"nul\":null}");
	unsigned char *out = NULL;
	size_t len = 99;

	ck_assert_int_eq(pjson_bytes(o, "stdin", NULL, &out, &len), 1);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(out, "hello", 5);
	free(out);
	out = NULL;
	ck_assert_int_eq(pjson_bytes(o, "pty", NULL, &out, &len), 1);
	ck_assert_uint_eq(len, 5);
	ck_assert_mem_eq(out, "hello", 5);
	free(out);
	out = NULL;
	ck_assert_int_eq(pjson_bytes(o, "url", NULL, &out, &len), 1);
	ck_assert_uint_eq(len, 2);
	ck_assert_mem_eq(out, "\xfb\xff", 2);
	free(out);
	out = NULL;
	ck_assert_int_eq(pjson_bytes(o, "empty", NULL, &out, &len), 1);
	ck_assert_uint_eq(len, 0);
	free(out);
	out = NULL;
	len = 99;
	ck_assert_int_eq(pjson_bytes(o, "missing", NULL, &out, &len), 0);
	ck_assert_int_eq(pjson_bytes(o, "nul", NULL, &out, &len), 0);
	ck_assert_int_eq(pjson_bytes(o, "bad", NULL, &out, &len), -1);
	ck_assert_int_eq(pjson_bytes(o, "n", NULL, &out, &len), -1);
	ck_assert_ptr_null(out);
	ck_assert_uint_eq(len, 99);
	cJSON_Delete(o);
}
END_TEST

START_TEST(add_int64)
{
	cJSON *o = cJSON_CreateObject();
	const cJSON *it;

	ck_assert_int_eq(pjson_add_int64(o, "zero", 0), 0);
	ck_assert_ptr_null(cJSON_GetObjectItemCaseSensitive(o, "zero"));
	ck_assert_int_eq(pjson_add_int64(o, "size", 5), 0);
	ck_assert_int_eq(pjson_add_int64(o, "min", INT64_MIN), 0);
	ck_assert_int_eq(pjson_add_int64(o, "max", INT64_MAX), 0);
	it = cJSON_GetObjectItemCaseSensitive(o, "size");
	ck_assert(cJSON_IsString(it));
	ck_assert_str_eq(it->valuestring, "5");
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "min")->valuestring, "-9223372036854775808");
	ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(o, "max")->valuestring, "9223372036854775807");
	/* What is written reads back. */
	{
		int64_t v = 0;

		ck_assert_int_eq(pjson_int64(o, "min", NULL, &v), 1);
		ck_assert(v == INT64_MIN);
	}
	cJSON_Delete(o);
}
END_TEST

/* ---- base64 ------------------------------------------------------------- */

/* A plain reference encoder, one 6-bit group at a time, to check the library against. */
static char *ref_b64(const unsigned char *p, size_t len, int url, int pad)
{
	const char *std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *urls = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const char *a = url ? urls : std;
	size_t bits = len * 8, o = 0;
	char *out = malloc(len * 2 + 8);

	ck_assert_ptr_nonnull(out);
	for (size_t b = 0; b < bits; b += 6) {
		unsigned v = 0;

		for (size_t k = 0; k < 6; k++) {
			size_t bit = b + k;

			v <<= 1;
			if (bit < bits)
				v |= (p[bit / 8] >> (7 - bit % 8)) & 1;
		}
		out[o++] = a[v];
	}
	while (pad && o % 4)
		out[o++] = '=';
	out[o] = '\0';
	return out;
}

START_TEST(b64_rfc4648_vectors)
{
	static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const want[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };

	for (size_t i = 0; i < 7; i++) {
		char *enc = pjson_b64_encode(in[i], strlen(in[i]));
		unsigned char *dec = NULL;
		size_t dlen = 0;

		ck_assert_ptr_nonnull(enc);
		ck_assert_str_eq(enc, want[i]);
		ck_assert_int_eq(pjson_b64_decode(want[i], strlen(want[i]), &dec, &dlen), 0);
		ck_assert_uint_eq(dlen, strlen(in[i]));
		if (dlen)
			ck_assert_mem_eq(dec, in[i], dlen);
		free(enc);
		free(dec);
	}
}
END_TEST

START_TEST(b64_random_round_trips)
{
	uint32_t seed = 12345u + (uint32_t)_i * 7919u;

	for (size_t len = 0; len < 200; len++) {
		unsigned char data[200];
		char *enc, *ref;

		for (size_t i = 0; i < len; i++) {
			seed = seed * 1103515245u + 12345u;
			data[i] = (unsigned char)(seed >> 16);
		}
		enc = pjson_b64_encode(data, len);
		ck_assert_ptr_nonnull(enc);
		ref = ref_b64(data, len, 0, 1);
		ck_assert_str_eq(enc, ref);
		ck_assert_uint_eq(strlen(enc) % 4, 0);
		free(ref);
		/* Every accepted spelling decodes to the same bytes. */
		for (int url = 0; url <= 1; url++)
			for (int pad = 0; pad <= 1; pad++) {
				unsigned char *dec = NULL;
				size_t dlen = 0;

				ref = ref_b64(data, len, url, pad);
				ck_assert_int_eq(pjson_b64_decode(ref, strlen(ref), &dec, &dlen), 0);
				ck_assert_uint_eq(dlen, len);
				if (len)
					ck_assert_mem_eq(dec, data, len);
				free(dec);
				free(ref);
			}
		free(enc);
	}
}
END_TEST

START_TEST(b64_decode_uses_length)
{
	unsigned char *dec = NULL;
	size_t dlen = 0;

	/* Only slen bytes are read: "Zm9v" of "Zm9vYmFy". */
	ck_assert_int_eq(pjson_b64_decode("Zm9vYmFy", 4, &dec, &dlen), 0);
	ck_assert_uint_eq(dlen, 3);
	ck_assert_mem_eq(dec, "foo", 3);
	free(dec);
}
END_TEST

START_TEST(b64_invalid)
{
	static const char *const bad[] = {
		"Z",          /* a lone sextet cannot hold a byte */
		"Zm9vY",      /* same, after a full group */
		"Zm9v!mFy",   /* outside both alphabets */
		"Zm 9v",      /* whitespace */
		"=Zm9",       /* padding first */
		"Zm=9",       /* padding inside */
		"Zm9v\nYmFy", /* newline */
		"Zm9v\x80",   /* high byte */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned char *dec = (unsigned char *)"sentinel";
		size_t dlen = 77;

		ck_assert_msg(pjson_b64_decode(bad[i], strlen(bad[i]), &dec, &dlen) == -1, "accepted \"%s\"",
			      bad[i]);
		ck_assert_uint_eq(dlen, 77);
	}
}
END_TEST

/* ---- timestamps ---------------------------------------------------------- */

/*
 * Expected strings were derived with Python's datetime:
 *   datetime.fromtimestamp(s, timezone.utc).strftime('%Y-%m-%dT%H:%M:%S')
 * plus the nanoseconds written as nine digits.
 */
START_TEST(timestamp_format)
{
	char out[40];

	pjson_format_timestamp(out, 0, 0);
	ck_assert_str_eq(out, "1970-01-01T00:00:00Z");
	pjson_format_timestamp(out, 1760372011, 282056477);
	ck_assert_str_eq(out, "2025-10-13T16:13:31.282056477Z");
	pjson_format_timestamp(out, 951782400, 1);
	ck_assert_str_eq(out, "2000-02-29T00:00:00.000000001Z");
	pjson_format_timestamp(out, 253402300799, 999999999);
	ck_assert_str_eq(out, "9999-12-31T23:59:59.999999999Z");
	pjson_format_timestamp(out, 1760372011, 0);
	ck_assert_str_eq(out, "2025-10-13T16:13:31Z");
	pjson_format_timestamp(out, -1, 0);
	ck_assert_str_eq(out, "1969-12-31T23:59:59Z");
}
END_TEST

START_TEST(timestamp_parse)
{
	static const struct {
		const char *in;
		int64_t sec;
		long nsec;
	} ok[] = {
		{ "2025-10-13T16:13:31.282056477Z", 1760372011, 282056477 },
		{ "2025-10-13T16:13:31Z", 1760372011, 0 },
		{ "2025-10-13T16:13:31z", 1760372011, 0 },
		{ "2025-10-13T16:13:31.5Z", 1760372011, 500000000 },
		{ "2025-10-13T16:13:31.000001Z", 1760372011, 1000 },
		/* More than nine digits: the rest is below a nanosecond and dropped. */
		{ "2025-10-13T16:13:31.1234567899Z", 1760372011, 123456789 },
		/* Offsets: local time minus the offset is UTC. */
		{ "2025-10-13T18:13:31+02:00", 1760372011, 0 },
		{ "2025-10-13T10:43:31.25-05:30", 1760372011, 250000000 },
		{ "2025-10-14T00:13:31+08:00", 1760372011, 0 },
		{ "2025-10-13T16:13:31+00:00", 1760372011, 0 },
		{ "1970-01-01T00:00:00Z", 0, 0 },
		{ "2000-02-29T00:00:00.000000001Z", 951782400, 1 },
	};
	static const char *const bad[] = {
		"",
		"2025-10-13",
		"2025-10-13T16:13:31",          /* no zone */
		"2025-10-13T16:13:31.Z",        /* dot without digits */
		"2025-10-13T16:13:31ZZ",        /* trailing junk */
		"2025-10-13T16:13:31+0200",     /* offset without colon */
		"2025-10-13T16:13:31+02",       /* short offset */
		/* Offsets with one-digit fields: "+HH:MM" is six characters, and
		 * skipping six here would step past the terminator. */
		"2025-10-13T16:13:31-1:0",
		"2025-10-13T16:13:31+1:00",
		"2025-10-13T16:13:31+01:0",
		"2025-13-13T16:13:31Z",         /* month 13 */
		"2025-10-13 16:13:31Z",         /* space instead of T */
		"not a timestamp",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		int64_t sec = -5;
		long nsec = -5;

		ck_assert_msg(pjson_parse_timestamp(ok[i].in, &sec, &nsec) == 0, "refused %s", ok[i].in);
		ck_assert_msg(sec == ok[i].sec, "%s: sec %" PRId64, ok[i].in, sec);
		ck_assert_msg(nsec == ok[i].nsec, "%s: nsec %ld", ok[i].in, nsec);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t sec;
		long nsec;

		ck_assert_msg(pjson_parse_timestamp(bad[i], &sec, &nsec) == -1, "accepted \"%s\"", bad[i]);
	}
}
END_TEST

/*
 * The same short offsets in a buffer padded with NULs: a parser that steps
 * over the terminator lands on padding and would accept them.
 */
START_TEST(timestamp_short_offset_padded)
{
	static const char *const bad[] = { "2025-10-13T16:13:31-1:0", "2025-10-13T16:13:31+1:00",
					   "2025-10-13T16:13:31+01:0", "2025-10-13T16:13:31+1:0" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char buf[64];
		int64_t sec;
		long nsec;

		memset(buf, 0, sizeof(buf));
		memcpy(buf, bad[i], strlen(bad[i]));
		ck_assert_msg(pjson_parse_timestamp(buf, &sec, &nsec) == -1, "accepted \"%s\"", bad[i]);
	}
}
END_TEST

START_TEST(timestamp_round_trip)
{
	uint32_t seed = 4242;

	for (int i = 0; i < 500; i++) {
		char out[40];
		int64_t sec, got_sec = 0;
		long nsec, got_nsec = -1;

		seed = seed * 1103515245u + 12345u;
		sec = (int64_t)(seed % 4000000000u);
		seed = seed * 1103515245u + 12345u;
		nsec = i % 3 == 0 ? 0 : (long)(seed % 1000000000u);
		pjson_format_timestamp(out, sec, nsec);
		ck_assert_int_eq(out[strlen(out) - 1], 'Z');
		ck_assert_int_eq(pjson_parse_timestamp(out, &got_sec, &got_nsec), 0);
		ck_assert(got_sec == sec);
		ck_assert_int_eq(got_nsec, nsec);
	}
}
END_TEST

static Suite *pjson_suite(void)
{
	Suite *s = suite_create("pjson");
	TCase *tc;

	tc = tcase_create("lookup");
	tcase_add_test(tc, field_camel_and_snake);
	tcase_add_test(tc, field_on_non_objects);
	suite_add_tcase(s, tc);

	tc = tcase_create("getters");
	tcase_add_test(tc, get_string);
	tcase_add_test(tc, get_bool);
	tcase_add_test(tc, get_uint32);
	tcase_add_test(tc, get_int32);
	tcase_add_test(tc, get_int64_strings);
	tcase_add_test(tc, get_int64_numbers);
	tcase_add_test(tc, get_int64_number_edges);
	tcase_add_test(tc, get_enum);
	tcase_add_test(tc, get_bytes);
	tcase_add_test(tc, add_int64);
	suite_add_tcase(s, tc);

	tc = tcase_create("base64");
	tcase_add_test(tc, b64_rfc4648_vectors);
	tcase_add_loop_test(tc, b64_random_round_trips, 0, 4);
	tcase_add_test(tc, b64_decode_uses_length);
	tcase_add_test(tc, b64_invalid);
	suite_add_tcase(s, tc);

	tc = tcase_create("timestamp");
	tcase_add_test(tc, timestamp_format);
	tcase_add_test(tc, timestamp_parse);
	tcase_add_test(tc, timestamp_short_offset_padded);
	tcase_add_test(tc, timestamp_round_trip);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pjson_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
