/*
 * The tar checker (see tarcheck.h). Members are re-emitted with headers of
 * our own rather than passed through: whatever an archive says in fields we
 * do not read (uid, uname, pax keys we ignore, GNU's atime in the prefix
 * area) never reaches the extractor, so the extractor cannot read an archive
 * differently from the way it was checked.
 */
#include "tarcheck.h"
#include "util/relpath.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 512
#define MAX_PAX (1u << 20)          /* an extended header's data */
#define MAX_SYMLINK_BYTES (64u << 20) /* names kept to check paths through symlinks */

enum { S_HEADER, S_EXT, S_DATA, S_ZERO1, S_END, S_FAILED, S_DONE };
enum { K_FILE, K_DIR, K_SYMLINK };
enum { EXT_PAX, EXT_LONGNAME, EXT_LONGLINK };

struct link_slot {
	uint64_t hash;
	char *name; /* NULL: empty slot */
	size_t len;
};

struct tarcheck {
	struct tarcheck_limits lim;
	tarcheck_sink sink;
	void *payload;
	struct tarcheck_stats stats;
	int state;
	unsigned char blk[BLOCK];
	size_t fill;

	/* what extended headers said about the next member */
	char *x_path, *x_link, *gnu_name, *gnu_link;
	int has_x_size, has_x_mtime;
	uint64_t x_size;
	int64_t x_mtime;

	/* an extended header being read */
	int ext_kind;
	unsigned char *ext;
	size_t ext_len, ext_fill;

	/* the data (and then padding) of the current member */
	uint64_t data_left, pad_left;
	int forward;
	uint64_t total;

	struct link_slot *links;
	size_t nlinks, links_cap, link_bytes;
};

/* ---- errors ---------------------------------------------------------------- */

/* A member's name as it may appear in a message: printable, cut short. */
static void shown(char *out, size_t cap, const char *name)
{
	size_t o = 0;
	const unsigned char *p = (const unsigned char *)name;

	for (; *p && o + 8 < cap; p++) {
		if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
			out[o++] = (char)*p;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
	}
	if (*p)
		o += (size_t)snprintf(out + o, cap - o, "...");
	out[o] = '\0';
}

static int fail(struct tarcheck *t, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct tarcheck *t, const char *name, const char *fmt, ...)
{
	char why[256], nm[300];
	va_list ap;

	t->state = S_FAILED;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (!name)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_SANDBOX, "archive refused: %s", why);
	shown(nm, sizeof(nm), name);
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_SANDBOX, "archive refused: member \"%s\": %s", nm, why);
}

/* ---- numbers -------------------------------------------------------------- */

/* An octal field (leading spaces, digits, then spaces or NULs) or GNU's
 * base-256 (first byte 0x80, big-endian). -1 when malformed or too large. */
static int64_t number(const unsigned char *f, size_t n)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] == 0x80) {
		for (i = 1; i < n; i++) {
			if (v >> 55)
				return -1;
			v = (v << 8) | f[i];
		}
		return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
	}
	if (f[0] & 0x80)
		return -1;
	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v >> 60)
			return -1;
		v = v * 8 + (uint64_t)(f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != ' ' && f[i] != '\0')
			return -1;
	return (int64_t)v;
}

/* A pax decimal: optional '-' (when neg_ok), digits, optional fraction. */
static int pax_number(const char *s, int neg_ok, int64_t *out)
{
	int neg = 0;
	uint64_t v = 0;

	if (*s == '-' && neg_ok) {
		neg = 1;
		s++;
	}
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > ((uint64_t)INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.' && neg_ok)
		for (s++; *s >= '0' && *s <= '9'; s++)
			;
	if (*s)
		return -1;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* ---- output --------------------------------------------------------------- */

static int emit(struct tarcheck *t, const void *p, size_t n)
{
	int rc;

	if (!t->sink || !n)
		return 0;
	if ((rc = t->sink(t->payload, p, n)) < 0)
		t->state = S_FAILED;
	return rc;
}

static int emit_zeros(struct tarcheck *t, size_t n)
{
	static const unsigned char zero[BLOCK];
	int rc = 0;

	while (n && rc == 0) {
		size_t k = n < BLOCK ? n : BLOCK;

		rc = emit(t, zero, k);
		n -= k;
	}
	return rc;
}

static void octal(char *f, size_t n, uint64_t v)
{
	/* n - 1 digits, then NUL */
	snprintf(f, n, "%0*llo", (int)(n - 1), (unsigned long long)v);
}

static void checksum(unsigned char *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

static void ustar(unsigned char *h, const char *name, char type, uint64_t size, uint64_t mtime, unsigned mode,
		  const char *link)
{
	char f[16];

	memset(h, 0, BLOCK);
	memcpy(h, name, strnlen(name, 100));
	octal(f, 8, mode);
	memcpy(h + 100, f, 8);
	octal(f, 8, 0);
	memcpy(h + 108, f, 8);
	memcpy(h + 116, f, 8);
	octal(f, 12, size);
	memcpy(h + 124, f, 12);
	octal(f, 12, mtime);
	memcpy(h + 136, f, 12);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strnlen(link, 100));
	memcpy(h + 257, "ustar\0" "00", 8);
	checksum(h);
}

/* Appends "LEN key=value\n" (LEN counts the whole record, itself included). */
static size_t pax_record(char *out, const char *key, const char *value)
{
	size_t body = 1 + strlen(key) + 1 + strlen(value) + 1, len = body + 1, digits;

	for (;;) {
		digits = (size_t)snprintf(NULL, 0, "%zu", len);
		if (digits + body == len)
			break;
		len = digits + body;
	}
	return (size_t)sprintf(out, "%zu %s=%s\n", len, key, value);
}

#define OCTAL11_MAX 077777777777ull

static int emit_member(struct tarcheck *t, int kind, const char *name, const char *link, unsigned mode,
		       uint64_t size, int64_t mtime)
{
	unsigned char h[BLOCK];
	int need_path = strlen(name) >= 100, need_link = link && strlen(link) >= 100;
	int need_size = size > OCTAL11_MAX, need_mtime = mtime < 0 || (uint64_t)mtime > OCTAL11_MAX;
	char type = kind == K_DIR ? '5' : kind == K_SYMLINK ? '2' : '0';
	int rc;

	if (need_path || need_link || need_size || need_mtime) {
		size_t cap = 64 + (need_path ? strlen(name) + 16 : 0) + (need_link ? strlen(link) + 16 : 0) + 96, n = 0;
		char *x = malloc(cap), num[32];

		if (!x) {
			t->state = S_FAILED;
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		if (need_path)
			n += pax_record(x + n, "path", name);
		if (need_link)
			n += pax_record(x + n, "linkpath", link);
		if (need_size) {
			snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
			n += pax_record(x + n, "size", num);
		}
		if (need_mtime) {
			snprintf(num, sizeof(num), "%lld", (long long)mtime);
			n += pax_record(x + n, "mtime", num);
		}
		ustar(h, "././@PaxHeader", 'x', n, 0, 0644, NULL);
		rc = emit(t, h, BLOCK);
		if (rc == 0)
			rc = emit(t, x, n);
		if (rc == 0)
			rc = emit_zeros(t, (BLOCK - n % BLOCK) % BLOCK);
		free(x);
		if (rc < 0)
			return rc;
	}
	ustar(h, name, type, need_size ? 0 : size, need_mtime ? 0 : (uint64_t)mtime, mode, link);
	return emit(t, h, BLOCK);
}

/* ---- symlinks seen so far ------------------------------------------------- */

static uint64_t fnv_step(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ull;
}
#define FNV_INIT 0xcbf29ce484222325ull

static const struct link_slot *link_find(const struct tarcheck *t, uint64_t hash, const char *name, size_t len)
{
	if (!t->links_cap)
		return NULL;
	for (size_t i = hash & (t->links_cap - 1);; i = (i + 1) & (t->links_cap - 1)) {
		const struct link_slot *s = &t->links[i];

		if (!s->name)
			return NULL;
		if (s->hash == hash && s->len == len && memcmp(s->name, name, len) == 0)
			return s;
	}
}

static int link_add(struct tarcheck *t, const char *name)
{
	size_t len = strlen(name);
	uint64_t hash = FNV_INIT;

	for (size_t i = 0; i < len; i++)
		hash = fnv_step(hash, (unsigned char)name[i]);
	if (link_find(t, hash, name, len))
		return 0;
	if (t->link_bytes + len > MAX_SYMLINK_BYTES)
		return fail(t, name, "too many symbolic links in the archive");
	if ((t->nlinks + 1) * 2 > t->links_cap) {
		size_t cap = t->links_cap ? t->links_cap * 2 : 64;
		struct link_slot *n = calloc(cap, sizeof(*n));

		if (!n) {
			t->state = S_FAILED;
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		for (size_t i = 0; i < t->links_cap; i++) {
			size_t j;

			if (!t->links[i].name)
				continue;
			for (j = t->links[i].hash & (cap - 1); n[j].name; j = (j + 1) & (cap - 1))
				;
			n[j] = t->links[i];
		}
		free(t->links);
		t->links = n;
		t->links_cap = cap;
	}
	{
		size_t j;
		char *copy = malloc(len + 1);

		if (!copy) {
			t->state = S_FAILED;
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		memcpy(copy, name, len + 1);
		for (j = hash & (t->links_cap - 1); t->links[j].name; j = (j + 1) & (t->links_cap - 1))
			;
		t->links[j] = (struct link_slot){ hash, copy, len };
	}
	t->nlinks++;
	t->link_bytes += len;
	return 0;
}

/* 1 when name (canonical) is, or is under, a symlink member seen earlier. */
static int through_link(const struct tarcheck *t, const char *name)
{
	uint64_t hash = FNV_INIT;
	size_t i;

	if (!t->nlinks)
		return 0;
	for (i = 0; name[i]; i++) {
		if (name[i] == '/' && link_find(t, hash, name, i))
			return 1;
		hash = fnv_step(hash, (unsigned char)name[i]);
	}
	return link_find(t, hash, name, i) != NULL;
}

/* ---- members -------------------------------------------------------------- */

/* Rewrites raw into canonical form (relpath_canon) in out, which holds
 * strlen(raw) + 1 bytes. Refuses empty and absolute names, ".." components,
 * and a trailing '/' on anything but a directory. */
static int canonical(struct tarcheck *t, const char *raw, int kind, char *out)
{
	const char *why;

	if (!*raw)
		return fail(t, raw, "an empty name");
	if (*raw == '/')
		return fail(t, raw, "an absolute name");
	if (kind != K_DIR && raw[strlen(raw) - 1] == '/')
		return fail(t, raw, "a name ending in '/' that is not a directory");
	switch (relpath_canon(raw, out, strlen(raw) + 1, &why)) {
	case 0:
		return 0;
	case 1:
		return fail(t, raw, "an empty name");
	default:
		return fail(t, raw, "a \"..\" component");
	}
}

static void clear_pending(struct tarcheck *t)
{
	free(t->x_path);
	free(t->x_link);
	free(t->gnu_name);
	free(t->gnu_link);
	t->x_path = t->x_link = t->gnu_name = t->gnu_link = NULL;
	t->has_x_size = t->has_x_mtime = 0;
}

static int pending(const struct tarcheck *t)
{
	return t->x_path || t->x_link || t->gnu_name || t->gnu_link || t->has_x_size || t->has_x_mtime;
}

static uint64_t padded(uint64_t n)
{
	return (BLOCK - n % BLOCK) % BLOCK;
}

/* A field of at most n bytes, NUL-terminated when shorter. */
static char *field(const unsigned char *f, size_t n)
{
	size_t len = strnlen((const char *)f, n);
	char *s = malloc(len + 1);

	if (s) {
		memcpy(s, f, len);
		s[len] = '\0';
	}
	return s;
}

static int member(struct tarcheck *t, const unsigned char *h, int gnu, int kind)
{
	char *hname = NULL, *hlink = NULL, *name_c = NULL, *link_c = NULL;
	const char *name, *link = NULL;
	int64_t mode = number(h + 100, 8), hsize = number(h + 124, 12), hmtime = number(h + 136, 12);
	uint64_t size;
	int64_t mtime;
	int rc = 0;

	if (!gnu && h[345]) {
		/* ustar: prefix "/" name */
		char *pre = field(h + 345, 155), *nm = field(h, 100);

		if (pre && nm && (hname = malloc(strlen(pre) + strlen(nm) + 2)))
			sprintf(hname, "%s/%s", pre, nm);
		free(pre);
		free(nm);
	} else {
		hname = field(h, 100);
	}
	hlink = field(h + 157, 100);
	if (!hname || !hlink) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		t->state = S_FAILED;
		goto out;
	}
	name = t->x_path ? t->x_path : t->gnu_name ? t->gnu_name : hname;
	if (kind == K_SYMLINK)
		link = t->x_link ? t->x_link : t->gnu_link ? t->gnu_link : hlink;
	if (mode < 0 || hsize < 0 || hmtime < 0) {
		rc = fail(t, name, "a malformed header (mode, size or mtime)");
		goto out;
	}
	size = t->has_x_size ? t->x_size : (uint64_t)hsize;
	mtime = t->has_x_mtime ? t->x_mtime : hmtime;
	if (strlen(name) > t->lim.max_name) {
		rc = fail(t, name, "a name longer than %llu bytes", (unsigned long long)t->lim.max_name);
		goto out;
	}
	name_c = malloc(strlen(name) + 1);
	if (!name_c) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		t->state = S_FAILED;
		goto out;
	}
	if ((rc = canonical(t, name, kind, name_c)) < 0)
		goto out;
	if (mode & 06000) {
		rc = fail(t, name, "a setuid or setgid bit (mode %04llo)", (unsigned long long)(mode & 07777));
		goto out;
	}
	if (kind != K_FILE && size) {
		rc = fail(t, name, "a %s with %llu bytes of data", kind == K_DIR ? "directory" : "symbolic link",
			  (unsigned long long)size);
		goto out;
	}
	if (kind == K_SYMLINK) {
		if (!*link) {
			rc = fail(t, name, "a symbolic link with an empty target");
			goto out;
		}
		if (strlen(link) > t->lim.max_name) {
			rc = fail(t, name, "a link target longer than %llu bytes", (unsigned long long)t->lim.max_name);
			goto out;
		}
	}
	if (through_link(t, name_c)) {
		rc = fail(t, name, "its path is or goes through a symbolic link earlier in the archive");
		goto out;
	}
	if (t->stats.members >= t->lim.max_members) {
		rc = fail(t, name, "more than %llu members", (unsigned long long)t->lim.max_members);
		goto out;
	}
	if (t->lim.max_member && size > t->lim.max_member) {
		rc = fail(t, name, "%llu bytes, over the cap of %llu for one member", (unsigned long long)size,
			  (unsigned long long)t->lim.max_member);
		goto out;
	}
	if (t->lim.max_total && size > t->lim.max_total - t->total) {
		rc = fail(t, name, "the archive's data passes the cap of %llu bytes",
			  (unsigned long long)t->lim.max_total);
		goto out;
	}
	if (kind == K_DIR) {
		link_c = malloc(strlen(name_c) + 2);
		if (link_c)
			sprintf(link_c, "%s/", name_c);
	}
	if (kind == K_DIR && !link_c) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		t->state = S_FAILED;
		goto out;
	}
	if (kind == K_SYMLINK && (rc = link_add(t, name_c)) < 0)
		goto out;
	rc = emit_member(t, kind, kind == K_DIR ? link_c : name_c, link, (unsigned)(mode & 0777), size, mtime);
	if (rc < 0)
		goto out;
	t->total += size;
	t->stats.members++;
	if (kind == K_FILE) {
		t->stats.files++;
		t->stats.bytes += size;
	} else if (kind == K_DIR) {
		t->stats.dirs++;
	} else {
		t->stats.symlinks++;
	}
	t->data_left = size;
	t->pad_left = padded(size);
	t->forward = 1;
	t->state = S_DATA;
out:
	free(hname);
	free(hlink);
	free(name_c);
	free(link_c);
	clear_pending(t);
	return rc;
}

/* A pax extended header's records. */
static int pax_records(struct tarcheck *t)
{
	char *p = (char *)t->ext, *end = p + t->ext_len;

	while (p < end) {
		char *sp, *eq, *key, *val;
		uint64_t len = 0;
		int64_t num;

		for (sp = p; sp < end && *sp >= '0' && *sp <= '9'; sp++) {
			len = len * 10 + (uint64_t)(*sp - '0');
			if (len > t->ext_len)
				return fail(t, NULL, "a malformed pax extended header");
		}
		if (sp == p || sp >= end || *sp != ' ' || len > (uint64_t)(end - p) || len < (uint64_t)(sp - p) + 3 ||
		    p[len - 1] != '\n')
			return fail(t, NULL, "a malformed pax extended header");
		key = sp + 1;
		p[len - 1] = '\0';
		eq = memchr(key, '=', (size_t)(p + len - 1 - key));
		if (!eq || eq == key)
			return fail(t, NULL, "a malformed pax extended header");
		*eq = '\0';
		val = eq + 1;
		if (strlen(key) != (size_t)(eq - key))
			return fail(t, NULL, "a malformed pax extended header");
		if (!strcmp(key, "path") || !strcmp(key, "linkpath")) {
			char **dst = key[0] == 'p' ? &t->x_path : &t->x_link;

			if (strlen(val) != (size_t)(p + len - 1 - val))
				return fail(t, NULL, "a NUL byte in a pax %s", key);
			free(*dst);
			if (!(*dst = strdup(val))) {
				t->state = S_FAILED;
				return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			}
		} else if (!strcmp(key, "size")) {
			if (pax_number(val, 0, &num) < 0)
				return fail(t, NULL, "a malformed pax size");
			t->has_x_size = 1;
			t->x_size = (uint64_t)num;
		} else if (!strcmp(key, "mtime")) {
			if (pax_number(val, 1, &num) < 0)
				return fail(t, NULL, "a malformed pax mtime");
			t->has_x_mtime = 1;
			t->x_mtime = num;
		} else if (!strncmp(key, "GNU.sparse.", 11)) {
			return fail(t, NULL, "a sparse file (pax %s)", key);
		}
		p += len;
	}
	return 0;
}

static int ext_done(struct tarcheck *t)
{
	int rc = 0;

	if (t->ext_kind == EXT_PAX) {
		rc = pax_records(t);
	} else {
		/* GNU L/K: the name, NUL-terminated, maybe NUL-padded; nothing after a NUL. */
		size_t len = strnlen((char *)t->ext, t->ext_len);
		char **dst = t->ext_kind == EXT_LONGNAME ? &t->gnu_name : &t->gnu_link;

		for (size_t i = len; i < t->ext_len; i++)
			if (t->ext[i])
				return fail(t, NULL, "a NUL byte in a GNU long %s", t->ext_kind == EXT_LONGNAME ? "name" : "link");
		free(*dst);
		if (!(*dst = malloc(len + 1))) {
			t->state = S_FAILED;
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		memcpy(*dst, t->ext, len);
		(*dst)[len] = '\0';
	}
	free(t->ext);
	t->ext = NULL;
	return rc;
}

static int is_zero(const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static int header(struct tarcheck *t)
{
	const unsigned char *h = t->blk;
	int64_t sum = number(h + 148, 8), size;
	unsigned usum = 0;
	int ssum = 0, gnu;
	char type = (char)h[156];

	if (is_zero(h, BLOCK)) {
		if (pending(t))
			return fail(t, NULL, "an extended header without a member after it");
		t->state = S_ZERO1;
		return 0;
	}
	for (int i = 0; i < BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];

		usum += c;
		ssum += (signed char)c;
	}
	if (sum < 0 || (sum != usum && sum != ssum))
		return fail(t, NULL, "a header with a bad checksum (not a tar archive, or damaged)");
	if (!memcmp(h + 257, "ustar\0" "00", 8))
		gnu = 0;
	else if (!memcmp(h + 257, "ustar  \0", 8))
		gnu = 1;
	else
		return fail(t, NULL, "a header that is neither ustar nor GNU tar");
	switch (type) {
	case '0':
	case '\0':
		return member(t, h, gnu, K_FILE);
	case '5':
		return member(t, h, gnu, K_DIR);
	case '2':
		return member(t, h, gnu, K_SYMLINK);
	case 'x':
	case 'L':
	case 'K':
		size = number(h + 124, 12);
		if (size < 0)
			return fail(t, NULL, "a malformed extended header size");
		if (type == 'x' ? (uint64_t)size > MAX_PAX : (uint64_t)size > t->lim.max_name + 1)
			return fail(t, NULL, type == 'x' ? "a pax extended header over %u bytes"
							 : "a GNU long name or link over %u bytes",
				    type == 'x' ? MAX_PAX : (unsigned)t->lim.max_name);
		t->ext_kind = type == 'x' ? EXT_PAX : type == 'L' ? EXT_LONGNAME : EXT_LONGLINK;
		t->ext_len = (size_t)size;
		t->ext_fill = 0;
		t->pad_left = padded((uint64_t)size);
		if (!(t->ext = malloc(t->ext_len + 1))) {
			t->state = S_FAILED;
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
		t->state = S_EXT;
		return t->ext_len ? 0 : ext_done(t);
	case 'g':
		return fail(t, NULL, "a pax global header (refused)");
	default: {
		static const char *const kinds[] = { ['1'] = "a hard link", ['3'] = "a character device",
						     ['4'] = "a block device", ['6'] = "a fifo",
						     ['7'] = "a contiguous file", ['S'] = "a sparse file" };
		char *nm = t->x_path ? strdup(t->x_path) : t->gnu_name ? strdup(t->gnu_name) : field(h, 100);
		const char *k = (unsigned char)type < sizeof(kinds) / sizeof(kinds[0]) ? kinds[(unsigned char)type] : NULL;
		int rc;

		if (k)
			rc = fail(t, nm ? nm : "?", "%s (only directories, files and symbolic links)", k);
		else
			rc = fail(t, nm ? nm : "?", "an unknown member type 0x%02x", (unsigned char)type);
		free(nm);
		return rc;
	}
	}
}

/* ---- the parser ------------------------------------------------------------ */

int tarcheck_new(struct tarcheck **out, const struct tarcheck_limits *lim, tarcheck_sink sink, void *payload)
{
	struct tarcheck *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (lim)
		t->lim = *lim;
	if (!t->lim.max_members)
		t->lim.max_members = TARCHECK_MAX_MEMBERS;
	if (!t->lim.max_name)
		t->lim.max_name = TARCHECK_MAX_NAME;
	t->sink = sink;
	t->payload = payload;
	*out = t;
	return 0;
}

static int refused_before(void)
{
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_SANDBOX, "archive refused: it was refused before");
}

int tarcheck_feed(struct tarcheck *t, const void *data, size_t len)
{
	const unsigned char *p = data;
	int rc;

	if (t->state == S_FAILED)
		return refused_before();
	if (t->state == S_DONE)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: the archive has ended");
	while (len) {
		size_t n;

		switch (t->state) {
		case S_HEADER:
		case S_ZERO1:
			n = BLOCK - t->fill < len ? BLOCK - t->fill : len;
			memcpy(t->blk + t->fill, p, n);
			t->fill += n;
			p += n;
			len -= n;
			if (t->fill < BLOCK)
				break;
			t->fill = 0;
			if (t->state == S_ZERO1) {
				if (!is_zero(t->blk, BLOCK))
					return fail(t, NULL, "a lone zero block before more members");
				t->state = S_END;
				break;
			}
			if ((rc = header(t)) < 0)
				return rc;
			break;
		case S_EXT:
			if (t->ext_fill < t->ext_len) {
				n = t->ext_len - t->ext_fill < len ? t->ext_len - t->ext_fill : len;
				memcpy(t->ext + t->ext_fill, p, n);
				t->ext_fill += n;
				p += n;
				len -= n;
				if (t->ext_fill == t->ext_len && (rc = ext_done(t)) < 0)
					return rc;
				break;
			}
			n = t->pad_left < len ? (size_t)t->pad_left : len;
			t->pad_left -= n;
			p += n;
			len -= n;
			if (!t->pad_left)
				t->state = S_HEADER;
			break;
		case S_DATA:
			if (t->data_left) {
				n = t->data_left < len ? (size_t)t->data_left : len;
				if ((rc = emit(t, p, n)) < 0)
					return rc;
				t->data_left -= n;
				p += n;
				len -= n;
				if (!t->data_left && (rc = emit_zeros(t, (size_t)t->pad_left)) < 0)
					return rc;
				break;
			}
			n = t->pad_left < len ? (size_t)t->pad_left : len;
			t->pad_left -= n;
			p += n;
			len -= n;
			break;
		case S_END:
			if (!is_zero(p, len))
				return fail(t, NULL, "data after the end-of-archive marker");
			len = 0;
			break;
		default:
			return refused_before();
		}
		if (t->state == S_DATA && !t->data_left && !t->pad_left)
			t->state = S_HEADER;
		else if (t->state == S_EXT && t->ext_fill == t->ext_len && !t->ext && !t->pad_left)
			t->state = S_HEADER;
	}
	/* A member with no data and no padding is complete at once. */
	if (t->state == S_DATA && !t->data_left && !t->pad_left)
		t->state = S_HEADER;
	return 0;
}

int tarcheck_finish(struct tarcheck *t)
{
	int rc;

	if (t->state == S_FAILED)
		return refused_before();
	if (t->state == S_DONE)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: the archive has ended");
	if (t->state != S_END || t->fill)
		return fail(t, NULL, "truncated: the archive ends before its end-of-archive marker");
	if ((rc = emit_zeros(t, 2 * BLOCK)) < 0)
		return rc;
	t->state = S_DONE;
	return 0;
}

const struct tarcheck_stats *tarcheck_stats(const struct tarcheck *t)
{
	return &t->stats;
}

void tarcheck_free(struct tarcheck *t)
{
	if (!t)
		return;
	clear_pending(t);
	free(t->ext);
	for (size_t i = 0; i < t->links_cap; i++)
		free(t->links[i].name);
	free(t->links);
	free(t);
}
