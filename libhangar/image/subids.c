/*
 * The image range of an unprivileged caller: where its layers' owners live.
 *
 * A root caller unpacks a layer with the owners its tar gives, and the jail
 * shows those files to each sandbox through idmapped mounts. An unprivileged
 * caller can neither chown nor make idmapped mounts of the host's file
 * systems, but with subordinate ids (/etc/subuid, /etc/subgid and the setuid
 * newuidmap and newgidmap) it can own files through a user namespace. So
 * its layers are unpacked in a child of the library that enters a user
 * namespace whose ids 0..IMG_SUBIDS_SLOT-1 are the caller's image range and
 * whose id IMG_SUBIDS_SLOT is the caller (so that root there may write the
 * store's directories, which are the caller's): the image's root owns its
 * files as the range's first id, `user` (1000) as the first + 1000. An
 * owner the range cannot hold is refused naming the member (unpack.c). The
 * library's own process never changes its credentials.
 *
 * The image range is the last slot of SUB_SLOT (1024) ids of the caller's
 * subordinate ranges, as hangar-jail's userns.c cuts them (both through
 * libhangar/util/subids.c, so they cannot disagree); the jail keeps
 * that slot out of the per-sandbox slots of `local` sandboxes and maps it
 * into every image sandbox of the caller, its first id as the commands'
 * root. So the caller's image sandboxes share those ids among themselves,
 * never with the caller nor with its `local` sandboxes.
 *
 * The same namespace removes what such an unpack made (img_rmtree): the
 * caller cannot empty a directory the image's root owns.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/img.h"
#include "util/subids.h"

#define NEWUIDMAP SUBIDS_NEWUIDMAP
#define NEWGIDMAP SUBIDS_NEWGIDMAP

int img_subids_image(struct img_subids *r)
{
	memset(r, 0, sizeof(*r));
	if (subids_caller_image_range(&r->uid, &r->gid) < 0)
		return -1;
	r->count = IMG_SUBIDS_SLOT;
	return 0;
}

/* tool pid 0 first count self count 1: the image range, then the caller above it. 0 or -1. */
static int run_map(const char *tool, pid_t pid, unsigned first, unsigned self)
{
	const struct subids_line lines[] = { { 0, first, IMG_SUBIDS_SLOT }, { IMG_SUBIDS_SLOT, self, 1 } };

	return subids_map(tool, pid, lines, 2);
}

static int read_all(int fd, void *buf, size_t n)
{
	size_t have = 0;

	while (have < n) {
		ssize_t r = read(fd, (char *)buf + have, n - have);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		have += (size_t)r;
	}
	return 0;
}

static void write_all(int fd, const void *buf, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = write(fd, (const char *)buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		done += (size_t)w;
	}
}

/* In the child: the pipes to its parent, for img_subids_progress. */
static int child_up = -1, child_down = -1;

int img_subids_progress(uint64_t bytes, void *payload)
{
	unsigned char msg[1 + sizeof(bytes)] = { 'p' };
	char cancel;

	(void)payload;
	memcpy(msg + 1, &bytes, sizeof(bytes));
	write_all(child_up, msg, sizeof(msg));
	/* A parent that is gone cancels. */
	return read_all(child_down, &cancel, 1) < 0 ? 1 : cancel;
}

/* The child: waits to be mapped, becomes root of the namespace, runs fn, sends its result. Never returns. */
static void __attribute__((noreturn)) child(int up, int down, int (*fn)(void *), void *arg, void *out, size_t out_size)
{
	hangar_sys_saved_error saved;
	char c;
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (unshare(CLONE_NEWUSER) < 0) {
		rc = herr_os(HANGAR_EOS, errno, "cannot make a user namespace for the image's owners");
	} else {
		write_all(up, "u", 1);
		if (read_all(down, &c, 1) < 0)
			rc = herr(HANGAR_EOS, HANGAR_ERRCAT_OS,
				  "newuidmap or newgidmap refused the caller's image range (see /etc/subuid and "
				  "/etc/subgid)");
		else if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0)
			rc = herr_os(HANGAR_EOS, errno, "cannot become root of the image range's user namespace");
		else {
			child_up = up;
			child_down = down;
			rc = fn(arg);
		}
	}
	hangar_sys_error_save(&saved);
	write_all(up, "r", 1);
	write_all(up, &rc, sizeof(rc));
	write_all(up, &saved, sizeof(saved));
	if (out && out_size)
		write_all(up, out, out_size);
	_exit(0);
}

/*
 * Reads the child's messages until its result: progress reports are passed
 * to progress (payload), whose answer (cancel or not) goes back. 0, or -1
 * when the child died first.
 */
static int serve(int up, int down, int (*progress)(uint64_t, void *), void *payload, int *rc)
{
	char type, cancel;
	uint64_t bytes;

	for (;;) {
		if (read_all(up, &type, 1) < 0)
			return -1;
		if (type == 'r')
			return read_all(up, rc, sizeof(*rc));
		if (type != 'p' || read_all(up, &bytes, sizeof(bytes)) < 0)
			return -1;
		cancel = progress && progress(bytes, payload) ? 1 : 0;
		write_all(down, &cancel, 1);
	}
}

int img_subids_run(const struct img_subids *r, int (*fn)(void *), void *arg, void *out, size_t out_size,
		   int (*progress)(uint64_t, void *), void *payload)
{
	hangar_sys_saved_error saved;
	int up[2], down[2], rc, status;
	char c;
	pid_t p;

	if (pipe2(up, O_CLOEXEC) < 0)
		return herr_os(HANGAR_EOS, errno, "cannot make a pipe");
	if (pipe2(down, O_CLOEXEC) < 0) {
		rc = errno;
		close(up[0]);
		close(up[1]);
		return herr_os(HANGAR_EOS, rc, "cannot make a pipe");
	}
	p = fork();
	if (p == 0) {
		close(up[0]);
		close(down[1]);
		child(up[1], down[0], fn, arg, out, out_size);
	}
	close(up[1]);
	close(down[0]);
	if (p < 0) {
		rc = errno;
		close(up[0]);
		close(down[1]);
		return herr_os(HANGAR_EOS, rc, "cannot fork");
	}
	if (read_all(up[0], &c, 1) == 0 && run_map(NEWUIDMAP, p, r->uid, (unsigned)geteuid()) == 0 &&
	    run_map(NEWGIDMAP, p, r->gid, (unsigned)getegid()) == 0) {
		write_all(down[1], "g", 1);
	} else {
		close(down[1]); /* unmapped: the child reads EOF and says so */
		down[1] = -1;
	}
	if (serve(up[0], down[1], progress, payload, &rc) < 0 || read_all(up[0], &saved, sizeof(saved)) < 0 ||
	    (out && out_size && rc >= 0 && read_all(up[0], out, out_size) < 0)) {
		rc = herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "the image range's helper process died");
	} else if (rc < 0) {
		saved.message[sizeof(saved.message) - 1] = '\0';
		rc = hangar_sys_error_restore(&saved);
	}
	close(up[0]);
	if (down[1] >= 0)
		close(down[1]);
	while (waitpid(p, &status, 0) < 0 && errno == EINTR)
		;
	return rc;
}
