/* What the local-isolation tests share (jail-test.h). */
#define _GNU_SOURCE
#include "jail-test.h"
#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char state_dir[64];

int become_caller(int unprivileged)
{
	struct passwd *pw;

	if (!unprivileged)
		return 1;
	if (geteuid() != 0 || !(pw = getpwnam("user")))
		return 0;
	/* Sandboxes from an image: the image as `user` imported it into its own store (on-image.sh), if it could. */
	if (getenv("HANGAR_TEST_TEMPLATE")) {
		const char *t = getenv("HANGAR_TEST_USER_TEMPLATE");

		if (!t || !*t)
			return 0;
		ck_assert_int_eq(setenv("HANGAR_TEST_TEMPLATE", t, 1), 0);
		ck_assert_int_eq(setenv("HANGAR_IMAGE_DIR", getenv("HANGAR_TEST_USER_IMAGE_DIR"), 1), 0);
		ck_assert_int_eq(setenv("HANGAR_TEST_IMAGE_ROOT", getenv("HANGAR_TEST_USER_IMAGE_ROOT"), 1), 0);
	}
	ck_assert_int_eq(chown(state_dir, pw->pw_uid, pw->pw_gid), 0);
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid), 0);
	ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid), 0);
	return 1;
}

void setup(void)
{
	/* Named after the test program, so a leftover says whose it is. */
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-%.20s-XXXXXX", program_invocation_short_name);
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	leftovers_watch(state_dir, state_dir);
}

void teardown(void)
{
	hangar_ctx *ctx = NULL;
	char cmd[PATH_MAX + 32];

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0)
		kill_local_leftovers(ctx, state_dir);
	hangar_ctx_unref(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", state_dir);
}

hangar_ctx *new_ctx(void)
{
	hangar_ctx *ctx = NULL;

	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "local"), 0);
	return ctx;
}

/* 1 once create() fell back to the host's /usr (an unprivileged caller without subordinate ids). */
static int no_image;

static int subids_off(hangar_ctx *ctx)
{
	hangar_buf v = HANGAR_BUF_INIT;
	int off;

	ck_assert_int_eq(hangar_ctx_get(&v, ctx, "HANGAR_LOCAL_SUBIDS"), 0);
	off = v.ptr && (!strcmp(v.ptr, "off") || !strcmp(v.ptr, "0") || !strcmp(v.ptr, "false"));
	hangar_buf_dispose(&v);
	return off;
}

hangar_sandbox *create(hangar_ctx *ctx, int network)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = "local";
	o.template_id = test_image(); /* NULL: the host's /usr */
	o.timeout_sec = 120;
	o.network = network;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	if (rc == HANGAR_EUNSUPPORTED && o.template_id && geteuid() != 0 && subids_off(ctx)) {
		/*
		 * An unprivileged caller without subordinate ids runs no image
		 * (hangar(1)): refused, naming them. Its case goes on on the
		 * host's /usr, as in the suite without an image.
		 */
		ck_assert_msg(strstr(hangar_error_last()->message, "/etc/subuid"), "create: %s",
			      hangar_error_last()->message);
		no_image = 1;
		o.template_id = NULL;
		rc = hangar_sandbox_create(&sb, ctx, &o);
	}
	ck_assert_msg(rc == 0, "create: %d %s", rc, hangar_error_last()->message);
	return sb;
}

void sh(hangar_sandbox *sb, const char *user, const char *cmd, struct out *o)
{
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc;

	eo.user = user;
	eo.timeout_sec = 60;
	rc = hangar_sandbox_exec(&r, sb, cmd, &eo);
	ck_assert_msg(rc == 0, "exec %s: %d %s", cmd, rc, hangar_error_last()->message);
	o->exit_code = r.exit_code;
	o->oom_killed = r.oom_killed;
	snprintf(o->text, sizeof(o->text), "%.*s%.*s", (int)r.out.size, r.out.ptr ? r.out.ptr : "",
		 (int)r.err.size, r.err.ptr ? r.err.ptr : "");
	hangar_exec_result_dispose(&r);
}

void expect(hangar_sandbox *sb, const char *user, const char *cmd, const char *want)
{
	struct out o;

	sh(sb, user, cmd, &o);
	ck_assert_msg(o.exit_code == 0, "%s as %s: exit %d: %s", cmd, user, o.exit_code, o.text);
	o.text[strcspn(o.text, "\n")] = '\0';
	ck_assert_msg(!strcmp(o.text, want), "%s as %s: got \"%s\", want \"%s\"", cmd, user, o.text, want);
}

const char *test_image(void)
{
	const char *t = getenv("HANGAR_TEST_TEMPLATE");

	return t && *t && !no_image ? t : NULL;
}

void expect_image_file(hangar_sandbox *sb, const char *path)
{
	const char *root = getenv("HANGAR_TEST_IMAGE_ROOT");
	char host[PATH_MAX], want[8192], cmd[PATH_MAX + 64];
	struct out o;
	size_t n = 0;
	FILE *f;

	ck_assert_msg(root && *root, "HANGAR_TEST_IMAGE_ROOT is not set");
	snprintf(host, sizeof(host), "%s%s", root, path);
	f = fopen(host, "r");
	if (f) {
		n = fread(want, 1, sizeof(want) - 1, f);
		fclose(f);
	}
	want[n] = '\0';
	snprintf(cmd, sizeof(cmd), "cat %s 2>/dev/null || echo absent", path);
	sh(sb, "root", cmd, &o);
	ck_assert_msg(!strcmp(o.text, f ? want : "absent\n"), "%s in the sandbox is not the image's: \"%s\"", path,
		      o.text);
}

void *bg_exec_run(void *arg)
{
	struct bg_exec *b = arg;
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	eo.user = "user";
	eo.timeout_sec = 60;
	b->o.exit_code = -1000;
	if (hangar_sandbox_exec(&r, b->sb, b->cmd, &eo) == 0) {
		b->o.exit_code = r.exit_code;
		b->o.oom_killed = r.oom_killed;
		snprintf(b->o.text, sizeof(b->o.text), "%.*s", (int)r.out.size, r.out.ptr ? r.out.ptr : "");
	}
	hangar_exec_result_dispose(&r);
	return NULL;
}
