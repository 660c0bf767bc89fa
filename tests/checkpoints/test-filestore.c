/* The file:// blob store: atomic commits, nothing left by aborts, failures or crashes. */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/blobstore.h"
#include "checkpoint/seal.h"
#include "helpers.h"

static char *dir;
static char store_dir[4200];
static hangar_ctx *ctx;
static struct blobstore *bs;

static void setup(void)
{
	dir = temp_dir();
	ctx = test_ctx(dir);
	snprintf(store_dir, sizeof(store_dir), "%s/blobs", dir);
	{
		char url[4300];

		snprintf(url, sizeof(url), "file://%s", store_dir);
		must(blobstore_open(&bs, ctx, url), "open");
	}
}

static void teardown(void)
{
	blobstore_free(bs);
	hangar_ctx_unref(ctx);
	rm_tree(dir);
	free(dir);
}

/* The directory's entries, space-separated and sorted by readdir order. */
static int count_entries(const char *d, const char *with_prefix)
{
	DIR *dh = opendir(d);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(dh);
	while ((e = readdir(dh)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (!with_prefix || !strncmp(e->d_name, with_prefix, strlen(with_prefix))))
			n++;
	closedir(dh);
	return n;
}

static void put(const char *name, const unsigned char *data, size_t n)
{
	struct blob_writer *w;

	must(blob_write_begin(&w, bs, name), "begin");
	for (size_t off = 0; off < n; off += 100000)
		must(blob_write(w, data + off, n - off < 100000 ? n - off : 100000), "write");
	must(blob_write_commit(w), "commit");
}

static void expect_blob(const char *name, const unsigned char *data, size_t n)
{
	struct bytes got = { 0 };

	must(blob_read(bs, name, bytes_sink, &got), "read");
	ck_assert_uint_eq(got.n, n);
	ck_assert(n == 0 || memcmp(got.p, data, n) == 0);
	bytes_free(&got);
}

START_TEST(commit_is_atomic)
{
	unsigned char *data = pattern(300000, 1);
	struct blob_writer *w;
	struct bytes got = { 0 };

	must(blob_write_begin(&w, bs, "cp-1"), "begin");
	must(blob_write(w, data, 300000), "write");
	/* Written but not committed: not there for anyone. */
	ck_assert_int_eq(blob_exists(bs, "cp-1"), 0);
	ck_assert_int_eq(blob_read(bs, "cp-1", bytes_sink, &got), HANGAR_ENOTFOUND);
	ck_assert_int_eq(count_entries(store_dir, "cp-1"), 0);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	must(blob_write_commit(w), "commit");
	ck_assert_int_eq(blob_exists(bs, "cp-1"), 1);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	ck_assert_int_eq(count_entries(store_dir, "."), 0);
	expect_blob("cp-1", data, 300000);
	{
		struct stat st;
		char path[4400];

		snprintf(path, sizeof(path), "%s/cp-1", store_dir);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_uint_eq(st.st_mode & 0777, 0600);
	}
	/* An empty blob is a blob. */
	put("empty", data, 0);
	ck_assert_int_eq(blob_exists(bs, "empty"), 1);
	expect_blob("empty", data, 0);
	free(data);
}
END_TEST

START_TEST(abort_leaves_nothing)
{
	unsigned char *old = pattern(1000, 2), *data = pattern(200000, 3);
	struct blob_writer *w;

	put("cp", old, 1000);
	must(blob_write_begin(&w, bs, "cp"), "begin");
	must(blob_write(w, data, 200000), "write");
	blob_write_abort(w);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	expect_blob("cp", old, 1000);
	must(blob_write_begin(&w, bs, "new"), "begin");
	blob_write_abort(w);
	ck_assert_int_eq(blob_exists(bs, "new"), 0);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	/* A committed replacement replaces, whole. */
	put("cp", data, 200000);
	expect_blob("cp", data, 200000);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	free(old);
	free(data);
}
END_TEST

/* The file size limit makes write(2) fail with EFBIG part-way, like a full disk. */
START_TEST(failing_write_leaves_previous)
{
	unsigned char *old = pattern(4096, 4), *data = pattern(3 << 20, 5);
	struct rlimit rl = { 1 << 20, 1 << 20 };
	struct blob_writer *w;
	int rc = 0;

	put("cp", old, 4096);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
	must(blob_write_begin(&w, bs, "cp"), "begin");
	for (size_t off = 0; off < (3u << 20) && rc == 0; off += 65536)
		rc = blob_write(w, data + off, 65536);
	ck_assert_int_eq(rc, HANGAR_EOS);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "writing checkpoint cp"));
	/* A careless caller commits anyway: refused, and the temporary is gone. */
	ck_assert_int_eq(blob_write_commit(w), HANGAR_EINVAL);
	ck_assert_int_eq(count_entries(store_dir, NULL), 1);
	expect_blob("cp", old, 4096);
	free(old);
	free(data);
}
END_TEST

/* A real full disk: a 1 MiB tmpfs in a mount namespace of this test's own process. */
START_TEST(full_disk_leaves_previous)
{
	unsigned char *old = pattern(100000, 6), *data = pattern(3 << 20, 7);
	struct blob_writer *w;
	char tiny[4300], url[4400];
	struct blobstore *small;
	int rc = 0;

	snprintf(tiny, sizeof(tiny), "%s/tiny", dir);
	ck_assert_int_eq(mkdir(tiny, 0700), 0);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", tiny, "tmpfs", 0, "size=1m") < 0) {
		/* Without the privilege to mount, failing_write_leaves_previous covers the path. */
		fprintf(stderr, "full_disk_leaves_previous: cannot mount a tmpfs (%s); skipped\n", strerror(errno));
		return;
	}
	snprintf(url, sizeof(url), "file://%s/store", tiny);
	must(blobstore_open(&small, ctx, url), "open");
	{
		struct blob_writer *p;

		must(blob_write_begin(&p, small, "cp"), "begin");
		must(blob_write(p, old, 100000), "write");
		must(blob_write_commit(p), "commit");
	}
	must(blob_write_begin(&w, small, "cp"), "begin");
	for (size_t off = 0; off < (3u << 20) && rc == 0; off += 65536)
		rc = blob_write(w, data + off, 65536);
	ck_assert_int_eq(rc, HANGAR_EOS);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "No space left"));
	blob_write_abort(w);
	{
		char sd[4400];
		struct bytes got = { 0 };

		snprintf(sd, sizeof(sd), "%s/store", tiny);
		ck_assert_int_eq(count_entries(sd, NULL), 1);
		must(blob_read(small, "cp", bytes_sink, &got), "read");
		ck_assert_uint_eq(got.n, 100000);
		ck_assert(memcmp(got.p, old, 100000) == 0);
		bytes_free(&got);
	}
	blobstore_free(small);
	umount2(tiny, MNT_DETACH);
	free(old);
	free(data);
}
END_TEST

/* A writer that dies before committing leaves no blob, and the previous one whole. */
START_TEST(crash_before_commit)
{
	unsigned char *old = pattern(5000, 8), *data = pattern(500000, 9);
	pid_t pid;
	int status;

	put("cp", old, 5000);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct blob_writer *w;

		if (blob_write_begin(&w, bs, "cp") || blob_write(w, data, 500000))
			_exit(1);
		_exit(0); /* no commit, no abort: as if killed */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(count_entries(store_dir, "."), 1); /* its temporary, under a dot-name */
	expect_blob("cp", old, 5000);
	ck_assert_int_eq(blob_exists(bs, "cp"), 1);
	/* The next write sweeps what the dead writer left. */
	put("next", old, 5000);
	ck_assert_int_eq(count_entries(store_dir, "."), 0);
	expect_blob("cp", old, 5000);
	free(old);
	free(data);
}
END_TEST

/* Temporary files of live writers stay; of dead ones, or a day old and of unknown making, go. */
START_TEST(sweep_spares_live_writers)
{
	unsigned char *data = pattern(100, 12);
	struct blob_writer *live;
	char path[4400];
	struct timespec old[2] = { { time(NULL) - 2 * 86400, 0 }, { time(NULL) - 2 * 86400, 0 } };
	FILE *f;

	must(blob_write_begin(&live, bs, "in-progress"), "begin");
	must(blob_write(live, data, 100), "write");
	snprintf(path, sizeof(path), "%s/.old-format.0123456789abcdef.tmp", store_dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fclose(f);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);
	snprintf(path, sizeof(path), "%s/.fresh-format.0123456789abcdef.tmp", store_dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fclose(f);
	/* Another process's, of another machine: only its age could tell. */
	snprintf(path, sizeof(path), "%s/.elsewhere~bdeadbeef.n1.p1.s1.00000000.tmp", store_dir);
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fclose(f);
	put("other", data, 100);
	ck_assert_int_eq(count_entries(store_dir, ".old-format"), 0);
	ck_assert_int_eq(count_entries(store_dir, ".fresh-format"), 1);
	ck_assert_int_eq(count_entries(store_dir, ".elsewhere"), 1);
	ck_assert_int_eq(count_entries(store_dir, ".in-progress"), 1);
	must(blob_write_commit(live), "commit");
	ck_assert_int_eq(blob_exists(bs, "in-progress"), 1);
	free(data);
}
END_TEST

START_TEST(delete_and_exists)
{
	unsigned char *data = pattern(10, 10);

	ck_assert_int_eq(blob_exists(bs, "cp"), 0);
	ck_assert_int_eq(blob_delete(bs, "cp"), HANGAR_ENOTFOUND);
	put("cp", data, 10);
	ck_assert_int_eq(blob_exists(bs, "cp"), 1);
	must(blob_delete(bs, "cp"), "delete");
	ck_assert_int_eq(blob_exists(bs, "cp"), 0);
	ck_assert_int_eq(count_entries(store_dir, NULL), 0);
	free(data);
}
END_TEST

/* Names cannot leave the directory, reach a temporary, or go through a link. */
START_TEST(hostile_names)
{
	const char *bad[] = { "", ".", "..", "../x", "a/b", ".cp.0123.tmp", "/etc/passwd", "a b", "a\nb", NULL };
	struct blob_writer *w = (void *)1;
	struct bytes got = { 0 };
	char link_path[4400], name[200];

	for (int i = 0; i < 10; i++) {
		ck_assert_int_eq(blob_write_begin(&w, bs, bad[i]), HANGAR_EINVAL);
		ck_assert_ptr_null(w);
		ck_assert_int_eq(blob_read(bs, bad[i], bytes_sink, &got), HANGAR_EINVAL);
		ck_assert_int_eq(blob_delete(bs, bad[i]), HANGAR_EINVAL);
		ck_assert_int_eq(blob_exists(bs, bad[i]), HANGAR_EINVAL);
	}
	memset(name, 'a', 129);
	name[129] = '\0';
	ck_assert_int_eq(blob_exists(bs, name), HANGAR_EINVAL);
	name[128] = '\0';
	ck_assert_int_eq(blob_exists(bs, name), 0);
	/* A symbolic link planted under a blob's name is not followed. */
	snprintf(link_path, sizeof(link_path), "%s/planted", store_dir);
	ck_assert_int_eq(symlink("/etc/hostname", link_path), 0);
	ck_assert_int_eq(blob_exists(bs, "planted"), 0);
	ck_assert_int_ne(blob_read(bs, "planted", bytes_sink, &got), 0);
	ck_assert_uint_eq(got.n, 0);
}
END_TEST

START_TEST(store_urls)
{
	struct blobstore *s;
	char expect[4300];

	ck_assert_int_eq(blobstore_open(&s, ctx, "file://relative/dir"), HANGAR_ECONFIG);
	ck_assert_ptr_null(s);
	ck_assert_int_eq(blobstore_open(&s, ctx, "ftp://host/x"), HANGAR_ECONFIG);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_CHECKPOINT_STORE"));
	ck_assert_int_eq(blobstore_open(&s, ctx, "s3://Bad_Bucket/x"), HANGAR_ECONFIG);
	ck_assert_int_eq(blobstore_open(&s, ctx, "s3://bucket/../x"), HANGAR_ECONFIG);
	/* The default: checkpoints/ in the state directory. */
	must(blobstore_open(&s, ctx, NULL), "default");
	snprintf(expect, sizeof(expect), "file://%s/checkpoints", dir);
	ck_assert_str_eq(blobstore_url(s), expect);
	blobstore_free(s);
	/* The setting. */
	snprintf(expect, sizeof(expect), "file://%s/elsewhere", dir);
	must(hangar_ctx_set(ctx, "HANGAR_CHECKPOINT_STORE", expect), "set");
	must(blobstore_open(&s, ctx, ""), "setting");
	ck_assert_str_eq(blobstore_url(s), expect);
	ck_assert_int_eq(access(expect + 7, F_OK), 0);
	blobstore_free(s);
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

/* A sealed stream through the store, and a blob swapped for another checkpoint's. */
START_TEST(sealed_through_store)
{
	size_t n = 2 * SEAL_CHUNK + 77;
	unsigned char *data = pattern(n, 11);
	struct seal_keyring kr = { 0 };
	struct blob_writer *w;
	struct seal_writer *sw;
	struct seal_reader *sr;
	struct bytes got = { 0 };
	const char *ids[] = { "cp-a", "cp-b" };

	must(seal_keyring_add(&kr, "store key", 9), "key");
	for (int i = 0; i < 2; i++) {
		must(blob_write_begin(&w, bs, ids[i]), "begin");
		must(seal_writer_new(&sw, &kr, ids[i], "s", to_blob, w), "seal");
		must(seal_writer_write(sw, data, n), "write");
		must(seal_writer_finish(sw), "finish");
		seal_writer_free(sw);
		must(blob_write_commit(w), "commit");
	}
	must(seal_reader_new(&sr, &kr, "cp-a", "s", bytes_sink, &got), "reader");
	must(blob_read(bs, "cp-a", to_reader, sr), "read");
	must(seal_reader_finish(sr), "finish");
	seal_reader_free(sr);
	ck_assert_uint_eq(got.n, n);
	ck_assert(memcmp(got.p, data, n) == 0);
	bytes_free(&got);
	/* cp-b's file moved over cp-a's: refused. */
	{
		char a[4400], b[4400];

		snprintf(a, sizeof(a), "%s/cp-a", store_dir);
		snprintf(b, sizeof(b), "%s/cp-b", store_dir);
		ck_assert_int_eq(rename(b, a), 0);
	}
	must(seal_reader_new(&sr, &kr, "cp-a", "s", bytes_sink, &got), "reader");
	ck_assert_int_eq(blob_read(bs, "cp-a", to_reader, sr), HANGAR_EREFUSED);
	seal_reader_free(sr);
	ck_assert_uint_eq(got.n, 0);
	seal_keyring_wipe(&kr);
	free(data);
}
END_TEST

static Suite *file_suite(void)
{
	Suite *s = suite_create("filestore");
	TCase *tc = tcase_create("file");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, commit_is_atomic);
	tcase_add_test(tc, abort_leaves_nothing);
	tcase_add_test(tc, failing_write_leaves_previous);
	tcase_add_test(tc, full_disk_leaves_previous);
	tcase_add_test(tc, crash_before_commit);
	tcase_add_test(tc, sweep_spares_live_writers);
	tcase_add_test(tc, delete_and_exists);
	tcase_add_test(tc, hostile_names);
	tcase_add_test(tc, store_urls);
	tcase_add_test(tc, sealed_through_store);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(file_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
