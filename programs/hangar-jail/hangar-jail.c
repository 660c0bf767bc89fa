/*
 * hangar-jail: supervises one local sandbox.
 *
 *   hangar-jail -dir STATE_DIR/local/<id> -bwrap PATH -envd PATH -ready-fd FD
 *               -token-fd FD [-daemon]
 *
 * libhangar's local provider starts it with the sandbox's directory already
 * laid out (see libhangar/providers/local/lstate.h). It reads envd's access
 * token from the -token-fd pipe, detaches (-daemon), records its pid in
 * jail.pid, sets up a freezer cgroup for the sandbox, runs hangar-envd inside
 * bubblewrap (passing the ready fd on, so envd tells the library itself when
 * it listens, and handing the token over another pipe), and then waits for
 * one of: bwrap
 * exiting, SIGTERM (kill), or the expiry time in meta.json passing (re-read
 * on SIGHUP, which the library sends after changing it). On any of them it
 * thaws and kills every process of the sandbox, removes its cgroup and
 * removes the sandbox's directory.
 *
 * The token lives only in memory, never on disk: while it waits, the jail
 * serves it on jail.sock to whoever connects with its own uid (or root),
 * which is how the library learns it again after a restart. On ports.sock it
 * exposes the sandbox's TCP ports on the host's loopback when the library
 * asks (ports.c).
 *
 * The jail itself stays outside the freezer cgroup, so it can still tear
 * down a paused sandbox (and answer on jail.sock while it is paused).
 *
 * HANGAR_JAIL_FREEZER=auto|v2|v1|none (environment, default auto) picks the
 * freezer; "none" leaves pausing to SIGSTOP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <net/if.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define TEARDOWN_DEADLINE_MS 10000
#define NET_DEADLINE_MS 5000
#define TOKEN_MAX 1024

static const char *jail_dir, *jail_id;
static char jail_root[PATH_MAX];                            /* the directory holding every sandbox's */
static struct uid_range jail_ids = { 0, 0, -1, 0, 0 }; /* the host ids behind the sandbox's (userns.c) */
static struct limit_cgroups jail_lcg;                       /* memory, pids, cpu */
static pid_t jail_slirp = -1;                               /* network "on": slirp4netns, the sandbox's way out */
static char cg_kind[8] = "none";
static char cg_path[PATH_MAX];
/* envd's access token: in memory only, locked out of swap where allowed, wiped on exit. */
static char token[TOKEN_MAX + 1];
static size_t token_len;

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("hangar-jail: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* 1 when the jail makes and maps the sandbox's user namespace itself (else bwrap makes one of the caller alone). */
static int own_userns(void)
{
	return jail_ids.slot >= 0 || jail_ids.sub;
}

/* ---- the freezer cgroup --------------------------------------------------------- */

/* Tries to make parent/hangar/<id> with the freezer file `file`. */
static int try_cgroup(const char *kind, const char *parent, const char *file)
{
	char hangar[PATH_MAX], path[PATH_MAX], probe[PATH_MAX + 32];

	if (snprintf(hangar, sizeof(hangar), "%s/hangar", parent) >= (int)sizeof(hangar) ||
	    snprintf(path, sizeof(path), "%s/%s", hangar, jail_id) >= (int)sizeof(path))
		return -1;
	if (mkdir(hangar, 0755) < 0 && errno != EEXIST)
		return -1;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	snprintf(probe, sizeof(probe), "%s/%s", path, file);
	if (access(probe, W_OK) < 0) {
		rmdir(path);
		return -1;
	}
	snprintf(cg_kind, sizeof(cg_kind), "%s", kind);
	snprintf(cg_path, sizeof(cg_path), "%s", path);
	return 0;
}

/* The jail's own cgroup v2 path ("0::/x/y" in /proc/self/cgroup), or NULL. */
static char *own_v2_cgroup(void)
{
	char *text = lstate_read_file("/proc/self/cgroup", 1 << 20, NULL), *line, *save = NULL, *res = NULL;

	if (!text)
		return NULL;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "0::", 3)) {
			res = strdup(line + 3);
			break;
		}
	free(text);
	return res;
}

static void setup_cgroup(void)
{
	const char *want = getenv("HANGAR_JAIL_FREEZER");
	const char *v2root = NULL;

	if (!want || !*want)
		want = "auto";
	if (exists("/sys/fs/cgroup/cgroup.controllers"))
		v2root = "/sys/fs/cgroup";
	else if (exists("/sys/fs/cgroup/unified/cgroup.controllers"))
		v2root = "/sys/fs/cgroup/unified"; /* hybrid hierarchy */
	if (v2root && (!strcmp(want, "auto") || !strcmp(want, "v2"))) {
		char *own = own_v2_cgroup();
		const char *base = limits_v2_base(); /* HANGAR_JAIL_CGROUP: a cgroup that can hand limits down */
		char parent[PATH_MAX];

		if (base) {
			if (try_cgroup("v2", base, "cgroup.freeze") == 0) {
				free(own);
				return;
			}
			say("cannot make the sandbox's cgroup in HANGAR_JAIL_CGROUP %s: %s", base, strerror(errno));
		}
		if (own && strcmp(own, "/") != 0 &&
		    snprintf(parent, sizeof(parent), "%s%s", v2root, own) < (int)sizeof(parent) &&
		    try_cgroup("v2", parent, "cgroup.freeze") == 0) {
			free(own);
			return;
		}
		free(own);
		if (try_cgroup("v2", v2root, "cgroup.freeze") == 0)
			return;
	}
	if ((!strcmp(want, "auto") || !strcmp(want, "v1")) && exists("/sys/fs/cgroup/freezer/tasks") &&
	    try_cgroup("v1", "/sys/fs/cgroup/freezer", "freezer.state") == 0)
		return;
	if (strcmp(want, "none") != 0)
		say("no freezer cgroup available; pausing will stop processes with SIGSTOP");
}

static void thaw(void)
{
	char path[PATH_MAX + 32];

	if (!strcmp(cg_kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", cg_path);
		lstate_write_str(path, "0");
	} else if (!strcmp(cg_kind, "v1")) {
		snprintf(path, sizeof(path), "%s/freezer.state", cg_path);
		lstate_write_str(path, "THAWED");
	}
}

/* ---- processes -------------------------------------------------------------- */

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Reaps every exited child; returns 1 when `watch` was among them. */
static int reap(pid_t watch, int *status)
{
	int got = 0, st;
	pid_t p;

	while ((p = waitpid(-1, &st, WNOHANG)) > 0)
		if (p == watch) {
			got = 1;
			if (status)
				*status = st;
		}
	return got;
}

/* Waits until pid has exited (it is our child or reparented to us), with a deadline. */
static void wait_gone(pid_t pid, int64_t deadline)
{
	int fd = pidfd_open_(pid);

	if (fd < 0)
		return; /* already gone */
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) != 0)
			break;
	}
	close(fd);
}

/* The first child of pid (bwrap's child is the sandbox's pid 1), or 0. */
static pid_t ns_init(pid_t pid)
{
	char path[64];
	FILE *f;
	int child = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%d", &child) != 1)
		child = 0;
	fclose(f);
	return child;
}

/* SIGKILLs every process still in the sandbox's cgroup and waits for each. */
static void kill_cgroup_members(int64_t deadline)
{
	char path[PATH_MAX + 32];

	if (!strcmp(cg_kind, "none"))
		return;
	if (!strcmp(cg_kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.kill", cg_path);
		lstate_write_str(path, "1"); /* absent before Linux 5.14: the loop below does it */
	}
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg_path);
	while (mono_ms() < deadline) {
		FILE *f = fopen(path, "re");
		int pid, any = 0;

		if (!f)
			return;
		while (fscanf(f, "%d", &pid) == 1) {
			any = 1;
			kill(pid, SIGKILL);
			reap(0, NULL);
			wait_gone(pid, deadline);
			reap(0, NULL);
		}
		fclose(f);
		if (!any)
			return;
	}
}

/* ---- the token --------------------------------------------------------------------- */

void forget_token(void)
{
	explicit_bzero(token, sizeof(token));
	token_len = 0;
}

/* Reads the token from fd (a pipe from the library) until EOF, and closes fd. 0 or -1. */
static int read_token(int fd)
{
	size_t n = 0;

	mlock(token, sizeof(token)); /* best effort: RLIMIT_MEMLOCK may forbid it */
	atexit(forget_token);
	for (;;) {
		ssize_t r = read(fd, token + n, sizeof(token) - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			say("cannot read the token: %s", strerror(errno));
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > TOKEN_MAX) {
			say("the token is longer than %d bytes", TOKEN_MAX);
			break;
		}
	}
	close(fd);
	while (n > 0 && n <= TOKEN_MAX && (token[n - 1] == '\n' || token[n - 1] == '\r'))
		n--;
	if (n == 0 || n > TOKEN_MAX || memchr(token, '\0', n)) {
		if (n > 0 && n <= TOKEN_MAX)
			say("the token is malformed");
		else if (n == 0)
			say("the token is empty");
		forget_token();
		return -1;
	}
	token[n] = '\0';
	token_len = n;
	return 0;
}

/*
 * A pipe holding the token, for envd: returns its read end (close-on-exec,
 * cleared in the child before it runs bwrap), or -1. The write end is closed
 * here, so envd reads EOF right after the token.
 */
static int token_pipe(void)
{
	int p[2];
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	/* A pipe holds far more than TOKEN_MAX bytes: this write never blocks. */
	n = write(p[1], token, token_len);
	close(p[1]);
	if (n != (ssize_t)token_len) {
		close(p[0]);
		errno = n < 0 ? errno : EIO;
		return -1;
	}
	return p[0];
}

/* dir/name as a listening unix socket only this uid may use (0600, made under umask 077),
 * non-blocking; -1 with errno on failure. */
int listen_unix(const char *in, const char *name, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, r;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", in, name) >= (int)sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(sa.sun_path);
	old = umask(0077);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(sa.sun_path, 0600) < 0 || listen(fd, backlog) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/*
 * Answers pending connections on jail.sock (a bounded batch, so a flood
 * cannot starve the signals): the token to a peer with our own uid or root,
 * nothing to anyone else. Never blocks: accept is non-blocking, and the token
 * fits a fresh socket's buffer in one write.
 */
static void serve_token(int lfd)
{
	uid_t me = geteuid();

	for (int batch = 0; batch < 64; batch++) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				say("jail.sock: accept: %s", strerror(errno));
			return;
		}
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) &&
		    cred.uid == me) {
			ssize_t n = send(c, token, token_len, MSG_NOSIGNAL | MSG_DONTWAIT);

			(void)n; /* a peer that went away or reads nothing gets nothing more */
		} else {
			say("jail.sock: refused a connection from uid %d", len == sizeof(cred) ? (int)cred.uid : -1);
		}
		close(c);
	}
}

/* ---- the sandbox ------------------------------------------------------------------- */

void add(struct argv *a, const char *s)
{
	if (a->n + 2 > a->cap) {
		a->cap = a->cap ? a->cap * 2 : 64;
		a->v = realloc(a->v, a->cap * sizeof(char *));
		if (!a->v) {
			say("out of memory");
			exit(1);
		}
	}
	a->v[a->n] = strdup(s);
	if (!a->v[a->n]) {
		say("out of memory");
		exit(1);
	}
	a->v[++a->n] = NULL;
}

void argv_free(struct argv *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

void addf(struct argv *a, const char *fmt, ...)
{
	char buf[PATH_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	add(a, buf);
}

/* /bin, /lib, ... as the host has them: symlinks into /usr (merged /usr) or directories. */
static void add_usr_links(struct argv *a)
{
	static const char *const names[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char host[64], target[PATH_MAX];
		struct stat st;
		ssize_t n;

		snprintf(host, sizeof(host), "/%s", names[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(host, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			add(a, "--symlink");
			add(a, target);
			add(a, host);
		} else if (S_ISDIR(st.st_mode)) {
			add(a, "--ro-bind");
			add(a, host);
			add(a, host);
		}
	}
}

/*
 * As root, the child builds what bwrap binds in a mount namespace of its
 * own, at STAGE (a directory every uid can cross, unlike a state directory
 * under /root, which the sandbox's unprivileged ids could not reach):
 *   STAGE/etc   its /etc (etc.c)
 *   STAGE/envd  hangar-envd
 *   STAGE/rw    a tmpfs of disk_mb: workspace/, home/, tmp/, so a sandbox
 *               writes nothing to the host's disk and runs out of space at
 *               its limit (ENOSPC)
 * The sources are opened first (O_PATH), since STAGE may hide the state
 * directory. Unprivileged, bwrap binds the sandbox's directory directly.
 */
#define STAGE "/run"
#define STAGE_FALLBACK "/tmp"

struct sbfds {
	int etc, envd, seccomp;
};

static void close_fds(struct sbfds *f)
{
	int *all[] = { &f->etc, &f->envd, &f->seccomp };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}

static int open_in_dir(const char *rest, int flags)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", jail_dir, rest) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW | flags);
}

/* The sources of the stage, and (with filter) the seccomp filter. */
static int open_fds(struct sbfds *f, const char *envd, int filter)
{
	f->etc = open_in_dir("rootfs/etc", O_DIRECTORY);
	f->envd = open(envd, O_PATH | O_CLOEXEC);
	f->seccomp = filter ? seccomp_filter_fd() : -2;
	if (f->etc < 0 || f->envd < 0 || f->seccomp == -1) {
		int e = errno;

		close_fds(f);
		errno = e;
		return -1;
	}
	return 0;
}

static const char *stage(void)
{
	struct stat st;

	return stat(STAGE, &st) == 0 && S_ISDIR(st.st_mode) ? STAGE : STAGE_FALLBACK;
}

static int bind_fd(int fd, const char *at, const char *name, int file)
{
	char src[64], dst[PATH_MAX];

	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	snprintf(dst, sizeof(dst), "%s/%s", at, name);
	if (file) {
		int m = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (m < 0)
			return -1;
		close(m);
	} else if (mkdir(dst, 0755) < 0) {
		return -1;
	}
	return mount(src, dst, NULL, MS_BIND, NULL);
}

static int mkdir_owned(const char *at, const char *name, unsigned owner, mode_t mode)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", at, name);
	if (mkdir(path, mode) < 0 || chown(path, owner, owner) < 0 || chmod(path, mode) < 0)
		return -1;
	return 0;
}

/*
 * In the child: the stage (see above), as host root before it enters the
 * sandbox's user namespace, or (an unprivileged caller's subordinate ids) as
 * root of that namespace, which owns the mount namespace made here. 0, or -1
 * with a message said.
 */
static int build_stage(const char *envd, const struct uid_range *r, unsigned disk_mb)
{
	const char *at = stage();
	char rw[PATH_MAX], opts[64];
	struct sbfds f = { -1, -1, -1 };
	/*
	 * The sandbox's envd (its namespace's root) and root (top of that
	 * namespace, root of the commands' namespace below) as the stage's
	 * builder names them: inside already (sub), or on the host.
	 */
	unsigned sroot = r->sub ? 0 : r->base, top = sroot + uid_range_top(r);

	/* Opened in the new namespace (a bind takes its source from the caller's own mounts). */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    open_fds(&f, envd, 0) < 0 ||
	    mount("hangar", at, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0) {
		say("cannot make a mount namespace: %s", strerror(errno));
		return -1;
	}
	if (bind_fd(f.etc, at, "etc", 0) < 0 ||
	    bind_fd(f.envd, at, "envd", 1) < 0) {
		say("cannot stage the sandbox's files: %s", strerror(errno));
		close_fds(&f);
		return -1;
	}
	close_fds(&f);
	snprintf(rw, sizeof(rw), "%s/rw", at);
	snprintf(opts, sizeof(opts), "mode=0755,size=%um", disk_mb);
	if (mkdir(rw, 0755) < 0 || mount("hangar", rw, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0 ||
	    mkdir_owned(rw, "workspace", sroot + 1000, 0755) < 0 || mkdir_owned(rw, "home", sroot + 1000, 0755) < 0 ||
	    mkdir_owned(rw, "tmp", top, 01777) < 0 || mkdir_owned(rw, "root", top, 0700) < 0) {
		say("cannot make the sandbox's %u MB file system: %s", disk_mb, strerror(errno));
		return -1;
	}
	return 0;
}

/* /proc entries container runtimes hide: kernel memory, keys, timers, scheduler internals. */
/* /proc entries that change the kernel rather than one process: bound read-only. */
static const char *const proc_read_only[] = { "/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs",
					      "/proc/sysrq-trigger" };
static const char *const proc_masked[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
					   "/proc/sysrq-trigger" };

static int build_bwrap_argv(struct argv *a, const char *bwrap, const char *envd, const struct lmeta *m,
			    int ready_fd, int envd_token_fd, int envd_listen_fd, const struct sbfds *f, int userns, unsigned uid,
			    unsigned gid, unsigned shm_mb, unsigned disk_mb, int info_fd, int block_fd, int inner_fd,
			    unsigned top)
{
	static const char *const caps[] = {
		/*
		 * What envd needs as root to run commands and write files as
		 * other users; capabilities in the sandbox's own user namespace
		 * only, which give nothing over the host's files.
		 */
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
		"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE",
	};
	const char *envd_inside = envd;
	char src[PATH_MAX], rw[PATH_MAX];
	int r;

	/* Where bwrap finds the sandbox's own files: the stage, or its directory. */
	if (userns) {
		snprintf(src, sizeof(src), "%s", stage());
		snprintf(rw, sizeof(rw), "%s/rw", stage());
	} else {
		snprintf(src, sizeof(src), "%s", jail_dir);
		rw[0] = '\0';
	}

	add(a, bwrap);
	add(a, "--unshare-pid");
	add(a, "--unshare-ipc");
	add(a, "--unshare-uts");
	add(a, "--unshare-cgroup-try");
	/* "on": slirp4netns gives it a way out (net.c). With userns, the child made it (own_netns). */
	if (!userns)
		add(a, "--unshare-net");
	if (info_fd >= 0) {
		add(a, "--info-fd");
		addf(a, "%d", info_fd);
		add(a, "--block-fd");
		addf(a, "%d", block_fd);
	}
	if (!userns) {
		/* Unprivileged: a user namespace mapping the caller to itself, and none below it. */
		add(a, "--unshare-user");
		add(a, "--disable-userns");
		add(a, "--uid");
		addf(a, "%u", uid);
		add(a, "--gid");
		addf(a, "%u", gid);
	} else {
		/* bwrap runs as root of the namespace the child made (see spawn_bwrap). */
		add(a, "--cap-drop");
		add(a, "ALL");
		for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
			add(a, "--cap-add");
			add(a, caps[i]);
		}
	}
	add(a, "--die-with-parent");
	add(a, "--new-session");
	add(a, "--seccomp");
	addf(a, "%d", f->seccomp);
	add(a, "--ro-bind");
	add(a, "/usr");
	add(a, "/usr");
	add_usr_links(a);
	add(a, "--ro-bind");
	addf(a, userns ? "%s/etc" : "%s/rootfs/etc", src);
	add(a, "/etc");
	r = etc_build(jail_dir, m->id, uid, gid, m->network, a);
	if (r < 0)
		return r;
	add(a, "--proc");
	add(a, "/proc");
	for (size_t i = 0; i < sizeof(proc_masked) / sizeof(proc_masked[0]); i++)
		if (exists(proc_masked[i])) {
			add(a, "--ro-bind");
			add(a, "/dev/null");
			add(a, proc_masked[i]);
		}
	/*
	 * Read-only where the kernel's settings are, as container runtimes have
	 * it; the rest stays writable, so that a process can still make itself
	 * the OOM killer's first choice (envd's commands do, so that envd is
	 * the last). The sandbox's own view of each: sysctls answer for the
	 * namespaces of whoever reads them.
	 */
	for (size_t i = 0; i < sizeof(proc_read_only) / sizeof(proc_read_only[0]); i++)
		if (exists(proc_read_only[i])) {
			add(a, "--ro-bind");
			add(a, proc_read_only[i]);
			add(a, proc_read_only[i]);
		}
	add(a, "--dev");
	add(a, "/dev");
	/* bwrap's own /dev/shm is root's alone: a size-limited one for every user. */
	add(a, "--perms");
	add(a, "01777");
	add(a, "--size");
	addf(a, "%llu", (unsigned long long)shm_mb << 20);
	add(a, "--tmpfs");
	add(a, "/dev/shm");
	/* Made explicitly: bwrap would make parents of mount points 0700. */
	add(a, "--dir");
	add(a, "/home");
	add(a, "--dir");
	add(a, "/run");
	if (userns) {
		/* The sandbox's root's, on the size-limited file system. */
		add(a, "--bind");
		addf(a, "%s/root", rw);
		add(a, "/root");
	} else {
		add(a, "--perms");
		add(a, "0700");
		add(a, "--dir");
		add(a, "/root");
	}
	if (userns) {
		add(a, "--bind");
		addf(a, "%s/workspace", rw);
		add(a, "/workspace");
		add(a, "--bind");
		addf(a, "%s/home", rw);
		add(a, "/home/user");
		add(a, "--bind");
		addf(a, "%s/tmp", rw);
		add(a, "/tmp");
	} else {
		/*
		 * One uid, no stage: bubblewrap mounts them, each a file system of
		 * disk_mb (it cannot bind from one it made), so nothing the
		 * sandbox writes reaches the host's disk.
		 */
		static const char *const at[][2] = { { "/workspace", "0755" }, { "/home/user", "0755" },
						     { "/tmp", "01777" } };

		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			add(a, "--perms");
			add(a, at[i][1]);
			add(a, "--size");
			addf(a, "%llu", (unsigned long long)disk_mb << 20);
			add(a, "--tmpfs");
			add(a, at[i][0]);
		}
	}
	add(a, "--dir");
	add(a, "/var");
	add(a, "--symlink");
	add(a, "../tmp");
	add(a, "/var/tmp");
	/*
	 * envd's binary, in a small read-only file system for envd alone, where
	 * nothing can be planted, not even by a file operation envd makes for
	 * root. Its socket is not in the sandbox at all: the jail binds it on
	 * the host's side (envd.sock in the sandbox's directory, see main).
	 */
	add(a, "--perms");
	add(a, "0700");
	add(a, "--size");
	add(a, "65536");
	add(a, "--tmpfs");
	add(a, "/run/hangar");
	if (userns || strncmp(envd, "/usr/", 5) != 0) {
		envd_inside = "/run/hangar/hangar-envd";
		add(a, "--ro-bind");
		if (userns)
			addf(a, "%s/envd", src);
		else
			add(a, envd);
		add(a, envd_inside);
	}
	add(a, "--remount-ro");
	add(a, "/run/hangar");
	add(a, "--hostname");
	add(a, m->id);
	add(a, "--chdir");
	add(a, "/workspace");
	add(a, "--clearenv");
	add(a, "--setenv");
	add(a, "PATH");
	add(a, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	add(a, envd_inside);
	add(a, "-listen-fd");
	addf(a, "%d", envd_listen_fd);
	add(a, "-token-fd");
	addf(a, "%d", envd_token_fd);
	add(a, "-user");
	add(a, "user");
	add(a, "-workdir");
	add(a, "/workspace");
	add(a, "-env");
	add(a, "CI=true");
	for (char **e = m->env; e && *e; e++) {
		add(a, "-env");
		add(a, *e);
	}
	add(a, "-ready-fd");
	addf(a, "%d", ready_fd);
	if (userns) {
		/* Commands run in the namespace below envd's, as another uid (userns.c). */
		add(a, "-userns-fd");
		addf(a, "%d", inner_fd);
		add(a, "-root-id");
		addf(a, "%u", top);
	} else {
		/* One uid for everything: root would be envd itself (userns.c). */
		add(a, "-single-uid");
	}
	return 0;
}

/* Reads one byte from fd (EOF or an error: -1). */
static int wait_byte(int fd)
{
	char c;
	ssize_t n;

	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 ? 0 : -1;
}

/*
 * The child's half of the user namespace: unshare, let the parent write the
 * maps, become root of the namespace.
 */
static int enter_userns(int to_parent, int from_parent)
{
	if (unshare(CLONE_NEWUSER) < 0) {
		say("cannot make a user namespace: %s", strerror(errno));
		return -1;
	}
	if (write(to_parent, "u", 1) != 1 || wait_byte(from_parent) < 0) {
		say("the jail did not map the user namespace");
		return -1;
	}
	if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0) {
		say("cannot become root of the sandbox's user namespace: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * As root of the sandbox's user namespace: makes the commands' namespace
 * below it (envd's -userns-fd, on descriptor at), then forbids any further
 * namespace below (the count is the namespace's own; only CAP_SYS_RESOURCE
 * in it could raise it, and the sandbox keeps no such capability and sees
 * /proc read-only).
 */
static int inner_userns(const struct uid_range *r, int at)
{
	int fd = uid_range_inner(uid_range_top(r));

	if (fd < 0 || dup2(fd, at) < 0) {
		say("cannot make the commands' user namespace: %s", strerror(errno));
		return -1;
	}
	close(fd);
	fd = open("/proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0", 1) != 1)
		say("cannot limit nested user namespaces (the seccomp filter still refuses them): %s",
		    strerror(errno));
	if (fd >= 0)
		close(fd);
	return 0;
}

/*
 * As root of the sandbox's user namespace: the sandbox's network namespace,
 * made here rather than by bwrap so that it can be set up as that root
 * before anything runs in it: loopback up (as bwrap would), and every port
 * free to bind. Commands run in the namespace below, where
 * CAP_NET_BIND_SERVICE does not reach this network namespace: without it
 * the sandbox's root could no longer serve on port 80. 0, or -1 said.
 */
static int own_netns(void)
{
	struct ifreq ifr = { 0 };
	int s;

	if (unshare(CLONE_NEWNET) < 0) {
		say("cannot make the sandbox's network namespace: %s", strerror(errno));
		return -1;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0 ||
	    (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(s, SIOCSIFFLAGS, &ifr)) < 0) {
		say("cannot bring the sandbox's loopback up: %s", strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	close(s);
	/* Best effort (before Linux 4.11 there is no such setting): the sandbox works without it. */
	if (lstate_write_str("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0") < 0)
		say("cannot open ports below 1024 to the sandbox's users: %s", strerror(errno));
	return 0;
}

/*
 * Runs bwrap; keep[] (the token pipe, the sandbox's descriptors) are the
 * close-on-exec descriptors it keeps. With range, the child first moves into
 * a user namespace of its own whose ids the parent maps to the range.
 */
static pid_t spawn_bwrap(char **argv, const int *keep, size_t nkeep, const struct uid_range *range,
			 const char *envd, unsigned disk_mb, int inner_at)
{
	char procs[PATH_MAX + 32];
	int up[2] = { -1, -1 }, down[2] = { -1, -1 };
	pid_t pid;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg_path);
	if (range && (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0))
		return -1;
	pid = fork();
	if (pid > 0 && range) {
		int ok;

		close(up[1]);
		close(down[0]);
		ok = wait_byte(up[0]) == 0;
		if (ok && uid_range_map(pid, range) < 0) {
			say("cannot map the sandbox's user namespace to %u..%u: %s", range->base,
			    range->base + range->count - 1, strerror(errno));
			ok = 0;
		}
		/* Either way the child goes on: on failure it reads EOF and exits. */
		if (ok && write(down[1], "g", 1) != 1)
			ok = 0;
		close(up[0]);
		close(down[1]);
		return pid;
	}
	if (pid != 0)
		return pid;
	forget_token(); /* envd gets it from the pipe; bwrap has no use for it */
	for (size_t i = 0; i < nkeep; i++)
		if (fcntl(keep[i], F_SETFD, 0) < 0) {
			say("cannot pass descriptor %d on: %s", keep[i], strerror(errno));
			_exit(126);
		}
	/* The child joins the freezer cgroup first, so bwrap and everything under it is in it. */
	if (strcmp(cg_kind, "none") != 0) {
		char self[32];

		snprintf(self, sizeof(self), "%d", (int)getpid());
		if (lstate_write_str(procs, self) < 0) {
			say("cannot join cgroup %s: %s", cg_path, strerror(errno));
			_exit(126);
		}
	}
	if (limits_join(&jail_lcg, getpid()) < 0) {
		say("cannot join the sandbox's limit cgroups: %s", strerror(errno));
		_exit(126);
	}
	if (range && range->sub) {
		close(up[0]);
		close(down[1]);
		/*
		 * newuidmap maps only a process the caller owns, as /proc shows
		 * it: dumpable (no token is left here; bwrap's exec decides
		 * afresh). The stage is built inside, where the mounts are ours.
		 */
		prctl(PR_SET_DUMPABLE, 1);
		if (enter_userns(up[1], down[0]) < 0 || build_stage(envd, range, disk_mb) < 0 ||
		    inner_userns(range, inner_at) < 0 || own_netns() < 0)
			_exit(126);
		close(up[1]);
		close(down[0]);
	} else if (range) {
		close(up[0]);
		close(down[1]);
		if (build_stage(envd, range, disk_mb) < 0 || enter_userns(up[1], down[0]) < 0 ||
		    inner_userns(range, inner_at) < 0 || own_netns() < 0)
			_exit(126);
		close(up[1]);
		close(down[0]);
	}
	{
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL); /* commands in the sandbox must not inherit SIG_IGN */
	}
	execv(argv[0], argv);
	say("cannot run %s: %s", argv[0], strerror(errno));
	_exit(127);
}

/* Arms the timer for the expiry in meta.json; returns 0 when it already passed. */
static int arm_timer(int tfd)
{
	struct lmeta m;
	struct itimerspec its = { 0 };
	int r = lstate_meta_read(jail_dir, &m);

	if (r < 0) {
		if (r == -ENOENT)
			return 0; /* the directory is gone: nothing left to supervise */
		say("cannot read meta.json: %s", strerror(-r));
		return 1; /* keep the current timer */
	}
	lstate_meta_clear(&m);
	if (m.expires_at_us > 0 && !m.paused) {
		if (m.expires_at_us <= now_us())
			return 0;
		its.it_value.tv_sec = m.expires_at_us / 1000000;
		its.it_value.tv_nsec = (m.expires_at_us % 1000000) * 1000;
	}
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
	return 1;
}

static void jail_teardown(pid_t bwrap, int bwrap_done)
{
	int64_t deadline = mono_ms() + TEARDOWN_DEADLINE_MS;
	char path[PATH_MAX];
	int r;

	/* Nothing is served from here on. */
	forget_token();
	/* A frozen task cannot die: thaw first. */
	thaw();
	if (!bwrap_done && bwrap > 0) {
		pid_t init = ns_init(bwrap);
		int fd = init > 0 ? pidfd_open_(init) : -1;

		/*
		 * The pid namespace's init (bwrap's child) exits only once every
		 * process in the namespace is dead and reaped: waiting for it
		 * waits for the whole sandbox, with or without a cgroup.
		 */
		if (fd >= 0)
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		kill(bwrap, SIGKILL);
		wait_gone(bwrap, deadline);
		if (fd >= 0) {
			struct pollfd p = { fd, POLLIN, 0 };
			int64_t left = deadline - mono_ms();

			if (left > 0)
				poll(&p, 1, (int)left);
			close(fd);
		}
	}
	ports_stop();
	kill_cgroup_members(deadline);
	if (jail_slirp > 0) {
		kill(jail_slirp, SIGKILL);
		wait_gone(jail_slirp, deadline);
	}
	reap(0, NULL);
	limits_remove(&jail_lcg);
	if (strcmp(cg_kind, "none") != 0) {
		char *slash;

		if (rmdir(cg_path) < 0 && errno != ENOENT)
			say("cannot remove cgroup %s: %s", cg_path, strerror(errno));
		/* And .../hangar once empty, which would keep a delegated base from being removed. */
		slash = strrchr(cg_path, '/');
		if (slash) {
			*slash = '\0';
			rmdir(cg_path); /* fails while another sandbox is in it: left for the last one */
		}
	}
	snprintf(path, sizeof(path), "%s", jail_dir);
	r = lstate_rmtree_at(AT_FDCWD, path);
	if (r < 0)
		say("cannot remove %s: %s", path, strerror(-r));
	uid_range_release(jail_root, jail_id, &jail_ids);
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

static void read_limits(struct limits *l)
{
	l->memory_mb = env_uint("HANGAR_JAIL_MEMORY_MB", 2048, 16, 1u << 22);
	l->pids = env_uint("HANGAR_JAIL_PIDS", 512, 8, 1u << 22);
	l->cpus = env_uint("HANGAR_JAIL_CPUS", 2, 1, 1024);
	l->disk_mb = env_uint("HANGAR_JAIL_DISK_MB", 1024, 1, 1u << 24);
	/* /dev/shm: a quarter of the memory, as its pages count there too. */
	l->shm_mb = l->memory_mb / 4 ? l->memory_mb / 4 : 1;
}

/*
 * As root: claims the sandbox's uid range. Unprivileged: the caller's
 * subordinate ids when it has them (the caller is root inside). Then makes
 * the seccomp filter. *uid and *gid: `user`'s ids as the sandbox sees them.
 */
static int prepare_sandbox(struct sbfds *f, struct uid_range *r, unsigned *uid, unsigned *gid, const char *envd)
{
	int rc;

	if (geteuid() == 0) {
		rc = uid_range_claim(jail_root, jail_id, r);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		*uid = *gid = 1000;
	} else if (uid_range_subids(r) == 0) {
		if (!r->count) {
			errno = ENOSPC; /* every slot of the caller's subordinate ids is another sandbox's (said) */
			return -1;
		}
		*uid = *gid = 1000;
	} else {
		/* Said, so `hangar sandbox logs` tells why root is refused here. */
		say("sandbox %s has one uid, %u, for envd and every user (no subordinate ids for it: see "
		    "HANGAR_LOCAL_SUBIDS in hangar(1)): commands and file operations as root are refused",
		    jail_id, (unsigned)geteuid());
		*uid = (unsigned)geteuid();
		*gid = (unsigned)getegid();
	}
	f->seccomp = seccomp_filter_fd();
	return f->seccomp < 0 ? -1 : 0;
}

/*
 * slirp4netns configures the sandbox's network as root of its user
 * namespace, which a sandbox of one uid (an unprivileged caller without
 * subordinate ids) does not have: network on is refused there, said, rather
 * than given as loopback alone. 0, or -1 with errno.
 */
static int single_uid_network(const struct lmeta *m)
{
	if (!m->network || own_userns() || geteuid() == 0)
		return 0;
	say("network on needs subordinate ids for uid %u (/etc/subuid and /etc/subgid, and HANGAR_LOCAL_SUBIDS on): "
	    "ask for network off or set HANGAR_LOCAL_NETWORK=off",
	    (unsigned)geteuid());
	errno = EOPNOTSUPP;
	return -1;
}

static void usage(void)
{
	fputs("usage: hangar-jail -dir DIR -bwrap PATH -envd PATH -ready-fd FD -token-fd FD [-daemon]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *bwrap = NULL, *envd = NULL;
	int ready_fd = -1, token_fd = -1, envd_token = -1, daemon_ = 0, sfd, tfd, lfd, pfd, efd, status = 0, done = 0;
	int inner_fd;
	struct argv av = { 0 };
	struct sbfds fds = { -1, -1, -1 };
	int net_info[2] = { -1, -1 }, net_block[2] = { -1, -1 };
	const char *slirp_path = getenv("HANGAR_JAIL_SLIRP4NETNS");
	unsigned uid, gid;
	struct limits lim;
	char pidtext[32], path[PATH_MAX];
	struct lmeta m;
	sigset_t set;
	pid_t child;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-daemon"))
			daemon_ = 1;
		else if (i + 1 >= argc)
			usage();
		else if (!strcmp(argv[i], "-dir"))
			jail_dir = argv[++i];
		else if (!strcmp(argv[i], "-bwrap"))
			bwrap = argv[++i];
		else if (!strcmp(argv[i], "-envd"))
			envd = argv[++i];
		else if (!strcmp(argv[i], "-ready-fd"))
			ready_fd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-token-fd"))
			token_fd = atoi(argv[++i]);
		else
			usage();
	}
	if (!jail_dir || !bwrap || !envd || ready_fd < 0 || fcntl(ready_fd, F_GETFD) < 0 || token_fd < 0 ||
	    token_fd == ready_fd || fcntl(token_fd, F_GETFD) < 0)
		usage();
	jail_id = strrchr(jail_dir, '/');
	jail_id = jail_id ? jail_id + 1 : jail_dir;
	if (!lstate_valid_id(jail_id) || (size_t)(jail_id - jail_dir) >= sizeof(jail_root) || jail_id - jail_dir < 2) {
		say("%s does not end in a sandbox id", jail_dir);
		return 2;
	}
	memcpy(jail_root, jail_dir, (size_t)(jail_id - jail_dir - 1));

	if (daemon_) {
		/* Detach: the caller reaps this process at once; the sandbox lives on. */
		pid_t p = fork();

		if (p < 0) {
			say("fork: %s", strerror(errno));
			return 1;
		}
		if (p > 0)
			_exit(0);
		setsid();
	}
	/*
	 * Read here, after the fork: memory locks are not inherited. Not
	 * dumpable: no core file (nor same-uid ptrace) can carry the token off.
	 */
	prctl(PR_SET_DUMPABLE, 0);
	if (read_token(token_fd) < 0)
		return 2;
	/* Processes orphaned inside the sandbox come to us, to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
	if (sfd < 0 || tfd < 0) {
		say("signalfd/timerfd: %s", strerror(errno));
		return 1;
	}

	snprintf(pidtext, sizeof(pidtext), "%d\n", (int)getpid());
	snprintf(path, sizeof(path), "%s/jail.pid", jail_dir);
	if (lstate_write_atomic(path, pidtext, strlen(pidtext), 0600) < 0) {
		say("cannot write %s: %s", path, strerror(errno));
		return 1;
	}
	if (lstate_meta_read(jail_dir, &m) < 0) {
		say("cannot read %s/meta.json", jail_dir);
		lstate_rmtree_at(AT_FDCWD, jail_dir);
		return 1;
	}
	lfd = listen_unix(jail_dir, "jail.sock", 64);   /* where the library asks for the token again */
	if (lfd < 0) {
		say("cannot listen on %s/jail.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	pfd = ports_listen(jail_dir);
	if (pfd < 0) {
		say("cannot listen on %s/ports.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	/*
	 * envd's socket, bound here on the host's side of the sandbox: no path
	 * inside leads to it, so nothing in the sandbox (root, or a file
	 * operation made for root) can move it, replace it or put a link in
	 * its place. envd gets the listening descriptor.
	 */
	efd = listen_unix(jail_dir, "envd.sock", 512);
	if (efd < 0) {
		say("cannot listen on %s/envd.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	envd_token = token_pipe();
	if (envd_token < 0) {
		say("cannot make the token pipe: %s", strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	setup_cgroup();
	{
		char text[PATH_MAX + 16];

		if (!strcmp(cg_kind, "none"))
			snprintf(text, sizeof(text), "none\n");
		else
			snprintf(text, sizeof(text), "%s %s\n", cg_kind, cg_path);
		snprintf(path, sizeof(path), "%s/cgroup", jail_dir);
		lstate_write_atomic(path, text, strlen(text), 0600);
	}
	read_limits(&lim);
	if (m.network && geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0) {
		/*
		 * Refused, as the library refuses it before starting a jail: never
		 * loopback alone in place of what was asked for (nor the host's
		 * network).
		 */
		say("network on needs /dev/net/tun, which uid %u cannot open: sandbox %s not started",
		    (unsigned)geteuid(), jail_id);
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	if (m.network) {
		if (!slirp_path || !*slirp_path)
			slirp_path = "/usr/bin/slirp4netns";
		if (access(slirp_path, X_OK) < 0) {
			say("network on needs slirp4netns: %s: %s", slirp_path, strerror(errno));
			lstate_meta_clear(&m);
			jail_teardown(-1, 1);
			return 1;
		}
		if (pipe2(net_info, O_CLOEXEC) < 0 || pipe2(net_block, O_CLOEXEC) < 0) {
			say("pipe: %s", strerror(errno));
			lstate_meta_clear(&m);
			jail_teardown(-1, 1);
			return 1;
		}
	}
	limits_setup(&jail_lcg, &lim, jail_id, !strcmp(cg_kind, "v2") ? cg_path : NULL);
	snprintf(path, sizeof(path), "%s/limits", jail_dir);
	if (limits_record(jail_dir, &jail_lcg, &lim) < 0)
		say("cannot write %s: %s", path, strerror(errno));
	/* A descriptor number for the commands' namespace, which the child puts there. */
	inner_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (inner_fd < 0 || prepare_sandbox(&fds, &jail_ids, &uid, &gid, envd) < 0 || single_uid_network(&m) < 0 ||
	    build_bwrap_argv(&av, bwrap, envd, &m, ready_fd, envd_token, efd, &fds, own_userns(), uid, gid,
			     lim.shm_mb, lim.disk_mb, net_info[1], net_block[0], inner_fd,
			     own_userns() ? uid_range_top(&jail_ids) : 0) < 0) {
		say("cannot prepare sandbox %s: %s", jail_id, strerror(errno));
		lstate_meta_clear(&m);
		argv_free(&av);
		close_fds(&fds);
		jail_teardown(-1, 1);
		return 1;
	}
	{
		int keep[6] = { envd_token, fds.seccomp, efd };
		size_t nkeep = 3;

		if (m.network) {
			keep[nkeep++] = net_info[1];
			keep[nkeep++] = net_block[0];
		}
		keep[nkeep++] = ready_fd;
		child = spawn_bwrap(av.v, keep, nkeep, own_userns() ? &jail_ids : NULL, envd, lim.disk_mb, inner_fd);
	}
	close(inner_fd);
	close(efd); /* envd's now */
	lstate_meta_clear(&m);
	argv_free(&av);
	close_fds(&fds);
	if (net_info[1] >= 0) {
		close(net_info[1]);
		close(net_block[0]);
		if (child > 0)
			jail_slirp = net_setup(net_info[0], slirp_path, mono_ms() + NET_DEADLINE_MS);
		/*
		 * net_info[0] stays open for the jail's life: bubblewrap writes its
		 * --info-fd in several writes, the last ones after the child's pid
		 * that net_setup waited for, and a closed pipe there would kill it
		 * with SIGPIPE. A few hundred bytes: the pipe holds them unread.
		 */
		if (child > 0 && jail_slirp < 0) {
			close(net_block[1]);
			close(ready_fd);
			close(envd_token);
			jail_teardown(child, 0);
			return 1;
		}
		/* The network is ready: bwrap may start envd. */
		if (child > 0 && write(net_block[1], "n", 1) != 1)
			say("cannot release bwrap: %s", strerror(errno));
		close(net_block[1]);
	}
	/* Only envd keeps the ready pipe: the library sees EOF if it dies first. */
	close(ready_fd);
	close(envd_token);
	if (child < 0) {
		say("fork: %s", strerror(errno));
		jail_teardown(-1, 1);
		return 1;
	}
	if (!arm_timer(tfd)) {
		jail_teardown(child, 0);
		return 0;
	}

	while (!done) {
		struct pollfd p[4] = { { sfd, POLLIN, 0 }, { tfd, POLLIN, 0 }, { lfd, POLLIN, 0 }, { pfd, POLLIN, 0 } };

		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
				continue;
			switch (si.ssi_signo) {
			case SIGCHLD:
				if (reap(child, &status)) {
					if (WIFEXITED(status))
						say("sandbox %s ended: bwrap exited with %d", jail_id, WEXITSTATUS(status));
					else if (WIFSIGNALED(status))
						say("sandbox %s ended: bwrap killed by signal %d", jail_id, WTERMSIG(status));
					jail_teardown(child, 1);
					return 0;
				}
				break;
			case SIGHUP:
				if (!arm_timer(tfd))
					done = 1;
				break;
			default:
				say("sandbox %s killed", jail_id);
				done = 1;
				break;
			}
		}
		if (!done && (p[2].revents & POLLIN))
			serve_token(lfd);
		if (!done && (p[3].revents & POLLIN))
			ports_serve(pfd, child);
		if (!done && (p[1].revents & POLLIN)) {
			uint64_t ticks;

			if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
				continue;
			/* The library may have moved the expiry since: ask meta.json again. */
			if (!arm_timer(tfd)) {
				say("sandbox %s expired", jail_id);
				done = 1;
			}
		}
	}
	jail_teardown(child, 0);
	return 0;
}
