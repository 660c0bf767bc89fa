/*
 * The checkpoint endpoints' HTTP side (ckpt.h): request checks, the worker
 * each request runs in, and the pipes between them.
 *
 * The worker is a program of its own, hangar-envd-archive (ckpt_worker.c),
 * installed beside hangar-envd and executed as the request user. Between
 * the clone and the exec the child only makes system calls: it switches
 * users, arranges its descriptors and executes, sharing the daemon's memory
 * while the parent thread waits. Any lock another thread of the daemon held
 * at that moment (the allocator's, the sanitizers') is never touched there,
 * and libarchive, libzstd and the directory walks run in a fresh process
 * that holds no state of the daemon's: not its token, not its locks, and
 * the daemon never loads those libraries at all.
 */
#define _GNU_SOURCE
#include "ckpt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "creds.h"
#include "envd.h"

#define CAPTURE_BLOCK (32 * 1024)   /* bytes per content-reader call */
#define CAPTURE_PIPE (1024 * 1024)

/* ---- notes --------------------------------------------------------------- */

/* Reads one note; 0, or -1 when the child closed the pipe without one. */
static int note_read(int fd, struct ckpt_note *n)
{
	size_t got = 0;

	memset(n, 0, sizeof(*n));
	while (got < sizeof(*n)) {
		ssize_t r = read(fd, (char *)n + got, sizeof(*n) - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	n->message[sizeof(n->message) - 1] = '\0';
	n->selection[sizeof(n->selection) - 1] = '\0';
	return 0;
}

/* ---- the worker ----------------------------------------------------------- */

/*
 * What a worker is executed from, opened at start-up: the worker's program,
 * or under -loader the loader. Each request's worker is a fresh execution
 * of the file opened then, whatever becomes of its name later (an upgrade
 * replacing it, a mount namespace without it).
 */
static int exec_fd = -1;

/*
 * Under -loader (runtime.c), a worker is the loader again, given the
 * daemon's library directory (which holds the worker's libraries too: the
 * jail stages both programs' runtime) and the worker's program as
 * /proc/self/fd/N of two descriptors it inherits. The worker's user may not
 * be able to reach them by name (/run/hangar is the daemon's alone), and
 * its own descriptors are always its to open.
 */
static int libdir_fd = -1, program_fd = -1;

/* CKPT_WORKER_NAME in the directory of the program at path, opened O_PATH. -1 with errno. */
static int open_worker_beside(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	char worker[PATH_MAX];
	struct stat st;
	int n, fd;

	if (!slash) {
		errno = ENOENT;
		return -1;
	}
	n = snprintf(worker, sizeof(worker), "%.*s/" CKPT_WORKER_NAME, (int)(slash - path), path);
	if (n < 0 || (size_t)n >= sizeof(worker)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(worker, O_PATH | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		errno = ENOEXEC;
		return -1;
	}
	return fd;
}

int ckpt_init(const char *argv0)
{
	char self[PATH_MAX];
	ssize_t n;
	int loader;

	if (envd_runtime_fds(&loader, &libdir_fd)) {
		program_fd = open_worker_beside(envd_runtime_program());
		if (program_fd < 0)
			return -1;
		exec_fd = loader;
		return 0;
	}
	/* The path the kernel executed, symbolic links resolved; else the one we were started as. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		exec_fd = open_worker_beside(self);
	} else if (argv0 && strchr(argv0, '/')) {
		exec_fd = open_worker_beside(argv0);
	} else {
		errno = ENOENT;
	}
	return exec_fd < 0 ? -1 : 0;
}

int ckpt_available(void)
{
	return exec_fd >= 0;
}

#define WORKER_MAX_FDS 3

/* Everything the worker's first moments need, prepared before it exists. */
struct worker_start {
	char **argv, **envp;
	const int *keep;              /* become 3, 4, ... in the worker */
	int nkeep;
	int loader;                   /* 1: exec_fd is the loader (ckpt_init) */
	int high[WORKER_MAX_FDS + 3]; /* scratch, written by the child */
	int switch_user;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	int ngroups;
	pid_t parent;
};

/*
 * The child between clone and exec. It shares the daemon's memory while the
 * parent thread waits, and other threads of the daemon may hold any lock, so
 * it makes system calls only: no allocation, no library state, nothing
 * written but its own stack and s->high. Signals stay blocked until the
 * worker unblocks them after the exec.
 */
__attribute__((no_sanitize_address)) static int worker_child(void *arg)
{
	struct worker_start *s = arg;
	int n = s->nkeep, exe_at = 3 + n + (s->loader ? 2 : 0);

	if (s->switch_user) {
		/* Raw system calls: glibc's would try to change every thread. */
		if (envd_inner_enter() < 0 || syscall(SYS_setgroups, (size_t)s->ngroups, s->groups) < 0 ||
		    syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0 ||
		    syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0)
			_exit(125);
		if (s->uid != 0 && syscall(SYS_setresuid, 0, 0, 0) == 0)
			_exit(125);
	}
	/* After the switch, which clears it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != s->parent)
		_exit(125);
	/* The kept descriptors above where they go, then into place. */
	for (int i = 0; i < n; i++)
		if ((s->high[i] = fcntl(s->keep[i], F_DUPFD_CLOEXEC, exe_at + 1)) < 0)
			_exit(125);
	if ((s->high[n] = fcntl(exec_fd, F_DUPFD_CLOEXEC, exe_at + 1)) < 0)
		_exit(125);
	if (s->loader && ((s->high[n + 1] = fcntl(libdir_fd, F_DUPFD_CLOEXEC, exe_at + 1)) < 0 ||
			  (s->high[n + 2] = fcntl(program_fd, F_DUPFD_CLOEXEC, exe_at + 1)) < 0))
		_exit(125);
	for (int i = 0; i < n; i++)
		if (dup3(s->high[i], 3 + i, 0) < 0)
			_exit(125);
	/* The loader's library directory and program, open across the exec: see ckpt_init. */
	if (s->loader && (dup3(s->high[n + 1], 3 + n, 0) < 0 || dup3(s->high[n + 2], 3 + n + 1, 0) < 0))
		_exit(125);
	if (dup3(s->high[n], exe_at, O_CLOEXEC) < 0)
		_exit(125);
	if (syscall(SYS_close_range, (unsigned)exe_at + 1, ~0U, 0) < 0)
		for (int fd = exe_at + 1; fd < 65536; fd++)
			close(fd);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		_exit(125);
	syscall(SYS_execveat, exe_at, "", s->argv, s->envp, AT_EMPTY_PATH);
	_exit(127);
}

/*
 * The environment of the worker: the user's (envd_build_env), each name
 * prefixed so neither the dynamic loader nor the worker acts on it (it is
 * git's, restored for git), plus the sanitizers' settings of the daemon.
 * One malloc'd block; NULL when out of memory.
 */
static char **worker_env(const struct envd_user *u)
{
	static const char *const keep[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
	char **user = envd_build_env(u, NULL), **list, *p;
	size_t count = 0, bytes = 0, k = 0;

	if (!user)
		return NULL;
	for (char **e = user; *e; e++, count++)
		bytes += sizeof(CKPT_WORKER_ENV_PREFIX) + strlen(*e);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		const char *v = getenv(keep[i]);

		if (v) {
			count++;
			bytes += strlen(keep[i]) + strlen(v) + 2;
		}
	}
	list = malloc((count + 1) * sizeof(char *) + bytes);
	if (!list) {
		free(user);
		return NULL;
	}
	p = (char *)(list + count + 1);
	for (char **e = user; *e; e++) {
		list[k++] = p;
		p += sprintf(p, CKPT_WORKER_ENV_PREFIX "%s", *e) + 1;
	}
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
		const char *v = getenv(keep[i]);

		if (v) {
			list[k++] = p;
			p += sprintf(p, "%s=%s", keep[i], v) + 1;
		}
	}
	list[k] = NULL;
	free(user);
	return list;
}

/*
 * Starts a worker: hangar-envd-archive run as u, for good, with the
 * descriptors in keep as 3, 4, ... and nothing else but 0-2. args are the
 * worker's arguments after the mode's name. The parent gets the pid, or -1
 * with errno set.
 */
static pid_t spawn_worker(const struct envd_user *u, const char *kind, const char *const *args, int nargs,
			  const int *keep, int nkeep)
{
	struct worker_start s = { .keep = keep, .nkeep = nkeep, .switch_user = envd_cfg.is_root,
				  .parent = getpid(), .loader = program_fd >= 0 };
	gid_t groups[ENVD_MAX_GROUPS];
	char uid[24], gid[24], libdir[32], program[32], *argv[24];
	size_t stack_size = 64 * 1024;
	char *stack = NULL;
	sigset_t all, old;
	pid_t pid = -1;
	int e, argc = 0;

	if (exec_fd < 0 || nkeep > WORKER_MAX_FDS || nargs > 8) {
		errno = exec_fd < 0 ? ENOEXEC : EINVAL;
		return -1;
	}
	s.uid = envd_cfg.is_root ? u->uid : getuid();
	s.gid = envd_cfg.is_root ? u->gid : getgid();
	s.ngroups = envd_cfg.is_root ? envd_user_groups(u, groups, ENVD_MAX_GROUPS) : 0;
	s.groups = groups;
	snprintf(uid, sizeof(uid), "%u", (unsigned)s.uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned)s.gid);
	argv[argc++] = CKPT_WORKER_NAME;
	if (s.loader) {
		/* The loader's options, then the worker's own command line. */
		snprintf(libdir, sizeof(libdir), "/proc/self/fd/%d", 3 + nkeep);
		snprintf(program, sizeof(program), "/proc/self/fd/%d", 3 + nkeep + 1);
		argv[argc++] = "--library-path";
		argv[argc++] = libdir;
		argv[argc++] = "--inhibit-cache";
		argv[argc++] = "--argv0";
		argv[argc++] = CKPT_WORKER_NAME;
		argv[argc++] = program;
	}
	argv[argc++] = CKPT_WORKER_FLAG;
	argv[argc++] = (char *)kind;
	argv[argc++] = uid;
	argv[argc++] = gid;
	argv[argc++] = (char *)u->name;
	for (int i = 0; i < nargs; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	s.argv = argv;
	s.envp = worker_env(u);
	stack = malloc(stack_size);
	if (!s.envp || !stack) {
		free(s.envp);
		free(stack);
		errno = ENOMEM;
		return -1;
	}
	/* No handler of the daemon's may run in the child. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid = clone(worker_child, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &s);
	e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(stack);
	free(s.envp);
	errno = e;
	return pid;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static int wait_child(pid_t pid)
{
	int st = 0;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* ---- GET /hangar/v1/info ------------------------------------------------- */

struct MHD_Response *ckpt_info_response(void)
{
	static const char body[] = "{\"archive\":1}";
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);

	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "application/json");
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	}
	return resp;
}

/* ---- shared request checks ---------------------------------------------- */

/* The request user (?username=, else the daemon's default) and the absolute
 * workspace path; 0, or the status with msg set. */
static unsigned common_params(struct envd_req *r, struct envd_user *u, const char **path, char *msg, size_t msgsz)
{
	const char *name = envd_req_query(r, "username");

	*path = envd_req_query(r, "path");
	if (!name)
		name = envd_cfg.default_user;
	if (!name || envd_user_lookup(name, u) < 0) {
		snprintf(msg, msgsz, "error looking up user '%s': user: unknown user %s", name ? name : "",
			 name ? name : "");
		return 401;
	}
	if (!*path || (*path)[0] != '/') {
		snprintf(msg, msgsz, "path must be an absolute path: '%s'", *path ? *path : "");
		return 400;
	}
	if (strlen(*path) >= PATH_MAX) {
		snprintf(msg, msgsz, "path is too long");
		return 400;
	}
	return 0;
}

/* ---- GET /hangar/v1/archive ---------------------------------------------- */

struct capture_stream {
	pid_t pid;
	int data_fd;
	int note_fd;
	char path[PATH_MAX];
};

static ssize_t capture_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct capture_stream *cs = cls;
	struct ckpt_note note;
	ssize_t n;
	int rc;

	(void)pos;
	do
		n = read(cs->data_fd, buf, max);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		return n;
	if (n < 0)
		kill(cs->pid, SIGKILL); /* the pipe failed: the child may still be writing */
	/* The end of the stream is good only if the child says so. */
	rc = wait_child(cs->pid);
	cs->pid = 0;
	if (n == 0 && rc == 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (note_read(cs->note_fd, &note) == 0 && note.status != 200)
		envd_log("capture of %s failed: %s", cs->path, note.message);
	else
		envd_log("capture of %s failed (child status %d)", cs->path, rc);
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

static void capture_free(void *cls)
{
	struct capture_stream *cs = cls;

	close_fd(&cs->data_fd);
	if (cs->pid > 0) {
		/* The client went away: the rest of the stream is not wanted. */
		kill(cs->pid, SIGKILL);
		wait_child(cs->pid);
	}
	close_fd(&cs->note_fd);
	free(cs);
}

unsigned ckpt_capture(struct envd_req *r, struct MHD_Response **resp)
{
	struct envd_user user;
	const char *path, *sel = envd_req_query(r, "select"), *args[2];
	struct capture_stream *cs;
	struct ckpt_note note;
	int data[2] = { -1, -1 }, notep[2] = { -1, -1 }, keep[2];
	char msg[PATH_MAX + 128];
	unsigned status;

	status = common_params(r, &user, &path, msg, sizeof(msg));
	if (status) {
		*resp = envd_rest_error((int)status, "%s", msg);
		return status;
	}
	if (sel && strcmp(sel, "auto") != 0 && strcmp(sel, "all") != 0) {
		*resp = envd_rest_error(400, "select must be auto or all: '%s'", sel);
		return 400;
	}
	cs = calloc(1, sizeof(*cs));
	if (!cs || pipe2(data, O_CLOEXEC) < 0 || pipe2(notep, O_CLOEXEC) < 0) {
		free(cs);
		close_fd(&data[0]);
		close_fd(&data[1]);
		*resp = envd_rest_error(500, "cannot start a capture: %s", strerror(errno ? errno : ENOMEM));
		return 500;
	}
	args[0] = path;
	args[1] = sel && strcmp(sel, "all") == 0 ? "all" : "auto";
	keep[0] = data[1];
	keep[1] = notep[1];
	cs->pid = spawn_worker(&user, "capture", args, 2, keep, 2);
	close_fd(&data[1]);
	close_fd(&notep[1]);
	cs->data_fd = data[0];
	cs->note_fd = notep[0];
	/* Fewer wake-ups for both sides of a stream that is mostly bulk. */
	fcntl(cs->data_fd, F_SETPIPE_SZ, CAPTURE_PIPE);
	snprintf(cs->path, sizeof(cs->path), "%s", path);
	if (cs->pid < 0) {
		cs->pid = 0;
		capture_free(cs);
		*resp = envd_rest_error(500, "cannot start a capture: %s", strerror(errno));
		return 500;
	}
	if (note_read(cs->note_fd, &note) < 0 || note.status != 200) {
		int rc = wait_child(cs->pid);

		cs->pid = 0;
		capture_free(cs);
		if (note.status >= 400 && note.status <= 599) {
			*resp = envd_rest_error(note.status, "%s", note.message);
			return (unsigned)note.status;
		}
		*resp = envd_rest_error(500, "the capture ended before it started (status %d)", rc);
		return 500;
	}
	*resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, CAPTURE_BLOCK, capture_read, cs, capture_free);
	if (!*resp) {
		capture_free(cs);
		*resp = envd_rest_error(500, "out of memory");
		return 500;
	}
	MHD_add_response_header(*resp, "Content-Type", "application/zstd");
	MHD_add_response_header(*resp, "X-Hangar-Selection", note.selection);
	MHD_add_response_header(*resp, "Cache-Control", "no-store");
	return 200;
}

/* ---- PUT /hangar/v1/archive ---------------------------------------------- */

struct ckpt_restore {
	unsigned status;              /* a refusal before the child started */
	char msg[512];
	pid_t pid;
	int data_fd, go_fd, note_fd;
	struct envd_user user;
};

/* The media type without parameters, compared case-insensitively. */
static int media_type_is(const char *ct, const char *want)
{
	size_t n = strlen(want);

	while (ct && (*ct == ' ' || *ct == '\t'))
		ct++;
	if (!ct || strncasecmp(ct, want, n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t';
}

static void restore_refuse(struct ckpt_restore *c, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void restore_refuse(struct ckpt_restore *c, unsigned status, const char *fmt, ...)
{
	va_list ap;

	c->status = status;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

struct ckpt_restore *ckpt_restore_begin(struct envd_req *r)
{
	struct ckpt_restore *c = calloc(1, sizeof(*c));
	const char *path = NULL, *args[3], *mode = envd_req_query(r, "mode"), *ct = envd_req_header(r, "Content-Type");
	int data[2] = { -1, -1 }, go[2] = { -1, -1 }, notep[2] = { -1, -1 }, keep[3], zstd = 0;
	unsigned status;

	if (!c)
		return NULL;
	c->data_fd = c->go_fd = c->note_fd = -1;
	status = common_params(r, &c->user, &path, c->msg, sizeof(c->msg));
	if (status) {
		c->status = status;
		return c;
	}
	if (!mode || (strcmp(mode, "replace") != 0 && strcmp(mode, "merge") != 0)) {
		restore_refuse(c, 400, "mode must be replace or merge: '%s'", mode ? mode : "");
		return c;
	}
	if (media_type_is(ct, "application/zstd")) {
		zstd = 1;
	} else if (!media_type_is(ct, "application/x-tar")) {
		restore_refuse(c, 400, "Content-Type must be application/x-tar or application/zstd: '%s'",
			       ct ? ct : "");
		return c;
	}
	if (pipe2(data, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(notep, O_CLOEXEC) < 0) {
		restore_refuse(c, 500, "cannot start a restore: %s", strerror(errno));
		close_fd(&data[0]);
		close_fd(&data[1]);
		close_fd(&go[0]);
		close_fd(&go[1]);
		return c;
	}
	args[0] = path;
	args[1] = strcmp(mode, "merge") == 0 ? "merge" : "replace";
	args[2] = zstd ? "zstd" : "tar";
	keep[0] = data[0];
	keep[1] = go[0];
	keep[2] = notep[1];
	c->pid = spawn_worker(&c->user, "restore", args, 3, keep, 3);
	/* Room for the body while the worker writes files: fewer stalls of this thread. */
	fcntl(data[1], F_SETPIPE_SZ, CAPTURE_PIPE);
	if (c->pid < 0) {
		c->pid = 0;
		restore_refuse(c, 500, "cannot start a restore: %s", strerror(errno));
	}
	close(data[0]);
	close(go[0]);
	close(notep[1]);
	c->data_fd = data[1];
	c->go_fd = go[1];
	c->note_fd = notep[0];
	return c;
}

void ckpt_restore_data(struct ckpt_restore *c, const char *data, size_t len)
{
	if (!c || c->status || c->data_fd < 0)
		return;
	while (len > 0) {
		ssize_t n = write(c->data_fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* The child stopped reading: it refused something and says
			 * what at the end; the rest of the body is read and dropped. */
			close_fd(&c->data_fd);
			return;
		}
		data += n;
		len -= (size_t)n;
	}
}

unsigned ckpt_restore_finish(struct ckpt_restore *c, struct MHD_Response **resp)
{
	struct ckpt_note note;
	int rc;

	if (c->status || c->pid <= 0) {
		*resp = envd_rest_error((int)(c->status ? c->status : 500), "%s", c->status ? c->msg : "no restore");
		return c->status ? c->status : 500;
	}
	/* The body ended cleanly: the child may commit once the archive did too. */
	close_fd(&c->data_fd);
	if (write(c->go_fd, "g", 1) != 1)
		envd_log("restore: cannot signal the end of the body: %s", strerror(errno));
	close_fd(&c->go_fd);
	rc = note_read(c->note_fd, &note);
	wait_child(c->pid);
	c->pid = 0;
	if (rc < 0 || note.status < 200 || note.status > 599) {
		*resp = envd_rest_error(500, "the restore ended without a result");
		return 500;
	}
	if (note.status != 200) {
		*resp = envd_rest_error(note.status, "%s", note.message);
		return (unsigned)note.status;
	}
	{
		char json[256];
		int n = snprintf(json, sizeof(json), "{\"files\":%lld,\"dirs\":%lld,\"symlinks\":%lld,\"bytes\":%lld}",
				 (long long)note.files, (long long)note.dirs, (long long)note.symlinks,
				 (long long)note.bytes);

		*resp = MHD_create_response_from_buffer((size_t)n, json, MHD_RESPMEM_MUST_COPY);
	}
	if (!*resp) {
		*resp = envd_rest_error(500, "out of memory");
		return 500;
	}
	MHD_add_response_header(*resp, "Content-Type", "application/json");
	return 200;
}

void ckpt_restore_free(struct ckpt_restore *c)
{
	if (!c)
		return;
	/* Unfinished: the child sees the body end without the go-ahead, removes
	 * its staging directory and exits; wait for that. */
	close_fd(&c->data_fd);
	close_fd(&c->go_fd);
	if (c->pid > 0)
		wait_child(c->pid);
	close_fd(&c->note_fd);
	free(c);
}
