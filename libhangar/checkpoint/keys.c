/*
 * Where the checkpoint sealing keys come from: HANGAR_SECRET_KEY, or when it
 * is unset a key generated once into the state directory, plus the previous
 * keys of HANGAR_SECRET_KEY_PREVIOUS that still open older checkpoints.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "seal.h"

#define KEY_HEX 64 /* 32 random bytes, hex */

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0 || fsync(fd) < 0)
		rc = -1;
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Creates the key file once: written under a unique name, then linked into
 * place, so a reader never sees a half-written key and two processes racing
 * end up with the same one (link(2) refuses to replace). */
static int generate(hangar_ctx *ctx, const char *dir, const char *path)
{
	unsigned char raw[KEY_HEX / 2];
	char hex[KEY_HEX + 2], tmp[PATH_MAX];
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, SEAL_KEY_FILE) >= (int)sizeof(tmp))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
	fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL, mode 0600 */
	if (fd < 0)
		return herr_os(HANGAR_EOS, errno, "cannot create a secret key in %s", dir);
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	hex[KEY_HEX] = '\n';
	if (fchmod(fd, 0600) < 0 || write(fd, hex, KEY_HEX + 1) != KEY_HEX + 1 || fsync(fd) < 0)
		rc = herr_os(HANGAR_EOS, errno, "cannot write a secret key in %s", dir);
	sodium_memzero(hex, sizeof(hex));
	close(fd);
	if (rc == 0 && link(tmp, path) < 0 && errno != EEXIST)
		rc = herr_os(HANGAR_EOS, errno, "cannot create %s", path);
	unlink(tmp);
	if (rc == 0) {
		fsync_dir(dir);
		hangar_sys_log(ctx, HANGAR_LOG_INFO,
		     "HANGAR_SECRET_KEY is unset: checkpoints are sealed with the key generated in %s; "
		     "a deployment with several machines must set HANGAR_SECRET_KEY",
		     path);
	}
	return rc;
}

/* Reads the generated key; a file others could read (or not ours) is refused. */
static int read_key_file(const char *path, char hex[KEY_HEX + 1])
{
	char buf[KEY_HEX + 3];
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 1 : herr_os(HANGAR_ECONFIG, errno, "cannot open the secret key %s", path);
	if (fstat(fd, &st) < 0) {
		close(fd);
		return herr_os(HANGAR_EOS, errno, "cannot examine %s", path);
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "the secret key %s is refused: it must be a regular file of this user that no one else "
			    "can read or write (mode 0600, found %04o)",
			    path, (unsigned)(st.st_mode & 07777));
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (n < KEY_HEX || (n == KEY_HEX + 1 && buf[KEY_HEX] != '\n') || n > KEY_HEX + 1 ||
	    strspn(buf, "0123456789abcdef") < KEY_HEX) {
		sodium_memzero(buf, sizeof(buf));
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "the secret key %s is damaged: expected %d hex digits; set HANGAR_SECRET_KEY or restore the "
			    "file",
			    path, KEY_HEX);
	}
	memcpy(hex, buf, KEY_HEX);
	hex[KEY_HEX] = '\0';
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

static int generated_key(struct seal_keyring *kr, hangar_ctx *ctx)
{
	const char *dir = hctx_str(ctx, HS_STATE_DIR);
	char path[PATH_MAX], hex[KEY_HEX + 1];
	int rc;

	if (snprintf(path, sizeof(path), "%s/%s", dir, SEAL_KEY_FILE) >= (int)sizeof(path))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_STATE_DIR is too long");
	if ((rc = hmkdirs(dir, "HANGAR_STATE_DIR")) < 0)
		return rc;
	rc = read_key_file(path, hex);
	if (rc == 1) {
		if ((rc = generate(ctx, dir, path)) < 0)
			return rc;
		rc = read_key_file(path, hex);
		if (rc == 1)
			rc = herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "the secret key %s vanished as it was created", path);
	}
	if (rc == 0)
		rc = seal_keyring_add(kr, hex, KEY_HEX);
	sodium_memzero(hex, sizeof(hex));
	return rc;
}

int seal_keyring_load(struct seal_keyring *kr, hangar_ctx *ctx)
{
	const char *secret = hctx_str(ctx, HS_SECRET_KEY), *prev = hctx_str(ctx, HS_SECRET_KEY_PREVIOUS);
	int rc;

	memset(kr, 0, sizeof(*kr));
	rc = *secret ? seal_keyring_add(kr, secret, strlen(secret)) : generated_key(kr, ctx);
	/* Previous keys only ever open: a comma-separated list, empty items skipped. */
	while (rc == 0 && *prev) {
		size_t n = strcspn(prev, ",");

		if (n)
			rc = seal_keyring_add(kr, prev, n);
		prev += n;
		if (*prev == ',')
			prev++;
	}
	if (rc < 0) {
		seal_keyring_wipe(kr);
		if (rc == HANGAR_EINVAL)
			herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_SECRET_KEY_PREVIOUS lists more than %d keys",
			     SEAL_MAX_KEYS - 1);
		return hangar_error_last()->code;
	}
	return 0;
}
