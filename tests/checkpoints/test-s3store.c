/*
 * The s3:// blob store against a real S3-compatible server (s3rver, started
 * here by s3-server.mjs, which also verifies every request's SigV4 signature).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "checkpoint/blobstore.h"
#include "checkpoint/s3list.h"
#include "checkpoint/seal.h"
#include "helpers.h"

#define BUCKET "hangar-test"
#define AKID "S3RVER" /* the only access key id s3rver knows */
#define PART (5u << 20)

static const char secret[] = "t3st-s3cret-Zq81vLmN0pW2xY4kR7sT9uV";

struct server {
	pid_t pid;
	int port;
	char data[4200];
};

static char *dir;
static hangar_ctx *ctx;
static struct blobstore *bs;
static struct server srv;
static char logged[1 << 16];

static void log_fn(int level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	strncat(logged, msg, sizeof(logged) - strlen(logged) - 2);
	strcat(logged, "\n");
}

/* Starts s3-server.mjs on data and waits (10 s at most) for its READY line. */
static void server_start(struct server *s)
{
	const char *node = getenv("NODE"), *script = getenv("S3_SERVER");
	int out[2];
	char line[64] = "";
	size_t n = 0;
	struct timespec t0;

	ck_assert_msg(node && script, "NODE and S3_SERVER must be set (meson test sets them)");
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	s->pid = fork();
	ck_assert_int_ge(s->pid, 0);
	if (s->pid == 0) {
		dup2(out[1], 1);
		setenv("S3_TEST_SECRET", secret, 1);
		execl(node, node, script, s->data, BUCKET, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!strchr(line, '\n')) {
		struct pollfd p = { .fd = out[0], .events = POLLIN };
		struct timespec t;
		long left;
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = 30000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		ck_assert_msg(left > 0, "s3-server.mjs did not report READY within 30 s (is `npm ci --prefix "
					"tests/checkpoints` done?)");
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		r = read(out[0], line + n, sizeof(line) - 1 - n);
		ck_assert_msg(r > 0, "s3-server.mjs exited before it was ready");
		n += (size_t)r;
		line[n] = '\0';
	}
	close(out[0]);
	ck_assert_int_eq(sscanf(line, "READY %d", &s->port), 1);
}

static void server_kill(struct server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = 0;
	}
}

static void set_endpoint(hangar_ctx *c, int port)
{
	char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	must(hangar_ctx_set(c, "HANGAR_S3_ENDPOINT", url), "endpoint");
}

static struct blobstore *open_store(hangar_ctx *c, const char *url)
{
	struct blobstore *b;

	must(blobstore_open(&b, c, url), "open");
	must(blobstore_s3_set_part_size(b, PART), "part size");
	return b;
}

static void setup(void)
{
	dir = temp_dir();
	snprintf(srv.data, sizeof(srv.data), "%s/s3", dir);
	server_start(&srv);
	ctx = test_ctx(dir);
	logged[0] = '\0';
	hangar_ctx_set_log(ctx, HANGAR_LOG_DEBUG, log_fn, NULL);
	set_endpoint(ctx, srv.port);
	must(hangar_ctx_set(ctx, "HANGAR_S3_ACCESS_KEY_ID", AKID), "akid");
	must(hangar_ctx_set(ctx, "HANGAR_S3_SECRET_ACCESS_KEY", secret), "secret");
	must(hangar_ctx_set(ctx, "HANGAR_REQUEST_TIMEOUT_SECONDS", "30"), "timeout");
	bs = open_store(ctx, "s3://" BUCKET "/checkpoints/v1");
}

static void teardown(void)
{
	blobstore_free(bs);
	hangar_ctx_unref(ctx);
	server_kill(&srv);
	rm_tree(dir);
	free(dir);
	/* Whatever a test did, the secret reached no log line. */
	ck_assert_ptr_null(strstr(logged, secret));
}

/* The server's request log, or a control request (POST when body). */
static char *control(const char *path, int post)
{
	struct bytes b = { 0 };
	char url[256];
	CURL *c = curl_easy_init();

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", srv.port, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	if (post)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	{
		FILE *f = open_memstream((char **)&b.p, &b.n);

		curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
		ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
		fclose(f);
	}
	curl_easy_cleanup(c);
	return (char *)b.p;
}

static int count_lines(const char *log, const char *needle)
{
	int n = 0;

	for (const char *p = log; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* Aborted uploads leave no parts on the server. */
static void assert_no_pending_uploads(void)
{
	char *n = control("/-/uploads", 0);

	ck_assert_str_eq(n, "0\n");
	free(n);
}

static void put(struct blobstore *b, const char *name, const unsigned char *data, size_t n)
{
	struct blob_writer *w;

	must(blob_write_begin(&w, b, name), "begin");
	for (size_t off = 0; off < n; off += 1000000)
		must(blob_write(w, data + off, n - off < 1000000 ? n - off : 1000000), "write");
	must(blob_write_commit(w), "commit");
}

static void expect_blob(struct blobstore *b, const char *name, const unsigned char *data, size_t n)
{
	struct bytes got = { 0 };

	must(blob_read(b, name, bytes_sink, &got), "read");
	ck_assert_uint_eq(got.n, n);
	ck_assert(n == 0 || memcmp(got.p, data, n) == 0);
	bytes_free(&got);
}

static void assert_no_secret(void)
{
	ck_assert_ptr_null(strstr(hangar_error_last()->message, secret));
	ck_assert_ptr_null(strstr(hangar_error_last()->message, "Zq81vLmN0"));
}

START_TEST(single_put_round_trip)
{
	unsigned char *data = pattern(PART, 1);
	char *log;

	ck_assert_int_eq(blob_exists(bs, "small"), 0);
	put(bs, "small", data, 1000);
	put(bs, "exactly-one-part", data, PART);
	put(bs, "empty", data, 0);
	ck_assert_int_eq(blob_exists(bs, "small"), 1);
	expect_blob(bs, "small", data, 1000);
	expect_blob(bs, "exactly-one-part", data, PART);
	expect_blob(bs, "empty", data, 0);
	log = control("/-/log", 0);
	/* Path-style, under the prefix, one signed PUT each; no multipart upload. */
	ck_assert_ptr_nonnull(strstr(log, "PUT /" BUCKET "/checkpoints/v1/small 200"));
	ck_assert_ptr_nonnull(strstr(log, "PUT /" BUCKET "/checkpoints/v1/exactly-one-part 200"));
	ck_assert_int_eq(count_lines(log, "?uploads="), 0);
	ck_assert_int_eq(count_lines(log, " 403"), 0);
	free(log);
	free(data);
}
END_TEST

START_TEST(multipart_round_trip)
{
	size_t n = 2 * PART + 12345;
	unsigned char *data = pattern(n, 2);
	char *log;

	put(bs, "big", data, n);
	expect_blob(bs, "big", data, n);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "POST /" BUCKET "/checkpoints/v1/big?uploads= 200"), 1);
	ck_assert_int_eq(count_lines(log, "PUT /" BUCKET "/checkpoints/v1/big?partNumber="), 3);
	ck_assert_int_eq(count_lines(log, "&uploadId="), 3);
	ck_assert_int_eq(count_lines(log, " 403"), 0);
	ck_assert_ptr_nonnull(strstr(log, "POST /" BUCKET "/checkpoints/v1/big?uploadId="));
	free(log);
	assert_no_pending_uploads();
	free(data);
}
END_TEST

/* A part the server fails: the upload is aborted, no object appears, and the
 * object that was there keeps its bytes. */
START_TEST(failed_part_aborts)
{
	size_t n = 3 * PART + 10;
	unsigned char *old = pattern(777, 3), *data = pattern(n, 4);
	struct blob_writer *w;
	char *log;
	int rc = 0;

	put(bs, "cp", old, 777);
	free(control("/-/fail-part?n=2", 1));
	must(blob_write_begin(&w, bs, "cp"), "begin");
	for (size_t off = 0; off < n && rc == 0; off += 1000000)
		rc = blob_write(w, data + off, n - off < 1000000 ? n - off : 1000000);
	ck_assert_int_eq(rc, HANGAR_EUNAVAILABLE);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HTTP 500"));
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "InternalError"));
	ck_assert_int_eq(hangar_error_last()->http_status, 500);
	assert_no_secret();
	blob_write_abort(w);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/cp?uploadId="), 1);
	ck_assert_ptr_nonnull(strstr(log, " 204"));
	ck_assert_int_eq(count_lines(log, "cp?uploadId="), 1); /* never completed */
	free(log);
	assert_no_pending_uploads();
	expect_blob(bs, "cp", old, 777);
	/* The last part, sent by commit itself: commit aborts. */
	free(control("/-/fail-part?n=2", 1));
	must(blob_write_begin(&w, bs, "cp2"), "begin");
	must(blob_write(w, data, PART + 10), "write");
	ck_assert_int_eq(blob_write_commit(w), HANGAR_EUNAVAILABLE);
	assert_no_secret();
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/cp2?uploadId="), 1);
	free(log);
	ck_assert_int_eq(blob_exists(bs, "cp2"), 0);
	assert_no_pending_uploads();
	free(old);
	free(data);
}
END_TEST

START_TEST(caller_abort_mid_upload)
{
	unsigned char *data = pattern(2 * PART + 5, 5);
	struct blob_writer *w;
	char *log;

	must(blob_write_begin(&w, bs, "half"), "begin");
	must(blob_write(w, data, 2 * PART + 5), "write"); /* two parts went up */
	blob_write_abort(w);
	ck_assert_int_eq(blob_exists(bs, "half"), 0);
	assert_no_pending_uploads();
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "PUT /" BUCKET "/checkpoints/v1/half?partNumber="), 2);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/half?uploadId="), 1);
	free(log);
	/* Aborting before anything went up sends nothing. */
	must(blob_write_begin(&w, bs, "nothing"), "begin");
	must(blob_write(w, data, 100), "write");
	blob_write_abort(w);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "nothing"), 0);
	free(log);
	free(data);
}
END_TEST

/* The server dies mid-upload: the write fails, and once a server is back on
 * the same data, there is no object, and the previous one is whole. */
START_TEST(server_killed_mid_upload)
{
	size_t n = 3 * PART;
	unsigned char *old = pattern(4000, 6), *data = pattern(n, 7);
	struct blob_writer *w;
	struct blobstore *again;
	int rc = 0;

	put(bs, "cp", old, 4000);
	must(blob_write_begin(&w, bs, "cp"), "begin");
	must(blob_write(w, data, PART + 1), "write"); /* part 1 went up */
	server_kill(&srv);
	for (size_t off = PART + 1; off < n && rc == 0; off += 1000000)
		rc = blob_write(w, data + off, n - off < 1000000 ? n - off : 1000000);
	if (rc == 0)
		rc = blob_write_commit(w);
	else
		blob_write_abort(w);
	ck_assert_int_eq(rc, HANGAR_EUNAVAILABLE);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "s3 store s3://" BUCKET "/checkpoints/v1"));
	assert_no_secret();
	/* The abort could not reach the server either: said in the log. */
	ck_assert_ptr_nonnull(strstr(logged, "unfinished upload"));
	server_start(&srv);
	set_endpoint(ctx, srv.port);
	again = open_store(ctx, "s3://" BUCKET "/checkpoints/v1");
	expect_blob(again, "cp", old, 4000);
	blobstore_free(again);
	free(old);
	free(data);
}
END_TEST

START_TEST(wrong_secret_refused)
{
	hangar_ctx *c = test_ctx(dir);
	struct blobstore *b;
	struct blob_writer *w;
	struct bytes got = { 0 };
	char other[] = "an-entirely-different-secret-0987654";
	char *log;

	hangar_ctx_set_log(c, HANGAR_LOG_DEBUG, log_fn, NULL);
	set_endpoint(c, srv.port);
	must(hangar_ctx_set(c, "HANGAR_S3_ACCESS_KEY_ID", AKID), "akid");
	must(hangar_ctx_set(c, "HANGAR_S3_SECRET_ACCESS_KEY", other), "secret");
	b = open_store(c, "s3://" BUCKET "/checkpoints/v1");
	must(blob_write_begin(&w, b, "x"), "begin");
	must(blob_write(w, "abc", 3), "write");
	ck_assert_int_eq(blob_write_commit(w), HANGAR_EREFUSED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "SignatureDoesNotMatch"));
	ck_assert_str_eq(hangar_error_last()->provider_code, "SignatureDoesNotMatch");
	ck_assert_ptr_null(strstr(hangar_error_last()->message, other));
	ck_assert_int_eq(blob_read(b, "x", bytes_sink, &got), HANGAR_EREFUSED);
	ck_assert_uint_eq(got.n, 0);
	ck_assert_ptr_null(strstr(hangar_error_last()->message, other));
	ck_assert_ptr_null(strstr(logged, other));
	log = control("/-/log", 0);
	ck_assert_ptr_nonnull(strstr(log, "PUT /" BUCKET "/checkpoints/v1/x 403"));
	free(log);
	ck_assert_int_eq(blob_exists(bs, "x"), 0);
	blobstore_free(b);
	hangar_ctx_unref(c);
}
END_TEST

START_TEST(missing_and_delete)
{
	struct bytes got = { 0 };
	unsigned char *data = pattern(10, 8);

	ck_assert_int_eq(blob_read(bs, "absent", bytes_sink, &got), HANGAR_ENOTFOUND);
	ck_assert_uint_eq(got.n, 0); /* the error document is not handed on as data */
	ck_assert_int_eq(blob_delete(bs, "absent"), HANGAR_ENOTFOUND);
	put(bs, "cp", data, 10);
	must(blob_delete(bs, "cp"), "delete");
	ck_assert_int_eq(blob_exists(bs, "cp"), 0);
	free(data);
}
END_TEST

START_TEST(settings_checked)
{
	hangar_ctx *c = test_ctx(dir);
	struct blobstore *b;

	ck_assert_int_eq(blobstore_open(&b, c, "s3://" BUCKET "/p"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_S3_ENDPOINT"));
	set_endpoint(c, srv.port);
	ck_assert_int_eq(blobstore_open(&b, c, "s3://" BUCKET "/p"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_S3_ACCESS_KEY_ID"));
	must(hangar_ctx_set(c, "HANGAR_S3_ACCESS_KEY_ID", AKID), "akid");
	ck_assert_int_eq(blobstore_open(&b, c, "s3://" BUCKET "/p"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_S3_SECRET_ACCESS_KEY"));
	must(hangar_ctx_set(c, "HANGAR_S3_SECRET_ACCESS_KEY", secret), "secret");
	must(blobstore_open(&b, c, "s3://" BUCKET "/p"), "open");
	ck_assert_ptr_null(strstr(blobstore_url(b), secret));
	ck_assert_int_eq(blobstore_s3_set_part_size(b, PART - 1), HANGAR_EINVAL);
	blobstore_free(b);
	/* Through HANGAR_CHECKPOINT_STORE too. */
	must(hangar_ctx_set(c, "HANGAR_CHECKPOINT_STORE", "s3://" BUCKET "/from-setting"), "store");
	must(blobstore_open(&b, c, NULL), "open from setting");
	ck_assert_str_eq(blobstore_url(b), "s3://" BUCKET "/from-setting");
	blobstore_free(b);
	hangar_ctx_unref(c);
}
END_TEST

static int to_blob(void *payload, const void *data, size_t len)
{
	return blob_write(payload, data, len);
}

static int to_reader(void *payload, const void *data, size_t len)
{
	return seal_reader_feed(payload, data, len);
}

/* A sealed stream larger than a part, through the store and back. */
START_TEST(sealed_through_s3)
{
	size_t n = PART + 3 * SEAL_CHUNK + 11;
	unsigned char *data = pattern(n, 9);
	struct seal_keyring kr = { 0 };
	struct blob_writer *w;
	struct seal_writer *sw;
	struct seal_reader *sr;
	struct bytes got = { 0 };

	must(seal_keyring_add(&kr, "s3 key", 6), "key");
	must(blob_write_begin(&w, bs, "sealed"), "begin");
	must(seal_writer_new(&sw, &kr, "sealed", "s", to_blob, w), "seal");
	must(seal_writer_write(sw, data, n), "write");
	must(seal_writer_finish(sw), "finish");
	seal_writer_free(sw);
	must(blob_write_commit(w), "commit");
	must(seal_reader_new(&sr, &kr, "sealed", "s", bytes_sink, &got), "reader");
	must(blob_read(bs, "sealed", to_reader, sr), "read");
	must(seal_reader_finish(sr), "finish");
	seal_reader_free(sr);
	ck_assert_uint_eq(got.n, n);
	ck_assert(memcmp(got.p, data, n) == 0);
	bytes_free(&got);
	seal_keyring_wipe(&kr);
	free(data);
}
END_TEST

/* ---- the sweep of uploads killed writers left ---------------------------------- */

#define DAY 86400

/* A writer killed part-way: a child process begins a multipart upload of
 * name through a store at url, sends its first part and dies by SIGKILL. */
static void abandon(const char *url, const char *name)
{
	unsigned char *data = pattern(PART + 1, 10);
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct blobstore *b;
		struct blob_writer *w;

		if (blobstore_open(&b, ctx, url) || blobstore_s3_set_part_size(b, PART) ||
		    blob_write_begin(&w, b, name) || blob_write(w, data, PART + 1))
			_exit(1);
		raise(SIGKILL);
		_exit(2);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the writer failed before it was killed");
	free(data);
}

static int pending_uploads(void)
{
	char *n = control("/-/uploads", 0);
	int v = atoi(n);

	free(n);
	return v;
}

/* Backdates every unfinished upload of key by seconds. */
static void age(const char *key, long seconds)
{
	char path[512], *r;

	snprintf(path, sizeof(path), "/-/age-upload?key=%s&seconds=%ld", key, seconds);
	r = control(path, 1);
	ck_assert_msg(atoi(r) >= 1, "no upload of %s to backdate: %s", key, r);
	free(r);
}

/* A capture's write through a fresh store handle, which sweeps first. */
static void capture_like(const char *name, int page)
{
	struct blobstore *b = open_store(ctx, "s3://" BUCKET "/checkpoints/v1");

	if (page)
		must(blobstore_s3_set_sweep_page(b, page), "page");
	put(b, name, (const unsigned char *)"checkpoint", 10);
	expect_blob(b, name, (const unsigned char *)"checkpoint", 10);
	blobstore_free(b);
}

START_TEST(stale_upload_swept)
{
	char *log;

	abandon("s3://" BUCKET "/checkpoints/v1", "killed");
	abandon("s3://" BUCKET "/checkpoints/v1", "young");
	abandon("s3://" BUCKET "/checkpoints/v1/nested", "killed");
	abandon("s3://" BUCKET "/other", "killed");
	ck_assert_int_eq(pending_uploads(), 4);
	/* Less than a day old: kept. */
	capture_like("first", 0);
	ck_assert_int_eq(pending_uploads(), 4);
	log = control("/-/log", 0);
	ck_assert_int_ge(count_lines(log, "GET /" BUCKET "?delimiter=%2F&max-uploads=100&prefix=checkpoints%2Fv1%2F&uploads= 200"), 1);
	ck_assert_int_eq(count_lines(log, "DELETE "), 0);
	free(log);
	/* A day old: the next capture aborts the store's own, and only those;
	 * a nested store's and another prefix's are not its to touch. */
	age("checkpoints/v1/killed", DAY + 60);
	age("checkpoints/v1/young", DAY - 600);
	age("checkpoints/v1/nested/killed", 3 * DAY);
	age("other/killed", 3 * DAY);
	logged[0] = '\0';
	capture_like("second", 0);
	ck_assert_int_eq(pending_uploads(), 3);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/killed?uploadId="), 1);
	ck_assert_ptr_nonnull(strstr(strstr(log, "DELETE /" BUCKET "/checkpoints/v1/killed?uploadId="), " 204\n"));
	ck_assert_int_eq(count_lines(log, "DELETE "), 1);
	free(log);
	ck_assert_ptr_nonnull(strstr(logged, "aborted the upload of " BUCKET "/checkpoints/v1/killed"));
	ck_assert_ptr_null(strstr(logged, "sweep of unfinished uploads stopped"));
	/* Both blobs were kept whatever the sweep did. */
	expect_blob(bs, "first", (const unsigned char *)"checkpoint", 10);
	expect_blob(bs, "second", (const unsigned char *)"checkpoint", 10);
}
END_TEST

/* A writer whose own abort failed: the next capture in the process aborts
 * that upload at once, young as it is, and another store's sweep does not. */
START_TEST(failed_abort_retried)
{
	unsigned char *data = pattern(2 * PART + 5, 11);
	struct blob_writer *w;
	struct blobstore *other;
	char *log;

	free(control("/-/fail-abort?times=2", 1));
	must(blob_write_begin(&w, bs, "unlucky"), "begin");
	must(blob_write(w, data, 2 * PART + 5), "write");
	logged[0] = '\0';
	blob_write_abort(w);
	ck_assert_ptr_nonnull(strstr(logged, "HTTP 500"));
	ck_assert_ptr_nonnull(strstr(logged, "unfinished upload"));
	ck_assert_int_eq(pending_uploads(), 1);
	/* A store of another prefix is not the one to abort it. */
	other = open_store(ctx, "s3://" BUCKET "/other");
	put(other, "x", (const unsigned char *)"x", 1);
	blobstore_free(other);
	ck_assert_int_eq(pending_uploads(), 1);
	/* The next capture's sweep: the abort fails again (the second 500),
	 * and the capture goes on; the one after aborts it. */
	capture_like("next", 0);
	ck_assert_int_eq(pending_uploads(), 1);
	logged[0] = '\0';
	capture_like("after", 0);
	ck_assert_int_eq(pending_uploads(), 0);
	ck_assert_ptr_nonnull(strstr(logged, "whose own abort had failed"));
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/unlucky?uploadId="), 3);
	free(log);
	/* Once aborted it is forgotten: a later sweep sends nothing for it. */
	capture_like("last", 0);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/unlucky?uploadId="), 3);
	free(log);
	free(data);
}
END_TEST

/* More uploads than one page: the sweep follows the markers to the end.
 * Nested stores' uploads, however many, are one entry each (a common
 * prefix), and a page ending on one goes on after all under it. */
START_TEST(stale_uploads_paged)
{
	char name[16], key[64], *log;

	/* Each writer sweeps too: backdated only once all were killed. */
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "paged-%d", i);
		abandon("s3://" BUCKET "/checkpoints/v1", name);
	}
	abandon("s3://" BUCKET "/checkpoints/v1", "paged-young");
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		abandon("s3://" BUCKET "/checkpoints/v1/a-nested", name);
		abandon("s3://" BUCKET "/checkpoints/v1/b-nested", name);
	}
	ck_assert_int_eq(pending_uploads(), 12);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "checkpoints/v1/paged-%d", i);
		age(key, 2 * DAY);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "checkpoints/v1/a-nested/n%d", i);
		age(key, 2 * DAY);
		snprintf(key, sizeof(key), "checkpoints/v1/b-nested/n%d", i);
		age(key, 2 * DAY);
	}
	capture_like("after", 2);
	ck_assert_int_eq(pending_uploads(), 7);
	log = control("/-/log", 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/paged-"), 5);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/paged-young"), 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/a-nested/"), 0);
	ck_assert_int_eq(count_lines(log, "DELETE /" BUCKET "/checkpoints/v1/b-nested/"), 0);
	/* Four pages of two entries: the two common prefixes, then the six
	 * uploads, the last holding the young one; the killed writers' own
	 * sweeps asked for pages of 100. */
	ck_assert_int_eq(count_lines(log, "max-uploads=2&"), 4);
	ck_assert_int_eq(count_lines(log, "GET /" BUCKET "?delimiter=%2F&max-uploads=2&prefix=checkpoints%2Fv1%2F&uploads= 200"), 1);
	/* After the page ending on a common prefix: its key, no upload id. */
	ck_assert_int_eq(count_lines(log, "GET /" BUCKET "?delimiter=%2F&key-marker=checkpoints%2Fv1%2Fb-nested%2F&max-uploads=2&prefix="), 1);
	ck_assert_int_eq(count_lines(log, "GET /" BUCKET "?delimiter=%2F&key-marker=checkpoints%2Fv1%2Fpaged-"), 2);
	ck_assert_int_eq(count_lines(log, "&upload-id-marker="), 2);
	free(log);
}
END_TEST

/* A listing that is not one: the sweep stops, aborts nothing, and the
 * capture is stored all the same. */
START_TEST(hostile_listing_aborts_nothing)
{
	static const struct {
		const char *kind, *why;
		int page;
	} cases[] = {
		{ "truncated", "ends before the listing does", 0 },
		{ "oversized", "listing the unfinished uploads: the listing is larger than", 0 },
		{ "nul", "NUL", 0 },
		{ "utf8", "not UTF-8", 0 },
		{ "types", "IsTruncated is neither true nor false", 0 },
		{ "garbage", "text before the document", 0 },
		{ "extra", "more uploads than asked for", 1 },
		{ "loop", "starts where the last one did", 0 },
	};
	char path[128], name[32], *log;

	abandon("s3://" BUCKET "/checkpoints/v1", "victim");
	age("checkpoints/v1/victim", 2 * DAY);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), "/-/bad-list?kind=%s&times=%d", cases[i].kind, 20);
		free(control(path, 1));
		logged[0] = '\0';
		snprintf(name, sizeof(name), "hostile-%s", cases[i].kind);
		capture_like(name, cases[i].page);
		ck_assert_msg(strstr(logged, "sweep of unfinished uploads stopped"), "%s: no warning in:\n%s",
			      cases[i].kind, logged);
		ck_assert_msg(strstr(logged, cases[i].why), "%s: the warning does not say \"%s\":\n%s", cases[i].kind,
			      cases[i].why, logged);
		ck_assert_int_eq(pending_uploads(), 1);
		log = control("/-/log", 0);
		ck_assert_int_eq(count_lines(log, "DELETE "), 0);
		free(log);
		free(control("/-/bad-list?kind=none&times=0", 1));
	}
	/* The upload was a day old all along: an honest listing gets it swept. */
	capture_like("honest", 0);
	ck_assert_int_eq(pending_uploads(), 0);
}
END_TEST

/* ---- the listing parser on its own ------------------------------------------ */

#define LHEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult xmlns=\"x\">"
#define LUP(key, init) "<Upload><Key>" key "</Key><UploadId>id1</UploadId><Initiated>" init "</Initiated></Upload>"
#define LTAIL "</ListMultipartUploadsResult>"

static int parse(const char *doc, size_t len, size_t max, struct s3_listing *l, const char **why)
{
	return s3_listing_parse(l, doc, len, max, why);
}

START_TEST(listing_parsed)
{
	static const char doc[] = LHEAD "<Bucket>b</Bucket><NextKeyMarker>p/k&lt;2</NextKeyMarker>"
				  "<NextUploadIdMarker/><IsTruncated>true</IsTruncated>"
				  LUP("p/a&amp;b&#x41;&#66;&#x00e9;", "2026-12-02T14:40:13.123Z")
				  "<Upload><Initiator><ID>me</ID></Initiator><Key>p/c</Key><UploadId>id2</UploadId>"
				  "<Initiated>2024-02-29T00:00:00Z</Initiated></Upload>"
				  "<CommonPrefixes><Prefix>p/n/</Prefix></CommonPrefixes>" LTAIL "\n";
	struct tm tm = { .tm_year = 126, .tm_mon = 11, .tm_mday = 2, .tm_hour = 14, .tm_min = 40, .tm_sec = 13 };
	struct s3_listing l;
	const char *why;

	ck_assert_int_eq(parse(doc, sizeof(doc) - 1, 2, &l, &why), 0);
	ck_assert_uint_eq(l.n, 2);
	ck_assert_str_eq(l.u[0].key, "p/a&bAB\xc3\xa9");
	ck_assert_str_eq(l.u[0].id, "id1");
	ck_assert_int_eq(l.u[0].initiated, timegm(&tm));
	ck_assert_str_eq(l.u[1].key, "p/c");
	ck_assert_int_eq(l.truncated, 1);
	ck_assert_str_eq(l.next_key, "p/k<2");
	ck_assert_str_eq(l.next_id, "");
	s3_listing_free(&l);
	/* Asked for one: two is a hostile page. */
	ck_assert_int_eq(parse(doc, sizeof(doc) - 1, 1, &l, &why), -1);
	ck_assert_str_eq(why, "more uploads than asked for");
	ck_assert_ptr_null(l.u);
}
END_TEST

START_TEST(listing_refused)
{
	static const struct {
		const char *doc, *why;
	} bad[] = {
		{ "", "the answer ends before the listing does" },
		{ LHEAD "<IsTruncated>false</IsTruncated>", "the answer ends before the listing does" },
		{ "<Error><Code>x</Code></Error>", "not a ListMultipartUploadsResult" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LTAIL "<x/>", "data after the document" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LTAIL "junk", "data after the document" },
		{ LHEAD "<IsTruncated>false</IsTruncated><!-- c -->" LTAIL, "a comment, CDATA, DOCTYPE or processing instruction" },
		{ LHEAD "<IsTruncated>false</IsTruncated></Upload>" LTAIL, "a closing tag that matches no open one" },
		{ LHEAD LTAIL, "no IsTruncated" },
		{ LHEAD "<IsTruncated>1</IsTruncated>" LTAIL, "IsTruncated is neither true nor false" },
		{ LHEAD "<IsTruncated>false</IsTruncated><IsTruncated>false</IsTruncated>" LTAIL, "IsTruncated given twice" },
		{ LHEAD "<IsTruncated>true</IsTruncated>" LTAIL, "a truncated listing without NextKeyMarker" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k", "2026-02-30T00:00:00Z") LTAIL,
		  "Initiated is not an ISO 8601 UTC time" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k", "2026-12-02T14:40:13+01:00") LTAIL,
		  "Initiated is not an ISO 8601 UTC time" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k", " 2026-12-02T14:40:13Z") LTAIL,
		  "Initiated is not an ISO 8601 UTC time" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("<b>k</b>", "2026-12-02T14:40:13Z") LTAIL,
		  "an element inside a value" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("", "2026-12-02T14:40:13Z") LTAIL,
		  "an empty or overlong Key or UploadId" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k&#0;", "2026-12-02T14:40:13Z") LTAIL,
		  "a character reference to NUL, a surrogate or past Unicode" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k&#xd800;", "2026-12-02T14:40:13Z") LTAIL,
		  "a character reference to NUL, a surrogate or past Unicode" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k&nbsp;", "2026-12-02T14:40:13Z") LTAIL,
		  "a '&' that starts no entity" },
		{ LHEAD "<IsTruncated>false</IsTruncated><Upload><Key>k</Key><Key>k</Key><UploadId>i</UploadId>"
		  "<Initiated>2026-12-02T14:40:13Z</Initiated></Upload>" LTAIL, "a value given twice" },
		{ LHEAD "<IsTruncated>false</IsTruncated><Upload><Key>k</Key><UploadId>i</UploadId></Upload>" LTAIL,
		  "an Upload without its Key, UploadId or Initiated" },
		{ LHEAD "<IsTruncated>false</IsTruncated><Upload>text<Key>k</Key></Upload>" LTAIL,
		  "text among the elements of a listing" },
		{ LHEAD "<IsTruncated>false</IsTruncated><a><a><a><a><a><a><a><a></a></a></a></a></a></a></a></a>" LTAIL,
		  "elements nested too deep" },
		{ LHEAD "<IsTruncated a=b>false</IsTruncated>" LTAIL, "an attribute value without quotes" },
		{ LHEAD "<IsTruncated>false</IsTruncated>" LUP("k\xff", "2026-12-02T14:40:13Z") LTAIL,
		  "the answer is not UTF-8" },
	};
	struct s3_listing l;
	const char *why;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(parse(bad[i].doc, strlen(bad[i].doc), 10, &l, &why) == -1, "accepted: %s", bad[i].doc);
		ck_assert_msg(!strcmp(why, bad[i].why), "%s: said \"%s\", not \"%s\"", bad[i].doc, why, bad[i].why);
		ck_assert_ptr_null(l.u);
	}
	/* A NUL inside, which a C string cannot show. */
	{
		static const char doc[] = LHEAD "<IsTruncated>false</IsTruncated>" LUP("k\0x", "2026-12-02T14:40:13Z") LTAIL;

		ck_assert_int_eq(parse(doc, sizeof(doc) - 1, 10, &l, &why), -1);
		ck_assert_str_eq(why, "a NUL byte in the answer");
	}
}
END_TEST

static Suite *s3_suite(void)
{
	Suite *s = suite_create("s3store");
	TCase *tc = tcase_create("s3");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, single_put_round_trip);
	tcase_add_test(tc, multipart_round_trip);
	tcase_add_test(tc, failed_part_aborts);
	tcase_add_test(tc, caller_abort_mid_upload);
	tcase_add_test(tc, server_killed_mid_upload);
	tcase_add_test(tc, wrong_secret_refused);
	tcase_add_test(tc, missing_and_delete);
	tcase_add_test(tc, settings_checked);
	tcase_add_test(tc, sealed_through_s3);
	tcase_add_test(tc, stale_upload_swept);
	tcase_add_test(tc, failed_abort_retried);
	tcase_add_test(tc, stale_uploads_paged);
	tcase_add_test(tc, hostile_listing_aborts_nothing);
	suite_add_tcase(s, tc);
	tc = tcase_create("listing");
	tcase_add_test(tc, listing_parsed);
	tcase_add_test(tc, listing_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(s3_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
