/*
 * The edge's side towards a sandbox: one HTTP/1.1 connection per forwarded
 * request, over TCP or a unix socket, with every wait bounded by a deadline
 * and cut short when the request is given up. A forwarder needs the raw
 * bytes: a response is streamed on as it arrives, never read whole. Over
 * TLS the same code runs on libcurl's connection (e2b-edge-tls.c), which
 * only sets it up and carries the bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>

#include "clock.h"
#include "e2b-edge.h"

int edge_hop_header(const char *name)
{
	static const char *const hop[] = { "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
					   "Proxy-Authorization", "TE", "Trailer", "Transfer-Encoding",
					   "Upgrade", "Content-Length", "Expect", "Host" };
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (strcasecmp(name, hop[i]) == 0)
			return 1;
	return 0;
}

int up_hostport(const char *url, char *out, size_t cap)
{
	const char *p, *end;
	size_t n;
	int tls;

	if (strncmp(url, "http://", 7) == 0) {
		tls = 0;
		p = url + 7;
	} else if (strncmp(url, "https://", 8) == 0) {
		tls = 1;
		p = url + 8;
	} else {
		return -1;
	}
	end = p + strcspn(p, "/?#");
	n = (size_t)(end - p);
	if (n == 0 || n + 5 >= cap || memchr(p, '@', n))
		return -1;
	memcpy(out, p, n);
	out[n] = '\0';
	/* No port: the scheme's. An IPv6 literal keeps its brackets until up_connect. */
	if (!strrchr(out, ':') || (out[0] == '[' && out[n - 1] == ']'))
		snprintf(out + n, cap - n, tls ? ":443" : ":80");
	return tls;
}

/* Waits for events on fd until deadline_us, in slices of a second so that
 * cancel is asked; 1 ready, 0 time is up or cancelled, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_us, up_cancel_fn cancel, void *payload)
{
	for (;;) {
		int64_t left = deadline_us - clock_mono_us();
		struct pollfd p = { .fd = fd, .events = events };
		int rc;

		if (left <= 0 || (cancel && cancel(payload)))
			return 0;
		rc = poll(&p, 1, left > 1000000 ? 1000 : (int)((left + 999) / 1000));
		if (rc < 0 && errno != EINTR)
			return -1;
		if (rc > 0)
			return 1;
	}
}

int up_connect(const char *hostport, const char *socket_path, int timeout_ms)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (socket_path && socket_path[0]) {
		struct sockaddr_un *un = (struct sockaddr_un *)&ss;
		if (strlen(socket_path) >= sizeof(un->sun_path)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, socket_path, strlen(socket_path) + 1);
		len = sizeof(*un);
	} else {
		char host[256];
		const char *colon = strrchr(hostport, ':');
		size_t hn;
		unsigned long port;
		char *end;

		if (!colon || (hn = (size_t)(colon - hostport)) == 0 || hn >= sizeof(host)) {
			errno = EINVAL;
			return -1;
		}
		memcpy(host, hostport, hn);
		host[hn] = '\0';
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || port == 0 || port > 65535) {
			errno = EINVAL;
			return -1;
		}
		if (host[0] == '[' && host[hn - 1] == ']') {
			memmove(host, host + 1, hn - 2);
			host[hn - 2] = '\0';
		}
		if (strcmp(host, "localhost") == 0)
			snprintf(host, sizeof(host), "127.0.0.1");
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		/* Literals only: the edge never waits on a resolver. */
		if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
			s4->sin_port = htons((uint16_t)port);
			len = sizeof(*s4);
		} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
			s6->sin6_port = htons((uint16_t)port);
			len = sizeof(*s6);
		} else {
			errno = EAFNOSUPPORT;
			return -1;
		}
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (ss.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		int err = 0;
		socklen_t elen = sizeof(err);
		if (errno != EINPROGRESS && errno != EAGAIN)
			goto fail;
		if (wait_fd(fd, POLLOUT, clock_mono_us() + (int64_t)timeout_ms * 1000, NULL, NULL) != 1) {
			errno = ETIMEDOUT;
			goto fail;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
			errno = err ? err : EIO;
			goto fail;
		}
	}
	return fd;
fail:;
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

int up_write_all(struct up *u, const void *buf, size_t len, int64_t deadline_us, up_cancel_fn cancel, void *payload)
{
	const char *p = buf;
	while (len) {
		ssize_t w = u->tls ? up_tls_send(u, p, len) : send(u->fd, p, len, MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd(u->fd, POLLOUT, deadline_us, cancel, payload) != 1)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/* Refills an empty buffer: 1, 0 at end, -1. Over TLS the session is asked
 * before the socket is waited on: it may hold bytes already decrypted. */
static int fill(struct up *u, int64_t deadline_us, up_cancel_fn cancel, void *payload)
{
	if (u->pos < u->len)
		return 1;
	if (u->eof)
		return 0;
	for (;;) {
		ssize_t n = u->tls ? up_tls_recv(u, u->buf, sizeof(u->buf)) : recv(u->fd, u->buf, sizeof(u->buf), 0);
		if (n > 0) {
			u->pos = 0;
			u->len = (size_t)n;
			return 1;
		}
		if (n == 0) {
			u->eof = 1;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_fd(u->fd, POLLIN, deadline_us, cancel, payload) != 1)
			return -1;
	}
}

int up_pending(struct up *u)
{
	struct pollfd p = { .fd = u->fd, .events = POLLIN };
	if (u->pos < u->len || u->eof)
		return 1;
	if (poll(&p, 1, 0) != 1)
		return 0;
	if (!u->tls)
		return 1;
	/* Readable TLS may be the session's own records (tickets), not an answer. */
	ssize_t n = up_tls_recv(u, u->buf, sizeof(u->buf));
	if (n > 0) {
		u->pos = 0;
		u->len = (size_t)n;
		return 1;
	}
	if (n == 0)
		u->eof = 1;
	return n == 0 || (errno != EAGAIN && errno != EINTR);
}

void up_close(struct up *u)
{
	if (u->tls)
		up_tls_close(u);
	else if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
	u->tls = NULL;
}

ssize_t up_read(struct up *u, char *out, size_t cap, int64_t deadline_us, up_cancel_fn cancel, void *payload)
{
	int rc = fill(u, deadline_us, cancel, payload);
	size_t n;
	if (rc <= 0)
		return rc;
	n = u->len - u->pos < cap ? u->len - u->pos : cap;
	memcpy(out, u->buf + u->pos, n);
	u->pos += n;
	return (ssize_t)n;
}

int up_line(struct up *u, char *out, size_t cap, int64_t deadline_us, up_cancel_fn cancel, void *payload)
{
	size_t n = 0;
	for (;;) {
		if (fill(u, deadline_us, cancel, payload) <= 0)
			return -1;
		char c = u->buf[u->pos++];
		if (c == '\n') {
			if (n && out[n - 1] == '\r')
				n--;
			out[n] = '\0';
			return 0;
		}
		if (n + 1 >= cap)
			return -1;
		out[n++] = c;
	}
}

/*
 * Idle connections to envds, kept for the next request to the same socket:
 * a connection set up per request is most of what is left of the edge's
 * cost. Only envd's (a user port's server is the sandbox's users' code,
 * whose answers are not trusted to end where they say), only after an
 * answer whose end its framing marked, and for a few seconds, far within
 * envd's own idle bound.
 */
#define EDGE_KEEP_CONNS 64
#define EDGE_KEEP_S 5

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kept {
	int fd;
	void *tls;
	int64_t since_us;
	char key[4096];
} kept[EDGE_KEEP_CONNS];
static unsigned n_kept;

static void close_kept(struct kept *k)
{
	struct up u = { .fd = k->fd, .tls = k->tls };
	up_close(&u);
}

void up_keep(const char *key, struct up *u)
{
	struct kept drop = { .fd = -1 };
	pthread_mutex_lock(&keep_lock);
	if (n_kept == EDGE_KEEP_CONNS) {
		/* Full: the oldest goes. */
		drop = kept[0];
		memmove(&kept[0], &kept[1], (EDGE_KEEP_CONNS - 1) * sizeof(kept[0]));
		n_kept--;
	}
	kept[n_kept].fd = u->fd;
	kept[n_kept].tls = u->tls;
	kept[n_kept].since_us = clock_mono_us();
	snprintf(kept[n_kept].key, sizeof(kept[n_kept].key), "%s", key);
	n_kept++;
	pthread_mutex_unlock(&keep_lock);
	u->fd = -1;
	u->tls = NULL;
	if (drop.fd >= 0)
		close_kept(&drop);
}

int up_take(const char *key, struct up *u)
{
	int64_t now = clock_mono_us();
	for (;;) {
		struct kept k = { .fd = -1 };
		int stale = 0;
		pthread_mutex_lock(&keep_lock);
		for (unsigned i = n_kept; i-- > 0;) {
			stale = now - kept[i].since_us > (int64_t)EDGE_KEEP_S * 1000000;
			if (stale || strcmp(kept[i].key, key) == 0) {
				k = kept[i];
				memmove(&kept[i], &kept[i + 1], (n_kept - i - 1) * sizeof(kept[0]));
				n_kept--;
				break;
			}
		}
		pthread_mutex_unlock(&keep_lock);
		if (k.fd < 0)
			return -1;
		if (stale) {
			close_kept(&k);
			continue;
		}
		/* Anything to read now (bytes nobody asked for, or the end) makes it unfit. */
		struct up c = { .fd = k.fd, .tls = k.tls };
		if (!up_pending(&c)) {
			u->fd = c.fd;
			u->tls = c.tls;
			return 0;
		}
		up_close(&c);
	}
}
