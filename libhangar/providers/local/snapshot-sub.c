/*
 * Snapshots for an unprivileged caller with subordinate ids.
 *
 * Root takes a snapshot with the owners the commands saw and lets each
 * child's jail map them through an idmapped mount. The caller cannot do
 * either: its files would all be its own, and no idmapped mount of the
 * host's file systems is open to it. So a snapshot of such a caller is
 * owned as an image of the caller is: in its image range (image/subids.c),
 * 0 there being the commands' root and 1000 `user`, and every sandbox made
 * from the snapshot runs in that range as the caller's image sandboxes do
 * (hangar-jail's snaplayer.c), its overlays mounted inside its own user
 * namespace. The parent's own slot is freed with it and may go to another
 * sandbox the next moment; the image range is never a `local` sandbox's, so
 * a snapshot outlives its parent without changing hands.
 *
 * The copy is made in a forked child (subids_run, util/subids.c) that is
 * root of a user namespace mapping, through newuidmap and newgidmap:
 *   0..SLOT-1            the image range: what the copy is written as
 *   SLOT                 the caller (the state directory is its)
 *   2*SLOT..             the parent's slot, when it is not the image range,
 *                        so that root there may read every file of the
 *                        parent's, mode 000 or not
 * The library's own process never changes its credentials. The same kind
 * of child removes a snapshot, which the caller alone could not empty.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapshot.h"
#include "util/subids.h"

#define SLOT SUBIDS_SLOT
#define PARENT_AT (2 * SLOT) /* where the parent's slot is in the helper's namespace */
#define MAP_LINES 8

int local_snapshot_sub_ok(const struct local *l)
{
	const char *set = hangar_sys_ctx_setting(l->ctx, "HANGAR_LOCAL_SUBIDS");
	unsigned uid, gid;

	/* Off, the jail gives no sandbox subordinate ids (create.c says the same of images). */
	if (set && (!strcmp(set, "off") || !strcmp(set, "0") || !strcmp(set, "false")))
		return 0;
	return subids_caller_image_range(&uid, &gid) == 0;
}

struct line {
	unsigned in, out, count;
};

/* /proc/PID/NAME (uid_map or gid_map), read from the host: its lines in l. How many, or -1. */
static int read_map(int pid, const char *name, struct line *l)
{
	char path[64], *text, *p;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	text = lstate_read_file(path, 4096, NULL);
	if (!text)
		return -1;
	for (p = text; n < MAP_LINES && sscanf(p, "%u %u %u", &l[n].in, &l[n].out, &l[n].count) == 3; n++) {
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	free(text);
	return n;
}

/*
 * One kind of id (uid or gid): from the sandbox's map (lines, as the host
 * sees them; 0 inside is the caller, the highest id inside is the commands'
 * root), where the parent's ids are in the helper's namespace and what each
 * is written as there. *pbase, *pcount: the parent's host ids to map at
 * PARENT_AT (pcount 0: they are the image range). 0, or -1 with why in msg.
 */
static int plan(const struct line *l, int n, unsigned img, struct lsnap_seg *seg, size_t *nseg, unsigned *pbase,
		unsigned *pcount, char *msg, size_t size)
{
	unsigned top = 0, lo = ~0u, hi = 0;
	int in_img = 1;

	*nseg = 0;
	for (int i = 0; i < n; i++) {
		if (l[i].in == 0 || l[i].count == 0)
			continue;
		if (l[i].in + l[i].count - 1 > top)
			top = l[i].in + l[i].count - 1;
		if (l[i].out < lo)
			lo = l[i].out;
		if (l[i].out + l[i].count - 1 > hi)
			hi = l[i].out + l[i].count - 1;
		if (l[i].out < img || l[i].out + l[i].count > img + SLOT)
			in_img = 0;
	}
	if (top == 0 || top > SLOT || hi - lo >= SLOT || (!in_img && lo < img + SLOT && hi >= img)) {
		snprintf(msg, size, "its ids are not one slot of the caller's subordinate ids");
		return -1;
	}
	*pbase = in_img ? 0 : lo;
	*pcount = in_img ? 0 : hi - lo + 1;
	for (int i = 0; i < n; i++) {
		unsigned from, below;

		if (l[i].in == 0 || l[i].count == 0)
			continue;
		from = in_img ? l[i].out - img : PARENT_AT + (l[i].out - lo);
		/* The commands see inside ids as themselves, but for their root, the highest. */
		below = l[i].in + l[i].count - 1 == top ? l[i].count - 1 : l[i].count;
		if (below)
			seg[(*nseg)++] = (struct lsnap_seg){ from, l[i].in, below };
		if (below < l[i].count)
			seg[(*nseg)++] = (struct lsnap_seg){ from + below, 0, 1 };
	}
	return 0;
}

int local_snapshot_sub_plan(int init, struct lsnap_sub *s, char *msg, size_t size)
{
	struct line u[MAP_LINES], g[MAP_LINES];
	int nu, ng;

	memset(s, 0, sizeof(*s));
	if (subids_caller_image_range(&s->img_uid, &s->img_gid) < 0) {
		snprintf(msg, size, "the caller has no image range in /etc/subuid and /etc/subgid");
		return -1;
	}
	s->ids.nobody = SLOT; /* the caller: nobody to the commands of any sandbox */
	nu = read_map(init, "uid_map", u);
	ng = read_map(init, "gid_map", g);
	if (nu <= 0 || ng <= 0) {
		snprintf(msg, size, "cannot read its id maps");
		return -1;
	}
	if (plan(u, nu, s->img_uid, s->ids.uid, &s->ids.nu, &s->p_uid, &s->p_count, msg, size) < 0 ||
	    plan(g, ng, s->img_gid, s->ids.gid, &s->ids.ng, &s->p_gid, &s->p_gcount, msg, size) < 0)
		return -1;
	if (s->p_count != s->p_gcount) {
		snprintf(msg, size, "its uid and gid slots differ in size");
		return -1;
	}
	return 0;
}

/* What the snapshot says when subids_run stops before fn, and whether the errno's text follows. */
static const struct {
	const char *what;
	int os;
} failed[] = {
	[SUBIDS_PIPE] = { "cannot make a pipe", 1 },
	[SUBIDS_FORK] = { "cannot fork", 1 },
	[SUBIDS_USERNS] = { "cannot make a user namespace", 1 },
	[SUBIDS_MAP] = { "newuidmap or newgidmap refused the caller's subordinate ids", 0 },
	[SUBIDS_ROOT] = { "cannot become root of the snapshot's user namespace", 1 },
	[SUBIDS_DIED] = { "the snapshot's helper process died", 0 },
};

int local_snapshot_sub_run(const struct lsnap_sub *s, int (*fn)(void *arg, char *msg, size_t size), void *arg,
			   char *msg, size_t size)
{
	/* The image range, the caller above it, then the parent's slot when it is not the image range. */
	const struct subids_line uids[] = { { 0, s->img_uid, SLOT },
					    { SLOT, (unsigned)geteuid(), 1 },
					    { PARENT_AT, s->p_uid, s->p_count } };
	const struct subids_line gids[] = { { 0, s->img_gid, SLOT },
					    { SLOT, (unsigned)getegid(), 1 },
					    { PARENT_AT, s->p_gid, s->p_gcount } };
	const struct subids_call c = {
		.uid_map = uids,
		.gid_map = gids,
		.uid_lines = s->p_count ? 3 : 2,
		.gid_lines = s->p_gcount ? 3 : 2,
		.fn = fn,
		.arg = arg,
		.msg = msg,
		.msg_size = size,
	};
	enum subids_step step;
	int rc = subids_run(&c, &step);

	if (step != SUBIDS_RAN && failed[step].os)
		snprintf(msg, size, "%s: %s", failed[step].what, strerror(-rc));
	else if (step != SUBIDS_RAN)
		snprintf(msg, size, "%s", failed[step].what);
	return rc;
}

static int rmtree_fn(void *arg, char *msg, size_t size)
{
	int r = lstate_rmtree_at(AT_FDCWD, arg);

	if (r < 0)
		snprintf(msg, size, "%s", strerror(-r));
	return r;
}

int local_snapshot_sub_rmtree(const char *path)
{
	struct lsnap_sub s = { 0 };
	char msg[256];

	if (subids_caller_image_range(&s.img_uid, &s.img_gid) < 0)
		return -EPERM;
	return local_snapshot_sub_run(&s, rmtree_fn, (void *)path, msg, sizeof(msg));
}
