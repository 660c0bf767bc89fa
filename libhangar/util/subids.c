#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "subids.h"

int subids_parse(const char *s, unsigned min, unsigned *start, unsigned *count)
{
	char *end;
	unsigned long long a, b;

	errno = 0;
	a = strtoull(s, &end, 10);
	if (errno || end == s || *end != ':')
		return -1;
	s = end + 1;
	b = strtoull(s, &end, 10);
	if (errno || end == s || (*end && *end != '\n'))
		return -1;
	/* Never host root, never above the 32-bit "no uid" value. */
	if (a == 0 || b < min || a + b > 0xffffffffULL)
		return -1;
	*start = (unsigned)a;
	*count = (unsigned)b;
	return 0;
}

int subids_own(const char *file, unsigned min, unsigned *start, unsigned *count)
{
	struct passwd pwbuf, *pw = NULL;
	char line[512], uid[32], names[1024];
	FILE *f = fopen(file, "re");
	int found = -1;

	if (!f)
		return -1;
	/* getpwuid_r: a fork's children are made from threads at once, and
	 * getpwuid's one static answer can change under another's feet. */
	if (getpwuid_r(geteuid(), &pwbuf, names, sizeof(names), &pw) != 0)
		pw = NULL;
	snprintf(uid, sizeof(uid), "%u", (unsigned)geteuid());
	while (found < 0 && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if ((pw && !strcmp(line, pw->pw_name)) || !strcmp(line, uid))
			found = subids_parse(colon + 1, min, start, count);
	}
	fclose(f);
	return found;
}

int subids_image_range(unsigned us, unsigned uc, unsigned gs, unsigned gc, unsigned *uid, unsigned *gid)
{
	unsigned slots = (uc < gc ? uc : gc) / SUBIDS_SLOT;

	if (slots < 2)
		return -1;
	*uid = us + (slots - 1) * SUBIDS_SLOT;
	*gid = gs + (slots - 1) * SUBIDS_SLOT;
	return 0;
}

int subids_caller_image_range(unsigned *uid, unsigned *gid)
{
	unsigned us, uc, gs, gc;

	if (geteuid() == 0 || access(SUBIDS_NEWUIDMAP, X_OK) < 0 || access(SUBIDS_NEWGIDMAP, X_OK) < 0 ||
	    subids_own("/etc/subuid", SUBIDS_MIN, &us, &uc) < 0 || subids_own("/etc/subgid", SUBIDS_MIN, &gs, &gc) < 0)
		return -1;
	return subids_image_range(us, uc, gs, gc, uid, gid);
}

/* 0 when pid's map (the one tool writes) holds exactly lines, else -1. */
static int map_holds(const char *tool, pid_t pid, const struct subids_line *lines, size_t n)
{
	char path[64];
	unsigned in, out, count;
	size_t i = 0;
	FILE *f;
	int ok = 1;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, strcmp(tool, SUBIDS_NEWGIDMAP) ? "uid_map" : "gid_map");
	if (!(f = fopen(path, "re")))
		return -1;
	while (ok && fscanf(f, "%u %u %u", &in, &out, &count) == 3) {
		ok = i < n && lines[i].inside == in && lines[i].outside == out && lines[i].count == count;
		i++;
	}
	fclose(f);
	return ok && i == n ? 0 : -1;
}

int subids_map(const char *tool, pid_t pid, const struct subids_line *lines, size_t n)
{
	char text[1 + 4 * 3][16];
	char *argv[2 + 4 * 3 + 1];
	size_t a = 0;
	int status;
	pid_t p;

	if (n > 4)
		return -1;
	argv[a++] = (char *)tool;
	snprintf(text[0], sizeof(text[0]), "%d", (int)pid);
	argv[a++] = text[0];
	for (size_t i = 0; i < n; i++) {
		unsigned v[3] = { lines[i].inside, lines[i].outside, lines[i].count };

		for (size_t k = 0; k < 3; k++) {
			snprintf(text[1 + 3 * i + k], sizeof(text[0]), "%u", v[k]);
			argv[a++] = text[1 + 3 * i + k];
		}
	}
	argv[a] = NULL;
	p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* Its complaints go to no one's terminal; the caller reports the failure. */
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(tool, argv);
		_exit(127);
	}
	while (waitpid(p, &status, 0) < 0) {
		/*
		 * A caller that ignores SIGCHLD has its children reaped by the
		 * kernel: the wait ends when the tool does, without its status.
		 * What it was to do is checked instead.
		 */
		if (errno == ECHILD)
			return map_holds(tool, pid, lines, n);
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* All n bytes, through EINTR and short reads: 0, or -1 (error, or EOF first). */
static int read_full(int fd, void *buf, size_t n)
{
	for (size_t have = 0; have < n;) {
		ssize_t r = read(fd, (char *)buf + have, n - have);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		have += (size_t)r;
	}
	return 0;
}

/* All n bytes, through EINTR and short writes: 0, or -1. */
static int write_full(int fd, const void *buf, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, (const char *)buf + done, n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

/* The parent's writes down: never SIGPIPE in the library's process when the child is gone. 0, or -1. */
static int send_full(int fd, const void *buf, size_t n)
{
	for (size_t done = 0; done < n;) {
		ssize_t w = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

/*
 * The child and its parent speak over a pipe up and a socket pair down
 * (a socket, so that the parent's writes to a dead child fail with EPIPE
 * rather than raise SIGPIPE in the caller's process). Up, the child sends 'u'
 * (its namespace is made: map it), 'p' and a uint64_t (progress, answered
 * down by one byte, non-zero to stop), and last 'r', a struct result, the
 * msg buffer and, when fn ran, the out buffer. Down, the parent sends 'g'
 * once the maps are written, or closes the pipe when they could not be.
 */
struct result {
	int rc;
	int step; /* enum subids_step */
};

/* In the child: its pipes to the parent, for subids_progress. */
static int child_up = -1, child_down = -1;

int subids_progress(uint64_t bytes, void *payload)
{
	unsigned char msg[1 + sizeof(bytes)] = { 'p' };
	char stop;

	(void)payload;
	if (child_up < 0)
		return 0;
	memcpy(msg + 1, &bytes, sizeof(bytes));
	/* A parent that is gone stops fn. */
	if (write_full(child_up, msg, sizeof(msg)) < 0 || read_full(child_down, &stop, 1) < 0)
		return 1;
	return stop;
}

/* The child: makes its namespace, waits to be mapped, becomes its root, runs fn, sends the result. */
static void __attribute__((noreturn)) child(const struct subids_call *c, pid_t parent, int up, int down)
{
	struct result res = { 0, SUBIDS_RAN };
	char none = '\0', *msg = c->msg ? c->msg : &none;
	size_t size = c->msg ? c->msg_size : 1;
	char go;

	/* Dies with the thread that forked it, and at once if that is gone before the signal was set. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	msg[0] = '\0';
	if (unshare(CLONE_NEWUSER) < 0) {
		res = (struct result){ -errno, SUBIDS_USERNS };
	} else if (write_full(up, "u", 1) < 0 || read_full(down, &go, 1) < 0) {
		res = (struct result){ -EPERM, SUBIDS_MAP };
	} else if (setresgid(0, 0, 0) < 0 || setgroups(0, NULL) < 0 || setresuid(0, 0, 0) < 0) {
		res = (struct result){ -errno, SUBIDS_ROOT };
	} else {
		/* Becoming root here changed the effective ids, which clears the parent-death signal. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(1);
		child_up = up;
		child_down = down;
		res.rc = c->fn(c->arg, msg, size);
		msg[size - 1] = '\0';
	}
	write_full(up, "r", 1);
	write_full(up, &res, sizeof(res));
	if (c->msg)
		write_full(up, msg, size);
	if (res.step == SUBIDS_RAN && c->out && c->out_size)
		write_full(up, c->out, c->out_size);
	_exit(0);
}

/* The parent's side: maps the child when it asks, answers its progress, reads its result. 0, or -1 (it died). */
static int serve(const struct subids_call *c, pid_t p, int up, int *down, struct result *res)
{
	char type, stop;
	uint64_t bytes;

	for (;;) {
		if (read_full(up, &type, 1) < 0)
			return -1;
		switch (type) {
		case 'u':
			if (subids_map(SUBIDS_NEWUIDMAP, p, c->uid_map, c->uid_lines) < 0 ||
			    subids_map(SUBIDS_NEWGIDMAP, p, c->gid_map, c->gid_lines) < 0 ||
			    send_full(*down, "g", 1) < 0) {
				/* Unmapped: the child reads EOF and says so. */
				close(*down);
				*down = -1;
			}
			break;
		case 'p':
			if (read_full(up, &bytes, sizeof(bytes)) < 0)
				return -1;
			stop = c->progress && c->progress(bytes, c->payload) ? 1 : 0;
			if (send_full(*down, &stop, 1) < 0)
				return -1;
			break;
		case 'r':
			if (read_full(up, res, sizeof(*res)) < 0 || res->step < SUBIDS_RAN || res->step > SUBIDS_DIED ||
			    (c->msg && read_full(up, c->msg, c->msg_size) < 0))
				return -1;
			if (res->step == SUBIDS_RAN && c->out && c->out_size && read_full(up, c->out, c->out_size) < 0)
				return -1;
			return 0;
		default:
			return -1;
		}
	}
}

int subids_run(const struct subids_call *c, enum subids_step *step)
{
	struct result res = { -EIO, SUBIDS_DIED };
	pid_t parent = getpid(), p;
	int up[2], down[2], status;

	if (c->msg)
		c->msg[0] = '\0';
	if (pipe2(up, O_CLOEXEC) < 0) {
		*step = SUBIDS_PIPE;
		return -errno;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, down) < 0) {
		res.rc = -errno;
		close(up[0]);
		close(up[1]);
		*step = SUBIDS_PIPE;
		return res.rc;
	}
	p = fork();
	if (p == 0) {
		close(up[0]);
		close(down[1]);
		child(c, parent, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (p < 0) {
		res.rc = -errno;
		close(up[0]);
		close(down[1]);
		*step = SUBIDS_FORK;
		return res.rc;
	}
	if (serve(c, p, up[0], &down[1], &res) < 0)
		res = (struct result){ -EIO, SUBIDS_DIED };
	close(up[0]);
	if (down[1] >= 0)
		close(down[1]);
	while (waitpid(p, &status, 0) < 0 && errno == EINTR)
		;
	if (c->msg)
		c->msg[res.step == SUBIDS_RAN ? c->msg_size - 1 : 0] = '\0';
	*step = (enum subids_step)res.step;
	return res.rc;
}
