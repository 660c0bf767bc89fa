/*
 * The sandbox edge: E2B's SDKs send envd's traffic (processes, files, PTY)
 * and user ports to https://PORT-ID.DOMAIN, or to their sandbox URL with
 * E2b-Sandbox-Id and E2b-Sandbox-Port headers. hangard routes such a
 * request to the sandbox, checks the token /e2b issued for that sandbox,
 * and forwards it with the sandbox's own credentials, which its users
 * never see.
 *
 * Each forwarded request has a thread of its own while it runs (a stream
 * may last as long as a command), joined to the client's connection by two
 * bounded queues: the body going up, the answer coming down. When a queue is full
 * the side that fills it waits, and the connection is suspended while
 * libmicrohttpd has nothing to do for it, so no thread of libmicrohttpd and
 * no worker of the pool ever waits on a sandbox or on a slow client. Every
 * wait is bounded: a client that stops reading or sending for
 * HANGARD_IDLE_TIMEOUT_SECONDS, or a sandbox silent for
 * HANGARD_SANDBOX_STALL_SECONDS, ends the request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "e2b-edge.h"
#include "e2b.h"

#define EDGE_CONNECT_MS 5000
/* Each direction's queue: a request in flight holds at most two, and
 * the thread's buffer for the body going up. */
#define EDGE_QUEUE_BYTES (64 * 1024)
/* An answer's head from the sandbox, and one of its lines. */
#define EDGE_HEAD_LINE 8192
#define EDGE_HEAD_LINES 100

/* What a suspended connection waits for: only that resumes it, so that
 * the thread's progress on one front never wakes a wait on another. */
enum wait_for {
	WAIT_NONE,
	WAIT_ROOM,      /* room in the queue up, for the rest of a body chunk */
	WAIT_ANSWER,    /* the answer's head */
	WAIT_DATA,      /* bytes of the answer's body */
};

struct edge {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	struct edge *prev, *next;   /* in the list of edges alive */
	struct edge *job_next;      /* waiting for an idle thread */
	int linked;

	/* What to forward, fixed before the thread starts. */
	char id[65];
	unsigned port;
	struct e2b_record rec;      /* the sandbox's record, as the token was checked against it */
	char *head;                 /* the request line and headers, up to the body's framing */
	int body_chunked;           /* the body goes up chunked (its length is not known) */
	int has_body;
	int head_only;              /* HEAD: the answer has no body */

	/* Shared, under lock. */
	struct request *r;          /* NULL once the request completed */
	struct MHD_Connection *conn;
	int client_fd;
	enum wait_for susp;         /* why the connection is suspended */
	int stop;                   /* hangard stops, or the client is gone */
	int waiting_answer;         /* the body is in, the connection waits for the answer */
	int body_done;
	int upload_dropped;         /* the sandbox answered before the body was read: drop the rest */
	char *upq;                  /* the body going up */
	size_t upq_len;
	int64_t up_stamp_us;        /* when the client last sent */
	struct MHD_Response *answer;
	unsigned status;
	char *downq;                /* the answer's body coming down */
	size_t downq_len;
	int down_done, down_broken;
	int64_t down_stamp_us;      /* when the client last took some */
	int upstream_fd;
};

static pthread_mutex_t edges_lock = PTHREAD_MUTEX_INITIALIZER;
static struct edge *edges;
static int edges_stopping;

static void edge_unref(struct edge *e)
{
	int last;
	pthread_mutex_lock(&e->lock);
	last = --e->refs == 0;
	pthread_mutex_unlock(&e->lock);
	if (!last)
		return;
	pthread_mutex_lock(&edges_lock);
	if (e->linked) {
		if (e->prev)
			e->prev->next = e->next;
		else
			edges = e->next;
		if (e->next)
			e->next->prev = e->prev;
	}
	pthread_mutex_unlock(&edges_lock);
	pthread_cond_destroy(&e->cond);
	pthread_mutex_destroy(&e->lock);
	e2b_record_dispose(&e->rec);
	free(e->head);
	free(e->upq);
	free(e->downq);
	free(e);
}

/* Resumes the connection if it waits for what (WAIT_NONE: for anything);
 * with the lock held. */
static void wake(struct edge *e, enum wait_for what)
{
	if (e->susp != WAIT_NONE && (what == WAIT_NONE || e->susp == what) && e->conn) {
		e->susp = WAIT_NONE;
		MHD_resume_connection(e->conn);
	}
}

/* Suspends the connection until wake(); with the lock held, from
 * libmicrohttpd's callbacks of the connection. */
static void wait_for(struct edge *e, enum wait_for what)
{
	e->susp = what;
	MHD_suspend_connection(e->conn);
}

/* ---- the request's head, as it goes up ---- */

struct headbuf {
	char *p;
	size_t len, cap;
	int bad;
};

static void hb_add(struct headbuf *h, const char *s, size_t n)
{
	if (h->bad)
		return;
	if (h->len + n + 1 > h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 2048;
		while (cap < h->len + n + 1)
			cap *= 2;
		char *np = realloc(h->p, cap);
		if (!np) {
			h->bad = 1;
			return;
		}
		h->p = np;
		h->cap = cap;
	}
	memcpy(h->p + h->len, s, n);
	h->len += n;
	h->p[h->len] = '\0';
}

static void hb_line(struct headbuf *h, const char *name, const char *value)
{
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n")) {
		h->bad = 1;
		return;
	}
	hb_add(h, name, strlen(name));
	hb_add(h, ": ", 2);
	hb_add(h, value, strlen(value));
	hb_add(h, "\r\n", 2);
}

static enum MHD_Result copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct headbuf *h = cls;
	(void)kind;
	if (!value || edge_hop_header(key) || strcasecmp(key, "X-Access-Token") == 0 ||
	    strcasecmp(key, "e2b-traffic-access-token") == 0 || strcasecmp(key, "E2b-Sandbox-Id") == 0 ||
	    strcasecmp(key, "E2b-Sandbox-Port") == 0)
		return MHD_YES;
	hb_line(h, key, value);
	return MHD_YES;
}

/* ---- the thread of one request ---- */

static int cancelled(void *payload)
{
	struct edge *e = payload;
	int stop;
	pthread_mutex_lock(&e->lock);
	stop = e->stop;
	/* The connection waits (suspended): libmicrohttpd does not watch the
	 * socket, so a client that left is seen here, by its FIN or reset. */
	if (!stop && e->susp != WAIT_NONE && e->client_fd >= 0) {
		struct pollfd p = { .fd = e->client_fd, .events = POLLRDHUP };
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			stop = e->stop = 1;
	}
	pthread_mutex_unlock(&e->lock);
	return stop;
}

static int64_t client_stall_us(void)
{
	return (int64_t)hangard->cfg->idle_timeout_s * 1000000;
}

/* One wait of the thread on the client, with the lock held, of a second at
 * most; the request is given up (stop) once the client has done nothing
 * for the idle bound since stamp_us. */
static void wait_on_client(struct edge *e, int64_t stamp_us)
{
	struct timespec ts;
	if (clock_mono_us() - stamp_us > client_stall_us()) {
		e->stop = 1;
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_cond_timedwait(&e->cond, &e->lock, &ts);
}

static int64_t upstream_deadline(void)
{
	/* How long a sandbox may be silent: for its answer's head, or between
	 * two pieces of a stream (envd sends keepalives well within it). */
	return clock_mono_us() + (int64_t)hangard->cfg->sandbox_stall_s * 1000000;
}

/* Hands the answer to the connection: now, if it waits for it, else when
 * its body is in. With the lock held; returns resp when nobody takes it,
 * for the caller to destroy once the lock is released. */
static struct MHD_Response *post_answer(struct edge *e, unsigned status, struct MHD_Response *resp)
{
	if (e->answer || !e->r)
		return resp;
	e->status = status;
	e->answer = resp;
	if (e->waiting_answer) {
		e->waiting_answer = 0;
		reply_response(e->r, e->status, e->answer);
		e->answer = NULL;
		e->susp = WAIT_NONE;
		request_deliver(e->r);
	}
	pthread_cond_broadcast(&e->cond);
	return NULL;
}

static void answer_error(struct edge *e, unsigned status, const char *msg)
{
	cJSON *doc = e2b_error_body(status, msg);
	char *text = cJSON_PrintUnformatted(doc);
	struct MHD_Response *resp;
	cJSON_Delete(doc);
	if (!text)
		return;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	pthread_mutex_lock(&e->lock);
	resp = post_answer(e, status, resp);
	pthread_mutex_unlock(&e->lock);
	if (resp)
		MHD_destroy_response(resp);
}

/* The body from the client to the sandbox. 0 when it is all sent, 1 when
 * the sandbox answers first (the rest is dropped), -1. */
static int send_body(struct edge *e, struct up *u)
{
	char *chunk = malloc(EDGE_QUEUE_BYTES);
	int rc = -1;

	if (!chunk)
		return -1;
	for (;;) {
		size_t n;
		int done;
		pthread_mutex_lock(&e->lock);
		while (!e->stop && !e->upq_len && !e->body_done)
			wait_on_client(e, e->up_stamp_us);
		if (e->stop) {
			pthread_mutex_unlock(&e->lock);
			break;
		}
		n = e->upq_len;
		memcpy(chunk, e->upq, n);
		e->upq_len = 0;
		done = e->body_done;
		wake(e, WAIT_ROOM);
		pthread_mutex_unlock(&e->lock);

		if (n) {
			char frame[32];
			int ok = 1;
			/* A sandbox that answers before it read the body (a refusal)
			 * has the rest dropped rather than waited for. */
			if (up_pending(u)) {
				rc = 1;
				break;
			}
			if (e->body_chunked) {
				int fl = snprintf(frame, sizeof(frame), "%zx\r\n", n);
				ok = up_write_all(u, frame, (size_t)fl, upstream_deadline(), cancelled, e) == 0;
			}
			ok = ok && up_write_all(u, chunk, n, upstream_deadline(), cancelled, e) == 0;
			if (ok && e->body_chunked)
				ok = up_write_all(u, "\r\n", 2, upstream_deadline(), cancelled, e) == 0;
			if (!ok)
				break;
		}
		if (done) {
			if (e->body_chunked && up_write_all(u, "0\r\n\r\n", 5, upstream_deadline(), cancelled, e) < 0)
				break;
			rc = 0;
			break;
		}
	}
	free(chunk);
	if (rc == 1) {
		pthread_mutex_lock(&e->lock);
		e->upload_dropped = 1;
		e->upq_len = 0;
		wake(e, WAIT_ROOM);
		pthread_mutex_unlock(&e->lock);
	}
	return rc;
}

/* Puts bytes of the answer on the queue down, waiting while it is full. */
static int queue_down(struct edge *e, const char *data, size_t len)
{
	while (len) {
		pthread_mutex_lock(&e->lock);
		/* A client that stopped reading has its request given up. */
		while (!e->stop && e->downq_len == EDGE_QUEUE_BYTES)
			wait_on_client(e, e->down_stamp_us);
		if (e->stop) {
			pthread_mutex_unlock(&e->lock);
			return -1;
		}
		size_t room = EDGE_QUEUE_BYTES - e->downq_len, n = len < room ? len : room;
		if (e->downq_len == 0)
			e->down_stamp_us = clock_mono_us();
		memcpy(e->downq + e->downq_len, data, n);
		e->downq_len += n;
		wake(e, WAIT_DATA);
		pthread_mutex_unlock(&e->lock);
		data += n;
		len -= n;
	}
	return 0;
}

static ssize_t down_reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct edge *e = cls;
	ssize_t n;
	(void)pos;
	pthread_mutex_lock(&e->lock);
	if (e->downq_len) {
		n = (ssize_t)(e->downq_len < max ? e->downq_len : max);
		memcpy(out, e->downq, (size_t)n);
		memmove(e->downq, e->downq + n, e->downq_len - (size_t)n);
		e->downq_len -= (size_t)n;
		e->down_stamp_us = clock_mono_us();
		pthread_cond_broadcast(&e->cond);
	} else if (e->down_broken || e->stop) {
		/* libmicrohttpd closes the socket on its loop's next turn, which may
		 * be the idle bound away: the client is told now that the body is cut. */
		if (e->down_broken && e->client_fd >= 0)
			shutdown(e->client_fd, SHUT_RDWR);
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (e->down_done) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		wait_for(e, WAIT_DATA);
		n = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return n;
}

static void down_done(void *cls)
{
	struct edge *e = cls;
	pthread_mutex_lock(&e->lock);
	e->stop = 1;
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	edge_unref(e);
}

/* Ends the answer's body: cleanly, or broken (the client sees the
 * connection cut rather than a short body passed off as whole). */
static void end_down(struct edge *e, int broken)
{
	pthread_mutex_lock(&e->lock);
	if (broken)
		e->down_broken = 1;
	else
		e->down_done = 1;
	wake(e, WAIT_DATA);
	pthread_mutex_unlock(&e->lock);
}

struct framing {
	int chunked;
	int64_t length;   /* -1: until the sandbox closes */
};

/* The sandbox's answer: its head becomes the response, its body is
 * streamed on. 0, or -1 before any answer was made. */
static int relay_answer(struct edge *e, struct up *u, int *reusable)
{
	char line[EDGE_HEAD_LINE];
	unsigned status;
	struct framing fr = { 0, -1 };
	int close_after = 0;
	struct MHD_Response *resp;
	const char *hdr[EDGE_HEAD_LINES][2];
	char *lines[EDGE_HEAD_LINES];
	size_t nh = 0;
	int rc = -1;

	/* 1xx answers (100 Continue) are the sandbox's and the edge's business only. */
	do {
		if (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) < 0)
			return -1;
		if (strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12 || line[8] != ' ')
			return -1;
		status = (unsigned)strtoul(line + 9, NULL, 10);
		close_after = line[7] != '1';
		if (status < 100 || status > 599)
			return -1;
		if (status < 200) {
			while (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) == 0 && line[0])
				;
		}
	} while (status < 200);

	for (;;) {
		char *colon, *v;
		if (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) < 0)
			goto out;
		if (!line[0])
			break;
		if (nh == EDGE_HEAD_LINES || !(colon = strchr(line, ':')) || colon == line)
			goto out;
		*colon = '\0';
		v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (strcasecmp(line, "Connection") == 0 && strcasestr(v, "close"))
			close_after = 1;
		if (strcasecmp(line, "Transfer-Encoding") == 0) {
			if (strcasecmp(v, "chunked") != 0)
				goto out;
			fr.chunked = 1;
		} else if (strcasecmp(line, "Content-Length") == 0) {
			char *end;
			errno = 0;
			long long n = strtoll(v, &end, 10);
			if (errno || *end || n < 0 || v == end)
				goto out;
			fr.length = n;
		}
		if (edge_hop_header(line))
			continue;
		/* name NUL value NUL, in one allocation */
		size_t nl = strlen(line) + 1, vl = strlen(v) + 1;
		lines[nh] = malloc(nl + vl);
		if (!lines[nh])
			goto out;
		memcpy(lines[nh], line, nl);
		memcpy(lines[nh] + nl, v, vl);
		hdr[nh][0] = lines[nh];
		hdr[nh][1] = lines[nh] + nl;
		nh++;
	}
	if (fr.chunked)
		fr.length = -1;
	int no_body = e->head_only || status == 204 || status == 304;
	if (no_body)
		resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_callback(fr.length >= 0 ? (uint64_t)fr.length : MHD_SIZE_UNKNOWN,
							 16384, down_reader, e, down_done);
	if (!resp)
		goto out;
	if (!no_body) {
		pthread_mutex_lock(&e->lock);
		e->refs++;
		pthread_mutex_unlock(&e->lock);
	}
	for (size_t i = 0; i < nh; i++)
		MHD_add_response_header(resp, hdr[i][0], hdr[i][1]);
	pthread_mutex_lock(&e->lock);
	resp = post_answer(e, status, resp);
	pthread_mutex_unlock(&e->lock);
	rc = 0;
	if (resp) {
		/* The client is gone: nothing to relay. */
		MHD_destroy_response(resp);
		goto out;
	}
	if (no_body) {
		/* Unless it has a length: a HEAD's, or a broken 204 */
		*reusable = !close_after && (e->head_only || (!fr.chunked && fr.length <= 0));
		goto out;
	}

	/* The body, as it comes. */
	char *buf = malloc(16384);
	int broken = 1;
	if (!buf)
		goto ended;
	if (fr.chunked) {
		for (;;) {
			char *end;
			if (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) < 0)
				break;
			errno = 0;
			unsigned long long size = strtoull(line, &end, 16);
			if (errno || end == line || (*end && *end != ';'))
				break;
			if (size == 0) {
				/* Trailers are dropped: the SDK's protocols put none. */
				while (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) == 0 && line[0])
					;
				broken = 0;
				break;
			}
			while (size) {
				ssize_t n = up_read(u, buf, size < 16384 ? (size_t)size : 16384, upstream_deadline(),
						    cancelled, e);
				if (n <= 0 || queue_down(e, buf, (size_t)n) < 0)
					goto ended;
				size -= (uint64_t)n;
			}
			if (up_line(u, line, sizeof(line), upstream_deadline(), cancelled, e) < 0 || line[0])
				break;
		}
	} else {
		int64_t left = fr.length;
		for (;;) {
			if (left == 0) {
				broken = 0;
				break;
			}
			size_t want = left < 0 || left > 16384 ? 16384 : (size_t)left;
			ssize_t n = up_read(u, buf, want, upstream_deadline(), cancelled, e);
			if (n == 0 && left < 0)
				broken = 0;
			if (n <= 0 || queue_down(e, buf, (size_t)n) < 0)
				break;
			if (left > 0)
				left -= n;
		}
	}
ended:
	free(buf);
	end_down(e, broken);
	*reusable = !broken && !close_after && (fr.chunked || fr.length >= 0);
out:
	for (size_t i = 0; i < nh; i++)
		free(lines[i]);
	return rc;
}

/* Adds lines ("Name: value") to h and hands h to t as its extra header
 * lines: 0, or 500 after filling msg. */
static unsigned take_lines(struct target *t, struct headbuf *h, const char *const *lines, char *msg, size_t cap)
{
	for (const char *const *p = lines; p && *p; p++) {
		if (!strchr(*p, ':') || strpbrk(*p, "\r\n"))
			continue;
		hb_add(h, *p, strlen(*p));
		hb_add(h, "\r\n", 2);
	}
	hb_add(h, "", 0);
	if (h->bad) {
		free(h->p);
		snprintf(msg, cap, "out of memory");
		return 500;
	}
	t->extra = h->p;
	return 0;
}

/* resolve_platform_port(): the port is not the platform's to route. */
#define EDGE_NOT_ROUTED 1

/*
 * A user port on a platform that routes ports itself: its URL, and the
 * platform's headers (its traffic token), which only the sandbox's request
 * gets. 0, EDGE_NOT_ROUTED (the provider exposes ports instead), or an
 * HTTP status after filling msg.
 */
static unsigned resolve_platform_port(struct edge *e, hangar_sandbox *sb, struct target *t, char *msg, size_t cap)
{
	hangar_port_endpoint ep = HANGAR_PORT_ENDPOINT_INIT;
	struct headbuf h = { 0 };
	unsigned status;
	int rc = hangar_sandbox_port_endpoint(&ep, sb, e->port);

	if (rc == HANGAR_EUNSUPPORTED)
		return EDGE_NOT_ROUTED;
	if (rc < 0) {
		snprintf(msg, cap, rc == HANGAR_EPAUSED ? "The sandbox %s is paused" : "The sandbox %s cannot be reached",
			 e->id);
		return 502;
	}
	rc = up_hostport(ep.url, t->hostport, sizeof(t->hostport));
	if (rc < 0) {
		snprintf(msg, cap, "The port %u of sandbox %s is at a URL the edge does not forward to "
				   "(only http:// and https://)", e->port, e->id);
		status = 502;
	} else {
		t->tls = rc == 1;
		status = take_lines(t, &h, ep.headers, msg, cap);
	}
	hangar_buf_dispose(&ep.storage);
	return status;
}

/* Where the request goes, from the library: 0, or an HTTP status after
 * filling msg. */
static unsigned resolve(struct edge *e, struct target *t, char *msg, size_t cap)
{
	hangar_sandbox *sb = NULL;
	/* The E2B id's sandbox when the request came: a restore gives it another. */
	int rc = e2b_resolve_record(e->id, &e->rec, &sb);
	unsigned status = 0;

	if (rc == 1) {
		snprintf(msg, cap, "The sandbox %s is paused", e->id);
		return 502;
	}
	if (rc < 0) {
		/* E2B's edge answers 502 for a sandbox it cannot reach, whatever the reason. */
		snprintf(msg, cap, rc == HANGAR_ENOTFOUND || rc == HANGAR_EGONE ? "The sandbox %s was not found"
										: "The sandbox %s cannot be reached",
			 e->id);
		return 502;
	}
	if (e->port == EDGE_ENVD_PORT) {
		hangar_envd_endpoint ep = HANGAR_ENVD_ENDPOINT_INIT;
		struct headbuf h = { 0 };
		rc = hangar_sandbox_envd_endpoint(&ep, sb);
		if (rc == HANGAR_EPAUSED) {
			snprintf(msg, cap, "The sandbox %s is paused", e->id);
			status = 502;
			goto out;
		}
		if (rc < 0) {
			snprintf(msg, cap, "The sandbox %s cannot be reached", e->id);
			status = 502;
			goto out;
		}
		snprintf(t->socket_path, sizeof(t->socket_path), "%s", ep.socket_path ? ep.socket_path : "");
		/* A socket path wins; the URL still names the Host envd is told. */
		rc = up_hostport(ep.url, t->hostport, sizeof(t->hostport));
		t->tls = rc == 1 && !t->socket_path[0];
		if (rc < 0 && !t->socket_path[0]) {
			snprintf(msg, cap, "The sandbox's envd is at a URL the edge does not forward to "
					   "(only http:// and https://)");
			status = 502;
			goto out;
		}
		if (!t->hostport[0])
			snprintf(t->hostport, sizeof(t->hostport), "localhost:%u", EDGE_ENVD_PORT);
		if (ep.access_token && ep.access_token[0])
			hb_line(&h, "X-Access-Token", ep.access_token);
		status = take_lines(t, &h, ep.headers, msg, cap);
	} else {
		hangar_buf addr = HANGAR_BUF_INIT;
		status = resolve_platform_port(e, sb, t, msg, cap);
		if (status != EDGE_NOT_ROUTED)
			goto out;
		status = 0;
		rc = hangar_sandbox_expose_port(&addr, sb, e->port);
		if (rc == HANGAR_EUNSUPPORTED) {
			snprintf(msg, cap, "The sandbox's provider cannot expose ports");
			status = 501;
		} else if (rc < 0) {
			snprintf(msg, cap, "The port %u of sandbox %s cannot be reached", e->port, e->id);
			status = 502;
		} else if (!strchr(addr.ptr, ':')) {
			/* A platform's own HTTPS name: not reachable over plain HTTP. */
			snprintf(msg, cap, "The port %u of sandbox %s is served by its platform at %s", e->port, e->id,
				 addr.ptr);
			status = 501;
		} else {
			snprintf(t->hostport, sizeof(t->hostport), "%s", addr.ptr);
		}
		hangar_buf_dispose(&addr);
	}
out:
	hangar_sandbox_unref(sb);
	return status;
}

static void forward(struct edge *e)
{
	struct target t = { .extra = NULL };
	char msg[512];
	unsigned status;
	struct headbuf h = { 0 };
	struct up u = { .fd = -1 };

	t.hostport[0] = t.socket_path[0] = '\0';
	/*
	 * A platform's envd URL and tokens, kept a moment (e2b-edge-cache.c):
	 * finding them asks the platform's control API. A local sandbox's
	 * socket is found every time, from its files: the library knows at once
	 * when it is paused, which its frozen envd would not say. A user port's
	 * is found every time too.
	 */
	int cached = e->port == EDGE_ENVD_PORT && edge_cache_get(e->id, &e->rec, &t) == 0;
	status = cached ? 0 : resolve(e, &t, msg, sizeof(msg));
	if (status) {
		answer_error(e, status, msg);
		goto done;
	}
	if (!cached && e->port == EDGE_ENVD_PORT)
		edge_cache_put(e->id, &e->rec, &t); /* a platform's only: a socket path is not kept */
	char key[4200];
	snprintf(key, sizeof(key), "%s%s", t.tls ? "https://" : "", t.socket_path[0] ? t.socket_path : t.hostport);
	int keepable = e->port == EDGE_ENVD_PORT;
	if (!keepable || up_take(key, &u) < 0) {
		if (t.tls) {
			char why[400];
			if (up_connect_tls(&u, t.hostport, EDGE_CONNECT_MS, why, sizeof(why)) < 0) {
				edge_cache_drop(e->id);
				/* Nothing went up: the handshake or its verification failed. */
				snprintf(msg, sizeof(msg), "The sandbox %s cannot be reached over TLS: %s", e->id, why);
				answer_error(e, 502, msg);
				goto done;
			}
		} else {
			u.fd = up_connect(t.hostport, t.socket_path, EDGE_CONNECT_MS);
		}
	}
	if (u.fd < 0) {
		edge_cache_drop(e->id);
		snprintf(msg, sizeof(msg), "The sandbox %s does not answer on port %u", e->id, e->port);
		answer_error(e, 502, msg);
		goto done;
	}
	pthread_mutex_lock(&e->lock);
	e->upstream_fd = u.fd;
	pthread_mutex_unlock(&e->lock);

	hb_add(&h, e->head, strlen(e->head));
	/* Host as the URL named it: an https name without its default port. */
	size_t hl = strlen(t.hostport);
	if (t.tls && hl > 4 && strcmp(t.hostport + hl - 4, ":443") == 0)
		t.hostport[hl - 4] = '\0';
	hb_line(&h, "Host", t.hostport);
	if (t.extra)
		hb_add(&h, t.extra, strlen(t.extra));
	hb_add(&h, keepable ? "\r\n" : "Connection: close\r\n\r\n", keepable ? 2 : 21);
	if (h.bad || up_write_all(&u, h.p, h.len, upstream_deadline(), cancelled, e) < 0 ||
	    (e->has_body && send_body(e, &u) < 0)) {
		pthread_mutex_lock(&e->lock);
		int stop = e->stop;
		pthread_mutex_unlock(&e->lock);
		if (!stop) {
			snprintf(msg, sizeof(msg), "The sandbox %s stopped taking the request", e->id);
			answer_error(e, 502, msg);
		}
		goto done;
	}
	int reusable = 0;
	if (relay_answer(e, &u, &reusable) < 0) {
		edge_cache_drop(e->id);
		snprintf(msg, sizeof(msg), "The sandbox %s gave no valid answer in time", e->id);
		answer_error(e, 502, msg);
	}
	pthread_mutex_lock(&e->lock);
	reusable = reusable && keepable && !e->stop && !e->upload_dropped && u.pos == u.len;
	e->upstream_fd = -1;
	pthread_mutex_unlock(&e->lock);
	if (reusable)
		up_keep(key, &u);
done:
	pthread_mutex_lock(&e->lock);
	e->upstream_fd = -1;
	if (!e->answer && e->waiting_answer && e->r) {
		/* No answer at all: the connection is closed on its next turn. */
		e->waiting_answer = 0;
		e->stop = 1;
		e->susp = WAIT_NONE;
		request_deliver(e->r);
	}
	/* A connection still waiting on this thread (for room in a queue, or
	 * bytes of the answer) finds out on its next turn that it ended. */
	wake(e, WAIT_NONE);
	pthread_mutex_unlock(&e->lock);
	up_close(&u);
	free(h.p);
	free(t.extra);
	edge_unref(e);
}

/*
 * The threads that forward: one per request in flight, kept a while after
 * their request for the next one (creating a thread is a good part of what
 * the edge adds to a short request).
 */
#define EDGE_THREAD_IDLE_S 30

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t threads_cond = PTHREAD_COND_INITIALIZER;
static struct edge *jobs_head, *jobs_tail;   /* each with an idle thread promised to it */
static unsigned threads_idle;                /* idle threads no job was promised to */

static void *edge_thread(void *arg)
{
	struct edge *e = arg;
	for (;;) {
		struct timespec ts;
		forward(e);
		pthread_mutex_lock(&threads_lock);
		threads_idle++;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += EDGE_THREAD_IDLE_S;
		while (!jobs_head)
			if (pthread_cond_timedwait(&threads_cond, &threads_lock, &ts) != 0)
				break;
		if (!jobs_head) {
			threads_idle--;
			pthread_mutex_unlock(&threads_lock);
			return NULL;
		}
		e = jobs_head;
		jobs_head = e->job_next;
		if (!jobs_head)
			jobs_tail = NULL;
		pthread_mutex_unlock(&threads_lock);
	}
}

/* Hands e to an idle thread, or to a new one; -1 when none can be made. */
static int dispatch(struct edge *e)
{
	pthread_t th;
	pthread_attr_t attr;
	int rc;

	pthread_mutex_lock(&threads_lock);
	if (threads_idle > 0) {
		threads_idle--;
		e->job_next = NULL;
		if (jobs_tail)
			jobs_tail->job_next = e;
		else
			jobs_head = e;
		jobs_tail = e;
		pthread_cond_signal(&threads_cond);
		pthread_mutex_unlock(&threads_lock);
		return 0;
	}
	pthread_mutex_unlock(&threads_lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, edge_thread, e);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

/* ---- the connection's side (server.c) ---- */

int edge_begin(struct request *r, const char *url, const char *method, struct edge **out)
{
	struct MHD_Connection *conn = request_connection(r);
	char id[65];
	unsigned port;
	struct edge *e;
	struct headbuf h = { 0 };
	struct e2b_record rec;
	const char *target = request_target(r), *cl, *te;
	int routed = edge_route(r, url, method, id, &port, &rec);

	*out = NULL;
	if (routed <= 0)
		return routed == 0 ? 0 : 1;

	e = calloc(1, sizeof(*e));
	if (!e) {
		e2b_record_dispose(&rec);
		edge_reply(r, url, 500, "out of memory");
		return 1;
	}
	e->rec = rec;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->refs = 2;   /* the request's, the thread's */
	snprintf(e->id, sizeof(e->id), "%s", id);
	e->port = port;
	e->r = r;
	e->conn = conn;
	e->client_fd = -1;
	e->upstream_fd = -1;
	e->up_stamp_us = e->down_stamp_us = clock_mono_us();
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		e->client_fd = ci->connect_fd;
	e->head_only = strcmp(method, "HEAD") == 0;
	cl = request_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
	te = request_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	hb_add(&h, method, strlen(method));
	hb_add(&h, " ", 1);
	hb_add(&h, target, strlen(target));
	hb_add(&h, " HTTP/1.1\r\n", 11);
	MHD_get_connection_values(conn, MHD_HEADER_KIND, copy_header, &h);
	if (te && strcasecmp(te, "identity") != 0) {
		e->has_body = e->body_chunked = 1;
		hb_line(&h, "Transfer-Encoding", "chunked");
	} else if (cl) {
		e->has_body = strcmp(cl, "0") != 0;
		hb_line(&h, "Content-Length", cl);
	}
	e->head = h.p;
	e->upq = e->has_body ? malloc(EDGE_QUEUE_BYTES) : NULL;
	e->downq = malloc(EDGE_QUEUE_BYTES);
	if (h.bad || !e->head || (e->has_body && !e->upq) || !e->downq) {
		e->refs = 1;
		edge_unref(e);
		edge_reply(r, url, h.bad ? 400 : 500, h.bad ? "a header cannot be forwarded" : "out of memory");
		return 1;
	}

	pthread_mutex_lock(&edges_lock);
	if (edges_stopping) {
		pthread_mutex_unlock(&edges_lock);
		e->refs = 1;
		edge_unref(e);
		edge_reply(r, url, 503, "the server is shutting down");
		return 1;
	}
	e->linked = 1;
	e->next = edges;
	if (edges)
		edges->prev = e;
	edges = e;
	pthread_mutex_unlock(&edges_lock);

	if (dispatch(e) < 0) {
		e->refs = 1;
		edge_unref(e);
		edge_reply(r, url, 503, "no thread for the request");
		return 1;
	}
	*out = e;
	return 1;
}

int edge_on_request(struct edge *e, struct request *r, const char *data, size_t *size)
{
	int rc = EDGE_WAIT;
	pthread_mutex_lock(&e->lock);
	if (*size) {
		if (e->upload_dropped || e->stop || !e->upq) {
			/* Dropped, or a body the request's head did not announce. */
			*size = 0;
		} else {
			size_t room = EDGE_QUEUE_BYTES - e->upq_len, n = *size < room ? *size : room;
			memcpy(e->upq + e->upq_len, data, n);
			e->upq_len += n;
			*size -= n;
			e->up_stamp_us = clock_mono_us();
			pthread_cond_broadcast(&e->cond);
			if (*size)
				/* Full: the connection waits until the thread took it. */
				wait_for(e, WAIT_ROOM);
		}
		pthread_mutex_unlock(&e->lock);
		return EDGE_WAIT;
	}
	e->body_done = 1;
	if (e->answer) {
		reply_response(r, e->status, e->answer);
		e->answer = NULL;
		rc = EDGE_ANSWER;
	} else if (e->stop) {
		rc = EDGE_FAIL;
	} else {
		e->waiting_answer = 1;
		wait_for(e, WAIT_ANSWER);
	}
	pthread_cond_broadcast(&e->cond);
	pthread_mutex_unlock(&e->lock);
	return rc;
}

void edge_log_fields(struct edge *e, cJSON *line)
{
	cJSON_AddStringToObject(line, "sandbox", e->id);
	sjson_add_int64(line, "sandbox_port", e->port);
}

void edge_request_done(struct edge *e)
{
	struct MHD_Response *answer;
	pthread_mutex_lock(&e->lock);
	answer = e->answer;
	e->answer = NULL;
	e->r = NULL;
	e->conn = NULL;
	e->client_fd = -1;
	e->stop = 1;
	e->susp = WAIT_NONE;
	pthread_cond_broadcast(&e->cond);
	if (e->upstream_fd >= 0)
		shutdown(e->upstream_fd, SHUT_RDWR);
	pthread_mutex_unlock(&e->lock);
	/* An answer never sent holds a reference to e (its reader's). */
	if (answer)
		MHD_destroy_response(answer);
	edge_unref(e);
}

void edge_close_all(void)
{
	pthread_mutex_lock(&edges_lock);
	edges_stopping = 1;
	for (struct edge *e = edges; e; e = e->next) {
		pthread_mutex_lock(&e->lock);
		e->stop = 1;
		if (e->upstream_fd >= 0)
			shutdown(e->upstream_fd, SHUT_RDWR);
		pthread_cond_broadcast(&e->cond);
		wake(e, WAIT_NONE);
		pthread_mutex_unlock(&e->lock);
	}
	pthread_mutex_unlock(&edges_lock);
}
