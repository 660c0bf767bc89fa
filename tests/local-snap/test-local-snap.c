/*
 * Snapshots of local sandboxes and sandboxes made from them, end to end:
 * real jails, a real snapshot on disk, children made from it, and a session
 * fork that goes through it. The tests run as root (they skip otherwise);
 * the unprivileged ones fork a child that becomes `user`, whose subordinate
 * ids (/etc/subuid, /etc/subgid: ./dev test adds them) own its snapshots.
 *
 * The meson test sets HANGAR_ENVD_PATH and HANGAR_JAIL_PATH; each test gets
 * its own HANGAR_STATE_DIR.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "leftovers.h"
#include "clock.h"

#define SNAP_ID_LEN 21 /* "snap-" and 16 hex digits */

static char state_dir[64];

static void setup(void)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-snap-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	leftovers_watch(state_dir, state_dir);
}

static void teardown(void)
{
	hangar_ctx *ctx = NULL;
	char cmd[PATH_MAX + 32];

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0)
		kill_local_leftovers(ctx, state_dir);
	hangar_ctx_unref(ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	ck_assert_int_eq(system(cmd), 0);
}

static hangar_ctx *new_ctx(void)
{
	hangar_ctx *ctx = NULL;

	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "local"), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "local snapshot test key, not a secret"), 0);
	return ctx;
}

static hangar_sandbox *create_from(hangar_ctx *ctx, const char *template_id)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = "local";
	o.template_id = template_id;
	o.timeout_sec = 120;
	o.network = HANGAR_NETWORK_OFF;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_msg(rc == 0, "create from %s: %d %s", template_id ? template_id : "local", rc,
		      hangar_error_last()->message);
	return sb;
}

/* Runs cmd as user (NULL: the default); its exit code, its first line of output in out (malloc'd) when out. */
static int run_as(hangar_sandbox *sb, const char *user, const char *cmd, char **out)
{
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc, code;

	eo.user = user;
	eo.timeout_sec = 60;
	rc = hangar_sandbox_exec(&r, sb, cmd, &eo);
	ck_assert_msg(rc == 0, "exec %s: %d %s", cmd, rc, hangar_error_last()->message);
	code = r.exit_code;
	if (out) {
		*out = strndup(r.out.ptr ? r.out.ptr : "", r.out.size);
		(*out)[strcspn(*out, "\n")] = '\0';
	}
	hangar_exec_result_dispose(&r);
	return code;
}

static void expect(hangar_sandbox *sb, const char *cmd, const char *want)
{
	char *got = NULL;
	int code = run_as(sb, NULL, cmd, &got);

	ck_assert_msg(code == 0 && !strcmp(got, want), "%s in %s: exit %d, \"%s\", want \"%s\"", cmd,
		      hangar_sandbox_id(sb), code, got, want);
	free(got);
}

static void must(hangar_sandbox *sb, const char *user, const char *cmd)
{
	int code = run_as(sb, user, cmd, NULL);

	ck_assert_msg(code == 0, "%s in %s: exit %d", cmd, hangar_sandbox_id(sb), code);
}

/* A snapshot of sb, its id in id (SNAP_ID_LEN + 1). */
static void snapshot(hangar_sandbox *sb, char *id)
{
	hangar_buf b = HANGAR_BUF_INIT;
	int rc = hangar_sandbox_snapshot(&b, sb, "test");

	ck_assert_msg(rc == 0, "snapshot: %d %s", rc, hangar_error_last()->message);
	ck_assert_msg(b.ptr && strlen(b.ptr) == SNAP_ID_LEN && !strncmp(b.ptr, "snap-", 5) &&
			      strspn(b.ptr + 5, "0123456789abcdef") == 16,
		      "snapshot id %s", b.ptr ? b.ptr : "(none)");
	snprintf(id, SNAP_ID_LEN + 1, "%s", b.ptr);
	hangar_buf_dispose(&b);
}

static void snap_path(char *buf, size_t size, const char *id, const char *rest)
{
	snprintf(buf, size, "%s/local/snapshots/%s%s", state_dir, id, rest);
}

static int wait_gone(hangar_ctx *ctx, const char *id, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;

	for (;;) {
		hangar_sandbox *sb = NULL;
		int rc = hangar_sandbox_attach(&sb, ctx, "local", id);

		hangar_sandbox_unref(sb);
		if (rc == HANGAR_EGONE)
			return 1;
		if (clock_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 50);
	}
}

static int delete_snapshot(hangar_ctx *ctx, const char *id)
{
	return hangar_snapshot_delete(ctx, "local", id);
}

#define SKIP_UNLESS_ROOT()                                                  \
	do {                                                                \
		if (geteuid() != 0) {                                       \
			fprintf(stderr, "skipped: snapshots need root\n");  \
			return;                                             \
		}                                                           \
	} while (0)

START_TEST(contents_and_independence)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *a, *b;
	char id[SNAP_ID_LEN + 1], path[PATH_MAX];
	struct stat st;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	must(parent, NULL,
	     "set -e; echo parent > /workspace/a; mkdir -p /workspace/d/e; echo deep > /workspace/d/e/f; "
	     "ln /workspace/a /workspace/a-link; ln -s a /workspace/a-sym; echo home > ~/h; echo tmp > /tmp/t");
	must(parent, "root", "echo secret > /root/r; chmod 600 /root/r");
	snapshot(parent, id);

	/* The snapshot's record of the parent, counted once. */
	snap_path(path, sizeof(path), id, "/record.json");
	ck_assert_int_eq(stat(path, &st), 0);
	snap_path(path, sizeof(path), id, "/layer/workspace/a");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_uid, 1000); /* `user`, as the commands saw it */
	ck_assert_int_eq(st.st_nlink, 2);  /* the hard link kept */

	a = create_from(ctx, id);
	b = create_from(ctx, id);
	for (hangar_sandbox *c = a; c; c = c == a ? b : NULL) {
		expect(c, "cat /workspace/a", "parent");
		expect(c, "cat /workspace/d/e/f", "deep");
		expect(c, "readlink /workspace/a-sym", "a");
		expect(c, "stat -c %h /workspace/a", "2");
		expect(c, "cat ~/h /tmp/t | tr '\\n' ' '", "home tmp ");
		expect(c, "stat -c %U:%G /workspace/a", "user:user");
		expect(c, "id -un", "user");
		ck_assert_int_ne(run_as(c, NULL, "cat /root/r", NULL), 0); /* root's, as in the parent */
		{
			char *got = NULL;

			ck_assert_int_eq(run_as(c, "root", "cat /root/r", &got), 0);
			ck_assert_str_eq(got, "secret");
			free(got);
		}
	}
	/* A write in one child: absent in the other, in the parent and in the snapshot. */
	must(a, NULL, "echo a > /workspace/a; echo new > /workspace/only-a; rm /workspace/d/e/f; echo a > /tmp/t");
	expect(a, "cat /workspace/a /workspace/only-a | tr '\\n' ' '", "a new ");
	expect(b, "cat /workspace/a; test ! -e /workspace/only-a && cat /workspace/d/e/f /tmp/t | tr '\\n' ' '",
	       "parent");
	expect(b, "cat /workspace/d/e/f /tmp/t | tr '\\n' ' '", "deep tmp ");
	expect(parent, "cat /workspace/a; test ! -e /workspace/only-a", "parent");
	snap_path(path, sizeof(path), id, "/layer/workspace/only-a");
	ck_assert_int_ne(stat(path, &st), 0);
	snap_path(path, sizeof(path), id, "/layer/workspace/d/e/f");
	ck_assert_int_eq(stat(path, &st), 0);
	/* The parent goes on running after the snapshot, and writes stay its own. */
	must(parent, NULL, "echo later > /workspace/later");
	expect(a, "test ! -e /workspace/later && echo absent", "absent");

	ck_assert_int_eq(hangar_sandbox_kill(a), 0);
	ck_assert_int_eq(hangar_sandbox_kill(b), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

static int jail_pid_of(const char *id)
{
	char path[PATH_MAX];
	int pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), id);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return pid;
}

START_TEST(outlives_a_killed_parent)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child;
	char id[SNAP_ID_LEN + 1], pid[64];

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	must(parent, NULL, "echo kept > /workspace/k");
	snapshot(parent, id);
	snprintf(pid, sizeof(pid), "%s", hangar_sandbox_id(parent));
	ck_assert_int_eq(kill(jail_pid_of(pid), SIGKILL), 0);
	ck_assert(wait_gone(ctx, pid, 15000));
	child = create_from(ctx, id);
	expect(child, "cat /workspace/k", "kept");
	/* The snapshot of a sandbox that is gone: refused, naming it. */
	{
		hangar_buf b = HANGAR_BUF_INIT;

		ck_assert_int_eq(hangar_sandbox_snapshot(&b, parent, NULL), HANGAR_EGONE);
	}
	ck_assert_int_eq(hangar_sandbox_kill(child), 0);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(disk_limit_holds_in_a_child)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child;
	char id[SNAP_ID_LEN + 1];

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_DISK_MB", "24"), 0);
	parent = create_from(ctx, NULL);
	must(parent, NULL, "head -c 16M /dev/zero > /workspace/big");
	snapshot(parent, id);
	child = create_from(ctx, id);
	/* The snapshot's 16 MiB are below the child's layer, not in it: 20 MiB more fit... */
	must(child, NULL, "head -c 20M /dev/zero > /workspace/more");
	/* ...but not past the limit, and a copy-up of the big file counts too. */
	ck_assert_int_ne(run_as(child, NULL, "head -c 8M /dev/zero > /tmp/over", NULL), 0);
	must(child, NULL, "rm /workspace/more");
	ck_assert_int_ne(run_as(child, NULL, "head -c 1M /dev/zero >> /workspace/big && "
					     "head -c 8M /dev/zero > /tmp/over", NULL), 0);
	ck_assert_int_eq(hangar_sandbox_kill(child), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(delete_refused_while_in_use)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child, *none = NULL;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	char id[SNAP_ID_LEN + 1], cid[64], path[PATH_MAX];
	struct stat st;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	snapshot(parent, id);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	child = create_from(ctx, id);
	snprintf(cid, sizeof(cid), "%s", hangar_sandbox_id(child));
	ck_assert_int_eq(delete_snapshot(ctx, id), HANGAR_EBUSY);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "in use"));
	expect(child, "echo alive", "alive");
	/* The jail holds the snapshot, not the caller: gone with the jail, however it ends. */
	ck_assert_int_eq(kill(jail_pid_of(cid), SIGKILL), 0);
	ck_assert(wait_gone(ctx, cid, 15000));
	ck_assert_int_eq(delete_snapshot(ctx, id), 0);
	snap_path(path, sizeof(path), id, "");
	ck_assert_int_ne(stat(path, &st), 0);
	ck_assert_int_eq(delete_snapshot(ctx, id), HANGAR_EGONE);
	ck_assert_int_eq(delete_snapshot(ctx, "../../etc"), HANGAR_EGONE);
	ck_assert_int_eq(delete_snapshot(ctx, "sb-0123456789abcdef"), HANGAR_EGONE);
	ck_assert_int_eq(delete_snapshot(ctx, ""), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_delete(NULL, "local", id), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_delete(ctx, "no-such-provider", id), HANGAR_ENOTFOUND);
	o.provider = "local";
	o.template_id = id;
	ck_assert_int_eq(hangar_sandbox_create(&none, ctx, &o), HANGAR_ENOTFOUND);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, id));
	o.template_id = "snap-0000000000000000";
	ck_assert_int_eq(hangar_sandbox_create(&none, ctx, &o), HANGAR_ENOTFOUND);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(hostile_workspace)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child;
	char id[SNAP_ID_LEN + 1], path[PATH_MAX], outside[128], cmd[2048];
	struct stat st;
	int64_t t0;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	snprintf(outside, sizeof(outside), "%s/outside", state_dir);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	/*
	 * Links to the host's paths (followed, they would write there), a FIFO
	 * (opened, it would block), a huge sparse file, a file linked many
	 * times, a socket, and a device node where the sandbox may make one.
	 */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd /workspace; ln -s %s out; ln -s / root-link; ln -s ../../../../.. up; "
		 "mkdir dir; ln -s %s dir/x; mkfifo fifo; truncate -s 1T sparse; echo end >> sparse; "
		 "head -c 1M /dev/urandom > many; for i in $(seq 1 300); do ln many many.$i; done; "
		 "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/workspace/sock\")' || true",
		 outside, outside);
	must(parent, NULL, cmd);
	run_as(parent, "root", "mknod /workspace/dev c 1 3", NULL);
	t0 = clock_mono_ms();
	snapshot(parent, id);
	fprintf(stderr, "hostile snapshot taken in %lld ms\n", (long long)(clock_mono_ms() - t0));
	/* Nothing written through a link. */
	snprintf(path, sizeof(path), "%s/x", outside);
	ck_assert_int_ne(lstat(path, &st), 0);
	ck_assert_int_eq(rmdir(outside), 0);
	snap_path(path, sizeof(path), id, "/layer/workspace/out");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	snap_path(path, sizeof(path), id, "/layer/workspace/fifo");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	snap_path(path, sizeof(path), id, "/layer/workspace/sparse");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_int_eq(st.st_size, (1LL << 40) + 4);
	ck_assert_int_lt(st.st_blocks, 1024); /* the holes kept */
	snap_path(path, sizeof(path), id, "/layer/workspace/many.300");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert_int_eq(st.st_nlink, 301); /* one copy, linked */
	snap_path(path, sizeof(path), id, "/layer/workspace/dev");
	ck_assert_int_ne(lstat(path, &st), 0);
	snap_path(path, sizeof(path), id, "/layer/workspace/sock");
	ck_assert_int_ne(lstat(path, &st), 0);
	/* A child sees the links as links, and its writes through them stay inside it. */
	child = create_from(ctx, id);
	expect(child, "tail -c 4 /workspace/sparse", "end");
	expect(child, "test -p /workspace/fifo && readlink /workspace/up", "../../../../..");
	ck_assert_int_ne(run_as(child, NULL, "echo x > /workspace/dir/x", NULL), 0);
	ck_assert_int_ne(lstat(outside, &st), 0);
	ck_assert_int_eq(hangar_sandbox_kill(child), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(too_deep_is_refused_cleanly)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent;
	hangar_buf b = HANGAR_BUF_INIT;
	char path[PATH_MAX];
	struct stat st;
	int rc;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	must(parent, NULL, "cd /workspace; for i in $(seq 1 200); do mkdir d; cd d; done");
	rc = hangar_sandbox_snapshot(&b, parent, NULL);
	ck_assert_int_ne(rc, 0);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "deep"));
	/* Nothing half-made is left, and the parent runs on (thawed). */
	snprintf(path, sizeof(path), "%s/local/snapshots", state_dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(rmdir(path), 0);
	expect(parent, "echo thawed", "thawed");
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A caller other than root without subordinate ids (nobody): no
 * HANGAR_CAP_SNAPSHOT (so its session forks go by checkpoint), and a create
 * from a snapshot is refused, saying why.
 */
START_TEST(not_for_unprivileged_callers)
{
	char dir[64], cmd[128];
	pid_t pid;
	int status = -1;

	SKIP_UNLESS_ROOT();
	snprintf(dir, sizeof(dir), "/tmp/hangar-snap-nobody-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0777), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		hangar_ctx *ctx = NULL;
		hangar_provider *p = NULL;
		hangar_sandbox *sb = NULL;
		hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
		int bad = 0;

		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(10);
		if (hangar_ctx_new(&ctx, 0) || hangar_ctx_set(ctx, "HANGAR_STATE_DIR", dir) ||
		    hangar_ctx_set(ctx, "HANGAR_LOCAL_NETWORK", "off") || hangar_provider_lookup(&p, ctx, "local"))
			_exit(11);
		bad |= (hangar_provider_capabilities(p) & HANGAR_CAP_SNAPSHOT) ? 1 : 0;
		o.provider = "local";
		o.template_id = "snap-0123456789abcdef";
		bad |= hangar_sandbox_create(&sb, ctx, &o) != HANGAR_EUNSUPPORTED ? 2 : 0;
		bad |= !strstr(hangar_error_last()->message, "subordinate ids") ? 4 : 0;
		hangar_provider_unref(p);
		hangar_ctx_unref(ctx);
		_exit(bad);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	remove_run_dir(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprivileged caller: status %d", status);
}
END_TEST

struct forks {
	int ok, failed, method;
	hangar_session *s[8];
};

static void on_fork(const hangar_session_fork_result *r, void *payload)
{
	struct forks *f = payload;

	f->method = r->method;
	if (r->error)
		fprintf(stderr, "fork %u failed: %d, %s\n", r->index, r->error, r->message ? r->message : "");
	if (r->error || f->ok >= 8) {
		f->failed++;
		return;
	}
	f->s[f->ok++] = hangar_session_ref(r->session);
}

START_TEST(session_fork_goes_by_snapshot)
{
	hangar_ctx *ctx;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL;
	struct forks f = { 0, 0, 0, { NULL } };
	hangar_provider *p = NULL;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	ck_assert_int_eq(hangar_provider_lookup(&p, ctx, "local"), 0);
	ck_assert(hangar_provider_capabilities(p) & HANGAR_CAP_SNAPSHOT);
	hangar_provider_unref(p);
	co.provider = "local";
	co.timeout_sec = 300;
	co.network = HANGAR_NETWORK_OFF;
	so.create = &co;
	so.workspace = "/workspace";
	ck_assert_msg(hangar_session_create(&s, ctx, &so) == 0, "%s", hangar_error_last()->message);
	ck_assert_int_eq(hangar_session_sandbox(&sb, s), 0);
	must(sb, NULL, "echo from-parent > /workspace/p");
	ck_assert_msg(hangar_session_fork(s, 3, on_fork, &f) == 0, "%s", hangar_error_last()->message);
	ck_assert_int_eq(f.ok, 3);
	ck_assert_int_eq(f.method, HANGAR_FORK_SNAPSHOT);
	for (int i = 0; i < f.ok; i++) {
		hangar_sandbox *c = NULL;
		char cmd[64];

		ck_assert_int_eq(hangar_session_sandbox(&c, f.s[i]), 0);
		expect(c, "cat /workspace/p", "from-parent");
		snprintf(cmd, sizeof(cmd), "echo %d > /workspace/p", i);
		must(c, NULL, cmd);
		hangar_sandbox_unref(c);
	}
	expect(sb, "cat /workspace/p", "from-parent");
	for (int i = 0; i < f.ok; i++) {
		hangar_session_archive(f.s[i]);
		hangar_session_unref(f.s[i]);
	}
	hangar_sandbox_unref(sb);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A busybox image in a store under the state directory (the local-image
 * suite's mkimage.py, from the host's static busybox), its digest in
 * digest. 0, or -1: the test skips (no tools, no busybox).
 */
static int busybox_image(char *store, size_t ssize, char *digest, size_t dsize)
{
	const char *tools = getenv("HANGAR_IMAGE_TOOLS");
	char cmd[2048];
	FILE *p;
	int ok;

	snprintf(store, ssize, "%s/images", state_dir);
	if (!tools || access("/bin/busybox", X_OK) < 0)
		return -1;
	/* No sanitizer runtime in the tools (LD_PRELOAD), as images.py's tool_env() does. */
	/* Over busybox, a layer of /srv/keep/{a,b} (a directory to replace) and /srv/gone (a file to delete). */
	snprintf(cmd, sizeof(cmd),
		 "env -u LD_PRELOAD python3 -c 'import sys, io, tarfile\n"
		 "sys.path.insert(0, sys.argv[1]); import images\n"
		 "srv = sys.argv[2] + \".srv.tar\"\n"
		 "with tarfile.open(srv, \"w\") as t:\n"
		 "    for d in (\"srv\", \"srv/keep\"):\n"
		 "        i = tarfile.TarInfo(d); i.type, i.mode = tarfile.DIRTYPE, 0o755; t.addfile(i)\n"
		 "    for f in (\"srv/keep/a\", \"srv/keep/b\", \"srv/gone\"):\n"
		 "        i = tarfile.TarInfo(f); i.size = 2; t.addfile(i, io.BytesIO(b\"x\\n\"))\n"
		 "print(images.mkimage(sys.argv[2], \"bb\", {\"Env\": [\"PATH=/bin\"]}, images.busybox_tar(), srv))' "
		 "'%.900s' '%.200s'",
		 tools, store);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	ok = fgets(digest, (int)dsize, p) != NULL;
	if (pclose(p) != 0 || !ok)
		return -1;
	digest[strcspn(digest, "\n")] = '\0';
	return strncmp(digest, "sha256:", 7) == 0 ? 0 : -1;
}

/*
 * A root caller's image sandbox: what it wrote anywhere, what it deleted
 * from the image and a directory it replaced (an opaque one) come back in
 * every child, over the same image, and a child's writes stay its own.
 */
START_TEST(image_sandbox_snapshot)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *a, *b;
	char id[SNAP_ID_LEN + 1], store[128], digest[128], path[PATH_MAX];
	struct stat st;

	SKIP_UNLESS_ROOT();
	if (busybox_image(store, sizeof(store), digest, sizeof(digest)) < 0) {
		fprintf(stderr, "skipped: no busybox image (HANGAR_IMAGE_TOOLS, /bin/busybox)\n");
		return;
	}
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_IMAGE_DIR", store), 0);
	parent = create_from(ctx, "bb");
	must(parent, "root",
	     "set -e; echo added > /etc/added; rm /bin/vi /srv/gone; mkdir -p /opt/d; echo old > /opt/d/old; "
	     "rm -r /srv/keep; mkdir /srv/keep; echo n > /srv/keep/n; echo ws > /workspace/w");
	snapshot(parent, id);
	must(parent, "root", "echo after > /etc/after");
	/* The image's writable layer is in the snapshot, whiteouts included. */
	snap_path(path, sizeof(path), id, "/layer/upper/etc/added");
	ck_assert_int_eq(stat(path, &st), 0);
	snap_path(path, sizeof(path), id, "/layer/upper/bin/vi");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISCHR(st.st_mode) && st.st_rdev == 0);

	a = create_from(ctx, id);
	b = create_from(ctx, id);
	for (hangar_sandbox *c = a; c; c = c == a ? b : NULL) {
		expect(c, "cat /etc/added /opt/d/old /workspace/w | tr '\\n' ' '", "added old ws ");
		expect(c, "test ! -e /bin/vi && test ! -e /srv/gone && test ! -e /etc/after && echo gone", "gone");
		/* The parent's /srv/keep replaced the image's: an opaque directory, its a and b hidden. */
		expect(c, "ls /srv/keep | tr '\\n' ' '", "n ");
		expect(c, "ls /bin/busybox", "/bin/busybox"); /* the image below, still there */
		expect(c, "grep -c '^root:' /etc/group", "1");  /* the jail's entries, written again */
	}
	/* A directory replaced in a child hides the snapshot's (opaque); the other child still has it. */
	must(a, "root", "rm -r /opt/d; mkdir /opt/d; echo new > /opt/d/new; rm /etc/added");
	expect(a, "ls /opt/d | tr '\\n' ' '; test ! -e /etc/added && echo none", "new none");
	expect(b, "ls /opt/d | tr '\\n' ' '; cat /etc/added", "old added");
	expect(parent, "cat /opt/d/old; test ! -e /opt/d/new", "old");
	ck_assert_int_eq(delete_snapshot(ctx, id), HANGAR_EBUSY);
	ck_assert_int_eq(hangar_sandbox_kill(a), 0);
	ck_assert_int_eq(hangar_sandbox_kill(b), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	ck_assert_int_eq(delete_snapshot(ctx, id), 0);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- an unprivileged caller with subordinate ids ------------------------------------ */

#define SUB_SLOT 1024u

/* The first "name:start:count" of user in file with at least min ids. 0, or -1. */
static int sub_range(const char *file, const struct passwd *pw, unsigned *start, unsigned *count)
{
	char line[256], uid[16];
	FILE *f = fopen(file, "re");
	int rc = -1;

	snprintf(uid, sizeof(uid), "%u", (unsigned)pw->pw_uid);
	while (f && rc < 0 && fgets(line, sizeof(line), f)) {
		char *name = strtok(line, ":"), *a = strtok(NULL, ":"), *b = strtok(NULL, ":\n");

		if (name && a && b && (!strcmp(name, pw->pw_name) || !strcmp(name, uid))) {
			*start = (unsigned)strtoul(a, NULL, 10);
			*count = (unsigned)strtoul(b, NULL, 10);
			rc = *count >= 2 * SUB_SLOT ? 0 : -1;
		}
	}
	if (f)
		fclose(f);
	return rc;
}

/*
 * `user`, when it has two slots of subordinate ids or more, and its image
 * range's first uid and gid (the last slot, as image/subids.c cuts it).
 * NULL: the test skips.
 */
static const struct passwd *sub_caller(unsigned *img_uid, unsigned *img_gid)
{
	const struct passwd *pw = getpwnam("user");
	unsigned us, uc, gs, gc, slots;

	if (!pw || access("/usr/bin/newuidmap", X_OK) < 0 || sub_range("/etc/subuid", pw, &us, &uc) < 0 ||
	    sub_range("/etc/subgid", pw, &gs, &gc) < 0) {
		fprintf(stderr, "skipped: `user` has no usable subordinate ids\n");
		return NULL;
	}
	slots = (uc < gc ? uc : gc) / SUB_SLOT;
	*img_uid = us + (slots - 1) * SUB_SLOT;
	*img_gid = gs + (slots - 1) * SUB_SLOT;
	return pw;
}

/* In the child that is `user`: a failed check says why and ends it with the line's number. */
#define U_CHECK(cond, ...)                                                                       \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "line %d: ", __LINE__);                                  \
			fprintf(stderr, __VA_ARGS__);                                            \
			fprintf(stderr, " (last error: %s)\n", hangar_error_last()->message);    \
			_exit(__LINE__ % 250 + 1);                                               \
		}                                                                                \
	} while (0)

static hangar_sandbox *u_create(hangar_ctx *ctx, const char *template_id)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = "local";
	o.template_id = template_id;
	o.timeout_sec = 120;
	o.network = HANGAR_NETWORK_OFF;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	U_CHECK(rc == 0, "create from %s: %d", template_id ? template_id : "local", rc);
	return sb;
}

/* cmd as user (NULL: the default): its exit code, its first line in out (when out, at most size). */
static int u_run(hangar_sandbox *sb, const char *user, const char *cmd, char *out, size_t size)
{
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc, code;

	eo.user = user;
	eo.timeout_sec = 60;
	rc = hangar_sandbox_exec(&r, sb, cmd, &eo);
	U_CHECK(rc == 0, "exec %s: %d", cmd, rc);
	code = r.exit_code;
	if (out) {
		snprintf(out, size, "%.*s", (int)r.out.size, r.out.ptr ? r.out.ptr : "");
		out[strcspn(out, "\n")] = '\0';
	}
	hangar_exec_result_dispose(&r);
	return code;
}

static void u_expect(hangar_sandbox *sb, const char *user, const char *cmd, const char *want)
{
	char got[256];
	int code = u_run(sb, user, cmd, got, sizeof(got));

	U_CHECK(code == 0 && !strcmp(got, want), "%s in %s: exit %d, \"%s\", want \"%s\"", cmd, hangar_sandbox_id(sb),
		code, got, want);
}

static void u_must(hangar_sandbox *sb, const char *user, const char *cmd)
{
	int code = u_run(sb, user, cmd, NULL, 0);

	U_CHECK(code == 0, "%s in %s: exit %d", cmd, hangar_sandbox_id(sb), code);
}

static hangar_ctx *u_ctx(void)
{
	hangar_ctx *ctx = NULL;

	U_CHECK(hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0 &&
			hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "local") == 0 &&
			hangar_ctx_set(ctx, "HANGAR_SECRET_KEY", "local snapshot test key, not a secret") == 0,
		"context");
	return ctx;
}

/* Runs fn as `user` in a child, the state directory its own; fails the test when the child fails. */
static void as_user(const struct passwd *pw, void (*fn)(unsigned img_uid, unsigned img_gid), unsigned img_uid,
		    unsigned img_gid)
{
	pid_t pid;
	int status = -1;

	ck_assert_int_eq(chown(state_dir, pw->pw_uid, pw->pw_gid), 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
		    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0)
			_exit(253);
		setenv("HOME", pw->pw_dir, 1);
		fn(img_uid, img_gid);
		fflush(NULL);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "as `user`: status %d (see its message above)",
		      status);
}

static void u_snapshot(hangar_sandbox *sb, char *id)
{
	hangar_buf b = HANGAR_BUF_INIT;
	int rc = hangar_sandbox_snapshot(&b, sb, "test");

	U_CHECK(rc == 0 && b.ptr && strlen(b.ptr) == SNAP_ID_LEN, "snapshot: %d", rc);
	snprintf(id, SNAP_ID_LEN + 1, "%s", b.ptr);
	hangar_buf_dispose(&b);
}

static void unprivileged_body(unsigned img_uid, unsigned img_gid)
{
	hangar_ctx *ctx = u_ctx();
	hangar_provider *p = NULL;
	hangar_sandbox *parent, *a, *b, *c;
	char id[SNAP_ID_LEN + 1], path[PATH_MAX], outside[128], cmd[1024], pid[64];
	struct stat st;

	U_CHECK(hangar_provider_lookup(&p, ctx, "local") == 0 &&
			(hangar_provider_capabilities(p) & HANGAR_CAP_SNAPSHOT),
		"HANGAR_CAP_SNAPSHOT for a caller with subordinate ids");
	hangar_provider_unref(p);
	parent = u_create(ctx, NULL);
	snprintf(outside, sizeof(outside), "%s/outside", state_dir);
	U_CHECK(mkdir(outside, 0700) == 0, "mkdir %s", outside);
	/*
	 * The files of `user` and of root, one of each that nobody may read (the
	 * copy reads it all the same), hard and symbolic links, a link to the
	 * caller's own directory (followed, the copy would write there), a FIFO.
	 */
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd /workspace; echo parent > a; ln a a-link; ln -s a a-sym; mkdir -p d/e; echo deep > d/e/f; "
		 "echo locked > locked; chmod 000 locked; echo home > ~/h; echo tmp > /tmp/t; "
		 "ln -s %s out; mkdir dir; ln -s %s dir/x; mkfifo fifo; head -c 16M /dev/zero > big",
		 outside, outside);
	u_must(parent, NULL, cmd);
	u_must(parent, "root", "echo secret > /root/r; chmod 600 /root/r; mkdir -m 700 /root/d; echo in > /root/d/f; "
			       "echo zero > /workspace/zero; chmod 0 /workspace/zero");
	u_snapshot(parent, id);

	/* Owned in the caller's image range as the commands saw them: 0 its first id, `user` its first + 1000. */
	snap_path(path, sizeof(path), id, "/layer/workspace/a");
	U_CHECK(lstat(path, &st) == 0 && st.st_uid == img_uid + 1000 && st.st_gid == img_gid + 1000 && st.st_nlink == 2,
		"%s: %u:%u, %lu links", path, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned long)st.st_nlink);
	/* Root's /root: the range's first id's, closed to the caller as to `user` (the children check its files). */
	snap_path(path, sizeof(path), id, "/layer/root");
	U_CHECK(lstat(path, &st) == 0 && st.st_uid == img_uid && st.st_gid == img_gid && (st.st_mode & 07777) == 0700,
		"%s: %u:%u %o", path, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode);
	snap_path(path, sizeof(path), id, "/layer/root/r");
	U_CHECK(lstat(path, &st) < 0 && errno == EACCES, "the caller reads into root's /root");
	snap_path(path, sizeof(path), id, "/layer/workspace/zero");
	U_CHECK(lstat(path, &st) == 0 && st.st_uid == img_uid && (st.st_mode & 07777) == 0, "%s: %u %o", path,
		(unsigned)st.st_uid, (unsigned)st.st_mode);
	snap_path(path, sizeof(path), id, "/layer/workspace/out");
	U_CHECK(lstat(path, &st) == 0 && S_ISLNK(st.st_mode), "%s is a link", path);
	snprintf(path, sizeof(path), "%s/x", outside);
	U_CHECK(lstat(path, &st) < 0, "nothing written through a link");

	a = u_create(ctx, id);
	b = u_create(ctx, id);
	for (hangar_sandbox *x = a; x; x = x == a ? b : NULL) {
		u_expect(x, NULL, "cat /workspace/a /workspace/d/e/f ~/h /tmp/t | tr '\\n' ' '",
			 "parent deep home tmp ");
		u_expect(x, NULL, "stat -c %U:%G:%h /workspace/a; readlink /workspace/a-sym", "user:user:2");
		u_expect(x, NULL, "readlink /workspace/a-sym", "a");
		u_expect(x, NULL, "stat -c %U:%a /workspace/locked /workspace/zero | tr '\\n' ' '", "user:0 root:0 ");
		u_expect(x, NULL, "test -p /workspace/fifo && id -un", "user");
		U_CHECK(u_run(x, NULL, "cat /root/r", NULL, 0) != 0, "`user` reads root's /root/r");
		u_expect(x, "root", "cat /root/r /root/d/f /workspace/locked | tr '\\n' ' '", "secret in locked ");
		u_expect(x, "root", "stat -c %U:%G:%a /root/r /root/d | tr '\\n' ' '", "root:root:600 root:root:700 ");
		U_CHECK(u_run(x, NULL, "echo x > /workspace/dir/x", NULL, 0) != 0, "a write through a link");
	}
	snprintf(path, sizeof(path), "%s/x", outside);
	U_CHECK(lstat(path, &st) < 0, "nothing written through a link by a child");
	/* A write in one child: absent in the other, in the parent and in the snapshot. */
	u_must(a, NULL, "echo a > /workspace/a; echo new > /workspace/only-a; rm /workspace/d/e/f");
	u_must(a, "root", "echo a > /root/r");
	u_expect(a, NULL, "cat /workspace/a /workspace/only-a | tr '\\n' ' '", "a new ");
	u_expect(b, NULL, "test ! -e /workspace/only-a && cat /workspace/a /workspace/d/e/f | tr '\\n' ' '",
		 "parent deep ");
	u_expect(b, "root", "cat /root/r", "secret");
	u_expect(parent, NULL, "test ! -e /workspace/only-a && cat /workspace/a", "parent");
	snap_path(path, sizeof(path), id, "/layer/workspace/only-a");
	U_CHECK(lstat(path, &st) < 0, "a child's write in the snapshot");
	/* The snapshot's 16 MiB are below a child's layer: 20 MiB more fit in 24, 8 more do not. */
	U_CHECK(hangar_ctx_set(ctx, "HANGAR_LOCAL_DISK_MB", "24") == 0, "disk setting");
	c = u_create(ctx, id);
	u_must(c, NULL, "head -c 20M /dev/zero > /workspace/more");
	U_CHECK(u_run(c, NULL, "head -c 8M /dev/zero > /tmp/over", NULL, 0) != 0, "past the disk limit");
	U_CHECK(hangar_sandbox_kill(c) == 0, "kill");
	hangar_sandbox_unref(c);
	/* The parent's slot goes with it; the snapshot, owned in the image range, stays. */
	snprintf(pid, sizeof(pid), "%s", hangar_sandbox_id(parent));
	U_CHECK(hangar_sandbox_kill(parent) == 0, "kill the parent");
	c = u_create(ctx, id);
	u_expect(c, NULL, "cat /workspace/a", "parent");
	/* A child's own snapshot: its ids are the image range already. */
	u_must(c, NULL, "echo second > /workspace/second");
	{
		char id2[SNAP_ID_LEN + 1];
		hangar_sandbox *g;

		u_snapshot(c, id2);
		g = u_create(ctx, id2);
		u_expect(g, NULL, "cat /workspace/a /workspace/second | tr '\\n' ' '", "parent second ");
		u_expect(g, "root", "cat /root/r", "secret");
		U_CHECK(hangar_sandbox_kill(g) == 0, "kill");
		hangar_sandbox_unref(g);
		U_CHECK(hangar_snapshot_delete(ctx, "local", id2) == 0, "delete %s", id2);
	}
	/* A copy that fails half-way leaves nothing the caller could not remove (checked at the end). */
	u_must(b, NULL, "cd /tmp; for i in $(seq 1 200); do mkdir d; cd d; done");
	{
		hangar_buf none = HANGAR_BUF_INIT;

		U_CHECK(hangar_sandbox_snapshot(&none, b, NULL) == HANGAR_EOS &&
				strstr(hangar_error_last()->message, "deep"),
			"a tree too deep");
	}
	u_expect(b, NULL, "echo thawed", "thawed");
	U_CHECK(hangar_snapshot_delete(ctx, "local", id) == HANGAR_EBUSY, "delete while in use");
	for (hangar_sandbox *x = a; x; x = x == a ? b : x == b ? c : NULL)
		U_CHECK(hangar_sandbox_kill(x) == 0, "kill");
	/* The caller removes what its image range owns. */
	U_CHECK(hangar_snapshot_delete(ctx, "local", id) == 0, "delete %s", id);
	snap_path(path, sizeof(path), id, "");
	U_CHECK(lstat(path, &st) < 0, "%s is gone", path);
	snprintf(path, sizeof(path), "%s/local/snapshots", state_dir);
	U_CHECK(rmdir(path) == 0, "nothing left in %s", path);
	rmdir(outside);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(c);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}

START_TEST(unprivileged_caller_with_subids)
{
	unsigned img_uid, img_gid;
	const struct passwd *pw;

	SKIP_UNLESS_ROOT();
	if (!(pw = sub_caller(&img_uid, &img_gid)))
		return;
	as_user(pw, unprivileged_body, img_uid, img_gid);
}
END_TEST

static void unprivileged_fork_body(unsigned img_uid, unsigned img_gid)
{
	hangar_ctx *ctx = u_ctx();
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL;
	struct forks f = { 0, 0, 0, { NULL } };

	(void)img_uid;
	(void)img_gid;
	/* With subordinate ids turned down, the jail runs every sandbox as the caller alone: no snapshots. */
	{
		hangar_ctx *off = u_ctx();
		hangar_provider *p = NULL;
		hangar_sandbox *none = NULL;
		hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;

		U_CHECK(hangar_ctx_set(off, "HANGAR_LOCAL_SUBIDS", "off") == 0 &&
				hangar_provider_lookup(&p, off, "local") == 0 &&
				!(hangar_provider_capabilities(p) & HANGAR_CAP_SNAPSHOT),
			"no HANGAR_CAP_SNAPSHOT with HANGAR_LOCAL_SUBIDS off");
		o.provider = "local";
		o.template_id = "snap-0123456789abcdef";
		U_CHECK(hangar_sandbox_create(&none, off, &o) == HANGAR_EUNSUPPORTED,
			"a create from a snapshot, ids off");
		hangar_provider_unref(p);
		hangar_ctx_unref(off);
	}
	co.provider = "local";
	co.timeout_sec = 300;
	co.network = HANGAR_NETWORK_OFF;
	so.create = &co;
	so.workspace = "/workspace";
	U_CHECK(hangar_session_create(&s, ctx, &so) == 0 && hangar_session_sandbox(&sb, s) == 0, "session");
	u_must(sb, NULL, "echo from-parent > /workspace/p");
	U_CHECK(hangar_session_fork(s, 2, on_fork, &f) == 0, "fork");
	U_CHECK(f.ok == 2 && f.method == HANGAR_FORK_SNAPSHOT, "%d forks by method %d", f.ok, f.method);
	for (int i = 0; i < f.ok; i++) {
		hangar_sandbox *x = NULL;

		U_CHECK(hangar_session_sandbox(&x, f.s[i]) == 0, "a fork's sandbox");
		u_expect(x, NULL, "cat /workspace/p", "from-parent");
		u_must(x, NULL, "echo child > /workspace/p");
		hangar_sandbox_unref(x);
	}
	u_expect(sb, NULL, "cat /workspace/p", "from-parent");
	for (int i = 0; i < f.ok; i++) {
		hangar_session_archive(f.s[i]);
		hangar_session_unref(f.s[i]);
	}
	hangar_sandbox_unref(sb);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}

START_TEST(unprivileged_session_fork_goes_by_snapshot)
{
	unsigned img_uid, img_gid;
	const struct passwd *pw;

	SKIP_UNLESS_ROOT();
	if (!(pw = sub_caller(&img_uid, &img_gid)))
		return;
	as_user(pw, unprivileged_fork_body, img_uid, img_gid);
}
END_TEST

/* The same, for a caller that ignores SIGCHLD (a daemon's habit): the kernel reaps its children itself. */
static void sigchld_ignored_fork_body(unsigned img_uid, unsigned img_gid)
{
	signal(SIGCHLD, SIG_IGN);
	unprivileged_fork_body(img_uid, img_gid);
}

/*
 * The library's helpers that map a subordinate range (newuidmap's exit
 * status) still work when the caller ignores SIGCHLD: that status cannot
 * be waited for then, and the map itself is checked instead.
 */
START_TEST(unprivileged_caller_ignoring_sigchld)
{
	unsigned img_uid, img_gid;
	const struct passwd *pw;

	SKIP_UNLESS_ROOT();
	if (!(pw = sub_caller(&img_uid, &img_gid)))
		return;
	as_user(pw, sigchld_ignored_fork_body, img_uid, img_gid);
}
END_TEST

static char g_rootfs[128]; /* unprivileged_image_body's rootfs tarball */

static void unprivileged_image_body(unsigned img_uid, unsigned img_gid)
{
	hangar_ctx *ctx = u_ctx();
	hangar_image_opts io = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	hangar_sandbox *parent, *a, *b;
	char id[SNAP_ID_LEN + 1], store[128], path[PATH_MAX];
	struct stat st;

	snprintf(store, sizeof(store), "%s/images", state_dir);
	U_CHECK(hangar_ctx_set(ctx, "HANGAR_IMAGE_DIR", store) == 0, "image dir");
	io.name = "bb";
	U_CHECK(hangar_image_import(&digest, ctx, g_rootfs, &io) == 0, "import %s", g_rootfs);
	hangar_buf_dispose(&digest);
	parent = u_create(ctx, "bb");
	u_must(parent, "root",
	       "set -e; echo added > /etc/added; rm /bin/vi /srv/gone; rm -r /srv/keep; mkdir /srv/keep; "
	       "echo n > /srv/keep/n; echo ws > /workspace/w");
	u_snapshot(parent, id);
	/* The writable layer, owned in the image range; its whiteout a 0:0 device. */
	snap_path(path, sizeof(path), id, "/layer/upper/etc/added");
	U_CHECK(lstat(path, &st) == 0 && st.st_uid == img_uid && st.st_gid == img_gid, "%s: %u:%u", path,
		(unsigned)st.st_uid, (unsigned)st.st_gid);
	snap_path(path, sizeof(path), id, "/layer/upper/srv/gone");
	U_CHECK(lstat(path, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == 0, "%s is a whiteout", path);
	a = u_create(ctx, id);
	b = u_create(ctx, id);
	for (hangar_sandbox *x = a; x; x = x == a ? b : NULL) {
		u_expect(x, NULL, "cat /etc/added /workspace/w | tr '\\n' ' '", "added ws ");
		u_expect(x, NULL, "test ! -e /bin/vi && test ! -e /srv/gone && echo gone", "gone");
		u_expect(x, NULL, "ls /srv/keep | tr '\\n' ' '", "n ");
		u_expect(x, NULL, "stat -c %U /etc/added", "root");
	}
	u_must(a, "root", "echo a > /etc/added; echo mine > /srv/keep/a");
	u_expect(b, NULL, "cat /etc/added; ls /srv/keep | tr '\\n' ' '", "added");
	u_expect(b, NULL, "ls /srv/keep | tr '\\n' ' '", "n ");
	for (hangar_sandbox *x = a; x; x = x == a ? b : x == b ? parent : NULL)
		U_CHECK(hangar_sandbox_kill(x) == 0, "kill");
	U_CHECK(hangar_snapshot_delete(ctx, "local", id) == 0, "delete %s", id);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}

/* The same for an unprivileged caller's image sandbox: its writable layer is in its image range already. */
START_TEST(unprivileged_image_sandbox_snapshot)
{
	const char *tools = getenv("HANGAR_IMAGE_TOOLS");
	unsigned img_uid, img_gid;
	const struct passwd *pw;
	char cmd[2048];

	SKIP_UNLESS_ROOT();
	if (!(pw = sub_caller(&img_uid, &img_gid)))
		return;
	if (!tools || access("/bin/busybox", X_OK) < 0) {
		fprintf(stderr, "skipped: no busybox image (HANGAR_IMAGE_TOOLS, /bin/busybox)\n");
		return;
	}
	/* A rootfs tarball the caller imports itself: busybox and /srv/keep/{a,b}, /srv/gone. */
	snprintf(g_rootfs, sizeof(g_rootfs), "%s/rootfs.tar", state_dir);
	snprintf(cmd, sizeof(cmd),
		 "env -u LD_PRELOAD python3 -c 'import sys, io, shutil, tarfile\n"
		 "sys.path.insert(0, sys.argv[1]); import images\n"
		 "shutil.copyfile(images.busybox_tar(), sys.argv[2])\n"
		 "with tarfile.open(sys.argv[2], \"a\") as t:\n"
		 "    for d in (\"srv\", \"srv/keep\"):\n"
		 "        i = tarfile.TarInfo(d); i.type, i.mode = tarfile.DIRTYPE, 0o755; t.addfile(i)\n"
		 "    for f in (\"srv/keep/a\", \"srv/keep/b\", \"srv/gone\"):\n"
		 "        i = tarfile.TarInfo(f); i.size = 2; t.addfile(i, io.BytesIO(b\"x\\n\"))' "
		 "'%.900s' '%.120s' && chmod 644 '%.120s'",
		 tools, g_rootfs, g_rootfs);
	ck_assert_int_eq(system(cmd), 0);
	as_user(pw, unprivileged_image_body, img_uid, img_gid);
}
END_TEST

/* ---- the life of released snapshots ---- */

/*
 * The snapshots in the state directory: how many (the last one's id in id,
 * when id), and in *left how many removals were left unfinished (.del-).
 */
static int snapshots_on_disk(char *id, int *left)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (left)
		*left = 0;
	snprintf(path, sizeof(path), "%s/local/snapshots", state_dir);
	if (!(d = opendir(path)))
		return 0;
	while ((de = readdir(d))) {
		if (!strncmp(de->d_name, "snap-", 5)) {
			n++;
			if (id)
				snprintf(id, SNAP_ID_LEN + 1, "%.*s", SNAP_ID_LEN, de->d_name);
		} else if (!strncmp(de->d_name, ".del-", 5) && left) {
			(*left)++;
		}
	}
	closedir(d);
	return n;
}

/* Waits until snapshot id's directory is gone and no removal is left half-done; 1 when it was in time. */
static int wait_snapshot_gone(const char *id, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	char path[PATH_MAX];
	struct stat st;

	snap_path(path, sizeof(path), id, "");
	for (;;) {
		int left = 0;

		snapshots_on_disk(NULL, &left);
		if (stat(path, &st) < 0 && errno == ENOENT && left == 0)
			return 1;
		if (clock_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 20);
	}
}

static int snapshot_exists(const char *id)
{
	char path[PATH_MAX];
	struct stat st;

	snap_path(path, sizeof(path), id, "/layer");
	return stat(path, &st) == 0;
}

/* Waits until process pid is gone (a SIGKILLed jail is reaped by whoever adopted it). */
static int wait_pid_gone(int pid, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", pid);
	while (stat(path, &st) == 0) {
		if (clock_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 20);
	}
	return 1;
}

/* hangar_sandbox_list()'s callback, for the clean-up the list does. */
static int count_one(const hangar_sandbox_info *info, void *payload)
{
	(void)info;
	(void)payload;
	return 0;
}

/* A session in ctx on local, its sandbox in *sb, with a file the forks inherit. */
static hangar_session *fork_parent(hangar_ctx *ctx, hangar_sandbox **sb)
{
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;

	co.provider = "local";
	co.timeout_sec = 300;
	co.network = HANGAR_NETWORK_OFF;
	so.create = &co;
	so.workspace = "/workspace";
	ck_assert_msg(hangar_session_create(&s, ctx, &so) == 0, "%s", hangar_error_last()->message);
	ck_assert_int_eq(hangar_session_sandbox(sb, s), 0);
	must(*sb, NULL, "echo from-parent > /workspace/p");
	return s;
}

/* The parent's files are as they were (the forks never wrote there); then it and its context go. */
static void fork_parent_done(hangar_ctx *ctx, hangar_session *s, hangar_sandbox *sb)
{
	expect(sb, "cat /workspace/p", "from-parent");
	hangar_sandbox_unref(sb);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}

START_TEST(fork_snapshot_goes_with_its_last_child)
{
	hangar_ctx *ctx;
	hangar_session *s;
	hangar_sandbox *sb = NULL, *kids[3];
	struct forks f = { 0, 0, 0, { NULL } };
	char id[SNAP_ID_LEN + 1];

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	s = fork_parent(ctx, &sb);
	ck_assert_msg(hangar_session_fork(s, 3, on_fork, &f) == 0, "%s", hangar_error_last()->message);
	ck_assert_int_eq(f.ok, 3);
	ck_assert_int_eq(f.method, HANGAR_FORK_SNAPSHOT);
	/* One snapshot, held by the three children. */
	ck_assert_int_eq(snapshots_on_disk(id, NULL), 1);
	for (int i = 0; i < 3; i++) {
		kids[i] = NULL;
		ck_assert_int_eq(hangar_session_sandbox(&kids[i], f.s[i]), 0);
		expect(kids[i], "cat /workspace/p", "from-parent");
	}
	/* Released, not deleted: a user's create from it works while a child holds it. */
	ck_assert_int_eq(delete_snapshot(ctx, id), HANGAR_EBUSY);
	ck_assert_int_eq(hangar_sandbox_kill(kids[0]), 0);
	ck_assert_int_eq(hangar_sandbox_kill(kids[1]), 0);
	ck_assert_msg(snapshot_exists(id), "snapshot %s went while a child of it runs", id);
	expect(kids[2], "cat /workspace/p", "from-parent");
	/* The last child's end takes it. */
	ck_assert_int_eq(hangar_sandbox_kill(kids[2]), 0);
	ck_assert_msg(wait_snapshot_gone(id, 15000), "snapshot %s stays after its last child was killed", id);
	/* The parent never used it. */
	expect(sb, "cat /workspace/p", "from-parent");
	for (int i = 0; i < 3; i++) {
		hangar_sandbox_unref(kids[i]);
		hangar_session_unref(f.s[i]);
	}
	hangar_sandbox_unref(sb);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(failed_fork_leaves_no_snapshot)
{
	hangar_ctx *ctx;
	hangar_session *s;
	hangar_sandbox *sb = NULL;
	struct forks f = { 0, 0, 0, { NULL } };
	int rc;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	s = fork_parent(ctx, &sb);
	/* Room for the parent only: the snapshot is taken, and every child is refused. */
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_MAX_SANDBOXES", "1"), 0);
	rc = hangar_session_fork(s, 3, on_fork, &f);
	ck_assert_msg(rc != 0 || f.failed == 3, "fork: %d, %d made, %d failed", rc, f.ok, f.failed);
	ck_assert_int_eq(f.ok, 0);
	ck_assert_int_eq(snapshots_on_disk(NULL, NULL), 0);
	{
		int left = 1;

		snapshots_on_disk(NULL, &left);
		ck_assert_int_eq(left, 0);
	}
	fork_parent_done(ctx, s, sb);
}
END_TEST

/* The forker of killed_forker_leaves_no_snapshot: dies by SIGKILL when told of its first child. */
static void die_on_first(const hangar_session_fork_result *r, void *payload)
{
	(void)r;
	(void)payload;
	kill(getpid(), SIGKILL);
}

struct keep_one {
	hangar_ctx *ctx;
	const char *keep; /* the id of the sandbox left running */
};

/* hangar_sandbox_list()'s callback: every sandbox but payload's keep is killed. */
static int kill_others(const hangar_sandbox_info *info, void *payload)
{
	const struct keep_one *k = payload;
	hangar_sandbox *sb = NULL;

	if (!strcmp(info->id, k->keep))
		return 0;
	if (hangar_sandbox_attach(&sb, k->ctx, info->provider, info->id) == 0) {
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	return 0;
}

/*
 * A process killed with SIGKILL in the middle of a session fork, after the
 * snapshot and the children were made and before it released the snapshot:
 * the snapshot was held by that process, released from the start, so it
 * stays only while the children run and goes with the last of them.
 */
START_TEST(killed_forker_leaves_no_snapshot)
{
	hangar_ctx *ctx;
	hangar_session *s;
	hangar_sandbox *sb = NULL;
	char id[SNAP_ID_LEN + 1], path[PATH_MAX], sid[128];
	struct keep_one k;
	struct stat st;
	int status;
	pid_t pid;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	s = fork_parent(ctx, &sb);
	snprintf(sid, sizeof(sid), "%s", hangar_session_id(s));
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* A context of its own, as another process would have. */
		hangar_ctx *c = NULL;
		hangar_session *mine = NULL;

		if (hangar_ctx_new(&c, 0) || hangar_ctx_set(c, "HANGAR_STATE_DIR", state_dir) ||
		    hangar_ctx_set(c, "HANGAR_SECRET_KEY", "local snapshot test key, not a secret") ||
		    hangar_session_open(&mine, c, sid))
			_exit(2);
		hangar_session_fork(mine, 2, die_on_first, NULL);
		_exit(3); /* the callback kills it first */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "forker ended with status %#x", status);
	/* Its snapshot: there while its two children run, and released. */
	ck_assert_int_eq(snapshots_on_disk(id, NULL), 1);
	snap_path(path, sizeof(path), id, "/release");
	ck_assert_msg(stat(path, &st) == 0, "snapshot %s of a killed fork is not released", id);
	/* The children's end takes it. */
	k.ctx = ctx;
	k.keep = hangar_sandbox_id(sb);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", kill_others, &k), 0);
	ck_assert_msg(wait_snapshot_gone(id, 15000), "snapshot %s stays after the children of a killed fork", id);
	fork_parent_done(ctx, s, sb);
}
END_TEST

/* Lays out name in the snapshots directory as a maker does first: the directory and its use file. */
static void half_made(const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/local", state_dir);
	ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
	snprintf(path, sizeof(path), "%s/local/snapshots", state_dir);
	ck_assert(mkdir(path, 0700) == 0 || errno == EEXIST);
	snap_path(path, sizeof(path), name, "");
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snap_path(path, sizeof(path), name, "/use");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static int exists_named(const char *name)
{
	char path[PATH_MAX];
	struct stat st;

	snap_path(path, sizeof(path), name, "");
	return stat(path, &st) == 0;
}

/*
 * A snapshot whose maker died while it copied (.new-<id>, its gate free)
 * is removed by the clean-up of a later list, once old enough that its
 * maker would have taken the gate; one whose maker still works on it (its
 * gate held) stays.
 */
START_TEST(half_made_snapshot_swept)
{
	static const char dead[] = ".new-snap-00000000000000aa", busy[] = ".new-snap-00000000000000bb";
	hangar_ctx *ctx;
	char path[PATH_MAX];
	int64_t deadline;
	int gate;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	half_made(dead);
	half_made(busy);
	snap_path(path, sizeof(path), busy, "");
	gate = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(gate, 0);
	ck_assert_int_eq(flock(gate, LOCK_EX), 0);
	/* A fresh one stays: its maker may not have its gate yet. */
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_one, NULL), 0);
	ck_assert(exists_named(dead));
	deadline = clock_mono_ms() + 30000;
	while (exists_named(dead) && clock_mono_ms() < deadline) {
		ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_one, NULL), 0);
		poll(NULL, 0, 250);
	}
	ck_assert_msg(!exists_named(dead), "a half-made snapshot whose maker died stays");
	ck_assert_msg(exists_named(busy), "a snapshot being made was removed");
	close(gate);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_one, NULL), 0);
	ck_assert(!exists_named(busy));
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(user_snapshot_stays_until_released)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *a, *b;
	char id[SNAP_ID_LEN + 1];

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	must(parent, NULL, "echo kept > /workspace/k");
	snapshot(parent, id);
	a = create_from(ctx, id);
	b = create_from(ctx, id);
	ck_assert_int_eq(hangar_sandbox_kill(a), 0);
	ck_assert_int_eq(hangar_sandbox_kill(b), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(parent);
	/* Taken by the user, it outlives its children and a clean-up. */
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_one, NULL), 0);
	ck_assert_msg(snapshot_exists(id), "a user's snapshot went with its children");
	/* Released with a child running: stays for it, and creates from it still work. */
	a = create_from(ctx, id);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	ck_assert_msg(snapshot_exists(id), "released snapshot %s went while a child of it runs", id);
	b = create_from(ctx, id);
	expect(b, "cat /workspace/k", "kept");
	ck_assert_int_eq(hangar_sandbox_kill(a), 0);
	ck_assert_msg(snapshot_exists(id), "released snapshot %s went while a child of it runs", id);
	ck_assert_int_eq(hangar_sandbox_kill(b), 0);
	ck_assert_msg(wait_snapshot_gone(id, 15000), "released snapshot %s stays after its children", id);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), HANGAR_EGONE);
	{
		hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
		hangar_sandbox *none = NULL;

		o.provider = "local";
		o.template_id = id;
		ck_assert_int_eq(hangar_sandbox_create(&none, ctx, &o), HANGAR_ENOTFOUND);
		ck_assert_ptr_null(none);
	}
	/* Released unused: gone at once. */
	parent = create_from(ctx, NULL);
	snapshot(parent, id);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	ck_assert_msg(!snapshot_exists(id), "an unused snapshot stays after its release");
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", "../../etc"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", ""), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_release(NULL, "local", id), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "no-such-provider", id), HANGAR_ENOTFOUND);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(killed_jail_leaves_it_to_the_next_list)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child;
	char id[SNAP_ID_LEN + 1], cid[64];
	int pid;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	snapshot(parent, id);
	child = create_from(ctx, id);
	snprintf(cid, sizeof(cid), "%s", hangar_sandbox_id(child));
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	/* The jail dies without a word: nobody removes the snapshot yet... */
	pid = jail_pid_of(cid);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	ck_assert(wait_pid_gone(pid, 15000));
	ck_assert_msg(snapshot_exists(id), "snapshot %s went before any clean-up", id);
	/* ...until the library clears the dead sandbox away: here, the next list. */
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_one, NULL), 0);
	ck_assert_msg(!snapshot_exists(id), "snapshot %s stays after the list cleared its dead child", id);
	ck_assert(wait_snapshot_gone(id, 1));
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(expired_child_takes_it_with_it)
{
	hangar_ctx *ctx;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *parent, *child = NULL;
	char id[SNAP_ID_LEN + 1];

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	snapshot(parent, id);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	o.provider = "local";
	o.template_id = id;
	o.timeout_sec = 2;
	o.network = HANGAR_NETWORK_OFF;
	ck_assert_msg(hangar_sandbox_create(&child, ctx, &o) == 0, "%s", hangar_error_last()->message);
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	ck_assert(snapshot_exists(id));
	/* No call of the library in between: the jail's own end removes it. */
	ck_assert_msg(wait_snapshot_gone(id, 30000), "snapshot %s stays after its only child expired", id);
	ck_assert(wait_gone(ctx, hangar_sandbox_id(child), 15000));
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/* What hangar_snapshot_list() said of one snapshot. */
struct seen {
	const char *id;
	int count, found, released;
	char name[64], sandbox[64];
	int64_t created_at_us;
};

static int on_snapshot(const hangar_snapshot_info *info, void *payload)
{
	struct seen *s = payload;

	ck_assert_uint_eq(info->version, HANGAR_SNAPSHOT_INFO_VERSION);
	ck_assert_str_eq(info->provider, "local");
	s->count++;
	if (strcmp(info->snapshot_id, s->id) != 0)
		return 0;
	s->found++;
	s->released = (int)info->released;
	s->created_at_us = info->created_at_us;
	snprintf(s->name, sizeof(s->name), "%s", info->name);
	snprintf(s->sandbox, sizeof(s->sandbox), "%s", info->sandbox_id);
	return 0;
}

static int stop_at_first(const hangar_snapshot_info *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 7;
}

START_TEST(list_reports_snapshots)
{
	hangar_ctx *ctx;
	hangar_sandbox *parent, *child;
	char id[SNAP_ID_LEN + 1], other[SNAP_ID_LEN + 1];
	struct seen s = { 0 };
	int64_t before = clock_wall_us();
	int calls = 0;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	s.id = "none";
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", on_snapshot, &s), 0);
	ck_assert_int_eq(s.count, 0);
	parent = create_from(ctx, NULL);
	snapshot(parent, id);
	snapshot(parent, other);
	child = create_from(ctx, id);
	memset(&s, 0, sizeof(s));
	s.id = id;
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", on_snapshot, &s), 0);
	ck_assert_int_eq(s.count, 2);
	ck_assert_int_eq(s.found, 1);
	ck_assert_str_eq(s.name, "test");
	ck_assert_str_eq(s.sandbox, hangar_sandbox_id(parent));
	ck_assert_int_eq(s.released, 0);
	ck_assert(s.created_at_us >= before && s.created_at_us <= clock_wall_us());
	/* Released while in use: listed, and said to be released; gone from the list with its child. */
	ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
	memset(&s, 0, sizeof(s));
	s.id = id;
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", on_snapshot, &s), 0);
	ck_assert_int_eq(s.found, 1);
	ck_assert_int_eq(s.released, 1);
	ck_assert_int_eq(hangar_sandbox_kill(child), 0);
	memset(&s, 0, sizeof(s));
	s.id = id;
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", on_snapshot, &s), 0);
	ck_assert_int_eq(s.found, 0);
	ck_assert_int_eq(s.count, 1);
	/* fn's non-zero value stops the walk and is returned. */
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", stop_at_first, &calls), 7);
	ck_assert_int_eq(calls, 1);
	ck_assert_int_eq(hangar_snapshot_list(ctx, "local", NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_list(NULL, "local", on_snapshot, &s), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_snapshot_list(ctx, "no-such-provider", on_snapshot, &s), HANGAR_ENOTFOUND);
	ck_assert_int_eq(delete_snapshot(ctx, other), 0);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A create from a released snapshot at the moment its last use goes: what it got. */
struct racer {
	hangar_ctx *ctx;
	const char *id;
	pthread_barrier_t *go;
	hangar_sandbox *sb;
	int rc, bad_content;
	char why[256];
};

static void *race_create(void *p)
{
	struct racer *r = p;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	int rc;

	o.provider = "local";
	o.template_id = r->id;
	o.timeout_sec = 60;
	o.network = HANGAR_NETWORK_OFF;
	pthread_barrier_wait(r->go);
	r->rc = hangar_sandbox_create(&r->sb, r->ctx, &o);
	if (r->rc != 0) {
		snprintf(r->why, sizeof(r->why), "%s", hangar_error_last()->message);
		return NULL;
	}
	/* Made from it: the whole snapshot, never a half-removed one. */
	rc = hangar_sandbox_exec(&res, r->sb, "cat /workspace/k && ls /workspace/d | wc -l", NULL);
	if (rc != 0 || res.exit_code != 0 || !res.out.ptr || strcmp(res.out.ptr, "kept\n64\n") != 0) {
		r->bad_content = 1;
		snprintf(r->why, sizeof(r->why), "exec %d, exit %d, \"%.*s\"", rc, res.exit_code, (int)res.out.size,
			 res.out.ptr ? res.out.ptr : "");
	}
	hangar_exec_result_dispose(&res);
	return NULL;
}

START_TEST(creates_race_the_last_use)
{
	enum { ROUNDS = 4, N = 2 };
	hangar_ctx *ctx;
	hangar_sandbox *parent;
	pthread_barrier_t go;
	int held = 0, gone = 0;

	SKIP_UNLESS_ROOT();
	ctx = new_ctx();
	parent = create_from(ctx, NULL);
	must(parent, NULL, "echo kept > /workspace/k; mkdir /workspace/d; for i in $(seq 64); do echo $i > /workspace/d/$i; done");
	/*
	 * Each round, creates start from a released snapshot at the moment its
	 * last use goes: each holds it whole or finds it gone
	 * (HANGAR_ENOTFOUND), and once every use is gone so is the snapshot.
	 * Which of the two a create gets depends on the timing, so only that
	 * is asserted.
	 */
	for (int round = 0; round < ROUNDS; round++) {
		struct racer r[N];
		pthread_t t[N];
		hangar_sandbox *child;
		char id[SNAP_ID_LEN + 1];

		snapshot(parent, id);
		child = create_from(ctx, id);
		ck_assert_int_eq(hangar_snapshot_release(ctx, "local", id), 0);
		ck_assert_int_eq(pthread_barrier_init(&go, NULL, N + 1), 0);
		for (int i = 0; i < N; i++) {
			r[i] = (struct racer){ ctx, id, &go, NULL, 0, 0, "" };
			ck_assert_int_eq(pthread_create(&t[i], NULL, race_create, &r[i]), 0);
		}
		pthread_barrier_wait(&go);
		ck_assert_int_eq(hangar_sandbox_kill(child), 0);
		for (int i = 0; i < N; i++) {
			ck_assert_int_eq(pthread_join(t[i], NULL), 0);
			ck_assert_msg(r[i].rc == 0 || r[i].rc == HANGAR_ENOTFOUND,
				      "a create from the released snapshot failed with %d: %s", r[i].rc, r[i].why);
			ck_assert_msg(!r[i].bad_content, "a child saw a partial snapshot: %s", r[i].why);
			if (r[i].rc == 0) {
				held++;
				ck_assert_int_eq(hangar_sandbox_kill(r[i].sb), 0);
				hangar_sandbox_unref(r[i].sb);
			} else {
				gone++;
			}
		}
		pthread_barrier_destroy(&go);
		ck_assert_msg(wait_snapshot_gone(id, 15000), "snapshot %s stays after every use went", id);
		hangar_sandbox_unref(child);
	}
	ck_assert_int_eq(held + gone, ROUNDS * N);
	ck_assert_int_eq(hangar_sandbox_kill(parent), 0);
	hangar_sandbox_unref(parent);
	hangar_ctx_unref(ctx);
}
END_TEST

static void unprivileged_release_body(unsigned img_uid, unsigned img_gid)
{
	hangar_ctx *ctx = u_ctx();
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL, *parent, *child;
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	struct forks f = { 0, 0, 0, { NULL } };
	char id[SNAP_ID_LEN + 1], cid[64];
	int pid;

	(void)img_uid;
	(void)img_gid;
	co.provider = "local";
	co.timeout_sec = 300;
	co.network = HANGAR_NETWORK_OFF;
	so.create = &co;
	so.workspace = "/workspace";
	U_CHECK(hangar_session_create(&s, ctx, &so) == 0 && hangar_session_sandbox(&sb, s) == 0, "session");
	u_must(sb, NULL, "echo from-parent > /workspace/p");
	u_must(sb, "root", "echo root > /root/r");
	U_CHECK(hangar_session_fork(s, 2, on_fork, &f) == 0, "fork");
	U_CHECK(f.ok == 2 && f.method == HANGAR_FORK_SNAPSHOT, "%d forks by method %d", f.ok, f.method);
	U_CHECK(snapshots_on_disk(id, NULL) == 1, "one snapshot for the fork");
	for (int i = 0; i < f.ok; i++) {
		hangar_sandbox *x = NULL;

		U_CHECK(hangar_session_sandbox(&x, f.s[i]) == 0, "a fork's sandbox");
		u_expect(x, NULL, "cat /workspace/p", "from-parent");
		U_CHECK(hangar_sandbox_kill(x) == 0, "kill fork %d", i);
		U_CHECK(i == f.ok - 1 || snapshot_exists(id), "snapshot %s went while a child of it runs", id);
		hangar_sandbox_unref(x);
		hangar_session_unref(f.s[i]);
	}
	/* Owned in the image range: the library finishes what the jail could only rename. */
	U_CHECK(wait_snapshot_gone(id, 15000), "the fork's snapshot %s stays after its children", id);
	/* A SIGKILLed jail of an unprivileged caller: the next list removes its released snapshot. */
	parent = u_create(ctx, NULL);
	u_snapshot(parent, id);
	child = u_create(ctx, id);
	snprintf(cid, sizeof(cid), "%s", hangar_sandbox_id(child));
	U_CHECK(hangar_snapshot_release(ctx, "local", id) == 0 && snapshot_exists(id), "release %s in use", id);
	pid = jail_pid_of(cid);
	U_CHECK(kill(pid, SIGKILL) == 0 && wait_pid_gone(pid, 15000), "SIGKILL jail %d", pid);
	U_CHECK(hangar_sandbox_list(ctx, "local", count_one, NULL) == 0, "list");
	U_CHECK(wait_snapshot_gone(id, 1), "snapshot %s stays after the list cleared its dead child", id);
	U_CHECK(hangar_sandbox_kill(parent) == 0, "kill parent");
	hangar_sandbox_unref(child);
	hangar_sandbox_unref(parent);
	hangar_sandbox_unref(sb);
	hangar_session_delete(s);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
}

START_TEST(unprivileged_released_snapshots_go)
{
	unsigned img_uid, img_gid;
	const struct passwd *pw;

	SKIP_UNLESS_ROOT();
	if (!(pw = sub_caller(&img_uid, &img_gid)))
		return;
	as_user(pw, unprivileged_release_body, img_uid, img_gid);
}
END_TEST

static Suite *snap_suite(void)
{
	Suite *s = suite_create("local-snap");
	TCase *tc = tcase_create("snapshots");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, contents_and_independence);
	tcase_add_test(tc, outlives_a_killed_parent);
	tcase_add_test(tc, disk_limit_holds_in_a_child);
	tcase_add_test(tc, delete_refused_while_in_use);
	tcase_add_test(tc, hostile_workspace);
	tcase_add_test(tc, too_deep_is_refused_cleanly);
	tcase_add_test(tc, session_fork_goes_by_snapshot);
	tcase_add_test(tc, not_for_unprivileged_callers);
	tcase_add_test(tc, image_sandbox_snapshot);
	tcase_add_test(tc, unprivileged_caller_with_subids);
	tcase_add_test(tc, unprivileged_session_fork_goes_by_snapshot);
	tcase_add_test(tc, unprivileged_caller_ignoring_sigchld);
	tcase_add_test(tc, unprivileged_image_sandbox_snapshot);
	tcase_add_test(tc, fork_snapshot_goes_with_its_last_child);
	tcase_add_test(tc, failed_fork_leaves_no_snapshot);
	tcase_add_test(tc, killed_forker_leaves_no_snapshot);
	tcase_add_test(tc, half_made_snapshot_swept);
	tcase_add_test(tc, user_snapshot_stays_until_released);
	tcase_add_test(tc, killed_jail_leaves_it_to_the_next_list);
	tcase_add_test(tc, expired_child_takes_it_with_it);
	tcase_add_test(tc, list_reports_snapshots);
	tcase_add_test(tc, creates_race_the_last_use);
	tcase_add_test(tc, unprivileged_released_snapshots_go);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(snap_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
