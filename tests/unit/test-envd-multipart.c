/*
 * hangar-envd's streaming multipart/form-data parser (multipart.c) and the
 * header logic of the /files routes (files_headers.c: Accept-Encoding
 * negotiation, Range, Content-Disposition).
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "envd.h"
#include "files.h"
#include "multipart.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

/* ---- a recorder: every callback appends to one transcript ---------------- */

struct rec {
	struct hbuf log;
	int stop_at_begin;      /* stop when the n-th part begins (1-based), 0 never */
	int stop_in_data;
	int parts;
	int empty_data;         /* data callbacks with no bytes (never allowed) */
};

static int rec_begin(void *ctx, const char *name, const char *filename)
{
	struct rec *r = ctx;

	r->parts++;
	hbuf_printf(&r->log, "<%s|%s>", name ? name : "(null)", filename ? filename : "(null)");
	return r->stop_at_begin == r->parts;
}

static int rec_data(void *ctx, const char *data, size_t len)
{
	struct rec *r = ctx;

	/*
	 * Counted, and asserted once per run: a Check assertion records its
	 * location on every call, which for a body fed byte by byte costs more
	 * than the parsing under test (and under valgrind ran past the timeout).
	 */
	if (len == 0)
		r->empty_data++;
	hbuf_put(&r->log, data, len);
	return r->stop_in_data;
}

static int rec_end(void *ctx)
{
	struct rec *r = ctx;

	hbuf_puts(&r->log, "</>");
	return 0;
}

static const struct multipart_callbacks rec_cb = { rec_begin, rec_data, rec_end };

/* A tiny deterministic generator, so failures reproduce. */
static uint32_t rng_state;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

enum chunking { WHOLE, BYTES, RANDOM };

/* Length of the transcript run() returned last (it may hold NUL bytes). */
static size_t run_len;

/*
 * Parses body fed in the given chunking and returns the transcript, followed
 * by "=OK" or "=ERR" for the outcome of feed+finish. The caller frees it.
 */
static char *run(const char *ct, const char *body, size_t len, enum chunking how, struct rec *tmpl)
{
	struct rec r = { HBUF_INIT, 0, 0, 0, 0 };
	struct multipart_parser *p;
	int rc = 0;
	size_t i = 0;

	if (tmpl) {
		r.stop_at_begin = tmpl->stop_at_begin;
		r.stop_in_data = tmpl->stop_in_data;
	}
	p = multipart_new(ct, &rec_cb, &r);
	ck_assert_ptr_nonnull(p);
	while (i < len && rc == 0) {
		size_t n = how == WHOLE ? len : how == BYTES ? 1 : 1 + rng() % 97;

		if (n > len - i)
			n = len - i;
		rc = multipart_feed(p, body + i, n);
		i += n;
	}
	if (rc == 0)
		rc = multipart_finish(p);
	if (rc != 0)
		ck_assert_str_ne(multipart_error(p), "no error");
	if (r.empty_data)
		ck_abort_msg("%d data callbacks without data", r.empty_data);
	hbuf_puts(&r.log, rc == 0 ? "=OK" : "=ERR");
	multipart_free(p);
	run_len = r.log.len;
	return hbuf_steal(&r.log);
}

/* The same result whatever the chunking, and equal to want. */
static void parses_to(const char *ct, const char *body, size_t len, const char *want)
{
	char *whole = run(ct, body, len, WHOLE, NULL);
	char *bytes = run(ct, body, len, BYTES, NULL);

	ck_assert_str_eq(whole, want);
	ck_assert_str_eq(bytes, want);
	for (int k = 0; k < 20; k++) {
		char *rnd = run(ct, body, len, RANDOM, NULL);

		ck_assert_str_eq(rnd, want);
		free(rnd);
	}
	free(whole);
	free(bytes);
}

#define CT "multipart/form-data; boundary=XyZ"
#define PARSES(body, want) parses_to(CT, body, sizeof(body) - 1, want)

START_TEST(one_part)
{
	rng_state = 1;
	PARSES("--XyZ\r\n"
	       "Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/a.txt\"\r\n"
	       "Content-Type: text/plain\r\n"
	       "\r\n"
	       "hello world\r\n"
	       "--XyZ--\r\n",
	       "<file|/tmp/a.txt>hello world</>=OK");
}
END_TEST

START_TEST(several_parts)
{
	rng_state = 2;
	PARSES("--XyZ\r\n"
	       "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
	       "AAA\r\n"
	       "--XyZ\r\n"
	       "Content-Disposition: form-data; name=\"note\"\r\n\r\n"
	       "just a field\r\n"
	       "--XyZ\r\n"
	       "Content-Disposition: form-data; name=\"file\"; filename=\"b\"\r\n\r\n"
	       "\r\n"
	       "--XyZ--",
	       "<file|a>AAA</><note|(null)>just a field</><file|b></>=OK");
}
END_TEST

START_TEST(empty_part_and_no_headers)
{
	rng_state = 3;
	PARSES("--XyZ\r\n\r\n\r\n--XyZ\r\nContent-Disposition: form-data; name=file\r\n\r\nx\r\n--XyZ--",
	       "<(null)|(null)></><file|(null)>x</>=OK");
}
END_TEST

START_TEST(boundary_forms)
{
	static const char body[] = "--a'b c\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nQ\r\n--a'b c--";
	static const char bare[] = "--simple\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nQ\r\n--simple--";

	rng_state = 4;
	parses_to("multipart/form-data; boundary=\"a'b c\"", body, sizeof(body) - 1, "<file|(null)>Q</>=OK");
	parses_to("multipart/form-data; charset=utf-8; BOUNDARY=simple", bare, sizeof(bare) - 1,
		  "<file|(null)>Q</>=OK");
	parses_to("multipart/form-data;boundary=simple ; foo=bar", bare, sizeof(bare) - 1, "<file|(null)>Q</>=OK");
	parses_to("multipart/form-data; boundary=\"simple\"", bare, sizeof(bare) - 1, "<file|(null)>Q</>=OK");
}
END_TEST

START_TEST(bad_content_types)
{
	struct rec r = { HBUF_INIT, 0, 0, 0, 0 };
	static const char *const bad[] = {
		"multipart/form-data",
		"multipart/form-data; boundary=",
		"multipart/form-data; boundary=\"\"",
		"multipart/form-data; boundary=\"unterminated",
		"multipart/form-data; boundary=\"a\rb\"",
		"multipart/form-data; boundary=\"a\nb\"",
		"multipart/form-data; foo",
		"",
	};
	char longb[400];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(multipart_new(bad[i], &rec_cb, &r) == NULL, "accepted \"%s\"", bad[i]);
	ck_assert_ptr_null(multipart_new(NULL, &rec_cb, &r));
	snprintf(longb, sizeof(longb), "multipart/form-data; boundary=%0300d", 7);
	ck_assert_ptr_null(multipart_new(longb, &rec_cb, &r));
	hbuf_free(&r.log);
}
END_TEST

START_TEST(filenames)
{
	rng_state = 5;
	/* Directories are kept: the filename is the target path. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/u/dir/sub/f.bin\"\r\n\r\n"
	       "1\r\n--XyZ--",
	       "<file|/home/u/dir/sub/f.bin>1</>=OK");
	/* Backslash escapes inside a quoted string. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\\\"b\\\\c;d.txt\"\r\n\r\n"
	       "2\r\n--XyZ--",
	       "<file|a\"b\\c;d.txt>2</>=OK");
	/* Bare value with slashes, and case-insensitive names. */
	PARSES("--XyZ\r\ncontent-DISPOSITION: form-data; NAME=file; FileName=/tmp/x y.txt\r\n\r\n"
	       "3\r\n--XyZ--",
	       "<file|/tmp/x y.txt>3</>=OK");
	/* RFC 5987 wins over the plain parameter, in either order. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC%20rate.txt; "
	       "filename=\"fallback.txt\"\r\n\r\n4\r\n--XyZ--",
	       "<file|\xe2\x82\xac rate.txt>4</>=OK");
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"fallback.txt\"; "
	       "filename*=utf-8'en'%2Ftmp%2Fq.txt\r\n\r\n5\r\n--XyZ--",
	       "<file|/tmp/q.txt>5</>=OK");
	/* Undecodable extended values fall back to the plain one. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename*=latin1''%E9.txt; "
	       "filename=\"plain.txt\"\r\n\r\n6\r\n--XyZ--",
	       "<file|plain.txt>6</>=OK");
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''a%00b; "
	       "filename=\"plain.txt\"\r\n\r\n7\r\n--XyZ--",
	       "<file|plain.txt>7</>=OK");
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''bad%G1\r\n\r\n8\r\n--XyZ--",
	       "<file|(null)>8</>=OK");
}
END_TEST

START_TEST(header_forms)
{
	rng_state = 6;
	/* Bare-LF header lines, a folded header, other headers around it. */
	PARSES("--XyZ\r\nX-Other: 1\nContent-Disposition: form-data;\r\n\tname=\"file\"; filename=\"f\"\n\n"
	       "body\r\n--XyZ--",
	       "<file|f>body</>=OK");
	/* A header whose name merely starts with Content-Disposition does not count. */
	PARSES("--XyZ\r\nContent-Disposition-X: form-data; name=\"file\"\r\n\r\nz\r\n--XyZ--",
	       "<(null)|(null)>z</>=OK");
	/* A malformed parameter list stops at the bad parameter. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"open\r\n\r\nz\r\n--XyZ--",
	       "<file|(null)>z</>=OK");
}
END_TEST

START_TEST(partial_boundaries_in_body)
{
	rng_state = 7;
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n"
	       "\r\n--Xy\r\n--XyY\r\r\n\r\n-\r\n--\r\r--XyZ\r\n\r"
	       "\r\n--XyZ--",
	       "<file|(null)>\r\n--Xy\r\n--XyY\r\r\n\r\n-\r\n--\r\r--XyZ\r\n\r</>=OK");
	/* Delimiter text without the CRLF before it is body data. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n"
	       "x--XyZ--XyZ\n--XyZ"
	       "\r\n--XyZ--",
	       "<file|(null)>x--XyZ--XyZ\n--XyZ</>=OK");
}
END_TEST

START_TEST(binary_body)
{
	size_t n = 200000, hlen, tlen;
	static const char head[] = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n";
	static const char tail[] = "\r\n--XyZ--\r\n";
	char *body, *want;

	hlen = sizeof(head) - 1;
	tlen = sizeof(tail) - 1;
	body = malloc(hlen + n + tlen);
	want = malloc(n + 64);
	ck_assert_ptr_nonnull(body);
	ck_assert_ptr_nonnull(want);
	rng_state = 8;
	memcpy(body, head, hlen);
	for (size_t i = 0; i < n; i++) {
		/* Plenty of CR, LF and '-' so partial delimiter matches are common. */
		static const char alphabet[] = "\r\n-XyZ\0a";

		body[hlen + i] = alphabet[rng() % 8];
	}
	/* The body must not contain the delimiter itself. */
	for (size_t i = 0; i + 7 <= n; i++)
		if (memcmp(body + hlen + i, "\r\n--XyZ", 7) == 0)
			body[hlen + i] = 'a';
	memcpy(body + hlen + n, tail, tlen);
	memcpy(want, "<file|(null)>", 13);
	memcpy(want + 13, body + hlen, n);
	memcpy(want + 13 + n, "</>=OK", 7);
	{
		char *got = run(CT, body, hlen + n + tlen, RANDOM, NULL);
		size_t got_len = run_len;
		char *got1 = run(CT, body, hlen + n + tlen, BYTES, NULL);

		ck_assert_uint_eq(got_len, 13 + n + 6);
		ck_assert_uint_eq(run_len, 13 + n + 6);
		ck_assert_int_eq(memcmp(got, want, 13 + n + 7), 0);
		ck_assert_int_eq(memcmp(got1, want, 13 + n + 7), 0);
		free(got);
		free(got1);
	}
	free(body);
	free(want);
}
END_TEST

START_TEST(preamble_and_epilogue)
{
	rng_state = 9;
	PARSES("This is a preamble.\r\n--Xy\r\n-- XyZ\r\n"
	       "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nin\r\n"
	       "--XyZ--\r\nthe epilogue\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nno\r\n",
	       "<file|(null)>in</>=OK");
	/* Transport padding after a delimiter. */
	PARSES("--XyZ \t \r\nContent-Disposition: form-data; name=\"file\"\r\n\r\np\r\n--XyZ  \r\n\r\nq\r\n--XyZ--",
	       "<file|(null)>p</><(null)|(null)>q</>=OK");
	/* No parts at all. */
	PARSES("--XyZ--\r\n", "=OK");
}
END_TEST

START_TEST(truncated)
{
	rng_state = 10;
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\npartial body",
	       "<file|(null)>partial body=ERR");
	/* A held-back partial delimiter at the end is lost with the body. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--Xy",
	       "<file|(null)>abc=ERR");
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--XyZ",
	       "<file|(null)>abc=ERR");
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--XyZ-",
	       "<file|(null)>abc=ERR");
	PARSES("--XyZ\r\nContent-Disposition: form-da", "=ERR");
	PARSES("", "=ERR");
	PARSES("just some text\r\n", "=ERR");
}
END_TEST

START_TEST(malformed)
{
	rng_state = 11;
	/* Something other than "--" or CRLF right after a delimiter. */
	PARSES("--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--XyZZ\r\n--XyZ--",
	       "<file|(null)>abc=ERR");
	PARSES("--XyZ-x", "=ERR");
	PARSES("--XyZ\rx", "=ERR");
	PARSES("--XyZ\r\nContent-Disposition: form-data\r\nBad\0Header: 1\r\n\r\n\r\n--XyZ--", "=ERR");
}
END_TEST

START_TEST(oversized_headers)
{
	size_t n = 64 * 1024;
	char *body = malloc(n + 64);
	char *got;
	size_t len;

	ck_assert_ptr_nonnull(body);
	len = (size_t)sprintf(body, "--XyZ\r\nX-Pad: ");
	memset(body + len, 'p', n);
	len += n;
	memcpy(body + len, "\r\n\r\nx\r\n--XyZ--", 15);
	len += 14;
	got = run(CT, body, len, RANDOM, NULL);
	ck_assert_str_eq(got, "=ERR");
	free(got);
	/* Many short lines add up too. */
	len = (size_t)sprintf(body, "--XyZ\r\n");
	while (len < n)
		len += (size_t)sprintf(body + len, "A: b\r\n");
	got = run(CT, body, len, WHOLE, NULL);
	ck_assert_str_eq(got, "=ERR");
	free(got);
	free(body);
}
END_TEST

START_TEST(callback_stops)
{
	static const char body[] = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n"
				   "--XyZ\r\nContent-Disposition: form-data; name=\"two\"\r\n\r\ndef\r\n--XyZ--";
	struct rec stop2 = { HBUF_INIT, 2, 0, 0, 0 }, stopd = { HBUF_INIT, 0, 1, 0, 0 };
	char *got;

	got = run(CT, body, sizeof(body) - 1, WHOLE, &stop2);
	ck_assert_str_eq(got, "<file|(null)>abc</><two|(null)>=ERR");
	free(got);
	got = run(CT, body, sizeof(body) - 1, BYTES, &stopd);
	ck_assert_str_eq(got, "<file|(null)>a=ERR");
	free(got);
}
END_TEST

START_TEST(errors_are_sticky)
{
	struct rec r = { HBUF_INIT, 0, 0, 0, 0 };
	struct multipart_parser *p = multipart_new(CT, &rec_cb, &r);

	ck_assert_int_eq(multipart_feed(p, "--XyZ!", 6), -1);
	ck_assert_int_eq(multipart_feed(p, "\r\n\r\n--XyZ--", 11), -1);
	ck_assert_int_eq(multipart_finish(p), -1);
	ck_assert_str_eq(multipart_error(p), "malformed delimiter line");
	ck_assert_uint_eq(r.log.len, 0);
	multipart_free(p);
	hbuf_free(&r.log);
	multipart_free(NULL);
}
END_TEST

/* Random input, random chunking: never a crash, and the outcome never
 * depends on how the bytes were split. */
START_TEST(garbage)
{
	static const char *const pieces[] = {
		"--XyZ", "\r\n", "\r", "\n", "--", "-", "Content-Disposition: form-data; name=\"file\"",
		"; filename=\"", "\"", "\\", "filename*=UTF-8''%41", ";", " ", "x", "\0", "\xff", ":",
	};
	char body[512];

	rng_state = 12;
	for (int iter = 0; iter < 3000; iter++) {
		size_t len = 0;
		char *a, *b;
		size_t alen;

		while (len < sizeof(body) - 64 && rng() % 40) {
			const char *piece = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
			size_t pl = piece[0] ? strlen(piece) : 1;

			memcpy(body + len, piece, pl);
			len += pl;
		}
		a = run(CT, body, len, WHOLE, NULL);
		alen = run_len;
		b = run(CT, body, len, RANDOM, NULL);
		/* Checked without an assertion per iteration, for the reason rec_data gives. */
		if (alen != run_len || memcmp(a, b, alen) != 0)
			ck_abort_msg("iteration %d: the chunking changed the transcript", iter);
		free(a);
		free(b);
	}
}
END_TEST

/* ---- Accept-Encoding ------------------------------------------------------- */

START_TEST(accept_encoding)
{
	static const struct {
		const char *header;
		int forced;
		enum files_encoding want;
	} cases[] = {
		{ NULL, 0, FILES_ENC_IDENTITY },
		{ "", 0, FILES_ENC_IDENTITY },
		{ "gzip", 0, FILES_ENC_GZIP },
		{ "GZIP", 0, FILES_ENC_GZIP },
		{ "gzip, deflate", 0, FILES_ENC_GZIP },
		{ "deflate, gzip", 0, FILES_ENC_GZIP },
		{ "br", 0, FILES_ENC_IDENTITY },
		{ "deflate, br;q=1.0", 0, FILES_ENC_IDENTITY },
		{ "gzip;q=0", 0, FILES_ENC_IDENTITY },
		{ "gzip;q=0.5, identity", 0, FILES_ENC_IDENTITY },
		{ "identity;q=0.4, gzip;q=0.5", 0, FILES_ENC_GZIP },
		{ "gzip;q=0.5, identity;q=0.5", 0, FILES_ENC_GZIP },
		{ "identity;q=0.5, gzip;q=0.5", 0, FILES_ENC_IDENTITY },
		{ "identity;q=0", 0, FILES_ENC_REFUSED },
		{ "identity;Q=0.000", 0, FILES_ENC_REFUSED },
		{ "identity;q=0, gzip", 0, FILES_ENC_GZIP },
		{ "br, identity;q=0", 0, FILES_ENC_REFUSED },
		{ "*;q=0", 0, FILES_ENC_REFUSED },
		{ "*;q=0, gzip", 0, FILES_ENC_GZIP },
		{ "*;q=0, identity", 0, FILES_ENC_IDENTITY },
		{ "*;q=0, identity;q=0.1, br", 0, FILES_ENC_IDENTITY },
		{ "*", 0, FILES_ENC_IDENTITY },
		{ "*, identity;q=0", 0, FILES_ENC_GZIP },
		{ "*, identity;q=0, gzip;q=0", 0, FILES_ENC_REFUSED },
		{ "gzip;q=bogus", 0, FILES_ENC_GZIP },
		{ "  gzip ; q=0.8 ,identity;q=0.9", 0, FILES_ENC_IDENTITY },
		{ ",,gzip,", 0, FILES_ENC_GZIP },
		{ "gzip;level=1;q=0", 0, FILES_ENC_IDENTITY },
		{ "x-gzip", 0, FILES_ENC_IDENTITY },
		/* Range or conditional requests: identity or nothing. */
		{ "gzip", 1, FILES_ENC_IDENTITY },
		{ "gzip, identity;q=0", 1, FILES_ENC_REFUSED },
		{ "*;q=0", 1, FILES_ENC_REFUSED },
		{ NULL, 1, FILES_ENC_IDENTITY },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum files_encoding got = files_choose_encoding(cases[i].header, cases[i].forced);

		ck_assert_msg(got == cases[i].want, "\"%s\" forced=%d: got %d, want %d",
			      cases[i].header ? cases[i].header : "(null)", cases[i].forced, got, cases[i].want);
	}
}
END_TEST

/* ---- Range ------------------------------------------------------------------ */

START_TEST(ranges)
{
	static const struct {
		const char *range;
		uint64_t size;
		enum files_range want;
		uint64_t start, len;
	} cases[] = {
		{ NULL, 10, FILES_RANGE_NONE, 0, 0 },
		{ "bytes=0-4", 10, FILES_RANGE_ONE, 0, 5 },
		{ "bytes=5-", 10, FILES_RANGE_ONE, 5, 5 },
		{ "bytes=9-9", 10, FILES_RANGE_ONE, 9, 1 },
		{ "bytes=3-100", 10, FILES_RANGE_ONE, 3, 7 },
		{ "bytes=-3", 10, FILES_RANGE_ONE, 7, 3 },
		{ "bytes=-30", 10, FILES_RANGE_ONE, 0, 10 },
		{ "bytes= 2 - 3 ", 10, FILES_RANGE_ONE, 2, 2 },
		{ "bytes=10-", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=10-20", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=0-", 0, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=-0", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=-5", 0, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=5-2", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=a-b", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=-", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=1", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "items=0-1", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=99999999999999999999-", 10, FILES_RANGE_UNSATISFIABLE, 0, 0 },
		{ "bytes=0-1,4-5", 10, FILES_RANGE_NONE, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t start = 77, len = 77;
		enum files_range got = files_parse_range(cases[i].range, cases[i].size, &start, &len);

		ck_assert_msg(got == cases[i].want, "\"%s\" size %llu: got %d, want %d",
			      cases[i].range ? cases[i].range : "(null)", (unsigned long long)cases[i].size, got,
			      cases[i].want);
		if (got == FILES_RANGE_ONE) {
			ck_assert_uint_eq(start, cases[i].start);
			ck_assert_uint_eq(len, cases[i].len);
		}
	}
}
END_TEST

/* ---- Content-Disposition ----------------------------------------------------- */

START_TEST(content_disposition)
{
	char out[256];

	ck_assert_int_eq(files_content_disposition("report.pdf", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "inline; filename=\"report.pdf\"");
	ck_assert_int_eq(files_content_disposition("a \"q\" \\b", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "inline; filename=\"a \\\"q\\\" \\\\b\"");
	ck_assert_int_eq(files_content_disposition("\xe2\x82\xac 1.txt", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "inline; filename*=UTF-8''%E2%82%AC%201.txt");
	/* A control character must not reach the header raw. */
	ck_assert_int_eq(files_content_disposition("a\r\nb", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "inline; filename*=UTF-8''a%0D%0Ab");
	ck_assert_int_eq(files_content_disposition("long-enough-name", out, 20), -1);
}
END_TEST

static Suite *multipart_suite(void)
{
	Suite *s = suite_create("envd-multipart");
	TCase *tc = tcase_create("parser");

	tcase_add_test(tc, one_part);
	tcase_add_test(tc, several_parts);
	tcase_add_test(tc, empty_part_and_no_headers);
	tcase_add_test(tc, boundary_forms);
	tcase_add_test(tc, bad_content_types);
	tcase_add_test(tc, filenames);
	tcase_add_test(tc, header_forms);
	tcase_add_test(tc, partial_boundaries_in_body);
	tcase_add_test(tc, preamble_and_epilogue);
	tcase_add_test(tc, truncated);
	tcase_add_test(tc, malformed);
	tcase_add_test(tc, oversized_headers);
	tcase_add_test(tc, callback_stops);
	tcase_add_test(tc, errors_are_sticky);
	suite_add_tcase(s, tc);

	/*
	 * 200 kB fed byte by byte, and 3,000 random bodies parsed twice: the
	 * cases whose cost grows with a slow machine (valgrind on two busy CPUs
	 * took them past Check's 4 s default). Their own time budget, which
	 * Check still scales by CK_TIMEOUT_MULTIPLIER.
	 */
	tc = tcase_create("bulk");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, binary_body);
	tcase_add_test(tc, garbage);
	suite_add_tcase(s, tc);

	tc = tcase_create("files_headers");
	tcase_add_test(tc, accept_encoding);
	tcase_add_test(tc, ranges);
	tcase_add_test(tc, content_disposition);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(multipart_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
