/* The tar checker: real archives from GNU tar pass and come out equal; hostile
 * archives are refused, naming the member, with nothing of it handed on. */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/tarcheck.h"
#include "helpers.h"

/* ---- building archives ------------------------------------------------------ */

static void put(struct bytes *b, const void *p, size_t n)
{
	bytes_sink(b, p, n);
}

static void pad(struct bytes *b)
{
	static const unsigned char zero[512];

	if (b->n % 512)
		put(b, zero, 512 - b->n % 512);
}

/* A header with the given fields; magic "ustar\0" "00" or GNU's. */
static void hdr_full(struct bytes *b, const char *name, char type, unsigned mode, uint64_t size, const char *link,
		     int gnu, const char *prefix)
{
	unsigned char h[512] = { 0 };
	unsigned sum = 0;

	memcpy(h, name, strnlen(name, 100));
	snprintf((char *)h + 100, 8, "%07o", mode);
	snprintf((char *)h + 108, 8, "%07o", 1000);
	snprintf((char *)h + 116, 8, "%07o", 1000);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
	snprintf((char *)h + 136, 12, "%011o", 1700000000);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strnlen(link, 100));
	memcpy(h + 257, gnu ? "ustar  \0" : "ustar\0" "00", 8);
	if (prefix)
		memcpy(h + 345, prefix, strnlen(prefix, 155));
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	put(b, h, 512);
}

static void fix_sum(unsigned char *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void hdr(struct bytes *b, const char *name, char type, unsigned mode, uint64_t size, const char *link)
{
	hdr_full(b, name, type, mode, size, link, 0, NULL);
}

static void file(struct bytes *b, const char *name, const char *content)
{
	hdr(b, name, '0', 0644, strlen(content), NULL);
	put(b, content, strlen(content));
	pad(b);
}

/* A pax 'x' header with raw record bytes. */
static void pax(struct bytes *b, const void *records, size_t n)
{
	hdr(b, "PaxHeader", 'x', 0644, n, NULL);
	put(b, records, n);
	pad(b);
}

static void pax_kv(struct bytes *b, const char *key, const char *value, size_t vlen)
{
	char rec[8192];
	size_t body = 1 + strlen(key) + 1 + vlen + 1, len = body + 1;
	int off;

	while ((size_t)snprintf(NULL, 0, "%zu", len) + body != len)
		len = (size_t)snprintf(NULL, 0, "%zu", len) + body;
	off = snprintf(rec, sizeof(rec), "%zu %s=", len, key);
	memcpy(rec + off, value, vlen);
	rec[off + vlen] = '\n';
	pax(b, rec, len);
}

static void gnu_long(struct bytes *b, char type, const char *value, size_t n)
{
	hdr_full(b, "././@LongLink", type, 0644, n, NULL, 1, NULL);
	put(b, value, n);
	pad(b);
}

static void end(struct bytes *b)
{
	static const unsigned char zero[1024];

	put(b, zero, sizeof(zero));
}

/* ---- running the checker ------------------------------------------------------ */

struct run {
	int rc;
	struct bytes out;
	struct tarcheck_stats stats;
	char msg[1024];
};

static struct run check_with(const struct bytes *in, size_t step, const struct tarcheck_limits *lim)
{
	struct run r = { 0 };
	struct tarcheck *t;

	must(tarcheck_new(&t, lim, bytes_sink, &r.out), "tarcheck_new");
	for (size_t off = 0; off < in->n && r.rc == 0; off += step)
		r.rc = tarcheck_feed(t, in->p + off, in->n - off < step ? in->n - off : step);
	if (r.rc == 0)
		r.rc = tarcheck_finish(t);
	if (r.rc)
		snprintf(r.msg, sizeof(r.msg), "%s", hangar_error_last()->message);
	r.stats = *tarcheck_stats(t);
	tarcheck_free(t);
	return r;
}

static struct run check(const struct bytes *in, size_t step)
{
	return check_with(in, step, NULL);
}

static int ends_with_marker(const struct bytes *b)
{
	if (b->n < 1024)
		return 0;
	for (size_t i = b->n - 1024; i < b->n; i++)
		if (b->p[i])
			return 0;
	return 1;
}

static const size_t steps[] = { 1, 7, 512, 513, 1 << 20 };

/* The archive must be refused whatever the feeding, naming `named` (when not
 * NULL) and saying `why`; nothing named `bad` may be handed on, nor the marker. */
static void refused(const struct bytes *in, const char *named, const char *why, const char *bad)
{
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct run r = check(in, steps[s]);

		ck_assert_msg(r.rc == HANGAR_EREFUSED, "step %zu: expected a refusal (%s), got %d %s", steps[s], why,
			      r.rc, r.msg);
		ck_assert_msg(strstr(r.msg, why), "message \"%s\" lacks \"%s\"", r.msg, why);
		if (named) {
			char want[600];

			snprintf(want, sizeof(want), "member \"%s\"", named);
			ck_assert_msg(strstr(r.msg, want), "message \"%s\" does not name %s", r.msg, want);
		}
		ck_assert_msg(!ends_with_marker(&r.out), "the end-of-archive marker was handed on");
		if (bad)
			ck_assert_msg(!r.out.p || !memmem(r.out.p, r.out.n, bad, strlen(bad)), "\"%s\" was handed on", bad);
		bytes_free(&r.out);
	}
}

/* ---- GNU tar's archives pass and extract to the same tree --------------------- */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	ck_assert_msg(rc == 0, "command failed (%d): %s", rc, cmd);
}

static void read_file(struct bytes *b, const char *path)
{
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		put(b, buf, (size_t)n);
	close(fd);
}

static void write_file(const char *path, const struct bytes *b)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b->p, b->n), (ssize_t)b->n);
	close(fd);
}

static const char *formats[] = { "pax", "gnu" };

START_TEST(gnu_tar_round_trip)
{
	char *d = temp_dir(), longdir[300], longname[600];
	struct bytes in = { 0 };
	struct run first;

	/* A tree with names over 100 and 255 bytes, a long link target, modes, an
	 * empty file, a file of several blocks, and a file 1 byte past a block. */
	memset(longdir, 'd', 120);
	longdir[120] = '\0';
	snprintf(longname, sizeof(longname), "%s/%0180d.txt", longdir, 7);
	sh("mkdir -p %s/src/%s %s/src/sub/deeper && cd %s/src && printf 'x' > one && : > empty && "
	   "head -c 5000 /dev/urandom > sub/blocks && head -c 513 /dev/urandom > sub/deeper/513 && "
	   "printf 'hello' > '%s' && chmod 0755 one && chmod 0600 sub/blocks && chmod 0700 sub/deeper && "
	   "ln -s %s/%s lnk && ln -s ../one sub/rel && ln -s /etc/passwd abs",
	   d, longdir, d, d, longname, longdir, longname);
	sh("cd %s/src && find . -mindepth 1 | sed 's|^\\./||' | sort | "
	   "tar --format=%s --no-recursion -T - -cf %s/in.tar",
	   d, formats[_i], d);
	read_file(&in, (sprintf(longname, "%s/in.tar", d), longname));
	first = check(&in, 1 << 20);
	ck_assert_msg(first.rc == 0, "refused: %s", first.msg);
	ck_assert_uint_eq(first.stats.files, 5);
	ck_assert_uint_eq(first.stats.symlinks, 3);
	ck_assert_uint_eq(first.stats.dirs, 3);
	ck_assert_uint_eq(first.stats.bytes, 1 + 5000 + 513 + 5);
	ck_assert(ends_with_marker(&first.out));
	/* Every way of feeding gives the same bytes. */
	for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		struct run r = check(&in, steps[s]);

		ck_assert_msg(r.rc == 0, "step %zu refused: %s", steps[s], r.msg);
		ck_assert_uint_eq(r.out.n, first.out.n);
		ck_assert(memcmp(r.out.p, first.out.p, r.out.n) == 0);
		bytes_free(&r.out);
	}
	/* Checking its own output again changes nothing. */
	{
		struct run again = check(&first.out, 4096);

		ck_assert_msg(again.rc == 0, "own output refused: %s", again.msg);
		ck_assert_uint_eq(again.out.n, first.out.n);
		ck_assert(memcmp(again.out.p, first.out.p, again.out.n) == 0);
		bytes_free(&again.out);
	}
	/* GNU tar extracts the output to the same tree: contents, modes, links. */
	sprintf(longname, "%s/out.tar", d);
	write_file(longname, &first.out);
	sh("mkdir %s/dst && tar -C %s/dst -xf %s/out.tar && diff -r --no-dereference %s/src %s/dst", d, d, d, d, d);
	sh("cd %s/src && find . -printf '%%p %%y %%m %%l\\n' | sort > ../a && cd ../dst && "
	   "find . -printf '%%p %%y %%m %%l\\n' | sort > ../b && cmp ../a ../b",
	   d);
	bytes_free(&in);
	bytes_free(&first.out);
	rm_tree(d);
	free(d);
}
END_TEST

/* ---- names --------------------------------------------------------------------- */

START_TEST(dotdot_refused)
{
	const char *names[] = { "../evil", "a/../../evil", "a/b/..", "..", "x/../evil" };
	struct bytes b = { 0 };

	file(&b, "ok", "fine");
	file(&b, names[_i], "EVILDATA");
	end(&b);
	refused(&b, names[_i], "\"..\" component", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(absolute_refused)
{
	struct bytes b = { 0 };

	file(&b, "/etc/cron.d/evil", "EVILDATA");
	end(&b);
	refused(&b, "/etc/cron.d/evil", "absolute name", "EVILDATA");
	bytes_free(&b);
	/* ustar's prefix field makes an absolute name too */
	hdr_full(&b, "passwd", '0', 0644, 8, NULL, 0, "/etc");
	put(&b, "EVILDATA", 8);
	pad(&b);
	end(&b);
	refused(&b, "/etc/passwd", "absolute name", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(empty_names_refused)
{
	struct bytes b = { 0 };

	file(&b, "", "EVILDATA");
	end(&b);
	refused(&b, NULL, "an empty name", "EVILDATA");
	bytes_free(&b);
	hdr(&b, "./", '5', 0755, 0, NULL);
	end(&b);
	refused(&b, "./", "an empty name", NULL);
	bytes_free(&b);
}
END_TEST

START_TEST(long_names_override_the_header)
{
	struct bytes b = { 0 };

	/* A safe name in the header, a hostile one in the extended header: the
	 * extended one is the member's name, and it is refused. */
	pax_kv(&b, "path", "../../etc/evil", 14);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, "../../etc/evil", "\"..\" component", "EVILDATA");
	bytes_free(&b);
	gnu_long(&b, 'L', "/etc/evil", 10);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, "/etc/evil", "absolute name", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(nul_in_names_refused)
{
	struct bytes b = { 0 };

	pax_kv(&b, "path", "ok\0/../../x", 11);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, NULL, "NUL byte", "EVILDATA");
	bytes_free(&b);
	gnu_long(&b, 'L', "ok\0../../x", 11);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, NULL, "NUL byte", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(name_caps)
{
	char name[5000];
	struct bytes b = { 0 };
	struct tarcheck_limits lim = { 0 };
	struct run r;

	memset(name, 'n', 4097);
	name[4097] = '\0';
	pax_kv(&b, "path", name, 4097);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, NULL, "longer than 4096", "EVILDATA");
	bytes_free(&b);
	/* 4096 bytes is allowed, and comes out whole. */
	name[4096] = '\0';
	pax_kv(&b, "path", name, 4096);
	file(&b, "harmless", "data");
	end(&b);
	r = check(&b, 1000);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	ck_assert_ptr_nonnull(memmem(r.out.p, r.out.n, name, 4096));
	bytes_free(&r.out);
	/* A lower cap. */
	lim.max_name = 10;
	r = check_with(&b, 512, &lim);
	ck_assert_int_eq(r.rc, HANGAR_EREFUSED);
	bytes_free(&r.out);
	bytes_free(&b);
	/* A GNU long name larger than the cap is refused before it is read. */
	memset(name, 'n', 4500);
	gnu_long(&b, 'L', name, 4500);
	file(&b, "harmless", "EVILDATA");
	end(&b);
	refused(&b, NULL, "GNU long name", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(dots_are_canonical)
{
	struct bytes b = { 0 };
	struct run r;

	hdr(&b, "./a/", '5', 0755, 0, NULL);
	file(&b, "./a/./b", "data");
	file(&b, "a//c", "data");
	end(&b);
	r = check(&b, 512);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	ck_assert_ptr_nonnull(memmem(r.out.p, r.out.n, "a/b\0", 4));
	ck_assert_ptr_nonnull(memmem(r.out.p, r.out.n, "a/c\0", 4));
	ck_assert_ptr_null(memmem(r.out.p, r.out.n, "./", 2));
	ck_assert_ptr_null(memmem(r.out.p, r.out.n, "//", 2));
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

/* ---- kinds and modes ----------------------------------------------------------- */

START_TEST(kinds_refused)
{
	static const struct {
		char type;
		const char *why;
	} kinds[] = {
		{ '1', "hard link" }, { '3', "character device" }, { '4', "block device" }, { '6', "fifo" },
		{ '7', "contiguous" }, { 'S', "sparse" }, { 'V', "unknown member type" }, { 'g', "global header" },
	};
	struct bytes b = { 0 };

	file(&b, "before", "fine");
	hdr(&b, "thing", kinds[_i].type, 0644, 0, kinds[_i].type == '1' ? "/etc/shadow" : NULL);
	file(&b, "after", "AFTERDATA");
	end(&b);
	refused(&b, kinds[_i].type == 'g' ? NULL : "thing", kinds[_i].why, "AFTERDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(setid_refused_sticky_stripped)
{
	struct bytes b = { 0 };
	struct run r;

	hdr(&b, "suid", '0', 04755, 0, NULL);
	end(&b);
	refused(&b, "suid", "setuid or setgid", "suid");
	bytes_free(&b);
	hdr(&b, "sgid/", '5', 02775, 0, NULL);
	end(&b);
	refused(&b, "sgid/", "setuid or setgid", "sgid");
	bytes_free(&b);
	hdr(&b, "tmp/", '5', 01777, 0, NULL);
	end(&b);
	r = check(&b, 512);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	ck_assert_str_eq((char *)r.out.p + 100, "0000777");
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

START_TEST(sizes_of_dirs_and_links_refused)
{
	struct bytes b = { 0 };

	hdr(&b, "d/", '5', 0755, 10, NULL);
	put(&b, "EVILDATA..", 10);
	pad(&b);
	end(&b);
	refused(&b, "d/", "directory with 10 bytes", "EVILDATA");
	bytes_free(&b);
}
END_TEST

/* ---- symlinks ---------------------------------------------------------------- */

START_TEST(through_symlinks_refused)
{
	/* [i]: a symlink, then a member through it (or at it). */
	static const char *const later[] = { "a/passwd", "a/x/y", "a", "a/", "./a/z" };
	struct bytes b = { 0 };

	hdr(&b, "a", '2', 0777, 0, "/etc");
	if (later[_i][strlen(later[_i]) - 1] == '/')
		hdr(&b, later[_i], '5', 0755, 0, NULL);
	else
		file(&b, later[_i], "EVILDATA");
	end(&b);
	refused(&b, later[_i], "symbolic link earlier", "EVILDATA");
	bytes_free(&b);
}
END_TEST

START_TEST(nested_symlinks_refused)
{
	struct bytes b = { 0 };
	struct run r;

	/* dir/ then dir/l -> .. then dir/l/x: through the nested link */
	hdr(&b, "dir/", '5', 0755, 0, NULL);
	hdr(&b, "dir/l", '2', 0777, 0, "../..");
	file(&b, "dir/l/x", "EVILDATA");
	end(&b);
	refused(&b, "dir/l/x", "symbolic link earlier", "EVILDATA");
	bytes_free(&b);
	/* but a sibling whose name starts the same is fine */
	hdr(&b, "dir/", '5', 0755, 0, NULL);
	hdr(&b, "dir/l", '2', 0777, 0, "/anywhere");
	file(&b, "dir/lx", "fine");
	file(&b, "dir/l.d", "fine");
	end(&b);
	r = check(&b, 100);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	ck_assert_uint_eq(r.stats.symlinks, 1);
	ck_assert_uint_eq(r.stats.files, 2);
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

START_TEST(many_symlinks)
{
	/* Enough symlinks to grow the table several times; all of them still count. */
	struct bytes b = { 0 };
	char name[64];
	struct run r;

	for (int i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "l%d", i);
		hdr(&b, name, '2', 0777, 0, "target");
	}
	file(&b, "l2999/x", "EVILDATA");
	end(&b);
	refused(&b, "l2999/x", "symbolic link earlier", "EVILDATA");
	r = check(&b, 1 << 20);
	ck_assert_uint_eq(r.stats.symlinks, 3000);
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

START_TEST(empty_link_target_refused)
{
	struct bytes b = { 0 };

	hdr(&b, "l", '2', 0777, 0, "");
	end(&b);
	refused(&b, "l", "empty target", NULL);
	bytes_free(&b);
}
END_TEST

/* ---- caps --------------------------------------------------------------------- */

START_TEST(member_caps)
{
	struct bytes b = { 0 };
	struct tarcheck_limits lim = { 0 };
	struct run r;

	file(&b, "a", "1234");
	file(&b, "b", "12345678");
	file(&b, "c", "1234");
	end(&b);
	lim.max_members = 2;
	r = check_with(&b, 512, &lim);
	ck_assert_int_eq(r.rc, HANGAR_EREFUSED);
	ck_assert_msg(strstr(r.msg, "member \"c\": more than 2 members"), "%s", r.msg);
	bytes_free(&r.out);
	lim = (struct tarcheck_limits){ .max_member = 7 };
	r = check_with(&b, 512, &lim);
	ck_assert_int_eq(r.rc, HANGAR_EREFUSED);
	ck_assert_msg(strstr(r.msg, "member \"b\": 8 bytes, over the cap"), "%s", r.msg);
	ck_assert(!r.out.p || !memmem(r.out.p, r.out.n, "12345678", 8));
	bytes_free(&r.out);
	lim = (struct tarcheck_limits){ .max_total = 15 };
	r = check_with(&b, 512, &lim);
	ck_assert_int_eq(r.rc, HANGAR_EREFUSED);
	ck_assert_msg(strstr(r.msg, "member \"c\": the archive's data passes"), "%s", r.msg);
	bytes_free(&r.out);
	lim = (struct tarcheck_limits){ .max_total = 16, .max_member = 8, .max_members = 3 };
	r = check_with(&b, 512, &lim);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

START_TEST(huge_sizes)
{
	/* A size in base-256 over any cap, and a pax size that overflows. */
	struct bytes b = { 0 };
	struct tarcheck_limits lim = { .max_member = 1 << 30 };
	struct run r;

	hdr(&b, "big", '0', 0644, 0, NULL);
	memset(b.p + 124, 0, 12);
	b.p[124] = 0x80;
	b.p[130] = 0x01; /* 2^40 */
	fix_sum(b.p);
	end(&b);
	r = check_with(&b, 512, &lim);
	ck_assert_int_eq(r.rc, HANGAR_EREFUSED);
	ck_assert_msg(strstr(r.msg, "member \"big\": 1099511627776 bytes, over the cap"), "%s", r.msg);
	bytes_free(&r.out);
	bytes_free(&b);
	pax_kv(&b, "size", "99999999999999999999999", 23);
	file(&b, "big", "x");
	end(&b);
	refused(&b, NULL, "malformed pax size", NULL);
	bytes_free(&b);
}
END_TEST

/* ---- structure ------------------------------------------------------------------ */

START_TEST(truncations_refused)
{
	struct bytes whole = { 0 };

	file(&whole, "a", "first");
	file(&whole, "b", "second member's data");
	end(&whole);
	/* Every cut short of the whole marker is refused; the marker is never handed on. */
	for (size_t cut = 0; cut < whole.n; cut += 97) {
		struct bytes part = { .p = whole.p, .n = cut };
		struct run r = check(&part, 512);

		ck_assert_msg(r.rc == HANGAR_EREFUSED, "cut at %zu: %d", cut, r.rc);
		ck_assert(!ends_with_marker(&r.out) || r.out.n == 0);
		bytes_free(&r.out);
	}
	{
		struct bytes part = { .p = whole.p, .n = whole.n - 512 };

		refused(&part, NULL, "truncated", NULL);
	}
	bytes_free(&whole);
}
END_TEST

START_TEST(structure_refused)
{
	struct bytes b = { 0 };
	unsigned char junk[512];

	/* a bad checksum */
	file(&b, "a", "data");
	b.p[0] = 'b';
	end(&b);
	refused(&b, NULL, "bad checksum", NULL);
	bytes_free(&b);
	/* not ustar */
	hdr(&b, "a", '0', 0644, 0, NULL);
	memcpy(b.p + 257, "xxxxx\0" "00", 8);
	fix_sum(b.p);
	end(&b);
	refused(&b, NULL, "neither ustar nor GNU", NULL);
	bytes_free(&b);
	/* a lone zero block, then a member */
	file(&b, "a", "data");
	end(&b);
	b.n -= 512;
	file(&b, "b", "EVILDATA");
	end(&b);
	refused(&b, NULL, "lone zero block", "EVILDATA");
	bytes_free(&b);
	/* data after the marker */
	file(&b, "a", "data");
	end(&b);
	memset(junk, 'j', sizeof(junk));
	put(&b, junk, sizeof(junk));
	refused(&b, NULL, "after the end-of-archive marker", NULL);
	bytes_free(&b);
	/* an extended header without a member */
	file(&b, "a", "data");
	pax_kv(&b, "path", "x", 1);
	end(&b);
	refused(&b, NULL, "without a member", NULL);
	bytes_free(&b);
	/* malformed pax records */
	pax(&b, "6 abc\n", 6);
	file(&b, "a", "data");
	end(&b);
	refused(&b, NULL, "malformed pax", NULL);
	bytes_free(&b);
	pax(&b, "99 path=x\n", 10);
	file(&b, "a", "data");
	end(&b);
	refused(&b, NULL, "malformed pax", NULL);
	bytes_free(&b);
	pax(&b, "8 =abc\n\n", 8);
	file(&b, "a", "data");
	end(&b);
	refused(&b, NULL, "malformed pax", NULL);
	bytes_free(&b);
	pax_kv(&b, "GNU.sparse.map", "0,10", 4);
	file(&b, "a", "data");
	end(&b);
	refused(&b, NULL, "sparse", NULL);
	bytes_free(&b);
}
END_TEST

START_TEST(zero_padding_after_marker_accepted)
{
	/* GNU tar pads an archive to its record size with zeros. */
	struct bytes b = { 0 };
	static const unsigned char zero[8192];
	struct run r;

	file(&b, "a", "data");
	end(&b);
	put(&b, zero, sizeof(zero));
	r = check(&b, 1000);
	ck_assert_msg(r.rc == 0, "%s", r.msg);
	ck_assert_uint_eq(r.stats.files, 1);
	/* header + 1 data block + marker, whatever the input's padding */
	ck_assert_uint_eq(r.out.n, 512 + 512 + 1024);
	bytes_free(&r.out);
	bytes_free(&b);
}
END_TEST

static int failing_sink(void *payload, const void *data, size_t len)
{
	int *left = payload;

	(void)data;
	(void)len;
	if (--*left < 0)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "sink failed");
	return 0;
}

START_TEST(sink_failure_stops)
{
	struct bytes b = { 0 };
	struct tarcheck *t;
	int left = 1, rc;

	file(&b, "a", "data");
	file(&b, "b", "data");
	end(&b);
	must(tarcheck_new(&t, NULL, failing_sink, &left), "new");
	rc = tarcheck_feed(t, b.p, b.n);
	ck_assert_int_eq(rc, HANGAR_EOS);
	ck_assert_int_eq(tarcheck_feed(t, b.p, 1), HANGAR_EREFUSED);
	ck_assert_int_eq(tarcheck_finish(t), HANGAR_EREFUSED);
	tarcheck_free(t);
	bytes_free(&b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tarcheck");
	TCase *tc = tcase_create("tarcheck");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, gnu_tar_round_trip, 0, 2);
	tcase_add_loop_test(tc, dotdot_refused, 0, 5);
	tcase_add_test(tc, absolute_refused);
	tcase_add_test(tc, empty_names_refused);
	tcase_add_test(tc, long_names_override_the_header);
	tcase_add_test(tc, nul_in_names_refused);
	tcase_add_test(tc, name_caps);
	tcase_add_test(tc, dots_are_canonical);
	tcase_add_loop_test(tc, kinds_refused, 0, 8);
	tcase_add_test(tc, setid_refused_sticky_stripped);
	tcase_add_test(tc, sizes_of_dirs_and_links_refused);
	tcase_add_loop_test(tc, through_symlinks_refused, 0, 5);
	tcase_add_test(tc, nested_symlinks_refused);
	tcase_add_test(tc, many_symlinks);
	tcase_add_test(tc, empty_link_target_refused);
	tcase_add_test(tc, member_caps);
	tcase_add_test(tc, huge_sizes);
	tcase_add_test(tc, truncations_refused);
	tcase_add_test(tc, structure_refused);
	tcase_add_test(tc, zero_padding_after_marker_accepted);
	tcase_add_test(tc, sink_failure_stops);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
