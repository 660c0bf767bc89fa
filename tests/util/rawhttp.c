#define _GNU_SOURCE
#include "rawhttp.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int rawhttp_send_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int rawhttp_send_str(int fd, const char *s)
{
	return rawhttp_send_all(fd, s, strlen(s));
}

int rawhttp_read_request(int fd, char *head, size_t cap)
{
	char buf[65536];
	size_t have = 0, n_head;
	char *end = NULL, *cl;
	long body = 0;

	while (have + 1 < sizeof(buf)) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);

		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")))
			break;
	}
	if (!end)
		return -1;
	if (head && cap > 0) {
		n_head = (size_t)(end - buf) < cap - 1 ? (size_t)(end - buf) : cap - 1;
		memcpy(head, buf, n_head);
		head[n_head] = '\0';
	}
	cl = strcasestr(buf, "\r\nContent-Length:");
	if (cl && cl < end)
		body = strtol(cl + 17, NULL, 10);
	body -= (long)(have - (size_t)(end + 4 - buf));
	while (body > 0) {
		ssize_t n = read(fd, buf, sizeof(buf) < (size_t)body ? sizeof(buf) : (size_t)body);

		if (n <= 0)
			return -1;
		body -= n;
	}
	return 0;
}

void rawhttp_wait_for_close(int fd, int stop_fd)
{
	char buf[4096];

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = stop_fd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return;
		if (p[1].revents)
			return;
		if (p[0].revents && read(fd, buf, sizeof(buf)) <= 0)
			return;
	}
}
