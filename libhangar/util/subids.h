/*
 * A caller's subordinate ids (/etc/subuid, /etc/subgid), read one way by
 * the library (the image store's unpack, libhangar/image/subids.c) and by
 * hangar-jail (userns.c), so the two cannot disagree on which ids are the
 * caller's, how they are cut in slots, or which slot holds its images.
 * subids_run is the library's one way to act as those ids: the image store
 * and the local provider's snapshots say only which ids and what to do.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
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

/*
 * What subids_run does: fork a child, have newuidmap and newgidmap give
 * its user namespace these maps (at most 4 lines each), run fn(arg, msg,
 * msg_size) there as root of the namespace and bring its result back.
 *
 * fn returns 0 or more, or a negative errno with why in msg (a string). Its
 * out_size bytes at out (when out is not NULL) come back to the parent's out
 * whenever it ran, whatever it returned. While it runs it may call
 * subids_progress, which calls progress(bytes, payload) in the parent (when
 * progress is not NULL) and returns its answer: non-zero asks fn to stop.
 */
struct subids_call {
	const struct subids_line *uid_map, *gid_map;
	size_t uid_lines, gid_lines;
	int (*fn)(void *arg, char *msg, size_t size);
	void *arg;
	char *msg; /* msg_size bytes (at least 1), or NULL: fn's message is dropped */
	size_t msg_size;
	void *out;
	size_t out_size;
	int (*progress)(uint64_t bytes, void *payload);
	void *payload;
};

/* Where subids_run stopped: fn ran, or the step that failed before it could. */
enum subids_step {
	SUBIDS_RAN,    /* fn ran: the result and msg are its */
	SUBIDS_PIPE,   /* no pipe to the child (-errno) */
	SUBIDS_FORK,   /* no child (-errno) */
	SUBIDS_USERNS, /* the child could make no user namespace (-errno) */
	SUBIDS_MAP,    /* newuidmap or newgidmap refused the maps (-EPERM) */
	SUBIDS_ROOT,   /* the child could not become root of its namespace (-errno) */
	SUBIDS_DIED,   /* the child died before it said how fn did (-EIO) */
};

/*
 * Runs c->fn as described above: fn's result with *step SUBIDS_RAN, or the
 * negative errno the failed step names, msg then empty, so that each caller
 * says what failed in its own terms. The child is reaped before this
 * returns, dies with the calling thread (PR_SET_PDEATHSIG), holds no
 * descriptor of this call past an exec, and never returns from the call:
 * it _exits once it has sent the result.
 */
int subids_run(const struct subids_call *c, enum subids_step *step);

/*
 * In subids_run's child: reports bytes of progress to the parent and waits
 * for its answer, non-zero to stop (also when the parent is gone). Elsewhere
 * it is 0: nothing to report to. payload is unused (a progress callback's
 * shape, so fn can hand it to code that takes one).
 */
int subids_progress(uint64_t bytes, void *payload);
