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
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>

#include "leftovers.h"
#include "clock.h"

static char state_dir[64];

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
	leftovers_watch(state_dir, state_dir);
}

static void teardown(void)
{
	/* Kill whatever a failed test left running, then remove the directory. */
	hangar_ctx *ctx = NULL;

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0)
		kill_local_leftovers(ctx, state_dir);
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
	snprintf(buf, size, "%s/%s%s", run_of(state_dir), id, rest);
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
	int64_t deadline = clock_mono_ms() + timeout_ms;
	char buf[512];
	size_t have = 0;
	int fd, status = -1;

	sb_path(sa.sun_path, sizeof(sa.sun_path), id, "/envd.sock");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(fd, req, sizeof(req) - 1) < 0) {
		close(fd);
		return -2;
	}
	while (have < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
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

/* The parent of pid, from /proc/<pid>/stat; 0 when it is gone. */
static int parent_of(int pid)
{
	char path[64], buf[512], *close_paren;
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (close_paren = strrchr(buf, ')')))
		sscanf(close_paren + 1, " %*c %d", &ppid);
	fclose(f);
	return ppid;
}

/*
 * The host pid of the sandbox's hangar-envd: the hangar-envd process under
 * the sandbox's jail (its socket is bound by the jail, outside the sandbox,
 * so no path names it).
 */
static int envd_pid(const char *id)
{
	char path[PATH_MAX];
	struct dirent *de;
	int jail, found = 0;
	FILE *f;
	DIR *d;

	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &jail) != 1)
		jail = 0;
	fclose(f);
	d = jail > 0 ? opendir("/proc") : NULL;
	while (d && (de = readdir(d)) && !found) {
		char cmd[256] = "";
		int pid = atoi(de->d_name), up;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(cmd, sizeof(cmd), f))
			cmd[0] = '\0';
		fclose(f);
		if (!strstr(cmd, "hangar-envd") || strstr(cmd, "bwrap"))
			continue;
		for (up = parent_of(pid); up > 1 && up != jail; up = parent_of(up))
			;
		if (up == jail)
			found = pid;
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

static int wait_path_gone(const char *path, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;

	while (path_exists(path)) {
		if (clock_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 20);
	}
	return 1;
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

/*
 * envd's token as the jail serves it on jail.sock (to its own uid alone):
 * its length, 0 when the jail answered nothing, -1 when it could not be reached.
 */
static int jail_token(const char *id, char *buf, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int64_t deadline = clock_mono_ms() + 5000;
	size_t have = 0;
	int fd;

	sb_path(sa.sun_path, sizeof(sa.sun_path), id, "/jail.sock");
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	while (have < size - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, buf + have, size - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	buf[have] = '\0';
	return (int)have;
}

/* How many regular files under path hold needle (binary-safe); names a file called "token" in *named. */
static int files_holding(const char *path, const char *needle, int *named)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int found = 0;

	ck_assert_msg(d != NULL, "opendir %s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (lstat(sub, &st) < 0)
			continue; /* went away meanwhile */
		if (!strcmp(de->d_name, "token"))
			(*named)++;
		if (S_ISDIR(st.st_mode)) {
			found += files_holding(sub, needle, named);
		} else if (S_ISREG(st.st_mode)) {
			size_t len = (size_t)st.st_size, got = 0;
			char *data = malloc(len + 1);
			int fd = open(sub, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

			ck_assert_ptr_nonnull(data);
			while (fd >= 0 && got < len) {
				ssize_t n = read(fd, data + got, len - got);

				if (n <= 0)
					break;
				got += (size_t)n;
			}
			if (fd >= 0)
				close(fd);
			if (memmem(data, got, needle, strlen(needle))) {
				fprintf(stderr, "the token is in %s\n", sub);
				found++;
			}
			free(data);
		}
	}
	closedir(d);
	return found;
}

static void assert_token_not_on_disk(const char *id, const char *token)
{
	char dir[PATH_MAX];
	int named = 0;

	sb_path(dir, sizeof(dir), id, "");
	ck_assert_int_eq(files_holding(dir, token, &named), 0);
	ck_assert_int_eq(named, 0);
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
	int64_t t = clock_wall_us();

	ck_assert_uint_eq(strlen(id), 19);
	ck_assert(!strncmp(id, "sb-", 3));
	ck_assert_uint_eq(strspn(id + 3, "0123456789abcdef"), 16);
	snprintf(saved, sizeof(saved), "%s", id);

	sb_path(path, sizeof(path), id, "");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	sb_path(path, sizeof(path), id, "/jail.sock");
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(health(id, 5000), 204);

	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_str_eq(info.id, saved);
	ck_assert_str_eq(info.provider, "local");
	ck_assert_str_eq(info.template_id, "local");
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert(info.created_at_us > t - 30000000 && info.created_at_us <= clock_wall_us());
	ck_assert(info.expires_at_us > clock_wall_us() + 50000000 && info.expires_at_us <= clock_wall_us() + 60000000);

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

/* Whether pid's line for a cgroup hierarchy (e.g. "0:" or "freezer") ends in /hangar/<id>. */
static int in_cgroup(int pid, const char *hierarchy, const char *id)
{
	char path[64], line[512], want[64];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	snprintf(want, sizeof(want), "/hangar/%s\n", id);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *c = strchr(line, ':');

		if (!c)
			continue;
		if (!strcmp(hierarchy, "0:") ? !strncmp(line, "0::", 3) : !!strstr(c, hierarchy))
			found |= strlen(line) > strlen(want) && !strcmp(line + strlen(line) - strlen(want), want);
	}
	fclose(f);
	return found;
}

/* Pausing with each freezer hangar-jail knows: cgroup v2 or v1, or SIGSTOP. */
static const char *const freezers[] = { "auto", "v1", "none" };

START_TEST(pause_and_resume)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb, *again = NULL;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	const char *id;
	int pid;
	char st;

	if (geteuid() != 0 && _i != 2)
		return; /* cgroups need root */
	if (_i == 1 && access("/sys/fs/cgroup/freezer/tasks", F_OK) != 0)
		return;
	setenv("HANGAR_LOCAL_FREEZER", freezers[_i], 1);
	ctx = new_ctx();
	sb = create(ctx, 120, 0, NULL);
	id = hangar_sandbox_id(sb);
	pid = envd_pid(id);
	ck_assert_int_gt(pid, 0);
	if (_i == 0 && (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ||
			access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0))
		ck_assert_msg(in_cgroup(pid, "0:", id), "envd is in the sandbox's cgroup v2");
	if (_i == 1)
		ck_assert_msg(in_cgroup(pid, "freezer", id), "envd is in the sandbox's v1 freezer cgroup");
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_int_eq(info.expires_at_us, 0);
	/* Frozen: envd accepts the connection (the kernel does) but never answers. */
	ck_assert_int_eq(health(id, 500), -1);
	st = proc_state(pid);
	if (_i == 2)
		ck_assert_msg(st == 'T', "envd state %c, stopped", st);
	else
		ck_assert_msg(st == 'D' || st == 'S', "envd state %c, frozen", st);
	/* Attaching never resumes; pausing twice is fine. */
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", id), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, again), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_int_eq(hangar_sandbox_pause(again), 0);

	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_RUNNING);
	ck_assert(info.expires_at_us > clock_wall_us() + 100000000);
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
	/* Its supervisor removes the directory as it goes. */
	sb_path(path, sizeof(path), id, "");
	ck_assert_msg(wait_path_gone(path, 10000), "%s is removed", path);
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
	until = clock_mono_ms() + 2000;
	while (clock_mono_ms() < until) {
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
	ck_assert(info.expires_at_us > 0 && info.expires_at_us <= clock_wall_us() + 1000000);
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
	/* On: its own namespace too, with loopback and slirp4netns's tap0, never the host's interfaces. */
	ck_assert_int_eq(count_interfaces(envd_pid(hangar_sandbox_id(on)), &lo), 2);
	ck_assert(lo);
	ck_assert_int_gt(host, 0);
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
	expect_config_error("HANGAR_JAIL_PATH", "/nonexistent/hangar-jail", "HANGAR_JAIL_PATH");
	memset(longdir, 'x', sizeof(longdir) - 1);
	longdir[0] = '/';
	longdir[sizeof(longdir) - 1] = '\0';
	expect_config_error("HANGAR_STATE_DIR", longdir, "HANGAR_STATE_DIR");
}
END_TEST

/* Directories of sandboxes, made or being made, where the state directory keeps them (run_of). */
static int sandbox_dirs_left(void)
{
	char dir[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int left = 0;

	snprintf(dir, sizeof(dir), "%s", run_of(state_dir));
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "sb-", 3) || !strncmp(de->d_name, ".new-", 5))
			left++;
	closedir(d);
	return left;
}

/* A create refused for its options is refused before anything is made. */
START_TEST(refused_create_leaves_nothing)
{
	hangar_ctx *ctx = new_ctx();
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	char *big = malloc(40000);
	const char *env[] = { "A=1", big, NULL };
	int rc;

	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 39999);
	big[0] = 'B';
	big[1] = '=';
	big[39999] = '\0';
	o.provider = "local";
	o.template_id = "no-such-template";
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_int_eq(rc, HANGAR_ENOTFOUND);
	ck_assert_ptr_null(sb);
	ck_assert_msg(strstr(hangar_error_last()->message, "no-such-template"), "message: %s",
		      hangar_error_last()->message);
	o.template_id = NULL;
	o.env = env;
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_int_eq(rc, HANGAR_EINVAL);
	ck_assert_ptr_null(sb);
	ck_assert_msg(strstr(hangar_error_last()->message, "32 KiB"), "message: %s", hangar_error_last()->message);
	ck_assert_int_eq(sandbox_dirs_left(), 0);
	free(big);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A context whose envd is a script that says "cannot start, on purpose" and fails. */
/*
 * How many uid ranges root's jails hold: the slot files of
 * ~/.local/state/hangar/uids that another flock holds (0 when not root).
 */
static int ranges_claimed(void)
{
	struct passwd *pw = getpwuid(0);
	char dir[PATH_MAX];
	struct dirent *de;
	int held = 0;
	DIR *d;

	if (geteuid() != 0 || !pw)
		return 0;
	snprintf(dir, sizeof(dir), "%s/.local/state/hangar/uids", pw->pw_dir);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		int fd = de->d_name[0] == '.' ? -1 : openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);

		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK)
			held++;
		if (fd >= 0)
			close(fd);
	}
	if (d)
		closedir(d);
	return held;
}

static hangar_ctx *ctx_with_failing_envd(void)
{
	hangar_ctx *ctx = new_ctx();
	char script[PATH_MAX];
	FILE *f;

	snprintf(script, sizeof(script), "%s/fake-envd", state_dir);
	f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs("#!/bin/sh\necho 'fake-envd: cannot start, on purpose' >&2\nexit 3\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(script, 0755), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_ENVD_PATH", script), 0);
	return ctx;
}

START_TEST(failed_start_reports_the_log)
{
	hangar_ctx *ctx = ctx_with_failing_envd();
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int rc, claimed_before = ranges_claimed();

	o.provider = "local";
	rc = hangar_sandbox_create(&sb, ctx, &o);
	ck_assert_int_eq(rc, HANGAR_ECREATE);
	ck_assert_msg(strstr(hangar_error_last()->message, "cannot start, on purpose"), "message: %s",
		      hangar_error_last()->message);
	/* Nothing is left behind. */
	ck_assert_int_eq(sandbox_dirs_left(), 0);
	/* Its uid range is free again: as many ranges are claimed as before (no other suite runs meanwhile). */
	ck_assert_int_eq(ranges_claimed(), claimed_before);
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

START_TEST(killed_jail_leaves_no_network_helper)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, HANGAR_NETWORK_ON, NULL);
	char id[64], path[PATH_MAX];
	int jail = 0, slirp, fd;
	FILE *f;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	slirp = proc_child_named(jail, "slirp4netns");
	ck_assert_msg(slirp > 0, "network on: the jail runs slirp4netns");
	fd = (int)syscall(SYS_pidfd_open, slirp, 0);
	ck_assert_int_ge(fd, 0);
	/* No chance to clean up: slirp4netns must still end, and not hold the sandbox's namespace. */
	ck_assert_int_eq(kill(jail, SIGKILL), 0);
	{
		struct pollfd p = { fd, POLLIN, 0 };

		ck_assert_msg(poll(&p, 1, 10000) == 1, "slirp4netns outlived its jail");
	}
	close(fd);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

static char *run(hangar_sandbox *sb, const char *cmd)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	char *out;
	int rc = hangar_sandbox_exec(&r, sb, cmd, NULL);

	ck_assert_msg(rc == 0, "exec %s: %d %s", cmd, rc, hangar_error_last()->message);
	ck_assert_msg(r.exit_code == 0, "exec %s: exit %d: %.*s", cmd, r.exit_code, (int)r.err.size,
		      r.err.ptr ? r.err.ptr : "");
	out = strndup(r.out.ptr ? r.out.ptr : "", r.out.size);
	out[strcspn(out, "\n")] = '\0';
	hangar_exec_result_dispose(&r);
	return out;
}

static void expect_output(hangar_sandbox *sb, const char *cmd, const char *want)
{
	char *got = run(sb, cmd);

	ck_assert_msg(!strcmp(got, want), "%s: got \"%s\", want \"%s\"", cmd, got, want);
	free(got);
}

/* The jail pid recorded in sandbox id's directory. */
static int recorded_jail(const char *id)
{
	char path[PATH_MAX];
	int jail = 0;
	FILE *f;

	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	return jail;
}

/*
 * The context remembers each sandbox's envd token by id and jail pid. When
 * a's jail is dead and its jail.pid names another live jail (b's, as a
 * reused pid would), a must still be gone: neither a's remembered token
 * nor b's jail may answer for it. b is untouched. Two things hold it:
 * liveness() finds b's command line does not name a, and the memory is
 * keyed by pid too (test-local-tokens checks that alone); this fails only
 * when both are gone.
 */
START_TEST(another_jail_never_answers_for_a_dead_one)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *a = create(ctx, 60, 0, NULL), *b = create(ctx, 60, 0, NULL), *again = NULL;
	char id_a[64], id_b[64], path[PATH_MAX];
	int envd_a, fd;
	FILE *f;

	snprintf(id_a, sizeof(id_a), "%s", hangar_sandbox_id(a));
	snprintf(id_b, sizeof(id_b), "%s", hangar_sandbox_id(b));
	envd_a = envd_pid(id_a);
	ck_assert_int_gt(envd_a, 0);
	fd = (int)syscall(SYS_pidfd_open, envd_a, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(kill(recorded_jail(id_a), SIGKILL), 0);
	{
		struct pollfd p = { fd, POLLIN, 0 };

		ck_assert_int_eq(poll(&p, 1, 10000), 1);
	}
	close(fd);
	sb_path(path, sizeof(path), id_a, "/jail.pid");
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "%d\n", recorded_jail(id_b));
	fclose(f);
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", id_a), HANGAR_EGONE);
	ck_assert_ptr_null(again);
	ck_assert_int_eq(hangar_sandbox_get_info(&(hangar_sandbox_info)HANGAR_SANDBOX_INFO_INIT, a), HANGAR_EGONE);
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", id_b), 0);
	expect_output(again, "echo still b", "still b");
	ck_assert_int_eq(hangar_sandbox_kill(again), 0);
	hangar_sandbox_unref(again);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(inside_the_jail)
{
	static const char *const env[] = { "GREETING=hello there", NULL };
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, HANGAR_NETWORK_OFF, env);
	char *n;

	expect_output(sb, "id -un", geteuid() == 0 ? "user" : "user");
	expect_output(sb, "pwd", "/workspace");
	expect_output(sb, "echo $HOME", "/home/user");
	expect_output(sb, "echo \"$GREETING/$CI\"", "hello there/true");
	expect_output(sb, "hostname", hangar_sandbox_id(sb));
	expect_output(sb, "touch /workspace/a ~/b /tmp/c && echo ok", "ok");
	expect_output(sb, "touch /usr/x 2>/dev/null || echo read-only", "read-only");
	expect_output(sb, "cat /etc/shadow | wc -c", "0");
	expect_output(sb, "ls /run/hangar 2>/dev/null || echo hidden", "hidden");
	expect_output(sb, "grep -c : /proc/net/dev", "1");
	/* Its own pid namespace: envd is pid 2 under hangar-envd-init, and only a handful of processes. */
	n = run(sb, "ps -e --no-headers | wc -l");
	ck_assert_msg(atoi(n) > 0 && atoi(n) < 10, "%s processes", n);
	free(n);
	expect_output(sb, "cat /proc/1/comm", "hangar-envd-ini"); /* comm keeps 15 bytes */
	expect_output(sb, "cat /proc/2/comm", "hangar-envd");
	if (geteuid() == 0)
		expect_output(sb, "grep NoNewPrivs /proc/self/status | tr -d '\\t'", "NoNewPrivs:1");
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The sandbox's /workspace/counter, read from the host through envd's root directory. */
static long read_counter(const char *id)
{
	char path[PATH_MAX], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/root/workspace/counter", envd_pid(id));
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return atol(buf);
}

static int wait_counter_above(const char *id, long v, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;

	while (read_counter(id) <= v) {
		if (clock_mono_ms() >= deadline)
			return 0;
		poll(NULL, 0, 20);
	}
	return 1;
}

START_TEST(processes_survive_pause)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, 0, NULL);
	hangar_process *p = NULL;
	const char *id = hangar_sandbox_id(sb);
	int64_t until;
	long c;
	int rc;

	rc = hangar_process_start(&p, sb,
				  "i=0; while :; do i=$((i+1)); echo $i > /workspace/counter.new; "
				  "mv /workspace/counter.new /workspace/counter; sleep 0.05; done", NULL);
	ck_assert_msg(rc == 0, "start: %d %s", rc, hangar_error_last()->message);
	hangar_process_unref(p);
	ck_assert_msg(wait_counter_above(id, 2, 10000), "the counter runs");
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	c = read_counter(id);
	/* Paused, it stands still. */
	until = clock_mono_ms() + 500;
	while (clock_mono_ms() < until) {
		ck_assert_int_eq(read_counter(id), c);
		poll(NULL, 0, 50);
	}
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	ck_assert_msg(wait_counter_above(id, c, 10000), "the same process counts on after resume");
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* 1 when uid has ranges in both /etc/subuid and /etc/subgid (by number or by name). */
static int has_subids(unsigned uid)
{
	static const char *const files[] = { "/etc/subuid", "/etc/subgid" };
	struct passwd *pw = getpwuid(uid);
	int found = 0;

	for (size_t i = 0; i < 2; i++) {
		char line[256], num[16];
		FILE *f = fopen(files[i], "re");
		int here = 0;

		snprintf(num, sizeof(num), "%u:", uid);
		while (f && !here && fgets(line, sizeof(line), f)) {
			size_t n = pw ? strlen(pw->pw_name) : 0;

			here = !strncmp(line, num, strlen(num)) || (pw && !strncmp(line, pw->pw_name, n) && line[n] == ':');
		}
		if (f)
			fclose(f);
		found += here;
	}
	return found == 2;
}

/* As uid 1000 (no cgroups, a user namespace): create, use, pause, resume, kill. */
static int unprivileged_child(void)
{
	hangar_ctx *ctx = NULL;
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *sb = NULL;
	char want[32];

	if (setgroups(0, NULL) < 0 || setresgid(1000, 1000, 1000) < 0 || setresuid(1000, 1000, 1000) < 0)
		return 10;
	if (hangar_ctx_new(&ctx, 0) || hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir))
		return 11;
	o.provider = "local";
	o.timeout_sec = 60;
	/*
	 * Without subordinate ids (uid 1000 has none here) every process is the
	 * caller's uid, and network on is refused, saying why, rather than
	 * given as loopback alone.
	 */
	if (!has_subids(1000)) {
		o.network = HANGAR_NETWORK_ON;
		if (hangar_sandbox_create(&sb, ctx, &o) == 0 ||
		    !strstr(hangar_error_last()->message, "network on needs subordinate ids")) {
			fprintf(stderr, "network on: %s\n", sb ? "created" : hangar_error_last()->message);
			return 19;
		}
		o.network = HANGAR_NETWORK_OFF;
	}
	if (hangar_sandbox_create(&sb, ctx, &o)) {
		fprintf(stderr, "create: %s\n", hangar_error_last()->message);
		return 12;
	}
	if (health(hangar_sandbox_id(sb), 5000) != 204)
		return 13;
	if (hangar_sandbox_exec(&r, sb, "echo $(id -un) $(id -u)", NULL) || r.exit_code)
		return 14;
	snprintf(want, sizeof(want), "user 1000\n");
	if (!r.out.ptr || strcmp(r.out.ptr, want)) {
		fprintf(stderr, "id: %s\n", r.out.ptr ? r.out.ptr : "");
		return 15;
	}
	hangar_exec_result_dispose(&r);
	if (hangar_sandbox_pause(sb) || health(hangar_sandbox_id(sb), 500) != -1)
		return 16;
	if (hangar_sandbox_resume(sb) || health(hangar_sandbox_id(sb), 5000) != 204)
		return 17;
	if (hangar_sandbox_kill(sb))
		return 18;
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return 0;
}

START_TEST(unprivileged_caller)
{
	pid_t child;
	int status;

	if (geteuid() != 0)
		return; /* needs root to become uid 1000 */
	ck_assert_int_eq(chown(state_dir, 1000, 1000), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(unprivileged_child());
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprivileged run failed at step %d",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}
END_TEST

static void run_link(const char *state, char *out, size_t size);

/*
 * As uid 1000, in state_dir: creates a sandbox that outlives this child
 * (kill NULL; its id written to fd) or kills sandbox kill. The child's exit
 * status: 0 when it did.
 */
static int as_uid_1000(const char *kill_id, int fd)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_ctx *c = NULL;
	hangar_sandbox *s = NULL;

	if (setgroups(0, NULL) < 0 || setresgid(1000, 1000, 1000) < 0 || setresuid(1000, 1000, 1000) < 0 ||
	    hangar_ctx_new(&c, 0) || hangar_ctx_set(c, "HANGAR_STATE_DIR", state_dir))
		return 10;
	if (kill_id)
		return hangar_sandbox_attach(&s, c, "local", kill_id) || hangar_sandbox_kill(s) ? 11 : 0;
	o.provider = "local";
	o.timeout_sec = 60;
	o.network = HANGAR_NETWORK_OFF;
	if (hangar_sandbox_create(&s, c, &o))
		return 12;
	return write(fd, hangar_sandbox_id(s), strlen(hangar_sandbox_id(s))) > 0 ? 0 : 13;
}

/* Runs as_uid_1000 in a child and waits for it: its exit status, or -1. */
static int run_as_uid_1000(const char *kill_id, int fd)
{
	pid_t child = fork();
	int status;

	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(as_uid_1000(kill_id, fd));
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * Root in the state directory of another uid (a teardown killing what that
 * uid left, or an administrator listing): it sees the uid's sandboxes
 * through the uid's own runtime directory, and leaves the state
 * directory's link as it was. (Only the uid itself gets a sandbox's token.)
 */
START_TEST(root_in_another_uids_state_dir)
{
	char before[PATH_MAX], after[PATH_MAX], id[32] = "";
	struct seen seen = { id, 0, 0 };
	hangar_ctx *ctx;
	int p[2];

	if (geteuid() != 0)
		return;
	ck_assert_int_eq(chown(state_dir, 1000, 1000), 0);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(run_as_uid_1000(NULL, p[1]), 0);
	close(p[1]);
	ck_assert_int_gt(read(p[0], id, sizeof(id) - 1), 0);
	close(p[0]);
	run_link(state_dir, before, sizeof(before));
	ctx = new_ctx();
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", list_cb, &seen), 0);
	run_link(state_dir, after, sizeof(after));
	hangar_ctx_unref(ctx);
	ck_assert_int_eq(run_as_uid_1000(seen.id, -1), 0);
	ck_assert_int_eq(seen.found, 1);
	ck_assert_str_eq(after, before);
}
END_TEST

START_TEST(token_only_in_memory)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 120, 0, NULL), *again = NULL;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	char id[64], token[2048], second[2048];
	int n;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	n = jail_token(id, token, sizeof(token));
	ck_assert_msg(n == 64 && strspn(token, "0123456789abcdef") == 64, "token of %d bytes", n);
	assert_token_not_on_disk(id, token);

	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	assert_token_not_on_disk(id, token);
	/* Paused, the jail still answers: attaching a paused sandbox works. */
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	ctx = new_ctx();
	sb = NULL;
	ck_assert_int_eq(hangar_sandbox_attach(&sb, ctx, "local", id), 0);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_eq(info.state, HANGAR_SANDBOX_PAUSED);
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	assert_token_not_on_disk(id, token);
	expect_output(sb, "echo resumed", "resumed");

	/* As after a restart: a fresh context learns the token from the jail, and it works. */
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	ctx = new_ctx();
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, NULL, id), 0);
	expect_output(again, "echo attached", "attached");
	ck_assert_int_eq(jail_token(id, second, sizeof(second)), 64);
	ck_assert_str_eq(second, token);
	assert_token_not_on_disk(id, token);

	if (geteuid() == 0) {
		/* Another uid gets nothing, even where file permissions would let it connect. */
		char dir[PATH_MAX], sock[PATH_MAX], root[PATH_MAX], above[PATH_MAX], local[PATH_MAX];
		pid_t child;
		int status;

		sb_path(dir, sizeof(dir), id, "");
		sb_path(sock, sizeof(sock), id, "/jail.sock");
		/* The directory of running sandboxes, and the one above it (the runtime directory's, or the state's). */
		snprintf(root, sizeof(root), "%s", run_of(state_dir));
		snprintf(above, sizeof(above), "%s", root);
		*strrchr(above, '/') = '\0';
		snprintf(local, sizeof(local), "%s/local", state_dir); /* where the link to the runtime directory is */
		ck_assert_int_eq(chmod(state_dir, 0711), 0);
		ck_assert_int_eq(chmod(local, 0711), 0);
		ck_assert_int_eq(chmod(above, 0711), 0);
		ck_assert_int_eq(chmod(root, 0711), 0);
		ck_assert_int_eq(chmod(dir, 0711), 0);
		ck_assert_int_eq(chmod(sock, 0666), 0);
		child = fork();
		ck_assert_int_ge(child, 0);
		if (child == 0) {
			char got[2048];

			if (setgroups(0, NULL) < 0 || setresgid(1000, 1000, 1000) < 0 ||
			    setresuid(1000, 1000, 1000) < 0)
				_exit(10);
			switch (jail_token(id, got, sizeof(got))) {
			case 0:
				_exit(0);
			case -1:
				_exit(11); /* could not connect: the test itself is wrong */
			default:
				_exit(12);
			}
		}
		ck_assert_int_eq(waitpid(child, &status, 0), child);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "uid 1000 got an answer (%d)",
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		ck_assert_int_eq(chmod(sock, 0600), 0);
		ck_assert_int_eq(chmod(dir, 0700), 0);
		ck_assert_int_eq(chmod(root, 0700), 0);
		ck_assert_int_eq(chmod(above, 0700), 0);
		ck_assert_int_eq(chmod(local, 0700), 0);
	}

	ck_assert_int_eq(hangar_sandbox_kill(again), 0);
	hangar_sandbox_unref(again);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A jail that does not answer on jail.sock: unavailable within the deadline, then fine again. */
static const char *silent_id;

static int find_id_cb(const hangar_sandbox_info *info, void *payload)
{
	if (silent_id && !strcmp(info->id, silent_id))
		++*(int *)payload;
	return 0;
}

/*
 * Past its lifetime, while its supervisor has not torn it down yet (held
 * here with SIGSTOP), a sandbox is gone to every caller: never reported as
 * merely unreachable, however the teardown's steps interleave with a call.
 */
START_TEST(expired_is_gone_before_teardown)
{
	hangar_ctx *ctx = new_ctx(), *other = new_ctx();
	hangar_sandbox *sb = create(ctx, 2, 0, NULL), *again = NULL;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	char id[64], path[PATH_MAX];
	int jail = 0;
	FILE *f;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), 0);
	ck_assert_int_gt(info.expires_at_us, 0);
	ck_assert_int_eq(kill(jail, SIGSTOP), 0);
	/* Wait for the wall clock to pass the recorded expiry. */
	while (clock_wall_us() <= info.expires_at_us) {
		struct timespec ts = { 0, 50 * 1000000L };

		nanosleep(&ts, NULL);
	}
	ck_assert_int_eq(hangar_sandbox_attach(&again, other, "local", id), HANGAR_EGONE);
	ck_assert_ptr_null(again);
	ck_assert_int_eq(hangar_sandbox_get_info(&info, sb), HANGAR_EGONE);
	ck_assert_int_eq(kill(jail, SIGCONT), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(other);
	hangar_ctx_unref(ctx);
}
END_TEST

/* An exec on a thread of its own: its return code and how long it took. */
struct long_exec {
	hangar_sandbox *sb;
	int rc;
	int64_t took_ms;
};

static void *long_exec_run(void *arg)
{
	struct long_exec *x = arg;
	hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int64_t t0 = clock_mono_ms();

	eo.timeout_sec = 60;
	x->rc = hangar_sandbox_exec(&r, x->sb, "echo started > /tmp/started; sleep 50", &eo);
	x->took_ms = clock_mono_ms() - t0;
	hangar_exec_result_dispose(&r);
	return NULL;
}

/*
 * Another caller pauses the sandbox while a command runs: the exec fails
 * with HANGAR_EPAUSED within seconds, not after its 60 s (plus slack)
 * deadline; resumed, the sandbox answers again.
 */
START_TEST(exec_fails_promptly_when_paused_elsewhere)
{
	hangar_ctx *ctx = new_ctx(), *other = new_ctx();
	hangar_sandbox *sb = create(ctx, 300, 0, NULL), *elsewhere = NULL;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	struct long_exec x = { sb, 1, 0 };
	pthread_t th;
	if (geteuid() != 0)
		return; /* the cgroup freezer needs root */
	ck_assert_int_eq(pthread_create(&th, NULL, long_exec_run, &x), 0);
	/* Wait until the command runs: its file appears in the sandbox. */
	for (int64_t until = clock_mono_ms() + 30000;;) {
		hangar_buf b = HANGAR_BUF_INIT;
		int rc = hangar_sandbox_read_file(&b, sb, "/tmp/started");

		hangar_buf_dispose(&b);
		if (rc == 0)
			break;
		ck_assert_msg(clock_mono_ms() < until, "the command did not start");
		poll(NULL, 0, 20);
	}
	ck_assert_int_eq(hangar_sandbox_attach(&elsewhere, other, "local", hangar_sandbox_id(sb)), 0);
	ck_assert_int_eq(hangar_sandbox_pause(elsewhere), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_int_eq(x.rc, HANGAR_EPAUSED);
	/* A stated bound: the keepalive check (2.5 s), one state query, and slack for a loaded machine. */
	ck_assert_int_lt(x.took_ms, 20000);
	ck_assert_int_eq(hangar_sandbox_resume(elsewhere), 0);
	ck_assert_int_eq(hangar_sandbox_exec(&r, sb, "echo back", NULL), 0);
	ck_assert_str_eq(r.out.ptr, "back\n");
	hangar_exec_result_dispose(&r);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(elsewhere);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(other);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(silent_supervisor)
{
	hangar_ctx *ctx = new_ctx(), *other;
	hangar_sandbox *sb = create(ctx, 60, 0, NULL), *again = NULL;
	char id[64], path[PATH_MAX];
	int jail = 0, rc;
	int64_t t0;
	FILE *f;

	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	silent_id = id;
	sb_path(path, sizeof(path), id, "/jail.pid");
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	ck_assert_int_eq(kill(jail, SIGSTOP), 0);
	/* The context that made the sandbox remembers envd's token: no need to ask. */
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", id), 0);
	again = hangar_sandbox_unref(again);
	/* Another context (another process) must ask the supervisor, and gives up in time. */
	other = new_ctx();
	t0 = clock_mono_ms();
	rc = hangar_sandbox_attach(&again, other, "local", id);
	{
		/* A listing needs no token, so a silent supervisor does not hold it up. */
		int64_t t1 = clock_mono_ms();
		int found = 0, lrc = hangar_sandbox_list(ctx, "local", find_id_cb, &found);

		found = lrc == 0 ? found : -1;
		ck_assert_int_eq(kill(jail, SIGCONT), 0);
		ck_assert_msg(found == 1, "list while the supervisor is stopped: %d", found);
		ck_assert_msg(clock_mono_ms() - t1 < 2000, "list waited %lld ms", (long long)(clock_mono_ms() - t1));
	}
	ck_assert_msg(rc == HANGAR_EUNAVAILABLE, "attach: %d %s", rc, hangar_error_last()->message);
	ck_assert_msg(clock_mono_ms() - t0 < 20000, "attach gave up after %lld ms", (long long)(clock_mono_ms() - t0));
	ck_assert_ptr_null(again);
	ck_assert_int_eq(hangar_sandbox_attach(&again, other, "local", id), 0);
	expect_output(again, "echo back", "back");
	ck_assert_int_eq(hangar_sandbox_kill(again), 0);
	hangar_sandbox_unref(again);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(other);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A context remembers envd's token of every sandbox it made or attached:
 * each attach must get its own sandbox's (envd refuses another's), also
 * after a sandbox in between was killed and its place taken.
 */
START_TEST(remembered_tokens_stay_apart)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb[3], *again = NULL;
	char ids[3][64], cmd[96];

	for (int i = 0; i < 3; i++) {
		sb[i] = create(ctx, 60, 0, NULL);
		snprintf(ids[i], sizeof(ids[i]), "%s", hangar_sandbox_id(sb[i]));
		snprintf(cmd, sizeof(cmd), "echo %d > /tmp/which", i);
		expect_output(sb[i], cmd, "");
	}
	ck_assert_int_eq(hangar_sandbox_kill(sb[1]), 0);
	ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, "local", ids[1]), HANGAR_EGONE);
	sb[1] = hangar_sandbox_unref(sb[1]);
	sb[1] = create(ctx, 60, 0, NULL);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 3; i += 2) {
			char want[4];

			ck_assert_int_eq(hangar_sandbox_attach(&again, ctx, NULL, ids[i]), 0);
			snprintf(want, sizeof(want), "%d", i);
			expect_output(again, "cat /tmp/which", want);
			again = hangar_sandbox_unref(again);
		}
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(hangar_sandbox_kill(sb[i]), 0);
		hangar_sandbox_unref(sb[i]);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* How many children of this process are ended hangar-jails (zombies), every thread's children counted. */
static int zombie_jails(void)
{
	struct dirent *t;
	DIR *tasks = opendir("/proc/self/task");
	int n = 0;

	ck_assert_ptr_nonnull(tasks);
	while ((t = readdir(tasks))) {
		char path[PATH_MAX];
		long pid;
		FILE *f;

		if (t->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", t->d_name);
		f = fopen(path, "re");
		while (f && fscanf(f, "%ld", &pid) == 1) {
			char stat[512] = "", *close_paren;
			FILE *st;
			char state = 0;

			snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
			st = fopen(path, "re");
			if (st && fgets(stat, sizeof(stat), st) && strstr(stat, "(hangar-jail)") &&
			    (close_paren = strrchr(stat, ')')) && sscanf(close_paren + 1, " %c", &state) == 1 &&
			    state == 'Z')
				n++;
			if (st)
				fclose(st);
		}
		if (f)
			fclose(f);
	}
	closedir(tasks);
	return n;
}

/* Kills sandbox id from another process, with a context of its own: 0 when that worked. */
static int kill_elsewhere(const char *id)
{
	int status;
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		hangar_ctx *ctx = NULL;
		hangar_sandbox *sb = NULL;
		int ok = hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0 &&
			 hangar_sandbox_attach(&sb, ctx, "local", id) == 0 && hangar_sandbox_kill(sb) == 0;

		_exit(ok ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/*
 * A caller that is a child subreaper (or its PID namespace's init, which
 * the library treats alike) becomes the parent of every jail it starts:
 * the library waits for the jails that end, whoever ended them, and takes
 * the status of none of the caller's own children.
 */
START_TEST(subreaper_caller_keeps_no_zombie)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	char id[64];
	hangar_sandbox *sb = NULL, *failed = NULL;
	hangar_ctx *ctx, *bad;
	struct seen seen = { .id = id };
	int64_t deadline;
	int status, jail;
	pid_t own;

	ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	/* A child of the caller's own, ended and not waited for yet: the library must leave it. */
	own = fork();
	ck_assert_int_ge(own, 0);
	if (own == 0)
		_exit(7);
	ctx = new_ctx();

	/* Killed here: waited for by the kill. */
	sb = create(ctx, 60, 0, NULL);
	jail = recorded_jail(hangar_sandbox_id(sb));
	ck_assert_msg(jail > 0 && parent_of(jail) == getpid(), "jail %d's parent is %d, not the subreaper %d", jail,
		      parent_of(jail), (int)getpid());
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(zombie_jails(), 0);

	/* Killed by another process: waited for at this process's next list. */
	sb = create(ctx, 60, 0, NULL);
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	ck_assert_int_eq(kill_elsewhere(id), 0);
	ck_assert_int_eq(zombie_jails(), 1);
	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", list_cb, &seen), 0);
	ck_assert_int_eq(zombie_jails(), 0);
	hangar_sandbox_unref(sb);

	/* Expired on its own: waited for at the next create. */
	sb = create(ctx, 1, 0, NULL);
	deadline = clock_mono_ms() + 10000;
	while (zombie_jails() == 0 && clock_mono_ms() < deadline)
		poll(NULL, 0, 20);
	ck_assert_msg(zombie_jails() == 1, "a 1 s sandbox's jail ended within 10 s");
	hangar_sandbox_unref(sb);
	sb = create(ctx, 60, 0, NULL);
	ck_assert_int_eq(zombie_jails(), 0);

	/* Failed to start: waited for before the create returns. */
	bad = ctx_with_failing_envd();
	o.provider = "local";
	ck_assert_int_eq(hangar_sandbox_create(&failed, bad, &o), HANGAR_ECREATE);
	ck_assert_int_eq(zombie_jails(), 0);
	hangar_ctx_unref(bad);

	/* Alive at the context's end, killed after it: nothing waits but the caller, whose own child is intact. */
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	ck_assert_int_eq(zombie_jails(), 0);
	ck_assert_int_eq(waitpid(own, &status, 0), own);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}
END_TEST

/* ---- where running sandboxes keep their files (HANGAR_LOCAL_RUN_DIR) ---- */

#define TMPFS_MAGIC_ 0x01021994

static int on_tmpfs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == TMPFS_MAGIC_;
}

/* state/local/run's target into out, or "" when there is no such link. */
static void run_link(const char *state, char *out, size_t size)
{
	char link[PATH_MAX + 16];
	ssize_t n;

	snprintf(link, sizeof(link), "%s/local/run", state);
	n = readlink(link, out, size - 1);
	out[n > 0 ? n : 0] = '\0';
}

/* 1 when path is a directory this uid owns, mode 0700. */
static int private_dir(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
}

/*
 * By default a sandbox's sockets, pid file and record are on a memory file
 * system (a tmpfs /run for root, else /dev/shm), in a private directory the
 * state directory links to; the /etc templates stay in the state
 * directory. Where no tmpfs is to be had, or the state directory is on one,
 * everything stays in the state directory.
 */
START_TEST(runtime_files_in_memory)
{
	hangar_ctx *ctx = new_ctx();
	hangar_sandbox *sb = create(ctx, 60, HANGAR_NETWORK_OFF, NULL);
	const char *id = hangar_sandbox_id(sb);
	char target[PATH_MAX], path[PATH_MAX * 2], owner[PATH_MAX];
	int memory = (geteuid() == 0 && on_tmpfs("/run")) || on_tmpfs("/dev/shm");
	ssize_t n;

	run_link(state_dir, target, sizeof(target));
	if (!memory || on_tmpfs(state_dir)) {
		ck_assert_str_eq(target, "");
		snprintf(path, sizeof(path), "%s/local/%s/envd.sock", state_dir, id);
		ck_assert(access(path, F_OK) == 0);
	} else {
		ck_assert_msg(target[0] == '/' && on_tmpfs(target), "local/run: \"%s\"", target);
		ck_assert(private_dir(target));
		snprintf(path, sizeof(path), "%s", target);
		*strrchr(path, '/') = '\0';
		ck_assert(private_dir(path)); /* BASE/hangar-<uid> */
		snprintf(path, sizeof(path), "%s/%s/envd.sock", target, id);
		ck_assert(access(path, F_OK) == 0);
		snprintf(path, sizeof(path), "%s/local/%s", state_dir, id);
		ck_assert(access(path, F_OK) < 0 && errno == ENOENT);
		/* Linked back to the state directory that uses it. */
		snprintf(path, sizeof(path), "%s/owner", target);
		n = readlink(path, owner, sizeof(owner) - 1);
		ck_assert_int_gt(n, 0);
		owner[n] = '\0';
		snprintf(path, sizeof(path), "%s/local", state_dir);
		ck_assert_str_eq(owner, path);
	}
	snprintf(path, sizeof(path), "%s/local/.etc", state_dir);
	ck_assert(access(path, F_OK) == 0);
	/* Another context of the same state directory finds the sandbox there. */
	{
		hangar_ctx *other = new_ctx();
		hangar_sandbox *again = NULL;

		ck_assert_int_eq(hangar_sandbox_attach(&again, other, "local", id), 0);
		expect_output(again, "echo found", "found");
		hangar_sandbox_unref(again);
		hangar_ctx_unref(other);
	}
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	ck_assert_int_eq(sandbox_dirs_left(), 0);
	hangar_ctx_unref(ctx);
}
END_TEST

/* A context on state/<name> with its runtime directory made under base. */
static hangar_ctx *ctx_under(const char *name, const char *base, char *state, size_t size)
{
	hangar_ctx *ctx = NULL;

	snprintf(state, size, "%s/%s", state_dir, name);
	ck_assert(mkdir(state, 0700) == 0 || errno == EEXIST);
	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_RUN_DIR", base), 0);
	return ctx;
}

/* A base for HANGAR_LOCAL_RUN_DIR, world-writable and sticky as /dev/shm is. */
static void make_base(char *base, size_t size)
{
	snprintf(base, size, "/tmp/hangar-rbase-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(base));
	ck_assert_int_eq(chmod(base, 01777), 0);
}

/*
 * A runtime directory goes once its state directory no longer links to it
 * and no sandbox is left in it: the next state directory to make one under
 * the same base removes it. One that still holds a sandbox stays, and so
 * does one being made (no link back yet) until it is an hour old.
 */
START_TEST(runtime_dir_swept_after_its_state)
{
	char base[64], sa[PATH_MAX], sb_[PATH_MAX], sc[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX], rc[PATH_MAX];
	char parent[PATH_MAX], old[PATH_MAX + 16], young[PATH_MAX + 16], link[PATH_MAX + 16];
	hangar_ctx *a, *b, *c;
	hangar_sandbox *s;
	hangar_sandbox *kept;
	struct timespec ago[2] = { { time(NULL) - 7200, 0 }, { time(NULL) - 7200, 0 } };

	make_base(base, sizeof(base));
	a = ctx_under("a", base, sa, sizeof(sa));
	s = create(a, 60, HANGAR_NETWORK_OFF, NULL);
	ck_assert_int_eq(hangar_sandbox_kill(s), 0);
	hangar_sandbox_unref(s);
	hangar_ctx_unref(a);
	run_link(sa, ra, sizeof(ra));
	snprintf(parent, sizeof(parent), "%s/hangar-%u", base, (unsigned)geteuid());
	ck_assert_msg(!strncmp(ra, parent, strlen(parent)), "a's runtime directory: \"%s\"", ra);

	c = ctx_under("c", base, sc, sizeof(sc));
	kept = create(c, 60, HANGAR_NETWORK_OFF, NULL);
	run_link(sc, rc, sizeof(rc));
	snprintf(link, sizeof(link), "%s/local/run", sc);
	ck_assert_int_eq(unlink(link), 0); /* c no longer links to it, but a sandbox runs there */

	snprintf(old, sizeof(old), "%s/r-old000", parent);
	snprintf(young, sizeof(young), "%s/r-young0", parent);
	ck_assert_int_eq(mkdir(old, 0700), 0);
	ck_assert_int_eq(mkdir(young, 0700), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, old, ago, 0), 0);

	ck_assert_int_eq(rm_rf(sa), 0); /* a's state directory is gone */
	b = ctx_under("b", base, sb_, sizeof(sb_));
	s = create(b, 60, HANGAR_NETWORK_OFF, NULL);
	run_link(sb_, rb, sizeof(rb));
	ck_assert(private_dir(rb));
	ck_assert_msg(access(ra, F_OK) < 0 && errno == ENOENT, "%s is still there", ra);
	ck_assert(access(old, F_OK) < 0 && errno == ENOENT);
	ck_assert(private_dir(young));
	ck_assert(private_dir(rc));

	ck_assert_int_eq(hangar_sandbox_kill(s), 0);
	hangar_sandbox_unref(s);
	hangar_ctx_unref(b);
	ck_assert_int_eq(symlink(rc, link), 0);
	ck_assert_int_eq(hangar_sandbox_kill(kept), 0);
	hangar_sandbox_unref(kept);
	hangar_ctx_unref(c);
	ck_assert_int_eq(rm_rf(base), 0);
}
END_TEST

/* The first host uid sandbox id of state's maps (its pid 1's uid_map), or 0. */
static unsigned host_base(const char *state, const char *id)
{
	char path[PATH_MAX * 2];
	unsigned inside = 1, base = 0;
	int jail = 0, bwrap, init;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state), id);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%d", &jail) != 1)
		jail = 0;
	if (f)
		fclose(f);
	bwrap = jail > 0 ? proc_child_named(jail, "bwrap") : 0;
	init = bwrap > 0 ? proc_child_named(bwrap, "hangar-envd-ini") : 0;
	snprintf(path, sizeof(path), "/proc/%d/uid_map", init);
	f = init > 0 ? fopen(path, "re") : NULL;
	if (!f || fscanf(f, "%u %u", &inside, &base) != 2 || inside != 0)
		base = 0;
	if (f)
		fclose(f);
	return base;
}

/*
 * A root caller's sandboxes never share host ids, whatever state directory
 * each is made in: the claims on the ranges are the host's, not a state
 * directory's.
 */
START_TEST(ranges_apart_across_state_dirs)
{
	char one[PATH_MAX], two[PATH_MAX];
	hangar_ctx *a, *b;
	hangar_sandbox *sa, *sb;
	unsigned base_a, base_b;

	if (geteuid() != 0)
		return;
	a = ctx_under("one", "auto", one, sizeof(one));
	b = ctx_under("two", "auto", two, sizeof(two));
	sa = create(a, 60, HANGAR_NETWORK_OFF, NULL);
	sb = create(b, 60, HANGAR_NETWORK_OFF, NULL);
	base_a = host_base(one, hangar_sandbox_id(sa));
	base_b = host_base(two, hangar_sandbox_id(sb));
	ck_assert_uint_ne(base_a, 0);
	ck_assert_uint_ne(base_b, 0);
	ck_assert_msg(base_a + 65536 <= base_b || base_b + 65536 <= base_a, "host ids %u and %u overlap", base_a,
		      base_b);
	ck_assert_int_eq(hangar_sandbox_kill(sa), 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sa);
	hangar_sandbox_unref(sb);
	kill_local_leftovers(a, one);
	kill_local_leftovers(b, two);
	hangar_ctx_unref(a);
	hangar_ctx_unref(b);
}
END_TEST

/* Creates a sandbox on ctx and expects HANGAR_ECONFIG naming HANGAR_LOCAL_RUN_DIR. */
static void expect_run_dir_refused(hangar_ctx *ctx)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	o.provider = "local";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ECONFIG);
	ck_assert_ptr_null(sb);
	ck_assert_msg(strstr(hangar_error_last()->message, "HANGAR_LOCAL_RUN_DIR"), "message: %s",
		      hangar_error_last()->message);
}

/*
 * HANGAR_LOCAL_RUN_DIR: "state" keeps everything in the state directory; a
 * path is the base to use; anything else is refused when set. Under a base
 * another user can write to, only what is this uid's, reached without a
 * link, is taken: a planted link or directory is refused, and a planted
 * local/run is replaced.
 */
START_TEST(runtime_dir_setting)
{
	static const char *const bad[] = { "relative", "/a/../b", "/a/", "",
					   "/a-base-much-longer-than-the-sockets-leave-room-for" };
	char base[64], state[PATH_MAX], run[PATH_MAX], path[PATH_MAX + 32], other[PATH_MAX];
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	ctx = new_ctx();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(hangar_ctx_set(ctx, "HANGAR_LOCAL_RUN_DIR", bad[i]) != 0, "\"%s\" taken", bad[i]);
	hangar_ctx_unref(ctx);

	/* state: no link, the sandbox's directory in the state directory. */
	ctx = ctx_under("kept", "state", state, sizeof(state));
	sb = create(ctx, 60, HANGAR_NETWORK_OFF, NULL);
	run_link(state, run, sizeof(run));
	ck_assert_str_eq(run, "");
	snprintf(path, sizeof(path), "%s/local/%s/envd.sock", state, hangar_sandbox_id(sb));
	ck_assert(access(path, F_OK) == 0);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);

	/* A link planted where BASE/hangar-<uid> goes. */
	make_base(base, sizeof(base));
	snprintf(path, sizeof(path), "%s/hangar-%u", base, (unsigned)geteuid());
	snprintf(other, sizeof(other), "%s/elsewhere", state_dir);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	ck_assert_int_eq(symlink(other, path), 0);
	ctx = ctx_under("planted-link", base, state, sizeof(state));
	expect_run_dir_refused(ctx);
	hangar_ctx_unref(ctx);
	ck_assert_int_eq(unlink(path), 0);
	run_link(state, run, sizeof(run));
	ck_assert_str_eq(run, "");

	if (geteuid() == 0) {
		/* Another uid's directory there. */
		ck_assert_int_eq(mkdir(path, 0700), 0);
		ck_assert_int_eq(chown(path, 1000, 1000), 0);
		ctx = ctx_under("planted-dir", base, state, sizeof(state));
		expect_run_dir_refused(ctx);
		hangar_ctx_unref(ctx);
		ck_assert_int_eq(rmdir(path), 0);

		/* local/run planted to another uid's directory: replaced, and nothing is put there. */
		ck_assert_int_eq(chown(other, 1000, 1000), 0);
		snprintf(path, sizeof(path), "%s/planted-run", state_dir);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/planted-run/local", state_dir);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/planted-run/local/run", state_dir);
		ck_assert_int_eq(symlink(other, path), 0);
		ctx = ctx_under("planted-run", base, state, sizeof(state));
		sb = create(ctx, 60, HANGAR_NETWORK_OFF, NULL);
		run_link(state, run, sizeof(run));
		ck_assert_str_ne(run, other);
		ck_assert(private_dir(run));
		ck_assert_int_eq(rmdir(other), 0); /* still empty */
		ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
		hangar_sandbox_unref(sb);
		hangar_ctx_unref(ctx);
	}
	ck_assert_int_eq(rm_rf(base), 0);
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
	tcase_add_loop_test(tc, pause_and_resume, 0, 3);
	tcase_add_test(tc, expires);
	tcase_add_test(tc, set_timeout_and_paused_clock);
	tcase_add_test(tc, outlives_its_creator);
	tcase_add_test(tc, network_on_and_off);
	tcase_add_test(tc, bad_settings);
	tcase_add_test(tc, refused_create_leaves_nothing);
	tcase_add_test(tc, failed_start_reports_the_log);
	tcase_add_test(tc, dead_supervisor_means_gone);
	tcase_add_test(tc, killed_jail_leaves_no_network_helper);
	tcase_add_test(tc, another_jail_never_answers_for_a_dead_one);
	tcase_add_test(tc, inside_the_jail);
	tcase_add_test(tc, processes_survive_pause);
	tcase_add_test(tc, unprivileged_caller);
	tcase_add_test(tc, root_in_another_uids_state_dir);
	tcase_add_test(tc, token_only_in_memory);
	tcase_add_test(tc, silent_supervisor);
	tcase_add_test(tc, expired_is_gone_before_teardown);
	tcase_add_test(tc, exec_fails_promptly_when_paused_elsewhere);
	tcase_add_test(tc, remembered_tokens_stay_apart);
	tcase_add_test(tc, subreaper_caller_keeps_no_zombie);
	tcase_add_test(tc, runtime_files_in_memory);
	tcase_add_test(tc, runtime_dir_swept_after_its_state);
	tcase_add_test(tc, runtime_dir_setting);
	tcase_add_test(tc, ranges_apart_across_state_dirs);
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
