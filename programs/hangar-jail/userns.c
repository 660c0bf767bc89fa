/*
 * The host uids and gids behind a sandbox's user namespace.
 *
 * When the jail runs as root, each sandbox gets a range of 65536 host ids of
 * its own (root inside is `base` outside, `user` is base + 1000), so
 * nothing in a sandbox is host root or shares a uid with another sandbox or
 * a host user (which would share RLIMIT_NPROC, keyrings, signals, files).
 *
 * The pool: HANGAR_JAIL_UID_RANGE ("START:COUNT", from the library's
 * HANGAR_LOCAL_UID_RANGE) when set, else the caller's entry in /etc/subuid
 * (by name or uid) when there is one, else DEFAULT_START:DEFAULT_COUNT. gids
 * are the same numbers. The pool is cut in slots of RANGE_SIZE ids; a slot
 * is claimed, as an unprivileged caller's are (below), by an flock() on the
 * file named by its first uid in ~/.local/state/hangar/uids, held by the
 * jail while it lives: every jail of the host's root sees the same claims,
 * whatever state directory it serves, and the kernel lets go of a claim
 * whose jail died however it died. Where root's home cannot hold them, the
 * claims are made the same way in the directory of running sandboxes
 * (.uids), apart from other state directories' only (said).
 *
 * An unprivileged caller can map only ids it was given: its own and, through
 * the setuid newuidmap and newgidmap, its ranges in /etc/subuid and
 * /etc/subgid. With them, id 0 inside is the caller (envd runs as it) and
 * every other id inside, `user` among them, is one of the caller's
 * subordinate ids, which share nothing with the caller. Those ranges are cut
 * in slots of SUB_SLOT ids (1..1024 inside: root, `user` 1000, system ids
 * below it, the sandbox's root at 1024; nobody, 65534, is not mapped), one
 * per running sandbox, so that no two sandboxes share a uid and with it the
 * kernel's per-user counts (pipe buffers, key quotas, RLIMIT_NPROC before
 * Linux 5.14) or each other's files. The usual 65536 ids make 64 slots; a
 * range smaller than SUB_SLOT is one slot. When every slot is in use the
 * sandbox is refused, as a root caller's is when its pool is used up: it
 * never shares. A slot is claimed by an flock() on the file named by its
 * first uid in ~/.local/state/hangar/subids (the home directory from the
 * password database), which the jail holds for as long as it lives and the
 * kernel lets go of when it dies: every jail of the caller sees the same
 * claims, whatever state directory it serves and however it ended.
 *
 * The last of those slots is kept out of that count: it is the caller's
 * image range (uid_range_image), which the library unpacks its layers into
 * (libhangar/image/subids.c computes the same slot through util/subids.c).
 * Every image sandbox of the caller maps it, unclaimed, as its ids 1..1024
 * with the range's first id (the image's root, owner of its files) as
 * 1024, the commands' root: image sandboxes share their ids with each other,
 * never with the caller nor with a `local` sandbox. So a caller with
 * subordinate ids has one slot fewer for `local` sandboxes (63 of the
 * usual 65536 ids) and needs at least two slots for an image sandbox.
 *
 * Either way, envd is root of that namespace and nothing else is: commands
 * run in a second namespace below it (uid_range_inner), where every id is
 * the same but root, which is the first namespace's highest id (top). So the
 * sandbox's root, like its user, is another uid than envd, and its
 * capabilities hold over the second namespace only: it can neither signal,
 * trace nor read envd, nor enter envd's socket directory (envd's uid's,
 * which the second namespace does not map). This is how the host keeps a
 * root caller's jails from host root, one level down.
 *
 * Without subordinate ids an unprivileged caller has one uid to give, and
 * one uid cannot be made two: the sandbox runs as the caller alone (bwrap's
 * own user namespace), `user` is envd's uid, and envd refuses commands as
 * root (-single-uid), which would be envd itself under root's name.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"
#include "subids.h"

#define RANGE_SIZE 65536u
#define DEFAULT_START 1000000000u
#define DEFAULT_COUNT (1024u * RANGE_SIZE)

/* The slot this jail claimed (root's, or an unprivileged caller's): its lock, held until the jail ends. */
static int slot_lock = -1;


static void pool(unsigned *start, unsigned *count)
{
	const char *set = getenv("HANGAR_JAIL_UID_RANGE");

	if (set && *set && subids_parse(set, RANGE_SIZE, start, count) == 0)
		return;
	if (set && *set)
		say("HANGAR_JAIL_UID_RANGE \"%s\" is not START:COUNT (START > 0, COUNT >= %u); using the default",
		    set, RANGE_SIZE);
	if (subids_own("/etc/subuid", RANGE_SIZE, start, count) == 0)
		return;
	*start = DEFAULT_START;
	*count = DEFAULT_COUNT;
}

#define NEWUIDMAP SUBIDS_NEWUIDMAP
#define NEWGIDMAP SUBIDS_NEWGIDMAP

unsigned uid_range_nproc;

/* The caller's subordinate uid and gid ranges, when it may use them. 0 or -1. */
static int subids(unsigned *us, unsigned *uc, unsigned *gs, unsigned *gc)
{
	const char *set = getenv("HANGAR_JAIL_SUBIDS");

	/* HANGAR_JAIL_SUBIDS (the library's HANGAR_LOCAL_SUBIDS): off turns them down. */
	if (set && (!strcmp(set, "off") || !strcmp(set, "0") || !strcmp(set, "false")))
		return -1;
	if (access(NEWUIDMAP, X_OK) < 0 || access(NEWGIDMAP, X_OK) < 0 ||
	    subids_own("/etc/subuid", SUB_MIN, us, uc) < 0 || subids_own("/etc/subgid", SUB_MIN, gs, gc) < 0)
		return -1;
	return 0;
}

int uid_range_planned(void)
{
	unsigned us, uc, gs, gc;

	return geteuid() == 0 || subids(&us, &uc, &gs, &gc) == 0;
}

/* ~/.local/state/hangar/<name>, made 0700 where missing, as a directory descriptor. -errno on failure. */
static int slots_dir(const char *name, char *path, size_t size)
{
	const char *const parts[] = { ".local", "state", "hangar", name };
	struct passwd *pw = getpwuid(geteuid());
	struct stat st;
	int fd;

	if (!pw || pw->pw_dir[0] != '/' || snprintf(path, size, "%s", pw->pw_dir) >= (int)size)
		return -ENOENT;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t n = strlen(path);

		if (snprintf(path + n, size - n, "/%s", parts[i]) >= (int)(size - n))
			return -ENAMETOOLONG;
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Only the caller may take or free a claim there. */
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/*
 * Claims the first free one of slots slots of size ids from first, in the
 * directory dfd (closed here; a negative dfd is returned as it is): its
 * index, or -errno (-ENOSPC: none free).
 */
static int slot_claim(int dfd, unsigned first, unsigned slots, unsigned size)
{
	int rc = -ENOSPC;

	if (dfd < 0)
		return dfd;
	for (unsigned n = 0; n < slots; n++) {
		char file[16];
		int fd;

		snprintf(file, sizeof(file), "%u", first + n * size);
		fd = openat(dfd, file, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			rc = -errno;
			break;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			slot_lock = fd;
			rc = (int)n;
			break;
		}
		close(fd); /* EWOULDBLOCK: another sandbox's */
	}
	close(dfd);
	return rc;
}

/* fallback/.uids, made 0700 where missing, as a directory descriptor. -errno on failure. */
static int fallback_dir(const char *fallback, char *path, size_t size)
{
	int fd;

	if (snprintf(path, size, "%s/.uids", fallback) >= (int)size)
		return -ENAMETOOLONG;
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int uid_range_claim(const char *fallback, struct uid_range *r)
{
	unsigned start, count;
	char dir[PATH_MAX];
	int n, dfd;

	r->slot = -1;
	pool(&start, &count);
	dfd = slots_dir("uids", dir, sizeof(dir));
	if (dfd < 0) {
		say("cannot use %s for the host's claims on uid ranges (%s): only this state directory's sandboxes "
		    "are kept apart", dir, strerror(-dfd));
		dfd = fallback_dir(fallback, dir, sizeof(dir));
	}
	n = slot_claim(dfd, start, count / RANGE_SIZE, RANGE_SIZE);
	if (n == -ENOSPC)
		say("every one of the %u uid ranges in %u:%u is in use", count / RANGE_SIZE, start, count);
	else if (n < 0)
		say("cannot claim a uid range in %s: %s", dir, strerror(-n));
	if (n < 0)
		return n;
	r->slot = n;
	r->base = start + (unsigned)n * RANGE_SIZE;
	r->count = RANGE_SIZE;
	return 0;
}

void uid_range_release(const struct uid_range *r)
{
	if (!r->sub && r->slot < 0)
		return;
	if (slot_lock >= 0)
		close(slot_lock); /* the file stays, for the next claim */
	slot_lock = -1;
}

int uid_range_subids(struct uid_range *r)
{
	unsigned us, uc, gs, gc, count, size;
	char dir[PATH_MAX];
	int n;

	memset(r, 0, sizeof(*r));
	r->slot = -1;
	if (subids(&us, &uc, &gs, &gc) < 0)
		return -1;
	count = uc < gc ? uc : gc;
	size = count < SUB_SLOT ? count : SUB_SLOT;
	/* The last slot is the image range (above) when there are two or more. */
	if (count / size >= 2)
		count -= size;
	r->sub = 1;
	n = slot_claim(slots_dir("subids", dir, sizeof(dir)), us, count / size, size);
	if (n < 0) {
		/* count 0: uid_range_map refuses, so the sandbox does not start. */
		if (n == -ENOSPC)
			say("each of the %u slots of %u ids in uid %u's subordinate ranges (%u:%u, gids %u:%u) is another "
			    "running sandbox's: not starting one more (a sandbox needs %u ids of each; larger ranges in "
			    "/etc/subuid and /etc/subgid make room)",
			    count / size, size, (unsigned)geteuid(), us, uc, gs, gc, SUB_SLOT);
		else
			say("cannot claim a slot of uid %u's subordinate ids in %s: %s: not starting the sandbox",
			    (unsigned)geteuid(), dir, strerror(-n));
		return 0;
	}
	r->slot = n;
	r->count = size;
	r->base = us + (unsigned)n * size;
	r->gid_base = gs + (unsigned)n * size;
	return 0;
}

int uid_range_image(struct uid_range *r)
{
	unsigned us, uc, gs, gc;

	memset(r, 0, sizeof(*r));
	r->slot = -1;
	if (subids(&us, &uc, &gs, &gc) < 0)
		return -1;
	if (subids_image_range(us, uc, gs, gc, &r->base, &r->gid_base) < 0) {
		say("an image sandbox of an unprivileged caller needs at least %u subordinate uids and gids (one "
		    "slot of %u for its images, one for `local` sandboxes); uid %u has %u:%u and gids %u:%u",
		    2 * SUB_SLOT, SUB_SLOT, (unsigned)geteuid(), us, uc, gs, gc);
		return -1;
	}
	r->sub = 1;
	r->image = 1;
	r->count = SUB_SLOT;
	return 0;
}

/*
 * Runs tool (newuidmap or newgidmap) for pid: 0 -> own, 1.. -> base...;
 * for an image range (image) 1..count-1 -> base + 1.. and count -> base,
 * the image's root. 0 or -errno.
 */
static int run_idmap(const char *tool, pid_t pid, unsigned own, unsigned base, unsigned count, int image)
{
	char spid[16], sown[16], sbase[16], scount[16], sfirst[16], srest[16];
	char *plain[] = { (char *)tool, spid, "0", sown, "1", "1", sbase, scount, NULL };
	char *mapped[] = { (char *)tool, spid, "0", sown, "1", "1", sfirst, srest, scount, sbase, "1", NULL };
	char **argv = image ? mapped : plain;
	int status;
	pid_t p;

	snprintf(spid, sizeof(spid), "%d", (int)pid);
	snprintf(sown, sizeof(sown), "%u", own);
	snprintf(sbase, sizeof(sbase), "%u", base);
	snprintf(scount, sizeof(scount), "%u", count);
	snprintf(sfirst, sizeof(sfirst), "%u", base + 1);
	snprintf(srest, sizeof(srest), "%u", count - 1);
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(tool, argv);
		_exit(127);
	}
	while (waitpid(p, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		say("%s %s 0 %s 1 1 %s %s failed (status %d)", tool, spid, sown, sbase, scount, status);
		return -EPERM;
	}
	return 0;
}

static int write_map(pid_t pid, const char *name, const struct uid_range *r)
{
	char path[64], text[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	snprintf(text, sizeof(text), "0 %u %u\n", r->base, r->count);
	return lstate_write_str(path, text);
}

int uid_range_map(pid_t pid, const struct uid_range *r)
{
	int rc;

	if (r->sub && !r->count) {
		errno = ENOSPC; /* no slot was free (uid_range_subids) */
		return -ENOSPC;
	}
	if (r->sub) {
		rc = run_idmap(NEWUIDMAP, pid, (unsigned)geteuid(), r->base, r->count, r->image);
		if (rc == 0)
			rc = run_idmap(NEWGIDMAP, pid, (unsigned)getegid(), r->gid_base, r->count, r->image);
		return rc;
	}
	rc = write_map(pid, "uid_map", r);
	if (rc == 0)
		rc = write_map(pid, "gid_map", r);
	return rc;
}

unsigned uid_range_top(const struct uid_range *r)
{
	/* Root-caller ranges are 0..count-1 inside; subordinate ones 0 (the caller) and 1..count. */
	return r->sub ? r->count : r->count - 1;
}

/* Writes text to /proc/pid/name. 0 or -1 with errno. */
static int write_proc(pid_t pid, const char *name, const char *text)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return lstate_write_str(path, text) < 0 ? -1 : 0;
}

/*
 * A user namespace whose uid and gid maps are map (as the caller's
 * namespace names ids), held by a child until it is open; made under an
 * RLIMIT_NPROC of nproc (0: the caller's). A descriptor (close-on-exec), or
 * -1 with errno.
 */
static int mapped_userns(const char *map, unsigned nproc)
{
	int up[2], down[2], fd = -1, e = 0, status;
	char path[64], c;
	pid_t p;

	if (pipe2(up, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(down, O_CLOEXEC) < 0) {
		e = errno;
		close(up[0]);
		close(up[1]);
		return errno = e, -1;
	}
	p = fork();
	if (p == 0) {
		/*
		 * Holds the namespace until its parent has it open. Dumpable, so
		 * its /proc entries are its parent's to write. Made under
		 * nproc: the kernel counts every process of the namespace, and
		 * of its parent's root, against the limit its creator had
		 * (Linux 5.14, ucounts), so the limit holds for the whole
		 * sandbox without lowering anyone else's.
		 */
		struct rlimit rl = { nproc, nproc };

		close(up[0]);
		close(down[1]);
		if ((nproc && setrlimit(RLIMIT_NPROC, &rl) < 0) || unshare(CLONE_NEWUSER) < 0 ||
		    prctl(PR_SET_DUMPABLE, 1) < 0 || write(up[1], "u", 1) != 1)
			_exit(1);
		while (read(down[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	if (p < 0) {
		e = errno;
	} else if (read(up[0], &c, 1) != 1) {
		e = ECHILD;
	} else {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)p);
		if (write_proc(p, "uid_map", map) < 0 || write_proc(p, "gid_map", map) < 0 ||
		    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			e = errno;
	}
	close(up[0]);
	close(down[1]);
	if (p > 0)
		while (waitpid(p, &status, 0) < 0 && errno == EINTR)
			;
	if (fd < 0)
		errno = e ? e : EIO;
	return fd;
}

int uid_range_inner(unsigned top)
{
	char map[64];

	if (top < 2)
		return errno = EINVAL, -1;
	/* Root is top; every other id is the same as above. */
	snprintf(map, sizeof(map), "0 %u 1\n1 1 %u\n", top, top - 1);
	return mapped_userns(map, uid_range_nproc);
}

int uid_range_idmap(const struct uid_range *r)
{
	unsigned top = uid_range_top(r);
	char map[96];

	if (r->sub || top < 2)
		return errno = EINVAL, -1;
	/* The commands' namespace as the host sees it: root is base + top, every other id base + itself. */
	snprintf(map, sizeof(map), "0 %u 1\n1 %u %u\n", r->base + top, r->base + 1, top - 1);
	return mapped_userns(map, 0);
}

/* Reads one byte from fd (EOF or an error: -1). */
int wait_byte(int fd)
{
	char c;
	ssize_t n;

	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 ? 0 : -1;
}

/*
 * The child's half of the user namespace: unshare, let the parent write the
 * maps, become root of the namespace.
 */
int enter_userns(int to_parent, int from_parent)
{
	if (unshare(CLONE_NEWUSER) < 0) {
		say("cannot make a user namespace: %s", strerror(errno));
		return -1;
	}
	if (write(to_parent, "u", 1) != 1 || wait_byte(from_parent) < 0) {
		say("the jail did not map the user namespace");
		return -1;
	}
	if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0) {
		say("cannot become root of the sandbox's user namespace: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * As root of the sandbox's user namespace: makes the commands' namespace
 * below it (envd's -userns-fd, on descriptor at), then forbids any further
 * namespace below (the count is the namespace's own; only CAP_SYS_RESOURCE
 * in it could raise it, and the sandbox keeps no such capability and sees
 * /proc read-only).
 */
int inner_userns(const struct uid_range *r, int at)
{
	int fd = uid_range_inner(uid_range_top(r));

	if (fd < 0 || dup2(fd, at) < 0) {
		say("cannot make the commands' user namespace: %s", strerror(errno));
		return -1;
	}
	close(fd);
	fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		say("cannot limit nested user namespaces (the seccomp filter still refuses them): %s",
		    strerror(errno));
	if (fd >= 0)
		close(fd);
	return 0;
}

int uid_range_pick_image(const char *root, const char *id, struct uid_range *r, unsigned *uid, unsigned *gid)
{
	if (geteuid() == 0)
		return uid_range_pick(root, id, r, uid, gid);
	if (uid_range_image(r) < 0) {
		say("sandbox %s: an image sandbox of an unprivileged caller needs subordinate ids (/etc/subuid and "
		    "/etc/subgid, newuidmap and newgidmap, HANGAR_LOCAL_SUBIDS on)",
		    id);
		errno = EPERM;
		return -1;
	}
	*uid = *gid = 1000;
	return 0;
}

int uid_range_owned(const struct uid_range *r)
{
	return r->slot >= 0 || r->sub;
}

/*
 * As root: claims the sandbox's uid range. Unprivileged: the caller's
 * subordinate ids when it has them (the caller is root inside).
 */
int uid_range_pick(const char *root, const char *id, struct uid_range *r, unsigned *uid, unsigned *gid)
{
	int rc;

	if (geteuid() == 0) {
		rc = uid_range_claim(root, r);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		*uid = *gid = 1000;
	} else if (uid_range_subids(r) == 0) {
		if (!r->count) {
			errno = ENOSPC; /* every slot of the caller's subordinate ids is another sandbox's (said) */
			return -1;
		}
		*uid = *gid = 1000;
	} else {
		/* Said, so `hangar sandbox logs` tells why root is refused here. */
		say("sandbox %s has one uid, %u, for envd and every user (no subordinate ids for it: see "
		    "HANGAR_LOCAL_SUBIDS in hangar(1)): commands and file operations as root are refused",
		    id, (unsigned)geteuid());
		*uid = (unsigned)geteuid();
		*gid = (unsigned)getegid();
	}
	return 0;
}
