/*
 * GET /metrics in the Prometheus text format (version 0.0.4): requests by
 * route template and status, a latency histogram per route, the sandboxes
 * the providers list by provider and state, and the tier fallbacks the
 * library reported.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangard.h"

static const unsigned statuses[] = { 200, 201, 204, 400, 401, 403, 404, 405, 409, 410, 413,
				     429, 499 /* the client left */, 500, 501, 502, 503, 504, 0 /* any other */ };
#define N_STATUS (sizeof(statuses) / sizeof(statuses[0]))
static const double buckets[] = { 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120 };
#define N_BUCKET (sizeof(buckets) / sizeof(buckets[0]))
#define MAX_ROUTES 128

struct route_stats {
	uint64_t by_status[N_STATUS];
	uint64_t bucket[N_BUCKET];
	uint64_t count;
	double sum_s;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct route_stats stats[MAX_ROUTES + 1]; /* the last: no route matched */
static uint64_t fallbacks;

size_t events_subscribers(void);

void metrics_record(size_t route, unsigned status, int64_t duration_us)
{
	size_t ri = route < hangard_n_routes && route < MAX_ROUTES ? route : MAX_ROUTES;
	size_t si = N_STATUS - 1;
	double s = (double)duration_us / 1e6;

	for (size_t i = 0; i + 1 < N_STATUS; i++)
		if (statuses[i] == status)
			si = i;
	pthread_mutex_lock(&lock);
	stats[ri].by_status[si]++;
	stats[ri].count++;
	stats[ri].sum_s += s;
	for (size_t b = 0; b < N_BUCKET; b++)
		if (s <= buckets[b])
			stats[ri].bucket[b]++;
	pthread_mutex_unlock(&lock);
}

void metrics_count_fallback(void)
{
	pthread_mutex_lock(&lock);
	fallbacks++;
	pthread_mutex_unlock(&lock);
}

struct out {
	char *buf;
	size_t len, cap;
	int failed;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;
	if (o->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->failed = 1;
			return;
		}
		if (o->buf && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 16384;
		while (cap <= o->len + (size_t)n)
			cap *= 2;
		char *nb = realloc(o->buf, cap);
		if (!nb) {
			o->failed = 1;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
}

struct tally {
	struct {
		char provider[64];
		int32_t state;
		uint64_t n;
	} v[64];
	size_t n;
};

static int count_sandbox(const hangar_sandbox_info *info, void *payload)
{
	struct tally *t = payload;
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].state == info->state && strcmp(t->v[i].provider, info->provider) == 0) {
			t->v[i].n++;
			return 0;
		}
	if (t->n < sizeof(t->v) / sizeof(t->v[0])) {
		snprintf(t->v[t->n].provider, sizeof(t->v[t->n].provider), "%s", info->provider);
		t->v[t->n].state = info->state;
		t->v[t->n].n = 1;
		t->n++;
	}
	return 0;
}

/* Label values are route templates and provider names; escape anyway. */
/* Sessions by state, parked ones by provider, and the checkpoint index's
 * totals: what the store holds, read through the public listings. */
struct held {
	uint64_t sessions[5]; /* by HANGAR_SESSION_* (1 to 4) */
	struct {
		char provider[64];
		uint64_t n;
	} parked[64];
	size_t n_parked;
	uint64_t checkpoints, checkpoint_bytes;
};

static int count_session(const hangar_session_info *info, void *payload)
{
	struct held *h = payload;
	size_t i;

	if (info->state >= 1 && info->state <= 4)
		h->sessions[info->state]++;
	if (info->state != HANGAR_SESSION_PARKED)
		return 0;
	for (i = 0; i < h->n_parked; i++)
		if (strcmp(h->parked[i].provider, info->provider) == 0)
			break;
	if (i == h->n_parked) {
		if (i == sizeof(h->parked) / sizeof(h->parked[0]))
			return 0;
		snprintf(h->parked[i].provider, sizeof(h->parked[i].provider), "%s", info->provider);
		h->n_parked++;
	}
	h->parked[i].n++;
	return 0;
}

static int count_checkpoint(hangar_checkpoint *cp, void *payload)
{
	struct held *h = payload;
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;

	if (hangar_checkpoint_get_info(&info, cp) == 0) {
		h->checkpoints++;
		h->checkpoint_bytes += info.stored_bytes;
	}
	return 0;
}

static const char *label(char *buf, size_t size, const char *s)
{
	size_t j = 0;
	for (; *s && j + 3 < size; s++) {
		if (*s == '\\' || *s == '"') {
			buf[j++] = '\\';
			buf[j++] = *s;
		} else if (*s == '\n') {
			buf[j++] = '\\';
			buf[j++] = 'n';
		} else {
			buf[j++] = *s;
		}
	}
	buf[j] = '\0';
	return buf;
}

char *metrics_render(hangar_ctx *ctx, size_t *len)
{
	static struct route_stats snap[MAX_ROUTES + 1];
	static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
	struct out o = { 0 };
	struct tally *t = calloc(1, sizeof(*t));
	struct held *h = calloc(1, sizeof(*h));
	static const char *const session_states[] = { "", "active", "suspended", "parked", "archived" };
	uint64_t fb;
	char lb[256];
	int list_rc, store_rc;

	if (!t || !h) {
		free(t);
		free(h);
		return NULL;
	}
	list_rc = hangar_sandbox_list(ctx, NULL, count_sandbox, t);
	store_rc = hangar_session_list(ctx, count_session, h);
	if (store_rc == 0)
		store_rc = hangar_checkpoint_list(ctx, NULL, count_checkpoint, h);
	pthread_mutex_lock(&snap_lock);
	pthread_mutex_lock(&lock);
	memcpy(snap, stats, sizeof(stats));
	fb = fallbacks;
	pthread_mutex_unlock(&lock);

	put(&o, "# HELP hangard_requests_total HTTP requests by route template and status.\n"
		"# TYPE hangard_requests_total counter\n");
	for (size_t r = 0; r <= MAX_ROUTES; r++) {
		const char *path = r < hangard_n_routes ? hangard_routes[r].path : "none";
		const char *method = r < hangard_n_routes ? hangard_routes[r].method : "";
		if (r >= hangard_n_routes && r != MAX_ROUTES)
			continue;
		for (size_t s = 0; s < N_STATUS; s++)
			if (snap[r].by_status[s]) {
				char st[16];
				if (statuses[s])
					snprintf(st, sizeof(st), "%u", statuses[s]);
				else
					snprintf(st, sizeof(st), "other");
				put(&o, "hangard_requests_total{method=\"%s\",route=\"%s\",status=\"%s\"} %" PRIu64 "\n",
				    method, label(lb, sizeof(lb), path), st, snap[r].by_status[s]);
			}
	}
	put(&o, "# HELP hangard_request_duration_seconds Time from the first header to the last byte.\n"
		"# TYPE hangard_request_duration_seconds histogram\n");
	for (size_t r = 0; r <= MAX_ROUTES; r++) {
		const char *path = r < hangard_n_routes ? hangard_routes[r].path : "none";
		const char *method = r < hangard_n_routes ? hangard_routes[r].method : "";
		if ((r >= hangard_n_routes && r != MAX_ROUTES) || !snap[r].count)
			continue;
		label(lb, sizeof(lb), path);
		for (size_t b = 0; b < N_BUCKET; b++)
			put(&o, "hangard_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} %" PRIu64 "\n",
			    method, lb, buckets[b], snap[r].bucket[b]);
		put(&o, "hangard_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
		    method, lb, snap[r].count);
		put(&o, "hangard_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n", method, lb,
		    snap[r].sum_s);
		put(&o, "hangard_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %" PRIu64 "\n", method, lb,
		    snap[r].count);
	}
	pthread_mutex_unlock(&snap_lock);
	put(&o, "# HELP hangard_sandboxes Sandboxes the providers list, by provider and state.\n"
		"# TYPE hangard_sandboxes gauge\n");
	for (size_t i = 0; i < t->n; i++)
		put(&o, "hangard_sandboxes{provider=\"%s\",state=\"%s\"} %" PRIu64 "\n",
		    label(lb, sizeof(lb), t->v[i].provider),
		    t->v[i].state == HANGAR_SANDBOX_PAUSED ? "paused" : "running", t->v[i].n);
	put(&o, "# HELP hangard_sandbox_list_ok 1 when every provider answered the list behind hangard_sandboxes.\n"
		"# TYPE hangard_sandbox_list_ok gauge\nhangard_sandbox_list_ok %d\n", list_rc == 0);
	put(&o, "# HELP hangard_sessions Sessions the state store holds, by state.\n"
		"# TYPE hangard_sessions gauge\n");
	for (int i = 1; i <= 4; i++)
		put(&o, "hangard_sessions{state=\"%s\"} %" PRIu64 "\n", session_states[i], h->sessions[i]);
	put(&o, "# HELP hangard_parked_sandboxes Sandboxes paused with their memory for a session's hot resume, by provider.\n"
		"# TYPE hangard_parked_sandboxes gauge\n");
	for (size_t i = 0; i < h->n_parked; i++)
		put(&o, "hangard_parked_sandboxes{provider=\"%s\"} %" PRIu64 "\n",
		    label(lb, sizeof(lb), h->parked[i].provider), h->parked[i].n);
	put(&o, "# HELP hangard_checkpoints Checkpoints in the index.\n"
		"# TYPE hangard_checkpoints gauge\nhangard_checkpoints %" PRIu64 "\n", h->checkpoints);
	put(&o, "# HELP hangard_checkpoint_bytes Bytes the indexed checkpoints take in the checkpoint store (sealed).\n"
		"# TYPE hangard_checkpoint_bytes gauge\nhangard_checkpoint_bytes %" PRIu64 "\n", h->checkpoint_bytes);
	put(&o, "# HELP hangard_store_list_ok 1 when the state store answered the lists behind hangard_sessions, "
		"hangard_parked_sandboxes and hangard_checkpoint*.\n"
		"# TYPE hangard_store_list_ok gauge\nhangard_store_list_ok %d\n", store_rc == 0);
	put(&o, "# HELP hangard_tier_fallbacks_total Creates that moved past a full or unreachable provider.\n"
		"# TYPE hangard_tier_fallbacks_total counter\nhangard_tier_fallbacks_total %" PRIu64 "\n", fb);
	put(&o, "# HELP hangard_event_subscribers Clients following /v1/events.\n"
		"# TYPE hangard_event_subscribers gauge\nhangard_event_subscribers %zu\n", events_subscribers());
	{
		char rb[1536];
		size_t rn = reaper_metrics(rb, sizeof(rb));
		put(&o, "%.*s", (int)rn, rb);
	}
	free(t);
	free(h);
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}

void h_metrics(struct request *r)
{
	size_t len;
	char *text = metrics_render(hangard->ctx, &len);
	if (!text) {
		reply_error(r, 500, "nomem", HANGAR_ENOMEM, "out of memory");
		return;
	}
	reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}
