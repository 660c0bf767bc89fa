/*
 * envd-bench: latency, throughput and footprint figures for hangar-envd,
 * measured over its own wire protocol (Connect JSON over HTTP/1.1).
 *
 * It starts the daemon on a kernel-chosen loopback port (-port 0, ready line
 * on a pipe), drives it with a small HTTP/1.1 client on plain sockets
 * (keep-alive, Content-Length and chunked bodies, Connect envelopes), prints
 * a table and stops the daemon. It reports figures and never judges them:
 * only a daemon that cannot start or a wrong answer makes it exit non-zero.
 *
 * usage: envd-bench [--calls N] [--quick] [PATH-TO-HANGAR-ENVD]
 *        The daemon path may also come from $HANGAR_ENVD.
 * See bench/README.md for what each figure means.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "stats.h"

extern char **environ;

#define MIB (1024.0 * 1024.0)
#define CONN_BUF (128 * 1024)
#define HEADER_LINE_MAX 8192
#define MAX_KEPT_MSGS 16
#define ENVELOPE_MAX (16u << 20)
#define IO_TIMEOUT_MS 120000
#define GET_FILE_SIZE (1024 * 1024)

struct config {
	const char *daemon;
	int calls, warmups;
	int get_calls, get_warmups;
	size_t post_bytes;
	int post_runs;
	int streams;
};

/* ---- clean-up, also reachable from a signal handler ------------------ */

static volatile sig_atomic_t g_daemon = -1;
static char g_tmpdir[256];
static char g_paths[4][320]; /* files to remove: get, post, strip, spare */

enum { PATH_GET, PATH_POST, PATH_STRIP };

static void remove_temp_files(void)
{
	for (size_t i = 0; i < sizeof(g_paths) / sizeof(g_paths[0]); i++)
		if (g_paths[i][0])
			unlink(g_paths[i]);
	if (g_tmpdir[0])
		rmdir(g_tmpdir);
}

static void on_fatal_signal(int sig)
{
	if (g_daemon > 0)
		kill((pid_t)g_daemon, SIGKILL);
	remove_temp_files();
	_exit(128 + sig);
}

/* ---- time and statistics ---------------------------------------------- */


/* ---- the table ------------------------------------------------------------ */

static void table_header(void)
{
	printf("%-40s %6s %5s %9s %9s %9s %9s  %s\n", "benchmark", "n", "fail", "p50 ms", "p95 ms",
	       "p99 ms", "mean ms", "result");
	printf("%-40s %6s %5s %9s %9s %9s %9s  %s\n", "---------", "-", "----", "------", "------",
	       "------", "-------", "------");
}

static void __attribute__((format(printf, 4, 5)))
table_row(const char *name, const struct stats *s, int fail, const char *fmt, ...)
{
	char note[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	if (s && s->n > 0)
		printf("%-40s %6zu %5d %9.3f %9.3f %9.3f %9.3f  %s\n", name, s->n, fail, s->p50, s->p95,
		       s->p99, s->mean, note);
	else if (s)
		printf("%-40s %6zu %5d %9s %9s %9s %9s  %s\n", name, (size_t)0, fail, "-", "-", "-", "-",
		       note);
	else
		printf("%-40s %6s %5s %9s %9s %9s %9s  %s\n", name, "-", "-", "-", "-", "-", "-", note);
	fflush(stdout);
}

/* ---- a minimal HTTP/1.1 client ---------------------------------------- */

struct conn {
	int fd;
	int port;
	int opens;      /* connections made over this object's life */
	size_t off, len; /* unread bytes are buf[off, len) */
	char buf[CONN_BUF];
};

static int conn_open(struct conn *c, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1;

	c->port = port;
	c->off = c->len = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(c->fd);
		c->fd = -1;
		errno = e;
		return -1;
	}
	c->opens++;
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->off = c->len = 0;
}

static struct conn *conn_new(void)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c)
		c->fd = -1;
	return c;
}

/* Waits for fd to become readable or writable; -1 with ETIMEDOUT after IO_TIMEOUT_MS. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	do
		n = poll(&p, 1, IO_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		errno = ETIMEDOUT;
	return n > 0 ? 0 : -1;
}

/* Reads more bytes into the buffer: >0 bytes read, 0 at EOF, -1 on error. */
static ssize_t conn_fill(struct conn *c)
{
	ssize_t n;

	if (c->off == c->len) {
		c->off = c->len = 0;
	} else if (c->len == sizeof(c->buf)) {
		if (c->off == 0) {
			errno = EMSGSIZE;
			return -1;
		}
		memmove(c->buf, c->buf + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	if (wait_fd(c->fd, POLLIN) < 0)
		return -1;
	do
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		c->len += (size_t)n;
	return n;
}

static int conn_send(struct conn *c, const void *data, size_t n)
{
	const char *p = data;

	while (n > 0) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One line without its CRLF (a bare LF is tolerated). -1 on EOF, error, or an overlong line. */
static int conn_line(struct conn *c, char *out, size_t outsz)
{
	for (;;) {
		char *start = c->buf + c->off;
		char *nl = memchr(start, '\n', c->len - c->off);

		if (nl) {
			size_t n = (size_t)(nl - start), keep = n;

			if (keep > 0 && start[keep - 1] == '\r')
				keep--;
			if (keep >= outsz)
				return -1;
			memcpy(out, start, keep);
			out[keep] = '\0';
			c->off += n + 1;
			return 0;
		}
		if (c->len - c->off >= outsz)
			return -1;
		if (conn_fill(c) <= 0)
			return -1;
	}
}

/* Receives body bytes. Returns 0 to go on, -1 to abandon the response. */
typedef int (*body_sink)(void *ctx, const char *data, size_t n);

/* Hands exactly n body bytes to sink (which may be NULL). */
static int conn_body(struct conn *c, uint64_t n, body_sink sink, void *ctx)
{
	while (n > 0) {
		size_t avail = c->len - c->off;

		if (avail == 0) {
			if (conn_fill(c) <= 0)
				return -1;
			continue;
		}
		if ((uint64_t)avail > n)
			avail = (size_t)n;
		if (sink && sink(ctx, c->buf + c->off, avail) < 0)
			return -1;
		c->off += avail;
		n -= avail;
	}
	return 0;
}

struct resp {
	int status;
	int chunked;
	int64_t length;      /* Content-Length, -1 when absent */
	int close;           /* the server closes the connection after this response */
	char type[128];      /* Content-Type */
	char encoding[64];   /* Content-Encoding */
	uint64_t body_bytes; /* body bytes on the wire, after de-chunking */
};

static void copy_value(char *dst, size_t dstsz, const char *v)
{
	snprintf(dst, dstsz, "%s", v);
}

/* Status line and headers. Interim 1xx responses are skipped. */
static int read_head(struct conn *c, struct resp *r)
{
	char line[HEADER_LINE_MAX];

	for (;;) {
		int major, minor, status;

		memset(r, 0, sizeof(*r));
		r->length = -1;
		if (conn_line(c, line, sizeof(line)) < 0)
			return -1;
		if (sscanf(line, "HTTP/%d.%d %d", &major, &minor, &status) != 3 || status < 100 ||
		    status > 999)
			return -1;
		r->status = status;
		r->close = major == 1 && minor == 0;
		for (;;) {
			char *colon, *v, *end;

			if (conn_line(c, line, sizeof(line)) < 0)
				return -1;
			if (!line[0])
				break;
			colon = strchr(line, ':');
			if (!colon)
				return -1;
			*colon = '\0';
			v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			end = v + strlen(v);
			while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
				*--end = '\0';
			if (strcasecmp(line, "Content-Length") == 0) {
				char *e;
				long long n;

				errno = 0;
				n = strtoll(v, &e, 10);
				if (errno || e == v || *e || n < 0)
					return -1;
				r->length = n;
			} else if (strcasecmp(line, "Transfer-Encoding") == 0) {
				if (strcasestr(v, "chunked"))
					r->chunked = 1;
			} else if (strcasecmp(line, "Connection") == 0) {
				if (strcasestr(v, "close"))
					r->close = 1;
				else if (strcasestr(v, "keep-alive"))
					r->close = 0;
			} else if (strcasecmp(line, "Content-Type") == 0) {
				copy_value(r->type, sizeof(r->type), v);
			} else if (strcasecmp(line, "Content-Encoding") == 0) {
				copy_value(r->encoding, sizeof(r->encoding), v);
			}
		}
		if (status >= 200 || status == 101)
			return 0;
	}
}

static int read_chunked(struct conn *c, struct resp *r, body_sink sink, void *ctx)
{
	char line[HEADER_LINE_MAX];

	for (;;) {
		unsigned long long size;
		char *end;

		if (conn_line(c, line, sizeof(line)) < 0)
			return -1;
		errno = 0;
		size = strtoull(line, &end, 16);
		if (end == line || errno || (*end && *end != ';' && *end != ' ' && *end != '\t'))
			return -1;
		if (size == 0)
			break;
		if (conn_body(c, size, sink, ctx) < 0)
			return -1;
		r->body_bytes += size;
		if (conn_line(c, line, sizeof(line)) < 0 || line[0])
			return -1;
	}
	for (;;) { /* trailers, up to the empty line */
		if (conn_line(c, line, sizeof(line)) < 0)
			return -1;
		if (!line[0])
			return 0;
	}
}

/* Reads one whole response; the body goes to sink. -1 leaves the connection unusable. */
static int read_response(struct conn *c, struct resp *r, int head_request, body_sink sink, void *ctx)
{
	if (read_head(c, r) < 0)
		return -1;
	if (head_request || r->status == 204 || r->status == 304)
		return 0;
	if (r->chunked)
		return read_chunked(c, r, sink, ctx);
	if (r->length >= 0) {
		if (conn_body(c, (uint64_t)r->length, sink, ctx) < 0)
			return -1;
		r->body_bytes = (uint64_t)r->length;
		return 0;
	}
	/* Neither: the body runs to the end of the connection. */
	r->close = 1;
	for (;;) {
		size_t avail = c->len - c->off;
		ssize_t n;

		if (avail) {
			if (sink && sink(ctx, c->buf + c->off, avail) < 0)
				return -1;
			r->body_bytes += avail;
			c->off = c->len;
		}
		n = conn_fill(c);
		if (n == 0)
			return 0;
		if (n < 0)
			return -1;
	}
}

/* Keeps the first bytes of a body, for error messages and small JSON answers. */
struct small_body {
	char data[4096];
	size_t len;
};

static int small_body_sink(void *ctx, const char *data, size_t n)
{
	struct small_body *b = ctx;
	size_t room = sizeof(b->data) - 1 - b->len;

	if (n > room)
		n = room;
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

/* Percent-encodes a query value. */
static void url_encode(const char *in, char *out, size_t outsz)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *p = (const unsigned char *)in; *p && o + 4 < outsz; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '.' || *p == '~' || *p == '/') {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
}

/* ---- Connect server streams -------------------------------------------- */

/* Splits a Connect stream body into envelopes as it arrives. */
struct envelopes {
	unsigned char hdr[5];
	size_t hdr_have;
	uint32_t len;
	char *payload; /* the envelope being read */
	size_t have;
	int count;     /* complete envelopes */
	int end_seen;  /* the end-of-stream (0x02) envelope arrived */
	int after_end; /* envelopes after it */
	double t_end;  /* when it arrived */
	char *msg[MAX_KEPT_MSGS];
	uint8_t flags[MAX_KEPT_MSGS];
	int kept;
};

static int envelope_sink(void *ctx, const char *data, size_t n)
{
	struct envelopes *e = ctx;

	while (n > 0) {
		size_t take;

		if (e->hdr_have < 5) {
			take = 5 - e->hdr_have;
			if (take > n)
				take = n;
			memcpy(e->hdr + e->hdr_have, data, take);
			e->hdr_have += take;
			data += take;
			n -= take;
			if (e->hdr_have < 5)
				break;
			e->len = (uint32_t)e->hdr[1] << 24 | (uint32_t)e->hdr[2] << 16 |
				 (uint32_t)e->hdr[3] << 8 | (uint32_t)e->hdr[4];
			if (e->len > ENVELOPE_MAX)
				return -1;
			e->payload = malloc((size_t)e->len + 1);
			if (!e->payload)
				return -1;
			e->have = 0;
		}
		take = e->len - e->have;
		if (take > n)
			take = n;
		memcpy(e->payload + e->have, data, take);
		e->have += take;
		data += take;
		n -= take;
		if (e->have == e->len) {
			e->payload[e->len] = '\0';
			if (e->end_seen)
				e->after_end++;
			if (e->hdr[0] & 0x02) {
				e->end_seen = 1;
				e->t_end = now_ms();
			}
			if (e->kept < MAX_KEPT_MSGS) {
				e->msg[e->kept] = e->payload;
				e->flags[e->kept++] = e->hdr[0];
			} else {
				free(e->payload);
			}
			e->payload = NULL;
			e->count++;
			e->hdr_have = 0;
		}
	}
	return 0;
}

static void envelopes_free(struct envelopes *e)
{
	for (int i = 0; i < e->kept; i++)
		free(e->msg[i]);
	free(e->payload);
	memset(e, 0, sizeof(*e));
}

/*
 * A Start stream as expected for a command that exits 0: start{pid} first,
 * exactly one end event (exited, exit code absent or 0), then a clean
 * end-of-stream {} and nothing after it. Returns 0, or -1 with why filled.
 */
static int check_start_stream(const struct envelopes *e, char *why, size_t whysz)
{
	int starts = 0, ends = 0;

	if (!e->end_seen)
		return snprintf(why, whysz, "stream ended without an end-of-stream envelope"), -1;
	if (e->after_end)
		return snprintf(why, whysz, "envelopes after the end of the stream"), -1;
	if (e->count > e->kept)
		return snprintf(why, whysz, "unexpectedly long stream (%d envelopes)", e->count), -1;
	for (int i = 0; i < e->kept; i++) {
		cJSON *j = cJSON_Parse(e->msg[i]);
		const cJSON *ev, *end;

		if (!j || !cJSON_IsObject(j)) {
			cJSON_Delete(j);
			return snprintf(why, whysz, "envelope %d is not a JSON object", i), -1;
		}
		if (e->flags[i] & 0x02) {
			const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");

			if (err) {
				char *txt = cJSON_PrintUnformatted(err);

				snprintf(why, whysz, "stream error %s", txt ? txt : "?");
				free(txt);
				cJSON_Delete(j);
				return -1;
			}
			cJSON_Delete(j);
			continue;
		}
		ev = cJSON_GetObjectItemCaseSensitive(j, "event");
		if (cJSON_GetObjectItemCaseSensitive(ev, "start")) {
			if (i != 0) {
				cJSON_Delete(j);
				return snprintf(why, whysz, "start event is not first"), -1;
			}
			starts++;
		}
		end = cJSON_GetObjectItemCaseSensitive(ev, "end");
		if (end) {
			const cJSON *code = cJSON_GetObjectItemCaseSensitive(end, "exitCode");
			const cJSON *exited = cJSON_GetObjectItemCaseSensitive(end, "exited");

			ends++;
			if ((code && !(cJSON_IsNumber(code) && code->valuedouble == 0)) || !cJSON_IsTrue(exited)) {
				char *txt = cJSON_PrintUnformatted(end);

				snprintf(why, whysz, "command did not exit 0: %s", txt ? txt : "?");
				free(txt);
				cJSON_Delete(j);
				return -1;
			}
		}
		cJSON_Delete(j);
	}
	if (starts != 1 || ends != 1)
		return snprintf(why, whysz, "%d start and %d end events", starts, ends), -1;
	return 0;
}

/* A whole Start request (headers and one envelope) for cmd with an optional single argument. */
static char *start_request(int port, const char *cmd, const char *arg, size_t *outlen)
{
	cJSON *root = cJSON_CreateObject(), *proc = cJSON_AddObjectToObject(root, "process");
	char *json, *req;
	size_t jlen, hlen;
	char head[512];

	cJSON_AddStringToObject(proc, "cmd", cmd);
	if (arg) {
		cJSON *args = cJSON_AddArrayToObject(proc, "args");

		cJSON_AddItemToArray(args, cJSON_CreateString(arg));
	}
	cJSON_AddFalseToObject(root, "stdin");
	json = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!json)
		return NULL;
	jlen = strlen(json);
	hlen = (size_t)snprintf(head, sizeof(head),
				"POST /process.Process/Start HTTP/1.1\r\n"
				"Host: 127.0.0.1:%d\r\n"
				"User-Agent: envd-bench\r\n"
				"Content-Type: application/connect+json\r\n"
				"Connect-Protocol-Version: 1\r\n"
				"Content-Length: %zu\r\n"
				"\r\n",
				port, jlen + 5);
	req = malloc(hlen + 5 + jlen);
	if (req) {
		memcpy(req, head, hlen);
		req[hlen] = 0;
		req[hlen + 1] = (char)(jlen >> 24);
		req[hlen + 2] = (char)(jlen >> 16);
		req[hlen + 3] = (char)(jlen >> 8);
		req[hlen + 4] = (char)jlen;
		memcpy(req + hlen + 5, json, jlen);
		*outlen = hlen + 5 + jlen;
	}
	free(json);
	return req;
}

/*
 * One Start round trip on c, reopening the connection if the server closed
 * it. *ms runs from the first byte sent to the arrival of the end-of-stream
 * envelope. Returns 0 when the stream is as expected.
 */
static int start_call(struct conn *c, const char *req, size_t reqlen, double *ms, char *why, size_t whysz)
{
	struct envelopes e = { 0 };
	struct resp r;
	double t0;
	int rc = -1;

	if (c->fd < 0 && conn_open(c, c->port) < 0) {
		snprintf(why, whysz, "connect: %s", strerror(errno));
		return -1;
	}
	t0 = now_ms();
	if (conn_send(c, req, reqlen) < 0 || read_response(c, &r, 0, envelope_sink, &e) < 0) {
		snprintf(why, whysz, "connection failed mid-request: %s", errno ? strerror(errno) : "protocol error");
		conn_close(c);
		goto out;
	}
	if (r.status != 200) {
		snprintf(why, whysz, "HTTP %d", r.status);
	} else if (strncasecmp(r.type, "application/connect+json", 24) != 0) {
		snprintf(why, whysz, "Content-Type %s", r.type);
	} else if (check_start_stream(&e, why, whysz) == 0) {
		*ms = e.t_end - t0;
		rc = 0;
	}
	if (r.close)
		conn_close(c);
out:
	envelopes_free(&e);
	return rc;
}

/* ---- the daemon ----------------------------------------------------------- */

static pid_t daemon_start(const char *path, const char *workdir, int *port)
{
	char fdarg[16], line[64];
	size_t have = 0;
	int pfd[2];
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		fcntl(pfd[1], F_SETFD, 0);
		unsetenv("HANGAR_ENVD_ACCESS_TOKEN"); /* an inherited token would lock the bench out */
		execl(path, path, "-port", "0", "-addr", "127.0.0.1", "-workdir", workdir, "-ready-fd", fdarg,
		      (char *)NULL);
		fprintf(stderr, "envd-bench: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	g_daemon = pid;
	close(pfd[1]);
	while (have < sizeof(line) - 1 && !memchr(line, '\n', have)) {
		ssize_t n;

		if (wait_fd(pfd[0], POLLIN) < 0)
			break;
		n = read(pfd[0], line + have, sizeof(line) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(pfd[0]);
	line[have] = '\0';
	if (sscanf(line, "ready %d", port) != 1 || *port <= 0) {
		fprintf(stderr, "envd-bench: %s did not report ready (got \"%.*s\")\n", path,
			(int)strcspn(line, "\n"), line);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		g_daemon = -1;
		return -1;
	}
	return pid;
}

/* SIGTERM, then SIGKILL after 5 s. Returns the wait status, or -1. */
static int daemon_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid) {
			g_daemon = -1;
			return st;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	g_daemon = -1;
	return -1;
}

/* A field of /proc/<pid>/status in KiB, or -1. */
static long status_kib(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			v = strtol(line + klen + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

/* Runs argv with stdin and stderr on /dev/null; its stdout (first line) goes to out. Returns the exit code or -1. */
static int run_quiet(char *const argv[], char *out, size_t outsz)
{
	int pfd[2], st;
	size_t have = 0;
	pid_t pid;

	if (out && outsz)
		out[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDWR);

		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 2);
		}
		dup2(pfd[1], 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		char tmp[256];
		ssize_t n = read(pfd[0], tmp, sizeof(tmp));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t i = 0; i < n && out && have + 1 < outsz; i++)
			out[have++] = tmp[i];
	}
	close(pfd[0]);
	if (out && outsz) {
		out[have < outsz ? have : outsz - 1] = '\0';
		out[strcspn(out, "\n")] = '\0';
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- a: Start /bin/true against a bare fork+execve+waitpid ------------ */

static int fork_true(double *ms)
{
	char *argv[] = { (char *)"/bin/true", NULL };
	double t0 = now_ms();
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	*ms = now_ms() - t0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/*
 * A sandbox's envd is started fresh for every create, and nothing answers
 * for the sandbox until it says ready: exec to the ready line, each start
 * a new process killed once it answered, beside fork+exec of /bin/true to
 * its exit (the cost of any new process here).
 */
static int bench_daemon_start(const struct config *cfg, const char *workdir)
{
	int rounds = cfg->calls < 30 ? cfg->calls : 30, fail = 0;
	double *v = calloc((size_t)rounds, sizeof(double)), *f = calloc((size_t)rounds, sizeof(double));
	size_t nv = 0, nf = 0;
	struct stats s, sf;

	if (!v || !f) {
		fprintf(stderr, "envd-bench: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < rounds + 2; i++) {
		double t0 = now_ms(), ms;
		int port = 0;
		pid_t pid = daemon_start(cfg->daemon, workdir, &port);

		if (pid < 0) {
			fail++;
			continue;
		}
		ms = now_ms() - t0;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		g_daemon = -1;
		if (i >= 2)
			v[nv++] = ms;
		if (fork_true(&ms) == 0 && i >= 2)
			f[nf++] = ms;
	}
	stats_of(v, nv, &s);
	stats_of(f, nf, &sf);
	table_row("daemon exec -> ready line", &s, fail, "a fresh daemon each time, 2 warm-ups");
	table_row("  fork+execve+waitpid /bin/true", &sf, 0, "the same rounds: any process's cost here");
	free(v);
	free(f);
	return fail ? 1 : 0;
}

static int bench_start(const struct config *cfg, int port)
{
	size_t n = (size_t)cfg->calls, reqlen;
	double *v = calloc(n, sizeof(double)), *f = calloc(n, sizeof(double));
	char *req = start_request(port, "/bin/true", NULL, &reqlen);
	struct conn *c = conn_new();
	struct stats s_start, s_fork;
	char why[256] = "", first_why[256] = "";
	size_t nv = 0, nf = 0;
	int fail = 0, ffail = 0;

	if (!v || !f || !req || !c) {
		fprintf(stderr, "envd-bench: out of memory\n");
		exit(1);
	}
	c->port = port;
	for (int i = 0; i < cfg->warmups + cfg->calls; i++) {
		double ms;

		if (start_call(c, req, reqlen, &ms, why, sizeof(why)) < 0) {
			if (!fail++)
				snprintf(first_why, sizeof(first_why), "%s", why);
			continue;
		}
		if (i >= cfg->warmups)
			v[nv++] = ms;
	}
	for (int i = 0; i < cfg->warmups + cfg->calls; i++) {
		double ms;

		if (fork_true(&ms) < 0) {
			ffail++;
			continue;
		}
		if (i >= cfg->warmups)
			f[nf++] = ms;
	}
	stats_of(v, nv, &s_start);
	stats_of(f, nf, &s_fork);
	if (fail)
		table_row("Start /bin/true, one keep-alive conn", &s_start, fail, "first failure: %s", first_why);
	else
		table_row("Start /bin/true, one keep-alive conn", &s_start, 0, "%d TCP connection%s, %d warm-ups",
			  c->opens, c->opens == 1 ? "" : "s", cfg->warmups);
	table_row("fork+execve+waitpid /bin/true", &s_fork, ffail, "in-process baseline");
	if (nv && nf && s_fork.p50 > 0)
		table_row("  ratio of p50s (Start / fork)", NULL, 0, "%.2fx, overhead %.3f ms",
			  s_start.p50 / s_fork.p50, s_start.p50 - s_fork.p50);
	conn_close(c);
	free(c);
	free(req);
	free(v);
	free(f);
	return fail + ffail;
}

/* ---- b: GET /files ------------------------------------------------------ */

/* Checks a downloaded body against the expected bytes, inflating gzip first. */
struct get_check {
	const unsigned char *expect;
	size_t expect_len;
	size_t pos;
	int gzip;
	int bad;
	int z_end;
	z_stream z;
};

static int get_compare(struct get_check *g, const unsigned char *p, size_t n)
{
	if (g->pos + n > g->expect_len || memcmp(g->expect + g->pos, p, n) != 0)
		g->bad = 1;
	g->pos += n;
	return 0;
}

static int get_check_sink(void *ctx, const char *data, size_t n)
{
	struct get_check *g = ctx;
	unsigned char out[65536];

	if (!g->gzip)
		return get_compare(g, (const unsigned char *)data, n);
	g->z.next_in = (unsigned char *)data;
	g->z.avail_in = (uInt)n;
	while (g->z.avail_in > 0 && !g->z_end) {
		int zr;

		g->z.next_out = out;
		g->z.avail_out = sizeof(out);
		zr = inflate(&g->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			g->bad = 1;
			return 0;
		}
		get_compare(g, out, sizeof(out) - g->z.avail_out);
		if (zr == Z_STREAM_END)
			g->z_end = 1;
		else if (zr == Z_BUF_ERROR)
			break;
	}
	return 0;
}

struct get_result {
	int status;
	int gzip_sent;   /* Content-Encoding: gzip came back */
	uint64_t wire;   /* body bytes on the wire */
	int ok;
};

/* Routes a GET /files body: error text when the status is not 200, else the check (or nothing). */
struct get_route {
	const struct resp *r;
	struct get_check *check; /* NULL: count bytes only */
	struct small_body *err;
};

static int get_route_sink(void *ctx, const char *data, size_t n)
{
	struct get_route *g = ctx;

	if (g->r->status != 200)
		return small_body_sink(g->err, data, n);
	return g->check ? get_check_sink(g->check, data, n) : 0;
}

static void get_file(struct conn *c, const char *path, int gzip, const unsigned char *expect,
		     size_t expect_len, int verify, double *ms, struct get_result *gr)
{
	char req[1024], qpath[700];
	struct get_check g = { .expect = expect, .expect_len = expect_len };
	struct small_body err = { .len = 0 };
	struct resp r;
	struct get_route route = { .r = &r, .check = verify ? &g : NULL, .err = &err };
	double t0;
	int rc;

	memset(gr, 0, sizeof(*gr));
	if (c->fd < 0 && conn_open(c, c->port) < 0)
		return;
	url_encode(path, qpath, sizeof(qpath));
	snprintf(req, sizeof(req),
		 "GET /files?path=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: envd-bench\r\n%s\r\n", qpath,
		 c->port, gzip ? "Accept-Encoding: gzip\r\n" : "");
	if (verify && gzip) {
		if (inflateInit2(&g.z, 16 + MAX_WBITS) != Z_OK)
			return;
		g.gzip = 1;
	}
	t0 = now_ms();
	rc = conn_send(c, req, strlen(req));
	if (rc == 0)
		rc = read_response(c, &r, 0, get_route_sink, &route);
	*ms = now_ms() - t0;
	if (g.gzip) {
		if (!g.z_end)
			g.bad = 1;
		inflateEnd(&g.z);
	}
	if (rc < 0) {
		conn_close(c);
		return;
	}
	gr->status = r.status;
	gr->gzip_sent = strcasecmp(r.encoding, "gzip") == 0;
	gr->wire = r.body_bytes;
	if (r.status == 200) {
		if (verify)
			gr->ok = !g.bad && g.pos == expect_len && gr->gzip_sent == gzip;
		else if (gzip)
			gr->ok = gr->gzip_sent;
		else
			gr->ok = !gr->gzip_sent && r.body_bytes == expect_len;
	}
	if (r.close)
		conn_close(c);
}

static int bench_get(const struct config *cfg, int port, const char *path, const unsigned char *data,
		     size_t len, int gzip)
{
	const char *name = gzip ? "GET /files 1 MiB, Accept-Encoding: gzip" : "GET /files 1 MiB";
	double *v = calloc((size_t)cfg->get_calls, sizeof(double));
	struct conn *c = conn_new();
	struct get_result gr;
	struct stats s;
	uint64_t wire = 0;
	double total = 0;
	size_t nv = 0;
	int fail = 0;

	if (!v || !c) {
		fprintf(stderr, "envd-bench: out of memory\n");
		exit(1);
	}
	c->port = port;
	for (int i = 0; i < cfg->get_warmups + cfg->get_calls; i++) {
		int warm = i < cfg->get_warmups;
		double ms;

		get_file(c, path, gzip, data, len, warm, &ms, &gr);
		if (gr.status != 200 && gr.status != 0 && i == 0) {
			/* Not served (yet): report once and move on. */
			table_row(name, NULL, 0, "unavailable: HTTP %d", gr.status);
			free(v);
			conn_close(c);
			free(c);
			return 0;
		}
		if (!gr.ok) {
			fail++;
			continue;
		}
		if (!warm) {
			v[nv++] = ms;
			total += ms;
			wire += gr.wire;
		}
	}
	stats_of(v, nv, &s);
	if (nv == 0)
		table_row(name, &s, fail, "no successful request");
	else if (gzip)
		table_row(name, &s, fail, "%.1f MiB/s of file data, %.1f KiB on the wire per request",
			  (double)len * (double)nv / MIB / (total / 1e3), (double)wire / (double)nv / 1024.0);
	else
		table_row(name, &s, fail, "%.1f MiB/s", (double)len * (double)nv / MIB / (total / 1e3));
	conn_close(c);
	free(c);
	free(v);
	return fail;
}

/* ---- c: POST /files --------------------------------------------------- */

/*
 * Uploads total bytes (pattern repeated) as application/octet-stream. Stops
 * sending if the server answers before the body is complete. Returns the
 * HTTP status (0 on a connection failure); *ms covers the whole exchange.
 */
static int post_file(int port, const char *path, const unsigned char *pattern, size_t patlen, size_t total,
		     double *ms, char *why, size_t whysz)
{
	struct conn *c = conn_new();
	struct small_body body = { .len = 0 };
	char head[1024], qpath[700];
	size_t sent = 0;
	struct resp r;
	double t0;
	int status = 0;

	if (!c || conn_open(c, port) < 0) {
		snprintf(why, whysz, "connect: %s", strerror(errno));
		free(c);
		return 0;
	}
	url_encode(path, qpath, sizeof(qpath));
	snprintf(head, sizeof(head),
		 "POST /files?path=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: envd-bench\r\n"
		 "Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
		 qpath, port, total);
	t0 = now_ms();
	if (conn_send(c, head, strlen(head)) < 0) {
		snprintf(why, whysz, "send: %s", strerror(errno));
		goto out;
	}
	while (sent < total) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN | POLLOUT };
		size_t off = sent % patlen, n = patlen - off;
		ssize_t w;
		int pr = poll(&p, 1, IO_TIMEOUT_MS);

		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			snprintf(why, whysz, "upload stalled");
			goto out;
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			break; /* an early answer: read it below */
		if (n > total - sent)
			n = total - sent;
		w = send(c->fd, pattern + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				continue;
			break;
		}
		sent += (size_t)w;
	}
	if (read_response(c, &r, 0, small_body_sink, &body) < 0) {
		snprintf(why, whysz, "no answer after %zu of %zu bytes", sent, total);
		goto out;
	}
	*ms = now_ms() - t0;
	status = r.status;
	if (status != 200) {
		snprintf(why, whysz, "HTTP %d %.120s", status, body.data);
	} else {
		cJSON *j = cJSON_Parse(body.data);
		const cJSON *first = cJSON_GetArrayItem(j, 0);
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(first, "path");
		struct stat st;

		if (!cJSON_IsString(p) || strcmp(p->valuestring, path) != 0)
			snprintf(why, whysz, "unexpected answer %.120s", body.data), status = -1;
		else if (stat(path, &st) < 0 || (size_t)st.st_size != total)
			snprintf(why, whysz, "file on disk is not %zu bytes", total), status = -1;
		cJSON_Delete(j);
	}
out:
	conn_close(c);
	free(c);
	return status;
}

static int bench_post(const struct config *cfg, int port, const char *path)
{
	size_t patlen = 1024 * 1024;
	unsigned char *pattern = malloc(patlen);
	double runs[16], ms = 0;
	char name[64], why[256] = "";
	uint32_t x = 2463534242u;
	int n = 0, fail = 0;
	struct stats s;

	if (!pattern) {
		fprintf(stderr, "envd-bench: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < patlen; i++) { /* xorshift: incompressible, cheap */
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		pattern[i] = (unsigned char)x;
	}
	snprintf(name, sizeof(name), "POST /files %zu MiB octet-stream", cfg->post_bytes >> 20);
	for (int i = 0; i < cfg->post_runs && i < 16; i++) {
		int status = post_file(port, path, pattern, patlen, cfg->post_bytes, &ms, why, sizeof(why));

		unlink(path);
		if (status == 501 && i == 0) {
			table_row(name, NULL, 0, "unavailable: HTTP 501");
			free(pattern);
			return 0;
		}
		if (status != 200) {
			fail++;
			continue;
		}
		runs[n++] = (double)cfg->post_bytes / MIB / (ms / 1e3);
	}
	free(pattern);
	if (n == 0) {
		stats_of(runs, 0, &s);
		table_row(name, &s, fail, "failed: %s", why);
		return fail;
	}
	stats_of(runs, (size_t)n, &s); /* sorts them: the best is last */
	table_row(name, NULL, 0, "%d run%s, %d failed: best %.1f MiB/s, median %.1f MiB/s", n, n == 1 ? "" : "s",
		  fail, runs[n - 1], s.p50);
	return fail;
}

/* ---- d: concurrent Start streams ------------------------------------- */

struct worker {
	pthread_t thread;
	int port;
	const char *req;
	size_t reqlen;
	pthread_barrier_t *barrier;
	double ms;
	int ok;
	char why[160];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct conn *c = conn_new();
	int connected = c && conn_open(c, w->port) == 0;

	if (!connected)
		snprintf(w->why, sizeof(w->why), "connect: %s", strerror(errno));
	pthread_barrier_wait(w->barrier);
	if (connected)
		w->ok = start_call(c, w->req, w->reqlen, &w->ms, w->why, sizeof(w->why)) == 0;
	if (c)
		conn_close(c);
	free(c);
	return NULL;
}

static int bench_concurrent(const struct config *cfg, int port, const char *cmd, const char *arg, const char *label)
{
	size_t n = (size_t)cfg->streams, reqlen, nv = 0;
	struct worker *w = calloc(n, sizeof(*w));
	double *v = calloc(n, sizeof(double)), t0, wall;
	char *req = start_request(port, cmd, arg, &reqlen);
	pthread_barrier_t barrier;
	pthread_attr_t attr;
	const char *first_why = NULL;
	char name[96];
	size_t started = 0;
	struct stats s;
	int fail = 0;

	if (!w || !v || !req) {
		fprintf(stderr, "envd-bench: out of memory\n");
		exit(1);
	}
	pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	for (size_t i = 0; i < n; i++) {
		w[i].port = port;
		w[i].req = req;
		w[i].reqlen = reqlen;
		w[i].barrier = &barrier;
		if (pthread_create(&w[i].thread, &attr, worker_main, &w[i]) != 0) {
			fprintf(stderr, "envd-bench: cannot create thread %zu\n", i);
			exit(1);
		}
		started++;
	}
	pthread_barrier_wait(&barrier);
	t0 = now_ms();
	for (size_t i = 0; i < started; i++)
		pthread_join(w[i].thread, NULL);
	wall = now_ms() - t0;
	for (size_t i = 0; i < n; i++) {
		if (w[i].ok) {
			v[nv++] = w[i].ms;
		} else {
			fail++;
			if (!first_why)
				first_why = w[i].why;
		}
	}
	stats_of(v, nv, &s);
	snprintf(name, sizeof(name), "%zu concurrent Start, %s", n, label);
	if (fail)
		table_row(name, &s, fail, "wall %.1f ms; first failure: %s", wall, first_why);
	else
		table_row(name, &s, 0, "wall %.1f ms, all %zu completed", wall, nv);
	pthread_attr_destroy(&attr);
	pthread_barrier_destroy(&barrier);
	free(req);
	free(v);
	free(w);
	return fail;
}

/* ---- main ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fputs("usage: envd-bench [--calls N] [--quick] [PATH-TO-HANGAR-ENVD]\n"
	      "  The daemon path may also come from $HANGAR_ENVD.\n"
	      "  --calls N  Start and fork+exec samples (default 1000; 100 with --quick)\n"
	      "  --quick    small counts and a small upload, for a smoke run\n",
	      f);
}

static int write_get_file(const char *path, unsigned char **out)
{
	unsigned char *data = malloc(GET_FILE_SIZE);
	size_t have = 0;
	int fd;

	if (!data)
		return -1;
	/* Text-like lines, so gzip has something to do. */
	for (unsigned i = 0; have < GET_FILE_SIZE; i++) {
		char line[96];
		int n = snprintf(line, sizeof(line), "%08u envd-bench: the quick brown fox jumps over %u lazy dogs\n",
				 i, i * 2654435761u % 1000);
		size_t take = (size_t)n < GET_FILE_SIZE - have ? (size_t)n : GET_FILE_SIZE - have;

		memcpy(data + have, line, take);
		have += take;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, data, GET_FILE_SIZE) != GET_FILE_SIZE) {
		if (fd >= 0)
			close(fd);
		free(data);
		return -1;
	}
	close(fd);
	*out = data;
	return 0;
}

int main(int argc, char **argv)
{
	struct config cfg = {
		.calls = 1000, .warmups = 50, .get_calls = 200, .get_warmups = 5,
		.post_bytes = (size_t)100 << 20, .post_runs = 3, .streams = 100,
	};
	int calls = -1, quick = 0, port, failures = 0, stop_status;
	long rss_start, rss_end, hwm, anon_start, anon_end;
	char version[64] = "?", *ver_argv[3];
	const char *tmp = getenv("TMPDIR");
	unsigned char *get_data = NULL;
	const char *sleep_bin;
	struct sigaction sa;
	struct utsname un;
	struct stat st;
	pid_t pid;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--calls") == 0 && i + 1 < argc) {
			char *end;
			long n = strtol(argv[++i], &end, 10);

			if (*end || n < 1 || n > 10000000) {
				fprintf(stderr, "envd-bench: invalid --calls %s\n", argv[i]);
				return 2;
			}
			calls = (int)n;
		} else if (strcmp(a, "--quick") == 0) {
			quick = 1;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (a[0] == '-' || cfg.daemon) {
			usage(stderr);
			return 2;
		} else {
			cfg.daemon = a;
		}
	}
	if (!cfg.daemon)
		cfg.daemon = getenv("HANGAR_ENVD");
	if (!cfg.daemon || !*cfg.daemon) {
		usage(stderr);
		return 2;
	}
	if (quick) {
		cfg.calls = 100;
		cfg.warmups = 10;
		cfg.get_calls = 20;
		cfg.get_warmups = 2;
		cfg.post_bytes = (size_t)8 << 20;
		cfg.streams = 10;
	}
	if (calls > 0)
		cfg.calls = calls;
	if (access(cfg.daemon, X_OK) < 0 || access("/bin/true", X_OK) < 0) {
		fprintf(stderr, "envd-bench: %s and /bin/true must be executable\n", cfg.daemon);
		return 1;
	}
	sleep_bin = access("/bin/sleep", X_OK) == 0 ? "/bin/sleep" : "/usr/bin/sleep";

	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	snprintf(g_tmpdir, sizeof(g_tmpdir), "%s/envd-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(g_tmpdir)) {
		fprintf(stderr, "envd-bench: mkdtemp: %s\n", strerror(errno));
		g_tmpdir[0] = '\0';
		return 1;
	}
	snprintf(g_paths[PATH_GET], sizeof(g_paths[0]), "%s/get-1MiB.txt", g_tmpdir);
	snprintf(g_paths[PATH_POST], sizeof(g_paths[0]), "%s/post.bin", g_tmpdir);
	snprintf(g_paths[PATH_STRIP], sizeof(g_paths[0]), "%s/hangar-envd.stripped", g_tmpdir);

	ver_argv[0] = (char *)cfg.daemon;
	ver_argv[1] = (char *)"-version";
	ver_argv[2] = NULL;
	run_quiet(ver_argv, version, sizeof(version));

	pid = daemon_start(cfg.daemon, g_tmpdir, &port);
	if (pid < 0) {
		remove_temp_files();
		return 1;
	}
	usleep(100000); /* let start-up settle before sampling idle memory */
	rss_start = status_kib(pid, "VmRSS");
	anon_start = status_kib(pid, "RssAnon");

	uname(&un);
	printf("hangar-envd benchmark: %s (envd %s), pid %d on 127.0.0.1:%d\n", cfg.daemon, version, (int)pid,
	       port);
	printf("host: %ld CPUs, %s %s; %s counts\n\n", sysconf(_SC_NPROCESSORS_ONLN), un.sysname, un.release,
	       quick ? "quick" : "full");
	table_header();

	failures += bench_start(&cfg, port);

	if (write_get_file(g_paths[PATH_GET], &get_data) < 0) {
		fprintf(stderr, "envd-bench: cannot write %s: %s\n", g_paths[PATH_GET], strerror(errno));
		failures++;
	} else {
		failures += bench_get(&cfg, port, g_paths[PATH_GET], get_data, GET_FILE_SIZE, 0);
		failures += bench_get(&cfg, port, g_paths[PATH_GET], get_data, GET_FILE_SIZE, 1);
		free(get_data);
	}

	failures += bench_post(&cfg, port, g_paths[PATH_POST]);

	failures += bench_concurrent(&cfg, port, sleep_bin, "0.2", "sleep 0.2");
	failures += bench_concurrent(&cfg, port, "/bin/true", NULL, "/bin/true");

	usleep(500000); /* connection threads finish after their sockets close */
	rss_end = status_kib(pid, "VmRSS");
	anon_end = status_kib(pid, "RssAnon");
	hwm = status_kib(pid, "VmHWM");
	table_row("daemon VmRSS, idle: at start / at end", NULL, 0, "%ld KiB / %ld KiB (peak VmHWM %ld KiB)",
		  rss_start, rss_end, hwm);
	/* Shared library pages are shared by every sandbox's daemon; private memory is each one's own cost. */
	table_row("daemon private (RssAnon): at start / at end", NULL, 0, "%ld KiB / %ld KiB", anon_start, anon_end);

	if (stat(cfg.daemon, &st) == 0) {
		char *strip_argv[] = { (char *)"strip", (char *)"-o", g_paths[PATH_STRIP], (char *)cfg.daemon, NULL };
		struct stat sst;

		if (run_quiet(strip_argv, NULL, 0) == 0 && stat(g_paths[PATH_STRIP], &sst) == 0)
			table_row("binary size: as built / stripped", NULL, 0, "%lld KiB / %lld KiB",
				  (long long)st.st_size / 1024, (long long)sst.st_size / 1024);
		else
			table_row("binary size: as built / stripped", NULL, 0, "%lld KiB / (strip failed)",
				  (long long)st.st_size / 1024);
	}

	stop_status = daemon_stop(pid);
	if (stop_status < 0 || !WIFEXITED(stop_status) || WEXITSTATUS(stop_status) != 0) {
		fprintf(stderr, "envd-bench: the daemon did not stop cleanly on SIGTERM\n");
		failures++;
	}
	failures += bench_daemon_start(&cfg, g_tmpdir);
	remove_temp_files();
	printf("\n%s\n", failures ? "some requests failed (see the fail column)" : "all requests succeeded");
	return failures ? 1 : 0;
}
