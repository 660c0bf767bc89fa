/*
 * Every public versioned struct, as a caller built against its version 1
 * lays it out, with a canary right after it: the library's *_opts_init()
 * and every call that fills a result must write no byte past the caller's
 * struct, and must stamp the size the caller's version has.
 *
 * Structs still at version 1 are today's definitions (a static assertion
 * stops the build once one moves on, so its version-1 layout gets written
 * here). The others are spelled out as version 1 had them.
 *
 * The results are filled by real calls on a local sandbox (HANGAR_ENVD_PATH
 * and HANGAR_JAIL_PATH set by the meson test).
 */
#define _GNU_SOURCE
#include <assert.h>
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hangar/hangar.h>

#include "leftovers.h"

#define CANARY 0xA5
#define CANARY_BYTES 64

/* A struct of type T with CANARY_BYTES of canary right after it. */
#define GUARDED(T)                                  \
	struct {                                    \
		T s;                                \
		unsigned char canary[CANARY_BYTES]; \
	}

#define GUARD_INIT(g) memset(&(g), CANARY, sizeof(g))

static void check_canary(const unsigned char *c, const char *what)
{
	for (size_t i = 0; i < CANARY_BYTES; i++)
		ck_assert_msg(c[i] == CANARY, "%s: byte %zu past the caller's struct was written", what, i);
}

/* ---- version-1 layouts ------------------------------------------------------ */

struct v1_create_opts {
	uint32_t version;
	uint32_t size;
	const char *provider;
	const char *template_id;
	int64_t timeout_sec;
	const char *const *env;
	int32_t network;
	int32_t reserved0;
	const char *tier;
};

struct v1_exec_result {
	uint32_t version;
	uint32_t size;
	int32_t exit_code;
	int32_t timed_out;
	hangar_buf out;
	hangar_buf err;
	uint64_t out_bytes;
	uint64_t err_bytes;
	int64_t duration_us;
};

struct v1_suspend_opts {
	uint32_t version;
	uint32_t size;
	const void *blob;
	size_t blob_len;
	const char *const *labels;
	uint32_t flags;
	uint32_t reserved0;
	int64_t timeout_sec;
};

struct v1_session_opts {
	uint32_t version;
	uint32_t size;
	const char *id;
	const char *environment;
	const hangar_create_opts *create;
	const char *workspace;
	const char *user;
	const char *const *labels;
	uint32_t flags;
	uint32_t reserved0;
};

/* Structs whose only version is 1: today's layout is version 1's. */
static_assert(HANGAR_EXEC_OPTS_VERSION == 1, "write hangar_exec_opts' version-1 layout here");
static_assert(HANGAR_PROCESS_OPTS_VERSION == 1, "write hangar_process_opts' version-1 layout here");
static_assert(HANGAR_COPY_OPTS_VERSION == 1, "write hangar_copy_opts' version-1 layout here");
static_assert(HANGAR_CHECKPOINT_OPTS_VERSION == 1, "write hangar_checkpoint_opts' version-1 layout here");
static_assert(HANGAR_RESTORE_OPTS_VERSION == 1, "write hangar_restore_opts' version-1 layout here");
static_assert(HANGAR_SESSION_FORK_OPTS_VERSION == 1, "write hangar_session_fork_opts' version-1 layout here");
static_assert(HANGAR_PUBLISH_OPTS_VERSION == 1, "write hangar_publish_opts' version-1 layout here");
static_assert(HANGAR_TEMPLATE_BUILD_OPTS_VERSION == 1, "write hangar_template_build_opts' version-1 layout here");
static_assert(HANGAR_IMAGE_OPTS_VERSION == 1, "write hangar_image_opts' version-1 layout here");
static_assert(HANGAR_SANDBOX_INFO_VERSION == 1, "write hangar_sandbox_info's version-1 layout here");
static_assert(HANGAR_ENVD_ENDPOINT_VERSION == 1, "write hangar_envd_endpoint's version-1 layout here");
static_assert(HANGAR_PORT_ENDPOINT_VERSION == 1, "write hangar_port_endpoint's version-1 layout here");
static_assert(HANGAR_CHECKPOINT_INFO_VERSION == 1, "write hangar_checkpoint_info's version-1 layout here");
static_assert(HANGAR_SESSION_INFO_VERSION == 1, "write hangar_session_info's version-1 layout here");
static_assert(HANGAR_REAP_RESULT_VERSION == 1, "write hangar_reap_result's version-1 layout here");
/* The ones that moved on, and to where: a third version needs a test of the second. */
static_assert(HANGAR_CREATE_OPTS_VERSION == 2, "test hangar_create_opts' version 2 layout too");
static_assert(HANGAR_EXEC_RESULT_VERSION == 2, "test hangar_exec_result's version 2 layout too");
static_assert(HANGAR_SUSPEND_OPTS_VERSION == 2, "test hangar_suspend_opts' version 2 layout too");
static_assert(HANGAR_SESSION_OPTS_VERSION == 2, "test hangar_session_opts' version 2 layout too");

/* ---- *_opts_init ------------------------------------------------------------ */

/*
 * Initialises a guarded struct of type T as version ver with init, then
 * checks the stamp, that every byte of the struct past the header is zero,
 * and the canary.
 */
#define CHECK_INIT(T, init, ver)                                                                         \
	do {                                                                                             \
		GUARDED(T) g;                                                                            \
		GUARD_INIT(g);                                                                           \
		ck_assert_int_eq(init((void *)&g.s, (ver)), 0);                                          \
		ck_assert_uint_eq(g.s.version, (ver));                                                   \
		ck_assert_msg(g.s.size <= sizeof(T) && g.s.size > 8, #init ": size %u for a %zu-byte " #T, \
			      (unsigned)g.s.size, sizeof(T));                                            \
		for (size_t i = 8; i < g.s.size; i++)                                                    \
			ck_assert_msg(((unsigned char *)&g.s)[i] == 0, #init ": byte %zu not zeroed", i);   \
		check_canary(g.canary, #init " version " #ver);                                          \
	} while (0)

START_TEST(opts_init_writes_the_asked_version)
{
	CHECK_INIT(struct v1_create_opts, hangar_create_opts_init, 1);
	CHECK_INIT(hangar_create_opts, hangar_create_opts_init, 2);
	CHECK_INIT(hangar_exec_opts, hangar_exec_opts_init, 1);
	CHECK_INIT(hangar_process_opts, hangar_process_opts_init, 1);
	CHECK_INIT(hangar_copy_opts, hangar_copy_opts_init, 1);
	CHECK_INIT(hangar_checkpoint_opts, hangar_checkpoint_opts_init, 1);
	CHECK_INIT(hangar_restore_opts, hangar_restore_opts_init, 1);
	CHECK_INIT(struct v1_session_opts, hangar_session_opts_init, 1);
	CHECK_INIT(hangar_session_opts, hangar_session_opts_init, 2);
	CHECK_INIT(hangar_session_fork_opts, hangar_session_fork_opts_init, 1);
	CHECK_INIT(hangar_publish_opts, hangar_publish_opts_init, 1);
	CHECK_INIT(struct v1_suspend_opts, hangar_suspend_opts_init, 1);
	CHECK_INIT(hangar_suspend_opts, hangar_suspend_opts_init, 2);
	CHECK_INIT(hangar_template_build_opts, hangar_template_build_opts_init, 1);
	CHECK_INIT(hangar_image_opts, hangar_image_opts_init, 1);
}
END_TEST

START_TEST(opts_init_stamps_the_versions_size)
{
	GUARDED(struct v1_create_opts) g;
	hangar_create_opts now;

	/* What a caller built against version 1 has as sizeof. */
	GUARD_INIT(g);
	ck_assert_int_eq(hangar_create_opts_init((hangar_create_opts *)(void *)&g.s, 1), 0);
	ck_assert_uint_eq(g.s.size, sizeof(struct v1_create_opts));
	ck_assert_int_eq(hangar_create_opts_init(&now, HANGAR_CREATE_OPTS_VERSION), 0);
	ck_assert_uint_eq(now.size, sizeof(now));
}
END_TEST

START_TEST(opts_init_refuses_unknown_versions)
{
	GUARDED(hangar_exec_opts) g;

	GUARD_INIT(g);
	ck_assert_int_eq(hangar_exec_opts_init(&g.s, 0), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_exec_opts_init(&g.s, HANGAR_EXEC_OPTS_VERSION + 1), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_create_opts_init(NULL, 1), HANGAR_EINVAL);
	/* Nothing of a refused struct is touched. */
	for (size_t i = 0; i < sizeof(g); i++)
		ck_assert_int_eq(((unsigned char *)&g)[i], CANARY);
}
END_TEST

/* ---- results ---------------------------------------------------------------- */

static char state_dir[64];

static void setup(void)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-versions-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	leftovers_watch(state_dir, state_dir);
}

static void teardown(void)
{
	hangar_ctx *ctx = NULL;
	char cmd[128];

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0)
		kill_local_leftovers(ctx, state_dir);
	hangar_ctx_unref(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A result struct as an older caller made it: header and canary, the rest garbage. */
#define RESULT_INIT(g, ver, sz)      \
	do {                         \
		GUARD_INIT(g);       \
		(g).s.version = (ver); \
		(g).s.size = (sz);     \
	} while (0)

START_TEST(results_stay_within_the_callers_struct)
{
	hangar_ctx *ctx = NULL;
	hangar_sandbox *sb = NULL;
	hangar_checkpoint *cp = NULL;
	hangar_session *s = NULL;
	hangar_checkpoint_opts co = HANGAR_CHECKPOINT_OPTS_INIT;
	GUARDED(struct v1_create_opts) opts;
	GUARDED(struct v1_exec_result) er;
	GUARDED(hangar_sandbox_info) si;
	GUARDED(hangar_envd_endpoint) ep;
	GUARDED(hangar_port_endpoint) pe;
	GUARDED(hangar_checkpoint_info) ci;
	GUARDED(hangar_session_info) ssi;
	GUARDED(hangar_reap_result) rr;
	int rc;

	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), 0);

	/* A version-1 create: its environment field does not exist. */
	GUARD_INIT(opts);
	ck_assert_int_eq(hangar_create_opts_init((hangar_create_opts *)(void *)&opts.s, 1), 0);
	opts.s.provider = "local";
	opts.s.network = HANGAR_NETWORK_OFF;
	rc = hangar_sandbox_create(&sb, ctx, (hangar_create_opts *)(void *)&opts.s);
	ck_assert_msg(rc == 0, "create: %s", hangar_error_last()->message);
	check_canary(opts.canary, "create options version 1");

	RESULT_INIT(er, 1, sizeof(struct v1_exec_result));
	er.s.out = (hangar_buf)HANGAR_BUF_INIT;
	er.s.err = (hangar_buf)HANGAR_BUF_INIT;
	rc = hangar_sandbox_exec((hangar_exec_result *)(void *)&er.s, sb, "echo hi; mkdir -p /workspace", NULL);
	ck_assert_msg(rc == 0, "exec: %s", hangar_error_last()->message);
	check_canary(er.canary, "exec result version 1");
	ck_assert_int_eq(er.s.exit_code, 0);
	ck_assert_str_eq(er.s.out.ptr, "hi\n");
	ck_assert_uint_eq(er.s.size, sizeof(struct v1_exec_result));
	hangar_exec_result_dispose((hangar_exec_result *)(void *)&er.s);

	RESULT_INIT(si, 1, sizeof(si.s));
	ck_assert_int_eq(hangar_sandbox_get_info(&si.s, sb), 0);
	check_canary(si.canary, "sandbox info");
	ck_assert_str_eq(si.s.id, hangar_sandbox_id(sb));
	/* A smaller caller's size is kept, and nothing past it is written. */
	RESULT_INIT(si, 1, 16);
	ck_assert_int_eq(hangar_sandbox_get_info(&si.s, sb), 0);
	ck_assert_uint_eq(si.s.size, 16);
	for (size_t i = 16; i < sizeof(si); i++)
		ck_assert_msg(((unsigned char *)&si)[i] == CANARY, "sandbox info: byte %zu past size 16 written", i);

	RESULT_INIT(ep, 1, sizeof(ep.s));
	ck_assert_int_eq(hangar_sandbox_envd_endpoint(&ep.s, sb), 0);
	check_canary(ep.canary, "envd endpoint");
	ck_assert_ptr_nonnull(ep.s.headers);
	/* The local provider: envd on a unix socket of the sandbox's, with a token of its own. */
	ck_assert_str_ne(ep.s.socket_path, "");
	ck_assert_str_ne(ep.s.access_token, "");
	RESULT_INIT(ep, 1, 24);
	ck_assert_int_eq(hangar_sandbox_envd_endpoint(&ep.s, sb), 0);
	ck_assert_uint_eq(ep.s.size, 24);
	for (size_t i = 24; i < sizeof(ep); i++)
		ck_assert_msg(((unsigned char *)&ep)[i] == CANARY, "envd endpoint: byte %zu past size 24 written", i);

	/* Storage the caller's size cannot hold would leak: refused, nothing written. */
	RESULT_INIT(pe, 1, offsetof(hangar_port_endpoint, storage));
	ck_assert_int_eq(hangar_sandbox_port_endpoint(&pe.s, sb, 8000), HANGAR_EINVAL);
	for (size_t i = offsetof(hangar_port_endpoint, url); i < sizeof(pe); i++)
		ck_assert_msg(((unsigned char *)&pe)[i] == CANARY, "port endpoint: byte %zu written", i);
	/* The local provider exposes ports instead. */
	RESULT_INIT(pe, 1, sizeof(pe.s));
	ck_assert_int_eq(hangar_sandbox_port_endpoint(&pe.s, sb, 8000), HANGAR_EUNSUPPORTED);
	check_canary(pe.canary, "port endpoint");

	co.session_id = "versions";
	rc = hangar_checkpoint_create(&cp, sb, &co);
	ck_assert_msg(rc == 0, "checkpoint: %s", hangar_error_last()->message);
	RESULT_INIT(ci, 1, sizeof(ci.s));
	ck_assert_int_eq(hangar_checkpoint_get_info(&ci.s, cp), 0);
	check_canary(ci.canary, "checkpoint info");
	ck_assert_uint_eq(ci.s.size, sizeof(ci.s));
	ck_assert_str_eq(ci.s.id, hangar_checkpoint_id(cp));

	rc = hangar_session_create(&s, ctx, NULL);
	ck_assert_msg(rc == 0, "session: %s", hangar_error_last()->message);
	RESULT_INIT(ssi, 1, sizeof(ssi.s));
	ck_assert_int_eq(hangar_session_get_info(&ssi.s, s), 0);
	check_canary(ssi.canary, "session info");
	ck_assert_uint_eq(ssi.s.size, sizeof(ssi.s));
	ck_assert_str_eq(ssi.s.id, hangar_session_id(s));

	RESULT_INIT(rr, 1, sizeof(rr.s));
	ck_assert_int_eq(hangar_ctx_reap(&rr.s, ctx, "versions-test", 30), 0);
	check_canary(rr.canary, "reap result");
	ck_assert_uint_eq(rr.s.size, sizeof(rr.s));

	ck_assert_int_eq(hangar_session_delete(s), 0);
	hangar_session_unref(s);
	hangar_checkpoint_unref(cp);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *versions_suite(void)
{
	Suite *s = suite_create("struct versions");
	TCase *t = tcase_create("init");
	TCase *r = tcase_create("results");

	tcase_add_test(t, opts_init_writes_the_asked_version);
	tcase_add_test(t, opts_init_stamps_the_versions_size);
	tcase_add_test(t, opts_init_refuses_unknown_versions);
	suite_add_tcase(s, t);
	tcase_add_checked_fixture(r, setup, teardown);
	tcase_set_timeout(r, 120);
	tcase_add_test(r, results_stay_within_the_callers_struct);
	suite_add_tcase(s, r);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(versions_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
