/*
 * Exposing a sandbox's TCP ports to the caller.
 *
 * The library asks on ports.sock ("expose PORT\n"; only our own uid is
 * answered). For each port the jail listens on an ephemeral port of the
 * host's 127.0.0.1 and forks a forwarder that enters the sandbox's network
 * namespace (and, unprivileged, the user namespace owning it): every
 * connection it accepts on the host's listener gets a socket of its own made
 * inside the sandbox, connected to the port on the sandbox's loopback, and
 * the bytes are relayed both ways. A socket keeps the namespace it was made
 * in, so the listener stays on the host and the connections stay inside.
 *
 * This works alike with network on and off: the sandbox itself never gets a
 * route to the host, so another sandbox reaches the exposed port no more than
 * it reaches any other service on the host's loopback. Nothing is exposed
 * until asked; exposing a port again answers the same address.
 *
 * ports.sock also takes the one request that is not about ports, "rotate OLD
 * NEW\n": a sandbox of the warm pool changing hands (token.c). It is here
 * because this socket waits for a request line, where jail.sock answers at
 * once.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "jail.h"

#define PORTS_MAX 64            /* exposed ports per sandbox */
#define CONNS_MAX 128           /* connections one forwarder relays at once */
#define RELAY_BUF 16384
#define REQUEST_WAIT_MS 2000    /* for the library's request line */
#define CONNECT_WAIT_SEC 5      /* for the sandbox's server to accept */

struct forwarder {
	unsigned port, host_port;
	pid_t pid;
	int pidfd;
};

static struct forwarder fwd[PORTS_MAX];
static size_t nfwd;

int ports_listen(const char *dir)
{
	return listen_unix(dir, "ports.sock", 16);
}

static int alive(const struct forwarder *f)
{
	struct pollfd p = { f->pidfd, POLLIN, 0 };

	return poll(&p, 1, 0) == 0;
}

/* ---- the forwarder (a child of the jail, inside the sandbox's network namespace) ---- */

struct conn {
	int fd[2];                /* 0: the caller's side (host), 1: the sandbox's */
	char buf[2][RELAY_BUF];   /* buf[i]: read from fd[i], to write to fd[!i] */
	size_t len[2], off[2];
	int eof[2];               /* fd[i] said EOF (or failed) */
	int shut[2];              /* fd[i] was told SHUT_WR */
};

/* A socket in the current (the sandbox's) namespace, connected to port on its loopback; -1. */
static int connect_inside(unsigned port)
{
	struct timeval tv = { CONNECT_WAIT_SEC, 0 };
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	int fd;

	a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a6.sin6_addr = in6addr_loopback;
	/* 127.0.0.1, then ::1 for a server listening on IPv6 only. */
	for (int v6 = 0; v6 < 2; v6++) {
		fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		/* A full backlog would hold connect() for good: SO_SNDTIMEO bounds it. */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, v6 ? (struct sockaddr *)&a6 : (struct sockaddr *)&a4,
			    v6 ? sizeof(a6) : sizeof(a4)) == 0) {
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			return fd;
		}
		close(fd);
	}
	return -1;
}

static void conn_close(struct conn **c)
{
	close((*c)->fd[0]);
	close((*c)->fd[1]);
	free(*c);
	*c = NULL;
}

/* Moves what can move without blocking; 0 while the connection lasts, -1 when it is over. */
static int conn_step(struct conn *c, const short revents[2])
{
	for (int i = 0; i < 2; i++) {
		int o = !i;

		if (!c->eof[i] && c->len[i] == 0 && (revents[i] & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = read(c->fd[i], c->buf[i], RELAY_BUF);

			if (n > 0) {
				c->len[i] = (size_t)n;
				c->off[i] = 0;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				c->eof[i] = 1;
			}
		}
		if (c->len[i] > c->off[i]) {
			ssize_t n = send(c->fd[o], c->buf[i] + c->off[i], c->len[i] - c->off[i],
					 MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n > 0)
				c->off[i] += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -1; /* the other side is gone: drop both */
			if (c->off[i] == c->len[i])
				c->len[i] = c->off[i] = 0;
		}
		if (c->eof[i] && c->len[i] == 0 && !c->shut[o]) {
			shutdown(c->fd[o], SHUT_WR);
			c->shut[o] = 1;
		}
	}
	return c->shut[0] && c->shut[1] ? -1 : 0;
}

static void forward(int lfd, unsigned port)
{
	static struct conn *conns[CONNS_MAX];
	static struct pollfd p[1 + 2 * CONNS_MAX];

	for (;;) {
		size_t n = 0, live = 0;

		p[n++] = (struct pollfd){ lfd, POLLIN, 0 };
		for (size_t i = 0; i < CONNS_MAX; i++) {
			struct conn *c = conns[i];

			if (!c)
				continue;
			live++;
			for (int s = 0; s < 2; s++) {
				short ev = 0;

				if (!c->eof[s] && c->len[s] == 0)
					ev |= POLLIN;
				if (c->len[!s] > c->off[!s])
					ev |= POLLOUT;
				p[n++] = (struct pollfd){ c->fd[s], ev, 0 };
			}
		}
		/* At the connection limit, new callers wait in the listener's backlog. */
		if (live == CONNS_MAX)
			p[0].events = 0;
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		n = 1;
		for (size_t i = 0; i < CONNS_MAX; i++) {
			short rev[2];

			if (!conns[i])
				continue;
			rev[0] = p[n++].revents;
			rev[1] = p[n++].revents;
			if (conn_step(conns[i], rev) < 0)
				conn_close(&conns[i]);
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), s;
			size_t slot = 0;

			if (c < 0)
				continue;
			while (slot < CONNS_MAX && conns[slot])
				slot++;
			s = slot < CONNS_MAX ? connect_inside(port) : -1;
			if (s < 0 || !(conns[slot] = calloc(1, sizeof(struct conn)))) {
				/* Nothing listens on the port inside: the caller sees the connection closed. */
				close(c);
				if (s >= 0)
					close(s);
				continue;
			}
			conns[slot]->fd[0] = c;
			conns[slot]->fd[1] = s;
		}
	}
}

/* Closes every descriptor from 3 up except keep[]. */
static void close_others(const int *keep, size_t nkeep)
{
	long max = sysconf(_SC_OPEN_MAX);

	if (max < 0 || max > 65536)
		max = 65536;
	for (int fd = 3; fd < max; fd++) {
		size_t i = 0;

		while (i < nkeep && keep[i] != fd)
			i++;
		if (i == nkeep)
			close(fd);
	}
}

/*
 * In the child: no token, no way to be traced, gone with the jail; then into
 * the sandbox's namespaces (the user namespace first, unprivileged, as the
 * network namespace belongs to it). Never returns.
 */
static void forwarder_main(int lfd, int userfd, int netfd, unsigned port, pid_t jail)
{
	int keep[] = { lfd, userfd, netfd };

	forget_token();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_DUMPABLE, 0);
	close_others(keep, 3);
	if (userfd >= 0 && setns(userfd, CLONE_NEWUSER) < 0) {
		say("ports: cannot enter the sandbox's user namespace: %s", strerror(errno));
		_exit(1);
	}
	if (setns(netfd, CLONE_NEWNET) < 0) {
		say("ports: cannot enter the sandbox's network namespace: %s", strerror(errno));
		_exit(1);
	}
	/* New credentials (entering a user namespace) reset both: set them again. */
	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != jail)
		_exit(0); /* the jail is gone already */
	if (userfd >= 0)
		close(userfd);
	close(netfd);
	forward(lfd, port);
	_exit(0);
}

/* Starts a forwarder for port; writes "ok 127.0.0.1:N" or "error ..." to reply. */
static void expose(unsigned port, pid_t bwrap, char *reply, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct stat mine, theirs;
	char path[64];
	pid_t init, pid, jail = getpid();
	int lfd = -1, netfd = -1, userfd = -1, pidfd;

	for (size_t i = 0; i < nfwd; i++)
		if (fwd[i].port == port) {
			if (alive(&fwd[i])) {
				snprintf(reply, size, "ok 127.0.0.1:%u\n", fwd[i].host_port);
				return;
			}
			/* Its forwarder died: forget it and start another. */
			close(fwd[i].pidfd);
			fwd[i] = fwd[--nfwd];
			break;
		}
	if (nfwd == PORTS_MAX) {
		snprintf(reply, size, "error at most %d ports of a sandbox can be exposed\n", PORTS_MAX);
		return;
	}
	init = bwrap > 0 ? lstate_first_child(bwrap) : 0;
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)init);
	if (init <= 0 || (netfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(reply, size, "error the sandbox is not running\n");
		return;
	}
	/* Never the jail's own namespace: that would expose the host's port. */
	if (fstat(netfd, &theirs) < 0 || stat("/proc/self/ns/net", &mine) < 0 ||
	    (mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev)) {
		snprintf(reply, size, "error the sandbox has no network namespace of its own\n");
		goto out;
	}
	if (geteuid() != 0 && (userfd = ioctl(netfd, NS_GET_USERNS)) < 0) {
		snprintf(reply, size, "error cannot find the sandbox's user namespace: %s\n", strerror(errno));
		goto out;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len) < 0) {
		snprintf(reply, size, "error cannot listen on the host's loopback: %s\n", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid == 0)
		forwarder_main(lfd, userfd, netfd, port, jail);
	if (pid < 0 || (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0) {
		snprintf(reply, size, "error cannot start a forwarder: %s\n", strerror(errno));
		if (pid > 0)
			kill(pid, SIGKILL);
		goto out;
	}
	fwd[nfwd++] = (struct forwarder){ port, ntohs(sa.sin_port), pid, pidfd };
	snprintf(reply, size, "ok 127.0.0.1:%u\n", (unsigned)ntohs(sa.sin_port));
out:
	if (lfd >= 0)
		close(lfd);
	if (userfd >= 0)
		close(userfd);
	close(netfd);
}

/* Reads one request line from c within REQUEST_WAIT_MS; 0 or -1. */
static int read_request(int c, char *buf, size_t size)
{
	size_t have = 0;

	while (have + 1 < size) {
		struct pollfd p = { c, POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, REQUEST_WAIT_MS) <= 0)
			return -1;
		n = read(c, buf + have, size - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = '\0';
		if (memchr(buf, '\n', have))
			return 0;
	}
	return -1;
}

/* "OLD NEW\n" (wiped here): token_rotate(). 0, or -1. */
static int rotate(char *args)
{
	char *fresh = strchr(args, ' '), *end = strchr(args, '\n');
	int r = -1;

	if (fresh && end && fresh < end) {
		*fresh++ = '\0';
		*end = '\0';
		r = token_rotate(args, fresh);
	}
	explicit_bzero(args, strlen(args));
	if (fresh)
		explicit_bzero(fresh, strlen(fresh));
	return r;
}

void ports_serve(int lfd, pid_t bwrap)
{
	uid_t me = geteuid();

	for (int batch = 0; batch < 16; batch++) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		char req[2 * 1024 + 16], reply[256], tail = 0;
		unsigned port = 0;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred) ||
		    cred.uid != me) {
			say("ports.sock: refused a connection from uid %d", len == sizeof(cred) ? (int)cred.uid : -1);
			close(c);
			continue;
		}
		if (read_request(c, req, sizeof(req)) < 0) {
			close(c);
			continue;
		}
		if (!strncmp(req, "rotate ", 7))
			/* The token: a warm pool's sandbox handed to its caller ("rotate OLD NEW\n"). */
			snprintf(reply, sizeof(reply), "%s", rotate(req + 7) == 0 ? "ok\n" : "error refused\n");
		else if (sscanf(req, "expose %5u%c", &port, &tail) != 2 || tail != '\n' || port < 1 || port > 65535)
			snprintf(reply, sizeof(reply), "error not a request: expose PORT (1 to 65535)\n");
		else
			expose(port, bwrap, reply, sizeof(reply));
		explicit_bzero(req, sizeof(req));
		if (send(c, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			say("ports.sock: cannot answer: %s", strerror(errno));
		close(c);
	}
}

void ports_stop(void)
{
	for (size_t i = 0; i < nfwd; i++) {
		syscall(SYS_pidfd_send_signal, fwd[i].pidfd, SIGKILL, NULL, 0);
		close(fwd[i].pidfd);
	}
	nfwd = 0;
}
