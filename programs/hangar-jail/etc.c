/*
 * The sandbox's /etc: a directory of its own, never the host's /etc with
 * single files bound over it. A bind mount of one host file disappears from
 * a running sandbox as soon as the host replaces that file by rename (as
 * useradd does with /etc/passwd), which would show the host's users and
 * password hashes through. Here:
 *   - passwd and group are the sandbox's own (root, user, nobody);
 *   - shadow, gshadow, their backups, subuid and subgid do not exist;
 *   - hostname and hosts name the sandbox; resolv.conf names slirp4netns's resolver
 *     (network on) or does not exist (off);
 *   - the host's other world-readable regular files (up to COPY_MAX) and
 *     symbolic links are copies;
 *   - the host's subdirectories show as they are on the host (a directory
 *     keeps showing when files in it are replaced).
 *
 * Copying the host's files and making the mount points took most of a
 * create's time (about 20 ms of directory and file creation on a disk), and
 * every sandbox made the same copy. So the copy is made once, as a template
 * shared read-only by every sandbox started while the host's /etc stays as
 * it was: ROOT/.etc/<fingerprint>-<on|off>, where the fingerprint covers each
 * entry's name, type, mode, size, inode, change and modification times
 * (and a link's target), and the network (on or off: resolv.conf or not) names
 * it too. A host change makes a new template for the sandboxes started after
 * it; a running sandbox keeps the copies it started with. Only what is the
 * sandbox's own is written per sandbox (passwd, group, hostname, hosts,
 * resolv.conf): into the stage's memory (stage.c), else DIR/rootfs/etc.
 *
 * How they are put together:
 *   - staged, where overlayfs can be mounted: one read-only overlay of the
 *     own files, with a whiteout over every name hidden from the host's
 *     (etc_hidden: the names above, whether the host has them or not, and
 *     what the template leaves out), over the template, over the host's
 *     /etc. The host's directories show through, and so does a file the
 *     host adds to the top of /etc while the sandbox runs, under the host's
 *     permissions; one mount where binds took some tens;
 *   - else binds: the own files over the template's empty placeholders, the
 *     host's subdirectories over its empty mount points (etc_host_dirs).
 *
 * A template is built under a temporary name and renamed into place, so a
 * name in ROOT/.etc is always a whole template. Each jail holds a shared
 * flock on the template it uses for as long as it lives; building a new
 * template removes the old ones nobody holds (an exclusive flock that
 * succeeds at once), and what a killed builder left.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/file.h>
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

int write_text_at(int dirfd, const char *name, const char *text)
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

/*
 * The sandbox's own files, bound over the template's placeholders: staged,
 * written by the child into the stage's memory file system (stage.c), else
 * to DIR/rootfs/etc. Files made on the state directory's disk cost an inode
 * each, and a disk file system where sandboxes come and go fast takes its
 * time to find a free one.
 */
static const char *const own[] = { "passwd", "group", "hostname", "hosts", "resolv.conf" };
#define OWN_COUNT(network) (sizeof(own) / sizeof(own[0]) - ((network) ? 0 : 1))
#define OWN_MAX (sizeof(own) / sizeof(own[0]))
static char *own_text[OWN_MAX];

/* The template this jail uses (etc_template()), and its shared lock, held until the jail ends. */
static char template_path[PATH_MAX];
static int template_lock = -1;

/* What a template's layout is: 2, its directories with the host's owners and modes (1: all 0755). */
#define TEMPLATE_LAYOUT 2

/* The host's /etc entries a template holds, with the fingerprint of all of them. */
struct entry {
	char name[256];
	struct stat st;
	char *target; /* a symbolic link's */
};
struct host_etc {
	struct entry *e;
	size_t n, cap;
	uint64_t fingerprint;
	char **dropped; /* entries left out of a template: unreadable, too big, neither file, link nor directory */
	size_t n_dropped, cap_dropped;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

static uint64_t entry_hash(const struct entry *e)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	int64_t t[8] = {
		(int64_t)e->st.st_mode, (int64_t)e->st.st_size, (int64_t)e->st.st_ino, (int64_t)e->st.st_dev,
		(int64_t)e->st.st_mtim.tv_sec, (int64_t)e->st.st_mtim.tv_nsec, (int64_t)e->st.st_ctim.tv_sec,
		(int64_t)e->st.st_ctim.tv_nsec,
	};

	h = fnv(h, e->name, strlen(e->name) + 1);
	h = fnv(h, t, sizeof(t));
	if (e->target)
		h = fnv(h, e->target, strlen(e->target) + 1);
	return h;
}

static void host_etc_free(struct host_etc *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->e[i].target);
	free(h->e);
	h->e = NULL;
	h->n = h->cap = 0;
	for (size_t i = 0; i < h->n_dropped; i++)
		free(h->dropped[i]);
	free(h->dropped);
	h->dropped = NULL;
	h->n_dropped = h->cap_dropped = 0;
}

/* Notes name as an entry of the host's /etc a template leaves out. 0 or -ENOMEM. */
static int host_etc_drop(struct host_etc *h, const char *name)
{
	if (h->n_dropped == h->cap_dropped) {
		size_t cap = h->cap_dropped ? 2 * h->cap_dropped : 16;
		char **nd = realloc(h->dropped, cap * sizeof(*nd));

		if (!nd)
			return -ENOMEM;
		h->dropped = nd;
		h->cap_dropped = cap;
	}
	if (!(h->dropped[h->n_dropped] = strdup(name)))
		return -ENOMEM;
	h->n_dropped++;
	return 0;
}

/*
 * Reads what of the host's /etc a template holds into h, with its
 * fingerprint (entries combined by sum: readdir's order does not matter),
 * which starts from TEMPLATE_LAYOUT so that a template laid out by an
 * older jail is not taken for one of this layout. 0 or -errno; no /etc at
 * all is an empty one.
 */
static int host_etc_read(struct host_etc *h)
{
	int in = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	DIR *d = in >= 0 ? fdopendir(in) : NULL;
	struct dirent *de;

	h->fingerprint = UINT64_C(0x9e3779b97f4a7c15) + TEMPLATE_LAYOUT;
	if (!d) {
		if (in >= 0)
			close(in);
		return 0;
	}
	while ((de = readdir(d))) {
		struct entry e = { 0 };

		if (is_skipped(de->d_name) || fstatat(in, de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISLNK(e.st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlinkat(in, de->d_name, target, sizeof(target) - 1);

			if (n <= 0) {
				if ((rc = host_etc_drop(h, de->d_name)) < 0)
					break;
				continue;
			}
			target[n] = '\0';
			if (!(e.target = strdup(target))) {
				rc = -ENOMEM;
				break;
			}
		} else if (!S_ISDIR(e.st.st_mode) &&
			   !(S_ISREG(e.st.st_mode) && (e.st.st_mode & S_IROTH) && e.st.st_size <= COPY_MAX)) {
			if ((rc = host_etc_drop(h, de->d_name)) < 0)
				break;
			continue;
		}
		memcpy(e.name, de->d_name, strlen(de->d_name) + 1);
		if (h->n == h->cap) {
			size_t cap = h->cap ? 2 * h->cap : 64;
			struct entry *ne = realloc(h->e, cap * sizeof(*ne));

			if (!ne) {
				free(e.target);
				rc = -ENOMEM;
				break;
			}
			h->e = ne;
			h->cap = cap;
		}
		h->e[h->n++] = e;
		h->fingerprint += entry_hash(&e);
	}
	closedir(d);
	return rc;
}

/* Removes dir's entries (a template's: files, links, empty mount points) and dir itself in parent. */
static void remove_template(int parent, const char *name)
{
	DIR *d = lstate_opendir_at(parent, name);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno == EISDIR)
				unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	closedir(d);
	unlinkat(parent, name, AT_REMOVEDIR);
}

/* Fills the new template dir (a directory descriptor) from h. 0 or -errno. */
static int template_fill(int dir, const struct host_etc *h, int network)
{
	int in = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	for (size_t i = 0; rc == 0 && i < OWN_COUNT(network); i++)
		rc = write_text_at(dir, own[i], "");
	for (size_t i = 0; rc == 0 && i < h->n; i++) {
		const struct entry *e = &h->e[i];

		if (S_ISLNK(e->st.st_mode)) {
			if (symlinkat(e->target, dir, e->name) < 0)
				rc = -errno;
		} else if (S_ISDIR(e->st.st_mode)) {
			/*
			 * With the host's owner (where this uid may give it) and
			 * mode: through the overlay the sandbox sees this
			 * directory's over the host's contents, and a 0755 one
			 * would open what the host keeps closed, and the files in it.
			 */
			if (mkdirat(dir, e->name, 0700) < 0 ||
			    (fchownat(dir, e->name, e->st.st_uid, e->st.st_gid, AT_SYMLINK_NOFOLLOW) < 0 &&
			     errno != EPERM) ||
			    fchmodat(dir, e->name, e->st.st_mode & 07777, 0) < 0)
				rc = -errno;
		} else if (in >= 0) {
			rc = copy_file(in, e->name, dir, &e->st);
		}
	}
	if (in >= 0)
		close(in);
	if (rc == 0 && fchmod(dir, 0755) < 0)
		rc = -errno;
	return rc;
}

/*
 * Removes the templates of cache (a directory descriptor) for the same
 * network as keep that nobody holds, but keep, and what killed builders left.
 */
static void templates_collect(int cache, const char *keep)
{
	const char *kind = strrchr(keep, '-');

	DIR *d = lstate_opendir_at(cache, ".");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		int t;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, keep))
			continue;
		if (de->d_name[0] == '.') {
			/* A builder's temporary: in progress when recent, left by a killed jail otherwise. */
			if (fstatat(cache, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    (intmax_t)st.st_mtim.tv_sec + 600 < (intmax_t)(clock_wall_us() / 1000000))
				remove_template(cache, de->d_name);
			continue;
		}
		if (!kind || strlen(de->d_name) < strlen(kind) ||
		    strcmp(de->d_name + strlen(de->d_name) - strlen(kind), kind))
			continue;
		t = openat(cache, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (t < 0)
			continue;
		if (flock(t, LOCK_EX | LOCK_NB) == 0) {
			char dead[300];

			/* Out of the way first: a jail that opens the name now finds it gone and builds anew. */
			snprintf(dead, sizeof(dead), ".dead-%.200s-%ld", de->d_name, (long)getpid());
			if (renameat(cache, de->d_name, cache, dead) == 0)
				remove_template(cache, dead);
		}
		close(t);
	}
	closedir(d);
}

/* Opens cache/name and takes its shared lock, if it is (still) a whole template there. fd, or -1. */
static int template_hold(int cache, const char *name)
{
	struct stat a, b;
	int fd = openat(cache, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -1;
	/* Taken, then checked: a collector renames the name away while it holds the lock. */
	if (flock(fd, LOCK_SH) < 0 || fstat(fd, &a) < 0 || fstatat(cache, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The template for the host's /etc as it is now, built when missing; held in template_lock. 0 or -errno. */
static int template_get(const char *root, const struct host_etc *h, int network)
{
	char cache_path[PATH_MAX], name[32], tmp[64];
	int cache = -1, rc = 0, fd = -1;

	snprintf(name, sizeof(name), "%016llx-%s", (unsigned long long)h->fingerprint, network ? "on" : "off");
	if (snprintf(cache_path, sizeof(cache_path), "%s/.etc", root) >= (int)sizeof(cache_path) ||
	    snprintf(template_path, sizeof(template_path), "%s/%s", cache_path, name) >= (int)sizeof(template_path)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if ((mkdir(cache_path, 0755) < 0 && errno != EEXIST) ||
	    (cache = open(cache_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		rc = -errno;
		goto out;
	}
	/* Twice at most: a template collected between our open and our lock is built again. */
	for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
		int t;

		if ((fd = template_hold(cache, name)) >= 0)
			break;
		snprintf(tmp, sizeof(tmp), ".new-%s-%ld", name, (long)getpid());
		remove_template(cache, tmp);
		if (mkdirat(cache, tmp, 0700) < 0 ||
		    (t = openat(cache, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
			rc = -errno;
			goto out;
		}
		rc = template_fill(t, h, network);
		close(t);
		if (rc < 0) {
			remove_template(cache, tmp);
			goto out;
		}
		/* Another jail may have made the same one meanwhile: then its is used and ours dropped. */
		if (renameat(cache, tmp, cache, name) < 0)
			remove_template(cache, tmp);
		else
			templates_collect(cache, name);
	}
	if (fd < 0) {
		rc = -EAGAIN;
		goto out;
	}
	template_lock = fd;
	rc = 0;
out:
	if (cache >= 0)
		close(cache);
	return rc;
}

/*
 * Staged: the host's subdirectories the stage binds into the sandbox's /etc
 * when it cannot lay the template over the host's /etc (etc_host_dirs), and
 * the names it hides from the host's /etc when it can (etc_hidden).
 */
static char **host_dirs, **hidden;
static size_t n_host_dirs, n_hidden;

size_t etc_host_dirs(char *const **names)
{
	*names = host_dirs;
	return n_host_dirs;
}

size_t etc_hidden(char *const **names)
{
	*names = hidden;
	return n_hidden;
}

/* Whether name is one of the sandbox's own files (network: resolv.conf is). */
static int is_own(const char *name, int network)
{
	for (size_t i = 0; i < OWN_COUNT(network); i++)
		if (!strcmp(name, own[i]))
			return 1;
	return 0;
}

/*
 * Keeps the names of h's directories, and the names the sandbox never sees
 * of the host's /etc: every name it never shows (skipped) that is not its
 * own, whether the host has it now or makes it later, and what h left out.
 * 0 or -ENOMEM.
 */
static int keep_names(const struct host_etc *h, int network)
{
	size_t n_skipped = sizeof(skipped) / sizeof(skipped[0]);

	host_dirs = calloc(h->n ? h->n : 1, sizeof(*host_dirs));
	hidden = calloc(n_skipped + h->n_dropped, sizeof(*hidden));
	if (!host_dirs || !hidden)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++)
		if (S_ISDIR(h->e[i].st.st_mode) && !(host_dirs[n_host_dirs++] = strdup(h->e[i].name)))
			return -ENOMEM;
	for (size_t i = 0; i < n_skipped; i++)
		if (!is_own(skipped[i], network) && !(hidden[n_hidden++] = strdup(skipped[i])))
			return -ENOMEM;
	for (size_t i = 0; i < h->n_dropped; i++)
		if (!(hidden[n_hidden++] = strdup(h->dropped[i])))
			return -ENOMEM;
	return 0;
}

const char *etc_template(void)
{
	return template_lock >= 0 ? template_path : NULL;
}

size_t etc_own(int network, const char *const **names)
{
	*names = own;
	return OWN_COUNT(network);
}

const char *etc_own_text(size_t i)
{
	return i < OWN_MAX ? own_text[i] : NULL;
}

/* The text of each own file into own_text, as etc_build writes them. 0 or -errno. */
static int own_texts(const char *id, unsigned uid, unsigned gid, int network)
{
	int n[OWN_MAX];

	n[0] = asprintf(&own_text[0],
			"root:x:0:0:root:/root:/bin/bash\n"
			"user:x:%u:%u:user:/home/user:/bin/bash\n"
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
			uid, gid);
	n[1] = asprintf(&own_text[1], "root:x:0:\nuser:x:%u:\nnogroup:x:65534:\n", gid);
	n[2] = asprintf(&own_text[2], "%s\n", id);
	n[3] = asprintf(&own_text[3], "127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n",
			id);
	/* With network, the resolver slirp4netns forwards to the host's (net.c). */
	n[4] = network ? asprintf(&own_text[4], "nameserver " NET_DNS_ADDR "\n") : 0;
	for (size_t i = 0; i < OWN_MAX; i++)
		if (n[i] < 0) {
			own_text[i] = NULL;
			return -ENOMEM;
		}
	return 0;
}

int etc_build(const char *dir, const char *state, const char *id, unsigned uid, unsigned gid, int network, int stage,
	      struct argv *a)
{
	char path[PATH_MAX];
	struct host_etc h = { 0 };
	int rc;

	snprintf(path, sizeof(path), "%s/rootfs/etc", dir);
	rc = own_texts(id, uid, gid, network);
	if (rc == 0 && !stage) {
		char top[PATH_MAX];
		int out;

		snprintf(top, sizeof(top), "%s/rootfs", dir);
		if ((mkdir(top, 0755) < 0 && errno != EEXIST) || (mkdir(path, 0755) < 0 && errno != EEXIST))
			return -errno;
		out = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (out < 0)
			return -errno;
		for (size_t i = 0; rc == 0 && i < OWN_COUNT(network); i++)
			rc = write_text_at(out, own[i], own_text[i]);
		close(out);
	}
	if (rc == 0)
		rc = host_etc_read(&h);
	if (rc == 0)
		rc = template_get(state, &h, network);
	if (rc == 0 && stage)
		rc = keep_names(&h, network);
	if (rc < 0) {
		host_etc_free(&h);
		return rc;
	}
	/* Staged, the child binds the template and the own files at STAGE/etc (stage.c); else bwrap does. */
	add(a, "--ro-bind");
	if (stage)
		addf(a, "%s/etc", stage_dir());
	else
		add(a, template_path);
	add(a, "/etc");
	for (size_t i = 0; !stage && i < OWN_COUNT(network); i++) {
		add(a, "--ro-bind");
		addf(a, "%s/%s", path, own[i]);
		addf(a, "/etc/%s", own[i]);
	}
	/*
	 * The host's subdirectories over the template's mount points: staged,
	 * the child binds them (stage.c), some tens of binds made read-only at
	 * once, where bwrap would read the mount table and remount for each.
	 */
	for (size_t i = 0; !stage && i < h.n; i++)
		if (S_ISDIR(h.e[i].st.st_mode)) {
			add(a, "--ro-bind");
			addf(a, "/etc/%s", h.e[i].name);
			addf(a, "/etc/%s", h.e[i].name);
		}
	host_etc_free(&h);
	return 0;
}
