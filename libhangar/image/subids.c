/*
 * The image range of an unprivileged caller: where its layers' owners live.
 *
 * A root caller unpacks a layer with the owners its tar gives, and the jail
 * shows those files to each sandbox through idmapped mounts. An unprivileged
 * caller can neither chown nor make idmapped mounts of the host's file
 * systems, but with subordinate ids (/etc/subuid, /etc/subgid and the setuid
 * newuidmap and newgidmap) it can own files through a user namespace. So
 * its layers are unpacked in a child of the library (subids_run, in
 * libhangar/util/subids.c) that enters a user namespace whose ids 0..IMG_SUBIDS_SLOT-1 are the caller's image range and
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/img.h"
#include "util/subids.h"

int img_subids_image(struct img_subids *r)
{
	memset(r, 0, sizeof(*r));
	if (subids_caller_image_range(&r->uid, &r->gid) < 0)
		return -1;
	r->count = IMG_SUBIDS_SLOT;
	return 0;
}

/* What the image store says when subids_run stops before fn, and whether the errno is part of it. */
static const struct {
	const char *what;
	int os;
} failed[] = {
	[SUBIDS_PIPE] = { "cannot make a pipe", 1 },
	[SUBIDS_FORK] = { "cannot fork", 1 },
	[SUBIDS_USERNS] = { "cannot make a user namespace for the image's owners", 1 },
	[SUBIDS_MAP] = { "newuidmap or newgidmap refused the caller's image range (see /etc/subuid and /etc/subgid)",
			 0 },
	[SUBIDS_ROOT] = { "cannot become root of the image range's user namespace", 1 },
	[SUBIDS_DIED] = { "the image range's helper process died", 0 },
};

/*
 * fn and its out in the child; back is what returns to the parent: fn's
 * last error, then its out_size bytes of out, so that the caller sees
 * the error fn set, every field of it, as if fn had run in its process.
 */
struct job {
	int (*fn)(void *);
	void *arg, *out;
	size_t out_size;
	unsigned char *back;
};

static int run_job(void *arg, char *msg, size_t size)
{
	struct job *j = arg;
	hangar_sys_saved_error saved;
	int rc = j->fn(j->arg);

	(void)msg;
	(void)size;
	hangar_sys_error_save(&saved);
	memcpy(j->back, &saved, sizeof(saved));
	if (j->out_size)
		memcpy(j->back + sizeof(saved), j->out, j->out_size);
	return rc;
}

int img_subids_run(const struct img_subids *r, int (*fn)(void *), void *arg, void *out, size_t out_size,
		   int (*progress)(uint64_t, void *), void *payload)
{
	/* 0..count-1 the image range, count the caller (the store's directories are its). */
	const struct subids_line uids[] = { { 0, r->uid, IMG_SUBIDS_SLOT }, { IMG_SUBIDS_SLOT, (unsigned)geteuid(), 1 } };
	const struct subids_line gids[] = { { 0, r->gid, IMG_SUBIDS_SLOT }, { IMG_SUBIDS_SLOT, (unsigned)getegid(), 1 } };
	hangar_sys_saved_error saved;
	struct job j = { fn, arg, out, out ? out_size : 0, NULL };
	struct subids_call c = {
		.uid_map = uids,
		.gid_map = gids,
		.uid_lines = 2,
		.gid_lines = 2,
		.fn = run_job,
		.arg = &j,
		.out_size = sizeof(saved) + j.out_size,
		.progress = progress,
		.payload = payload,
	};
	enum subids_step step;
	int rc;

	j.back = malloc(c.out_size);
	if (!j.back)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	c.out = j.back;
	rc = subids_run(&c, &step);
	if (step != SUBIDS_RAN) {
		rc = failed[step].os ? herr_os(HANGAR_EOS, -rc, "%s", failed[step].what)
				     : herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "%s", failed[step].what);
	} else if (rc < 0) {
		memcpy(&saved, j.back, sizeof(saved));
		saved.message[sizeof(saved.message) - 1] = '\0';
		rc = hangar_sys_error_restore(&saved);
	} else if (j.out_size) {
		memcpy(out, j.back + sizeof(saved), j.out_size);
	}
	free(j.back);
	return rc;
}
