/*
 * The sandbox's /etc: a directory of its own, never the host's /etc with
 * single files bound over it. A bind mount of one file disappears from a
 * running sandbox as soon as the host replaces that file by rename (as
 * useradd does with /etc/passwd), which would show the host's users and
 * password hashes through. Here:
 *   - passwd and group are the sandbox's own (root, user, nobody);
 *   - shadow, gshadow, their backups, subuid and subgid do not exist;
 *   - hostname and hosts name the sandbox; resolv.conf names slirp4netns's resolver
 *     (network on) or does not exist (off);
 *   - the host's other world-readable regular files (up to COPY_MAX) and
 *     symbolic links are copied when the sandbox starts;
 *   - the host's subdirectories are bound read-only over empty mount points
 *     (a directory keeps its mount when files in it are replaced).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define COPY_MAX (1 << 20)

/* Names that are generated here, or never shown to a sandbox. */
static const char *const skipped[] = {
	"passwd", "passwd-", "group", "group-", "shadow", "shadow-", "gshadow", "gshadow-", "subuid", "subuid-",
	"subgid", "subgid-", "hostname", "hosts", "resolv.conf", ".pwd.lock", "sudoers", "sudoers.d",
};

static int is_skipped(const char *name)
{
	for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++)
		if (!strcmp(name, skipped[i]))
			return 1;
	return name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
}

static int copy_file(int src_dir, const char *name, int dst_dir, const struct stat *st)
{
	int in = openat(src_dir, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), out, rc = 0;
	off_t left = st->st_size;

	if (in < 0)
		return errno == EACCES || errno == ENOENT ? 0 : -errno;
	out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, st->st_mode & 0755);
	if (out < 0) {
		rc = -errno;
		close(in);
		return rc;
	}
	while (left > 0) {
		ssize_t n = sendfile(out, in, NULL, (size_t)left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		left -= n;
	}
	close(in);
	if (close(out) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

static int write_at(int dirfd, const char *name, const char *text)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (close(fd) < 0 || n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	return 0;
}

int etc_build(const char *dir, const char *id, unsigned uid, unsigned gid, int network, struct argv *a)
{
	char path[PATH_MAX], text[1024];
	int out, in, rc = 0;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/rootfs/etc", dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (out < 0)
		return -errno;
	snprintf(text, sizeof(text),
		 "root:x:0:0:root:/root:/bin/bash\n"
		 "user:x:%u:%u:user:/home/user:/bin/bash\n"
		 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		 uid, gid);
	rc = write_at(out, "passwd", text);
	snprintf(text, sizeof(text), "root:x:0:\nuser:x:%u:\nnogroup:x:65534:\n", gid);
	if (rc == 0)
		rc = write_at(out, "group", text);
	snprintf(text, sizeof(text), "%s\n", id);
	if (rc == 0)
		rc = write_at(out, "hostname", text);
	snprintf(text, sizeof(text), "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		 id);
	if (rc == 0)
		rc = write_at(out, "hosts", text);
	/* With network, the resolver slirp4netns forwards to the host's (net.c). */
	if (rc == 0 && network)
		rc = write_at(out, "resolv.conf", "nameserver " NET_DNS_ADDR "\n");
	in = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = in >= 0 ? fdopendir(in) : NULL;
	if (!d) {
		if (in >= 0)
			close(in);
		close(out);
		return rc;
	}
	while (rc == 0 && (de = readdir(d))) {
		struct stat st;
		char target[PATH_MAX];
		ssize_t n;

		if (is_skipped(de->d_name) || fstatat(in, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlinkat(in, de->d_name, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (symlinkat(target, out, de->d_name) < 0 && errno != EEXIST)
				rc = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			if (mkdirat(out, de->d_name, 0755) < 0 && errno != EEXIST) {
				rc = -errno;
				break;
			}
			add(a, "--ro-bind");
			addf(a, "/etc/%s", de->d_name);
			addf(a, "/etc/%s", de->d_name);
		} else if (S_ISREG(st.st_mode) && (st.st_mode & S_IROTH) && st.st_size <= COPY_MAX) {
			rc = copy_file(in, de->d_name, out, &st);
		}
	}
	closedir(d);
	close(out);
	return rc;
}
