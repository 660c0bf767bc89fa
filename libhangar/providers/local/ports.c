/*
 * Exposing a port of a local sandbox on the host's loopback: asked of its
 * jail on ports.sock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"

/* Reads the jail's one-line answer on fd until it closes, within deadline. 0, or an error set. */
static int read_answer(int fd, const char *id, char *buf, size_t size, int64_t deadline)
{
	size_t have;
	int r = local_read_until(fd, buf, size - 1, deadline, NULL, &have);

	if (r == -ETIMEDOUT)
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0,
					"local sandbox %s: its supervisor did not answer within %d s", id,
					PORTS_DEADLINE_MS / 1000);
	if (r < 0)
		return hangar_sys_error(HANGAR_EOS, 0, -r, "poll");
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
int local_expose_port(void *state, const char *id, uint32_t port, hangar_buf *out_addr)
{
	struct local *l = state;
	char dir[DIR_MAX], req[32], answer[256];
	unsigned a, b, c, d, host_port;
	char tail = 0;
	int pid = 0, fd = -1, r = local_find_alive(l, id, dir, sizeof(dir), &pid);

	if (r || (r = local_jail_connect(dir, id, pid, "ports.sock", &fd)) != 0)
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
