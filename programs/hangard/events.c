/*
 * GET /v1/events: the library's audit events as server-sent events, to
 * every subscriber. Each subscriber has a stream with a bound of its own
 * (HANGARD_EVENT_QUEUE_BYTES); one that falls that far behind is dropped,
 * its stream ended, and everyone else goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hangard.h"

static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream **subs;
static size_t n_subs;
static int closed;
static struct server *srv_;
static pthread_cond_t beat_cond = PTHREAD_COND_INITIALIZER;
static pthread_t beat_thread;
static int beating;

/* Writes msg to every subscriber; drops those that fell behind or left.
 * With subs_lock held. */
static void broadcast(const char *msg, size_t len)
{
	size_t keep = 0;
	for (size_t i = 0; i < n_subs; i++) {
		if (stream_write(subs[i], msg, len) < 0) {
			stream_close(subs[i]);
			stream_unref(subs[i]);
			continue;
		}
		subs[keep++] = subs[i];
	}
	n_subs = keep;
}

/* A comment line now and then: a subscriber that went away is only noticed
 * when something is written to it, since a parked connection is not polled. */
static void *heartbeat(void *arg)
{
	static const char beat[] = ": keepalive\n\n";
	(void)arg;
	pthread_mutex_lock(&subs_lock);
	while (!closed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += srv_->cfg->event_heartbeat_s;
		if (pthread_cond_timedwait(&beat_cond, &subs_lock, &ts) == ETIMEDOUT && !closed)
			broadcast(beat, sizeof(beat) - 1);
	}
	pthread_mutex_unlock(&subs_lock);
	return NULL;
}

void events_init(struct server *srv)
{
	srv_ = srv;
	beating = pthread_create(&beat_thread, NULL, heartbeat, NULL) == 0;
}

void events_on_event(const char *name, const char *json, void *payload)
{
	size_t len = strlen(name) + strlen(json) + 32;
	char *msg = malloc(len);
	(void)payload;

	if (strcmp(name, "sandbox.tier_fallback") == 0)
		metrics_count_fallback();
	if (!msg)
		return;
	/* The library's JSON is one line, so one data: field carries it. */
	len = (size_t)snprintf(msg, len, "event: %s\ndata: %s\n\n", name, json);
	pthread_mutex_lock(&subs_lock);
	broadcast(msg, len);
	pthread_mutex_unlock(&subs_lock);
	free(msg);
}

void events_close_all(void)
{
	pthread_mutex_lock(&subs_lock);
	closed = 1;
	for (size_t i = 0; i < n_subs; i++) {
		stream_close(subs[i]);
		stream_unref(subs[i]);
	}
	free(subs);
	subs = NULL;
	n_subs = 0;
	pthread_cond_broadcast(&beat_cond);
	pthread_mutex_unlock(&subs_lock);
	if (beating) {
		pthread_join(beat_thread, NULL);
		beating = 0;
	}
}

void h_events(struct request *r)
{
	struct stream *s = stream_new(srv_->cfg->event_queue_bytes);
	struct MHD_Response *resp;
	struct stream **nv;
	static const char hello[] = ": hangard audit events\n\n";

	if (!s) {
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		return;
	}
	stream_attach(s, request_connection(r));
	resp = stream_response(s, "text/event-stream");
	if (!resp) {
		stream_unref(s);
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		return;
	}
	stream_write(s, hello, sizeof(hello) - 1);
	pthread_mutex_lock(&subs_lock);
	nv = closed ? NULL : realloc(subs, (n_subs + 1) * sizeof(*subs));
	if (nv) {
		subs = nv;
		subs[n_subs++] = s; /* the list takes our reference */
	}
	pthread_mutex_unlock(&subs_lock);
	if (!nv) {
		stream_close(s);
		stream_unref(s);
	}
	reply_response(r, 200, resp);
}

/* For /metrics. */
size_t events_subscribers(void);
size_t events_subscribers(void)
{
	size_t n;
	pthread_mutex_lock(&subs_lock);
	n = n_subs;
	pthread_mutex_unlock(&subs_lock);
	return n;
}
