/*
 * Broken envd answers: the edge gives one of these instead of forwarding to
 * the sandbox's envd when a fault names "exec" (POST /process.Process/Start)
 * or "files" (GET /files) with an "envd" mode. They are what a hostile or
 * broken envd could send; a client must turn each into an error, never into
 * a quietly different result.
 *   two_ends        a start, stdout "one\n", an end with exit 0, a second end
 *                   with exit 7, then the end of the stream
 *   data_after_end  a start, an end with exit 0, stdout "late\n", the end of
 *                   the stream
 *   undecodable     a start, a stdout event that is not base64, an end with
 *                   exit 0, the end of the stream
 *   endless_file    200 announcing 64 GiB, then zero bytes until the client
 *                   goes away (or 60 s pass)
 */
#define _GNU_SOURCE
#include "fake-e2b.h"

#define ENDLESS_ANNOUNCED "68719476736"
#define ENDLESS_MAX_MS 60000

static int send_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One Connect envelope: flags, a 4-byte big-endian length, the JSON. */
static int envelope(int fd, unsigned char flags, const char *json)
{
	size_t n = strlen(json);
	unsigned char h[5] = { flags, (unsigned char)(n >> 24), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
			       (unsigned char)n };

	return send_all(fd, h, sizeof(h)) == 0 ? send_all(fd, json, n) : -1;
}

/* Reads the rest of the request body (per Content-Length), so that closing does not reset the connection. */
static void drain_body(int fd, const char *head, size_t head_len, size_t have)
{
	const char *cl = strcasestr(head, "\r\nContent-Length:");
	int64_t deadline = clock_mono_ms() + 5000;
	size_t want = 0;
	char tmp[4096];

	if (cl && (size_t)(cl - head) < head_len)
		want = strtoul(cl + 17, NULL, 10);
	want = want > have - head_len ? want - (have - head_len) : 0;
	while (want > 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - clock_mono_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		r = read(fd, tmp, want < sizeof(tmp) ? want : sizeof(tmp));
		if (r <= 0)
			return;
		want -= (size_t)r;
	}
}

/* Ends the answer, then waits (briefly) for the client to close its side. */
static void finish(int fd)
{
	int64_t deadline = clock_mono_ms() + 2000;
	char tmp[512];

	shutdown(fd, SHUT_WR);
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0 || poll(&p, 1, (int)left) <= 0 || read(fd, tmp, sizeof(tmp)) <= 0)
			return;
	}
}

static void endless_file(int fd)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
				   "Content-Length: " ENDLESS_ANNOUNCED "\r\nConnection: close\r\n\r\n";
	static const char zeros[65536];
	int64_t deadline = clock_mono_ms() + ENDLESS_MAX_MS;

	if (send_all(fd, head, sizeof(head) - 1) < 0)
		return;
	while (clock_mono_ms() < deadline && send_all(fd, zeros, sizeof(zeros)) == 0)
		;
}

static void stream(int fd, const char *mode)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\n"
				   "Connection: close\r\n\r\n";
	static const char start[] = "{\"event\":{\"start\":{\"pid\":4242}}}";
	static const char end0[] = "{\"event\":{\"end\":{\"exitCode\":0,\"exited\":true,\"status\":\"exit status 0\"}}}";
	static const char end7[] = "{\"event\":{\"end\":{\"exitCode\":7,\"exited\":true,\"status\":\"exit status 7\"}}}";
	const char *const *ev;
	static const char *const two_ends[] = { start, "{\"event\":{\"data\":{\"stdout\":\"b25lCg==\"}}}", end0, end7,
						 NULL };
	static const char *const after_end[] = { start, end0, "{\"event\":{\"data\":{\"stdout\":\"bGF0ZQo=\"}}}", NULL };
	static const char *const undecodable[] = { start, "{\"event\":{\"data\":{\"stdout\":\"%%% not base64 %%%\"}}}",
						    end0, NULL };

	ev = !strcmp(mode, "two_ends") ? two_ends : !strcmp(mode, "data_after_end") ? after_end : undecodable;
	if (send_all(fd, head, sizeof(head) - 1) < 0)
		return;
	for (; *ev; ev++)
		if (envelope(fd, 0, *ev) < 0)
			return;
	envelope(fd, 2, "{}");
}

int edge_envd_fault(int fd, const char *mode, const char *buf, size_t head_len, size_t have)
{
	if (strcmp(mode, "two_ends") && strcmp(mode, "data_after_end") && strcmp(mode, "undecodable") &&
	    strcmp(mode, "endless_file"))
		return -1;
	vlog("edge: fault: a broken envd answer (%s)", mode);
	drain_body(fd, buf, head_len, have);
	if (!strcmp(mode, "endless_file"))
		endless_file(fd);
	else
		stream(fd, mode);
	finish(fd);
	return 0;
}
