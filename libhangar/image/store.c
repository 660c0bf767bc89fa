/*
 * The image store's directory: IMAGE_DIR and its locks, and files
 * written atomically. hangar-images(7) describes the layout.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "image/img.h"
#include "util/sjson.h"

static const char *const subdirs[] = { "blobs", "blobs/sha256", "layers", "images", "tmp", "use" };

int img_store_open(struct img_store *s, hangar_ctx *ctx)
{
	const char *dir = hctx_str(ctx, HS_IMAGE_DIR);
	const char *setting = "HANGAR_IMAGE_DIR";
	struct stat st;
	int rc;

	memset(s, 0, sizeof(*s));
	s->dirfd = s->lockfd = -1;
	if (!dir || !*dir) {
		setting = "HANGAR_STATE_DIR";
		if (snprintf(s->dir, sizeof(s->dir), "%s/images", hctx_str(ctx, HS_STATE_DIR)) >= (int)sizeof(s->dir))
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
	} else if (snprintf(s->dir, sizeof(s->dir), "%s", dir) >= (int)sizeof(s->dir)) {
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_IMAGE_DIR is too long");
	}
	if ((rc = hmkdirs(s->dir, setting)) != 0)
		return rc;
	s->dirfd = open(s->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot open the image store %s", s->dir);
	/* The store holds set-id files of other users' ids: nobody else may reach it. */
	if (fstat(s->dirfd, &st) < 0) {
		rc = herr_os(HANGAR_EOS, errno, "cannot stat the image store %s", s->dir);
		img_store_close(s);
		return rc;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			  "%s: the image store %s must be a directory of this user with mode 0700 (it has %04o, owner %u)",
			  setting, s->dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
		img_store_close(s);
		return rc;
	}
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++)
		if (mkdirat(s->dirfd, subdirs[i], 0700) < 0 && errno != EEXIST) {
			rc = herr_os(HANGAR_EOS, errno, "cannot create %s/%s", s->dir, subdirs[i]);
			img_store_close(s);
			return rc;
		}
	s->cap_bytes = (uint64_t)hctx_int(ctx, HS_IMAGE_CACHE_MB) << 20;
	hproc_identity(s->identity, sizeof(s->identity));
	return 0;
}

void img_store_close(struct img_store *s)
{
	img_store_unlock(s);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->dirfd = -1;
}

int img_store_lock(struct img_store *s)
{
	if (s->lockfd >= 0)
		return 0;
	s->lockfd = openat(s->dirfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lockfd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot open %s/lock", s->dir);
	while (flock(s->lockfd, LOCK_EX) < 0)
		if (errno != EINTR) {
			int e = errno;

			close(s->lockfd);
			s->lockfd = -1;
			return herr_os(HANGAR_EOS, e, "cannot lock %s/lock", s->dir);
		}
	return 0;
}

void img_store_unlock(struct img_store *s)
{
	if (s->lockfd >= 0)
		close(s->lockfd);
	s->lockfd = -1;
}

int img_tmp_dir(struct img_store *s, char *out, size_t size)
{
	static unsigned counter;

	for (int tries = 0; tries < 1000; tries++) {
		snprintf(out, size, "tmp/%s-%u", s->identity, __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
		if (mkdirat(s->dirfd, out, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return herr_os(HANGAR_EOS, errno, "cannot create %s/%s", s->dir, out);
	}
	return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "cannot make a work directory in %s/tmp", s->dir);
}

static int rmtree_here(int at, const char *path)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int fd, rc = 0;

	if (fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(at, path, 0) < 0 && errno != ENOENT ? -errno : 0;
	fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* A directory of mode 0555 in a layer: make it writable to empty it. */
	if ((st.st_mode & 0700) != 0700)
		fchmod(fd, 0700);
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(d)) != NULL) {
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = rmtree_here(dirfd(d), e->d_name);
		if (r < 0 && !rc)
			rc = r;
	}
	closedir(d);
	if (unlinkat(at, path, AT_REMOVEDIR) < 0 && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}

struct rmtree_job {
	int at;
	const char *path;
};

static int rmtree_job(void *arg)
{
	struct rmtree_job *j = arg;

	return rmtree_here(j->at, j->path) < 0 ? -1 : 0;
}

int img_rmtree(int at, const char *path)
{
	struct rmtree_job j = { at, path };
	struct img_subids ids;
	int rc = rmtree_here(at, path);

	/* An unprivileged caller's layer is its image range's: emptied where that range is root (subids.c). */
	if ((rc == -EACCES || rc == -EPERM) && img_subids_image(&ids) == 0)
		rc = img_subids_run(&ids, rmtree_job, &j, NULL, 0, NULL, NULL) == 0 ? 0 : rc;
	return rc;
}

uint64_t img_tree_size(int at, const char *path)
{
	struct stat st;
	struct dirent *e;
	uint64_t total = 0;
	DIR *d;
	int fd;

	if (fstatat(at, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			total += img_tree_size(dirfd(d), e->d_name);
	closedir(d);
	return total;
}

int img_layer_lock(struct img_store *s, const char *hex, int which, int type, int wait)
{
	char path[128];
	struct stat a, b;

	snprintf(path, sizeof(path), "layers/%s.lock", hex);
	for (;;) {
		struct flock fl = { .l_type = (short)type, .l_whence = SEEK_SET, .l_start = which, .l_len = 1 };
		int fd = openat(s->dirfd, path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

		if (fd < 0)
			return -errno;
		while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
			if (errno != EINTR) {
				int e = errno == EACCES || errno == EAGAIN ? EWOULDBLOCK : errno;

				close(fd);
				return -e;
			}
		}
		/* gc unlinks a lock file it holds: ours must still be the linked one. */
		if (fstat(fd, &a) == 0 && fstatat(s->dirfd, path, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev)
			return fd;
		close(fd);
	}
}

void img_layer_lock_sweep(struct img_store *s, const char *hex)
{
	char path[128];
	int fd = img_layer_lock(s, hex, IMG_LOCK_PIN, F_WRLCK, 0);

	if (fd < 0)
		return;
	snprintf(path, sizeof(path), "layers/%s", hex);
	if (faccessat(s->dirfd, path, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		snprintf(path, sizeof(path), "layers/%s.lock", hex);
		unlinkat(s->dirfd, path, 0);
	}
	close(fd);
}

static int read_layer_json(struct img_store *s, const char *hex, uint64_t *size)
{
	char path[128], err[128];
	char *text = NULL;
	size_t len;
	cJSON *root, *v;
	int ok = 0;

	snprintf(path, sizeof(path), "layers/%s/layer.json", hex);
	if (img_read_file(s->dirfd, path, 65536, &text, &len) < 0)
		return 0;
	root = sjson_parse(text, len, 0, err, sizeof(err));
	free(text);
	v = cJSON_GetObjectItemCaseSensitive(root, "size");
	if (cJSON_IsNumber(v) && v->valuedouble >= 0) {
		if (size)
			*size = (uint64_t)v->valuedouble;
		ok = 1;
	}
	cJSON_Delete(root);
	return ok;
}

int img_layer_complete(struct img_store *s, const char *hex, uint64_t *size)
{
	return read_layer_json(s, hex, size);
}

uint64_t img_store_used(struct img_store *s)
{
	uint64_t total = 0, n;
	struct dirent *e;
	DIR *d;
	int fd = openat(s->dirfd, "layers", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d)) != NULL)
		if (img_hex_ok(e->d_name, IMG_HEX_LEN) && read_layer_json(s, e->d_name, &n))
			total += n;
	closedir(d);
	return total;
}

int img_write_atomic(int dirfd, const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[4200];
	const char *p = data;
	int fd, e;

	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
	fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		p += w;
		len -= (size_t)w;
	}
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		goto fail;
	close(fd);
	if (renameat(dirfd, tmp, dirfd, path) < 0) {
		e = errno;
		unlinkat(dirfd, tmp, 0);
		return -e;
	}
	return 0;
fail:
	e = errno;
	close(fd);
	unlinkat(dirfd, tmp, 0);
	return -e;
}

int img_read_file(int dirfd, const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	size_t got = 0;
	char *buf;
	int fd;

	*out = NULL;
	*len = 0;
	fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return -EFBIG;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}
