#define _GNU_SOURCE
#include "clock.h"
#include "stream.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"

/* How far a client may fall behind before producers wait for it. */
#define STREAM_BACKLOG_MAX (4u << 20)

struct envd_stream {
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t drained;
	int evfd;
	int sockfd;
	struct hbuf out;
	size_t out_off;
	int ended;
	int gone;
	int keepalive_sec;
	const char *keepalive_json;
	int64_t deadline_ns;
	int64_t last_send_ns;
	envd_stream_detach_fn detach;
	void *detach_ctx;
	int detached;
};

struct envd_stream *envd_stream_new(struct MHD_Connection *conn, int keepalive_sec)
{
	struct envd_stream *s = calloc(1, sizeof(*s));
	const union MHD_ConnectionInfo *ci;

	if (!s)
		return NULL;
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->evfd < 0) {
		free(s);
		return NULL;
	}
	atomic_init(&s->refs, 1);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->drained, NULL);
	ci = conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
	s->sockfd = ci ? ci->connect_fd : -1;
	s->keepalive_sec = keepalive_sec > 0 ? keepalive_sec : ENVD_KEEPALIVE_DEFAULT;
	s->keepalive_json = "{\"event\":{\"keepalive\":{}}}";
	s->last_send_ns = clock_mono_ns();
	return s;
}

void envd_stream_ref(struct envd_stream *s)
{
	atomic_fetch_add(&s->refs, 1);
}

void envd_stream_unref(struct envd_stream *s)
{
	if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
		return;
	hbuf_free(&s->out);
	close(s->evfd);
	pthread_cond_destroy(&s->drained);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void envd_stream_set_keepalive(struct envd_stream *s, const char *keepalive_json)
{
	s->keepalive_json = keepalive_json;
}

void envd_stream_set_deadline_ms(struct envd_stream *s, int64_t ms)
{
	pthread_mutex_lock(&s->mu);
	s->deadline_ns = ms > 0 ? clock_mono_ns() + ms * 1000000 : 0;
	pthread_mutex_unlock(&s->mu);
}

void envd_stream_set_detach(struct envd_stream *s, envd_stream_detach_fn fn, void *ctx)
{
	pthread_mutex_lock(&s->mu);
	s->detach = fn;
	s->detach_ctx = ctx;
	pthread_mutex_unlock(&s->mu);
}

static void wake(struct envd_stream *s)
{
	uint64_t one = 1;
	ssize_t n = write(s->evfd, &one, sizeof(one));

	(void)n;
}

/* Appends one envelope; the caller holds the lock. */
static int append_locked(struct envd_stream *s, uint8_t flags, const char *json, size_t len)
{
	uint8_t hdr[CONNECT_ENVELOPE_HEADER];

	connect_envelope_header(hdr, flags, (uint32_t)len);
	if (hbuf_reserve(&s->out, sizeof(hdr) + len) < 0)
		return -1;
	hbuf_put(&s->out, hdr, sizeof(hdr));
	hbuf_put(&s->out, json, len);
	return 0;
}

int envd_stream_send(struct envd_stream *s, cJSON *msg)
{
	char *json = cJSON_PrintUnformatted(msg);
	int r = -1;

	cJSON_Delete(msg);
	if (!json)
		return -1;
	pthread_mutex_lock(&s->mu);
	while (!s->gone && !s->ended && s->out.len - s->out_off > STREAM_BACKLOG_MAX)
		pthread_cond_wait(&s->drained, &s->mu);
	if (!s->gone && !s->ended) {
		r = append_locked(s, 0, json, strlen(json));
		s->last_send_ns = clock_mono_ns();
	}
	pthread_mutex_unlock(&s->mu);
	free(json);
	if (r == 0)
		wake(s);
	return r;
}

static void end_locked(struct envd_stream *s, enum connect_code code, const char *message)
{
	cJSON *root, *err;
	char *json;

	if (s->ended)
		return;
	s->ended = 1;
	pthread_cond_broadcast(&s->drained);
	if (code == CONNECT_OK) {
		append_locked(s, CONNECT_FLAG_END_STREAM, "{}", 2);
		return;
	}
	root = cJSON_CreateObject();
	err = cJSON_AddObjectToObject(root, "error");
	cJSON_AddStringToObject(err, "code", connect_code_name(code));
	if (message && *message)
		cJSON_AddStringToObject(err, "message", message);
	json = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (json)
		append_locked(s, CONNECT_FLAG_END_STREAM, json, strlen(json));
	else
		append_locked(s, CONNECT_FLAG_END_STREAM, "{\"error\":{\"code\":\"internal\"}}", 29);
	free(json);
}

void envd_stream_end(struct envd_stream *s, enum connect_code code, const char *message)
{
	pthread_mutex_lock(&s->mu);
	end_locked(s, code, message);
	pthread_mutex_unlock(&s->mu);
	wake(s);
}

/* Runs the producer's detach hook once, outside the lock. */
static void detach_once(struct envd_stream *s)
{
	envd_stream_detach_fn fn = NULL;
	void *ctx = NULL;

	pthread_mutex_lock(&s->mu);
	if (!s->detached) {
		s->detached = 1;
		fn = s->detach;
		ctx = s->detach_ctx;
	}
	pthread_mutex_unlock(&s->mu);
	if (fn)
		fn(s, ctx);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct envd_stream *s = cls;

	(void)pos;
	for (;;) {
		struct pollfd pfd[2];
		int64_t now, wait_ns, ka_at;
		int timeout_ms, npfd = 1;

		pthread_mutex_lock(&s->mu);
		if (s->out.len > s->out_off) {
			size_t n = s->out.len - s->out_off;

			if (n > max)
				n = max;
			memcpy(buf, s->out.data + s->out_off, n);
			s->out_off += n;
			if (s->out_off == s->out.len) {
				hbuf_clear(&s->out);
				s->out_off = 0;
			}
			pthread_cond_broadcast(&s->drained);
			pthread_mutex_unlock(&s->mu);
			return (ssize_t)n;
		}
		if (s->ended) {
			pthread_mutex_unlock(&s->mu);
			detach_once(s);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		now = clock_mono_ns();
		if (s->deadline_ns && now >= s->deadline_ns) {
			end_locked(s, CONNECT_DEADLINE_EXCEEDED, "context deadline exceeded");
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		ka_at = s->last_send_ns + (int64_t)s->keepalive_sec * 1000000000;
		if (now >= ka_at) {
			append_locked(s, 0, s->keepalive_json, strlen(s->keepalive_json));
			s->last_send_ns = now;
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		wait_ns = ka_at - now;
		if (s->deadline_ns && s->deadline_ns - now < wait_ns)
			wait_ns = s->deadline_ns - now;
		pthread_mutex_unlock(&s->mu);

		timeout_ms = (int)((wait_ns + 999999) / 1000000);
		pfd[0] = (struct pollfd){ .fd = s->evfd, .events = POLLIN };
		if (s->sockfd >= 0) {
			pfd[1] = (struct pollfd){ .fd = s->sockfd, .events = POLLRDHUP };
			npfd = 2;
		}
		if (poll(pfd, (nfds_t)npfd, timeout_ms) < 0 && errno != EINTR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (npfd == 2 && (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) {
			pthread_mutex_lock(&s->mu);
			s->gone = 1;
			pthread_cond_broadcast(&s->drained);
			pthread_mutex_unlock(&s->mu);
			detach_once(s);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			ssize_t n = read(s->evfd, &v, sizeof(v));

			(void)n;
		}
	}
}

static void stream_free(void *cls)
{
	struct envd_stream *s = cls;

	pthread_mutex_lock(&s->mu);
	s->gone = 1;
	pthread_cond_broadcast(&s->drained);
	pthread_mutex_unlock(&s->mu);
	detach_once(s);
	envd_stream_unref(s);
}

struct MHD_Response *envd_stream_response(struct envd_stream *s)
{
	struct MHD_Response *resp;

	envd_stream_ref(s);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, s, stream_free);
	if (!resp) {
		/* Nobody will drain it: let the producer drop its subscription now. */
		stream_free(s);
		return NULL;
	}
	return resp;
}
