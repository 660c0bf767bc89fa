/*
 * The local provider: each sandbox is a bubblewrap jail on this machine with
 * hangar-envd as its first process, supervised by hangar-jail so that it
 * outlives the process that created it. Not a kernel boundary: the sandbox
 * shares the host's kernel (HANGAR_CAP_KERNEL_ISOLATION is never claimed).
 *
 * Layout and file formats: lstate.h. Every change to meta.json is made under
 * an exclusive flock() on the sandbox's lock file; the jail only reads it
 * (on SIGHUP, and when its expiry timer fires).
 *
 * envd's access token never touches disk: create hands it to the jail over a
 * pipe, the jail hands it to envd over another, and a later connect() asks
 * the jail for it on jail.sock.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"
#include "util/clock.h"
#include "lstate.h"
#include "tokens.h"
#include "usage.h"

/*
 * create: hangar-envd listening. A start is well under a second alone, but a
 * burst of creates on a small machine queues behind one another (user
 * namespace, cgroups, /etc, slirp4netns each): room for a hundred at once.
 */
#define READY_DEADLINE_MS 30000
#define KILL_DEADLINE_MS 15000    /* kill: the jail gone, its directory removed */
#define FREEZE_DEADLINE_MS 10000  /* pause and resume */
#define TOKEN_DEADLINE_MS 5000    /* the jail's answer on jail.sock */
#define PORTS_DEADLINE_MS 5000    /* and on ports.sock */
#define TOKEN_MAX 1024
#define LOG_TAIL_BYTES 2048
#define SOCKET_SUFFIX "/sb-0123456789abcdef/ports.sock" /* the longest of its sockets */
#define DIR_MAX 256               /* a sandbox directory: the socket rule keeps it under 108 */

struct local {
	hangar_ctx *ctx;
	char *root;    /* $HANGAR_STATE_DIR/local */
	char *bwrap;   /* absolute */
	char *envd;    /* absolute, symlinks resolved */
	char *jail;    /* absolute */
	struct ltokens tokens;   /* envd's token of each jail met (tokens.h) */
};

/* ---- small helpers ------------------------------------------------------------------ */

static int executable_file(const char *path)
{
	struct stat st;

	return path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* name as given when it has a slash, else the first executable of that name on PATH. */
static char *resolve_exe(const char *name)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(name, '/'))
		return executable_file(name) ? strdup(name) : NULL;
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n > 0 && snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, name) < (int)sizeof(buf) &&
		    executable_file(buf))
			return strdup(buf);
		path += n;
		if (*path == ':')
			path++;
	}
	return NULL;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* root's length was checked at init, so this always fits DIR_MAX. */
static void sb_dir(char *buf, size_t size, const struct local *l, const char *id)
{
	if (snprintf(buf, size, "%s/%s", l->root, id) >= (int)size)
		buf[0] = '\0';
}

static int pidfd_open_(int pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* Waits for a pidfd to report its process gone; 1 when it did before the deadline. */
static int pidfd_wait(int pidfd, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd p = { pidfd, POLLIN, 0 };
		int64_t left = deadline_ms - clock_mono_ms();
		int r;

		if (left <= 0)
			return 0;
		r = poll(&p, 1, (int)(left > INT_MAX ? INT_MAX : left));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return 0;
	}
}

/* The last bytes of envd.log, made printable, for error messages. */
static void log_tail(int fd, char *out, size_t size)
{
	struct stat st;
	off_t from;
	ssize_t n;
	size_t want = size - 1;

	out[0] = '\0';
	if (fd < 0 || fstat(fd, &st) < 0)
		return;
	if (want > LOG_TAIL_BYTES)
		want = LOG_TAIL_BYTES;
	from = st.st_size > (off_t)want ? st.st_size - (off_t)want : 0;
	n = pread(fd, out, want, from);
	if (n <= 0)
		return;
	out[n] = '\0';
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = ';';
		else if ((unsigned char)out[i] < 0x20)
			out[i] = ' ';
}

/* ---- locking and liveness ------------------------------------------------------------ */

/* Opens and flocks dir/lock; -1 with errno (EWOULDBLOCK with LOCK_NB). */
static int lock_dir(const char *dir, int how)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	while (flock(fd, how) < 0) {
		int e = errno;

		if (e == EINTR)
			continue;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void unlock_dir(int fd)
{
	if (fd >= 0)
		close(fd);
}

enum liveness { ALIVE, CREATING, DEAD };

static enum liveness liveness(const char *dir, const char *id, int *jail_pid)
{
	int pid = lstate_jail_pid(dir), fd;

	*jail_pid = pid;
	if (pid > 0)
		return lstate_is_jail(pid, id) ? ALIVE : DEAD;
	/* No jail yet: a create holding the lock is still starting it. */
	fd = lock_dir(dir, LOCK_SH | LOCK_NB);
	if (fd < 0 && errno == EWOULDBLOCK)
		return CREATING;
	unlock_dir(fd);
	return DEAD;
}

static int v2_wait_events(const char *cg, const char *key, int want, int64_t deadline);

/*
 * Empties and removes a dead sandbox's cgroup: whatever is left in it
 * (processes of a sandbox whose supervisor was SIGKILLed die with it, but
 * not instantly) is thawed, killed and waited for first.
 */
static int remove_cgroup(int v2, const char *cg)
{
	char path[PATH_MAX + 32];
	int64_t deadline = clock_mono_ms() + KILL_DEADLINE_MS;

	if (v2) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", cg);
		lstate_write_str(path, "0");
		snprintf(path, sizeof(path), "%s/cgroup.kill", cg);
		lstate_write_str(path, "1");
		v2_wait_events(cg, "populated ", 0, deadline);
	} else {
		snprintf(path, sizeof(path), "%s/freezer.state", cg);
		lstate_write_str(path, "THAWED");
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		for (int again = 1; again && clock_mono_ms() < deadline;) {
			FILE *f = fopen(path, "re");
			int pid;

			again = 0;
			while (f && fscanf(f, "%d", &pid) == 1) {
				int fd = pidfd_open_(pid);

				again = 1;
				if (fd < 0)
					continue;
				pidfd_signal(fd, SIGKILL);
				pidfd_wait(fd, deadline);
				close(fd);
			}
			if (f)
				fclose(f);
		}
	}
	if (rmdir(cg) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

/* Undoes what a dead jail left behind: a thawed, empty cgroup and the directory. */
static void clean_stale(struct local *l, const char *id)
{
	char dir[DIR_MAX], path[PATH_MAX], *cg;
	int fd, pid;

	ltokens_forget(&l->tokens, id);
	sb_dir(dir, sizeof(dir), l, id);
	fd = lock_dir(dir, LOCK_EX | LOCK_NB);
	if (fd < 0 && errno != ENOENT)
		return; /* someone is working on it */
	/* Re-check under the lock: the jail may have started meanwhile. */
	if (liveness(dir, id, &pid) == ALIVE) {
		unlock_dir(fd);
		return;
	}
	snprintf(path, sizeof(path), "%s/cgroup", dir);
	cg = lstate_read_file(path, PATH_MAX + 8, NULL);
	if (cg && (!strncmp(cg, "v1 /sys/fs/cgroup/", 18) || !strncmp(cg, "v2 /sys/fs/cgroup/", 18))) {
		cg[strcspn(cg, "\n")] = '\0';
		if (strstr(cg, id) && !strstr(cg, "..") && remove_cgroup(cg[1] == '2', cg + 3) < 0)
			hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: cannot remove cgroup %s of dead sandbox %s: %s",
			     cg + 3, id, strerror(errno));
	}
	free(cg);
	usage_remove_cgroups(dir, id);
	hangar_sys_log(l->ctx, HANGAR_LOG_INFO, "local: removing dead sandbox %s", id);
	lstate_rmtree_at(AT_FDCWD, dir);
	unlock_dir(fd);
}

/*
 * Finds a live sandbox: 0 with its jail pid, or HANGAR_EGONE (cleaning up
 * what a dead one left).
 */
static int find_alive(struct local *l, const char *id, char *dir, size_t size, int *jail_pid)
{
	struct stat st;

	if (!lstate_valid_id(id))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no local sandbox %s (not a local sandbox id)", id);
	sb_dir(dir, size, l, id);
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no local sandbox %s (killed, expired or never created)",
					id);
	switch (liveness(dir, id, jail_pid)) {
	case ALIVE:
		return 0;
	case CREATING:
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is still being created", id);
	case DEAD:
		break;
	}
	clean_stale(l, id);
	return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor died)", id);
}

static int meta_failed(const char *id, int r)
{
	if (r == -ENOENT)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id);
	return hangar_sys_error(HANGAR_EOS, 0, -r, "local sandbox %s: cannot read or write meta.json", id);
}

/* ---- describing a sandbox ------------------------------------------------------------- */

/*
 * Connects to the jail's socket name (jail.sock, ports.sock) in dir; the
 * peer must be jail_pid itself. 0 with the socket in *out, or an error set.
 */
static int jail_connect(const char *dir, const char *id, int jail_pid, const char *name, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { TOKEN_DEADLINE_MS / 1000, (TOKEN_DEADLINE_MS % 1000) * 1000 };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, e;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name) >= (int)sizeof(sa.sun_path))
		return hangar_sys_error(HANGAR_EOS, 0, ENAMETOOLONG, "local sandbox %s: socket path too long", id);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return hangar_sys_error(HANGAR_EOS, 0, errno, "socket");
	/* A unix connect() waits only while the backlog is full, and no longer than SO_SNDTIMEO. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		if (e == ENOENT || e == ECONNREFUSED)
			return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor does not "
						"answer)", id);
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, e, "local sandbox %s: cannot reach its supervisor",
					id);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred) ||
	    cred.pid != jail_pid) {
		close(fd);
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (%s is not its "
					"supervisor's)", id, name);
	}
	*out = fd;
	return 0;
}

/*
 * Asks the jail for envd's token on jail.sock: the jail writes it and closes.
 * The answer must come from jail_pid itself, within TOKEN_DEADLINE_MS.
 * 0 with the token in buf (NUL-terminated), or an error set.
 */
static int fetch_token(const char *dir, const char *id, int jail_pid, char *buf /* TOKEN_MAX + 1 */)
{
	int64_t deadline = clock_mono_ms() + TOKEN_DEADLINE_MS;
	size_t have = 0;
	int fd, timed_out = 0, rc = jail_connect(dir, id, jail_pid, "jail.sock", &fd);

	if (rc)
		return rc;
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;
		int r;

		if (left <= 0) {
			timed_out = 1;
			break;
		}
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			timed_out = r == 0;
			break;
		}
		n = read(fd, buf + have, TOKEN_MAX + 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have > TOKEN_MAX)
			break;
	}
	close(fd);
	if (timed_out) {
		explicit_bzero(buf, have);
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0,
					"local sandbox %s: its supervisor did not answer within %d s", id,
					TOKEN_DEADLINE_MS / 1000);
	}
	if (have == 0 || have > TOKEN_MAX || memchr(buf, '\0', have) || memchr(buf, '\n', have) ||
	    memchr(buf, '\r', have)) {
		explicit_bzero(buf, have > TOKEN_MAX ? TOKEN_MAX + 1 : have);
		/* The jail answers nothing once it is tearing the sandbox down. */
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor gave no token)",
					id);
	}
	buf[have] = '\0';
	return 0;
}

/* describe()'s token argument when the description is only listed, never used to connect. */
static const char NO_TOKEN[] = "";

/*
 * Fills out from m; token is envd's, NULL to ask the jail (jail_pid) for it,
 * or NO_TOKEN for a listing, which needs none (so one stuck supervisor
 * cannot hold up or fail a list).
 */
static int describe(struct local *l, const char *dir, const struct lmeta *m, const char *known_token,
		    int jail_pid, hangar_sys_sandbox *out)
{
	char path[PATH_MAX], fetched[TOKEN_MAX + 1];
	const char *token = known_token;
	int r;

	if (!token) {
		/* Remembered from an earlier attach or the create, else asked for once. */
		if (ltokens_recall(&l->tokens, m->id, jail_pid, fetched, sizeof(fetched)) != 0) {
			r = fetch_token(dir, m->id, jail_pid, fetched);
			if (r)
				return r;
			ltokens_keep(&l->tokens, m->id, jail_pid, fetched);
		}
		token = fetched;
	} else if (token != NO_TOKEN) {
		ltokens_keep(&l->tokens, m->id, jail_pid, token);
	}
	/* A sandbox an older jail made has its socket in run/, which was bound inside. */
	snprintf(path, sizeof(path), "%s/envd.sock", dir);
	if (access(path, F_OK) < 0)
		snprintf(path, sizeof(path), "%s/run/envd.sock", dir);
	r = hangar_sys_sandbox_set_id(out, m->id);
	if (!r)
		r = hangar_sys_sandbox_set_envd_socket(out, path);
	if (!r)
		r = hangar_sys_sandbox_set_envd_url(out, "http://localhost");
	if (!r && token != NO_TOKEN)
		r = hangar_sys_sandbox_set_access_token(out, token);
	if (!r)
		r = hangar_sys_sandbox_set_user(out, "user");
	if (!r)
		r = hangar_sys_sandbox_set_template(out, m->template_id);
	if (!r)
		r = hangar_sys_sandbox_set_times(out, m->created_at_us, m->expires_at_us);
	if (!r)
		r = hangar_sys_sandbox_set_state(out, m->paused ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING);
	if (token == fetched)
		explicit_bzero(fetched, sizeof(fetched));
	return r;
}

/* ---- init ------------------------------------------------------------------------------- */

static void l_fini(void *state)
{
	struct local *l = state;

	if (!l)
		return;
	free(l->root);
	free(l->bwrap);
	free(l->envd);
	free(l->jail);
	ltokens_fini(&l->tokens);
	free(l);
}

/*
 * HANGAR_LOCAL_CGROUP, as the jail needs it: a cgroup v2 directory this
 * uid may make cgroups in and hand controllers down from, which holds no
 * process (the kernel hands nothing down from a cgroup that does) and was
 * given at least one of memory, pids and cpu. 0, or an error naming it.
 */
static int check_cgroup_dir(const char *cg)
{
	static const char *const wanted[] = { "memory", "pids", "cpu" };
	char path[PATH_MAX], *text;
	struct statfs fs;
	int any = 0;

	if (statfs(cg, &fs) < 0)
		return hangar_sys_error(HANGAR_ECONFIG, 0, errno, "HANGAR_LOCAL_CGROUP: %s is not a cgroup v2 directory",
					cg);
	if (fs.f_type != CGROUP2_SUPER_MAGIC)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_LOCAL_CGROUP: %s is not a cgroup v2 directory", cg);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg);
	if (access(cg, W_OK) < 0 || access(path, W_OK) < 0)
		return hangar_sys_error(HANGAR_ECONFIG, 0, errno,
					"HANGAR_LOCAL_CGROUP: %s is not delegated to uid %u (it cannot make cgroups there "
					"or write its cgroup.subtree_control)",
					cg, (unsigned)geteuid());
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	text = lstate_read_file(path, 1 << 20, NULL);
	if (!text || text[strspn(text, " \n")]) {
		free(text);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_LOCAL_CGROUP: %s holds processes, and the kernel hands no controller down "
					"from a cgroup that does: move them to a cgroup of their own beside it",
					cg);
	}
	free(text);
	snprintf(path, sizeof(path), "%s/cgroup.controllers", cg);
	text = lstate_read_file(path, 4096, NULL);
	for (size_t i = 0; text && i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		char *tok, *save = NULL, *copy = strdup(text);

		for (tok = copy ? strtok_r(copy, " \n", &save) : NULL; tok; tok = strtok_r(NULL, " \n", &save))
			any |= !strcmp(tok, wanted[i]);
		free(copy);
	}
	free(text);
	if (!any)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_LOCAL_CGROUP: %s has none of the memory, pids and cpu controllers (its "
					"parent's cgroup.subtree_control must enable them)",
					cg);
	return 0;
}

static int l_init(void **state, hangar_ctx *ctx, void *data)
{
	const char *bwrap = hangar_sys_ctx_setting(ctx, "HANGAR_BWRAP_PATH");
	const char *envd = hangar_sys_ctx_setting(ctx, "HANGAR_ENVD_PATH");
	const char *sdir = hangar_sys_ctx_setting(ctx, "HANGAR_STATE_DIR");
	const char *jail = hangar_sys_ctx_setting(ctx, "HANGAR_JAIL_PATH");
	struct local *l;
	char buf[PATH_MAX];
	int r;

	(void)data;
	*state = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	ltokens_init(&l->tokens);
	l->ctx = ctx;
	l->bwrap = bwrap && *bwrap ? resolve_exe(bwrap) : NULL;
	if (!l->bwrap) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_BWRAP_PATH: \"%s\" is not an executable file or on PATH "
					"(install bubblewrap)", bwrap ? bwrap : "");
	}
	if (!envd || !executable_file(envd) || !realpath(envd, buf) || !(l->envd = strdup(buf))) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_ENVD_PATH: \"%s\" is not an executable file",
					envd ? envd : "");
	}
	if (!jail || !executable_file(jail) || !(l->jail = strdup(jail))) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_JAIL_PATH: \"%s\" is not an executable file", jail ? jail : "");
	}
	if (!sdir || sdir[0] != '/' ||
	    snprintf(buf, sizeof(buf), "%s/local", sdir) >= (int)sizeof(buf) ||
	    strlen(buf) + strlen(SOCKET_SUFFIX) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_STATE_DIR: \"%s\" is too long for the sandboxes' unix sockets "
					"(at most %zu characters)", sdir ? sdir : "",
					sizeof(((struct sockaddr_un *)0)->sun_path) - strlen(SOCKET_SUFFIX) - 7);
	}
	{
		const char *range = hangar_sys_ctx_setting(ctx, "HANGAR_LOCAL_UID_RANGE");
		unsigned long long start = 0, count = 0;
		char tail = 0;

		if (range && *range &&
		    (sscanf(range, "%llu:%llu%c", &start, &count, &tail) != 2 || start == 0 || count < 65536 ||
		     start + count > 0xffffffffULL)) {
			l_fini(l);
			return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
						"HANGAR_LOCAL_UID_RANGE: \"%s\" is not START:COUNT (host ids, START > 0, "
						"COUNT >= 65536)", range);
		}
	}
	{
		const char *cg = hangar_sys_ctx_setting(ctx, "HANGAR_LOCAL_CGROUP");

		if (cg && *cg && (r = check_cgroup_dir(cg)) < 0) {
			l_fini(l);
			return r;
		}
	}
	r = mkdir_p(buf, 0700);
	if (r < 0 || chmod(buf, 0700) < 0) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ECONFIG, 0, r < 0 ? -r : errno, "HANGAR_STATE_DIR: cannot create %s",
					buf);
	}
	l->root = strdup(buf);
	if (!l->root) {
		l_fini(l);
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	}
	*state = l;
	return 0;
}

/* ---- create ---------------------------------------------------------------------------- */

/*
 * Lays out the sandbox's directory (still under its temporary name). The
 * jail writes its /etc there; what the sandbox writes lives in file systems
 * of its own (memory, limited in size), never here.
 */
static int lay_out(const char *dir, const struct lmeta *m)
{
	static const char *const dirs[] = { "rootfs", "rootfs/etc" };
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if (snprintf(path, sizeof(path), "%s/%s", dir, dirs[i]) >= (int)sizeof(path) || mkdir(path, 0755) < 0)
			return -errno;
	}
	return lstate_meta_write(dir, m);
}

/*
 * Starts hangar-jail, detached, with ready_w as its fd 3, a pipe holding the
 * token as its fd 4, and log as its stdout and stderr. Everything the child
 * needs is prepared before the spawn.
 */
static int spawn_jail(const struct local *l, const char *dir, int ready_w, int log, const char *token)
{
	/* The sandbox's settings reach the jail as its environment. */
	static const char *const passed[][2] = {
		{ "HANGAR_LOCAL_FREEZER", "HANGAR_JAIL_FREEZER" },
		{ "HANGAR_LOCAL_MEMORY_MB", "HANGAR_JAIL_MEMORY_MB" },
		{ "HANGAR_LOCAL_PIDS", "HANGAR_JAIL_PIDS" },
		{ "HANGAR_LOCAL_CPUS", "HANGAR_JAIL_CPUS" },
		{ "HANGAR_LOCAL_DISK_MB", "HANGAR_JAIL_DISK_MB" },
		{ "HANGAR_LOCAL_UID_RANGE", "HANGAR_JAIL_UID_RANGE" },
		{ "HANGAR_LOCAL_NET_ALLOW", "HANGAR_JAIL_NET_ALLOW" },
		{ "HANGAR_LOCAL_SUBIDS", "HANGAR_JAIL_SUBIDS" },
		{ "HANGAR_LOCAL_CGROUP", "HANGAR_JAIL_CGROUP" },
	};
	char *argv[] = { l->jail, "-dir", (char *)dir, "-bwrap", l->bwrap, "-envd", l->envd,
			 "-ready-fd", "3", "-token-fd", "4", "-daemon", NULL };
	char envbuf[sizeof(passed) / sizeof(passed[0])][1100];
	char *envp[sizeof(passed) / sizeof(passed[0]) + 2] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" };
	size_t ne = 1;
	int devnull, hi_ready, hi_log, hi_token = -1, tp[2], status;
	size_t tlen = strlen(token);
	sigset_t none;
	pid_t pid;

	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++) {
		const char *v = hangar_sys_ctx_setting(l->ctx, passed[i][0]);

		if (v && *v && strlen(v) < 1024) {
			snprintf(envbuf[i], sizeof(envbuf[i]), "%s=%s", passed[i][1], v);
			envp[ne++] = envbuf[i];
		}
	}
	envp[ne] = NULL;
	sigemptyset(&none);
	/*
	 * The token goes into a pipe whose write end is closed before the spawn:
	 * the jail reads it to EOF. A pipe holds far more than a token, so the
	 * write cannot block.
	 */
	if (pipe2(tp, O_CLOEXEC) < 0)
		return -errno;
	errno = 0;
	if (write(tp[1], token, tlen) != (ssize_t)tlen) {
		int e = errno ? errno : EIO;

		close(tp[0]);
		close(tp[1]);
		return -e;
	}
	close(tp[1]);
	/* Keep the child's descriptors clear of 0..4 so the dup2()s cannot collide. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	hi_ready = fcntl(ready_w, F_DUPFD_CLOEXEC, 10);
	hi_log = fcntl(log, F_DUPFD_CLOEXEC, 10);
	hi_token = fcntl(tp[0], F_DUPFD_CLOEXEC, 10);
	close(tp[0]);
	if (devnull < 0 || hi_ready < 0 || hi_log < 0 || hi_token < 0) {
		int e = errno;

		if (devnull >= 0)
			close(devnull);
		if (hi_ready >= 0)
			close(hi_ready);
		if (hi_log >= 0)
			close(hi_log);
		if (hi_token >= 0)
			close(hi_token);
		return -e;
	}
	/*
	 * posix_spawn, not fork: glibc's shares the caller's memory with the
	 * child until it execs (clone with CLONE_VM and CLONE_VFORK), so the
	 * caller's pages are never made copy-on-write. After a fork, a large
	 * caller (a Python interpreter, a server) pays a page fault for every
	 * page it next writes to, hundreds per create.
	 */
	{
		posix_spawn_file_actions_t fa;
		posix_spawnattr_t at;
		int rc = posix_spawn_file_actions_init(&fa);

		if (rc == 0 && (rc = posix_spawnattr_init(&at)) != 0)
			posix_spawn_file_actions_destroy(&fa);
		if (rc == 0) {
			if ((rc = posix_spawn_file_actions_adddup2(&fa, devnull, 0)) == 0 &&
			    (rc = posix_spawn_file_actions_adddup2(&fa, hi_log, 1)) == 0 &&
			    (rc = posix_spawn_file_actions_adddup2(&fa, hi_log, 2)) == 0 &&
			    (rc = posix_spawn_file_actions_adddup2(&fa, hi_ready, 3)) == 0 &&
			    (rc = posix_spawn_file_actions_adddup2(&fa, hi_token, 4)) == 0 &&
			    (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 5)) == 0 &&
			    (rc = posix_spawnattr_setsigmask(&at, &none)) == 0 &&
			    (rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK)) == 0)
				rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
			posix_spawnattr_destroy(&at);
			posix_spawn_file_actions_destroy(&fa);
		}
		close(devnull);
		close(hi_ready);
		close(hi_log);
		close(hi_token);
		if (rc != 0)
			return -rc;
	}
	/* The first jail process forks the supervisor and exits at once. */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* Reads "ready\n" from fd before the deadline: 0, -ETIMEDOUT or -EPIPE (EOF). */
static int wait_ready(int fd, int64_t deadline_ms)
{
	char buf[64];
	size_t have = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline_ms - clock_mono_ms();
		ssize_t n;
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -EPIPE;
		have += (size_t)n;
		buf[have] = '\0';
		if (strstr(buf, "ready\n"))
			return 0;
		if (have == sizeof(buf) - 1)
			return -EPIPE;
	}
}

/* Stops a jail that started but whose sandbox never became ready. */
static void stop_jail(const char *dir, const char *id)
{
	int pid = lstate_jail_pid(dir), fd;

	if (pid <= 0)
		return;
	fd = pidfd_open_(pid);
	if (fd < 0)
		return;
	if (lstate_is_jail(pid, id)) {
		pidfd_signal(fd, SIGTERM);
		if (!pidfd_wait(fd, clock_mono_ms() + KILL_DEADLINE_MS))
			pidfd_signal(fd, SIGKILL);
	}
	close(fd);
}

static int new_id(char *id)
{
	unsigned char rnd[8];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -errno;
	memcpy(id, "sb-", 3);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(id + 3 + 2 * i, 3, "%02x", rnd[i]);
	return 0;
}

static int new_token(char *hex /* 65 */)
{
	unsigned char rnd[32];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return -errno;
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(hex + 2 * i, 3, "%02x", rnd[i]);
	explicit_bzero(rnd, sizeof(rnd));
	return 0;
}

static int copy_env(struct lmeta *m, const char *const *env)
{
	size_t n = 0;

	for (const char *const *e = env; e && *e; e++)
		n++;
	if (!n)
		return 0;
	m->env = calloc(n + 1, sizeof(char *));
	if (!m->env)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(m->env[i] = strdup(env[i])))
			return -ENOMEM;
	return 0;
}

static int l_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	struct local *l = state;
	char tmpdir[DIR_MAX], dir[DIR_MAX], path[PATH_MAX], token[65], tail[LOG_TAIL_BYTES + 1];
	struct lmeta m = { 0 };
	int lock = -1, log = -1, pipefd[2] = { -1, -1 }, r, rc = 0;
	int64_t t0 = clock_mono_ms();

	if (opts->template_id && *opts->template_id && strcmp(opts->template_id, "local") != 0)
		return hangar_sys_error(HANGAR_ECREATE, 0, 0,
					"the local provider has no template \"%s\" (only \"local\": the host's /usr)",
					opts->template_id);
	for (const char *const *e = opts->env; e && *e; e++)
		if (strlen(*e) > 32768)
			return hangar_sys_error(HANGAR_EINVAL, 0, 0, "opts->env: an entry is longer than 32 KiB");
	if (opts->network == HANGAR_NETWORK_ON || opts->network == HANGAR_NETWORK_OFF) {
		m.network = opts->network == HANGAR_NETWORK_ON;
	} else {
		int32_t net = 1;

		hangar_sys_ctx_setting_bool(&net, l->ctx, "HANGAR_LOCAL_NETWORK");
		m.network = net != 0;
	}
	/*
	 * An unprivileged caller's way out (slirp4netns) needs the tun device:
	 * without it the sandbox would have loopback only, which is not what
	 * was asked for. Said now, rather than found out later.
	 */
	if (m.network && geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, errno,
					"network on needs /dev/net/tun, which uid %u cannot open: ask for network "
					"off, set HANGAR_LOCAL_NETWORK=off, or make the device usable (mode 0666, "
					"as Debian has it)",
					(unsigned)geteuid());
	snprintf(m.template_id, sizeof(m.template_id), "local");
	m.created_at_us = clock_wall_us();
	m.timeout_sec = opts->timeout_sec > 0 ? opts->timeout_sec : 0;
	m.unprivileged = geteuid() != 0;
	if ((r = copy_env(&m, opts->env)) < 0) {
		lstate_meta_clear(&m);
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	}
	if ((r = new_token(token)) < 0) {
		lstate_meta_clear(&m);
		return hangar_sys_error(HANGAR_EOS, 0, -r, "getrandom");
	}

	/*
	 * The directory is laid out under a dot name, locked, then renamed into
	 * place: list() and connect() never see a half-made sandbox as a dead one.
	 */
	for (int tries = 0;; tries++) {
		if ((r = new_id(m.id)) < 0) {
			rc = hangar_sys_error(HANGAR_EOS, 0, -r, "getrandom");
			goto out;
		}
		snprintf(tmpdir, sizeof(tmpdir), "%s/.new-%s", l->root, m.id);
		sb_dir(dir, sizeof(dir), l, m.id);
		if (access(dir, F_OK) == 0 && tries < 8)
			continue;
		if (mkdir(tmpdir, 0700) == 0)
			break;
		if (errno != EEXIST || tries >= 8) {
			rc = hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot create %s", tmpdir);
			goto out;
		}
	}
	snprintf(path, sizeof(path), "%s/lock", tmpdir);
	lock = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		rc = hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot lock %s", path);
		lstate_rmtree_at(AT_FDCWD, tmpdir);
		goto out;
	}
	r = lay_out(tmpdir, &m);
	if (r == 0 && rename(tmpdir, dir) < 0)
		r = -errno;
	if (r < 0) {
		rc = hangar_sys_error(HANGAR_ECREATE, 0, -r, "cannot lay out sandbox directory %s", tmpdir);
		lstate_rmtree_at(AT_FDCWD, tmpdir);
		goto out;
	}

	snprintf(path, sizeof(path), "%s/envd.log", dir);
	log = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		rc = hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot create %s", path);
		lstate_rmtree_at(AT_FDCWD, dir);
		goto out;
	}
	r = spawn_jail(l, dir, pipefd[1], log, token);
	close(pipefd[1]);
	pipefd[1] = -1;
	if (r < 0) {
		rc = hangar_sys_error(HANGAR_ECREATE, 0, -r, "cannot start %s", l->jail);
		lstate_rmtree_at(AT_FDCWD, dir);
		goto out;
	}
	r = wait_ready(pipefd[0], t0 + READY_DEADLINE_MS);
	if (r < 0) {
		stop_jail(dir, m.id);
		/* The jail removes the directory; the log stays readable through our descriptor. */
		log_tail(log, tail, sizeof(tail));
		lstate_rmtree_at(AT_FDCWD, dir);
		rc = hangar_sys_error(HANGAR_ECREATE, 0, 0, "local sandbox %s %s: %s", m.id,
				      r == -ETIMEDOUT ? "did not become ready within 30 s" : "failed to start",
				      *tail ? tail : "(envd.log is empty)");
		goto out;
	}

	/* Running: record the jail, start the clock. */
	m.jail_pid = lstate_jail_pid(dir);
	m.expires_at_us = m.timeout_sec > 0 ? clock_wall_us() + m.timeout_sec * 1000000 : 0;
	r = lstate_meta_write(dir, &m);
	if (r == 0 && m.jail_pid > 0)
		kill(m.jail_pid, SIGHUP); /* the expiry moved */
	if (r < 0) {
		stop_jail(dir, m.id);
		lstate_rmtree_at(AT_FDCWD, dir);
		rc = hangar_sys_error(HANGAR_ECREATE, 0, -r, "local sandbox %s: cannot write meta.json", m.id);
		goto out;
	}
	hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: sandbox %s ready in %lld ms", m.id, (long long)(clock_mono_ms() - t0));
	rc = describe(l, dir, &m, token, m.jail_pid, out);
out:
	explicit_bzero(token, sizeof(token));
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (log >= 0)
		close(log);
	unlock_dir(lock);
	lstate_meta_clear(&m);
	return rc;
}

/* ---- connect, kill, list ---------------------------------------------------------------- */

static int l_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct local *l = state;
	char dir[DIR_MAX];
	struct lmeta m;
	int pid, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	r = lstate_meta_read(dir, &m);
	if (r < 0)
		return meta_failed(id, r);
	r = describe(l, dir, &m, NULL, pid, out);
	lstate_meta_clear(&m);
	return r;
}

static int l_kill(void *state, const char *id)
{
	struct local *l = state;
	char dir[DIR_MAX];
	int pid = 0, fd = -1, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	fd = pidfd_open_(pid);
	if (fd < 0 || !lstate_is_jail(pid, id)) {
		if (fd >= 0)
			close(fd);
		clean_stale(l, id);
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is already gone", id);
	}
	ltokens_forget(&l->tokens, id);
	pidfd_signal(fd, SIGTERM);
	if (!pidfd_wait(fd, clock_mono_ms() + KILL_DEADLINE_MS)) {
		/* The jail is stuck: kill it; bwrap dies with it (--die-with-parent). */
		hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: sandbox %s did not stop in time; killing its supervisor", id);
		pidfd_signal(fd, SIGKILL);
		pidfd_wait(fd, clock_mono_ms() + KILL_DEADLINE_MS);
	}
	close(fd);
	if (access(dir, F_OK) == 0)
		clean_stale(l, id);
	return 0;
}

static int l_list(void *state, hangar_sys_list *out)
{
	struct local *l = state;
	struct dirent *de;
	DIR *d = opendir(l->root);
	int rc = 0;

	if (!d)
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, errno, "cannot read %s", l->root);
	while (rc == 0 && (de = readdir(d))) {
		char dir[DIR_MAX];
		struct lmeta m;
		hangar_sys_sandbox *sb;
		int pid;

		if (!lstate_valid_id(de->d_name))
			continue;
		sb_dir(dir, sizeof(dir), l, de->d_name);
		switch (liveness(dir, de->d_name, &pid)) {
		case CREATING:
			continue;
		case DEAD:
			clean_stale(l, de->d_name);
			continue;
		case ALIVE:
			break;
		}
		if (lstate_meta_read(dir, &m) < 0)
			continue; /* it went away meanwhile */
		sb = hangar_sys_list_add(out);
		if (!sb)
			rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
		else if (describe(l, dir, &m, NO_TOKEN, pid, sb) != 0 && hangar_error_last()->code != HANGAR_EGONE)
			rc = hangar_error_last()->code;
		lstate_meta_clear(&m);
	}
	closedir(d);
	return rc;
}

/* ---- pause, resume, timeouts --------------------------------------------------------------- */

struct freezer {
	char kind[4];        /* "v2", "v1" or "" (none: SIGSTOP) */
	char path[PATH_MAX];
};

static void read_freezer(const char *dir, const char *id, struct freezer *f)
{
	char path[PATH_MAX], *text;

	memset(f, 0, sizeof(*f));
	snprintf(path, sizeof(path), "%s/cgroup", dir);
	text = lstate_read_file(path, PATH_MAX + 8, NULL);
	if (!text)
		return;
	text[strcspn(text, "\n")] = '\0';
	if ((!strncmp(text, "v2 /", 4) || !strncmp(text, "v1 /", 4)) && strstr(text, id) && !strstr(text, "..") &&
	    strlen(text + 3) < sizeof(f->path)) {
		memcpy(f->kind, text, 2);
		strcpy(f->path, text + 3);
	}
	free(text);
}

/* cgroup v2: waits for "<key><want>" in cgroup.events, which notifies changes with POLLPRI. */
static int v2_wait_events(const char *cg, const char *key, int want, int64_t deadline)
{
	char path[PATH_MAX + 32], buf[512];
	int fd, r = -ETIMEDOUT;

	snprintf(path, sizeof(path), "%s/cgroup.events", cg);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		const char *v;
		struct pollfd p = { fd, POLLPRI, 0 };
		int64_t left;

		if (n < 0) {
			r = -errno;
			break;
		}
		buf[n] = '\0';
		v = strstr(buf, key);
		if (v && (v[strlen(key)] == '1') == (want == 1)) {
			r = 0;
			break;
		}
		left = deadline - clock_mono_ms();
		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
	}
	close(fd);
	return r;
}

/*
 * cgroup v1 gives no notification: freezer.state reads FREEZING until every
 * task has stopped. Re-read it (each read also retries the freeze), pausing
 * on an empty poll() between reads, until FROZEN or the deadline.
 */
static int v1_wait_frozen(const char *cg, int64_t deadline)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/freezer.state", cg);
	for (int wait_ms = 1;; wait_ms = wait_ms < 50 ? wait_ms * 2 : 50) {
		char *s = lstate_read_file(path, 64, NULL);
		int frozen;

		if (!s)
			return -errno;
		frozen = !strncmp(s, "FROZEN", 6);
		free(s);
		if (frozen)
			return 0;
		if (clock_mono_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, wait_ms);
	}
}

/* The sandbox's processes on the host: those in bwrap's pid namespace, below the jail. */
static int signal_sandbox(int jail_pid, int sig)
{
	char path[128], link[64], ns[64] = "";
	struct dirent *de;
	DIR *d;
	FILE *f;
	int bwrap = 0, inner = 0, count = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", jail_pid, jail_pid);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%d", &bwrap) != 1)
		bwrap = 0;
	if (f)
		fclose(f);
	if (bwrap <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", bwrap, bwrap);
	f = fopen(path, "re");
	if (!f || fscanf(f, "%d", &inner) != 1)
		inner = 0;
	if (f)
		fclose(f);
	if (inner <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", inner);
	if (readlink(path, ns, sizeof(ns) - 1) <= 0)
		return -ESRCH;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		ssize_t n;

		if (*end || pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", pid);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, ns) == 0 && kill((pid_t)pid, sig) == 0)
			count++;
	}
	closedir(d);
	return count > 0 ? 0 : -ESRCH;
}

static int set_frozen(const char *id, const char *dir, int jail_pid, int frozen)
{
	struct freezer f;
	char path[PATH_MAX + 32];
	int64_t deadline = clock_mono_ms() + FREEZE_DEADLINE_MS;
	int r;

	read_freezer(dir, id, &f);
	if (!strcmp(f.kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", f.path);
		r = lstate_write_str(path, frozen ? "1" : "0");
		if (r == 0)
			r = v2_wait_events(f.path, "frozen ", frozen, deadline);
	} else if (!strcmp(f.kind, "v1")) {
		snprintf(path, sizeof(path), "%s/freezer.state", f.path);
		r = lstate_write_str(path, frozen ? "FROZEN" : "THAWED");
		if (r == 0 && frozen)
			r = v1_wait_frozen(f.path, deadline);
	} else {
		r = signal_sandbox(jail_pid, frozen ? SIGSTOP : SIGCONT);
	}
	if (r == -ETIMEDOUT)
		return hangar_sys_error(HANGAR_ETIMEOUT, 0, 0, "local sandbox %s: %s did not finish within %d s", id,
					frozen ? "freezing" : "thawing", FREEZE_DEADLINE_MS / 1000);
	if (r < 0)
		return hangar_sys_error(HANGAR_EOS, 0, -r, "local sandbox %s: cannot %s it", id,
					frozen ? "freeze" : "thaw");
	return 0;
}

/* Runs fn on the sandbox's meta.json under its lock, writes it back and tells the jail. */
static int locked_update(struct local *l, const char *id, int (*fn)(const char *id, const char *dir, int pid,
								   struct lmeta *m, void *arg),
			 void *arg, hangar_sys_sandbox *out)
{
	char dir[DIR_MAX];
	struct lmeta m;
	int pid = 0, lock, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	lock = lock_dir(dir, LOCK_EX);
	if (lock < 0)
		return errno == ENOENT ? hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id)
				       : hangar_sys_error(HANGAR_EOS, 0, errno, "local sandbox %s: cannot lock it", id);
	r = lstate_meta_read(dir, &m);
	if (r < 0) {
		unlock_dir(lock);
		return meta_failed(id, r);
	}
	r = fn(id, dir, pid, &m, arg);
	if (r == 0) {
		int w = lstate_meta_write(dir, &m);

		if (w < 0)
			r = meta_failed(id, w);
		else if (!lstate_is_jail(pid, id))
			r = hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id);
		else
			kill(pid, SIGHUP);
	}
	if (r == 0 && out)
		r = describe(l, dir, &m, NULL, pid, out);
	unlock_dir(lock);
	lstate_meta_clear(&m);
	return r;
}

static int do_pause(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int r;

	(void)arg;
	if (m->paused)
		return 0;
	r = set_frozen(id, dir, pid, 1);
	if (r)
		return r;
	m->paused = 1;
	m->expires_at_us = 0; /* the clock stops while paused */
	return 0;
}

static int do_resume(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int r;

	(void)arg;
	r = set_frozen(id, dir, pid, 0);
	if (r)
		return r;
	m->paused = 0;
	m->expires_at_us = m->timeout_sec > 0 ? clock_wall_us() + m->timeout_sec * 1000000 : 0;
	return 0;
}

static int do_set_timeout(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int64_t seconds = *(const int64_t *)arg;

	(void)id;
	(void)dir;
	(void)pid;
	/* The new lifetime also applies from each later resume. */
	m->timeout_sec = seconds > 0 ? seconds : 0;
	if (!m->paused)
		m->expires_at_us = seconds > 0 ? clock_wall_us() + seconds * 1000000 : 0;
	return 0;
}

static int l_pause(void *state, const char *id)
{
	return locked_update(state, id, do_pause, NULL, NULL);
}

static int l_resume(void *state, const char *id, hangar_sys_sandbox *out)
{
	return locked_update(state, id, do_resume, NULL, out);
}

static int l_set_timeout(void *state, const char *id, int64_t seconds)
{
	if (seconds < 0 || seconds > 366LL * 86400)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "timeout must be 0 to 366 days, not %lld s",
					(long long)seconds);
	return locked_update(state, id, do_set_timeout, &seconds, NULL);
}

/* ---- limits and usage ------------------------------------------------------------------ */

static int l_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		     void *payload)
{
	struct local *l = state;
	hangar_sandbox_metric m;
	char dir[DIR_MAX];
	int pid, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	r = usage_metric(dir, id, pid, &m);
	if (r < 0)
		return hangar_sys_error(r == -ENOENT ? HANGAR_EGONE : HANGAR_EOS, 0, -r,
					"local sandbox %s: cannot read its limits", id);
	return fn(&m, payload);
}

/* The limits the sandbox has hit so far (the OOM killer, refused forks, a full disk), one entry each. */
static int l_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
		  void *payload)
{
	struct local *l = state;
	char dir[DIR_MAX], msgs[USAGE_EVENTS][USAGE_MSG_MAX];
	const char *levels[USAGE_EVENTS];
	int pid, n, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	n = usage_events(dir, id, pid, msgs, levels);
	if (n < 0)
		return hangar_sys_error(n == -ENOENT ? HANGAR_EGONE : HANGAR_EOS, 0, -n,
					"local sandbox %s: cannot read its limits", id);
	for (int i = 0; i < n; i++) {
		hangar_sandbox_log_entry e = { HANGAR_SANDBOX_LOG_ENTRY_VERSION, sizeof(e), clock_wall_us(), levels[i],
					       msgs[i] };

		r = fn(&e, payload);
		if (r)
			return r;
	}
	return 0;
}

/* ---- ports -------------------------------------------------------------------------- */

/* Reads the jail's one-line answer on fd until it closes, within deadline. 0, or an error set. */
static int read_answer(int fd, const char *id, char *buf, size_t size, int64_t deadline)
{
	size_t have = 0;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;
		int r;

		if (left <= 0)
			return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0,
						"local sandbox %s: its supervisor did not answer within %d s", id,
						PORTS_DEADLINE_MS / 1000);
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return hangar_sys_error(HANGAR_EOS, 0, errno, "poll");
		if (r == 0)
			continue;
		n = read(fd, buf + have, size - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (have += (size_t)n) == size - 1)
			break;
	}
	buf[have] = '\0';
	if (!have || buf[have - 1] != '\n')
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor did not "
					"answer)", id);
	buf[have - 1] = '\0';
	return 0;
}

/*
 * The jail listens on an ephemeral port of the host's 127.0.0.1 and relays
 * each connection to the port on the sandbox's own loopback (see
 * programs/hangar-jail/ports.c).
 */
static int l_expose_port(void *state, const char *id, uint32_t port, hangar_buf *out_addr)
{
	struct local *l = state;
	char dir[DIR_MAX], req[32], answer[256];
	unsigned a, b, c, d, host_port;
	char tail = 0;
	int pid = 0, fd = -1, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r || (r = jail_connect(dir, id, pid, "ports.sock", &fd)) != 0)
		return r;
	snprintf(req, sizeof(req), "expose %u\n", (unsigned)port);
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		r = hangar_sys_error(HANGAR_EGONE, 0, errno, "local sandbox %s is gone (its supervisor does not "
				     "answer)", id);
		close(fd);
		return r;
	}
	r = read_answer(fd, id, answer, sizeof(answer), clock_mono_ms() + PORTS_DEADLINE_MS);
	close(fd);
	if (r)
		return r;
	if (!strncmp(answer, "error ", 6))
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0, "local sandbox %s: cannot expose port %u: %s", id,
					(unsigned)port, answer + 6);
	if (sscanf(answer, "ok %u.%u.%u.%u:%u%c", &a, &b, &c, &d, &host_port, &tail) != 5 || a > 255 || b > 255 ||
	    c > 255 || d > 255 || host_port < 1 || host_port > 65535)
		return hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "local sandbox %s: its supervisor answered \"%.64s\"",
					id, answer);
	hangar_buf_dispose(out_addr);
	if (asprintf(&out_addr->ptr, "%u.%u.%u.%u:%u", a, b, c, d, host_port) < 0) {
		out_addr->ptr = NULL;
		return hangar_sys_error(HANGAR_ENOMEM, 0, 0, "out of memory");
	}
	out_addr->size = strlen(out_addr->ptr);
	out_addr->reserved = out_addr->size + 1;
	return 0;
}

static int l_oom_kills(void *state, const char *id, uint64_t *out)
{
	struct local *l = state;
	char dir[DIR_MAX];
	long long n;
	int pid = 0, r = find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	n = usage_oom_kills(dir, id);
	if (n < 0)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "local sandbox %s has no memory cgroup", id);
	*out = (uint64_t)n;
	return 0;
}

/* HANGAR_LOCAL_UID_RANGE: START:COUNT host ids, START > 0, COUNT >= 65536. */
static int check_uid_range(const char *name, const char *value)
{
	unsigned long long start = 0, count = 0;
	char tail = 0;

	if (sscanf(value, "%llu:%llu%c", &start, &count, &tail) != 2 || start == 0 || count < 65536 ||
	    start + count > 0xffffffffULL || value[0] < '0' || value[0] > '9')
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"%s: \"%s\" is not START:COUNT (host ids, START > 0, COUNT >= 65536)", name,
					value);
	return 0;
}

/* HANGAR_LOCAL_CGROUP: a cgroup directory under /sys/fs/cgroup/ (where the library reads cgroups), no "..". */
static int check_cgroup_path(const char *name, const char *value)
{
	if (strncmp(value, "/sys/fs/cgroup/", 15) != 0 || strstr(value, "..") || strlen(value) >= 1024)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"%s: \"%s\" is not a cgroup v2 directory under /sys/fs/cgroup/ (no \"..\")",
					name, value);
	return 0;
}

/* HANGAR_LOCAL_NET_ALLOW: "A.B.C.D/N,..." IPv4 ranges. */
static int check_net_allow(const char *name, const char *value)
{
	for (const char *p = value; *p;) {
		size_t n = strcspn(p, ",");
		unsigned a, b, c, d, bits;
		char tail = 0, cidr[64];

		snprintf(cidr, sizeof(cidr), "%.*s", (int)(n < 63 ? n : 63), p);
		if (n >= 63 || sscanf(cidr, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &bits, &tail) != 5 || a > 255 ||
		    b > 255 || c > 255 || d > 255 || bits > 32 || strlen(value) >= 1024)
			return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
						"%s: \"%s\" is not a list of IPv4 CIDR ranges (A.B.C.D/N,...)", name,
						value);
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The local provider's settings, each with its one default. */
static const struct hangar_setting_def local_settings[] = {
	{ "HANGAR_ENVD_PATH", HANGAR_SETTING_TYPE_PATH, 0, HANGAR_ENVD_INSTALL_PATH, 0, 0, NULL,
	  "the hangar-envd binary local sandboxes run", NULL },
	{ "HANGAR_JAIL_PATH", HANGAR_SETTING_TYPE_PATH, 0, HANGAR_JAIL_INSTALL_PATH, 0, 0, NULL,
	  "the hangar-jail supervisor of local sandboxes", NULL },
	{ "HANGAR_BWRAP_PATH", HANGAR_SETTING_TYPE_STRING, 0, "bwrap", 0, 0, NULL,
	  "the bubblewrap binary (a name is looked up on PATH)", NULL },
	{ "HANGAR_LOCAL_NETWORK", HANGAR_SETTING_TYPE_BOOL, 0, "on", 0, 0, NULL,
	  "network inside local sandboxes", NULL },
	{ "HANGAR_LOCAL_FREEZER", HANGAR_SETTING_TYPE_CHOICE, 0, "auto", 0, 0, "auto|v2|v1|none",
	  "how local sandboxes pause: cgroup freezer v2 or v1, none (SIGSTOP), auto", NULL },
	{ "HANGAR_LOCAL_MEMORY_MB", HANGAR_SETTING_TYPE_INT, 0, "2048", 16, 1LL << 22, NULL,
	  "memory limit of each local sandbox, MiB", NULL },
	{ "HANGAR_LOCAL_PIDS", HANGAR_SETTING_TYPE_INT, 0, "512", 8, 1LL << 22, NULL,
	  "process limit of each local sandbox", NULL },
	{ "HANGAR_LOCAL_CPUS", HANGAR_SETTING_TYPE_INT, 0, "2", 1, 1024, NULL, "CPUs of each local sandbox", NULL },
	{ "HANGAR_LOCAL_DISK_MB", HANGAR_SETTING_TYPE_INT, 0, "1024", 1, 1LL << 24, NULL,
	  "disk limit of each local sandbox, MiB", NULL },
	{ "HANGAR_LOCAL_UID_RANGE", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "host ids for sandboxes' user namespaces, START:COUNT", check_uid_range },
	{ "HANGAR_LOCAL_NET_ALLOW", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "private IPv4 ranges local sandboxes may reach, A.B.C.D/N,...", check_net_allow },
	{ "HANGAR_LOCAL_SUBIDS", HANGAR_SETTING_TYPE_BOOL, 0, "on", 0, 0, NULL,
	  "non-root callers: sandbox users on the caller's /etc/subuid ids", NULL },
	{ "HANGAR_LOCAL_CGROUP", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "a delegated cgroup v2 holding no processes, for local sandboxes' limits", check_cgroup_path },
	{ NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

const struct hangar_provider_ops local_provider_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "local",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY,
	.init = l_init,
	.fini = l_fini,
	.create = l_create,
	.connect = l_connect,
	.kill = l_kill,
	.pause = l_pause,
	.resume = l_resume,
	.set_timeout = l_set_timeout,
	.list = l_list,
	.metrics = l_metrics,
	.logs = l_logs,
	.settings = local_settings,
	.expose_port = l_expose_port,
	.oom_kills = l_oom_kills,
};
