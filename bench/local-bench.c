/*
 * local-bench: figures for libhangar driving the local provider (bubblewrap
 * jails running hangar-envd), through the public API only.
 *
 *   a. create -> first command, and each half alone
 *   b. exec round trip through the library against a raw Start sent straight
 *      to the same sandbox's envd over its unix socket
 *   c. concurrent creates and kills on one shared context
 *   d. idle memory per sandbox (VmRSS, RssAnon, Pss over its processes)
 *   e. the warm pool: create -> first command from it, without and with
 *      variables, and concurrent creates with a pool as large as their number
 *   f. a session fork of N on the workspace session-bench uses (a git
 *      repository of 50 MiB tracked and 300 MiB ignored files): until
 *      hangar_session_fork() returns, and until each fork has answered a
 *      command
 *
 * It prints what it measured and never judges a timing. It works in a fresh
 * state directory of its own (HANGAR_STATE_DIR is overridden), kills every
 * sandbox it made and removes the directory before it exits, also on
 * SIGINT, SIGTERM and SIGHUP, and runs on to its end when its output is
 * closed.
 *
 * usage: local-bench [--quick] [-n N] [--creates N] [--concurrent N] [--idle N] [--forks N] [--image REF]
 * Needs HANGAR_ENVD_PATH (and HANGAR_JAIL_PATH in a build tree); run as root.
 * With --image, every sandbox is created from that image of the store
 * (HANGAR_IMAGE_DIR), and a. also times the `local` template beside it.
 * See bench/README.md for what each figure means.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <hangar/hangar.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define MIB (1024.0 * 1024.0)
#define IO_TIMEOUT_MS 180000
#define LINE_MAX_LEN 8192
#define ENVELOPE_MAX (4u << 20)
#define SANDBOX_LIFETIME_SEC 1800 /* a backstop: sandboxes left behind by a crash expire */
#define MAX_PIDS 65536

struct config {
	int creates, create_warmups;   /* a */
	int execs, exec_warmups;       /* b */
	int concurrent;                /* c */
	int idle;                      /* d */
	int forks, fork_runs;          /* f */
	unsigned tracked_mib, ignored_mib;
};

static hangar_ctx *g_ctx;
static const char *g_template;  /* --image: every create's template; NULL: "local" */
static char g_state[128];
static char g_local[160];       /* <state>/local */
static int g_failed;            /* any wrong answer or failed operation: exit 1 */
static pthread_mutex_t g_cleanup_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_flight_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_flight_done = PTHREAD_COND_INITIALIZER;
static int g_inflight;          /* creates under way */
static int g_stopping;          /* a signal came: no new creates */

/* ---- time and statistics ---------------------------------------------- */


/* ---- the table ------------------------------------------------------------ */

static void section(const char *title)
{
	printf("\n%s\n", title);
	printf("  %-38s %6s %5s %9s %9s %9s %9s  %s\n", "benchmark", "n", "fail", "p50 ms", "p95 ms", "p99 ms",
	       "mean ms", "result");
	fflush(stdout);
}

static void __attribute__((format(printf, 4, 5)))
row(const char *name, const struct stats *s, int fail, const char *fmt, ...)
{
	char note[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	if (s && s->n > 0)
		printf("  %-38s %6zu %5d %9.3f %9.3f %9.3f %9.3f  %s\n", name, s->n, fail, s->p50, s->p95, s->p99,
		       s->mean, note);
	else if (s)
		printf("  %-38s %6zu %5d %9s %9s %9s %9s  %s\n", name, (size_t)0, fail, "-", "-", "-", "-", note);
	else
		printf("  %-38s %6s %5s %9s %9s %9s %9s  %s\n", name, "", "", "", "", "", "", note);
	fflush(stdout);
}

/* Keeps the first failure's message of a series. */
static void note_failure(char *first, size_t size, const char *what, int rc)
{
	g_failed = 1;
	if (first[0])
		return;
	if (rc < 0)
		snprintf(first, size, "%s: %s (%s)", what, hangar_error_last()->message, hangar_error_name(rc));
	else
		snprintf(first, size, "%s", what);
}

/* ---- files ------------------------------------------------------------------ */

/*
 * envd's token as the sandbox's supervisor serves it on dir/jail.sock to the
 * library's uid (it is never on disk). 0 with it in out, -1 otherwise.
 */
static int jail_token(const char *dir, char *out, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timespec t0;
	size_t have = 0;
	int fd;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/jail.sock", dir) >= (int)sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (have < size - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		struct timespec now;
		long left;
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = 5000 - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		n = read(fd, out + have, size - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fd);
	out[have] = '\0';
	if (have == 0) {
		errno = EPROTO;
		return -1;
	}
	return 0;
}

/* The first line of a small file, without its newline; -1 when unreadable. */
static int read_line_file(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "re");
	int rc = -1;

	if (!f)
		return -1;
	if (fgets(out, (int)size, f)) {
		out[strcspn(out, "\r\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "local-bench: cannot remove %s: %s (flag %d)\n", path, strerror(errno), flag);
	return 0;
}

/* ---- cleaning up: kill every sandbox in our state directory ------------ */

struct idlist {
	char (*ids)[72];
	size_t n, cap;
};

static int collect_id(const hangar_sandbox_info *info, void *payload)
{
	struct idlist *l = payload;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		void *p = realloc(l->ids, cap * sizeof(*l->ids));

		if (!p)
			return 1;
		l->ids = p;
		l->cap = cap;
	}
	snprintf(l->ids[l->n++], sizeof(l->ids[0]), "%.*s", (int)sizeof(l->ids[0]) - 1, info->id);
	return 0;
}

/*
 * The directory of running sandboxes' directories: the target of
 * <state>/local/run when the library made one (on a tmpfs), else
 * <state>/local itself.
 */
static const char *run_dir(void)
{
	static char run[PATH_MAX];
	char link[PATH_MAX];
	ssize_t n;

	if (run[0])
		return run;
	snprintf(link, sizeof(link), "%s/run", g_local);
	n = readlink(link, run, sizeof(run) - 1);
	if (n > 0) {
		run[n] = '\0';
		return run;
	}
	run[0] = '\0';
	return g_local;
}

/* Kills what is left and removes the state directory, and its runtime directory. Safe to run twice. */
static void cleanup(void)
{
	struct idlist l = { 0 };

	pthread_mutex_lock(&g_cleanup_lock);
	if (g_ctx) {
		DIR *d = opendir(run_dir());
		struct dirent *de;
		char snaps[PATH_MAX];

		hangar_sandbox_list(g_ctx, "local", collect_id, &l);
		/* The warm pool's sandboxes are not listed: found by their directories. */
		while (d && (de = readdir(d))) {
			hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;

			info.id = de->d_name;
			if (!strncmp(de->d_name, "sb-", 3) && collect_id(&info, &l))
				break;
		}
		if (d)
			closedir(d);
		for (size_t i = 0; i < l.n; i++) {
			hangar_sandbox *sb = NULL;

			if (hangar_sandbox_attach(&sb, g_ctx, "local", l.ids[i]) == 0)
				hangar_sandbox_kill(sb);
			hangar_sandbox_unref(sb);
		}
		free(l.ids);
		/* Through the provider: a caller that is not root cannot remove its snapshots' files itself. */
		snprintf(snaps, sizeof(snaps), "%s/snapshots", g_local);
		d = opendir(snaps);
		while (d && (de = readdir(d)))
			if (!strncmp(de->d_name, "snap-", 5))
				hangar_snapshot_delete(g_ctx, "local", de->d_name);
		if (d)
			closedir(d);
	}
	if (g_state[0]) {
		if (strcmp(run_dir(), g_local) != 0)
			nftw(run_dir(), rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		nftw(g_state, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		g_state[0] = '\0';
	}
	pthread_mutex_unlock(&g_cleanup_lock);
}

/* Waits for SIGINT, SIGTERM or SIGHUP (blocked in every other thread). */
static void *signal_thread(void *arg)
{
	sigset_t *set = arg;
	int sig = 0;

	struct timespec deadline;

	if (sigwait(set, &sig) != 0)
		return NULL;
	fprintf(stderr, "local-bench: signal %d, killing the sandboxes and removing %s\n", sig, g_state);
	/* Let the creates under way finish (they are bounded by the request timeout), so none is missed. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 120;
	pthread_mutex_lock(&g_flight_lock);
	g_stopping = 1;
	while (g_inflight > 0 && pthread_cond_timedwait(&g_flight_done, &g_flight_lock, &deadline) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&g_flight_lock);
	cleanup();
	_exit(128 + sig);
}

/* ---- a raw envd client over the sandbox's unix socket ----------------------- */

struct conn {
	int fd;
	size_t off, len;
	char buf[64 * 1024];
};

static int conn_open(struct conn *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	c->off = c->len = 0;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(c->fd);
		c->fd = -1;
		errno = e;
		return -1;
	}
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->off = c->len = 0;
}

/* Reads more bytes: >0 read, 0 at EOF, -1 on error or after IO_TIMEOUT_MS. */
static ssize_t conn_fill(struct conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int r;

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
	do
		r = poll(&p, 1, IO_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	if (r <= 0)
		return -1;
	do
		n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
	while (n < 0 && errno == EINTR);
	if (n > 0)
		c->len += (size_t)n;
	return n;
}

static int conn_send(struct conn *c, const char *p, size_t n)
{
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

/* One line without its line end. -1 on EOF, error or an overlong line. */
static int conn_line(struct conn *c, char *out, size_t size)
{
	for (;;) {
		char *start = c->buf + c->off, *nl = memchr(start, '\n', c->len - c->off);

		if (nl) {
			size_t n = (size_t)(nl - start), keep = n;

			if (keep > 0 && start[keep - 1] == '\r')
				keep--;
			if (keep >= size)
				return -1;
			memcpy(out, start, keep);
			out[keep] = '\0';
			c->off += n + 1;
			return 0;
		}
		if (c->len - c->off >= size || conn_fill(c) <= 0)
			return -1;
	}
}

/* A Start stream being checked as it arrives: start first, one clean end, then {}. */
struct stream {
	unsigned char hdr[5];
	size_t hdr_have;
	uint32_t len;
	char *payload;
	size_t have;
	int envelopes, starts, ends, eos, bad;
	char why[256];
};

static void stream_fail(struct stream *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void stream_fail(struct stream *s, const char *fmt, ...)
{
	va_list ap;

	if (s->bad++)
		return;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
}

static void stream_message(struct stream *s, int flags, const char *json)
{
	cJSON *j = cJSON_Parse(json);
	const cJSON *ev, *end;

	if (!cJSON_IsObject(j)) {
		stream_fail(s, "envelope %d is not a JSON object", s->envelopes);
	} else if (s->eos) {
		stream_fail(s, "an envelope after the end of the stream");
	} else if (flags & 0x02) {
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");

		s->eos = 1;
		if (err) {
			char *txt = cJSON_PrintUnformatted(err);

			stream_fail(s, "stream error %s", txt ? txt : "?");
			free(txt);
		}
	} else {
		ev = cJSON_GetObjectItemCaseSensitive(j, "event");
		if (cJSON_GetObjectItemCaseSensitive(ev, "start") && s->envelopes != 0)
			stream_fail(s, "the start event is not first");
		if (cJSON_GetObjectItemCaseSensitive(ev, "start"))
			s->starts++;
		end = cJSON_GetObjectItemCaseSensitive(ev, "end");
		if (end) {
			const cJSON *code = cJSON_GetObjectItemCaseSensitive(end, "exitCode");

			s->ends++;
			if ((code && !(cJSON_IsNumber(code) && code->valuedouble == 0)) ||
			    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(end, "exited"))) {
				char *txt = cJSON_PrintUnformatted(end);

				stream_fail(s, "the command did not exit 0: %s", txt ? txt : "?");
				free(txt);
			}
		}
	}
	s->envelopes++;
	cJSON_Delete(j);
}

static int stream_feed(struct stream *s, const char *data, size_t n)
{
	while (n > 0) {
		size_t take;

		if (s->hdr_have < 5) {
			take = 5 - s->hdr_have;
			if (take > n)
				take = n;
			memcpy(s->hdr + s->hdr_have, data, take);
			s->hdr_have += take;
			data += take;
			n -= take;
			if (s->hdr_have < 5)
				break;
			s->len = (uint32_t)s->hdr[1] << 24 | (uint32_t)s->hdr[2] << 16 | (uint32_t)s->hdr[3] << 8 |
				 (uint32_t)s->hdr[4];
			if (s->len > ENVELOPE_MAX || !(s->payload = malloc((size_t)s->len + 1)))
				return -1;
			s->have = 0;
		}
		take = s->len - s->have;
		if (take > n)
			take = n;
		memcpy(s->payload + s->have, data, take);
		s->have += take;
		data += take;
		n -= take;
		if (s->have == s->len) {
			s->payload[s->len] = '\0';
			stream_message(s, s->hdr[0], s->payload);
			free(s->payload);
			s->payload = NULL;
			s->hdr_have = 0;
		}
	}
	return 0;
}

/* Hands n body bytes to the stream. */
static int conn_body(struct conn *c, uint64_t n, struct stream *s)
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
		if (stream_feed(s, c->buf + c->off, avail) < 0)
			return -1;
		c->off += avail;
		n -= avail;
	}
	return 0;
}

/*
 * Reads one response (status line, headers, a Content-Length or chunked
 * body) into s. Returns the HTTP status, or -1 when the connection broke.
 * *close is set when the server will not keep the connection.
 */
static int read_response(struct conn *c, struct stream *s, int *close_after)
{
	char line[LINE_MAX_LEN];
	int status = 0, chunked = 0, major, minor;
	int64_t length = -1;

	do {
		if (conn_line(c, line, sizeof(line)) < 0 || sscanf(line, "HTTP/%d.%d %d", &major, &minor, &status) != 3)
			return -1;
		*close_after = major == 1 && minor == 0;
		for (;;) {
			char *v;

			if (conn_line(c, line, sizeof(line)) < 0)
				return -1;
			if (!line[0])
				break;
			v = strchr(line, ':');
			if (!v)
				return -1;
			*v++ = '\0';
			while (*v == ' ' || *v == '\t')
				v++;
			if (strcasecmp(line, "Content-Length") == 0)
				length = strtoll(v, NULL, 10);
			else if (strcasecmp(line, "Transfer-Encoding") == 0 && strcasestr(v, "chunked"))
				chunked = 1;
			else if (strcasecmp(line, "Connection") == 0)
				*close_after = strcasestr(v, "close") != NULL;
		}
	} while (status >= 100 && status < 200);
	if (chunked) {
		for (;;) {
			unsigned long long size;
			char *end;

			if (conn_line(c, line, sizeof(line)) < 0)
				return -1;
			size = strtoull(line, &end, 16);
			if (end == line)
				return -1;
			if (size == 0)
				break;
			if (conn_body(c, size, s) < 0 || conn_line(c, line, sizeof(line)) < 0 || line[0])
				return -1;
		}
		do /* trailers */
			if (conn_line(c, line, sizeof(line)) < 0)
				return -1;
		while (line[0]);
	} else if (length >= 0) {
		if (conn_body(c, (uint64_t)length, s) < 0)
			return -1;
	} else {
		return -1; /* a body to the end of the connection: not what envd sends */
	}
	return status;
}

static char *base64(const char *in)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(in), o = 0;
	char *out = malloc(4 * ((n + 2) / 3) + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)(unsigned char)in[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)(unsigned char)in[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)in[i + 2];
		out[o++] = tab[v >> 18 & 63];
		out[o++] = tab[v >> 12 & 63];
		out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
		out[o++] = i + 2 < n ? tab[v & 63] : '=';
	}
	out[o] = '\0';
	return out;
}

/*
 * A whole Start request: headers as the library sends them for an exec
 * (token, Basic auth for "user", Connect headers) and one envelope with
 * {"process":{"cmd":cmd,"args":args,"envs":{"CI":"true"}},"stdin":false}.
 */
static char *start_request(const char *token, const char *cmd, const char *const *args, size_t *outlen)
{
	cJSON *root = cJSON_CreateObject(), *proc = cJSON_AddObjectToObject(root, "process");
	cJSON *jargs = cJSON_AddArrayToObject(proc, "args"), *envs = cJSON_AddObjectToObject(proc, "envs");
	char *json, *auth = base64("user:"), *req = NULL;
	size_t jlen;
	int hlen;
	char head[1024];

	cJSON_AddStringToObject(proc, "cmd", cmd);
	for (const char *const *a = args; a && *a; a++)
		cJSON_AddItemToArray(jargs, cJSON_CreateString(*a));
	cJSON_AddStringToObject(envs, "CI", "true");
	cJSON_AddFalseToObject(root, "stdin");
	json = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!json || !auth)
		goto out;
	jlen = strlen(json);
	hlen = snprintf(head, sizeof(head),
			"POST /process.Process/Start HTTP/1.1\r\n"
			"Host: localhost\r\n"
			"Content-Type: application/connect+json\r\n"
			"Connect-Accept-Encoding: identity\r\n"
			"Connect-Timeout-Ms: 135000\r\n"
			"Keepalive-Ping-Interval: 30\r\n"
			"X-Access-Token: %s\r\n"
			"Authorization: Basic %s\r\n"
			"Content-Length: %zu\r\n"
			"\r\n",
			token, auth, jlen + 5);
	if (hlen <= 0 || (size_t)hlen >= sizeof(head) || !(req = malloc((size_t)hlen + 5 + jlen)))
		goto out;
	memcpy(req, head, (size_t)hlen);
	req[hlen] = 0;
	req[hlen + 1] = (char)(jlen >> 24);
	req[hlen + 2] = (char)(jlen >> 16);
	req[hlen + 3] = (char)(jlen >> 8);
	req[hlen + 4] = (char)jlen;
	memcpy(req + hlen + 5, json, jlen);
	*outlen = (size_t)hlen + 5 + jlen;
out:
	free(json);
	free(auth);
	return req;
}

/* The socket path and request of one raw series. */
struct raw {
	const char *socket;
	struct conn *c;
	char *req;
	size_t reqlen;
	int opens;
};

/* One raw Start round trip, reopening the connection when envd closed it. 0 or -1 with why. */
static int raw_call(struct raw *r, double *ms, char *why, size_t whysz)
{
	struct stream s = { 0 };
	int status, close_after = 0, rc = -1;
	double t0;

	if (r->c->fd < 0) {
		if (conn_open(r->c, r->socket) < 0) {
			snprintf(why, whysz, "connect %s: %s", r->socket, strerror(errno));
			return -1;
		}
		r->opens++;
	}
	t0 = now_ms();
	errno = 0;
	if (conn_send(r->c, r->req, r->reqlen) < 0 || (status = read_response(r->c, &s, &close_after)) < 0) {
		snprintf(why, whysz, "the connection broke mid-request: %s", errno ? strerror(errno) : "protocol error");
		conn_close(r->c);
		goto out;
	}
	*ms = now_ms() - t0;
	if (status != 200)
		snprintf(why, whysz, "HTTP %d", status);
	else if (s.bad)
		snprintf(why, whysz, "%s", s.why);
	else if (!s.eos || s.starts != 1 || s.ends != 1)
		snprintf(why, whysz, "%d start and %d end events, end of stream %s", s.starts, s.ends,
			 s.eos ? "seen" : "missing");
	else
		rc = 0;
	if (close_after)
		conn_close(r->c);
out:
	free(s.payload);
	return rc;
}

/* ---- sandboxes -------------------------------------------------------------- */

/*
 * Creates a local sandbox, unless a signal asked us to stop. Creates in
 * flight are counted so the clean-up can wait for them: a sandbox still
 * being created is not listed yet and would be left behind.
 */
/* Before a call that makes sandboxes: 0, or -1 once a signal asked us to stop. */
static int flight_enter(void)
{
	int stopping;

	pthread_mutex_lock(&g_flight_lock);
	stopping = g_stopping;
	if (!stopping)
		g_inflight++;
	pthread_mutex_unlock(&g_flight_lock);
	return stopping ? -1 : 0;
}

static void flight_leave(void)
{
	pthread_mutex_lock(&g_flight_lock);
	if (--g_inflight == 0)
		pthread_cond_broadcast(&g_flight_done);
	pthread_mutex_unlock(&g_flight_lock);
}

static int create_sandbox_env(hangar_sandbox **out, const char *const *env)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	int rc;

	*out = NULL;
	if (flight_enter() < 0)
		return HANGAR_ECREATE;
	o.provider = "local";
	o.timeout_sec = SANDBOX_LIFETIME_SEC;
	o.template_id = g_template;
	o.env = env;
	rc = hangar_sandbox_create(out, g_ctx, &o);
	flight_leave();
	return rc;
}

static int create_sandbox(hangar_sandbox **out)
{
	return create_sandbox_env(out, NULL);
}

/* hangar_sandbox_exec of `true`: 0, a negative code, or 1 for a non-zero exit. */
static int exec_true(hangar_sandbox *sb)
{
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	int rc = hangar_sandbox_exec(&res, sb, "true", NULL);

	if (rc == 0 && res.exit_code != 0)
		rc = 1;
	hangar_exec_result_dispose(&res);
	return rc;
}

static const char *exec_failure(int rc)
{
	return rc > 0 ? "`true` exited non-zero" : "exec";
}

/* ---- a: create -> first command ---------------------------------------------- */

/*
 * The steps of each create, from the sandbox's timeline file (the library
 * and the jail append "STEP MONO_US" as each step ends): per step, the
 * milliseconds since the step before, over every timed create.
 */
#define STEPS_MAX 32
struct steps {
	char name[STEPS_MAX][32];
	double *ms[STEPS_MAX];
	size_t n[STEPS_MAX];
	int count, cap;
};

static void steps_add(struct steps *st, const char *id)
{
	char path[PATH_MAX], phase[64];
	long long at, prev = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/timeline", run_dir(), id);
	if (!(f = fopen(path, "re")))
		return;
	while (fscanf(f, "%63s %lld", phase, &at) == 2) {
		int k;

		for (k = 0; k < st->count && strcmp(st->name[k], phase); k++)
			;
		if (k == st->count && st->count < STEPS_MAX) {
			snprintf(st->name[k], sizeof(st->name[k]), "%.31s", phase);
			st->ms[k] = calloc((size_t)st->cap, sizeof(double));
			st->count++;
		}
		if (k < st->count && st->ms[k] && prev >= 0 && st->n[k] < (size_t)st->cap)
			st->ms[k][st->n[k]++] = (double)(at - prev) / 1000.0;
		prev = at;
	}
	fclose(f);
}

static void steps_print(struct steps *st)
{
	printf("  where a create's time goes: each step's end since the step before (library and jail, one clock)\n");
	for (int k = 0; k < st->count; k++) {
		struct stats s;
		char label[64];

		if (!st->n[k])
			continue;
		stats_of(st->ms[k], st->n[k], &s);
		snprintf(label, sizeof(label), "    %s", st->name[k]);
		row(label, &s, 0, "%s", "step");
		free(st->ms[k]);
	}
}

/*
 * The floor a local sandbox stands on: a bare bubblewrap jail of the same
 * shape (new user, pid, network, ipc, uts and cgroup namespaces, the host's
 * /usr and /etc read-only, its own /proc, /dev and /tmp) running `true`,
 * started and waited for. No supervisor, no cgroups, no network helper, no
 * envd: what a create costs on top of it is the ratio printed. The time of
 * one run in ms, or -1 when bwrap could not be run or failed.
 */
extern char **environ;

static double bare_bwrap_ms(void)
{
	const char *bwrap = getenv("HANGAR_BWRAP_PATH");
	char *const argv[] = {
		(char *)(bwrap && *bwrap ? bwrap : "bwrap"), "--unshare-all", "--die-with-parent",
		"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/",
		"/usr/bin/true", NULL,
	};
	double t0 = now_ms();
	int status;
	pid_t pid;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? now_ms() - t0 : -1;
}

static void bench_create_first(const struct config *cfg)
{
	int n = cfg->creates, fail = 0, kill_fail = 0, got = 0;
	double *total = calloc((size_t)n, sizeof(double)), *create = calloc((size_t)n, sizeof(double));
	double *exec = calloc((size_t)n, sizeof(double)), *bare = calloc((size_t)n, sizeof(double));
	char first[512] = "";
	struct stats s_total, s_create, s_exec, s_bare;
	int bare_got = 0, bare_fail = 0;

	if (!total || !create || !exec || !bare) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	struct steps st = { .cap = n };

	section(g_template ? "a. local create from the image -> first command (one at a time; each killed after, untimed)"
			   : "a. local create -> first command (one at a time; each sandbox killed after, untimed)");
	for (int i = 0; i < cfg->create_warmups + n; i++) {
		int timed = i >= cfg->create_warmups, rc;
		hangar_sandbox *sb = NULL;
		double t0, t1, t2, b;

		/* The bare jail in the same rounds, so that both see the same load. */
		b = bare_bwrap_ms();
		if (timed && b >= 0)
			bare[bare_got++] = b;
		else if (timed)
			bare_fail++;
		t0 = now_ms();
		rc = create_sandbox(&sb);
		t1 = now_ms();
		if (rc) {
			fail += timed;
			note_failure(first, sizeof(first), "create", rc);
			continue;
		}
		rc = exec_true(sb);
		t2 = now_ms();
		if (rc) {
			fail += timed;
			note_failure(first, sizeof(first), exec_failure(rc), rc);
		} else if (timed) {
			total[got] = t2 - t0;
			create[got] = t1 - t0;
			exec[got++] = t2 - t1;
			steps_add(&st, hangar_sandbox_id(sb));
		}
		if ((rc = hangar_sandbox_kill(sb)) != 0) {
			kill_fail++;
			note_failure(first, sizeof(first), "kill", rc);
		}
		hangar_sandbox_unref(sb);
	}
	stats_of(total, (size_t)got, &s_total);
	stats_of(create, (size_t)got, &s_create);
	stats_of(exec, (size_t)got, &s_exec);
	row("create + exec `true`", &s_total, fail, "%d warm-ups%s%s", cfg->create_warmups, first[0] ? "; first failure: " : "",
	    first);
	row("  create alone", &s_create, fail, "until the sandbox answers");
	row("  first exec alone", &s_exec, fail, "first connection to the new envd");
	stats_of(bare, (size_t)bare_got, &s_bare);
	row("bare bubblewrap jail running `true`", &s_bare, bare_fail, "bwrap --unshare-all, host /usr and /etc");
	if (s_bare.n > 0 && s_total.n > 0)
		row("  create + exec / bare", NULL, 0, "p50 %.1fx (+%.3f ms), p95 %.1fx", s_total.p50 / s_bare.p50,
		    s_total.p50 - s_bare.p50, s_total.p95 / s_bare.p95);
	if (bare_fail)
		g_failed = 1;
	if (kill_fail)
		row("  kill failures", NULL, 0, "%d", kill_fail);
	steps_print(&st);
	free(total);
	free(create);
	free(exec);
	free(bare);
}

/* ---- b: exec through the library against a raw Start --------------------------- */

static void bench_exec_vs_raw(const struct config *cfg)
{
	int n = cfg->execs, fail_lib = 0, fail_wrap = 0, fail_direct = 0;
	size_t n_lib = 0, n_wrap = 0, n_direct = 0;
	double *lib = calloc((size_t)n, sizeof(double)), *wrap = calloc((size_t)n, sizeof(double));
	double *direct = calloc((size_t)n, sizeof(double));
	char first_lib[512] = "", first_wrap[512] = "", first_direct[512] = "";
	char dir[320], sock[400], token[256], secs[32] = "120";
	hangar_buf tmo = HANGAR_BUF_INIT;
	struct conn *c1 = calloc(1, sizeof(*c1)), *c2 = calloc(1, sizeof(*c2));
	struct raw r_wrap = { 0 }, r_direct = { 0 };
	struct stats s_lib, s_wrap, s_direct;
	hangar_sandbox *sb = NULL;
	int rc;

	section("b. exec round trip: libhangar against a raw Start on the same envd socket");
	if (!lib || !wrap || !direct || !c1 || !c2) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	c1->fd = c2->fd = -1;
	rc = create_sandbox(&sb);
	if (rc) {
		g_failed = 1;
		row("(not run)", NULL, 0, "create: %s (%s)", hangar_error_last()->message, hangar_error_name(rc));
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s/%s", run_dir(), hangar_sandbox_id(sb));
	snprintf(sock, sizeof(sock), "%s/envd.sock", dir);
	if (jail_token(dir, token, sizeof(token)) < 0) {
		g_failed = 1;
		row("(not run)", NULL, 0, "no token from %s/jail.sock: %s", dir, strerror(errno));
		goto out;
	}
	/* The wrapper the library puts around a command, with its timeout setting. */
	if (hangar_ctx_get(&tmo, g_ctx, "HANGAR_EXEC_TIMEOUT_SECONDS") == 0 && tmo.ptr && tmo.ptr[0])
		snprintf(secs, sizeof(secs), "%ss", tmo.ptr);
	else
		snprintf(secs, sizeof(secs), "120s");
	hangar_buf_dispose(&tmo);
	{
		const char *wrap_args[] = { "-k", "5s", secs, "bash", "-lc", "true", NULL };

		r_wrap.req = start_request(token, "timeout", wrap_args, &r_wrap.reqlen);
		r_direct.req = start_request(token, "/bin/true", NULL, &r_direct.reqlen);
	}
	explicit_bzero(token, sizeof(token));
	if (!r_wrap.req || !r_direct.req) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	r_wrap.socket = r_direct.socket = sock;
	r_wrap.c = c1;
	r_direct.c = c2;

	/* Interleaved, so a drift in the machine's speed hits the three series alike. */
	for (int i = 0; i < cfg->exec_warmups + n; i++) {
		int timed = i >= cfg->exec_warmups;
		char why[512];
		double t0, ms;

		t0 = now_ms();
		rc = exec_true(sb);
		ms = now_ms() - t0;
		if (rc) {
			fail_lib += timed;
			note_failure(first_lib, sizeof(first_lib), exec_failure(rc), rc);
		} else if (timed) {
			lib[n_lib++] = ms;
		}
		if (raw_call(&r_wrap, &ms, why, sizeof(why)) < 0) {
			fail_wrap += timed;
			note_failure(first_wrap, sizeof(first_wrap), why, 0);
		} else if (timed) {
			wrap[n_wrap++] = ms;
		}
		if (raw_call(&r_direct, &ms, why, sizeof(why)) < 0) {
			fail_direct += timed;
			note_failure(first_direct, sizeof(first_direct), why, 0);
		} else if (timed) {
			direct[n_direct++] = ms;
		}
	}
	stats_of(lib, n_lib, &s_lib);
	stats_of(wrap, n_wrap, &s_wrap);
	stats_of(direct, n_direct, &s_direct);
	row("hangar_sandbox_exec(\"true\")", &s_lib, fail_lib, "%d warm-ups each, interleaved%s%s", cfg->exec_warmups,
	    first_lib[0] ? "; first failure: " : "", first_lib);
	row("raw Start timeout -k 5s .. bash -lc true", &s_wrap, fail_wrap, "%s %s %d connection%s%s%s",
	    "cmd: timeout -k 5s", secs, r_wrap.opens, r_wrap.opens == 1 ? "" : "s",
	    first_wrap[0] ? "; first failure: " : "", first_wrap);
	row("raw Start /bin/true", &s_direct, fail_direct, "no wrapper, %d connection%s%s%s", r_direct.opens,
	    r_direct.opens == 1 ? "" : "s", first_direct[0] ? "; first failure: " : "", first_direct);
	if (s_lib.n && s_wrap.n && s_direct.n) {
		row("  library / raw, same command", NULL, 0, "p50 %.2fx (%+.3f ms), p95 %.2fx  (goal: <= 1.20x)",
		    s_lib.p50 / s_wrap.p50, s_lib.p50 - s_wrap.p50, s_lib.p95 / s_wrap.p95);
		row("  library / raw /bin/true", NULL, 0, "p50 %.2fx (%+.3f ms), p95 %.2fx", s_lib.p50 / s_direct.p50,
		    s_lib.p50 - s_direct.p50, s_lib.p95 / s_direct.p95);
		row("  cost of timeout + bash -l", NULL, 0, "p50 %+.3f ms, p95 %+.3f ms (raw wrapped - raw direct)",
		    s_wrap.p50 - s_direct.p50, s_wrap.p95 - s_direct.p95);
	}
out:
	conn_close(c1);
	conn_close(c2);
	free(c1);
	free(c2);
	free(r_wrap.req);
	free(r_direct.req);
	if (sb && hangar_sandbox_kill(sb) != 0)
		g_failed = 1;
	hangar_sandbox_unref(sb);
	free(lib);
	free(wrap);
	free(direct);
}

/* ---- c: concurrent creates and kills ---------------------------------------------- */

struct worker {
	pthread_t thread;
	pthread_barrier_t *go;
	hangar_sandbox *sb;
	double t0, ms;
	int rc;
	char err[256];
};

static void worker_error(struct worker *w, int rc)
{
	w->rc = rc;
	snprintf(w->err, sizeof(w->err), "%s (%s)", hangar_error_last()->message, hangar_error_name(rc));
}

static void *create_worker(void *arg)
{
	struct worker *w = arg;
	double t0;
	int rc;

	pthread_barrier_wait(w->go);
	w->t0 = t0 = now_ms();
	rc = create_sandbox(&w->sb);
	w->ms = now_ms() - t0;
	if (rc)
		worker_error(w, rc);
	return NULL;
}

static void *kill_worker(void *arg)
{
	struct worker *w = arg;
	double t0;
	int rc;

	pthread_barrier_wait(w->go);
	w->t0 = t0 = now_ms();
	rc = hangar_sandbox_kill(w->sb);
	w->ms = now_ms() - t0;
	if (rc)
		worker_error(w, rc);
	return NULL;
}

/*
 * The machine's CPU time spent busy so far (every CPU, every process and the
 * kernel: user, nice, system, irq, softirq and steal), in ms, from the first
 * line of /proc/stat; -1 if it cannot be read.
 */
static double machine_busy_ms(void)
{
	unsigned long long v[8] = {0};
	long tick = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "re");
	int got;

	if (!f)
		return -1;
	got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
		     &v[5], &v[6], &v[7]);
	fclose(f);
	if (got != 8 || tick <= 0)
		return -1;
	/* v[3] and v[4] are idle and iowait. */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000.0 / (double)tick;
}

/* busy (from run_workers) as "; machine CPU ...", or "" if unknown. */
static void busy_note(char *buf, size_t size, double busy, int ran)
{
	buf[0] = '\0';
	if (busy < 0 || ran <= 0)
		return;
	snprintf(buf, size, "; machine CPU %.0f ms, %.1f each, on %ld CPUs", busy, busy / ran,
		 sysconf(_SC_NPROCESSORS_ONLN));
}

/*
 * Runs fn on every worker whose sandbox is set (or on all, for creates), in
 * one thread each, released together by a barrier. Returns the wall time:
 * from the first thread's start to the last one's end, as the threads
 * measured them (the main thread may be scheduled late after the barrier).
 * If busy is set, it gets the machine's busy CPU time over the run, in ms, or
 * -1 if unknown.
 */
static double run_workers(struct worker *w, int n, void *(*fn)(void *), int only_with_sandbox, int *ran,
			  double *busy)
{
	pthread_barrier_t go;
	double first = 0, last = 0, busy0;
	int count = 0, started = 0;

	for (int i = 0; i < n; i++)
		count += !only_with_sandbox || w[i].sb;
	*ran = count;
	if (count == 0)
		return 0;
	pthread_barrier_init(&go, NULL, (unsigned)count + 1);
	for (int i = 0; i < n; i++) {
		if (only_with_sandbox && !w[i].sb)
			continue;
		w[i].go = &go;
		w[i].rc = 0;
		w[i].err[0] = '\0';
		if (pthread_create(&w[i].thread, NULL, fn, &w[i]) != 0) {
			/* The barrier would never open: give up before anyone waits on it. */
			fprintf(stderr, "local-bench: cannot start thread %d: %s\n", started, strerror(errno));
			exit(1);
		}
		started++;
	}
	busy0 = machine_busy_ms();
	pthread_barrier_wait(&go);
	for (int i = 0; i < n; i++) {
		if (only_with_sandbox && !w[i].sb)
			continue;
		pthread_join(w[i].thread, NULL);
		if (first == 0 || w[i].t0 < first)
			first = w[i].t0;
		if (w[i].t0 + w[i].ms > last)
			last = w[i].t0 + w[i].ms;
	}
	pthread_barrier_destroy(&go);
	if (busy) {
		double busy1 = machine_busy_ms();

		*busy = busy0 < 0 || busy1 < 0 ? -1 : busy1 - busy0;
	}
	return last - first;
}

static void bench_concurrent(const struct config *cfg)
{
	int n = cfg->concurrent, ran, fail = 0, kfail = 0;
	struct worker *w = calloc((size_t)n, sizeof(*w));
	double *v = calloc((size_t)n, sizeof(double)), wall, busy;
	const char *first = NULL;
	struct stats s;
	size_t got = 0;
	char name[64], cpu[96];

	if (!w || !v) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	section("c. concurrent local sandboxes: one thread each, one shared context, released by a barrier");
	wall = run_workers(w, n, create_worker, 0, &ran, &busy);
	busy_note(cpu, sizeof(cpu), busy, ran);
	for (int i = 0; i < n; i++) {
		if (w[i].rc) {
			fail++;
			if (!first)
				first = w[i].err;
		} else {
			v[got++] = w[i].ms;
		}
	}
	if (fail)
		g_failed = 1;
	stats_of(v, got, &s);
	snprintf(name, sizeof(name), "%d concurrent creates", n);
	row(name, &s, fail, "wall %.0f ms%s%s%s", wall, cpu, first ? "; first failure: " : "", first ? first : "");

	wall = run_workers(w, n, kill_worker, 1, &ran, &busy);
	busy_note(cpu, sizeof(cpu), busy, ran);
	got = 0;
	first = NULL;
	for (int i = 0; i < n; i++) {
		if (!w[i].sb)
			continue;
		if (w[i].rc) {
			kfail++;
			if (!first)
				first = w[i].err;
		} else {
			v[got++] = w[i].ms;
		}
		w[i].sb = hangar_sandbox_unref(w[i].sb);
	}
	if (kfail)
		g_failed = 1;
	stats_of(v, got, &s);
	snprintf(name, sizeof(name), "%d concurrent kills", ran);
	row(name, &s, kfail, "wall %.0f ms%s%s%s", wall, cpu, first ? "; first failure: " : "", first ? first : "");
	free(w);
	free(v);
}

/* ---- e: the warm pool ---------------------------------------------------------------- */

/* Sandboxes waiting in the pools of the state directory. */
static int pool_waiting(void)
{
	char path[256];
	struct dirent *top_de;
	DIR *top;
	int n = 0;

	snprintf(path, sizeof(path), "%s/.pool", run_dir());
	top = opendir(path);
	while (top && (top_de = readdir(top))) {
		char sub[600];
		struct dirent *de;
		DIR *d;

		if (top_de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%.255s", path, top_de->d_name);
		d = opendir(sub);
		while (d && (de = readdir(d)))
			n += !strncmp(de->d_name, "sb-", 3);
		if (d)
			closedir(d);
	}
	if (top)
		closedir(top);
	return n;
}

/* Waits (untimed, up to limit_ms) until want sandboxes wait in the pool: 0, or -1. */
static int pool_wait_full(int want, int limit_ms)
{
	double deadline = now_ms() + limit_ms;

	while (pool_waiting() < want) {
		if (now_ms() > deadline || g_stopping)
			return -1;
		poll(NULL, 0, 5);
	}
	return 0;
}

/* The pool's refill thread belongs to the context: a new one stops it (the old one waits for it). */
static void renew_context(const char *pool_size)
{
	hangar_ctx *fresh = NULL;

	pthread_mutex_lock(&g_cleanup_lock);
	g_ctx = hangar_ctx_unref(g_ctx);
	if (hangar_ctx_new(&fresh, 0) != 0 || hangar_ctx_set(fresh, "HANGAR_STATE_DIR", g_state) != 0 ||
	    hangar_ctx_set(fresh, "HANGAR_LOCAL_POOL_SIZE", pool_size) != 0) {
		fprintf(stderr, "local-bench: context: %s\n", hangar_error_last()->message);
		exit(1);
	}
	g_ctx = fresh;
	pthread_mutex_unlock(&g_cleanup_lock);
}

/* Variables of a create served from the pool: envd is given them as the sandbox is claimed. */
static const char *const pool_env[] = { "BENCH_A=1", "BENCH_B=two words", "LANG=C.UTF-8", NULL };

/* n creates with env, each from a full pool of 2, then `true`: one row (total holds n samples). */
static void pool_samples(int n, double *total, const char *const *env, const char *label)
{
	char first[512] = "";
	int fail = 0, got = 0;
	struct stats s;

	for (int i = 0; i < n; i++) {
		hangar_sandbox *sb = NULL;
		double t0;
		int rc;

		/* From a full pool each time: the refill is off the caller's path, not free of its CPU. */
		if (pool_wait_full(2, 60000) < 0) {
			note_failure(first, sizeof(first), "pool refill", HANGAR_ETIMEOUT);
			fail++;
			break;
		}
		t0 = now_ms();
		rc = create_sandbox_env(&sb, env);
		if (rc == 0 && (rc = exec_true(sb)) == 0)
			total[got++] = now_ms() - t0;
		else {
			fail++;
			note_failure(first, sizeof(first), sb ? exec_failure(rc) : "create", rc);
		}
		if (sb)
			hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	stats_of(total, (size_t)got, &s);
	row(label, &s, fail, "pool refilled (untimed) before each%s%s", first[0] ? "; first failure: " : "", first);
	if (fail)
		g_failed = 1;
}

static void bench_pool(const struct config *cfg)
{
	int n = cfg->creates, got = 0, ran, cfail = 0;
	double *total = calloc((size_t)(n > cfg->concurrent ? n : cfg->concurrent), sizeof(double)), wall;
	struct worker *w = calloc((size_t)cfg->concurrent, sizeof(*w));
	char size[32];
	const char *cfirst = NULL;
	struct stats s;

	if (!total || !w) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	section("e. warm pool (HANGAR_LOCAL_POOL_SIZE): create -> first command from the pool, and concurrent creates");
	renew_context("2");
	/* The first create of a kind is cold and starts its pool. */
	{
		hangar_sandbox *sb = NULL;

		if (create_sandbox(&sb) == 0)
			hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	pool_samples(n, total, NULL, "create + exec `true`, pool of 2");
	pool_samples(n, total, pool_env, "the same, with 3 variables (opts->env)");

	snprintf(size, sizeof(size), "%d", cfg->concurrent);
	renew_context(size);
	{
		hangar_sandbox *sb = NULL;

		if (create_sandbox(&sb) == 0)
			hangar_sandbox_kill(sb);
		hangar_sandbox_unref(sb);
	}
	if (pool_wait_full(cfg->concurrent, 600000) < 0) {
		row("concurrent creates from the pool", NULL, 1, "the pool did not fill to %d", cfg->concurrent);
		g_failed = 1;
	} else {
		int from_pool;

		wall = run_workers(w, cfg->concurrent, create_worker, 0, &ran, NULL);
		from_pool = cfg->concurrent - pool_waiting();
		got = 0;
		for (int i = 0; i < cfg->concurrent; i++)
			if (w[i].rc) {
				cfail++;
				if (!cfirst)
					cfirst = w[i].err;
			} else {
				total[got++] = w[i].ms;
			}
		stats_of(total, (size_t)got, &s);
		snprintf(size, sizeof(size), "%d concurrent, pool of %d", cfg->concurrent, cfg->concurrent);
		row(size, &s, cfail, "wall %.0f ms; about %d taken from the pool%s%s", wall, from_pool,
		    cfirst ? "; first failure: " : "", cfirst ? cfirst : "");
		if (cfail)
			g_failed = 1;
		run_workers(w, cfg->concurrent, kill_worker, 1, &ran, NULL);
		for (int i = 0; i < cfg->concurrent; i++)
			w[i].sb = hangar_sandbox_unref(w[i].sb);
	}
	renew_context("0");
	free(total);
	free(w);
}

/* ---- d: idle memory ---------------------------------------------------------------- */

struct proc {
	int pid, ppid;
};

/* Every process's parent, from /proc/<pid>/stat. */
static size_t scan_procs(struct proc *out, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char path[300], buf[1024], *rp;
		FILE *f;
		int ppid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) && sscanf(rp + 1, " %*c %d", &ppid) == 1) {
			out[n].pid = atoi(e->d_name);
			out[n++].ppid = ppid;
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

/* The value in kB of a "Name:   123 kB" line of a /proc file; -1 when missing. */
static long proc_kb(int pid, const char *file, const char *name)
{
	char path[64], line[256];
	size_t len = strlen(name);
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, name, len) == 0 && line[len] == ':') {
			kb = strtol(line + len + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

struct mem {
	double rss, anon, pss; /* kB */
	int procs;
};

/* One kind of process (its comm): totals over every sandbox measured. */
struct kind {
	char comm[32];
	double procs, pss, dirty; /* kB */
};

#define MAX_KINDS 64

struct kinds {
	struct kind k[MAX_KINDS];
	size_t n;
};

/* The kind named comm, added if new; the last slot takes every kind past it. */
static struct kind *kind_of(struct kinds *ks, const char *comm)
{
	size_t i;

	for (i = 0; i < ks->n; i++)
		if (strcmp(ks->k[i].comm, comm) == 0)
			return &ks->k[i];
	if (ks->n == MAX_KINDS)
		return &ks->k[MAX_KINDS - 1];
	snprintf(ks->k[ks->n].comm, sizeof(ks->k[ks->n].comm), "%.15s", ks->n == MAX_KINDS - 1 ? "(others)" : comm);
	return &ks->k[ks->n++];
}

static int kind_by_pss(const void *a, const void *b)
{
	const struct kind *x = a, *y = b;

	return x->pss < y->pss ? 1 : x->pss > y->pss ? -1 : strcmp(x->comm, y->comm);
}

/* Sums the memory of pid and all its descendants, and adds each process to its kind in ks. */
static int tree_mem(int root, const struct proc *p, size_t np, struct mem *m, struct kinds *ks)
{
	int *tree = malloc(np * sizeof(int) + sizeof(int));
	size_t nt = 0;

	memset(m, 0, sizeof(*m));
	if (!tree)
		return -1;
	tree[nt++] = root;
	for (size_t i = 0; i < nt; i++) /* breadth first: tree grows as children are found */
		for (size_t j = 0; j < np; j++)
			if (p[j].ppid == tree[i] && p[j].pid != root)
				tree[nt++] = p[j].pid;
	for (size_t i = 0; i < nt; i++) {
		long rss = proc_kb(tree[i], "status", "VmRSS"), anon = proc_kb(tree[i], "status", "RssAnon");
		long pss = proc_kb(tree[i], "smaps_rollup", "Pss");
		long dirty = proc_kb(tree[i], "smaps_rollup", "Private_Dirty");
		char path[64], comm[32];
		struct kind *k;

		snprintf(path, sizeof(path), "/proc/%d/comm", tree[i]);
		if (rss < 0 || anon < 0 || pss < 0 || dirty < 0 || read_line_file(path, comm, sizeof(comm)) < 0)
			continue; /* gone, or a kernel thread */
		m->rss += (double)rss;
		m->anon += (double)anon;
		m->pss += (double)pss;
		m->procs++;
		k = kind_of(ks, comm[0] ? comm : "?");
		k->procs++;
		k->pss += (double)pss;
		k->dirty += (double)dirty;
	}
	free(tree);
	return 0;
}

static void bench_idle_memory(const struct config *cfg)
{
	int n = cfg->idle, made = 0, fail = 0, measured = 0, procs_min = 1 << 30, procs_max = 0;
	hangar_sandbox **sb = calloc((size_t)n, sizeof(*sb));
	struct proc *p = malloc(MAX_PIDS * sizeof(*p));
	double rss = 0, anon = 0, pss = 0, pss_min = 1e18, pss_max = 0;
	struct kinds *ks = calloc(1, sizeof(*ks));
	char first[512] = "";
	size_t np;

	if (!sb || !p || !ks) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	printf("\nd. idle memory per local sandbox: %d sandboxes created one after another, measured once all answer\n",
	       n);
	for (int i = 0; i < n; i++) {
		int rc = create_sandbox(&sb[i]);

		if (rc) {
			fail++;
			note_failure(first, sizeof(first), "create", rc);
		} else {
			made++;
		}
	}
	np = scan_procs(p, MAX_PIDS);
	for (int i = 0; i < n; i++) {
		char path[400];
		char pid[32];
		struct mem m;

		if (!sb[i])
			continue;
		snprintf(path, sizeof(path), "%s/%s/jail.pid", run_dir(), hangar_sandbox_id(sb[i]));
		if (read_line_file(path, pid, sizeof(pid)) < 0 || atoi(pid) <= 0 || tree_mem(atoi(pid), p, np, &m, ks) < 0 ||
		    m.procs == 0) {
			note_failure(first, sizeof(first), "no jail pid or processes", 0);
			continue;
		}
		measured++;
		rss += m.rss;
		anon += m.anon;
		pss += m.pss;
		if (m.pss < pss_min)
			pss_min = m.pss;
		if (m.pss > pss_max)
			pss_max = m.pss;
		if (m.procs < procs_min)
			procs_min = m.procs;
		if (m.procs > procs_max)
			procs_max = m.procs;
	}
	if (measured) {
		printf("  sandboxes measured   %d of %d (create failures %d)%s%s\n", measured, n, fail,
		       first[0] ? "; first failure: " : "", first);
		printf("  processes each       %d..%d (hangar-jail and all its descendants)\n", procs_min, procs_max);
		printf("  mean VmRSS           %7.2f MiB  (counts shared pages once per process)\n", rss / measured / 1024);
		printf("  mean RssAnon         %7.2f MiB  (anonymous resident pages)\n", anon / measured / 1024);
		printf("  mean Pss             %7.2f MiB  (min %.2f, max %.2f)  <- compared with the goal of <= 1.5 MiB\n",
		       pss / measured / 1024, pss_min / 1024, pss_max / 1024);
		/* Where the Pss goes: the kinds' Pss add up to the mean Pss above. */
		qsort(ks->k, ks->n, sizeof(ks->k[0]), kind_by_pss);
		printf("  %-30s %5s %11s %19s\n", "by process (mean per sandbox)", "n", "Pss KiB", "Private_Dirty KiB");
		for (size_t i = 0; i < ks->n; i++)
			printf("    %-28.28s %5.1f %11.0f %19.0f\n", ks->k[i].comm, ks->k[i].procs / measured,
			       ks->k[i].pss / measured, ks->k[i].dirty / measured);
	} else {
		printf("  nothing measured (create failures %d)%s%s\n", fail, first[0] ? "; first failure: " : "", first);
	}
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		if (sb[i] && hangar_sandbox_kill(sb[i]) != 0)
			g_failed = 1;
		hangar_sandbox_unref(sb[i]);
	}
	(void)made;
	free(sb);
	free(p);
	free(ks);
}

/* ---- e: disk of sandboxes of one image --------------------------------------------- */

static uint64_t g_tree_bytes;

static int add_blocks(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	(void)flag;
	(void)ftw;
	g_tree_bytes += (uint64_t)st->st_blocks * 512;
	return 0;
}

/* Bytes on disk under dir, this file system only. */
static uint64_t disk_bytes(const char *dir)
{
	g_tree_bytes = 0;
	nftw(dir, add_blocks, 32, FTW_PHYS | FTW_MOUNT);
	return g_tree_bytes;
}

static void bench_image_disk(int count)
{
	const char *images = getenv("HANGAR_IMAGE_DIR");
	char store[PATH_MAX];
	hangar_sandbox **sb = calloc((size_t)count, sizeof(*sb));
	uint64_t store0, state0, store1, state1;
	int made = 0;

	snprintf(store, sizeof(store), "%s", images && *images ? images : g_state);
	section("e. disk: sandboxes of one image, each writing 1 MiB, against the image itself");
	store0 = disk_bytes(store);
	state0 = disk_bytes(g_local);
	for (int i = 0; sb && i < count; i++) {
		hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

		if (create_sandbox(&sb[i]) != 0)
			break;
		made++;
		hangar_sandbox_exec(&r, sb[i], "head -c 1048576 /dev/urandom > /workspace/mine; apt-get --version >/dev/null "
					       "2>&1; echo written > /etc/written-here", NULL);
		hangar_exec_result_dispose(&r);
	}
	store1 = disk_bytes(store);
	state1 = disk_bytes(g_local);
	printf("  sandboxes             %d of %d, each wrote 1 MiB to /workspace and a file to /etc\n", made, count);
	printf("  image store           %.2f MiB before, %.2f MiB after (the layers, shared, never written)\n",
	       (double)store0 / MIB, (double)store1 / MIB);
	printf("  sandboxes' state dirs %.2f MiB before, %.2f MiB after: %.1f KiB each; what they wrote lives in each\n"
	       "                        sandbox's size-limited tmpfs (HANGAR_LOCAL_DISK_MB) and goes with it\n",
	       (double)state0 / MIB, (double)state1 / MIB, made ? (double)(state1 - state0) / 1024.0 / made : 0.0);
	for (int i = 0; i < made; i++) {
		hangar_sandbox_kill(sb[i]);
		hangar_sandbox_unref(sb[i]);
	}
	free(sb);
}

/* ---- f: session fork ---------------------------------------------------------------- */

#define FORK_MAX 100

struct forked {
	int ok, failed, method;
	hangar_session *s[FORK_MAX];
	char first[512];
};

static void on_fork(const hangar_session_fork_result *r, void *payload)
{
	struct forked *f = payload;

	f->method = r->method;
	if (r->error || !r->session || f->ok >= FORK_MAX) {
		f->failed++;
		if (!f->first[0])
			snprintf(f->first, sizeof(f->first), "fork %u: %s (%s)", r->index, r->message ? r->message : "",
				 hangar_error_name(r->error));
		return;
	}
	f->s[f->ok++] = hangar_session_ref(r->session);
}

static const char *fork_method(int method)
{
	return method == HANGAR_FORK_NATIVE	? "native"
	       : method == HANGAR_FORK_SNAPSHOT ? "by snapshot"
	       : method == HANGAR_FORK_CHECKPOINT ? "by checkpoint"
						  : "no fork made";
}

/*
 * The session-bench workspace (its shape, so the figures compare): a git
 * repository at /workspace of tracked_mib files of 1 MiB committed and
 * ignored_mib in files of 16 MiB under .venv/, and a process left running.
 */
static int fork_workspace(hangar_sandbox *sb, const struct config *cfg)
{
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	char cmd[2048];
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd /workspace; git init -q; git config user.email b@example.org; git config user.name b; "
		 "printf '.venv/\\n' > .gitignore; mkdir -p src .venv; "
		 "for i in $(seq 1 %u); do head -c 1048576 /dev/urandom > src/f$i.bin; done; "
		 "git add -A; git commit -qm tracked; "
		 "for i in $(seq 1 %u); do head -c 16777216 /dev/urandom > .venv/dep$i.so; done; "
		 "nohup setsid sleep 100000 </dev/null >/dev/null 2>&1 &",
		 cfg->tracked_mib, (cfg->ignored_mib + 15) / 16);
	rc = hangar_sandbox_exec(&res, sb, cmd, NULL);
	if (rc == 0 && res.exit_code != 0)
		rc = 1;
	hangar_exec_result_dispose(&res);
	return rc;
}

static void bench_fork(const struct config *cfg)
{
	hangar_create_opts co = HANGAR_CREATE_OPTS_INIT;
	hangar_session_opts so = HANGAR_SESSION_OPTS_INIT;
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL;
	double *returned = calloc((size_t)cfg->fork_runs, sizeof(double));
	double *answered = calloc((size_t)cfg->fork_runs, sizeof(double));
	int got = 0, fail = 0, method = 0, rc;
	char first[512] = "", title[256], label[64];
	struct stats st;

	if (!returned || !answered) {
		fprintf(stderr, "local-bench: out of memory\n");
		exit(1);
	}
	snprintf(title, sizeof(title),
		 "f. session fork of %d on a workspace of %u MiB tracked + %u MiB ignored (session-bench's), %d runs",
		 cfg->forks, cfg->tracked_mib, cfg->ignored_mib, cfg->fork_runs);
	section(title);
	co.provider = "local";
	co.timeout_sec = SANDBOX_LIFETIME_SEC;
	co.template_id = g_template;
	so.create = &co;
	so.workspace = "/workspace";
	/* Counted as creates in flight, as the forks below are: a signal's clean-up waits for them. */
	if (flight_enter() < 0) {
		fail = cfg->fork_runs;
		goto out;
	}
	rc = hangar_session_create(&s, g_ctx, &so);
	if (rc == 0)
		rc = hangar_session_sandbox(&sb, s);
	flight_leave();
	if (rc != 0) {
		note_failure(first, sizeof(first), "session", rc);
		fail = cfg->fork_runs;
		goto out;
	}
	if ((rc = fork_workspace(sb, cfg)) != 0) {
		note_failure(first, sizeof(first), rc > 0 ? "the workspace's script exited non-zero" : "exec", rc);
		fail = cfg->fork_runs;
		goto out;
	}
	for (int run = 0; run < cfg->fork_runs; run++) {
		struct forked f = { 0 };
		double t0 = now_ms(), t1;
		int bad = 0;

		if (flight_enter() < 0)
			break;
		rc = hangar_session_fork(s, (uint32_t)cfg->forks, on_fork, &f);
		t1 = now_ms();
		flight_leave();
		if (rc != 0) {
			note_failure(first, sizeof(first), "hangar_session_fork", rc);
			bad = 1;
		} else if (f.failed) {
			note_failure(first, sizeof(first), f.first, 0);
			bad = 1;
		}
		method = f.method;
		/* Each fork answers a command, one after the other, as a caller would use the first it gets. */
		for (int i = 0; !bad && i < f.ok; i++) {
			hangar_sandbox *child = NULL;

			if ((rc = hangar_session_sandbox(&child, f.s[i])) != 0 || (rc = exec_true(child)) != 0) {
				note_failure(first, sizeof(first), child ? exec_failure(rc) : "a fork's sandbox", rc);
				bad = 1;
			}
			hangar_sandbox_unref(child);
		}
		if (bad) {
			fail++;
		} else {
			returned[got] = t1 - t0;
			answered[got++] = now_ms() - t0;
		}
		for (int i = 0; i < f.ok; i++) {
			hangar_session_archive(f.s[i]);
			hangar_session_unref(f.s[i]);
		}
	}
out:
	stats_of(returned, (size_t)got, &st);
	snprintf(label, sizeof(label), "fork of %d: hangar_session_fork", cfg->forks);
	row(label, &st, fail, "%s%s%s", fork_method(method), first[0] ? "; first failure: " : "", first);
	stats_of(answered, (size_t)got, &st);
	snprintf(label, sizeof(label), "fork of %d + each answers `true`", cfg->forks);
	row(label, &st, fail, "%s", "until the last fork's command returned");
	if (fail)
		g_failed = 1;
	hangar_sandbox_unref(sb);
	if (s) {
		hangar_session_delete(s);
		hangar_session_unref(s);
	}
	free(returned);
	free(answered);
}

/* ---- main ---------------------------------------------------------------------------- */

/* ---- the host's cgroups ------------------------------------------------------------ */

/*
 * Which cgroup hierarchies the host mounts (type "cgroup" is a v1 hierarchy,
 * "cgroup2" the v2 one, both a hybrid), from /proc/self/mounts, and whether
 * any of them has the favordynmods option. Why it matters: moving a whole
 * process into a cgroup takes the kernel's cgroup threadgroup lock as a
 * writer (one lock for every hierarchy, v1 and v2), and after a quiet spell
 * the first writer waits one RCU grace period (6 to 20 ms) unless some
 * hierarchy has favordynmods. A create moves no process that way: the
 * sandbox is born in its cgroup v2 (clone3, Linux 5.7) and its first
 * process joins its v1 cgroups as a thread moving itself, which takes no
 * such lock from Linux 5.17 on (hangar-jail's cgroup.c). So the line says
 * whether this kernel is one where a create may still wait.
 */
static void cgroup_mode(char *out, size_t size, const char *release)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char line[4096], favor[1024] = "";
	int v1 = 0, v2 = 0, major = 0, minor = 0, self_moves;

	if (!f) {
		snprintf(out, size, "unknown (/proc/self/mounts: %s)", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char dir[1024], type[32], opts[2048], *tok, *save = NULL;

		/* device, mount point, type, options: the fields are separated by spaces (escaped in the names) */
		if (sscanf(line, "%*s %1023s %31s %2047s", dir, type, opts) != 3)
			continue;
		if (strcmp(type, "cgroup") == 0)
			v1 = 1;
		else if (strcmp(type, "cgroup2") == 0)
			v2 = 1;
		else
			continue;
		for (tok = strtok_r(opts, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, "favordynmods") == 0 && !favor[0])
				snprintf(favor, sizeof(favor), "%s", dir);
	}
	fclose(f);
	sscanf(release, "%d.%d", &major, &minor);
	self_moves = major > 5 || (major == 5 && minor >= 17);
	if (!v1 && !v2)
		snprintf(out, size, "none mounted");
	else if (favor[0])
		snprintf(out, size, "%s, favordynmods on (%.255s)", v1 && v2 ? "v1+v2 hybrid" : v1 ? "v1" : "pure v2", favor);
	else
		snprintf(out, size, "%s, favordynmods off: %s", v1 && v2 ? "v1+v2 hybrid" : v1 ? "v1" : "pure v2",
			 !v1 ? "sandboxes are born in their cgroups"
			 : self_moves ? "the v1 joins are a thread moving itself, no grace-period wait"
				      : "the v1 joins may wait an RCU grace period on this kernel (hangar(1), Start-up cost)");
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: local-bench [--quick] [-n N] [--creates N] [--concurrent N] [--idle N] [--forks N]\n"
		"                   [--image REF]\n"
		"  -n N            exec round trips per series in b (default 300)\n"
		"  --creates N     timed create -> first command samples in a (default 50)\n"
		"  --concurrent N  sandboxes created at once in c (default 100)\n"
		"  --idle N        sandboxes measured in d (default 20)\n"
		"  --forks N       sessions forked at once in f (default 10, at most 100)\n"
		"  --quick         small counts everywhere (a 10, b 50, c 10, d 5, f 3 forks of\n"
		"                  a 5 MiB + 32 MiB workspace, once)\n"
		"  --image REF     create every sandbox from this image of the store (HANGAR_IMAGE_DIR);\n"
		"                  a. is then run on the `local` template too, to compare\n"
		"Needs HANGAR_ENVD_PATH and, in a build tree, HANGAR_JAIL_PATH. Run as root.\n");
}

static int parse_count(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = s ? strtol(s, &end, 10) : 0;
	if (!s || errno || *end || v < 1 || v > 100000)
		return -1;
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct config cfg = { 50, 3, 300, 20, 100, 20, 10, 3, 50, 300 };
	int quick = 0, n = -1, creates = -1, concurrent = -1, idle = -1, forks = -1, rc;
	const char *envd = getenv("HANGAR_ENVD_PATH"), *jail = getenv("HANGAR_JAIL_PATH"), *tmpdir;
	pthread_t sigthr;
	struct utsname u;
	char cgroups[512];
	sigset_t set;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	for (int i = 1; i < argc; i++) {
		int *target = NULL;

		if (strcmp(argv[i], "--quick") == 0) {
			quick = 1;
			continue;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "--image") == 0 && i + 1 < argc) {
			g_template = argv[++i];
			continue;
		}
		if (strcmp(argv[i], "-n") == 0)
			target = &n;
		else if (strcmp(argv[i], "--creates") == 0)
			target = &creates;
		else if (strcmp(argv[i], "--concurrent") == 0)
			target = &concurrent;
		else if (strcmp(argv[i], "--idle") == 0)
			target = &idle;
		else if (strcmp(argv[i], "--forks") == 0)
			target = &forks;
		if (!target || parse_count(i + 1 < argc ? argv[++i] : NULL, target) < 0) {
			usage(stderr);
			return 2;
		}
	}
	if (quick)
		cfg = (struct config){ 10, 1, 50, 5, 10, 5, 3, 1, 5, 32 };
	if (n > 0)
		cfg.execs = n;
	if (creates > 0)
		cfg.creates = creates;
	if (concurrent > 0)
		cfg.concurrent = concurrent;
	if (idle > 0)
		cfg.idle = idle;
	if (forks > 100) {
		usage(stderr);
		return 2;
	}
	if (forks > 0)
		cfg.forks = forks;
	if (!envd || !*envd) {
		fprintf(stderr, "local-bench: HANGAR_ENVD_PATH is not set\n");
		usage(stderr);
		return 2;
	}

	/*
	 * Output piped into a reader that quits early (| head) must not kill
	 * the bench before it kills its sandboxes and removes its state
	 * directory: it runs on, its writes failing, and cleans up at its end.
	 */
	signal(SIGPIPE, SIG_IGN);
	/* SIGINT, SIGTERM and SIGHUP go to one thread that cleans up; every other thread inherits the mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	tmpdir = getenv("TMPDIR");
	if (!tmpdir || tmpdir[0] != '/')
		tmpdir = "/tmp";
	if (snprintf(g_state, sizeof(g_state), "%s/hangar-lbench-XXXXXX", tmpdir) >= (int)sizeof(g_state)) {
		fprintf(stderr, "local-bench: TMPDIR is too long\n");
		return 2;
	}
	if (!mkdtemp(g_state)) {
		fprintf(stderr, "local-bench: cannot create a state directory: %s\n", strerror(errno));
		return 1;
	}
	snprintf(g_local, sizeof(g_local), "%s/local", g_state);
	if ((rc = hangar_ctx_new(&g_ctx, 0)) != 0 ||
	    (rc = hangar_ctx_set(g_ctx, "HANGAR_STATE_DIR", g_state)) != 0) {
		fprintf(stderr, "local-bench: context: %s\n", hangar_error_last()->message);
		rmdir(g_state);
		return 1;
	}
	if (pthread_create(&sigthr, NULL, signal_thread, &set) != 0) {
		fprintf(stderr, "local-bench: cannot start the signal thread\n");
		cleanup();
		return 1;
	}

	uname(&u);
	printf("local-bench: libhangar %s, %s %s, %ld CPUs, %s\n", hangar_version(), u.sysname, u.release,
	       cpus, geteuid() == 0 ? "root" : "not root (unprivileged jails: figures differ)");
	printf("  hangar-envd %s\n  hangar-jail %s\n  state dir   %s (removed at the end)\n", envd,
	       jail && *jail ? jail : "(installed)", g_state);
	cgroup_mode(cgroups, sizeof(cgroups), u.release);
	printf("  cgroups     %s\n", cgroups);
	printf("  times in ms, nearest-rank percentiles, warm-ups not counted\n");
	fflush(stdout);

	if (g_template) {
		const char *image = g_template;

		/* The same, on the host's /usr, for the difference an image makes. */
		g_template = NULL;
		bench_create_first(&cfg);
		g_template = image;
	}
	bench_create_first(&cfg);
	if (g_template)
		bench_image_disk(cfg.idle);
	bench_exec_vs_raw(&cfg);
	bench_concurrent(&cfg);
	bench_idle_memory(&cfg);
	bench_pool(&cfg);
	bench_fork(&cfg);

	cleanup();
	g_ctx = hangar_ctx_unref(g_ctx);
	return g_failed ? 1 : 0;
}
