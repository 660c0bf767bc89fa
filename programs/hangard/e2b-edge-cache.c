/*
 * The edge's memory of where each sandbox's envd is (e2b-edge.h): a few
 * entries, each used for a moment and only while the sandbox's record is
 * as it was when the target was found. The headers kept hold the sandbox's
 * tokens: they are wiped when an entry goes.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "e2b-edge.h"
#include "e2b.h"

#define EDGE_CACHE_SIZE 64

static struct kept_target {
	char id[65];
	char *sandbox_id;      /* the record's, NULL: the E2B id's own */
	int64_t generation;
	enum e2b_paused paused;
	int64_t until_us;      /* 0: a free slot */
	/* A platform's target: a host and port, never a socket path (struct target's). */
	char hostport[sizeof(((struct target *)0)->hostport)];
	int tls;
	char *extra;
} cache[EDGE_CACHE_SIZE];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void wipe(struct kept_target *k)
{
	if (k->extra) {
		explicit_bzero(k->extra, strlen(k->extra));
		free(k->extra);
	}
	free(k->sandbox_id);
	explicit_bzero(k, sizeof(*k));
}

static int same_record(const struct kept_target *k, const struct e2b_record *rec)
{
	const char *a = k->sandbox_id ? k->sandbox_id : "", *b = rec->sandbox_id ? rec->sandbox_id : "";

	return k->generation == rec->generation && k->paused == rec->paused && strcmp(a, b) == 0;
}

static struct kept_target *find(const char *id)
{
	for (size_t i = 0; i < EDGE_CACHE_SIZE; i++)
		if (cache[i].until_us && strcmp(cache[i].id, id) == 0)
			return &cache[i];
	return NULL;
}

int edge_cache_get(const char *id, const struct e2b_record *rec, struct target *t)
{
	struct kept_target *k;
	int rc = -1;

	pthread_mutex_lock(&cache_lock);
	k = find(id);
	if (k && (k->until_us < clock_mono_us() || !same_record(k, rec))) {
		wipe(k);
		k = NULL;
	}
	if (k) {
		memcpy(t->hostport, k->hostport, sizeof(k->hostport));
		t->tls = k->tls;
		t->socket_path[0] = '\0';
		t->extra = k->extra ? strdup(k->extra) : NULL;
		rc = k->extra && !t->extra ? -1 : 0;
	}
	pthread_mutex_unlock(&cache_lock);
	return rc;
}

void edge_cache_put(const char *id, const struct e2b_record *rec, const struct target *t)
{
	struct kept_target *k, *oldest = NULL;
	int64_t now = clock_mono_us();

	if (strlen(id) >= sizeof(cache[0].id) || t->socket_path[0])
		return;
	pthread_mutex_lock(&cache_lock);
	k = find(id);
	/* Else a free slot, one past its moment, or the one that goes soonest. */
	for (size_t i = 0; !k && i < EDGE_CACHE_SIZE; i++) {
		if (!cache[i].until_us || cache[i].until_us < now)
			k = &cache[i];
		else if (!oldest || cache[i].until_us < oldest->until_us)
			oldest = &cache[i];
	}
	if (!k)
		k = oldest;
	wipe(k);
	memcpy(k->id, id, strlen(id) + 1);
	k->sandbox_id = rec->sandbox_id ? strdup(rec->sandbox_id) : NULL;
	k->generation = rec->generation;
	k->paused = rec->paused;
	memcpy(k->hostport, t->hostport, sizeof(k->hostport));
	k->tls = t->tls;
	k->extra = t->extra ? strdup(t->extra) : NULL;
	if ((rec->sandbox_id && !k->sandbox_id) || (t->extra && !k->extra))
		wipe(k); /* out of memory: nothing kept */
	else
		k->until_us = now + (int64_t)EDGE_CACHE_MS * 1000;
	pthread_mutex_unlock(&cache_lock);
}

void edge_cache_drop(const char *id)
{
	struct kept_target *k;

	pthread_mutex_lock(&cache_lock);
	k = find(id);
	if (k)
		wipe(k);
	pthread_mutex_unlock(&cache_lock);
}

void edge_cache_clear(void)
{
	pthread_mutex_lock(&cache_lock);
	for (size_t i = 0; i < EDGE_CACHE_SIZE; i++)
		if (cache[i].until_us)
			wipe(&cache[i]);
	pthread_mutex_unlock(&cache_lock);
}
