/*
 * Connect protocol helpers (libhangar/util/connect.c): the envelope header,
 * the incremental envelope decoder, and the error code tables.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connect.h"

/* ---- a recorder for decoded envelopes ---------------------------------- */

#define MAX_FRAMES 64

struct frame {
	uint8_t flags;
	size_t len;
	char *data;
};

struct recorder {
	struct frame f[MAX_FRAMES];
	size_t n;
	size_t stop_after;   /* ask the decoder to stop after this many (0: never) */
	int saw_unterminated;
};

static int record(uint8_t flags, const char *payload, size_t len, void *ctx)
{
	struct recorder *r = ctx;

	ck_assert_uint_lt(r->n, MAX_FRAMES);
	r->f[r->n].flags = flags;
	r->f[r->n].len = len;
	r->f[r->n].data = malloc(len + 1);
	ck_assert_ptr_nonnull(r->f[r->n].data);
	memcpy(r->f[r->n].data, payload, len);
	/* The decoder promises a NUL after the payload so JSON parsers can use it. */
	if (payload[len] != '\0')
		r->saw_unterminated = 1;
	r->n++;
	return r->stop_after && r->n >= r->stop_after;
}

static void recorder_free(struct recorder *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->f[i].data);
	memset(r, 0, sizeof(*r));
}

/* ---- a stream of envelopes built by hand -------------------------------- */

struct wire {
	uint8_t *bytes;
	size_t len;
	struct frame f[MAX_FRAMES];
	size_t n;
};

static void wire_add(struct wire *w, uint8_t flags, const void *payload, size_t len)
{
	uint8_t *p;

	ck_assert_uint_lt(w->n, MAX_FRAMES);
	w->bytes = realloc(w->bytes, w->len + 5 + len);
	ck_assert_ptr_nonnull(w->bytes);
	p = w->bytes + w->len;
	/* Written out by hand (not with connect_envelope_header) to keep the two independent. */
	p[0] = flags;
	p[1] = (uint8_t)(len >> 24);
	p[2] = (uint8_t)(len >> 16);
	p[3] = (uint8_t)(len >> 8);
	p[4] = (uint8_t)len;
	if (len)
		memcpy(p + 5, payload, len);
	w->len += 5 + len;
	w->f[w->n].flags = flags;
	w->f[w->n].len = len;
	w->f[w->n].data = malloc(len + 1);
	ck_assert_ptr_nonnull(w->f[w->n].data);
	if (len)
		memcpy(w->f[w->n].data, payload, len);
	w->n++;
}

static void wire_free(struct wire *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->f[i].data);
	free(w->bytes);
	memset(w, 0, sizeof(*w));
}

/* A deterministic generator, so a failure can be reproduced. */
static uint32_t rng_state;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

/* A mixed stream: empty frames, JSON, binary with NULs, a compressed flag, a big one, end. */
static void build_stream(struct wire *w)
{
	static const char json[] = "{\"event\":{\"start\":{\"pid\":42}}}";
	uint8_t bin[300];
	char *big;
	size_t biglen = 70000;

	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (uint8_t)(i * 7);
	big = malloc(biglen);
	ck_assert_ptr_nonnull(big);
	for (size_t i = 0; i < biglen; i++)
		big[i] = (char)('a' + i % 26);

	wire_add(w, 0, "", 0);
	wire_add(w, 0, json, strlen(json));
	wire_add(w, 0, bin, sizeof(bin));
	wire_add(w, CONNECT_FLAG_COMPRESSED, bin, 17);
	wire_add(w, 0, big, biglen);
	wire_add(w, 0, "x", 1);
	wire_add(w, CONNECT_FLAG_END_STREAM, "{}", 2);
	free(big);
}

static void assert_same(const struct wire *w, const struct recorder *r)
{
	ck_assert_uint_eq(r->n, w->n);
	ck_assert_int_eq(r->saw_unterminated, 0);
	for (size_t i = 0; i < w->n; i++) {
		ck_assert_uint_eq(r->f[i].flags, w->f[i].flags);
		ck_assert_uint_eq(r->f[i].len, w->f[i].len);
		if (w->f[i].len)
			ck_assert_mem_eq(r->f[i].data, w->f[i].data, w->f[i].len);
	}
}

/* Feeds w in the pieces given by cuts (ascending offsets), then finishes. */
static void decode_in_pieces(const struct wire *w, const size_t *cuts, size_t ncuts, struct recorder *r)
{
	struct envelope_decoder d;
	size_t at = 0;

	envelope_decoder_init(&d, 1u << 20);
	for (size_t i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : w->len;

		ck_assert_int_eq(envelope_decoder_feed(&d, w->bytes + at, end - at, record, r), ENVELOPE_OK);
		at = end;
	}
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_OK);
	ck_assert_int_eq(d.ended, 1);
	envelope_decoder_free(&d);
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(header_encoding)
{
	uint8_t h[CONNECT_ENVELOPE_HEADER];

	connect_envelope_header(h, 0, 0);
	ck_assert_mem_eq(h, "\x00\x00\x00\x00\x00", 5);
	connect_envelope_header(h, CONNECT_FLAG_END_STREAM, 2);
	ck_assert_mem_eq(h, "\x02\x00\x00\x00\x02", 5);
	connect_envelope_header(h, CONNECT_FLAG_COMPRESSED, 0x01020304u);
	ck_assert_mem_eq(h, "\x01\x01\x02\x03\x04", 5);
	connect_envelope_header(h, 0, 0xfffffffeu);
	ck_assert_mem_eq(h, "\x00\xff\xff\xff\xfe", 5);
	connect_envelope_header(h, 0, 300);
	ck_assert_mem_eq(h, "\x00\x00\x00\x01\x2c", 5);
	ck_assert_int_eq(CONNECT_ENVELOPE_HEADER, 5);
	ck_assert_int_eq(CONNECT_FLAG_COMPRESSED, 1);
	ck_assert_int_eq(CONNECT_FLAG_END_STREAM, 2);
}
END_TEST

START_TEST(decode_whole)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };

	build_stream(&w);
	decode_in_pieces(&w, NULL, 0, &r);
	assert_same(&w, &r);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(decode_byte_by_byte)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	size_t *cuts;

	build_stream(&w);
	cuts = malloc(w.len * sizeof(*cuts));
	ck_assert_ptr_nonnull(cuts);
	for (size_t i = 1; i < w.len; i++)
		cuts[i - 1] = i;
	decode_in_pieces(&w, cuts, w.len - 1, &r);
	assert_same(&w, &r);
	free(cuts);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(decode_random_splits)
{
	struct wire w = { 0 };

	build_stream(&w);
	rng_state = 0x9e3779b9u + (uint32_t)_i;
	for (int round = 0; round < 200; round++) {
		struct recorder r = { 0 };
		size_t cuts[40], n = 0, at = 0;

		/* Cut points cluster near frame boundaries as often as anywhere else. */
		while (n < 40) {
			size_t step = (rng() % 4 == 0) ? rng() % 8 : rng() % (w.len / 8 + 1);

			at += step;
			if (at >= w.len)
				break;
			cuts[n++] = at;
		}
		decode_in_pieces(&w, cuts, n, &r);
		assert_same(&w, &r);
		recorder_free(&r);
	}
	wire_free(&w);
}
END_TEST

START_TEST(decode_empty_pieces)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	struct envelope_decoder d;

	wire_add(&w, 0, "{}", 2);
	envelope_decoder_init(&d, 100);
	ck_assert_int_eq(envelope_decoder_feed(&d, "", 0, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, 3, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(envelope_decoder_feed(&d, "", 0, record, &r), ENVELOPE_OK);
	ck_assert_uint_eq(r.n, 0);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes + 3, w.len - 3, record, &r), ENVELOPE_OK);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_OK);
	ck_assert_int_eq(d.ended, 0);
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(frame_at_max)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	struct envelope_decoder d;
	char payload[64];

	memset(payload, 'q', sizeof(payload));
	wire_add(&w, 0, payload, sizeof(payload));
	envelope_decoder_init(&d, sizeof(payload));
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, w.len, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_OK);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_uint_eq(r.f[0].len, sizeof(payload));
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(frame_over_max)
{
	struct recorder r = { 0 };
	struct envelope_decoder d;
	/* Just the header of a 65-byte frame: refused before any payload arrives. */
	static const uint8_t hdr[] = { 0, 0, 0, 0, 65 };

	envelope_decoder_init(&d, 64);
	ck_assert_int_eq(envelope_decoder_feed(&d, hdr, sizeof(hdr), record, &r), ENVELOPE_TOO_LARGE);
	ck_assert_uint_eq(r.n, 0);
	/* The failure is sticky: more input changes nothing. */
	ck_assert_int_eq(envelope_decoder_feed(&d, "abc", 3, record, &r), ENVELOPE_TOO_LARGE);
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_TOO_LARGE);
	ck_assert_uint_eq(r.n, 0);
	envelope_decoder_free(&d);
}
END_TEST

START_TEST(frame_huge_length)
{
	struct recorder r = { 0 };
	struct envelope_decoder d;
	static const uint8_t hdr[] = { 0, 0xff, 0xff, 0xff, 0xff };

	/* A 4 GiB claim must be refused without trying to allocate it. */
	envelope_decoder_init(&d, 16u << 20);
	ck_assert_int_eq(envelope_decoder_feed(&d, hdr, 2, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(envelope_decoder_feed(&d, hdr + 2, 3, record, &r), ENVELOPE_TOO_LARGE);
	ck_assert_ptr_null(d.frame);
	envelope_decoder_free(&d);
}
END_TEST

START_TEST(too_large_after_good_frames)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	struct envelope_decoder d;
	char big[11] = "0123456789";

	wire_add(&w, 0, "ok", 2);
	wire_add(&w, 0, big, 10);
	envelope_decoder_init(&d, 9);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, w.len, record, &r), ENVELOPE_TOO_LARGE);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_mem_eq(r.f[0].data, "ok", 2);
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(bad_flags)
{
	static const uint8_t bad[] = { 0x04, 0x08, 0x10, 0x80, 0xff, 0x06 };
	static const uint8_t good[] = { 0x00, 0x01, 0x02, 0x03 };

	for (size_t i = 0; i < sizeof(bad); i++) {
		struct recorder r = { 0 };
		struct envelope_decoder d;
		uint8_t frame[] = { bad[i], 0, 0, 0, 2, '{', '}' };

		envelope_decoder_init(&d, 100);
		ck_assert_int_eq(envelope_decoder_feed(&d, frame, sizeof(frame), record, &r), ENVELOPE_BAD_FLAGS);
		ck_assert_uint_eq(r.n, 0);
		ck_assert_int_eq(envelope_decoder_feed(&d, frame, sizeof(frame), record, &r), ENVELOPE_BAD_FLAGS);
		ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_BAD_FLAGS);
		envelope_decoder_free(&d);
	}
	for (size_t i = 0; i < sizeof(good); i++) {
		struct recorder r = { 0 };
		struct envelope_decoder d;
		uint8_t frame[] = { good[i], 0, 0, 0, 2, '{', '}' };

		envelope_decoder_init(&d, 100);
		ck_assert_int_eq(envelope_decoder_feed(&d, frame, sizeof(frame), record, &r), ENVELOPE_OK);
		ck_assert_uint_eq(r.n, 1);
		ck_assert_uint_eq(r.f[0].flags, good[i]);
		ck_assert_int_eq(d.ended, (good[i] & CONNECT_FLAG_END_STREAM) ? 1 : 0);
		envelope_decoder_free(&d);
		recorder_free(&r);
	}
}
END_TEST

START_TEST(truncated)
{
	struct wire w = { 0 };

	wire_add(&w, 0, "{\"a\":1}", 7);
	/* Every proper prefix but the empty one ends inside the frame. */
	for (size_t cut = 0; cut <= w.len; cut++) {
		struct recorder r = { 0 };
		struct envelope_decoder d;

		envelope_decoder_init(&d, 100);
		ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, cut, record, &r), ENVELOPE_OK);
		if (cut == 0 || cut == w.len)
			ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_OK);
		else
			ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_TRUNCATED);
		ck_assert_uint_eq(r.n, cut == w.len ? 1 : 0);
		envelope_decoder_free(&d);
		recorder_free(&r);
	}
	wire_free(&w);
}
END_TEST

START_TEST(truncated_second_frame)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	struct envelope_decoder d;

	wire_add(&w, 0, "{}", 2);
	wire_add(&w, 0, "{}", 2);
	envelope_decoder_init(&d, 100);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, w.len - 1, record, &r), ENVELOPE_OK);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_TRUNCATED);
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(end_stream_flag)
{
	struct wire w = { 0 };
	struct recorder r = { 0 };
	struct envelope_decoder d;
	size_t first;

	wire_add(&w, 0, "{\"x\":1}", 7);
	first = w.len;
	wire_add(&w, CONNECT_FLAG_END_STREAM, "{\"error\":{\"code\":\"internal\"}}", 29);
	envelope_decoder_init(&d, 100);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, first, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(d.ended, 0);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes + first, w.len - first, record, &r), ENVELOPE_OK);
	ck_assert_int_eq(d.ended, 1);
	ck_assert_uint_eq(r.n, 2);
	ck_assert_uint_eq(r.f[1].flags, CONNECT_FLAG_END_STREAM);
	ck_assert_mem_eq(r.f[1].data, "{\"error\":{\"code\":\"internal\"}}", 29);
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(callback_stop)
{
	struct wire w = { 0 };
	struct recorder r = { .stop_after = 2 };
	struct envelope_decoder d;

	for (int i = 0; i < 5; i++)
		wire_add(&w, 0, "{}", 2);
	envelope_decoder_init(&d, 100);
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, w.len, record, &r), ENVELOPE_STOPPED);
	ck_assert_uint_eq(r.n, 2);
	/* Stopped stays stopped; nothing more is delivered. */
	ck_assert_int_eq(envelope_decoder_feed(&d, w.bytes, w.len, record, &r), ENVELOPE_STOPPED);
	ck_assert_int_eq(envelope_decoder_finish(&d), ENVELOPE_STOPPED);
	ck_assert_uint_eq(r.n, 2);
	envelope_decoder_free(&d);
	recorder_free(&r);
	wire_free(&w);
}
END_TEST

START_TEST(free_is_repeatable)
{
	struct envelope_decoder d;
	static const uint8_t partial[] = { 0, 0, 0, 0, 10, 'a', 'b' };
	struct recorder r = { 0 };

	envelope_decoder_init(&d, 100);
	ck_assert_int_eq(envelope_decoder_feed(&d, partial, sizeof(partial), record, &r), ENVELOPE_OK);
	envelope_decoder_free(&d);
	ck_assert_ptr_null(d.frame);
	envelope_decoder_free(&d);
}
END_TEST

START_TEST(status_strings)
{
	static const enum envelope_status all[] = { ENVELOPE_OK, ENVELOPE_TOO_LARGE, ENVELOPE_BAD_FLAGS,
						    ENVELOPE_NOMEM, ENVELOPE_STOPPED, ENVELOPE_TRUNCATED };
	size_t n = sizeof(all) / sizeof(all[0]);

	for (size_t i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(envelope_status_str(all[i]));
		for (size_t j = 0; j < i; j++)
			ck_assert_str_ne(envelope_status_str(all[i]), envelope_status_str(all[j]));
	}
	ck_assert_ptr_nonnull(envelope_status_str((enum envelope_status)-99));
}
END_TEST

/*
 * The Connect code table as published by the Connect protocol
 * specification, written out independently.
 */
static const struct {
	enum connect_code code;
	const char *name;
	int http;
} code_table[] = {
	{ CONNECT_CANCELED, "canceled", 499 },
	{ CONNECT_UNKNOWN, "unknown", 500 },
	{ CONNECT_INVALID_ARGUMENT, "invalid_argument", 400 },
	{ CONNECT_DEADLINE_EXCEEDED, "deadline_exceeded", 504 },
	{ CONNECT_NOT_FOUND, "not_found", 404 },
	{ CONNECT_ALREADY_EXISTS, "already_exists", 409 },
	{ CONNECT_PERMISSION_DENIED, "permission_denied", 403 },
	{ CONNECT_RESOURCE_EXHAUSTED, "resource_exhausted", 429 },
	{ CONNECT_FAILED_PRECONDITION, "failed_precondition", 400 },
	{ CONNECT_ABORTED, "aborted", 409 },
	{ CONNECT_OUT_OF_RANGE, "out_of_range", 400 },
	{ CONNECT_UNIMPLEMENTED, "unimplemented", 501 },
	{ CONNECT_INTERNAL, "internal", 500 },
	{ CONNECT_UNAVAILABLE, "unavailable", 503 },
	{ CONNECT_DATA_LOSS, "data_loss", 500 },
	{ CONNECT_UNAUTHENTICATED, "unauthenticated", 401 },
};

START_TEST(code_names)
{
	size_t n = sizeof(code_table) / sizeof(code_table[0]);

	ck_assert_uint_eq(n, CONNECT_CODE_COUNT - 1);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(connect_code_name(code_table[i].code), code_table[i].name);
		ck_assert_int_eq(connect_code_from_name(code_table[i].name), code_table[i].code);
	}
	/* Connect's numeric values (gRPC's) are the enum's. */
	ck_assert_int_eq(CONNECT_CANCELED, 1);
	ck_assert_int_eq(CONNECT_NOT_FOUND, 5);
	ck_assert_int_eq(CONNECT_UNAUTHENTICATED, 16);
}
END_TEST

START_TEST(code_names_out_of_range)
{
	ck_assert_str_eq(connect_code_name(CONNECT_CODE_COUNT), "unknown");
	ck_assert_str_eq(connect_code_name((enum connect_code)-1), "unknown");
	ck_assert_str_eq(connect_code_name((enum connect_code)1000), "unknown");
	ck_assert_int_eq(connect_code_from_name("bogus"), CONNECT_UNKNOWN);
	ck_assert_int_eq(connect_code_from_name(""), CONNECT_UNKNOWN);
	ck_assert_int_eq(connect_code_from_name(NULL), CONNECT_UNKNOWN);
	/* Wire names are exact: case and spelling variants are not codes. */
	ck_assert_int_eq(connect_code_from_name("NOT_FOUND"), CONNECT_UNKNOWN);
	ck_assert_int_eq(connect_code_from_name("not_found "), CONNECT_UNKNOWN);
	ck_assert_int_eq(connect_code_from_name("notfound"), CONNECT_UNKNOWN);
	/* "ok" is never an error code on the wire. */
	ck_assert_int_ne(connect_code_from_name("ok"), CONNECT_OK);
}
END_TEST

START_TEST(code_http_status)
{
	size_t n = sizeof(code_table) / sizeof(code_table[0]);

	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(connect_code_http_status(code_table[i].code), code_table[i].http);
	ck_assert_int_eq(connect_code_http_status(CONNECT_OK), 200);
	ck_assert_int_eq(connect_code_http_status(CONNECT_CODE_COUNT), 500);
	ck_assert_int_eq(connect_code_http_status((enum connect_code)-3), 500);
}
END_TEST

START_TEST(code_from_http_status)
{
	/* The Connect specification's table for responses without a Connect error body. */
	static const struct {
		int http;
		enum connect_code code;
	} t[] = {
		{ 400, CONNECT_INTERNAL },        { 401, CONNECT_UNAUTHENTICATED },
		{ 403, CONNECT_PERMISSION_DENIED }, { 404, CONNECT_UNIMPLEMENTED },
		{ 429, CONNECT_UNAVAILABLE },     { 502, CONNECT_UNAVAILABLE },
		{ 503, CONNECT_UNAVAILABLE },     { 504, CONNECT_UNAVAILABLE },
		{ 500, CONNECT_UNKNOWN },         { 405, CONNECT_UNKNOWN },
		{ 409, CONNECT_UNKNOWN },         { 418, CONNECT_UNKNOWN },
		{ 0, CONNECT_UNKNOWN },           { -1, CONNECT_UNKNOWN },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_int_eq(connect_code_from_http_status(t[i].http), t[i].code);
}
END_TEST

static Suite *connect_suite(void)
{
	Suite *s = suite_create("connect");
	TCase *tc;

	tc = tcase_create("envelope");
	tcase_add_test(tc, header_encoding);
	tcase_add_test(tc, decode_whole);
	tcase_add_test(tc, decode_byte_by_byte);
	tcase_add_loop_test(tc, decode_random_splits, 0, 5);
	tcase_add_test(tc, decode_empty_pieces);
	tcase_add_test(tc, frame_at_max);
	tcase_add_test(tc, frame_over_max);
	tcase_add_test(tc, frame_huge_length);
	tcase_add_test(tc, too_large_after_good_frames);
	tcase_add_test(tc, bad_flags);
	tcase_add_test(tc, truncated);
	tcase_add_test(tc, truncated_second_frame);
	tcase_add_test(tc, end_stream_flag);
	tcase_add_test(tc, callback_stop);
	tcase_add_test(tc, free_is_repeatable);
	tcase_add_test(tc, status_strings);
	suite_add_tcase(s, tc);

	tc = tcase_create("codes");
	tcase_add_test(tc, code_names);
	tcase_add_test(tc, code_names_out_of_range);
	tcase_add_test(tc, code_http_status);
	tcase_add_test(tc, code_from_http_status);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(connect_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
