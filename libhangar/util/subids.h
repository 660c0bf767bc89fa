/*
 * A caller's subordinate ids (/etc/subuid, /etc/subgid), read one way by
 * the library (the image store's unpack, libhangar/image/subids.c) and by
 * hangar-jail (userns.c), so the two cannot disagree on which ids are the
 * caller's, how they are cut in slots, or which slot holds its images.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#define SUBIDS_MIN 1001u  /* the least a range must hold: `user` is 1000 inside */
#define SUBIDS_SLOT 1024u /* one sandbox's ids, 1..1024 inside; the image range is one slot too */
#define SUBIDS_NEWUIDMAP "/usr/bin/newuidmap"
#define SUBIDS_NEWGIDMAP "/usr/bin/newgidmap"

/*
 * "START:COUNT" (a trailing newline allowed) with COUNT >= min, START not 0
 * and the range below 2^32 - 1 (the "no id" value): 0 with *start and
 * *count, else -1.
 */
int subids_parse(const char *s, unsigned min, unsigned *start, unsigned *count);

/*
 * The first range of file ("NAME:START:COUNT" or "UID:START:COUNT" lines)
 * that names the effective user and holds at least min ids: 0 with *start
 * and *count, or -1 (no file, no such line).
 */
int subids_own(const char *file, unsigned min, unsigned *start, unsigned *count);

/*
 * The caller's image range, given its uid and gid ranges: the last slot of
 * SUBIDS_SLOT ids of the smaller, so the slots before it stay for its
 * `local` sandboxes. 0 with the range's first uid and gid, or -1 when the
 * ranges hold fewer than two slots (one for images, one for a sandbox).
 */
int subids_image_range(unsigned us, unsigned uc, unsigned gs, unsigned gc, unsigned *uid, unsigned *gid);

/*
 * The effective user's image range, when it may use its subordinate ids:
 * not root, newuidmap and newgidmap installed, ranges of at least
 * SUBIDS_MIN ids in both files and two slots. 0 with the range's first uid
 * and gid (SUBIDS_SLOT ids each), else -1.
 */
int subids_caller_image_range(unsigned *uid, unsigned *gid);

/* One line of a user namespace's id map: count ids from inside, as outside. */
struct subids_line {
	unsigned inside, outside, count;
};

/*
 * Runs tool (SUBIDS_NEWUIDMAP or SUBIDS_NEWGIDMAP) to write pid's map of n
 * lines (at most 4), its output to /dev/null: 0, or -1 when it could not
 * run or refused (the caller says why, in its own terms).
 */
int subids_map(const char *tool, pid_t pid, const struct subids_line *lines, size_t n);
