/*
 * The checkpoint endpoints' HTTP side (ckpt.h): request checks, the child
 * each request runs in, and the pipes between them.
 *
 * A child is forked rather than spawned with exec: it runs libarchive,
 * libzstd and the directory walks in a copy of the daemon, single-threaded
 * from the fork on, after it has given up root. glibc makes malloc usable in
 * the child of a threaded process; nothing else the child calls takes a lock
 * another thread of the daemon could have held (user and group look-ups are
 * made before the fork).
 */
#define _GNU_SOURCE
#include "ckpt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <microhttpd.h>
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

void ckpt_note_send(int fd, const struct ckpt_note *n)
{
	ssize_t w;

	do
		w = write(fd, n, sizeof(*n));
	while (w < 0 && errno == EINTR);
}

int ckpt_fail(struct ckpt_note *n, int status, const char *fmt, ...)
{
	va_list ap;

	if (n->status && n->status != 200)
		return -1;
	n->status = status;
	va_start(ap, fmt);
	vsnprintf(n->message, sizeof(n->message), fmt, ap);
	va_end(ap);
	return -1;
}

void ckpt_quote_name(const char *name, char *out, size_t max)
{
	size_t n = 0;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		if (n + 8 >= max) {
			memcpy(out + n, "...", 4);
			return;
		}
		if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
			n += (size_t)snprintf(out + n, max - n, *s == '"' || *s == '\\' ? "\\%c" : "\\x%02x", *s);
		else
			out[n++] = (char)*s;
	}
	out[n] = '\0';
}

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

/* ---- the child ----------------------------------------------------------- */

typedef int (*child_fn)(const void *arg);

static void close_all_but(int *keep, int nkeep)
{
	int lo = 3;

	/* Sorted, so the gaps between them can be closed in order. */
	for (int i = 1; i < nkeep; i++)
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];

			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (int i = 0; i <= nkeep; i++) {
		int hi = i < nkeep ? keep[i] - 1 : INT_MAX;

		if (hi >= lo && syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0) < 0)
			for (int fd = lo; fd <= hi && fd < 65536; fd++)
				close(fd);
		if (i < nkeep)
			lo = keep[i] + 1;
	}
}

/*
 * Forks a child that keeps only the descriptors in keep (and 0-2), becomes
 * u for good and returns fn's result as its exit status. The parent gets
 * the pid, or -1 with errno set.
 */
static pid_t spawn_as_user(const struct envd_user *u, int *keep, int nkeep, child_fn fn, const void *arg)
{
	gid_t groups[ENVD_MAX_GROUPS];
	int ngroups = envd_cfg.is_root ? envd_user_groups(u, groups, ENVD_MAX_GROUPS) : 0;
	pid_t parent = getpid(), pid;
	sigset_t none;

	pid = fork();
	if (pid != 0)
		return pid;

	/* The child: the daemon's secret is no business of the user's. */
	if (envd_cfg.token)
		explicit_bzero(envd_cfg.token, strlen(envd_cfg.token));
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(125);
	close_all_but(keep, nkeep);
	if (envd_cfg.is_root) {
		if (syscall(SYS_setgroups, (size_t)ngroups, groups) < 0 || setresgid(u->gid, u->gid, u->gid) < 0 ||
		    setresuid(u->uid, u->uid, u->uid) < 0)
			_exit(125);
		if (u->uid != 0 && setuid(0) == 0)
			_exit(125);
	}
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	umask(022);
	_exit(fn(arg));
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

static int capture_entry(const void *arg)
{
	return ckpt_capture_child(arg);
}

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
	const char *path, *sel = envd_req_query(r, "select");
	struct ckpt_capture_args a = { 0 };
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
	a.envp = envd_build_env(&user, NULL);
	if (!cs || !a.envp || pipe2(data, O_CLOEXEC) < 0 || pipe2(notep, O_CLOEXEC) < 0) {
		free(cs);
		free(a.envp);
		close_fd(&data[0]);
		close_fd(&data[1]);
		*resp = envd_rest_error(500, "cannot start a capture: %s", strerror(errno ? errno : ENOMEM));
		return 500;
	}
	a.user = &user;
	a.path = path;
	a.select_all = sel && strcmp(sel, "all") == 0;
	a.data_fd = data[1];
	a.note_fd = notep[1];
	keep[0] = data[1];
	keep[1] = notep[1];
	cs->pid = spawn_as_user(&user, keep, 2, capture_entry, &a);
	free(a.envp);
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

static int restore_entry(const void *arg)
{
	return ckpt_restore_child(arg);
}

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
	struct ckpt_restore_args a = { 0 };
	const char *path = NULL, *mode = envd_req_query(r, "mode"), *ct = envd_req_header(r, "Content-Type");
	int data[2] = { -1, -1 }, go[2] = { -1, -1 }, notep[2] = { -1, -1 }, keep[3];
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
		a.zstd = 1;
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
	a.user = &c->user;
	a.path = path;
	a.merge = strcmp(mode, "merge") == 0;
	a.data_fd = data[0];
	a.go_fd = go[0];
	a.note_fd = notep[1];
	keep[0] = data[0];
	keep[1] = go[0];
	keep[2] = notep[1];
	c->pid = spawn_as_user(&c->user, keep, 3, restore_entry, &a);
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
