/* Sealed checkpoint streams: round trips, and every way a stream must be refused. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/seal.h"
#include "helpers.h"

#define CH SEAL_CHUNK
#define AB crypto_secretstream_xchacha20poly1305_ABYTES
/* magic + header + binding chunk */
#define PREFIX (8 + crypto_secretstream_xchacha20poly1305_HEADERBYTES + AB)

static struct seal_keyring keys(const char *first, const char *second)
{
	struct seal_keyring kr = { 0 };

	must(seal_keyring_add(&kr, first, strlen(first)), "key");
	if (second)
		must(seal_keyring_add(&kr, second, strlen(second)), "key 2");
	return kr;
}

/* Seals data (written in pieces of step bytes) into out. */
static void seal(struct bytes *out, const struct seal_keyring *kr, const char *cp, const char *session,
		 const unsigned char *data, size_t n, size_t step)
{
	struct seal_writer *w;

	must(seal_writer_new(&w, kr, cp, session, bytes_sink, out), "writer");
	for (size_t off = 0; off < n; off += step)
		must(seal_writer_write(w, data + off, n - off < step ? n - off : step), "write");
	must(seal_writer_finish(w), "finish");
	seal_writer_free(w);
}

/* Opens sealed bytes (fed in pieces of step bytes); returns the first error or 0. */
static int open_sealed(struct bytes *out, const struct seal_keyring *kr, const char *cp, const char *session,
		       const unsigned char *sealed, size_t n, size_t step)
{
	struct seal_reader *r;
	int rc = 0;

	must(seal_reader_new(&r, kr, cp, session, bytes_sink, out), "reader");
	for (size_t off = 0; off < n && rc == 0; off += step)
		rc = seal_reader_feed(r, sealed + off, n - off < step ? n - off : step);
	if (rc == 0)
		rc = seal_reader_finish(r);
	seal_reader_free(r);
	return rc;
}

static const size_t sizes[] = { 0, 1, CH, CH + 1, 3 * CH, 5 * 1024 * 1024 + 123 };
static const size_t steps[] = { 1 << 20, 7, 65553, 4096 };

START_TEST(round_trip)
{
	size_t n = sizes[_i], chunks = n / CH + (n % CH || !n ? 1 : 0);
	struct seal_keyring kr = keys("round trip key", NULL);
	unsigned char *data = pattern(n, (unsigned)_i);

	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct bytes sealed = { 0 }, opened = { 0 };
		size_t step = n > CH * 4 && steps[s] < 4096 ? 4096 : steps[s];

		seal(&sealed, &kr, "cp-1", "session-1", data, n, step);
		/* The layout: a prefix, then full chunks and one FINAL chunk, each 17 bytes larger. */
		ck_assert_uint_eq(sealed.n, PREFIX + n + chunks * AB);
		if (n >= 16)
			ck_assert_ptr_null(memmem(sealed.p, sealed.n, data, 16));
		ck_assert_int_eq(open_sealed(&opened, &kr, "cp-1", "session-1", sealed.p, sealed.n, steps[(s + 1) % 4]),
				 0);
		ck_assert_uint_eq(opened.n, n);
		ck_assert(n == 0 || memcmp(opened.p, data, n) == 0);
		bytes_free(&sealed);
		bytes_free(&opened);
	}
	free(data);
}
END_TEST

START_TEST(two_seals_differ)
{
	struct seal_keyring kr = keys("k", NULL);
	struct bytes a = { 0 }, b = { 0 };
	unsigned char *data = pattern(1000, 1);

	seal(&a, &kr, "cp", "s", data, 1000, 1000);
	seal(&b, &kr, "cp", "s", data, 1000, 1000);
	ck_assert_uint_eq(a.n, b.n);
	ck_assert(memcmp(a.p, b.p, a.n) != 0); /* a fresh header each time */
	bytes_free(&a);
	bytes_free(&b);
	free(data);
}
END_TEST

/* Flipping any byte (magic, header, binding, any chunk) is refused, and no
 * plaintext of the altered chunk or after it reaches the consumer. */
START_TEST(tampered_byte_refused)
{
	size_t n = 3 * CH + 100;
	struct seal_keyring kr = keys("tamper key", NULL);
	unsigned char *data = pattern(n, 7);
	struct bytes sealed = { 0 };
	size_t at[] = { 0, 7, 8, 31, PREFIX - 1, PREFIX, PREFIX + 1000, PREFIX + CH + AB - 1, PREFIX + CH + AB,
			PREFIX + 2 * (CH + AB) + 5, 0 };

	seal(&sealed, &kr, "cp", "s", data, n, n);
	at[sizeof(at) / sizeof(at[0]) - 1] = sealed.n - 1;
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		struct bytes opened = { 0 };
		size_t good_chunks = at[i] < PREFIX ? 0 : (at[i] - PREFIX) / (CH + AB);
		int rc;

		sealed.p[at[i]] ^= 0x20;
		rc = open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 10000);
		sealed.p[at[i]] ^= 0x20;
		ck_assert_msg(rc == HANGAR_EREFUSED, "byte %zu: %d", at[i], rc);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "checkpoint cp refused"));
		ck_assert_msg(opened.n == good_chunks * CH, "byte %zu: %zu bytes handed on", at[i], opened.n);
		ck_assert(opened.n == 0 || memcmp(opened.p, data, opened.n) == 0);
		bytes_free(&opened);
	}
	bytes_free(&sealed);
	free(data);
}
END_TEST

START_TEST(truncated_refused)
{
	size_t n = 3 * CH + 100;
	struct seal_keyring kr = keys("truncation key", NULL);
	unsigned char *data = pattern(n, 8);
	struct bytes sealed = { 0 };
	size_t full = PREFIX + 3 * (CH + AB); /* the last chunk dropped, on a chunk boundary */
	size_t cuts[] = { 0, 1, 8, PREFIX - 1, PREFIX, PREFIX + 1, PREFIX + CH + AB, PREFIX + CH + 3, full,
			  full + 1, full + AB - 1, 0 };

	seal(&sealed, &kr, "cp", "s", data, n, n);
	cuts[sizeof(cuts) / sizeof(cuts[0]) - 1] = sealed.n - 1;
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		struct bytes opened = { 0 };
		int rc = open_sealed(&opened, &kr, "cp", "s", sealed.p, cuts[i], 4096);

		ck_assert_msg(rc == HANGAR_EREFUSED, "cut at %zu: %d", cuts[i], rc);
		ck_assert_msg(opened.n < n, "cut at %zu: everything handed on as good", cuts[i]);
		bytes_free(&opened);
	}
	/* Same for an empty checkpoint: its only chunk is the final one. */
	bytes_free(&sealed);
	seal(&sealed, &kr, "cp", "s", data, 0, 1);
	{
		struct bytes opened = { 0 };

		ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, PREFIX, 4096), HANGAR_EREFUSED);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "truncated"));
		ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), 0);
		bytes_free(&opened);
	}
	bytes_free(&sealed);
	free(data);
}
END_TEST

START_TEST(trailing_bytes_refused)
{
	struct seal_keyring kr = keys("k", NULL);
	unsigned char *data = pattern(CH + 1, 9);
	struct bytes sealed = { 0 }, opened = { 0 };

	/* After a short final chunk, an extra byte makes it a chunk that does not open. */
	seal(&sealed, &kr, "cp", "s", data, CH + 1, CH + 1);
	bytes_sink(&sealed, "x", 1);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_uint_eq(opened.n, CH);
	bytes_free(&sealed);
	bytes_free(&opened);
	/* After a full final chunk, anything more is refused as such. */
	seal(&sealed, &kr, "cp", "s", data, CH, CH);
	bytes_sink(&sealed, "x", 1);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "follow its final chunk"));
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

/* Data chunks swapped, or one chunk repeated: the stream's counter refuses both. */
START_TEST(reordered_chunks_refused)
{
	size_t n = 3 * CH + 10, c = CH + AB;
	struct seal_keyring kr = keys("k", NULL);
	unsigned char *data = pattern(n, 10), *tmp = malloc(c);
	struct bytes sealed = { 0 }, opened = { 0 };

	seal(&sealed, &kr, "cp", "s", data, n, n);
	memcpy(tmp, sealed.p + PREFIX, c);
	memcpy(sealed.p + PREFIX, sealed.p + PREFIX + c, c);
	memcpy(sealed.p + PREFIX + c, tmp, c);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_uint_eq(opened.n, 0);
	memcpy(sealed.p + PREFIX, tmp, c); /* chunk 0, then chunk 0 again */
	memcpy(sealed.p + PREFIX + c, tmp, c);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_uint_eq(opened.n, CH);
	free(tmp);
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

START_TEST(swapped_checkpoint_refused)
{
	struct seal_keyring kr = keys("k", NULL);
	unsigned char *data = pattern(1000, 11);
	struct bytes sealed = { 0 }, opened = { 0 };

	seal(&sealed, &kr, "cp-A", "session-1", data, 1000, 1000);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp-B", "session-1", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "another checkpoint"));
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp-A", "session-2", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	/* The ids are delimited: ("cp-A", "session-1") is not ("cp-As", "ession-1"). */
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp-As", "ession-1", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_uint_eq(opened.n, 0);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp-A", "session-1", sealed.p, sealed.n, 4096), 0);
	ck_assert_uint_eq(opened.n, 1000);
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

START_TEST(wrong_key_refused)
{
	struct seal_keyring kr = keys("the right key", NULL), wrong = keys("the wrong key", NULL);
	unsigned char *data = pattern(CH * 2, 12);
	struct bytes sealed = { 0 }, opened = { 0 };

	seal(&sealed, &kr, "cp", "s", data, CH * 2, CH * 2);
	ck_assert_int_eq(open_sealed(&opened, &wrong, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "does not open with the secret key"));
	ck_assert_uint_eq(opened.n, 0);
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

START_TEST(rotation)
{
	struct seal_keyring old = keys("old key", NULL), rotated = keys("new key", "old key"),
			    only_new = keys("new key", NULL);
	unsigned char *data = pattern(CH + 5, 13);
	struct bytes sealed = { 0 }, opened = { 0 }, resealed = { 0 };

	seal(&sealed, &old, "cp", "s", data, CH + 5, 999);
	ck_assert_int_eq(open_sealed(&opened, &only_new, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	ck_assert_int_eq(open_sealed(&opened, &rotated, "cp", "s", sealed.p, sealed.n, 4096), 0);
	ck_assert_uint_eq(opened.n, CH + 5);
	ck_assert(memcmp(opened.p, data, CH + 5) == 0);
	/* A rotated keyring seals with the new key only. */
	seal(&resealed, &rotated, "cp", "s", data, CH + 5, 999);
	bytes_free(&opened);
	ck_assert_int_eq(open_sealed(&opened, &only_new, "cp", "s", resealed.p, resealed.n, 4096), 0);
	ck_assert_int_eq(open_sealed(&opened, &old, "cp", "s", resealed.p, resealed.n, 4096), HANGAR_EREFUSED);
	bytes_free(&sealed);
	bytes_free(&resealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

/* The keys a context loads: HANGAR_SECRET_KEY first, previous keys after. */
START_TEST(rotation_through_settings)
{
	char *dir = temp_dir();
	hangar_ctx *ctx = test_ctx(dir);
	struct seal_keyring kr, old = keys("the old one", NULL);
	unsigned char *data = pattern(300, 14);
	struct bytes sealed = { 0 }, opened = { 0 };
	char path[4096];

	seal(&sealed, &old, "cp", "s", data, 300, 300);
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "the new one"), "key");
	must(seal_keyring_load(&kr, ctx), "load");
	ck_assert_int_eq(kr.n, 1);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), HANGAR_EREFUSED);
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY_PREVIOUS", "another,,the old one,"), "previous");
	must(seal_keyring_load(&kr, ctx), "load");
	ck_assert_int_eq(kr.n, 3);
	ck_assert_int_eq(open_sealed(&opened, &kr, "cp", "s", sealed.p, sealed.n, 4096), 0);
	ck_assert_uint_eq(opened.n, 300);
	/* A key set in the environment generates no key file. */
	snprintf(path, sizeof(path), "%s/%s", dir, SEAL_KEY_FILE);
	ck_assert_int_eq(access(path, F_OK), -1);
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY_PREVIOUS", "1,2,3,4,5,6,7,8,9"), "previous");
	ck_assert_int_eq(seal_keyring_load(&kr, ctx), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_SECRET_KEY_PREVIOUS"));
	seal_keyring_wipe(&kr);
	hangar_ctx_unref(ctx);
	rm_tree(dir);
	free(dir);
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

static char logged[8192];
static void log_fn(int level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	strncat(logged, msg, sizeof(logged) - strlen(logged) - 1);
}

START_TEST(generated_key_file)
{
	char *dir = temp_dir(), path[8192], state[4096];
	hangar_ctx *ctx;
	struct seal_keyring a, b;
	struct stat st;
	unsigned char *data = pattern(100, 15);
	struct bytes sealed = { 0 }, opened = { 0 };

	/* The state directory does not exist yet: it is created. */
	snprintf(state, sizeof(state), "%s/state", dir);
	ctx = test_ctx(state);
	logged[0] = '\0';
	hangar_ctx_set_log(ctx, HANGAR_LOG_DEBUG, log_fn, NULL);
	must(seal_keyring_load(&a, ctx), "load");
	ck_assert_ptr_nonnull(strstr(logged, "HANGAR_SECRET_KEY is unset"));
	snprintf(path, sizeof(path), "%s/%s", state, SEAL_KEY_FILE);
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, 65);
	/* Reused: a second load (another context too) opens what the first sealed. */
	hangar_ctx_unref(ctx);
	ctx = test_ctx(state);
	must(seal_keyring_load(&b, ctx), "reload");
	seal(&sealed, &a, "cp", "s", data, 100, 100);
	ck_assert_int_eq(open_sealed(&opened, &b, "cp", "s", sealed.p, sealed.n, 4096), 0);
	ck_assert_uint_eq(opened.n, 100);
	/* No temporary left behind. */
	{
		char cmd[8300];

		snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | grep -c '^\\.%s') = 0", state, SEAL_KEY_FILE);
		ck_assert_int_eq(system(cmd), 0);
	}
	/* Readable by others: refused, and nothing is regenerated over it. */
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(seal_keyring_load(&b, ctx), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "0644"));
	ck_assert_int_eq(chmod(path, 0640), 0);
	ck_assert_int_eq(seal_keyring_load(&b, ctx), HANGAR_ECONFIG);
	ck_assert_int_eq(chmod(path, 0600), 0);
	must(seal_keyring_load(&b, ctx), "0600 again");
	bytes_free(&opened);
	ck_assert_int_eq(open_sealed(&opened, &b, "cp", "s", sealed.p, sealed.n, 4096), 0);
	/* A symbolic link in its place is refused, not followed. */
	{
		char moved[4200];

		snprintf(moved, sizeof(moved), "%s/elsewhere", dir);
		ck_assert_int_eq(rename(path, moved), 0);
		ck_assert_int_eq(symlink(moved, path), 0);
		ck_assert_int_eq(seal_keyring_load(&b, ctx), HANGAR_ECONFIG);
		ck_assert_int_eq(unlink(path), 0);
	}
	/* A damaged key file is refused, not replaced. */
	{
		FILE *f = fopen(path, "w");

		ck_assert_ptr_nonnull(f);
		fputs("not a key\n", f);
		fclose(f);
		ck_assert_int_eq(chmod(path, 0600), 0);
		ck_assert_int_eq(seal_keyring_load(&b, ctx), HANGAR_ECONFIG);
		ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "damaged"));
	}
	seal_keyring_wipe(&a);
	seal_keyring_wipe(&b);
	hangar_ctx_unref(ctx);
	rm_tree(dir);
	free(dir);
	bytes_free(&sealed);
	bytes_free(&opened);
	free(data);
}
END_TEST

static int failing_sink(void *payload, const void *data, size_t len)
{
	(void)data;
	(void)len;
	if (++*(int *)payload >= 2)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "disk full (injected)");
	return 0;
}

START_TEST(sink_failure_propagates)
{
	struct seal_keyring kr = keys("k", NULL);
	unsigned char *data = pattern(3 * CH, 16);
	struct seal_writer *w;
	int calls = 0, rc;

	must(seal_writer_new(&w, &kr, "cp", "s", failing_sink, &calls), "writer");
	rc = seal_writer_write(w, data, 3 * CH);
	ck_assert_int_eq(rc, HANGAR_EOS);
	ck_assert_int_eq(seal_writer_finish(w), HANGAR_EINVAL);
	seal_writer_free(w);
	free(data);
}
END_TEST

START_TEST(bad_arguments)
{
	struct seal_keyring kr = keys("k", NULL), none = { 0 };
	struct seal_writer *w = (void *)1;
	struct seal_reader *r = (void *)1;
	struct bytes b = { 0 };
	char long_id[300];

	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	ck_assert_int_eq(seal_writer_new(&w, &kr, "", "s", bytes_sink, &b), HANGAR_EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_int_eq(seal_writer_new(&w, &kr, long_id, "s", bytes_sink, &b), HANGAR_EINVAL);
	ck_assert_int_eq(seal_writer_new(&w, &none, "cp", "s", bytes_sink, &b), HANGAR_EINVAL);
	ck_assert_int_eq(seal_reader_new(&r, &kr, NULL, "s", bytes_sink, &b), HANGAR_EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_uint_eq(b.n, 0);
}
END_TEST

static Suite *seal_suite(void)
{
	Suite *s = suite_create("seal");
	TCase *tc = tcase_create("streams");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, round_trip, 0, sizeof(sizes) / sizeof(sizes[0]));
	tcase_add_test(tc, two_seals_differ);
	suite_add_tcase(s, tc);

	tc = tcase_create("refused");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, tampered_byte_refused);
	tcase_add_test(tc, truncated_refused);
	tcase_add_test(tc, trailing_bytes_refused);
	tcase_add_test(tc, reordered_chunks_refused);
	tcase_add_test(tc, swapped_checkpoint_refused);
	tcase_add_test(tc, wrong_key_refused);
	tcase_add_test(tc, sink_failure_propagates);
	tcase_add_test(tc, bad_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("keys");
	tcase_add_test(tc, rotation);
	tcase_add_test(tc, rotation_through_settings);
	tcase_add_test(tc, generated_key_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(seal_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
