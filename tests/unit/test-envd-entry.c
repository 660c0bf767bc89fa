/*
 * hangar-envd EntryInfo (filesystem.c) and user.e2b.*
 * metadata (xattr.c).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "entry.h"

/* Normally defined in main.c, which tests do not link. */
struct envd_config envd_cfg;

static char tmpdir[PATH_MAX];

/* Where the metadata tests run: both are worth it, as they are often different filesystems. */
static const char *const bases[] = { "/tmp", "/var/tmp", "/dev/shm" };
#define NBASES (sizeof(bases) / sizeof(bases[0]))

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void make_tmpdir(const char *base)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/envd-entry-XXXXXX", base);
	ck_assert_msg(mkdtemp(tmpdir) != NULL, "mkdtemp in %s: %s", base, strerror(errno));
}

static void setup(void)
{
	memset(&envd_cfg, 0, sizeof(envd_cfg));
	umask(022);
	make_tmpdir("/tmp");
}

static void teardown(void)
{
	if (tmpdir[0])
		nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = '\0';
}

/* tmpdir/name in a static buffer (one of four, so a few can be live at once). */
static const char *at(const char *name)
{
	static char bufs[4][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 4];
	int n = snprintf(b, PATH_MAX, "%s/%s", tmpdir, name);

	ck_assert_msg(n > 0 && n < PATH_MAX, "path too long");
	return b;
}

static void make_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	ck_assert_int_eq(chmod(path, mode), 0);
}

static cJSON *entry(const char *path)
{
	struct rpc_error err = { 0 };
	cJSON *e = envd_entry_info(path, &err);

	ck_assert_msg(e != NULL, "no entry for %s: %s", path, err.message);
	return e;
}

/* A string member, or NULL when absent (and it must be a string when present). */
static const char *str(const cJSON *e, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

	if (!v)
		return NULL;
	ck_assert_msg(cJSON_IsString(v), "%s is not a string", key);
	return v->valuestring;
}

static void has_str(const cJSON *e, const char *key, const char *want)
{
	const char *got = str(e, key);

	ck_assert_msg(got != NULL, "%s missing", key);
	ck_assert_msg(strcmp(got, want) == 0, "%s = \"%s\", want \"%s\"", key, got, want);
}

static void absent(const cJSON *e, const char *key)
{
	ck_assert_msg(cJSON_GetObjectItemCaseSensitive(e, key) == NULL, "%s present", key);
}

static void has_mode(const cJSON *e, unsigned want)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, "mode");

	ck_assert_msg(cJSON_IsNumber(v), "mode missing or not a number");
	ck_assert_uint_eq((unsigned)v->valuedouble, want);
}

static void perms_are(const char *path, const char *want)
{
	cJSON *e = entry(path);

	has_str(e, "permissions", want);
	cJSON_Delete(e);
}

/* ---- permissions string ------------------------------------------------- */

START_TEST(perms_regular)
{
	make_file(at("f"), "x", 0644);
	perms_are(at("f"), "-rw-r--r--");
	ck_assert_int_eq(chmod(at("f"), 0), 0);
	perms_are(at("f"), "----------");
	ck_assert_int_eq(chmod(at("f"), 0777), 0);
	perms_are(at("f"), "-rwxrwxrwx");
	ck_assert_int_eq(chmod(at("f"), 0421), 0);
	perms_are(at("f"), "-r---w---x");
}
END_TEST

START_TEST(perms_directory)
{
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	perms_are(at("d"), "drwxr-xr-x");
	ck_assert_int_eq(chmod(at("d"), 0700), 0);
	perms_are(at("d"), "drwx------");
}
END_TEST

START_TEST(perms_symlink)
{
	make_file(at("f"), "x", 0600);
	ck_assert_int_eq(symlink("f", at("l")), 0);
	/* lstat's bits, not the target's. */
	perms_are(at("l"), "Lrwxrwxrwx");
	ck_assert_int_eq(symlink("nowhere", at("broken")), 0);
	perms_are(at("broken"), "Lrwxrwxrwx");
}
END_TEST

START_TEST(perms_fifo)
{
	ck_assert_int_eq(mkfifo(at("p"), 0640), 0);
	ck_assert_int_eq(chmod(at("p"), 0640), 0);
	perms_are(at("p"), "prw-r-----");
}
END_TEST

START_TEST(perms_socket)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(at("s")), sizeof(sa.sun_path));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", at("s"));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	ck_assert_int_eq(chmod(at("s"), 0755), 0);
	perms_are(at("s"), "Srwxr-xr-x");
}
END_TEST

START_TEST(perms_special_bits)
{
	make_file(at("f"), "x", 04755);
	perms_are(at("f"), "urwxr-xr-x");
	ck_assert_int_eq(chmod(at("f"), 02755), 0);
	perms_are(at("f"), "grwxr-xr-x");
	ck_assert_int_eq(chmod(at("f"), 06711), 0);
	perms_are(at("f"), "ugrwx--x--x");
	ck_assert_int_eq(chmod(at("f"), 01644), 0);
	perms_are(at("f"), "trw-r--r--");

	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	ck_assert_int_eq(chmod(at("d"), 01777), 0);
	perms_are(at("d"), "dtrwxrwxrwx");
	ck_assert_int_eq(chmod(at("d"), 02755), 0);
	perms_are(at("d"), "dgrwxr-xr-x");
	ck_assert_int_eq(chmod(at("d"), 07777), 0);
	perms_are(at("d"), "dugtrwxrwxrwx");
}
END_TEST

START_TEST(perms_devices)
{
	cJSON *e;

	/* Go marks a character device with both D (device) and c (char). */
	if (mknod(at("c"), S_IFCHR | 0620, makedev(1, 3)) == 0) {
		ck_assert_int_eq(chmod(at("c"), 0620), 0);
		perms_are(at("c"), "Dcrw--w----");
	}
	if (mknod(at("b"), S_IFBLK | 0660, makedev(7, 0)) == 0) {
		ck_assert_int_eq(chmod(at("b"), 0660), 0);
		perms_are(at("b"), "Drw-rw----");
	}
	/* Without CAP_MKNOD the system's own /dev/null still covers char devices. */
	e = entry("/dev/null");
	ck_assert_msg(strncmp(str(e, "permissions"), "Dc", 2) == 0, "/dev/null: %s", str(e, "permissions"));
	absent(e, "type");
	cJSON_Delete(e);
}
END_TEST

/* ---- EntryInfo ---------------------------------------------------------- */

static void own_names(char *owner, size_t osz, char *group, size_t gsz)
{
	struct passwd *pw = getpwuid(geteuid());
	struct group *gr = getgrgid(getegid());

	if (pw)
		snprintf(owner, osz, "%s", pw->pw_name);
	else
		snprintf(owner, osz, "%u", (unsigned)geteuid());
	if (gr)
		snprintf(group, gsz, "%s", gr->gr_name);
	else
		snprintf(group, gsz, "%u", (unsigned)getegid());
}

static void set_mtime(const char *path, time_t sec, long nsec)
{
	struct timespec ts[2] = { { sec, nsec }, { sec, nsec } };

	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

START_TEST(entry_file)
{
	char owner[64], group[64];
	const cJSON *size;
	cJSON *e;

	own_names(owner, sizeof(owner), group, sizeof(group));
	make_file(at("a.txt"), "hello", 0644);
	set_mtime(at("a.txt"), 1700000000, 123456789);
	e = entry(at("a.txt"));
	has_str(e, "name", "a.txt");
	has_str(e, "type", "FILE_TYPE_FILE");
	has_str(e, "path", at("a.txt"));
	/* int64 travels as a JSON string. */
	size = cJSON_GetObjectItemCaseSensitive(e, "size");
	ck_assert_msg(cJSON_IsString(size), "size is not a string");
	ck_assert_str_eq(size->valuestring, "5");
	has_mode(e, 0644);
	has_str(e, "permissions", "-rw-r--r--");
	has_str(e, "owner", owner);
	has_str(e, "group", group);
	has_str(e, "modifiedTime", "2023-11-14T22:13:20.123456789Z");
	absent(e, "symlinkTarget");
	absent(e, "metadata");
	/* proto3 JSON names only, never the proto ones. */
	absent(e, "modified_time");
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_zero_values_omitted)
{
	cJSON *e;

	make_file(at("empty"), "", 0);
	set_mtime(at("empty"), 0, 0);
	e = entry(at("empty"));
	absent(e, "size");
	absent(e, "mode");
	absent(e, "modifiedTime");
	has_str(e, "type", "FILE_TYPE_FILE");
	has_str(e, "permissions", "----------");
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_whole_seconds)
{
	cJSON *e;

	make_file(at("f"), "x", 0644);
	set_mtime(at("f"), 1700000000, 0);
	e = entry(at("f"));
	has_str(e, "modifiedTime", "2023-11-14T22:13:20Z");
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_directory)
{
	struct stat st;
	char want[32];
	cJSON *e;

	ck_assert_int_eq(mkdir(at("dir"), 0755), 0);
	ck_assert_int_eq(lstat(at("dir"), &st), 0);
	snprintf(want, sizeof(want), "%lld", (long long)st.st_size);
	e = entry(at("dir"));
	has_str(e, "name", "dir");
	has_str(e, "type", "FILE_TYPE_DIRECTORY");
	has_mode(e, 0755);
	has_str(e, "permissions", "drwxr-xr-x");
	if (st.st_size)
		has_str(e, "size", want);
	absent(e, "symlinkTarget");
	cJSON_Delete(e);

	/* The path is reported as asked; the name ignores trailing slashes. */
	e = entry(at("dir/"));
	has_str(e, "name", "dir");
	has_str(e, "path", at("dir/"));
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_root_name)
{
	cJSON *e = entry("/");

	has_str(e, "name", "/");
	has_str(e, "type", "FILE_TYPE_DIRECTORY");
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_symlink_to_file)
{
	char *real;
	cJSON *e;

	make_file(at("target.txt"), "hello", 0600);
	ck_assert_int_eq(symlink("target.txt", at("link")), 0);
	real = realpath(at("target.txt"), NULL);
	ck_assert_ptr_nonnull(real);
	e = entry(at("link"));
	has_str(e, "name", "link");
	has_str(e, "path", at("link"));
	/* Type and mode come from the target ... */
	has_str(e, "type", "FILE_TYPE_FILE");
	has_mode(e, 0600);
	/* ... permissions and size from the link itself (the length of its text). */
	has_str(e, "permissions", "Lrwxrwxrwx");
	has_str(e, "size", "10");
	has_str(e, "symlinkTarget", real);
	free(real);
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_symlink_to_dir)
{
	char *real;
	cJSON *e;

	ck_assert_int_eq(mkdir(at("d"), 0750), 0);
	ck_assert_int_eq(chmod(at("d"), 0750), 0);
	ck_assert_int_eq(symlink(at("d"), at("dl")), 0);
	real = realpath(at("d"), NULL);
	ck_assert_ptr_nonnull(real);
	e = entry(at("dl"));
	has_str(e, "type", "FILE_TYPE_DIRECTORY");
	has_mode(e, 0750);
	has_str(e, "permissions", "Lrwxrwxrwx");
	has_str(e, "symlinkTarget", real);
	free(real);
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_symlink_chain)
{
	char *real;
	cJSON *e;

	make_file(at("f"), "x", 0644);
	ck_assert_int_eq(symlink("f", at("l1")), 0);
	ck_assert_int_eq(symlink("l1", at("l2")), 0);
	real = realpath(at("f"), NULL);
	ck_assert_ptr_nonnull(real);
	e = entry(at("l2"));
	/* Fully resolved, not just one hop. */
	has_str(e, "symlinkTarget", real);
	has_str(e, "type", "FILE_TYPE_FILE");
	free(real);
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_broken_symlink)
{
	cJSON *e;

	ck_assert_int_eq(symlink("nowhere", at("broken")), 0);
	e = entry(at("broken"));
	has_str(e, "name", "broken");
	absent(e, "type");   /* FILE_TYPE_UNSPECIFIED is the zero value */
	absent(e, "mode");
	has_str(e, "permissions", "Lrwxrwxrwx");
	has_str(e, "size", "7");
	/* Unresolvable: the link's own path. */
	has_str(e, "symlinkTarget", at("broken"));
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_symlink_loop)
{
	cJSON *e;

	ck_assert_int_eq(symlink("b", at("a")), 0);
	ck_assert_int_eq(symlink("a", at("b")), 0);
	e = entry(at("a"));
	absent(e, "type");
	absent(e, "mode");
	has_str(e, "symlinkTarget", at("a"));
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_fifo_unspecified)
{
	cJSON *e;

	ck_assert_int_eq(mkfifo(at("p"), 0644), 0);
	e = entry(at("p"));
	absent(e, "type");
	has_mode(e, 0644);
	cJSON_Delete(e);
}
END_TEST

START_TEST(entry_missing)
{
	struct rpc_error err = { 0 };

	ck_assert_ptr_null(envd_entry_info(at("nope"), &err));
	ck_assert_int_eq(err.code, CONNECT_NOT_FOUND);
	ck_assert_msg(strncmp(err.message, "file not found: ", 16) == 0, "message: %s", err.message);
	ck_assert_msg(strstr(err.message, at("nope")) != NULL, "message lacks the path: %s", err.message);
}
END_TEST

START_TEST(entry_under_a_file)
{
	struct rpc_error err = { 0 };

	make_file(at("f"), "x", 0644);
	ck_assert_ptr_null(envd_entry_info(at("f/x"), &err));
	/* ENOTDIR is not "does not exist" to upstream either. */
	ck_assert_int_eq(err.code, CONNECT_INTERNAL);
}
END_TEST

START_TEST(entry_unknown_owner_numeric)
{
	cJSON *e;

	make_file(at("f"), "x", 0644);
	if (getpwuid(54321) || getgrgid(54322) || lchown(at("f"), 54321, 54322) < 0)
		return; /* needs root and unused ids */
	e = entry(at("f"));
	has_str(e, "owner", "54321");
	has_str(e, "group", "54322");
	cJSON_Delete(e);
}
END_TEST

/* ---- metadata ----------------------------------------------------------- */

static void meta_setup(void)
{
	memset(&envd_cfg, 0, sizeof(envd_cfg));
	umask(022);
	tmpdir[0] = '\0';
}

/* Runs the metadata tests in bases[_i]; 0 when that base cannot be used. */
static int meta_base(int i)
{
	struct stat st;

	if (stat(bases[i], &st) < 0 || !S_ISDIR(st.st_mode) || access(bases[i], W_OK) < 0)
		return 0;
	make_tmpdir(bases[i]);
	return 1;
}

/* Whether this filesystem keeps user xattrs at all. */
static int xattrs_supported(const char *path)
{
	if (lsetxattr(path, "user.envd-probe", "1", 1, 0) < 0)
		return 0;
	lremovexattr(path, "user.envd-probe");
	return 1;
}

static int meta_write(const char *path, size_t n, const char *const *kv)
{
	const char *keys[8], *values[8];

	ck_assert_uint_le(n, 8);
	for (size_t i = 0; i < n; i++) {
		keys[i] = kv[2 * i];
		values[i] = kv[2 * i + 1];
	}
	return envd_metadata_write(path, keys, values, n);
}

static int meta_count(const cJSON *m)
{
	return m ? cJSON_GetArraySize(m) : 0;
}

START_TEST(metadata_round_trip)
{
	static const char *const first[] = { "a", "1", "owner", "hello world", "k-x_y.z", "~!@#$%^&*()" };
	static const char *const second[] = { "c", "3" };
	cJSON *m, *e;

	if (!meta_base(_i))
		return;
	make_file(at("f"), "x", 0644);
	if (!xattrs_supported(at("f"))) {
		/* Ignored, as on procfs: success and nothing to read. */
		ck_assert_int_eq(meta_write(at("f"), 3, first), 0);
		ck_assert_ptr_null(envd_metadata_read(at("f")));
		return;
	}
	ck_assert_int_eq(meta_write(at("f"), 3, first), 0);
	m = envd_metadata_read(at("f"));
	ck_assert_int_eq(meta_count(m), 3);
	has_str(m, "a", "1");
	has_str(m, "owner", "hello world");
	has_str(m, "k-x_y.z", "~!@#$%^&*()");
	cJSON_Delete(m);

	/* EntryInfo carries the same set. */
	e = entry(at("f"));
	m = cJSON_GetObjectItemCaseSensitive(e, "metadata");
	ck_assert_int_eq(meta_count(m), 3);
	has_str(m, "a", "1");
	cJSON_Delete(e);

	/* A write replaces the whole set ... */
	ck_assert_int_eq(meta_write(at("f"), 1, second), 0);
	m = envd_metadata_read(at("f"));
	ck_assert_int_eq(meta_count(m), 1);
	has_str(m, "c", "3");
	cJSON_Delete(m);

	/* ... and an empty one clears it. */
	ck_assert_int_eq(meta_write(at("f"), 0, NULL), 0);
	ck_assert_ptr_null(envd_metadata_read(at("f")));
	e = entry(at("f"));
	absent(e, "metadata");
	cJSON_Delete(e);
}
END_TEST

START_TEST(metadata_other_xattrs_untouched)
{
	static const char *const kv[] = { "a", "1" };
	char buf[16];
	cJSON *m;

	if (!meta_base(_i))
		return;
	ck_assert_int_eq(mkdir(at("d"), 0755), 0);
	if (!xattrs_supported(at("d")))
		return;
	ck_assert_int_eq(lsetxattr(at("d"), "user.other", "keep", 4, 0), 0);
	ck_assert_int_eq(meta_write(at("d"), 1, kv), 0);
	ck_assert_int_eq(meta_write(at("d"), 0, NULL), 0);
	/* Plain user.* attributes are neither reported nor removed. */
	ck_assert_int_eq(lgetxattr(at("d"), "user.other", buf, sizeof(buf)), 4);
	ck_assert_int_eq(lsetxattr(at("d"), "user.e2b.x", "y", 1, 0), 0);
	m = envd_metadata_read(at("d"));
	ck_assert_int_eq(meta_count(m), 1);
	has_str(m, "x", "y");
	cJSON_Delete(m);
}
END_TEST

START_TEST(metadata_unprintable_skipped_on_read)
{
	cJSON *m;

	if (!meta_base(_i))
		return;
	make_file(at("f"), "x", 0644);
	if (!xattrs_supported(at("f")))
		return;
	ck_assert_int_eq(lsetxattr(at("f"), "user.e2b.bin", "\x01\x02", 2, 0), 0);
	ck_assert_int_eq(lsetxattr(at("f"), "user.e2b.nul", "a\0b", 3, 0), 0);
	ck_assert_int_eq(lsetxattr(at("f"), "user.e2b.ok", "fine", 4, 0), 0);
	m = envd_metadata_read(at("f"));
	ck_assert_int_eq(meta_count(m), 1);
	has_str(m, "ok", "fine");
	cJSON_Delete(m);
}
END_TEST

/* A string of n copies of c (malloc'd). */
static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	ck_assert_ptr_nonnull(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

START_TEST(metadata_einval)
{
	static const char *const keep[] = { "keep", "me" };
	char *k246 = repeat('k', 246), *k247 = repeat('k', 247);
	/* len("user.e2b.") + 1 + v == 4096 exactly, and one more. */
	char *v4086 = repeat('v', 4086), *v4087 = repeat('v', 4087), *v1400 = repeat('v', 1400);
	cJSON *m;

	make_file(at("f"), "x", 0644);
	if (xattrs_supported(at("f")))
		ck_assert_int_eq(meta_write(at("f"), 1, keep), 0);

	{
		const char *const bad[][2] = {
			{ "del\x7f", "v" }, { "new\nline", "v" }, { "tab\t", "v" }, { "", "v" },
			{ "k", "v\x7f" }, { "k", "line\n" }, { "k", "high\x80" }, { k247, "v" },
			{ "k", v4087 },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			const char *kv[2] = { bad[i][0], bad[i][1] };

			ck_assert_msg(meta_write(at("f"), 1, kv) == -EINVAL, "case %zu accepted", i);
		}
	}
	{
		/* The total counts every entry: 3 × (9 + 1 + 1400) > 4096. */
		const char *const many[] = { "a", v1400, "b", v1400, "c", v1400 };

		ck_assert_int_eq(meta_write(at("f"), 3, many), -EINVAL);
	}
	{
		/* The limits themselves are allowed (the filesystem may still be full). */
		const char *const edge_key[] = { k246, "v" };
		const char *const edge_total[] = { "k", v4086 };
		int rc;

		rc = meta_write(at("f"), 1, edge_key);
		ck_assert_msg(rc == 0, "246-byte key: %d", rc);
		rc = meta_write(at("f"), 1, edge_total);
		ck_assert_msg(rc != -EINVAL, "4096 bytes in total refused");
		ck_assert_int_eq(meta_write(at("f"), 1, keep), 0);
	}
	{
		/* A refused write changes nothing. */
		const char *const bad[] = { "ok", "v", "bad\x01", "v" };

		ck_assert_int_eq(meta_write(at("f"), 2, bad), -EINVAL);
		if (xattrs_supported(at("f"))) {
			m = envd_metadata_read(at("f"));
			ck_assert_int_eq(meta_count(m), 1);
			has_str(m, "keep", "me");
			cJSON_Delete(m);
		}
	}
	free(k246);
	free(k247);
	free(v4086);
	free(v4087);
	free(v1400);
}
END_TEST

START_TEST(metadata_never_through_symlink)
{
	static const char *const kv[] = { "a", "1" };

	make_file(at("f"), "x", 0644);
	if (!xattrs_supported(at("f")))
		return;
	ck_assert_int_eq(symlink("f", at("l")), 0);
	/* Linux refuses user.* on symlinks; what matters is the target stays clean. */
	ck_assert_int_ne(meta_write(at("l"), 1, kv), 0);
	ck_assert_ptr_null(envd_metadata_read(at("f")));
	ck_assert_ptr_null(envd_metadata_read(at("l")));
}
END_TEST

START_TEST(metadata_unsupported_fs_ignored)
{
	static const char *const kv[] = { "a", "1" };

	/* procfs has no user xattrs: not an error, and nothing to read. */
	ck_assert_int_eq(meta_write("/proc/self/stat", 1, kv), 0);
	ck_assert_ptr_null(envd_metadata_read("/proc/self/stat"));
}
END_TEST

START_TEST(metadata_missing_file)
{
	static const char *const kv[] = { "a", "1" };

	ck_assert_int_eq(meta_write(at("nope"), 1, kv), -ENOENT);
	ck_assert_ptr_null(envd_metadata_read(at("nope")));
}
END_TEST

static Suite *entry_suite(void)
{
	Suite *s = suite_create("envd-entry");
	TCase *tc;

	tc = tcase_create("permissions");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, perms_regular);
	tcase_add_test(tc, perms_directory);
	tcase_add_test(tc, perms_symlink);
	tcase_add_test(tc, perms_fifo);
	tcase_add_test(tc, perms_socket);
	tcase_add_test(tc, perms_special_bits);
	tcase_add_test(tc, perms_devices);
	suite_add_tcase(s, tc);

	tc = tcase_create("entry");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, entry_file);
	tcase_add_test(tc, entry_zero_values_omitted);
	tcase_add_test(tc, entry_whole_seconds);
	tcase_add_test(tc, entry_directory);
	tcase_add_test(tc, entry_root_name);
	tcase_add_test(tc, entry_symlink_to_file);
	tcase_add_test(tc, entry_symlink_to_dir);
	tcase_add_test(tc, entry_symlink_chain);
	tcase_add_test(tc, entry_broken_symlink);
	tcase_add_test(tc, entry_symlink_loop);
	tcase_add_test(tc, entry_fifo_unspecified);
	tcase_add_test(tc, entry_missing);
	tcase_add_test(tc, entry_under_a_file);
	tcase_add_test(tc, entry_unknown_owner_numeric);
	suite_add_tcase(s, tc);

	tc = tcase_create("metadata");
	tcase_add_checked_fixture(tc, meta_setup, teardown);
	tcase_add_loop_test(tc, metadata_round_trip, 0, NBASES);
	tcase_add_loop_test(tc, metadata_other_xattrs_untouched, 0, NBASES);
	tcase_add_loop_test(tc, metadata_unprintable_skipped_on_read, 0, NBASES);
	suite_add_tcase(s, tc);

	tc = tcase_create("metadata_rules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, metadata_einval);
	tcase_add_test(tc, metadata_never_through_symlink);
	tcase_add_test(tc, metadata_unsupported_fs_ignored);
	tcase_add_test(tc, metadata_missing_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(entry_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
