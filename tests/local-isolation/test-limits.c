/*
 * A local sandbox's limits and ids as the host sees them, from outside the
 * sandbox (its /proc entries, the cgroups it is in, the record its jail
 * writes), since inside its cgroup and user namespaces hide them:
 *   - a v1 memory cgroup below the jail's own, so the caller's own limit
 *     holds for its sandboxes too;
 *   - one range of host ids per sandbox, for an unprivileged caller too;
 *   - a process limit for both callers (a cgroup for root, RLIMIT_NPROC
 *     of the commands' namespace for an unprivileged one), per sandbox;
 *   - what does not hold is recorded and reported, never silently absent;
 *   - HANGAR_LOCAL_CGROUP refused at open time when it cannot work;
 *   - no process of a sandbox above the host's ordinary priority, whatever
 *     the caller's, nor with its umask, signals, working directory, CPU
 *     affinity or lowered soft limits.
 *
 * Tests with a loop run twice: _i == 0 with the caller as root, _i == 1 as
 * the unprivileged test user `user` (skipped when not started as root).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "jail-test.h"
#include "leftovers.h"

/* The caller for loop index unprivileged: `user`, or root (this suite's root tests need root). */
static int caller(int unprivileged)
{
	return unprivileged ? become_caller(1) : geteuid() == 0;
}

/* The sandbox's directory file name, read whole into buf. */
static void sandbox_file(hangar_sandbox *sb, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s/%s", run_of(state_dir), hangar_sandbox_id(sb), name);
	f = fopen(path, "re");
	ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
}

static int first_child(int pid)
{
	char path[96];
	FILE *f;
	int child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%d", &child) != 1)
		child = 0;
	if (f)
		fclose(f);
	return child;
}

/* The jail's pid, and the sandbox's pid 1 as the host numbers it (the jail's child is bwrap, whose child it is). */
static int jail_of(hangar_sandbox *sb)
{
	char text[32];

	sandbox_file(sb, "jail.pid", text, sizeof(text));
	return atoi(text);
}

static int init_of(hangar_sandbox *sb)
{
	int pid = first_child(proc_child_named(jail_of(sb), "bwrap"));

	ck_assert_int_gt(pid, 0);
	return pid;
}

/* pid's path in the v1 hierarchy of controller ("4:memory:/x" -> "/x"), from the host's view. */
static void v1_path(int pid, const char *controller, char *out, size_t size)
{
	char path[64], line[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *list = strchr(line, ':'), *p = list ? strchr(list + 1, ':') : NULL, *tok, *save = NULL;

		if (!p)
			continue;
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		for (tok = strtok_r(list + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (!strcmp(tok, controller))
				snprintf(out, size, "%s", p);
	}
	fclose(f);
	ck_assert_msg(out[0] == '/', "pid %d has no %s cgroup", pid, controller);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

struct logs {
	char text[8192];
};

static int log_cb(const hangar_sandbox_log_entry *e, void *payload)
{
	struct logs *l = payload;
	size_t n = strlen(l->text);

	snprintf(l->text + n, sizeof(l->text) - n, "%s: %s\n", e->level, e->message);
	return 0;
}

static void read_logs(hangar_sandbox *sb, struct logs *l)
{
	l->text[0] = '\0';
	ck_assert_int_eq(hangar_sandbox_logs(sb, log_cb, l), 0);
}

static int metric_cb(const hangar_sandbox_metric *m, void *payload)
{
	*(hangar_sandbox_metric *)payload = *m;
	return 0;
}

/* ---- memory: below the caller's own cgroup --------------------------------------------- */

/* A cgroup and every cgroup below it, removed depth first where empty: best effort. */
static void rmdir_cgroup_tree(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);

	while (d && (de = readdir(d))) {
		char sub[PATH_MAX * 2];

		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		rmdir_cgroup_tree(sub);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* The hangar-lim-PID cgroups a run killed mid-test left in parent, whose PID is gone: removed where empty. */
static void remove_stale_lim_cgroups(const char *parent)
{
	struct dirent *de;
	DIR *d = opendir(parent);
	int pid;

	while (d && (de = readdir(d))) {
		char path[PATH_MAX * 2];

		if (sscanf(de->d_name, "hangar-lim-%d", &pid) != 1 || pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH ||
		    snprintf(path, sizeof(path), "%s/%s", parent, de->d_name) >= (int)sizeof(path))
			continue;
		rmdir_cgroup_tree(path);
	}
	if (d)
		closedir(d);
}

/*
 * The caller in a v1 memory cgroup of its own, limited to 128 MiB, and a
 * sandbox allowed 1024: the sandbox's cgroup is below the caller's (the
 * jail's, which is the caller's), its processes are in it, and 256 MiB in
 * the sandbox is more than the caller may have, so the sandbox cannot take
 * it. With the sandbox's cgroup at the hierarchy's root, as before, it could.
 */
START_TEST(memory_cgroup_below_the_callers)
{
	char own[1024], cg[1200], want[PATH_MAX * 2], rec[8192], path[PATH_MAX * 2], back[PATH_MAX * 2];
	char self[32];
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;
	int jail;

	if (geteuid() != 0 || access("/sys/fs/cgroup/memory/cgroup.procs", W_OK) < 0)
		return; /* v1 memory cgroups need root and the hierarchy */
	v1_path(getpid(), "memory", own, sizeof(own));
	snprintf(back, sizeof(back), "/sys/fs/cgroup/memory%s", own);
	remove_stale_lim_cgroups(back); /* this test's cgroup, should a run of it have been killed before its end */
	snprintf(back, sizeof(back), "/sys/fs/cgroup/memory%s/cgroup.procs", own);
	snprintf(cg, sizeof(cg), "%s%shangar-lim-%d", own, strcmp(own, "/") ? "/" : "", (int)getpid());
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s", cg);
	ck_assert_msg(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", cg);
	ck_assert_int_eq(write_file(path, "134217728"), 0);
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.memsw.limit_in_bytes", cg);
	if (access(path, F_OK) == 0)
		ck_assert_int_eq(write_file(path, "134217728"), 0);
	snprintf(self, sizeof(self), "%d", (int)getpid());
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/cgroup.procs", cg);
	ck_assert_int_eq(write_file(path, self), 0);

	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_MEMORY_MB", "1024"), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF);
	jail = jail_of(sb);
	v1_path(jail, "memory", own, sizeof(own));
	ck_assert_str_eq(own, cg);
	/* The record names it, and the sandbox's pid 1 is in it. */
	snprintf(want, sizeof(want), "memory v1 /sys/fs/cgroup/memory%s/hangar/%s\n", cg, hangar_sandbox_id(sb));
	sandbox_file(sb, "limits", rec, sizeof(rec));
	ck_assert_msg(strstr(rec, want), "limits: %s", rec);
	v1_path(init_of(sb), "memory", path, sizeof(path));
	snprintf(want, sizeof(want), "%s/hangar/%s", cg, hangar_sandbox_id(sb));
	ck_assert_str_eq(path, want);
	/* Inside, the cgroup namespace shows its own cgroup as the root, hiding where it is. */
	sh(sb, "user", "grep -c ':memory:/$' /proc/self/cgroup", &o);
	ck_assert_msg(o.exit_code == 0 && !strncmp(o.text, "1", 1), "inside: %s", o.text);
	/* Within the sandbox's 1024 MiB, beyond the caller's 128: killed. */
	sh(sb, "user", "python3 -c 'a = bytearray(256 << 20); print(\"allocated\")'", &o);
	ck_assert_msg((o.exit_code == 137 || o.exit_code == -1) && !strstr(o.text, "allocated"), "exit %d: %s",
		      o.exit_code, o.text);
	expect(sb, "user", "echo alive", "alive");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	/* The jail removed the sandbox's cgroup and hangar/ with it: the caller's can go. */
	ck_assert_int_eq(write_file(back, self), 0);
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s", cg);
	for (int tries = 0; tries < 100 && rmdir(path) < 0; tries++)
		usleep(20000);
	ck_assert_msg(access(path, F_OK) < 0, "%s is still there (not empty?)", path);
}
END_TEST

/* ---- every process held: the v1 limits joined beside bwrap's start ---------------------- */

/*
 * pid is in each v1 cgroup the record rec names ("memory v1 /sys/fs/cgroup/
 * memory/X" wants "4:memory:/X"). How many it checked.
 */
static int held_by_record(int pid, const char *rec)
{
	static const char *const controllers[] = { "memory", "pids", "cpu" };
	int n = 0;

	for (size_t i = 0; i < sizeof(controllers) / sizeof(controllers[0]); i++) {
		char key[64], root[64], want[PATH_MAX], got[PATH_MAX];
		const char *at;
		size_t len;

		snprintf(key, sizeof(key), "\n%s v1 ", controllers[i]);
		at = strstr(rec, key);
		if (!at)
			continue;
		at += strlen(key);
		len = strcspn(at, "\n");
		snprintf(root, sizeof(root), "/sys/fs/cgroup/%s", controllers[i]);
		ck_assert_msg(len > strlen(root) && !strncmp(at, root, strlen(root)), "record: %s", rec);
		snprintf(want, sizeof(want), "%.*s", (int)(len - strlen(root)), at + strlen(root));
		v1_path(pid, controllers[i], got, sizeof(got));
		ck_assert_msg(!strcmp(got, want), "process %d is in %s cgroup %s, not the sandbox's %s", pid,
			      controllers[i], got, want);
		n++;
	}
	return n;
}

/*
 * The moment a create returns, every process of the sandbox (its cgroup v2,
 * or the jail's descendants but slirp4netns) is in each v1 cgroup its
 * limits record names: bwrap's child joins them itself before it runs
 * bwrap, a thread moving itself (cgroup.c), so whatever it starts is born
 * there. The jail has no other child of its own kind, one that would move
 * them. Network off and on, for a root caller and an unprivileged one.
 */
START_TEST(every_process_held)
{
	hangar_ctx *ctx;

	if (!caller(_i))
		return;
	ctx = new_ctx();
	for (int k = 0; k < 4; k++) {
		hangar_sandbox *sb = create(ctx, k % 2 ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF);
		char rec[8192], cg[PATH_MAX + 16], procs[PATH_MAX + 32];
		int pid, pids = 0, checked = 0, jail = jail_of(sb);
		struct out o;
		FILE *f;

		sandbox_file(sb, "limits", rec, sizeof(rec));
		sandbox_file(sb, "cgroup", cg, sizeof(cg));
		if (strncmp(cg, "v2 ", 3) != 0 || !strstr(rec, " v1 ")) {
			/* No cgroup v2 to find them by, or no v1 limit: the pid 1 test above covers this host. */
			hangar_sandbox_kill(sb);
			hangar_sandbox_unref(sb);
			continue;
		}
		cg[strcspn(cg, "\n")] = '\0';
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg + 3);
		f = fopen(procs, "re");
		ck_assert_msg(f != NULL, "%s: %s", procs, strerror(errno));
		while (fscanf(f, "%d", &pid) == 1) {
			checked += held_by_record(pid, rec);
			pids++;
		}
		fclose(f);
		/* bwrap, the namespace's pid 1 and envd at least, each in every v1 cgroup recorded. */
		ck_assert_msg(pids >= 3 && checked >= pids, "%d processes, %d checks", pids, checked);
		/* A command and what it leaves running are in them too. */
		sh(sb, "user", "sleep 60 >/dev/null 2>&1 & echo started", &o);
		ck_assert_int_eq(o.exit_code, 0);
		f = fopen(procs, "re");
		ck_assert_ptr_nonnull(f);
		while (fscanf(f, "%d", &pid) == 1)
			held_by_record(pid, rec);
		fclose(f);
		ck_assert_msg(!proc_child_named(jail, "hangar-jail"), "jail %d has a hangar-jail child", jail);
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- priority: the host's ordinary, whatever the caller's ----------------------------- */

#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_CLASS_RT 1
#define IOPRIO_CLASS_SHIFT 13

/* The sum of visit(p, arg) over every process p from pid down (the jail and all it started). */
static int sum_below(int pid, int (*visit)(int pid, const void *arg), const void *arg)
{
	char path[96];
	int child, n = visit(pid, arg);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	if (!(f = fopen(path, "re")))
		return n;
	while (fscanf(f, "%d", &child) == 1)
		n += sum_below(child, visit, arg);
	fclose(f);
	return n;
}

/* pid not above the host's ordinary priority: 1, counting it. */
static int ordinary(int pid, const void *arg)
{
	int io;

	(void)arg;
	errno = 0;
	ck_assert_msg(sched_getscheduler(pid) == SCHED_OTHER || errno == ESRCH, "pid %d: policy %d", pid,
		      sched_getscheduler(pid));
	errno = 0;
	ck_assert_msg(getpriority(PRIO_PROCESS, (id_t)pid) >= 0 || errno == ESRCH, "pid %d: nice below 0", pid);
	io = (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, pid);
	ck_assert_msg(io < 0 || io >> IOPRIO_CLASS_SHIFT != IOPRIO_CLASS_RT, "pid %d: real-time I/O class", pid);
	return 1;
}

/* Inside: the policy and nice value, then whether a real-time policy, a lower nice or the real-time I/O class can be had. */
#define PRIORITY_PROBE                                                                                     \
	"python3 -c \"\n"                                                                                  \
	"import os, subprocess\n"                                                                          \
	"def refused(f):\n"                                                                                \
	"    try:\n"                                                                                       \
	"        f()\n"                                                                                    \
	"        return 'taken'\n"                                                                         \
	"    except PermissionError:\n"                                                                    \
	"        return 'refused'\n"                                                                       \
	"io = subprocess.run(['ionice', '-c', '1', '-n', '0', 'true']).returncode\n"                       \
	"lim = dict((l[:25].strip(), l[26:].split()[:2]) for l in open('/proc/self/limits').readlines()[1:])\n" \
	"print(os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0),\n"                            \
	"      refused(lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))),\n"             \
	"      refused(lambda: os.setpriority(os.PRIO_PROCESS, 0, -1)),\n"                                 \
	"      'refused' if io else 'taken',\n"                                                            \
	"      '/'.join(lim['Max nice priority'] + lim['Max realtime priority']))\n\""

/*
 * A caller running real-time (SCHED_FIFO), at nice -5, in the real-time
 * I/O class: its sandbox starts (the kernel refuses a real-time process a
 * cgroup v1 cpu cgroup with no real-time budget, which is every new one),
 * no process of it runs above the ordinary priority, and no command can
 * raise its own, as the sandbox's root either. RLIMIT_RTPRIO is raised
 * first where the caller may (CAP_SYS_RESOURCE, or a hard limit above 0),
 * so that its 0 inside is the jail's doing. Root and unprivileged callers,
 * network off and on.
 */
START_TEST(ordinary_priority)
{
	struct sched_param fifo = { .sched_priority = 1 };
	struct rlimit rt = { 10, 10 };
	char want[64];
	hangar_ctx *ctx;

	if (geteuid() != 0)
		return;
	if (sched_setscheduler(0, SCHED_FIFO, &fifo) < 0) {
		ck_assert_int_eq(errno, EPERM); /* no CAP_SYS_NICE: nothing to test */
		return;
	}
	ck_assert_int_eq(setpriority(PRIO_PROCESS, 0, -5), 0);
	ck_assert_int_eq(syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_RT << IOPRIO_CLASS_SHIFT), 0);
	if (setrlimit(RLIMIT_RTPRIO, &rt) < 0)
		ck_assert_int_eq(errno, EPERM);
	if (!caller(_i))
		return;
	ck_assert_int_eq(sched_getscheduler(0), SCHED_FIFO);
	ctx = new_ctx();
	for (int k = 0; k < 2; k++) {
		hangar_sandbox *sb = create(ctx, k ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF);

		/* The jail, its helpers, bwrap, pid 1 and envd. */
		ck_assert_int_ge(sum_below(jail_of(sb), ordinary, NULL), 4);
		/* SCHED_OTHER, nice 0, all three refused, "Max nice priority" and "Max realtime priority" 0. */
		snprintf(want, sizeof(want), "%d 0 refused refused refused 0/0/0/0", SCHED_OTHER);
		expect(sb, "user", PRIORITY_PROBE, want);
		expect(sb, "root", PRIORITY_PROBE, want);
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * Nor the caller's umask: a caller running with umask 0 (or 077) still
 * gets commands, and files, under envd's 022, as on E2B.
 */
START_TEST(umask_not_the_callers)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	if (!caller(_i / 2))
		return;
	umask(_i % 2 ? 077 : 0);
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "user", "umask; echo x > /tmp/f", "0022");
	expect(sb, "user", "stat -c %a /tmp/f", "644");
	expect(sb, "root", "umask", "0022");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* The bits of sig in a /proc status mask line ("SigIgn:\t0000000000000200"), from text. */
static int status_bit(const char *text, const char *line, int sig)
{
	const char *p = strstr(text, line);

	ck_assert_msg(p != NULL, "no %s in: %s", line, text);
	return (int)((strtoull(p + strlen(line), NULL, 16) >> (sig - 1)) & 1);
}

/*
 * Nor the caller's signals: a caller that ignores SIGCHLD (a daemon's
 * habit), SIGTERM, SIGHUP and SIGUSR1 and blocks SIGUSR2 still gets a
 * sandbox, network on too (its helper is waited for), whose commands
 * ignore and block none of them, and die of SIGTERM.
 */
START_TEST(signals_not_the_callers)
{
	static const int ignored[] = { SIGCHLD, SIGTERM, SIGHUP, SIGUSR1 };
	hangar_ctx *ctx;
	sigset_t usr2;
	struct out o;

	if (!caller(_i))
		return;
	for (size_t k = 0; k < sizeof(ignored) / sizeof(ignored[0]); k++)
		signal(ignored[k], SIG_IGN);
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	ck_assert_int_eq(sigprocmask(SIG_BLOCK, &usr2, NULL), 0);
	ctx = new_ctx();
	for (int k = 0; k < 2; k++) {
		hangar_sandbox *sb = create(ctx, k ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF);

		sh(sb, "user", "grep -E '^Sig(Ign|Blk)' /proc/self/status", &o);
		ck_assert_int_eq(o.exit_code, 0);
		for (size_t n = 0; n < sizeof(ignored) / sizeof(ignored[0]); n++)
			ck_assert_msg(!status_bit(o.text, "SigIgn:\t", ignored[n]), "signal %d ignored: %s", ignored[n],
				      o.text);
		ck_assert_msg(!status_bit(o.text, "SigBlk:\t", SIGUSR2), "SIGUSR2 blocked: %s", o.text);
		expect(sb, "user", "sleep 30 & kill -TERM $!; wait $!; echo $?", "143");
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* What ulimit prints for a soft limit of floor (its unit: unit bytes) under hard limit resource's. */
static void ulimit_text(int resource, rlim_t floor, rlim_t unit, char *out, size_t size)
{
	struct rlimit r;

	ck_assert_int_eq(getrlimit(resource, &r), 0);
	if (floor > r.rlim_max)
		floor = r.rlim_max;
	if (floor == RLIM_INFINITY)
		snprintf(out, size, "unlimited");
	else
		snprintf(out, size, "%llu", (unsigned long long)(floor / unit));
}

/* 1 when pid's working directory is the directory arg (a struct stat), else 0. */
static int works_in(int pid, const void *arg)
{
	const struct stat *st = arg;
	struct stat cwd;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
	return stat(path, &cwd) == 0 && cwd.st_dev == st->st_dev && cwd.st_ino == st->st_ino;
}

/*
 * Nor the caller's working directory, which no process of the sandbox
 * holds (a caller's directory on a file system to be unmounted would stay
 * busy for the sandbox's life), its CPU affinity or the soft limits it
 * lowered for itself:
 * a caller pinned to one CPU, with a file size of 1 MiB (its own files,
 * the library's database among them, stay below), 48 open files and a
 * 256 KiB stack, still gets a sandbox whose commands may run on every CPU
 * the caller could, write a 4 MiB file and have the kernel's default open
 * files and stack (or the hard limit, if lower).
 */
START_TEST(process_state_not_the_callers)
{
	char cwd[PATH_MAX];
	struct stat cwd_st;
	struct out o;
	struct rlimit fsize, nofile, stack;
	char want_cpus[sizeof(o.text)] = "", want_nofile[32], want_stack[32], want_fsize[32];
	hangar_ctx *ctx;
	cpu_set_t one;
	FILE *f;

	if (!caller(_i))
		return;
	snprintf(cwd, sizeof(cwd), "%s/callers-cwd-%d", state_dir, _i);
	ck_assert_int_eq(mkdir(cwd, 0755), 0);
	ck_assert_int_eq(chdir(cwd), 0);
	ck_assert_int_eq(stat(".", &cwd_st), 0);
	f = fopen("/proc/self/status", "re");
	ck_assert(f != NULL);
	while (fgets(o.text, sizeof(o.text), f))
		if (!strncmp(o.text, "Cpus_allowed_list:", 18))
			memcpy(want_cpus, o.text, sizeof(want_cpus));
	fclose(f);
	ck_assert_msg(want_cpus[0], "no Cpus_allowed_list in /proc/self/status");
	ulimit_text(RLIMIT_NOFILE, 1024, 1, want_nofile, sizeof(want_nofile));
	ulimit_text(RLIMIT_STACK, 8u << 20, 1024, want_stack, sizeof(want_stack));
	ulimit_text(RLIMIT_FSIZE, RLIM_INFINITY, 1024, want_fsize, sizeof(want_fsize));
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &fsize), 0);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	ck_assert_int_eq(getrlimit(RLIMIT_STACK, &stack), 0);
	fsize.rlim_cur = 1 << 20;
	nofile.rlim_cur = 48;
	stack.rlim_cur = 256 << 10;
	ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &fsize), 0);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &nofile), 0);
	ck_assert_int_eq(setrlimit(RLIMIT_STACK, &stack), 0);
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);

	ctx = new_ctx();
	for (int k = 0; k < 2; k++) {
		hangar_sandbox *sb = create(ctx, k ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF);

		ck_assert_msg(sum_below(jail_of(sb), works_in, &cwd_st) == 0, "a process of the sandbox holds the caller's %s",
			      cwd);
		sh(sb, "user", "grep Cpus_allowed_list /proc/self/status", &o);
		ck_assert_msg(!strcmp(o.text, want_cpus), "the sandbox runs on %s, the caller could on %s", o.text,
			      want_cpus);
		expect(sb, "user", "ulimit -n", want_nofile);
		expect(sb, "user", "ulimit -s", want_stack);
		expect(sb, "user", "ulimit -f", want_fsize);
		expect(sb, "user", "head -c 4194304 /dev/zero > /tmp/f && stat -c %s /tmp/f", "4194304");
		hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- ids: one range per sandbox ------------------------------------------------------ */

struct extent {
	unsigned long inside, outside, count;
};

/* pid's uid_map or gid_map, as the host reads it. */
static int read_map(int pid, const char *name, struct extent *e, int max)
{
	char path[64];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (n < max && fscanf(f, "%lu %lu %lu", &e[n].inside, &e[n].outside, &e[n].count) == 3)
		n++;
	fclose(f);
	return n;
}

/*
 * Two sandboxes of one caller at once: no host id behind one's namespace is
 * behind the other's, but for the caller's own (id 0 inside an
 * unprivileged caller's, which is envd, the caller itself), and neither
 * maps host root.
 */
START_TEST(ids_disjoint)
{
	static const char *const maps[] = { "uid_map", "gid_map" };
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	unsigned self[2];

	if (!caller(_i))
		return;
	self[0] = (unsigned)getuid();
	self[1] = (unsigned)getgid();
	ctx = new_ctx();
	a = create(ctx, HANGAR_NETWORK_OFF);
	b = create(ctx, HANGAR_NETWORK_OFF);
	for (int m = 0; m < 2; m++) {
		struct extent ea[8], eb[8];
		int na = read_map(init_of(a), maps[m], ea, 8), nb = read_map(init_of(b), maps[m], eb, 8);

		ck_assert_int_gt(na, 0);
		ck_assert_int_gt(nb, 0);
		for (int i = 0; i < na; i++) {
			if (_i == 1 && ea[i].outside == self[m] && ea[i].count == 1)
				continue; /* envd: the caller */
			ck_assert_msg(ea[i].outside != 0, "%s maps host root", maps[m]);
			for (int j = 0; j < nb; j++) {
				if (_i == 1 && eb[j].outside == self[m] && eb[j].count == 1)
					continue;
				ck_assert_msg(ea[i].outside + ea[i].count <= eb[j].outside ||
						      eb[j].outside + eb[j].count <= ea[i].outside,
					      "%s: %lu+%lu and %lu+%lu overlap", maps[m], ea[i].outside, ea[i].count,
					      eb[j].outside, eb[j].count);
			}
		}
		if (_i == 1) {
			/* An unprivileged caller with subordinate ids: more than its own uid is mapped. */
			ck_assert_msg(na == 2 && nb == 2, "%s: %d and %d extents (no subordinate ids?)", maps[m], na,
				      nb);
		}
	}
	hangar_sandbox_kill(a);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- processes: a limit for both callers, per sandbox ---------------------------------- */

/* A fork bomb in miniature: n children that wait, then are killed; prints "refused" or "made N". */
#define FORKS(n)                                                                                            \
	"python3 -c \"\n"                                                                                   \
	"import os, signal, time\n"                                                                          \
	"kids = []\n"                                                                                        \
	"refused = 0\n"                                                                                      \
	"for i in range(" #n "):\n"                                                                          \
	"    try:\n"                                                                                         \
	"        pid = os.fork()\n"                                                                          \
	"    except OSError:\n"                                                                              \
	"        refused += 1\n"                                                                             \
	"        continue\n"                                                                                 \
	"    if pid == 0:\n"                                                                                 \
	"        time.sleep(30); os._exit(0)\n"                                                              \
	"    kids.append(pid)\n"                                                                             \
	"for pid in kids:\n"                                                                                 \
	"    os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)\n"                                             \
	"print('refused' if refused else 'made %d' % len(kids))\n\""

/*
 * HANGAR_LOCAL_PIDS=32: forks past it fail inside, as the sandbox's user
 * and as its root, whoever the caller; the sandbox lives on. The metric
 * says 32, and the record says what holds it: the pids cgroup for root,
 * RLIMIT_NPROC for an unprivileged caller, which has none.
 */
START_TEST(process_limit_both_callers)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_sandbox_metric m;
	char rec[8192];
	struct logs l;

	if (!caller(_i))
		return;
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_PIDS", "32"), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sandbox_file(sb, "limits", rec, sizeof(rec));
	if (_i == 0)
		ck_assert_msg(strstr(rec, "\npids v1 ") || strstr(rec, "\npids v2 "), "limits: %s", rec);
	else
		ck_assert_msg(strstr(rec, "\npids rlimit 32\n"), "limits: %s", rec);
	ck_assert_int_eq(hangar_sandbox_metrics(sb, metric_cb, &m), 0);
	ck_assert_uint_eq(m.pids_max, 32);
	ck_assert_msg(m.pids_used >= 1 && m.pids_used < 32, "pids used %u", (unsigned)m.pids_used);
	expect(sb, "user", FORKS(64), "refused");
	expect(sb, "root", FORKS(64), "refused");
	expect(sb, "user", FORKS(8), "made 8");
	if (_i == 0) {
		read_logs(sb, &l);
		ck_assert_msg(strstr(l.text, "process limit of 32 reached"), "logs: %s", l.text);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* Holds 18 processes in its sandbox for 8 seconds. */
static const char hold_18[] = "python3 -c \"\n"
			      "import os, time\n"
			      "kids = []\n"
			      "for i in range(18):\n"
			      "    pid = os.fork()\n"
			      "    if pid == 0:\n"
			      "        time.sleep(8); os._exit(0)\n"
			      "    kids.append(pid)\n"
			      "for pid in kids:\n"
			      "    os.waitpid(pid, 0)\n\"";

/*
 * The limit is each sandbox's own: with 18 processes held in one sandbox,
 * another of the same caller still makes 18 of its own, although together
 * they are past 32.
 */
START_TEST(process_limit_per_sandbox)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_sandbox_metric m = { 0 };
	struct bg_exec h = { .cmd = hold_18 };

	if (!caller(_i))
		return;
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_PIDS", "32"), 0);
	a = create(ctx, HANGAR_NETWORK_OFF);
	b = create(ctx, HANGAR_NETWORK_OFF);
	h.sb = a;
	ck_assert_int_eq(pthread_create(&h.thread, NULL, bg_exec_run, &h), 0);
	for (int tries = 0; tries < 100; tries++) {
		ck_assert_int_eq(hangar_sandbox_metrics(a, metric_cb, &m), 0);
		if (m.pids_used >= 18)
			break;
		usleep(50000);
	}
	ck_assert_msg(m.pids_used >= 18, "the holder has %u processes", (unsigned)m.pids_used);
	expect(b, "user", FORKS(18), "made 18");
	pthread_join(h.thread, NULL);
	ck_assert_int_eq(h.o.exit_code, 0);
	hangar_sandbox_kill(a);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- what does not hold is said ------------------------------------------------------- */

/*
 * An unprivileged caller here has no cgroup it may write: memory and CPU
 * are not limited, and that is what the record, the metric (0 for them),
 * the logs and `hangar sandbox info` say; never a limit that does not hold.
 * A root caller's are all limited.
 */
START_TEST(unlimited_is_said)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_sandbox_metric m;
	char rec[8192], cmd[PATH_MAX * 3], info[4096];
	const char *cli = getenv("HANGAR_CLI");
	struct logs l;
	FILE *p;
	size_t n;

	if (!caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sandbox_file(sb, "limits", rec, sizeof(rec));
	ck_assert_int_eq(hangar_sandbox_metrics(sb, metric_cb, &m), 0);
	read_logs(sb, &l);
	if (cli) {
		snprintf(cmd, sizeof(cmd), "HANGAR_STATE_DIR='%s' '%s' sandbox info %s", state_dir, cli,
			 hangar_sandbox_id(sb));
		p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		n = fread(info, 1, sizeof(info) - 1, p);
		info[n] = '\0';
		ck_assert_int_eq(pclose(p), 0);
	}
	if (_i == 0) {
		ck_assert_msg(!strstr(rec, " none "), "limits: %s", rec);
		ck_assert_uint_eq(m.mem_total_bytes, 2048ull << 20);
		ck_assert_uint_eq(m.cpu_count, 2);
		ck_assert_msg(!strstr(l.text, "not limited"), "logs: %s", l.text);
		if (cli)
			ck_assert_msg(!strstr(info, "not limited"), "info: %s", info);
	} else {
		ck_assert_msg(strstr(rec, "\nmemory none cgroup v") && strstr(rec, "\ncpu none cgroup v"), "limits: %s",
			      rec);
		ck_assert_uint_eq(m.mem_total_bytes, 0);
		ck_assert_uint_eq(m.cpu_count, 0);
		ck_assert_uint_eq(m.pids_max, 512);
		ck_assert_msg(strstr(l.text, "warn: the sandbox's memory is not limited: cgroup v") &&
				      strstr(l.text, "warn: the sandbox's CPU time is not limited: cgroup v") &&
				      !strstr(l.text, "process count is not limited"),
			      "logs: %s", l.text);
		if (cli)
			ck_assert_msg(strstr(info, "memory:    not limited\n") && strstr(info, "cpus:      not limited\n") &&
					      strstr(info, " of 512\n"),
				      "info: %s", info);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- HANGAR_LOCAL_CGROUP ------------------------------------------------------------- */

static int create_fails(const char *cgroup, const char *says)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = new_ctx();
	int rc = hangar_ctx_set(ctx, "HANGAR_LOCAL_CGROUP", cgroup);

	if (rc == 0) {
		o.provider = "local";
		o.network = HANGAR_NETWORK_OFF;
		rc = hangar_sandbox_create(&sb, ctx, &o);
	}
	ck_assert_msg(rc != 0, "HANGAR_LOCAL_CGROUP=%s was taken", cgroup);
	ck_assert_msg(strstr(hangar_error_last()->message, "HANGAR_LOCAL_CGROUP") &&
			      strstr(hangar_error_last()->message, says),
		      "HANGAR_LOCAL_CGROUP=%s: %d %s", cgroup, rc, hangar_error_last()->message);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return rc;
}

/*
 * A cgroup the jail could not use is refused when the provider opens,
 * naming the setting and the fault: not a cgroup v2 directory, holding
 * processes, or given none of the controllers. (Which is all this host,
 * with every controller on v1, can offer: a cgroup v2 that limits is tested
 * against the model in tests/unit/test-jail-limits.c.)
 */
START_TEST(cgroup_setting_checked)
{
	char v2[64], procs[96], pid[16];
	pid_t child;

	ck_assert_int_eq(create_fails("/tmp", "not a cgroup v2 directory under /sys/fs/cgroup/"), HANGAR_ECONFIG);
	ck_assert_int_eq(create_fails("/sys/fs/cgroup/../../tmp", "no \"..\""), HANGAR_ECONFIG);
	if (access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) == 0)
		ck_assert_int_eq(create_fails("/sys/fs/cgroup/memory", "is not a cgroup v2 directory"), HANGAR_ECONFIG);
	if (geteuid() != 0 || access("/sys/fs/cgroup/unified/cgroup.procs", W_OK) < 0)
		return;
	snprintf(v2, sizeof(v2), "/sys/fs/cgroup/unified/hangar-lim-%d", (int)getpid());
	ck_assert_int_eq(mkdir(v2, 0755), 0);
	ck_assert_int_eq(create_fails(v2, "has none of the memory, pids and cpu controllers"), HANGAR_ECONFIG);
	/* With a process in it. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", v2);
	snprintf(pid, sizeof(pid), "%d", (int)child);
	ck_assert_int_eq(write_file(procs, pid), 0);
	ck_assert_int_eq(create_fails(v2, "holds processes"), HANGAR_ECONFIG);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	for (int tries = 0; tries < 100 && rmdir(v2) < 0; tries++)
		usleep(10000);
	ck_assert_int_eq(access(v2, F_OK), -1);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("local-limits");
	TCase *tc = tcase_create("limits");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, memory_cgroup_below_the_callers);
	tcase_add_loop_test(tc, every_process_held, 0, 2);
	tcase_add_loop_test(tc, ids_disjoint, 0, 2);
	tcase_add_loop_test(tc, process_limit_both_callers, 0, 2);
	tcase_add_loop_test(tc, process_limit_per_sandbox, 0, 2);
	tcase_add_loop_test(tc, unlimited_is_said, 0, 2);
	tcase_add_test(tc, cgroup_setting_checked);
	tcase_add_loop_test(tc, ordinary_priority, 0, 2);
	tcase_add_loop_test(tc, umask_not_the_callers, 0, 4);
	tcase_add_loop_test(tc, signals_not_the_callers, 0, 2);
	tcase_add_loop_test(tc, process_state_not_the_callers, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
