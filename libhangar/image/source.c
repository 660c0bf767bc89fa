/*
 * Where an import's blobs come from: a layout directory read where it
 * lies (beneath it, regular files only), or an image archive whose regular
 * files are first copied into tmp/ (each name checked, links resolved
 * within the archive); and what an archive is, from its content.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>

#include "image/img.h"

#define ARCHIVE_MAX_MEMBERS 100000u

/* A name made relative and canonical ("./a//b" -> "a/b"); -1 for absolute or "..". */
static int canon(const char *name, char *out, size_t size)
{
	const char *why;

	return img_path_canon(name, out, size, &why) < 0 ? -1 : 0;
}

int img_src_open(struct img_source *s, const char *name, int *fd)
{
	char cur[IMG_MAX_NAME + 1];

	if (canon(name, cur, sizeof(cur)) < 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: the path \"%s\" leaves the image", s->label,
			    name);
	if (!s->archive) {
		/* O_NONBLOCK: a fifo planted as a blob must not hang the import. */
		struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK,
					.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
		long r = syscall(SYS_openat2, s->dirfd, cur, &how, sizeof(how));
		struct stat st;

		if (r >= 0 && (fstat((int)r, &st) < 0 || !S_ISREG(st.st_mode) ||
			       fcntl((int)r, F_SETFL, 0) < 0)) {
			close((int)r);
			return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s is not a regular file", s->label, cur);
		}
		if (r < 0)
			return errno == ENOENT ? herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "%s: %s is missing", s->label,
						      cur)
					       : herr_os(errno == EXDEV || errno == ELOOP ? HANGAR_EREFUSED : HANGAR_EOS,
							 errno, "%s: cannot open %s", s->label, cur);
		*fd = (int)r;
		return 0;
	}
	for (int hops = 0; hops < 16; hops++) {
		struct img_member *m = NULL;

		for (size_t i = s->n; i-- > 0;)
			if (!strcmp(s->m[i].name, cur)) {
				m = &s->m[i];
				break;
			}
		if (!m)
			return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "%s: %s is missing", s->label, cur);
		if (!m->link) {
			char idx[32];

			snprintf(idx, sizeof(idx), "%u", m->idx);
			*fd = openat(s->dirfd, idx, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (*fd < 0)
				return herr_os(HANGAR_EOS, errno, "%s: cannot open the copy of %s", s->label, cur);
			return 0;
		}
		snprintf(cur, sizeof(cur), "%s", m->link);
	}
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s is a loop of links", s->label, name);
}

static int read_fd(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = 65536, got = 0;
	char *buf = malloc(cap + 1);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;

		if (got == cap) {
			char *b;

			if (cap >= max) {
				free(buf);
				return -EFBIG;
			}
			cap *= 2;
			if (!(b = realloc(buf, cap + 1))) {
				free(buf);
				return -ENOMEM;
			}
			buf = b;
		}
		r = read(fd, buf + got, cap - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return -errno;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	if (got > max) {
		free(buf);
		return -EFBIG;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

int img_src_read(struct img_source *s, const char *name, char **text, size_t *len)
{
	int fd, rc = img_src_open(s, name, &fd);

	if (rc)
		return rc;
	rc = read_fd(fd, IMG_JSON_MAX, text, len);
	close(fd);
	if (rc == -EFBIG)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: %s is larger than %u bytes", s->label, name,
			    IMG_JSON_MAX);
	if (rc < 0)
		return herr_os(HANGAR_EOS, -rc, "%s: cannot read %s", s->label, name);
	return 0;
}

/* sha256 and size of what fd holds, read from its start. */
int img_hash_fd(int fd, char digest[80], uint64_t *size)
{
	crypto_hash_sha256_state st;
	unsigned char buf[1 << 16], h[crypto_hash_sha256_BYTES];
	ssize_t r;

	*size = 0;
	crypto_hash_sha256_init(&st);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		crypto_hash_sha256_update(&st, buf, (unsigned long long)r);
		*size += (uint64_t)r;
	}
	crypto_hash_sha256_final(&st, h);
	strcpy(digest, "sha256:");
	sodium_bin2hex(digest + 7, 73, h, sizeof(h));
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
}

void img_hash_bytes(const char *data, size_t len, char digest[80])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, (const unsigned char *)data, len);
	strcpy(digest, "sha256:");
	sodium_bin2hex(digest + 7, 73, h, sizeof(h));
}

void img_source_free(struct img_source *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->m[i].name);
		free(s->m[i].link);
	}
	free(s->m);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->dirfd = -1;
}

/* ---- what an archive is ---------------------------------------------------------------- */

static struct archive *open_archive(int fd)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	archive_read_support_format_tar(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_none(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

int img_classify(int fd, const char *path, enum img_kind *kind)
{
	struct archive *a;
	struct archive_entry *e;
	int manifest = 0, layout = 0, index = 0, r;
	char name[IMG_MAX_NAME + 1];

	if ((r = img_archive_load()) != 0)
		return r;
	a = open_archive(fd);
	if (!a)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s is not a tar archive (plain, gzip or zstd)", path);
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *n = archive_entry_pathname(e);

		if (n && canon(n, name, sizeof(name)) == 0) {
			manifest |= !strcmp(name, "manifest.json");
			layout |= !strcmp(name, "oci-layout");
			index |= !strcmp(name, "index.json");
		}
	}
	if (r != ARCHIVE_EOF) {
		herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s is not a tar archive (plain, gzip or zstd): %s", path,
		     archive_error_string(a) ? archive_error_string(a) : "unreadable");
		archive_read_free(a);
		return HANGAR_EREFUSED;
	}
	archive_read_free(a);
	*kind = manifest ? IMG_KIND_DOCKER : layout && index ? IMG_KIND_LAYOUT : IMG_KIND_ROOTFS;
	return 0;
}

static int add_member(struct img_source *s, const char *name, const char *link, unsigned idx)
{
	struct img_member *m;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;

		if (!(m = realloc(s->m, cap * sizeof(*m))))
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		s->m = m;
		s->cap = cap;
	}
	m = &s->m[s->n];
	m->name = strdup(name);
	m->link = link ? strdup(link) : NULL;
	m->idx = idx;
	if (!m->name || (link && !m->link)) {
		free(m->name);
		free(m->link);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	s->n++;
	return 0;
}

/* Copies an image archive's files into files_dir (dirfd-relative to the store), each checked. */
int img_extract(struct img_store *st, int fd, const char *path, const char *files_dir, struct img_source *s)
{
	struct archive *a;
	struct archive_entry *e;
	char name[IMG_MAX_NAME + 1], target[IMG_MAX_NAME * 2 + 2];
	uint64_t total = 0;
	unsigned idx = 0;
	int r, rc = 0;

	s->archive = 1;
	s->label = path;
	if ((rc = img_archive_load()) != 0)
		return rc;
	a = open_archive(fd);
	if (!a)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s is not a tar archive", path);
	s->dirfd = openat(st->dirfd, files_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dirfd < 0) {
		archive_read_free(a);
		return herr_os(HANGAR_EOS, errno, "cannot open %s/%s", st->dir, files_dir);
	}
	while (!rc && ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN)) {
		const char *raw = archive_entry_pathname(e), *link;
		mode_t type = archive_entry_filetype(e);
		char n[IMG_QUOTE_MAX + 16];

		if (++idx > ARCHIVE_MAX_MEMBERS) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s has more than %u members", path,
				  ARCHIVE_MAX_MEMBERS);
			break;
		}
		img_quote(n, sizeof(n), raw ? raw : "?");
		if (!raw || canon(raw, name, sizeof(name)) < 0) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
				  "%s: member \"%s\" is refused: its path is absolute, has a .. component or is too long",
				  path, n);
			break;
		}
		if ((link = archive_entry_hardlink(e)) != NULL) {
			if (canon(link, target, sizeof(target)) < 0) {
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
					  "%s: member \"%s\" is refused: its link leaves the archive", path, n);
				break;
			}
			rc = add_member(s, name, target, 0);
		} else if (type == AE_IFLNK) {
			const char *to = archive_entry_symlink(e);
			char joined[IMG_MAX_NAME * 2 + 2], *slash;

			/* Relative to the link's directory, within the archive. */
			snprintf(joined, sizeof(joined), "%s", name);
			slash = strrchr(joined, '/');
			if (slash)
				slash[1] = '\0';
			else
				joined[0] = '\0';
			if (!to || to[0] == '/' || strlen(joined) + strlen(to) >= sizeof(joined)) {
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
					  "%s: member \"%s\" is refused: its symlink leaves the archive", path, n);
				break;
			}
			strcat(joined, to);
			/* Resolve ".." lexically; one that climbs above the top is refused. */
			{
				char out[IMG_MAX_NAME * 2 + 2];
				size_t o = 0;
				const char *p = joined;

				while (*p) {
					const char *q = strchr(p, '/');
					size_t len = q ? (size_t)(q - p) : strlen(p);

					if (len == 2 && p[0] == '.' && p[1] == '.') {
						if (!o) {
							rc = -1;
							break;
						}
						while (o && out[o - 1] != '/')
							o--;
						if (o)
							o--;
					} else if (len && !(len == 1 && p[0] == '.')) {
						if (o)
							out[o++] = '/';
						memcpy(out + o, p, len);
						o += len;
					}
					p += len + (p[len] == '/');
				}
				out[o] = '\0';
				if (rc) {
					rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT,
						  "%s: member \"%s\" is refused: its symlink leaves the archive", path, n);
					break;
				}
				rc = add_member(s, name, out, 0);
			}
		} else if (type == AE_IFREG) {
			char file[32];
			const void *buf;
			size_t len;
			la_int64_t off;
			int out;

			snprintf(file, sizeof(file), "%u", idx);
			out = openat(s->dirfd, file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (out < 0) {
				rc = herr_os(HANGAR_EOS, errno, "cannot write %s/%s/%s", st->dir, files_dir, file);
				break;
			}
			while (!rc && (r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
				total += len;
				if (total > st->cap_bytes) {
					rc = herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_ARGUMENT,
						  "%s is larger than the image store (HANGAR_IMAGE_CACHE_MB)", path);
					break;
				}
				if (pwrite(out, buf, len, off) != (ssize_t)len)
					rc = herr_os(HANGAR_EOS, errno, "cannot write %s/%s/%s", st->dir, files_dir, file);
			}
			close(out);
			if (!rc && r != ARCHIVE_EOF)
				rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s: member \"%s\" cannot be read: %s", path,
					  n, archive_error_string(a) ? archive_error_string(a) : "truncated");
			if (!rc)
				rc = add_member(s, name, NULL, idx);
		}
		/* Directories and anything else are not blobs: skipped. */
	}
	if (!rc && r != ARCHIVE_EOF)
		rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_ARGUMENT, "%s is not a valid tar archive: %s", path,
			  archive_error_string(a) ? archive_error_string(a) : "unreadable");
	archive_read_free(a);
	return rc;
}

