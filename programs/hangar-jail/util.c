/*
 * Small helpers every part of the jail uses: its messages (on stderr, which
 * the library keeps as the sandbox's log), clocks, growing argument vectors
 * and the unix sockets it listens on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("hangar-jail: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

const char *const usr_tops[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL };

int host_top(const char *name, char *target, size_t size)
{
	char host[PATH_MAX];
	struct stat st;
	ssize_t n;

	snprintf(host, sizeof(host), "/%s", name);
	if (lstat(host, &st) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return 'd';
	if (!S_ISLNK(st.st_mode) || size < 2 || (n = readlink(host, target, size - 1)) <= 0)
		return 0;
	target[n] = '\0';
	return 'l';
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


static int timeline_fd = -1;

void timeline_open(const char *dir)
{
	if (timeline_fd < 0)
		timeline_fd = lstate_timeline_open(dir);
}

int timeline_descriptor(void)
{
	return timeline_fd;
}

void mark(const char *phase)
{
	lstate_timeline_mark(timeline_fd, phase);
}
