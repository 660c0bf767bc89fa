/*
 * envd's access token. It lives only in memory, never on disk: read once
 * from the library's pipe, locked out of swap where allowed, handed to envd
 * through a pipe of its own, served on jail.sock to the jail's own uid (how
 * the library learns it again after a restart) and wiped on exit and in
 * every child that needs none.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jail.h"

#define TOKEN_MAX 1024

static char token[TOKEN_MAX + 1];
static size_t token_len;

/* Compares n bytes without stopping at the first difference. */
static int sodium_like_eq(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

void forget_token(void)
{
	explicit_bzero(token, sizeof(token));
	token_len = 0;
}

/* Reads the token from fd (a pipe from the library) until EOF, and closes fd. 0, or -1 said. */
int token_read(int fd)
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
int token_pipe(void)
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

int token_rotate(const char *old, const char *fresh)
{
	size_t olen = strlen(old), flen = strlen(fresh);
	int ok;

	/* Same uid only (ports.sock checks); a wrong OLD is refused all the same. */
	ok = token_len > 0 && olen == token_len && sodium_like_eq(old, token, token_len) && flen > 0 &&
	     flen <= TOKEN_MAX && !memchr(fresh, ' ', flen) && !memchr(fresh, '\n', flen);
	if (!ok)
		return -1;
	explicit_bzero(token, sizeof(token));
	memcpy(token, fresh, flen + 1);
	token_len = flen;
	return 0;
}

/*
 * Answers pending connections on jail.sock (a bounded batch, so a flood
 * cannot starve the signals): the token to a peer with our own uid,
 * nothing to anyone else. Never blocks: accept is non-blocking, and the token
 * fits a fresh socket's buffer in one write.
 */
void token_serve(int lfd)
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
