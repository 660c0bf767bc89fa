/*
 * A sandbox's resource limits: memory, processes and CPU.
 *
 * cgroup v2 first, in the sandbox's v2 cgroup (the freezer's, from
 * cgroup.c), which is BASE/hangar/ID: BASE is HANGAR_JAIL_CGROUP (the
 * library's HANGAR_LOCAL_CGROUP) when cgroup.c put it there, else the
 * jail's own v2 cgroup or the hierarchy's root. A controller reaches the
 * sandbox only when BASE and BASE/hangar both list it in
 * cgroup.subtree_control, and the kernel lets a cgroup hand controllers to
 * its children only while it holds no processes itself (the root excepted:
 * "no internal processes", Documentation/admin-guide/cgroup-v2.rst). The
 * jail's own cgroup usually holds the jail and its caller, so it cannot be
 * BASE for limits: HANGAR_LOCAL_CGROUP names a delegated cgroup that holds
 * none. The jail enables what it needs in BASE and BASE/hangar and never
 * writes above BASE.
 *
 * Otherwise the cgroup v1 controller of that name, in a cgroup nested under
 * the jail's own cgroup of that controller (its line in /proc/self/cgroup),
 * so a sandbox stays inside whatever limit the caller itself is under:
 * <v1 root>/<controller><own path>/hangar/<id>. Only when that is not
 * writable does it go at the hierarchy's root, and the jail says so.
 *
 * Without a pids cgroup, a sandbox in the jail's own user namespaces (a root
 * caller, or an unprivileged one with subordinate ids: userns.c) still gets
 * a process limit: the commands' user namespace is made with RLIMIT_NPROC at
 * the limit, and since Linux 5.14 the kernel counts every process of a user
 * namespace against the limit its creator had (ucounts), whatever their uids
 * or the ids other sandboxes have. envd, bwrap and every command count; a
 * fork past it fails with EAGAIN. Memory and CPU have no such fallback.
 *
 * The jail records what holds in dir/limits, one "key value" per line, for
 * the library (usage in `hangar sandbox info`, limit events in `hangar
 * sandbox logs`, clean-up after a jail that died):
 *   memory_mb N / pids N / cpus N / disk_mb N
 *   memory v1|v2 PATH / pids v1|v2 PATH / cpu v1|v2 PATH   a cgroup holds it
 *   pids rlimit N                                         RLIMIT_NPROC holds it
 *   memory none WHY / pids none WHY / cpu none WHY        nothing holds it
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

static const char *const controllers[LIMIT_CONTROLLERS] = { "memory", "pids", "cpu" };
static const char *const what[LIMIT_CONTROLLERS] = { "memory", "process count", "CPU time" };

static int real_mkdir(const char *path)
{
	return mkdir(path, 0755) < 0 ? -errno : 0;
}

/* 1 when the kernel counts RLIMIT_NPROC per user namespace (ucounts, Linux 5.14). */
static int kernel_ucounts(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return 0;
	return major > 5 || (major == 5 && minor >= 14);
}

struct limits_sys limits_sys = {
	.v1_root = "/sys/fs/cgroup",
	.self_cgroup = "/proc/self/cgroup",
	.write = lstate_write_str,
	.mkdir = real_mkdir,
	.own_userns = uid_range_planned,
	.ucounts = kernel_ucounts,
};

/* why = the reason a limit does not hold (a path in it may be cut short). */
static void __attribute__((format(printf, 3, 4))) note(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
}

static int has(const char *cg, const char *file)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	return access(path, W_OK) == 0;
}

static int set(const char *cg, const char *file, const char *value)
{
	char path[PATH_MAX + 64];
	int r;

	snprintf(path, sizeof(path), "%s/%s", cg, file);
	r = limits_sys.write(path, value);
	if (r < 0)
		say("cannot set %s to %s: %s", path, value, strerror(-r));
	return r;
}

/* 1 when word is one of the space-separated words of dir/file (cgroup.controllers, cgroup.subtree_control). */
static int listed(const char *dir, const char *file, const char *word)
{
	char path[PATH_MAX + 64], *text, *tok, *save = NULL;
	int found = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	text = lstate_read_file(path, 4096, NULL);
	if (!text)
		return 0;
	for (tok = strtok_r(text, " \t\n", &save); tok && !found; tok = strtok_r(NULL, " \t\n", &save))
		found = !strcmp(tok, word);
	free(text);
	return found;
}

/* out = path without its last component. 0, or -1 when there is none. */
static int parent_of(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');

	if (!slash || slash == path || (size_t)(slash - path) >= size)
		return -1;
	memcpy(out, path, (size_t)(slash - path));
	out[slash - path] = '\0';
	return 0;
}

/* 1 when dir is a cgroup v2 other than the root (which has no cgroup.type) holding processes. */
static int holds_processes(const char *dir)
{
	char path[PATH_MAX + 32], *procs;
	int held;

	snprintf(path, sizeof(path), "%s/cgroup.type", dir);
	if (access(path, F_OK) < 0)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	procs = lstate_read_file(path, 4096, NULL);
	held = procs && *procs;
	free(procs);
	return held;
}

/*
 * "+controller" into dir/cgroup.subtree_control; on failure, why says what
 * the kernel refused. Never in a cgroup that holds processes (the root
 * excepted): the kernel refuses memory there but takes pids and cpu, which
 * make it a threaded domain whose children no process can join, the
 * sandbox's and any other of the caller's.
 */
static int v2_hand_down(const char *dir, const char *controller, char *why, size_t wsize)
{
	char path[PATH_MAX + 32], op[32];
	int r;

	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", dir);
	snprintf(op, sizeof(op), "+%s", controller);
	r = holds_processes(dir) ? -EBUSY : limits_sys.write(path, op);
	if (r == -EBUSY)
		note(why, wsize,
			 "cgroup v2: %s holds processes, so the kernel hands no controller down from it "
			 "(set HANGAR_LOCAL_CGROUP to a delegated cgroup that holds none)",
			 dir);
	else if (r < 0)
		note(why, wsize, "cgroup v2: cannot enable %s in %s: %s", controller, path, strerror(-r));
	return r;
}

/*
 * v2: hands controller down to cg (BASE/hangar/ID) from BASE, where it must
 * be delegated already: enables it in BASE's, then BASE/hangar's,
 * cgroup.subtree_control as needed. 0, or -1 with why said.
 */
static int v2_enable(const char *cg, const char *controller, const char *file, char *why, size_t wsize)
{
	char mid[PATH_MAX], base[PATH_MAX];

	if (parent_of(cg, mid, sizeof(mid)) < 0 || parent_of(mid, base, sizeof(base)) < 0) {
		note(why, wsize, "cgroup v2: %s is not BASE/hangar/ID", cg);
		return -1;
	}
	if (!listed(mid, "cgroup.controllers", controller)) {
		if (!listed(base, "cgroup.controllers", controller)) {
			note(why, wsize, "cgroup v2: %s is not delegated to %s (not in its cgroup.controllers)",
				 controller, base);
			return -1;
		}
		if (v2_hand_down(base, controller, why, wsize) < 0)
			return -1;
	}
	if (!listed(mid, "cgroup.subtree_control", controller) && v2_hand_down(mid, controller, why, wsize) < 0)
		return -1;
	if (!has(cg, file)) {
		note(why, wsize, "cgroup v2: %s has no %s although its parent hands %s down", cg, file,
			 controller);
		return -1;
	}
	return 0;
}

/* Whether controller is one of list's comma-separated names (list is cut up). */
static int names_controller(char *list, const char *controller)
{
	char *tok, *save = NULL;

	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!strcmp(tok, controller))
			return 1;
	return 0;
}

int proc_cgroup(const char *file, const char *controller, char *out, size_t size)
{
	char *text = lstate_read_file(file, 1 << 20, NULL), *line, *save = NULL;
	int r = -1;

	if (!text)
		return -1;
	/* Lines "N:controller,controller:/path"; cgroup v2's is "0::/path". */
	for (line = strtok_r(text, "\n", &save); line && r < 0; line = strtok_r(NULL, "\n", &save)) {
		char *list = strchr(line, ':'), *path = list ? strchr(list + 1, ':') : NULL;

		if (!path)
			continue;
		*list++ = '\0';
		*path++ = '\0';
		if (!(controller ? names_controller(list, controller) : !strcmp(line, "0") && !*list))
			continue;
		/* A path outside the jail's cgroup namespace shows as "/.."; it names nothing under a hierarchy. */
		if (path[0] == '/' && !strstr(path, "..") && strlen(path) < size) {
			snprintf(out, size, "%s", path);
			r = 0;
		}
	}
	free(text);
	return r;
}

int own_cgroup(const char *controller, char *out, size_t size)
{
	return proc_cgroup(limits_sys.self_cgroup, controller, out, size);
}

/* Makes parent/hangar/id into out. 0 or -errno. */
static int make_under(const char *parent, const char *id, char *out, size_t size)
{
	char hangar[PATH_MAX];
	int r = -ENOENT;

	if (snprintf(hangar, sizeof(hangar), "%s/hangar", parent) >= (int)sizeof(hangar) ||
	    snprintf(out, size, "%s/%s", hangar, id) >= (int)size)
		return -ENAMETOOLONG;
	/* ENOENT: another jail removed an empty hangar/ between the two mkdirs (limits_remove); again. */
	for (int tries = 0; tries < 3 && r == -ENOENT; tries++) {
		r = limits_sys.mkdir(hangar);
		if (r < 0 && r != -EEXIST)
			return r;
		r = limits_sys.mkdir(out);
		if (r == -EEXIST)
			r = 0;
	}
	return r;
}

/* v1: the sandbox's cgroup of controller, under the jail's own one when it can be. 0, or -1 with why said. */
static int v1_make(const char *controller, const char *id, char *out, size_t size, char *why, size_t wsize)
{
	char hier[PATH_MAX], own[PATH_MAX], nested[PATH_MAX * 2];
	int r;

	snprintf(hier, sizeof(hier), "%s/%s", limits_sys.v1_root, controller);
	if (access(hier, F_OK) < 0) {
		note(why, wsize, "cgroup v1: no %s hierarchy at %s", controller, hier);
		return -1;
	}
	if (own_cgroup(controller, own, sizeof(own)) < 0)
		snprintf(own, sizeof(own), "/");
	if (strcmp(own, "/") != 0) {
		snprintf(nested, sizeof(nested), "%s%s", hier, own);
		r = make_under(nested, id, out, size);
		if (r == 0)
			return 0;
		if (make_under(hier, id, out, size) == 0) {
			say("cannot make the sandbox's %s cgroup under the jail's own, %s (%s): it is at the "
			    "hierarchy's root instead, outside the limits the caller is under",
			    controller, nested, strerror(-r));
			return 0;
		}
	} else if ((r = make_under(hier, id, out, size)) == 0) {
		return 0;
	}
	note(why, wsize, "cgroup v1: cannot make %s/hangar/%s: %s", strcmp(own, "/") ? nested : hier, id,
		 strerror(-r));
	return -1;
}

static void apply(struct limit_cgroups *c, int i, const struct limits *l)
{
	const char *cg = c->path[i];
	int v2 = c->v2[i];
	char v[64];

	switch (i) {
	case 0:
		snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_mb << 20);
		if (v2) {
			set(cg, "memory.max", v);
			if (has(cg, "memory.swap.max"))
				set(cg, "memory.swap.max", "0");
		} else {
			set(cg, "memory.limit_in_bytes", v);
			if (has(cg, "memory.memsw.limit_in_bytes"))
				set(cg, "memory.memsw.limit_in_bytes", v);
		}
		break;
	case 1:
		snprintf(v, sizeof(v), "%u", l->pids);
		set(cg, "pids.max", v);
		break;
	case 2:
		if (v2) {
			snprintf(v, sizeof(v), "%u 100000", l->cpus * 100000);
			set(cg, "cpu.max", v);
		} else {
			set(cg, "cpu.cfs_period_us", "100000");
			snprintf(v, sizeof(v), "%u", l->cpus * 100000);
			set(cg, "cpu.cfs_quota_us", v);
		}
		break;
	}
}

const char *limits_v2_base(void)
{
	const char *base = getenv("HANGAR_JAIL_CGROUP");

	/* The library checked it (a cgroup2 directory under /sys/fs/cgroup holding no processes). */
	return base && base[0] == '/' && !strstr(base, "..") && strlen(base) < PATH_MAX - 64 ? base : NULL;
}

/* 1 when path is base or below it. */
static int below(const char *path, const char *base)
{
	size_t n = strlen(base);

	while (n > 1 && base[n - 1] == '/')
		n--;
	return !strncmp(path, base, n) && (path[n] == '/' || path[n] == '\0');
}

void limits_setup(struct limit_cgroups *c, const struct limits *l, const char *id, const char *v2_cgroup)
{
	static const char *const v2_files[LIMIT_CONTROLLERS] = { "memory.max", "pids.max", "cpu.max" };
	const char *base = limits_v2_base();
	char unlimited[64] = "";

	memset(c, 0, sizeof(*c));
	uid_range_nproc = 0;
	if (v2_cgroup && !*v2_cgroup)
		v2_cgroup = NULL;
	if (base && (!v2_cgroup || !below(v2_cgroup, base)))
		say("HANGAR_JAIL_CGROUP is %s, but the sandbox's cgroup v2 is %s: its limits cannot come from there",
		    base, v2_cgroup ? v2_cgroup : "none");
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		char v2why[512] = "cgroup v2: the sandbox has no cgroup v2 of its own", v1why[512];

		if (v2_cgroup && (has(v2_cgroup, v2_files[i]) ||
				  v2_enable(v2_cgroup, controllers[i], v2_files[i], v2why, sizeof(v2why)) == 0)) {
			snprintf(c->path[i], sizeof(c->path[i]), "%s", v2_cgroup);
			c->v2[i] = 1;
			apply(c, i, l);
			continue;
		}
		if (v1_make(controllers[i], id, c->path[i], sizeof(c->path[i]), v1why, sizeof(v1why)) == 0) {
			apply(c, i, l);
			continue;
		}
		c->path[i][0] = '\0';
		note(c->why[i], sizeof(c->why[i]), "%s; %s", v2why, v1why);
		if (i == 1 && limits_sys.own_userns() && limits_sys.ucounts()) {
			c->nproc = l->pids; /* recorded as such: no need to say more */
			continue;
		}
		if (i == 1)
			note(c->why[i] + strlen(c->why[i]), sizeof(c->why[i]) - strlen(c->why[i]), "; %s",
			     limits_sys.own_userns()
				     ? "RLIMIT_NPROC: this kernel counts it per uid, not per user namespace"
				     : "RLIMIT_NPROC: the sandbox has no user namespace of the jail's to hold it");
		snprintf(unlimited + strlen(unlimited), sizeof(unlimited) - strlen(unlimited), "%s%s",
			 *unlimited ? ", " : "", what[i]);
	}
	/* One short line (the reasons are long, and in the record): the log's tail is what a failed create shows. */
	if (*unlimited)
		say("not limited in this sandbox: %s (`hangar sandbox logs` says why)", unlimited);
	/* For uid_range_inner, which the jail's child calls when it makes the commands' namespace. */
	uid_range_nproc = c->nproc;
}

int limits_join(const struct limit_cgroups *c)
{
	char path[PATH_MAX + 32];

	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		int r;

		if (!c->path[i][0] || c->v2[i])
			continue; /* v2: the freezer's cgroup, joined already */
		/* The calling thread, the process's only one, moving itself: no wait for the kernel (cgroup.c). */
		snprintf(path, sizeof(path), "%s/tasks", c->path[i]);
		r = limits_sys.write(path, "0");
		if (r < 0)
			return errno = -r, -1;
	}
	return 0;
}

void limits_remove(const struct limit_cgroups *c)
{
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		char parent[PATH_MAX];

		if (!c->path[i][0] || c->v2[i])
			continue;
		if (rmdir(c->path[i]) < 0 && errno != ENOENT)
			say("cannot remove cgroup %s: %s", c->path[i], strerror(errno));
		/* hangar/ too once empty, so it never keeps the caller's own cgroup from going away. */
		else if (parent_of(c->path[i], parent, sizeof(parent)) == 0)
			rmdir(parent);
	}
}

int limits_record(const char *dir, const struct limit_cgroups *c, const struct limits *l)
{
	char text[4 * PATH_MAX + 4096], path[PATH_MAX];
	size_t n;

	n = (size_t)snprintf(text, sizeof(text), "memory_mb %u\npids %u\ncpus %u\ndisk_mb %u\n", l->memory_mb,
			     l->pids, l->cpus, l->disk_mb);
	for (int i = 0; i < LIMIT_CONTROLLERS && n < sizeof(text); i++) {
		if (c->path[i][0])
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s %s %s\n", controllers[i],
					      c->v2[i] ? "v2" : "v1", c->path[i]);
		else if (i == 1 && c->nproc)
			n += (size_t)snprintf(text + n, sizeof(text) - n, "pids rlimit %u\n", c->nproc);
		else
			n += (size_t)snprintf(text + n, sizeof(text) - n, "%s none %.*s\n", controllers[i],
					      (int)strcspn(c->why[i], "\n"), c->why[i][0] ? c->why[i] : "unknown");
	}
	if (n >= sizeof(text))
		return -ENAMETOOLONG;
	snprintf(path, sizeof(path), "%s/limits", dir);
	return lstate_write_atomic(path, text, n, 0644);
}

/* The sandbox's limits come from the library (HANGAR_LOCAL_*, passed as HANGAR_JAIL_*). */
static unsigned env_uint(const char *name, unsigned dflt, unsigned min, unsigned max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		say("%s=\"%s\" is out of range (%u..%u); using %u", name, v, min, max, dflt);
		return dflt;
	}
	return (unsigned)n;
}

void read_limits(struct limits *l)
{
	l->memory_mb = env_uint("HANGAR_JAIL_MEMORY_MB", 2048, 16, 1u << 22);
	l->pids = env_uint("HANGAR_JAIL_PIDS", 512, 8, 1u << 22);
	l->cpus = env_uint("HANGAR_JAIL_CPUS", 2, 1, 1024);
	l->disk_mb = env_uint("HANGAR_JAIL_DISK_MB", 1024, 1, 1u << 24);
	/* /dev/shm: a quarter of the memory, as its pages count there too. */
	l->shm_mb = l->memory_mb / 4 ? l->memory_mb / 4 : 1;
}

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_CLASS_RT 1
#define IOPRIO_CLASS_SHIFT 13

/*
 * The sandbox runs no higher than the host's ordinary priority, whatever
 * its caller's: a real-time policy, a negative nice value or the real-time
 * I/O class, inherited, would let a program inside starve the host of CPU
 * or disk, and RLIMIT_RTPRIO or RLIMIT_NICE above 0 would let it take them
 * (its namespaces' capabilities count for nothing here). So the jail, first
 * thing, leaves them for SCHED_OTHER, nice 0, the I/O class nice implies
 * and limits of 0, and every process it starts inherits that. A lower
 * priority the caller chose (SCHED_BATCH or SCHED_IDLE, a positive nice,
 * the idle I/O class) stays. An oom_score_adj below 0 goes up to 0: written
 * with CAP_SYS_RESOURCE, that also resets the floor below which a process
 * may not lower it again; without, the caller's floor stays (hangar(1),
 * "The sandbox's priority"). 0, or -1 said: a sandbox that would run above
 * the host's ordinary priority is not started.
 */
int limits_ordinary_priority(void)
{
	static const struct rlimit none = { 0, 0 };
	struct sched_param zero = { 0 };
	int policy = sched_getscheduler(0), nice, io;
	char adj[16] = "";
	ssize_t n = -1;
	int fd;

	if (policy < 0) {
		say("cannot read the scheduling policy: %s", strerror(errno));
		return -1;
	}
	policy &= ~SCHED_RESET_ON_FORK;
	if ((policy == SCHED_FIFO || policy == SCHED_RR || policy == SCHED_DEADLINE) &&
	    sched_setscheduler(0, SCHED_OTHER, &zero) < 0) {
		say("cannot leave the caller's real-time scheduling policy: %s", strerror(errno));
		return -1;
	}
	errno = 0;
	nice = getpriority(PRIO_PROCESS, 0);
	if (errno == 0 && nice < 0 && setpriority(PRIO_PROCESS, 0, 0) < 0) {
		say("cannot leave the caller's nice value %d for 0: %s", nice, strerror(errno));
		return -1;
	}
	io = (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
	if (io >= 0 && io >> IOPRIO_CLASS_SHIFT == IOPRIO_CLASS_RT &&
	    syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, 0) < 0) {
		say("cannot leave the caller's real-time I/O class: %s", strerror(errno));
		return -1;
	}
	if (setrlimit(RLIMIT_RTPRIO, &none) < 0 || setrlimit(RLIMIT_NICE, &none) < 0) {
		say("cannot set RLIMIT_RTPRIO and RLIMIT_NICE to 0: %s", strerror(errno));
		return -1;
	}
	fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC);
	if (fd >= 0 && (n = read(fd, adj, sizeof(adj) - 1)) > 0 && atoi(adj) < 0 &&
	    pwrite(fd, "0", 1, 0) != 1) {
		say("cannot leave the caller's oom_score_adj %d for 0: %s", atoi(adj), strerror(errno));
		close(fd);
		return -1;
	}
	if (fd >= 0)
		close(fd);
	return 0;
}

/* A soft limit the caller lowered below the kernel's default: raised back to it, or to the hard limit if lower. */
static int soft_at_least(int resource, rlim_t floor)
{
	struct rlimit r;

	if (getrlimit(resource, &r) < 0)
		return -1;
	if (floor > r.rlim_max)
		floor = r.rlim_max;
	if (r.rlim_cur != RLIM_INFINITY && (floor == RLIM_INFINITY || r.rlim_cur < floor)) {
		r.rlim_cur = floor;
		return setrlimit(resource, &r);
	}
	return 0;
}

/*
 * What else of its caller's process a sandbox would inherit, and should
 * not: a caller pinned to some CPUs would pin every sandbox there (their
 * CPU budget is their cgroup's), and a soft resource limit the caller
 * lowered for itself (a file size, an address space, open files, a stack)
 * would break the sandbox's programs, or the jail's own start (a file size
 * of 1 KiB, 32 open files). So the jail, first thing, may run on every CPU
 * its cgroups allow, and each of these soft limits is at least the
 * kernel's default: unlimited for CPU time, file size, data, address space
 * and file locks, 1024 open files, an 8 MiB stack and 8 MiB of locked
 * memory. A hard limit the caller lowered stays (nothing but
 * CAP_SYS_RESOURCE raises one), and a soft limit is never lowered: a
 * larger one the caller chose stays too. 0, or -1 said.
 */
int limits_not_the_callers(void)
{
	static const struct {
		int resource;
		rlim_t floor;
		const char *name;
	} floors[] = {
		{ RLIMIT_CPU, RLIM_INFINITY, "RLIMIT_CPU" },
		{ RLIMIT_FSIZE, RLIM_INFINITY, "RLIMIT_FSIZE" },
		{ RLIMIT_DATA, RLIM_INFINITY, "RLIMIT_DATA" },
		{ RLIMIT_AS, RLIM_INFINITY, "RLIMIT_AS" },
		{ RLIMIT_LOCKS, RLIM_INFINITY, "RLIMIT_LOCKS" },
		{ RLIMIT_NOFILE, 1024, "RLIMIT_NOFILE" },
		{ RLIMIT_STACK, 8u << 20, "RLIMIT_STACK" },
		{ RLIMIT_MEMLOCK, 8u << 20, "RLIMIT_MEMLOCK" },
	};
	cpu_set_t all;

	for (size_t i = 0; i < sizeof(floors) / sizeof(floors[0]); i++)
		if (soft_at_least(floors[i].resource, floors[i].floor) < 0) {
			say("cannot raise the caller's soft %s: %s", floors[i].name, strerror(errno));
			return -1;
		}
	/* Every CPU there may be: the kernel keeps those the cgroups' cpusets allow. */
	memset(&all, 0xff, sizeof(all));
	if (sched_setaffinity(0, sizeof(all), &all) < 0) {
		say("cannot leave the caller's CPU affinity: %s", strerror(errno));
		return -1;
	}
	return 0;
}
