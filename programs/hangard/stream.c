/*
 * A bounded byte queue from a producer thread (a command's output, the
 * audit events) to a response libmicrohttpd is sending. When the queue is
 * empty the reader suspends the connection instead of returning 0, which
 * with internal polling would spin; the producer resumes it when bytes
 * arrive. A reader that cannot keep up hits the bound: the producer is told
 * to stop and the stream ends, so one slow client costs its own queue only.
 */
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "hangard.h"

struct stream {
	pthread_mutex_t lock;
	int refs;
	char *buf;
	size_t len, cap, max;
	int closed;     /* the producer is done */
	int broken;     /* over the bound, or the response is gone */
	int suspended;
	struct MHD_Connection *conn;
};

struct stream *stream_new(size_t max_bytes)
{
	struct stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	s->refs = 1;
	s->max = max_bytes;
	return s;
}

void stream_unref(struct stream *s)
{
	int last;
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->buf);
	free(s);
}

/* Wakes the reader; with the lock held. */
static void wake(struct stream *s)
{
	if (s->suspended && s->conn) {
		s->suspended = 0;
		MHD_resume_connection(s->conn);
	}
}

int stream_write(struct stream *s, const char *data, size_t len)
{
	int rc = 0;
	pthread_mutex_lock(&s->lock);
	if (s->broken || s->closed) {
		rc = -1;
	} else if (s->len + len > s->max) {
		s->broken = 1;
		rc = -1;
		wake(s);
	} else {
		if (s->len + len > s->cap) {
			size_t cap = s->cap ? s->cap : 4096;
			while (cap < s->len + len)
				cap *= 2;
			char *nb = realloc(s->buf, cap);
			if (!nb) {
				s->broken = 1;
				wake(s);
				pthread_mutex_unlock(&s->lock);
				return -1;
			}
			s->buf = nb;
			s->cap = cap;
		}
		memcpy(s->buf + s->len, data, len);
		s->len += len;
		wake(s);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void stream_close(struct stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->closed = 1;
	wake(s);
	pthread_mutex_unlock(&s->lock);
}

int stream_is_closed(struct stream *s)
{
	int c;
	pthread_mutex_lock(&s->lock);
	c = s->closed || s->broken;
	pthread_mutex_unlock(&s->lock);
	return c;
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *s = cls;
	ssize_t n;
	(void)pos;
	pthread_mutex_lock(&s->lock);
	if (s->len) {
		n = (ssize_t)(s->len < max ? s->len : max);
		memcpy(out, s->buf, (size_t)n);
		memmove(s->buf, s->buf + n, s->len - (size_t)n);
		s->len -= (size_t)n;
	} else if (s->broken) {
		n = MHD_CONTENT_READER_END_WITH_ERROR;
	} else if (s->closed) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		/* Nothing yet: park the connection until the producer wakes it. */
		s->suspended = 1;
		MHD_suspend_connection(s->conn);
		n = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void reader_done(void *cls)
{
	struct stream *s = cls;
	pthread_mutex_lock(&s->lock);
	s->broken = 1;
	s->conn = NULL;
	pthread_mutex_unlock(&s->lock);
	stream_unref(s);
}

struct MHD_Response *stream_response(struct stream *s, const char *content_type)
{
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, s, reader_done);
	if (!resp)
		return NULL;
	pthread_mutex_lock(&s->lock);
	s->refs++;
	pthread_mutex_unlock(&s->lock);
	MHD_add_response_header(resp, "Content-Type", content_type);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	return resp;
}

void stream_attach(struct stream *s, struct MHD_Connection *conn)
{
	pthread_mutex_lock(&s->lock);
	s->conn = conn;
	pthread_mutex_unlock(&s->lock);
}
