/*
 * hangar-jail's ids (programs/hangar-jail/userns.c) for an unprivileged
 * caller with subordinate ids: each sandbox claims a slot of SUB_SLOT ids of
 * the caller's /etc/subuid and /etc/subgid ranges, no two claims overlap,
 * a claim ends with its holder, and with every slot held the next sandbox
 * is refused rather than given a shared one; the last slot, the image
 * range, is never claimed.
 *
 * Run as the test user `user` with the host's real /etc/subuid, newuidmap
 * and home directory (where the slots' locks are): skipped when not started
 * as root or when `user` has no subordinate ids. Other sandboxes of `user`
 * running meanwhile hold slots too; the assertions allow for them.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

/* util.c's, which this test does not link: the last message said. */
static char said[1024];

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(said, sizeof(said), fmt, ap);
	va_end(ap);
}

/* Becomes `user`; 0 when that cannot be (not root, no such user, no subordinate ids for it). */
static int become_user(void)
{
	struct passwd *pw = getpwnam("user");
	struct uid_range r;

	if (geteuid() != 0 || !pw)
		return 0;
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid), 0);
	ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid), 0);
	unsetenv("HANGAR_JAIL_SUBIDS");
	if (!uid_range_planned() || uid_range_subids(&r) != 0)
		return 0;
	uid_range_release(&r);
	return 1;
}

#define MAX_CLAIMS 64

START_TEST(slots_disjoint_then_refused)
{
	static struct uid_range r[MAX_CLAIMS + 1];
	int got = 0;

	if (!become_user())
		return;
	/* Each claim holds its slot's lock (a descriptor of its own) until released or this process ends. */
	for (; got <= MAX_CLAIMS; got++) {
		ck_assert_int_eq(uid_range_subids(&r[got]), 0);
		ck_assert_int_eq(r[got].sub, 1);
		if (r[got].count == 0)
			break;
	}
	ck_assert_msg(got >= 1 && got <= MAX_CLAIMS, "%d claims", got);
	for (int i = 0; i < got; i++) {
		ck_assert_uint_le(r[i].count, SUB_SLOT);
		ck_assert_uint_ge(r[i].count, SUB_MIN);
		ck_assert_int_ge(r[i].slot, 0);
		/* Slot n is n * size from the range's start, in uids and gids alike. */
		ck_assert_uint_eq(r[i].base - r[0].base + r[0].slot * r[0].count, (unsigned)r[i].slot * r[i].count);
		ck_assert_uint_eq(r[i].gid_base - r[i].base, r[0].gid_base - r[0].base);
		ck_assert_uint_eq(uid_range_top(&r[i]), r[i].count);
		for (int j = 0; j < i; j++)
			ck_assert_msg(r[i].base + r[i].count <= r[j].base || r[j].base + r[j].count <= r[i].base,
				      "claims %d and %d overlap: %u+%u, %u+%u", i, j, r[i].base, r[i].count, r[j].base,
				      r[j].count);
	}
	/* Every slot held: refused, and said why; mapping it fails rather than share. */
	ck_assert_uint_eq(r[got].count, 0);
	ck_assert_int_eq(r[got].slot, -1);
	ck_assert_msg(strstr(said, "slots of") && strstr(said, "not starting one more"), "said: %s", said);
	ck_assert_int_eq(uid_range_map(getpid(), &r[got]), -ENOSPC);
	/* The last claim let go: its slot is the one the next sandbox gets. */
	uid_range_release(&r[got - 1]);
	ck_assert_int_eq(uid_range_subids(&r[got]), 0);
	ck_assert_uint_eq(r[got].base, r[got - 1].base);
}
END_TEST

/* A claim ends with its holder, however it ends: a slot taken by a process that died is free again. */
START_TEST(slot_freed_when_holder_dies)
{
	struct uid_range mine, again;
	int p[2], status;
	unsigned base;
	pid_t child;

	if (!become_user())
		return;
	ck_assert_int_eq(pipe(p), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		struct uid_range r;

		close(p[0]);
		if (uid_range_subids(&r) != 0 || !r.count || write(p[1], &r.base, sizeof(r.base)) != sizeof(r.base))
			_exit(1);
		_exit(0); /* without releasing */
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &base, sizeof(base)), (ssize_t)sizeof(base));
	close(p[0]);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* The lowest free slot: the dead child's, unless a lower one was freed meanwhile. */
	ck_assert_int_eq(uid_range_subids(&mine), 0);
	ck_assert_uint_ne(mine.count, 0);
	ck_assert_uint_le(mine.base, base);
	uid_range_release(&mine);
	ck_assert_int_eq(uid_range_subids(&again), 0);
	ck_assert_uint_eq(again.base, mine.base);
}
END_TEST

/* HANGAR_JAIL_SUBIDS=off: no subordinate ids, so no user namespaces of the jail's for this caller. */
/* The image range (the last slot) is every image sandbox's, unclaimed; no `local` sandbox ever gets it. */
START_TEST(image_range_never_claimed)
{
	static struct uid_range r[MAX_CLAIMS + 1];
	struct uid_range img, again;
	unsigned start;
	int got = 0;

	if (!become_user())
		return;
	ck_assert_int_eq(uid_range_image(&img), 0);
	ck_assert_int_eq(img.sub, 1);
	ck_assert_int_eq(img.image, 1);
	ck_assert_int_eq(img.slot, -1);
	ck_assert_uint_eq(img.count, SUB_SLOT);
	ck_assert_uint_eq(uid_range_top(&img), SUB_SLOT);
	/* Not a claim: a second image sandbox gets the same range. */
	ck_assert_int_eq(uid_range_image(&again), 0);
	ck_assert_uint_eq(again.base, img.base);
	ck_assert_uint_eq(again.gid_base, img.gid_base);
	for (; got <= MAX_CLAIMS; got++) {
		ck_assert_int_eq(uid_range_subids(&r[got]), 0);
		if (r[got].count == 0)
			break;
	}
	ck_assert_msg(got >= 1 && got < MAX_CLAIMS, "%d claims", got);
	start = r[0].base - (unsigned)r[0].slot * r[0].count;
	/* The last slot of the ranges, in uids and gids alike. */
	ck_assert_uint_eq((img.base - start) % SUB_SLOT, 0);
	ck_assert_uint_eq(img.gid_base - img.base, r[0].gid_base - r[0].base);
	for (int i = 0; i < got; i++)
		ck_assert_msg(r[i].base + r[i].count <= img.base, "claim %d (%u+%u) reaches the image range at %u", i,
			      r[i].base, r[i].count, img.base);
	for (int i = 0; i < got; i++)
		uid_range_release(&r[i]);
}
END_TEST

START_TEST(subids_off)
{
	struct uid_range r;

	if (!become_user())
		return;
	setenv("HANGAR_JAIL_SUBIDS", "off", 1);
	ck_assert_int_eq(uid_range_planned(), 0);
	ck_assert_int_eq(uid_range_subids(&r), -1);
	ck_assert_int_eq(r.sub, 0);
}
END_TEST

static Suite *userns_suite(void)
{
	Suite *s = suite_create("jail-userns");
	TCase *tc = tcase_create("subids");

	tcase_add_test(tc, slots_disjoint_then_refused);
	tcase_add_test(tc, slot_freed_when_holder_dies);
	tcase_add_test(tc, image_range_never_claimed);
	tcase_add_test(tc, subids_off);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(userns_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
