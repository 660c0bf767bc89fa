/*
 * The local provider, through the public API only: bubblewrap jails with
 * hangar-envd inside, supervised by hangar-jail.
 *
 * The meson test sets HANGAR_ENVD_PATH and HANGAR_JAIL_PATH; each test gets
 * its own HANGAR_STATE_DIR. Checks that need root (cgroups, uid 1000) skip
 * otherwise.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>

static char state_dir[64];

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int rm_rf(const char *path)
{
	char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	return system(cmd);
}

static void setup(void)
{
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-local-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
}

static void teardown(void)
{
	/* Kill whatever a failed test left running, then remove the directory. */
	hangar_ctx *ctx = NULL;

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0) {
		char dir[PATH_MAX];
		DIR *d;
		struct dirent *de;

		snprintf(dir, sizeof(dir), "%s/local", state_dir);
		d = opendir(dir);
		while (d && (de = readdir(d))) {
			hangar_sandbox *sb = NULL;

			if (de->d_name[0] == '.')
				continue;
			if (hangar_sandbox_attach(&sb, ctx, "local", de->d_name) == 0)
				hangar_sandbox_kill(sb);
			hangar_sandbox_unref(sb);
		}
		if (d)
			closedir(d);
	}
	hangar_ctx_unref(ctx);
	rm_rf(state_dir);
}

static hangar_ctx *new_ctx(void)
{
	hangar_ctx *ctx = NULL;

	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "local"), 0);
	return ctx;
}

static hangar_sandbox *create(hangar_ctx *ctx, int64_t timeout_sec, int network, const char *const *env)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	o.provider = "local";
	o.timeout_sec = timeout_sec;
	o.network = network;
	o.env = env;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_msg(rc == 0, "create: %d %s", rc, hangar_error_last()->message);
	ck_assert_ptr_nonnull(sb);
	return sb;
}

static void sb_path(char *buf, size_t size, const char *id, const char *rest)
{
	snprintf(buf, size, "%s/local/%s%s", state_dir, id, rest);
}

static int path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/*
 * GET /health over the sandbox's unix socket: the HTTP status, or -1 when
 * nothing answered within timeout_ms (a frozen envd accepts but never answers).
 */
static int health(const char *id, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static const char req[] = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
	int64_t deadline = mono_ms() + timeout_ms;
	char buf[512];
	size_t have = 0;
	int fd, status = -1;

	sb_path(sa.sun_path, sizeof(sa.sun_path), id, "/run/envd.sock");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, sizeof(req) - 1) < 0) {
		close(fd);
		return -2;
	}
	while (have < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		if (strstr(buf, "\r\n")) {
			sscanf(buf, "HTTP/1.%*d %d", &status);
			break;
		}
	}
	close(fd);
	return status;
}

/* The host pid of the sandbox's hangar-envd: the process whose /run/hangar/envd.sock is ours. */
static int envd_pid(const char *id)
{
	char sock[PATH_MAX], path[PATH_MAX];
	struct stat want, st;
	struct dirent *de;
	DIR *d;
	int found = 0;

	sb_path(sock, sizeof(sock), id, "/run/envd.sock");
	if (stat(sock, &want) < 0)
		return 0;
	d = opendir("/proc");
	while (d && (de = readdir(d)) && !found) {
		char cmd[256] = "";
		FILE *f;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(cmd, sizeof(cmd), f))
			cmd[0] = '\0';
		fclose(f);
		if (!strstr(cmd, "hangar-envd") || strstr(cmd, "bwrap"))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/root/run/hangar/envd.sock", de->d_name);
		if (stat(path, &st) == 0 && st.st_ino == want.st_ino && st.st_dev == want.st_dev)
			found = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* A field of /proc/<pid>/status, e.g. "State" → 'S'. */
static char proc_state(int pid)
{
	char path[64], line[256];
	char state = '?';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "State:", 6)) {
			sscanf(line + 6, " %c", &state);
			break;
		}
	fclose(f);
	return state;
}

/* Waits (polling every 50 ms, up to timeout_ms) until attaching by id says gone. */
static int wait_gone(hangar_ctx *ctx, const char *id, int timeout_ms)
{
	int64_t deadline = mono_ms() + timeout_ms;

	for (;;) {
		hangar_sandbox *sb = NULL;
		int rc = hangar_sandbox_attach(&sb, ctx, "local", id);

		hangar_sandbox_unref(sb);
		if (rc == HANGAR_EGONE)
			return 1;
		if (mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 50);
	}
}

struct seen {
	const char *id;
	int found;
	int state;
};

static int list_cb(const hangar_sandbox_info *info, void *payload)
{
	struct seen *s = payload;

	if (!strcmp(info->id, s->id)) {
		s->found++;
		s->state = info->state;
	}
	return 0;
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(create_and_kill)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, 0, NULL);
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	const char *id = hangar_sandbox_id(sb);
	char path[PATH_MAX], saved[64];
	struct stat st;
	int64_t t = now_us();

	ck_assert_uint_eq(strlen(id), 19);
	ck_assert(!strncmp(id, "sb-", 3));
	ck_assert_uint_eq(strspn(id + 3, "0123456789abcdef"), 16);
	snprintf(saved, sizeof(saved), "%s", id);

	sb_path(path, sizeof(path), id, "");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	sb_path(path, sizeof(path), id, "/token");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	sb_path(path, sizeof(path), id, "/run/token");
	ck_assert_msg(!path_exists(path), "envd's copy of the token is removed once it listens");
	ck_assert_int_eq(health(id, 5000), 204);

	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_str_eq(info.id, saved);
	ck_assert_str_eq(info.provider, "local");
	ck_assert_str_eq(info.template_id, "local");
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert(info.created_at_us > t - 30000000 && info.created_at_us <= now_us());
	ck_assert(info.expires_at_us > now_us() + 50000000 && info.expires_at_us <= now_us() + 60000000);

	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	sb_path(path, sizeof(path), saved, "");
	ck_assert_msg(!path_exists(path), "the sandbox's directory is removed by kill");
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
	hangar_sandbox_unref(sb);
	sb = NULL;
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", saved), HANGAR_EGONE);
	ck_assert_ptr_null(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(attach_from_fresh_context_and_list)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 0, 0, NULL);
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	char id[64];
	struct seen seen = { id, 0, 0 };

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);

	/* As after a restart of the process that created it. */
	ctx = new_ctx();
	sb = NULL;
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, NULL, id), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", list_cb, &seen), 0);
	ck_assert_int_eq(seen.found, 1);
	ck_assert_int_eq(seen.state, HANGAR_SANDBOX_RUNNING);
	ck_assert_int_eq(health(id, 5000), 204);

	/* Ids that cannot be local sandboxes are simply not here. */
	hangar_sandbox_unref(sb);
	sb = NULL;
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", "sb-0000000000000000"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", "other-provider-id"), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", id), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	seen.found = 0;
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", list_cb, &seen), 0);
	ck_assert_int_eq(seen.found, 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(pause_and_resume)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 120, 0, NULL), *again = NULL;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	const char *id = hangar_sandbox_id(sb);
	int pid = envd_pid(id);
	char st;

	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_int_eq(info.expires_at_us, 0);
	/* Frozen: envd accepts the connection (the kernel does) but never answers. */
	ck_assert_int_eq(health(id, 500), -1);
	st = proc_state(pid);
	ck_assert_msg(st == 'D' || st == 'T' || st == 'S', "envd state %c", st);
	/* Attaching never resumes; pausing twice is fine. */
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", id), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, again), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_int_eq(hangar_sandbox_pause(again), 0);

	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert(info.expires_at_us > now_us() + 100000000);
	ck_assert_int_eq(health(id, 5000), 204);
	ck_assert_int_eq(envd_pid(id), pid);

	/* A paused sandbox can be killed. */
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(hangar_sandbox_kill(again), 0);
	ck_assert_int_eq(kill(pid, 0), -1);
	hangar_sandbox_unref(again);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(expires)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 1, 0, NULL);
	char id[64], path[PATH_MAX];

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	ck_assert_msg(wait_gone(ctx, id, 10000), "a 1 s sandbox is gone within 10 s");
	sb_path(path, sizeof(path), id, "");
	ck_assert(!path_exists(path));
	ck_assert_int_eq(hangar_sandbox_kill(sb), HANGAR_EGONE);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(set_timeout_and_paused_clock)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, -1, 0, NULL);
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	char id[64];
	int64_t until;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.expires_at_us, 0);

	/* Paused, a sandbox does not expire: its clock stands still. */
	ck_assert_int_eq(hangar_sandbox_set_timeout(sb, 1), 0);
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	until = mono_ms() + 2000;
	while (mono_ms() < until) {
		ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
		ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
		poll(NULL, 0, 50);
	}
	/* Resumed, it gets its timeout again, from now. */
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_msg(wait_gone(ctx, id, 10000), "gone within 10 s of a 1 s resume");

	hangar_sandbox_unref(sb);
	sb = create(ctx, 60, 0, NULL);
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	ck_assert_int_eq(hangar_sandbox_set_timeout(sb, 0), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.expires_at_us, 0);
	ck_assert_int_eq(hangar_sandbox_set_timeout(sb, 1), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert(info.expires_at_us > 0 && info.expires_at_us <= now_us() + 1000000);
	ck_assert_msg(wait_gone(ctx, id, 10000), "gone within 10 s of set_timeout(1)");
	ck_assert_int_eq(hangar_sandbox_set_timeout(sb, 5), HANGAR_EGONE);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(outlives_its_creator)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb = NULL;
	char id[64] = "";
	int fds[2], status;
	pid_t child;
	ssize_t n;

	ck_assert_int_eq(pipe(fds), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		hangar_ctx *cctx = new_ctx();
		hangar_sandbox *csb = create(cctx, 60, 0, NULL);

		n = write(fds[1], hangar_sandbox_id(csb), strlen(hangar_sandbox_id(csb)));
		_exit(n > 0 ? 0 : 1);
	}
	close(fds[1]);
	n = read(fds[0], id, sizeof(id) - 1);
	close(fds[0]);
	ck_assert_int_gt(n, 0);
	id[n] = '\0';
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	ctx = new_ctx();
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", id), 0);
	ck_assert_int_eq(health(id, 5000), 204);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The interfaces envd's network namespace has, from /proc/<pid>/net/dev. */
static int count_interfaces(int pid, int *has_lo)
{
	char path[64], line[512];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/net/dev", pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	*has_lo = 0;
	while (fgets(line, sizeof(line), f)) {
		char name[64];

		if (!strchr(line, ':') || sscanf(line, " %63[^:]:", name) != 1)
			continue;
		n++;
		if (!strcmp(name, "lo"))
			*has_lo = 1;
	}
	fclose(f);
	return n;
}

START_TEST(network_on_and_off)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *off = create(ctx, 60, HANGAR_NETWORK_OFF, NULL);
	hangar_sandbox *on = create(ctx, 60, HANGAR_NETWORK_ON, NULL);
	hangar_sandbox *dflt;
	int lo, self_lo;
	int host = count_interfaces(getpid(), &self_lo);

	ck_assert_int_eq(count_interfaces(envd_pid(hangar_sandbox_id(off)), &lo), 1);
	ck_assert(lo);
	ck_assert_int_eq(count_interfaces(envd_pid(hangar_sandbox_id(on)), &lo), host);
	/* HANGAR_LOCAL_NETWORK is the default. */
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_NETWORK", "off"), 0);
	dflt = create(ctx, 60, HANGAR_NETWORK_DEFAULT, NULL);
	ck_assert_int_eq(count_interfaces(envd_pid(hangar_sandbox_id(dflt)), &lo), 1);
	ck_assert_int_eq(hangar_sandbox_kill(off), 0);
	ck_assert_int_eq(hangar_sandbox_kill(on), 0);
	ck_assert_int_eq(hangar_sandbox_kill(dflt), 0);
	hangar_sandbox_unref(off);
	hangar_sandbox_unref(on);
	hangar_sandbox_unref(dflt);
	hangar_ctx_unref(ctx);
}
END_TEST

static void expect_config_error(const char *name, const char *value, const char *mention)
{
	hangar_ctx *ctx = new_ctx();
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc;

	ck_assert_int_eq(hangar_ctx_set(ctx, name, value), 0);
	o.provider = "local";
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_int_eq(rc, HANGAR_ECONFIG);
	ck_assert_ptr_null(sb);
	ck_assert_msg(strstr(hangar_error_last()->message, mention), "message: %s", hangar_error_last()->message);
	hangar_ctx_unref(ctx);
}

START_TEST(bad_settings)
{
	char longdir[200];

	expect_config_error("HANGAR_BWRAP_PATH", "/nonexistent/bwrap", "HANGAR_BWRAP_PATH");
	expect_config_error("HANGAR_BWRAP_PATH", "no-such-bwrap-anywhere", "HANGAR_BWRAP_PATH");
	expect_config_error("HANGAR_ENVD_PATH", "/nonexistent/hangar-envd", "HANGAR_ENVD_PATH");
	expect_config_error("HANGAR_ENVD_PATH", "/etc/passwd", "HANGAR_ENVD_PATH");
	memset(longdir, 'x', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = '\0';
	expect_config_error("HANGAR_STATE_DIR", longdir, "HANGAR_STATE_DIR");
}
END_TEST

START_TEST(failed_start_reports_the_log)
{
	hangar_ctx *ctx = new_ctx();
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	char script[PATH_MAX], dir[PATH_MAX];
	FILE *f;
	DIR *d;
	struct dirent *de;
	int rc, left = 0;

	snprintf(script, sizeof(script), "%s/fake-envd", state_dir);
	f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs("#!/bin/sh\necho 'fake-envd: cannot start, on purpose' >&2\nexit 3\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(script, 0755), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_ENVD_PATH", script), 0);
	o.provider = "local";
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_int_eq(rc, HANGAR_ECREATE);
	ck_assert_msg(strstr(hangar_error_last()->message, "cannot start, on purpose"), "message: %s",
		      hangar_error_last()->message);
	/* Nothing is left behind. */
	snprintf(dir, sizeof(dir), "%s/local", state_dir);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			left++;
	closedir(d);
	ck_assert_int_eq(left, 0);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(dead_supervisor_means_gone)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, 0, NULL);
	char id[64], path[PATH_MAX];
	int envd, jail = 0, fd;
	FILE *f;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	envd = envd_pid(id);
	ck_assert_int_gt(envd, 0);
	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	/* SIGKILL gives the jail no chance to clean up; bwrap dies with it. */
	fd = (int)syscall(SYS_pidfd_open, envd, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(kill(jail, SIGKILL), 0);
	{
		struct pollfd p = { fd, POLLIN, 0 };

		ck_assert_int_eq(poll(&p, 1, 10000), 1);
	}
	close(fd);
	ck_assert_int_eq(hangar_sandbox_get_info(&(hangar_sandbox_info)HANGAR_SANDBOX_INFO_INIT, sb), HANGAR_EGONE);
	sb_path(path, sizeof(path), id, "");
	ck_assert_msg(!path_exists(path), "a dead sandbox's directory is cleaned up");
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *local_suite(void)
{
	Suite *s = suite_create("local");
	TCase *tc = tcase_create("lifecycle");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, create_and_kill);
	tcase_add_test(tc, attach_from_fresh_context_and_list);
	tcase_add_test(tc, pause_and_resume);
	tcase_add_test(tc, expires);
	tcase_add_test(tc, set_timeout_and_paused_clock);
	tcase_add_test(tc, outlives_its_creator);
	tcase_add_test(tc, network_on_and_off);
	tcase_add_test(tc, bad_settings);
	tcase_add_test(tc, failed_start_reports_the_log);
	tcase_add_test(tc, dead_supervisor_means_gone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(local_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
