/*
 * hangar_ctx_reap(): one context of several sharing a store holds the
 * reaper's lease at a time, renews it, gives it up, loses it when it lets
 * it run out; only the holder forgets the records of gone sandboxes. Two
 * contexts on one SQLite state directory stand for two processes (each
 * context has its own instance name and store connection).
 */
#define _GNU_SOURCE
#include <check.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-provider.h"
#include "clock.h"

static char tmpdir[] = "/tmp/hangar-reaper-XXXXXX";
static struct fake fake_a, fake_b;
static hangar_ctx *a, *b;

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static hangar_ctx *open_ctx(struct fake *f, const char *sub)
{
	char state[200];
	hangar_ctx *ctx;

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "%s/%s", tmpdir, sub);
	ck_assert_int_eq(mkdir(f->dir, 0700), 0);
	f->envd = getenv("HANGAR_ENVD");
	ck_assert_msg(f->envd, "HANGAR_ENVD must name the hangar-envd binary");
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(fake_register(ctx, f), "register");
	must(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "fake"), "set provider");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state), "set state dir");
	must(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "a key for the reaper tests, long enough"), "key");
	return ctx;
}

static void setup(void)
{
	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-reaper-XXXXXX")));
	a = open_ctx(&fake_a, "a");
	b = open_ctx(&fake_b, "b");
}

static void teardown(void)
{
	char cmd[300];

	a = hangar_ctx_unref(a);
	b = hangar_ctx_unref(b);
	fake_cleanup(&fake_a);
	fake_cleanup(&fake_b);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

static hangar_reap_result reap(hangar_ctx *ctx, const char *lease, uint32_t seconds)
{
	hangar_reap_result r = HANGAR_REAP_RESULT_INIT;

	must(hangar_ctx_reap(&r, ctx, lease, seconds), "reap");
	ck_assert(r.leader == 0 || r.leader == 1);
	ck_assert(r.leader ? r.lease_expires_us > 0 : r.lease_expires_us == 0);
	return r;
}

START_TEST(one_holder_at_a_time)
{
	hangar_reap_result r;
	int released = 7;

	r = reap(a, "reaper", 60);
	ck_assert_int_eq(r.leader, 1);
	/* Another holder sees it taken; the holder renews it, later. */
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 0);
	ck_assert_int_eq(reap(a, "reaper", 60).leader, 1);
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 0);
	{
		hangar_reap_result again = reap(a, "reaper", 60);

		ck_assert_int_eq(again.leader, 1);
		ck_assert(again.lease_expires_us >= r.lease_expires_us);
	}
	/* Leases are per name. */
	ck_assert_int_eq(reap(b, "other-duty", 60).leader, 1);
	ck_assert_int_eq(reap(a, "other-duty", 60).leader, 0);

	/* Only the holder can give it up; then the other one takes it at once. */
	must(hangar_ctx_reap_release(b, "reaper", &released), "release by b");
	ck_assert_int_eq(released, 0);
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 0);
	must(hangar_ctx_reap_release(a, "reaper", &released), "release by a");
	ck_assert_int_eq(released, 1);
	must(hangar_ctx_reap_release(a, "reaper", &released), "release twice");
	ck_assert_int_eq(released, 0);
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 1);
	ck_assert_int_eq(reap(a, "reaper", 60).leader, 0);
	must(hangar_ctx_reap_release(b, "reaper", NULL), "release, NULL released");
	ck_assert_int_eq(reap(a, "reaper", 60).leader, 1);
}
END_TEST

START_TEST(an_expired_lease_moves)
{
	int64_t deadline;
	int took = 0;

	ck_assert_int_eq(reap(a, "reaper", 1).leader, 1);
	ck_assert_int_eq(reap(b, "reaper", 1).leader, 0);
	/* a stops renewing (as a killed process would): b takes over once it runs out. */
	deadline = clock_mono_ms() + 15000;
	while (!took && clock_mono_ms() < deadline) {
		struct timespec pause = { 0, 50 * 1000000L };

		took = reap(b, "reaper", 30).leader;
		if (!took)
			nanosleep(&pause, NULL);
	}
	ck_assert_msg(took, "b did not take the expired lease within 15 s");
	/* And a, coming back, finds it b's. */
	ck_assert_int_eq(reap(a, "reaper", 1).leader, 0);
}
END_TEST

static int has_secret(hangar_ctx *ctx, const char *id)
{
	hangar_buf buf = HANGAR_BUF_INIT;
	int rc = hangar_sys_secret_get(&buf, ctx, id, "token");

	hangar_buf_dispose(&buf);
	ck_assert_msg(rc == 0 || rc == HANGAR_ENOTFOUND, "secret_get: %s", hangar_error_name(rc));
	return rc == 0;
}

static void kill_behind_its_back(struct fake *f, const char *id)
{
	struct fake_box *box = fake_find(f, id);

	ck_assert_ptr_nonnull(box);
	kill(box->pid, SIGKILL);
	waitpid(box->pid, NULL, 0);
	box->killed = 1;
}

START_TEST(only_the_holder_forgets_gone_sandboxes)
{
	hangar_sandbox *s1, *s2, *s3;
	hangar_reap_result r;

	/* b's fake knows none of a's sandboxes: b takes the lease before they exist. */
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 1);
	must(hangar_sandbox_create(&s1, a, NULL), "create 1");
	must(hangar_sandbox_create(&s2, a, NULL), "create 2");
	must(hangar_sandbox_create(&s3, a, NULL), "create 3");
	must(hangar_sys_secret_put(a, hangar_sandbox_id(s1), "token", "t1"), "put 1");
	must(hangar_sys_secret_put(a, hangar_sandbox_id(s2), "token", "t2"), "put 2");
	must(hangar_sys_secret_put(a, hangar_sandbox_id(s3), "token", "t3"), "put 3");

	/* b holds the lease: a's pass reaps nothing, even with a sandbox gone. */
	kill_behind_its_back(&fake_a, hangar_sandbox_id(s2));
	r = reap(a, "reaper", 60);
	ck_assert_int_eq(r.leader, 0);
	ck_assert_uint_eq(r.records_forgotten, 0);
	ck_assert(has_secret(a, hangar_sandbox_id(s2)));

	/* Once a holds it, the gone one's record goes, and only it. */
	must(hangar_ctx_reap_release(b, "reaper", NULL), "release");
	r = reap(a, "reaper", 60);
	ck_assert_int_eq(r.leader, 1);
	ck_assert_uint_eq(r.records_forgotten, 1);
	ck_assert_uint_eq(r.sessions_reaped, 0);
	ck_assert(!has_secret(a, hangar_sandbox_id(s2)));
	ck_assert(has_secret(a, hangar_sandbox_id(s1)));
	ck_assert(has_secret(a, hangar_sandbox_id(s3)));
	/* A second pass finds nothing more. */
	r = reap(a, "reaper", 60);
	ck_assert_uint_eq(r.records_forgotten, 0);
	ck_assert(has_secret(a, hangar_sandbox_id(s1)));

	hangar_sandbox_unref(s1);
	hangar_sandbox_unref(s2);
	hangar_sandbox_unref(s3);
}
END_TEST

START_TEST(a_provider_that_cannot_list_is_left_for_later)
{
	hangar_sandbox *s1;
	hangar_reap_result r;

	must(hangar_sandbox_create(&s1, a, NULL), "create");
	must(hangar_sys_secret_put(a, hangar_sandbox_id(s1), "token", "t1"), "put");
	kill_behind_its_back(&fake_a, hangar_sandbox_id(s1));
	/* A failing list is no evidence: nothing is forgotten, the pass still succeeds. */
	fake_a.list_fails = HANGAR_EUNAVAILABLE;
	r = reap(a, "reaper", 60);
	ck_assert_int_eq(r.leader, 1);
	ck_assert_uint_eq(r.records_forgotten, 0);
	ck_assert(has_secret(a, hangar_sandbox_id(s1)));
	fake_a.list_fails = 0;
	r = reap(a, "reaper", 60);
	ck_assert_uint_eq(r.records_forgotten, 1);
	ck_assert(!has_secret(a, hangar_sandbox_id(s1)));
	hangar_sandbox_unref(s1);
}
END_TEST

START_TEST(careless_callers)
{
	hangar_reap_result r = HANGAR_REAP_RESULT_INIT, zero;
	char long_name[80];
	int released = 7;
	static const char *const bad[] = { "", "a b", "reaper;drop", "x/../y", "r\n", "é", NULL };

	memset(&zero, 0, sizeof(zero));
	ck_assert_int_eq(hangar_ctx_reap(NULL, a, "reaper", 60), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_reap(&zero, a, "reaper", 60), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_reap(&r, NULL, "reaper", 60), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_reap(&r, a, NULL, 60), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_reap(&r, a, "reaper", 0), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_ctx_reap(&r, a, "reaper", 86401), HANGAR_EINVAL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "lease_seconds"));
	for (const char *const *n = bad; *n; n++) {
		ck_assert_int_eq(hangar_ctx_reap(&r, a, *n, 60), HANGAR_EINVAL);
		ck_assert_int_eq(hangar_ctx_reap_release(a, *n, &released), HANGAR_EINVAL);
		ck_assert_int_eq(released, 0);
	}
	memset(long_name, 'x', 65);
	long_name[65] = '\0';
	ck_assert_int_eq(hangar_ctx_reap(&r, a, long_name, 60), HANGAR_EINVAL);
	long_name[64] = '\0';
	ck_assert_int_eq(hangar_ctx_reap(&r, a, long_name, 60), 0);
	ck_assert_int_eq(r.leader, 1);
	ck_assert_int_eq(hangar_ctx_reap_release(NULL, "reaper", NULL), HANGAR_EINVAL);
	/* None of that took the real lease. */
	ck_assert_int_eq(reap(b, "reaper", 60).leader, 1);
}
END_TEST

/* A caller built against a smaller result struct is never written past. */
START_TEST(an_older_result_is_not_overrun)
{
	struct {
		hangar_reap_result r;
		unsigned char guard[16];
	} small;

	memset(&small, 0xa5, sizeof(small));
	small.r.version = HANGAR_REAP_RESULT_VERSION;
	small.r.size = (uint32_t)offsetof(hangar_reap_result, records_forgotten);
	must(hangar_ctx_reap(&small.r, a, "reaper", 60), "reap");
	ck_assert_int_eq(small.r.leader, 1);
	ck_assert_uint_eq(small.r.size, offsetof(hangar_reap_result, records_forgotten));
	for (size_t i = offsetof(hangar_reap_result, records_forgotten); i < sizeof(small.r); i++)
		ck_assert_uint_eq(((unsigned char *)&small.r)[i], 0xa5);
	for (size_t i = 0; i < sizeof(small.guard); i++)
		ck_assert_uint_eq(small.guard[i], 0xa5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reaper");
	TCase *t = tcase_create("lease");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, one_holder_at_a_time);
	tcase_add_test(t, an_expired_lease_moves);
	tcase_add_test(t, only_the_holder_forgets_gone_sandboxes);
	tcase_add_test(t, a_provider_that_cannot_list_is_left_for_later);
	tcase_add_test(t, careless_callers);
	tcase_add_test(t, an_older_result_is_not_overrun);
	suite_add_tcase(s, t);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
