/*
 * The local provider's warm pool, through the public API and the state
 * directory: claims from several processes at once, the pool's token
 * refused after a claim, creates with variables served from the pool, the
 * refill, a pooled sandbox killed while it waits, the pool at
 * HANGAR_MAX_SANDBOXES, and list() hiding the pool.
 *
 * The meson test sets HANGAR_ENVD_PATH and HANGAR_JAIL_PATH; each test gets
 * its own HANGAR_STATE_DIR.
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
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "clock.h"
#include "leftovers.h"

#define WAIT_MS 60000
#define MAX_IDS 16

/*
 * Each test's state directory is made under one root the runner's own
 * process makes and, after the last test, clears: a test that fails exits
 * at once, without its teardown, and would otherwise leave its sandboxes
 * running.
 */
static char root_dir[64], state_dir[96];

static void clear_dir(const char *dir)
{
	hangar_ctx *ctx = NULL;

	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", dir) == 0)
		kill_local_leftovers(ctx, dir);
	hangar_ctx_unref(ctx);
}

static void make_root(void)
{
	snprintf(root_dir, sizeof(root_dir), "/tmp/hangar-pool-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root_dir));
}

static void clear_root(void)
{
	char path[sizeof(state_dir)], cmd[sizeof(root_dir) + 16];
	struct dirent *e;
	DIR *d = opendir(root_dir);

	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && snprintf(path, sizeof(path), "%s/%.16s", root_dir, e->d_name) > 0)
			clear_dir(path);
	if (d)
		closedir(d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root_dir);
}

static void setup(void)
{
	snprintf(state_dir, sizeof(state_dir), "%s/t-XXXXXX", root_dir);
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
}

static void teardown(void)
{
	char cmd[sizeof(state_dir) + 16];

	clear_dir(state_dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", state_dir);
}

static hangar_ctx *new_ctx(const char *pool_size, const char *max_sandboxes)
{
	hangar_ctx *ctx = NULL;

	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "local"), 0);
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_POOL_SIZE", pool_size), 0);
	if (max_sandboxes)
		ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_MAX_SANDBOXES", max_sandboxes), 0);
	return ctx;
}

static int create_rc(hangar_ctx *ctx, int network, const char *const *env, int64_t timeout_sec, hangar_sandbox **sb)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;

	o.provider = "local";
	o.network = network;
	o.env = env;
	o.timeout_sec = timeout_sec;
	*sb = NULL;
	return hangar_sandbox_create(sb, ctx, &o);
}

static hangar_sandbox *create(hangar_ctx *ctx, int network, const char *const *env)
{
	hangar_sandbox *sb = NULL;
	int rc = create_rc(ctx, network, env, 0, &sb);

	ck_assert_msg(rc == 0, "create: %d %s", rc, hangar_error_last()->message);
	return sb;
}

/* What cmd writes to its stdout in sb, in full (the caller's to free). */
static char *run_all(hangar_sandbox *sb, const char *cmd)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	char *out;
	int rc = hangar_sandbox_exec(&r, sb, cmd, NULL);

	ck_assert_msg(rc == 0, "exec %s: %d %s", cmd, rc, hangar_error_last()->message);
	ck_assert_msg(r.exit_code == 0, "exec %s: exit %d", cmd, r.exit_code);
	out = strndup(r.out.ptr ? r.out.ptr : "", r.out.size);
	hangar_exec_result_dispose(&r);
	return out;
}

/* The first line of what cmd writes. */
static char *run(hangar_sandbox *sb, const char *cmd)
{
	char *out = run_all(sb, cmd);

	out[strcspn(out, "\n")] = '\0';
	return out;
}

/* The ids waiting in every pool of the state directory, into ids; how many. */
static int waiting(char ids[MAX_IDS][32])
{
	char path[PATH_MAX];
	struct dirent *top_de;
	DIR *top;
	int n = 0;

	snprintf(path, sizeof(path), "%s/.pool", run_of(state_dir));
	top = opendir(path);
	while (top && (top_de = readdir(top))) {
		char sub[PATH_MAX + 300];
		struct dirent *de;
		DIR *d;

		if (top_de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, top_de->d_name);
		d = opendir(sub);
		while (d && (de = readdir(d)))
			if (!strncmp(de->d_name, "sb-", 3) && strlen(de->d_name) < 32 && n < MAX_IDS)
				memcpy(ids[n++], de->d_name, strlen(de->d_name) + 1);
		if (d)
			closedir(d);
	}
	if (top)
		closedir(top);
	return n;
}

/* Waits, up to WAIT_MS, until the pool holds want sandboxes whose directories are marked pooled. */
static void wait_pool(int want)
{
	int64_t deadline = clock_mono_ms() + WAIT_MS;
	char ids[MAX_IDS][32];
	int n = 0;

	while (clock_mono_ms() < deadline) {
		int ready = 0;

		n = waiting(ids);
		for (int i = 0; i < n; i++) {
			char p[PATH_MAX];

			snprintf(p, sizeof(p), "%s/%s/pooled", run_of(state_dir), ids[i]);
			ready += access(p, F_OK) == 0;
		}
		if (ready == want && n == want)
			return;
		poll(NULL, 0, 20);
	}
	ck_abort_msg("the pool holds %d sandboxes, want %d", n, want);
}

/* Sandbox directories in the state directory. */
static int count_dirs(void)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "%s", run_of(state_dir));
	d = opendir(path);
	while (d && (de = readdir(d)))
		n += !strncmp(de->d_name, "sb-", 3) || !strncmp(de->d_name, ".new-", 5);
	if (d)
		closedir(d);
	return n;
}

static int in(const char *id, char ids[MAX_IDS][32], int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(ids[i], id))
			return 1;
	return 0;
}

static int connect_sock(const char *id, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/%s", run_of(state_dir), id, name);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", sa.sun_path,
		      strerror(errno));
	return fd;
}

/* Everything fd sends until EOF or a deadline, NUL-terminated. */
static void read_all(int fd, char *buf, size_t size)
{
	int64_t deadline = clock_mono_ms() + 10000;
	size_t have = 0;

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
	buf[have] = '\0';
}

/* The token the jail of sandbox id serves on jail.sock. */
static void jail_token(const char *id, char *buf, size_t size)
{
	int fd = connect_sock(id, "jail.sock");

	read_all(fd, buf, size);
	close(fd);
	ck_assert_msg(strlen(buf) > 0, "no token from %s's jail", id);
}

/* The HTTP status envd of sandbox id answers a request for its environment with token. */
static int envd_status(const char *id, const char *token)
{
	char req[512], buf[512];
	int status = -1, fd = connect_sock(id, "envd.sock");

	snprintf(req, sizeof(req),
		 "GET /envs HTTP/1.1\r\nHost: localhost\r\nX-Access-Token: %s\r\nConnection: close\r\n\r\n", token);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	read_all(fd, buf, sizeof(buf));
	close(fd);
	sscanf(buf, "HTTP/1.%*d %d", &status);
	return status;
}

/* A claim gives the caller a pooled sandbox under a new token: the pool's is refused from then on. */
START_TEST(claim_rotates_token)
{
	hangar_ctx *ctx = new_ctx("2", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *sb;
	char ids[MAX_IDS][32], old[2][1100], now[1100], *out;
	int k;

	wait_pool(2);
	ck_assert_int_eq(waiting(ids), 2);
	for (int i = 0; i < 2; i++) {
		jail_token(ids[i], old[i], sizeof(old[i]));
		ck_assert_int_eq(envd_status(ids[i], old[i]), 200);
	}
	sb = create(ctx, HANGAR_NETWORK_OFF, NULL);
	k = !strcmp(hangar_sandbox_id(sb), ids[0]) ? 0 : !strcmp(hangar_sandbox_id(sb), ids[1]) ? 1 : -1;
	ck_assert_msg(k >= 0, "%s was not taken from the pool", hangar_sandbox_id(sb));
	/* The claimed one: envd and the jail both moved to a new token. */
	ck_assert_int_eq(envd_status(ids[k], old[k]), 401);
	jail_token(ids[k], now, sizeof(now));
	ck_assert_str_ne(now, old[k]);
	ck_assert_int_eq(envd_status(ids[k], now), 200);
	/* A second rotation, even with the token in force, is refused: only the claim rotates. */
	{
		char req[3000], buf[512];
		int fd = connect_sock(ids[k], "envd.sock");

		snprintf(req, sizeof(req), "POST /hangar/v1/token HTTP/1.1\r\nHost: localhost\r\nX-Access-Token: %s\r\n"
			 "X-Hangar-New-Token: again\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", now);
		ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
		read_all(fd, buf, sizeof(buf));
		close(fd);
		ck_assert_msg(!strncmp(buf, "HTTP/1.1 409", 12), "second rotation: %.40s", buf);
	}
	/* The jail refuses a rotation that does not name the token in force. */
	{
		char buf[1100];
		int fd = connect_sock(ids[k], "ports.sock");

		ck_assert_int_eq(send(fd, "rotate wrong new\n", 17, MSG_NOSIGNAL), 17);
		read_all(fd, buf, sizeof(buf));
		close(fd);
		ck_assert_str_eq(buf, "error refused\n");
		jail_token(ids[k], buf, sizeof(buf));
		ck_assert_str_eq(buf, now);
	}
	/* The other one still waits, under its own token. */
	ck_assert_int_eq(envd_status(ids[!k], old[!k]), 200);
	out = run(sb, "echo pooled");
	ck_assert_str_eq(out, "pooled");
	free(out);
	explicit_bzero(old, sizeof(old));
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(ctx);
}
END_TEST

static int count_cb(const hangar_sandbox_info *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 0;
}

static int listed(hangar_ctx *ctx)
{
	int n = 0;

	ck_assert_int_eq(hangar_sandbox_list(ctx, "local", count_cb, &n), 0);
	return n;
}

/* list() shows callers' sandboxes only; a claim is refilled off the caller's path. */
START_TEST(refill_and_list)
{
	hangar_ctx *ctx = new_ctx("2", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *sb;
	char ids[MAX_IDS][32], now[MAX_IDS][32];
	int n;

	wait_pool(2);
	ck_assert_int_eq(listed(ctx), 1);
	n = waiting(ids);
	sb = create(ctx, HANGAR_NETWORK_OFF, NULL);
	ck_assert(in(hangar_sandbox_id(sb), ids, n));
	ck_assert_int_eq(listed(ctx), 2);
	wait_pool(2);
	n = waiting(now);
	ck_assert(!in(hangar_sandbox_id(sb), now, n));
	ck_assert_int_eq(listed(ctx), 2);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A pooled sandbox ran its warm-up login shell before it was put in the
 * pool, and it left nothing: the claimer's first command comes pids later
 * than a cold sandbox's, and it finds the same processes (pid 1, envd,
 * itself), home, /tmp and /workspace as in a cold sandbox.
 */
START_TEST(pooled_warmed_and_clean)
{
	static const char probe[] =
		"echo $$ $(ls /proc | grep -c '^[0-9]') $(ls -A ~ | wc -l) $(ls -A /tmp /workspace | grep -vc ':$')";
	hangar_ctx *cold_ctx = new_ctx("0", NULL), *ctx;
	hangar_sandbox *cold = create(cold_ctx, HANGAR_NETWORK_OFF, NULL), *first, *sb;
	char *c = run(cold, probe), *w;
	int cold_pid, cold_procs, cold_home, cold_files, pid, procs, home, files;

	ck_assert_int_eq(sscanf(c, "%d %d %d %d", &cold_pid, &cold_procs, &cold_home, &cold_files), 4);
	ctx = new_ctx("1", NULL);
	first = create(ctx, HANGAR_NETWORK_OFF, NULL);
	wait_pool(1);
	sb = create(ctx, HANGAR_NETWORK_OFF, NULL);
	w = run(sb, probe);
	ck_assert_int_eq(sscanf(w, "%d %d %d %d", &pid, &procs, &home, &files), 4);
	/*
	 * Without the warm-up, a claimed sandbox's first command came at most
	 * one pid after a cold one's; the warm-up's shell and the command its
	 * /etc/profile substitutes take two more at least.
	 */
	ck_assert_msg(pid >= cold_pid + 3, "the pooled sandbox's first command is pid %d, a cold one's %d: no warm-up ran",
		      pid, cold_pid);
	ck_assert_msg(procs == cold_procs && home == cold_home && files == cold_files,
		      "pooled: \"%s\", cold: \"%s\" (pid, processes, home entries, /tmp and /workspace entries)", w, c);
	free(c);
	free(w);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_sandbox_kill(cold);
	hangar_sandbox_unref(cold);
	hangar_ctx_unref(ctx);
	hangar_ctx_unref(cold_ctx);
}
END_TEST

/* A pooled sandbox destroyed, or whose jail was killed, while it waited is never handed out. */
START_TEST(dead_ones_not_handed_out)
{
	hangar_ctx *ctx = new_ctx("2", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *sb, *gone = NULL;
	char ids[MAX_IDS][32], path[PATH_MAX], pidtext[32] = "";
	int pid, fd;
	ssize_t r;

	wait_pool(2);
	ck_assert_int_eq(waiting(ids), 2);
	/* One destroyed through the API (pooled ones are reachable by id), one SIGKILLed. */
	ck_assert_int_eq(hangar_sandbox_attach(&gone, ctx, "local", ids[0]), 0);
	ck_assert_int_eq(hangar_sandbox_kill(gone), 0);
	hangar_sandbox_unref(gone);
	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), ids[1]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	r = read(fd, pidtext, sizeof(pidtext) - 1);
	close(fd);
	ck_assert_int_gt(r, 0);
	pid = atoi(pidtext);
	ck_assert_int_gt(pid, 1);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF, NULL);
	ck_assert_str_ne(hangar_sandbox_id(sb), ids[0]);
	ck_assert_str_ne(hangar_sandbox_id(sb), ids[1]);
	{
		char *out = run(sb, "echo alive");

		ck_assert_str_eq(out, "alive");
		free(out);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(ctx);
}
END_TEST

/* What a child reports: its sandbox's id and what FOO is inside it. */
struct child_report {
	char id[32];
	char foo[32];
	int rc;
};

/* A process of its own creating one sandbox with (network, env, timeout), reporting on fd. */
static void child_create(int fd, int network, const char *foo, int64_t timeout_sec)
{
	struct child_report rep = { .rc = -1 };
	const char *env[] = { NULL, NULL };
	char var[64];
	hangar_ctx *ctx = NULL;
	hangar_sandbox *sb = NULL;
	ssize_t w;

	if (foo) {
		snprintf(var, sizeof(var), "FOO=%s", foo);
		env[0] = var;
	}
	if (hangar_ctx_new(&ctx, 0) == 0 && hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state_dir) == 0 &&
	    hangar_ctx_set(ctx, "HANGAR_LOCAL_POOL_SIZE", "4") == 0 &&
	    create_rc(ctx, network, foo ? env : NULL, timeout_sec, &sb) == 0) {
		hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

		snprintf(rep.id, sizeof(rep.id), "%s", hangar_sandbox_id(sb));
		if (hangar_sandbox_exec(&r, sb, "printenv FOO || echo none", NULL) == 0) {
			snprintf(rep.foo, sizeof(rep.foo), "%.*s", (int)strcspn(r.out.ptr ? r.out.ptr : "", "\n"),
				 r.out.ptr ? r.out.ptr : "");
			rep.rc = 0;
		}
		hangar_exec_result_dispose(&r);
	}
	w = write(fd, &rep, sizeof(rep));
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	_exit(w == (ssize_t)sizeof(rep) ? 0 : 1);
}

/* Sandbox id's meta.json, into buf. */
static void read_meta(const char *id, char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/meta.json", run_of(state_dir), id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	n = read(fd, buf, size - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
}

/* Whether sandbox id's meta.json holds text. */
static int meta_has(const char *id, const char *text)
{
	char buf[8192];

	read_meta(id, buf, sizeof(buf));
	return strstr(buf, text) != NULL;
}

/* The timeout_sec meta.json of sandbox id records. */
static long meta_timeout(const char *id)
{
	char buf[8192], *p;

	read_meta(id, buf, sizeof(buf));
	p = strstr(buf, "\"timeout_sec\":");
	ck_assert_ptr_nonnull(p);
	return strtol(p + 14, NULL, 10);
}

/*
 * Six processes create at once, five of them as the pool's key (one with
 * variables, which are no part of it): every one gets a sandbox of its own,
 * with its own lifetime and variables; the one whose network differs is
 * made cold.
 */
START_TEST(claims_from_processes)
{
	enum { KIDS = 6 };
	hangar_ctx *ctx = new_ctx("4", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL);
	struct child_report rep[KIDS];
	char ids[MAX_IDS][32], first_id[32];
	pid_t kids[KIDS];
	int p[2], n;

	snprintf(first_id, sizeof(first_id), "%s", hangar_sandbox_id(first));
	hangar_sandbox_unref(first);
	wait_pool(4);
	n = waiting(ids);
	hangar_ctx_unref(ctx); /* no library thread left across fork() */
	ck_assert_int_eq(pipe(p), 0);
	for (int i = 0; i < KIDS; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			close(p[0]);
			if (i == 4)
				child_create(p[1], HANGAR_NETWORK_OFF, "four", 1000 + i);
			else if (i == 5)
				child_create(p[1], HANGAR_NETWORK_ON, NULL, 1000 + i);
			else
				child_create(p[1], HANGAR_NETWORK_OFF, NULL, 1000 + i);
		}
	}
	close(p[1]);
	for (int i = 0; i < KIDS; i++) {
		int st;

		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed", i);
	}
	for (int i = 0; i < KIDS; i++) {
		ck_assert_int_eq(read(p[0], &rep[i], sizeof(rep[i])), (ssize_t)sizeof(rep[i]));
		ck_assert_msg(rep[i].rc == 0, "a child's create or command failed");
	}
	close(p[0]);
	for (int i = 0; i < KIDS; i++) {
		long t = meta_timeout(rep[i].id);
		int from_pool = in(rep[i].id, ids, n);

		ck_assert_str_ne(rep[i].id, first_id);
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(rep[i].id, rep[j].id) != 0, "%s was handed out twice", rep[i].id);
		/* Each its own lifetime: the child's own (1000 + its number). */
		ck_assert_msg(t >= 1000 && t < 1000 + KIDS, "%s: timeout_sec %ld", rep[i].id, t);
		if (t == 1004) {
			ck_assert_str_eq(rep[i].foo, "four");
		} else {
			ck_assert_str_eq(rep[i].foo, "none");
		}
		if (t == 1005)
			ck_assert_msg(!from_pool, "a network-on create was taken from a network-off pool");
	}
}
END_TEST

/* The index of sandbox sb in ids, or -1 when it was not taken from there. */
static int index_in(hangar_sandbox *sb, char ids[MAX_IDS][32], int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(hangar_sandbox_id(sb), ids[i]))
			return i;
	return -1;
}

/*
 * A create with variables is served from the pool: its first command sees
 * them, the pool's token is refused, meta.json records them, and what
 * commands and a login shell see is what a cold create's see. The pooled
 * sandboxes waited with none.
 */
START_TEST(claim_with_variables)
{
	const char *const vars[] = { "FOO=bar baz", "QUOTED=a \"b\" \\ \xc3\xa9", "PATH=/usr/bin:/bin", NULL };
	static const char *const cmds[] = { "env | sort", "bash -lc 'env | sort' | grep -v '^SHLVL='" };
	hangar_ctx *ctx = new_ctx("2", NULL), *cold_ctx;
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *sb, *cold;
	char ids[MAX_IDS][32], old[1100], *out;
	int k;

	wait_pool(2);
	ck_assert_int_eq(waiting(ids), 2);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(!meta_has(ids[i], "FOO="), "pooled sandbox %s holds variables", ids[i]);
	jail_token(ids[0], old, sizeof(old));
	sb = create(ctx, HANGAR_NETWORK_OFF, vars);
	k = index_in(sb, ids, 2);
	ck_assert_msg(k >= 0, "a create with variables was not taken from the pool");
	out = run(sb, "printenv FOO");
	ck_assert_str_eq(out, "bar baz");
	free(out);
	if (k == 0)
		ck_assert_int_eq(envd_status(ids[0], old), 401);
	else
		ck_assert_int_eq(envd_status(ids[0], old), 200); /* the other one waits, its token unchanged */
	explicit_bzero(old, sizeof(old));
	ck_assert(meta_has(ids[k], "\"FOO=bar baz\""));
	ck_assert(!meta_has(ids[!k], "FOO="));
	cold_ctx = new_ctx("0", NULL);
	cold = create(cold_ctx, HANGAR_NETWORK_OFF, vars);
	ck_assert_int_lt(index_in(cold, ids, 2), 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char *pooled_env = run_all(sb, cmds[i]), *cold_env = run_all(cold, cmds[i]);

		ck_assert_ptr_nonnull(strstr(pooled_env, "QUOTED=a \"b\" \\ \xc3\xa9\n"));
		ck_assert_str_eq(pooled_env, cold_env);
		free(pooled_env);
		free(cold_env);
	}
	hangar_sandbox_kill(cold);
	hangar_sandbox_unref(cold);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(cold_ctx);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * Three processes claim at once, two with variables of their own: each is
 * served from the pool and sees its own variables only.
 */
START_TEST(claims_keep_variables_apart)
{
	enum { KIDS = 3 };
	static const char *const foo[KIDS] = { "one", "two", NULL };
	hangar_ctx *ctx = new_ctx("4", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL);
	struct child_report rep[KIDS];
	char ids[MAX_IDS][32];
	pid_t kids[KIDS];
	int p[2], n;

	hangar_sandbox_unref(first);
	wait_pool(4);
	n = waiting(ids);
	hangar_ctx_unref(ctx); /* no library thread left across fork() */
	ck_assert_int_eq(pipe(p), 0);
	for (int i = 0; i < KIDS; i++) {
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			close(p[0]);
			child_create(p[1], HANGAR_NETWORK_OFF, foo[i], 1000 + i);
		}
	}
	close(p[1]);
	for (int i = 0; i < KIDS; i++) {
		int st;

		ck_assert_int_eq(waitpid(kids[i], &st, 0), kids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed", i);
	}
	for (int i = 0; i < KIDS; i++) {
		long t;

		ck_assert_int_eq(read(p[0], &rep[i], sizeof(rep[i])), (ssize_t)sizeof(rep[i]));
		ck_assert_msg(rep[i].rc == 0, "a child's create or command failed");
		t = meta_timeout(rep[i].id);
		ck_assert_msg(t >= 1000 && t < 1000 + KIDS, "%s: timeout_sec %ld", rep[i].id, t);
		ck_assert_msg(in(rep[i].id, ids, n), "child %ld's create was not taken from the pool", t - 1000);
		ck_assert_str_eq(rep[i].foo, foo[t - 1000] ? foo[t - 1000] : "none");
		for (int j = 0; j < i; j++)
			ck_assert_msg(strcmp(rep[i].id, rep[j].id) != 0, "%s was handed out twice", rep[i].id);
	}
	close(p[0]);
}
END_TEST

/*
 * A variable a cold create refuses is refused the same way with a full
 * pool, before any pooled sandbox is taken; a good one right after is
 * served from the pool.
 */
START_TEST(bad_variable_refused_as_cold)
{
	hangar_ctx *ctx = new_ctx("2", NULL), *cold_ctx = new_ctx("0", NULL);
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *sb = NULL;
	char ids[MAX_IDS][32], now[MAX_IDS][32], *big = malloc(40000), *out;
	const char *const too_long[] = { "FOO=ok", big, NULL }, *const no_value[] = { "FOO", NULL };
	const char *const *bad[] = { too_long, no_value };

	ck_assert_ptr_nonnull(big);
	memcpy(big, "BIG=", 4);
	memset(big + 4, 'x', 40000 - 5);
	big[40000 - 1] = '\0';
	wait_pool(2);
	ck_assert_int_eq(waiting(ids), 2);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int cold_rc = create_rc(cold_ctx, HANGAR_NETWORK_OFF, bad[i], 0, &sb), rc;
		char *cold_msg = strdup(hangar_error_last()->message);

		ck_assert_ptr_null(sb);
		rc = create_rc(ctx, HANGAR_NETWORK_OFF, bad[i], 0, &sb);
		ck_assert_ptr_null(sb);
		ck_assert_int_eq(cold_rc, HANGAR_EINVAL);
		ck_assert_int_eq(rc, cold_rc);
		ck_assert_str_eq(hangar_error_last()->message, cold_msg);
		free(cold_msg);
		ck_assert_int_eq(waiting(now), 2);
		ck_assert(in(now[0], ids, 2) && in(now[1], ids, 2));
	}
	free(big);
	sb = create(ctx, HANGAR_NETWORK_OFF, (const char *const[]){ "FOO=good", NULL });
	ck_assert_msg(in(hangar_sandbox_id(sb), ids, 2), "a create with variables was not taken from the pool");
	out = run(sb, "printenv FOO");
	ck_assert_str_eq(out, "good");
	free(out);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(cold_ctx);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * HANGAR_MAX_SANDBOXES counts pooled sandboxes: the pool fills only up to
 * the cap, and at the cap a create of other options still gets its sandbox
 * (a pooled one makes way), as does one of the pool's options.
 */
START_TEST(pool_at_the_cap)
{
	hangar_ctx *ctx = new_ctx("5", "3");
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL), *other, *same;
	char *out;

	wait_pool(2);
	ck_assert_int_eq(count_dirs(), 3);
	other = create(ctx, HANGAR_NETWORK_OFF, (const char *const[]){ "FOO=cold", NULL });
	ck_assert_int_le(count_dirs(), 3);
	out = run(other, "printenv FOO");
	ck_assert_str_eq(out, "cold");
	free(out);
	same = create(ctx, HANGAR_NETWORK_OFF, NULL);
	out = run(same, "echo same");
	ck_assert_str_eq(out, "same");
	free(out);
	hangar_ctx_unref(ctx); /* waits for its refill thread */
	ck_assert_int_le(count_dirs(), 3);
	hangar_sandbox_kill(same);
	hangar_sandbox_kill(other);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(same);
	hangar_sandbox_unref(other);
	hangar_sandbox_unref(first);
}
END_TEST

/* The jail pid of sandbox id, from its directory. */
static int jail_pid_of(const char *id)
{
	char path[PATH_MAX], text[32] = "";
	int fd;
	ssize_t r;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	r = read(fd, text, sizeof(text) - 1);
	close(fd);
	ck_assert_int_gt(r, 0);
	ck_assert_int_gt(atoi(text), 1);
	return atoi(text);
}

/* Waits, up to WAIT_MS, until process pid and sandbox id's directory are both gone: 1, else 0. */
static int wait_sandbox_gone(int pid, const char *id)
{
	int64_t deadline = clock_mono_ms() + WAIT_MS;
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/%s", run_of(state_dir), id);
	while (clock_mono_ms() < deadline) {
		if (kill(pid, 0) < 0 && errno == ESRCH && access(dir, F_OK) < 0)
			return 1;
		poll(NULL, 0, 20);
	}
	return 0;
}

/*
 * A pool create killed after its sandbox started but before it put the
 * sandbox's marker leaves a hidden sandbox nobody can claim: the next list
 * stops it, and leaves the pooled sandbox that has its marker alone.
 */
START_TEST(orphan_of_a_dead_maker)
{
	hangar_ctx *ctx = new_ctx("2", NULL), *plain;
	hangar_sandbox *first = create(ctx, HANGAR_NETWORK_OFF, NULL);
	char ids[MAX_IDS][32], marker[PATH_MAX], kept[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int n, pid, kept_pid;

	wait_pool(2);
	hangar_ctx_unref(ctx); /* its refill thread is done: nothing refills behind the test */
	n = waiting(ids);
	ck_assert_int_eq(n, 2);
	pid = jail_pid_of(ids[0]);
	kept_pid = jail_pid_of(ids[1]);
	/* What the dead maker left: the sandbox, hidden, with no marker in any pool. */
	snprintf(marker, sizeof(marker), "%s/.pool", run_of(state_dir));
	d = opendir(marker);
	ck_assert_ptr_nonnull(d);
	n = 0;
	while ((de = readdir(d))) {
		char p[PATH_MAX + 300];

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s/%s", marker, de->d_name, ids[0]);
		n += unlink(p) == 0;
	}
	closedir(d);
	ck_assert_int_eq(n, 1);
	plain = new_ctx("0", NULL);
	ck_assert_int_eq(listed(plain), 1);
	ck_assert_msg(wait_sandbox_gone(pid, ids[0]), "the orphan %s still runs", ids[0]);
	/* The one with its marker still waits, alive and claimable. */
	snprintf(kept, sizeof(kept), "%s/%s/pooled", run_of(state_dir), ids[1]);
	ck_assert_int_eq(access(kept, F_OK), 0);
	ck_assert_int_eq(kill(kept_pid, 0), 0);
	n = waiting(ids);
	ck_assert_int_eq(n, 1);
	hangar_sandbox_kill(first);
	hangar_sandbox_unref(first);
	hangar_ctx_unref(plain);
}
END_TEST

/* Rewrites sandbox id's meta.json with no expiry recorded, as a create that died before its record leaves it. */
static void forget_expiry(const char *id)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], buf[8192], out[8192];
	const char *key = "\"expires_at_us\":";
	char *at, *num;
	size_t len;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s/meta.json", run_of(state_dir), id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(r, 0);
	buf[r] = '\0';
	at = strstr(buf, key);
	ck_assert_ptr_nonnull(at);
	num = at + strlen(key);
	num += strspn(num, " \t");
	ck_assert_msg(*num >= '1' && *num <= '9', "no expiry in %s", path);
	len = (size_t)(num - buf);
	memcpy(out, buf, len);
	out[len] = '0';
	snprintf(out + len + 1, sizeof(out) - len - 1, "%s", num + strspn(num, "0123456789.e+"));
	snprintf(tmp, sizeof(tmp), "%s.test", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, out, strlen(out)), (ssize_t)strlen(out));
	close(fd);
	ck_assert_int_eq(rename(tmp, path), 0);
}

/*
 * A sandbox whose expiry was never recorded still ends when the lifetime
 * it was created with runs out, counted from its jail's start.
 */
START_TEST(lifetime_without_a_record)
{
	hangar_ctx *ctx = new_ctx("0", NULL);
	hangar_sandbox *sb = NULL;
	char id[32];
	int pid, rc = create_rc(ctx, HANGAR_NETWORK_OFF, NULL, 3, &sb);

	ck_assert_msg(rc == 0, "create: %d %s", rc, hangar_error_last()->message);
	snprintf(id, sizeof(id), "%s", hangar_sandbox_id(sb));
	pid = jail_pid_of(id);
	forget_expiry(id);
	ck_assert_int_eq(kill(pid, SIGHUP), 0); /* the jail reads its lifetime again */
	ck_assert_msg(wait_sandbox_gone(pid, id), "sandbox %s outlived its 3 s lifetime", id);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

Suite *pool_suite(void);

Suite *pool_suite(void)
{
	Suite *s = suite_create("local-pool");
	TCase *tc = tcase_create("pool");

	tcase_add_unchecked_fixture(tc, make_root, clear_root);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, claim_rotates_token);
	tcase_add_test(tc, refill_and_list);
	tcase_add_test(tc, pooled_warmed_and_clean);
	tcase_add_test(tc, dead_ones_not_handed_out);
	tcase_add_test(tc, claims_from_processes);
	tcase_add_test(tc, claim_with_variables);
	tcase_add_test(tc, claims_keep_variables_apart);
	tcase_add_test(tc, bad_variable_refused_as_cold);
	tcase_add_test(tc, pool_at_the_cap);
	tcase_add_test(tc, orphan_of_a_dead_maker);
	tcase_add_test(tc, lifetime_without_a_record);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(pool_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
