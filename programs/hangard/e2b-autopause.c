/*
 * autoPause: E2B pauses a sandbox created with it when its timeout ends,
 * instead of killing it, and connect resumes it. The library ends a
 * sandbox at its lifetime, so for these hangard keeps the E2B lifetime in
 * the sandbox's record (pause_at_us), sets the library's E2B_AUTOPAUSE_GRACE_S
 * longer, and this thread pauses each one that is due, as POST /pause would
 * (with its memory; without it, when the create asked so, as a session
 * suspend, or the provider's filesystem-only pause where no checkpoint
 * store is configured). A
 * sandbox whose pause cannot be made (hangard down, the provider failing)
 * still ends at the library's lifetime: nothing runs on unwatched.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2b.h"

/* How often the records are looked through: a pause is made at most this
 * late. */
#define SCAN_INTERVAL_MS 500

static pthread_t thread;
static int started, quit;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;

static int64_t wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void log_pause(const char *id, const char *how, int rc, const char *why)
{
	cJSON *line = cJSON_CreateObject();

	cJSON_AddStringToObject(line, "msg", rc ? "e2b autoPause failed" : "e2b autoPause");
	cJSON_AddStringToObject(line, "sandbox", id);
	cJSON_AddStringToObject(line, "pause", how);
	if (rc) {
		cJSON_AddStringToObject(line, "error", hangar_error_name(rc));
		cJSON_AddStringToObject(line, "detail", why[0] ? why : hangar_error_last()->message);
	}
	log_line(line);
}

/* Is the record of id due a pause now? Under the records' lock. */
static int due(const char *id, int *memory)
{
	struct e2b_record rec;
	int yes;

	if (e2b_record_get(id, &rec) != 0)
		return 0;
	yes = rec.auto_pause && rec.paused == E2B_NOT_PAUSED && rec.pause_at_us > 0 && rec.pause_at_us <= wall_us();
	*memory = rec.auto_pause_memory;
	e2b_record_dispose(&rec);
	return yes;
}

static int pause_one(const char *id, void *payload)
{
	hangar_sandbox *sb = NULL;
	struct e2b_record rec;
	char why[256] = "";
	int memory = 1, rc;
	const char *how;

	(void)payload;
	e2b_lock();
	rc = due(id, &memory);
	e2b_unlock();
	if (!rc)
		return 0;
	how = memory ? "memory" : "filesystem";
	rc = e2b_resolve(id, NULL, &sb);
	if (rc == 1)
		rc = 0;    /* suspended meanwhile: nothing is due */
	else if (rc == 0 && !memory && e2b_can_suspend(why, sizeof(why))) {
		how = "session";
		rc = e2b_session_suspend(id, sb, NULL, NULL, why, sizeof(why));
	} else if (rc == 0)
		rc = memory ? hangar_sandbox_pause(sb) : hangar_sandbox_pause_filesystem(sb);
	hangar_sandbox_unref(sb);
	log_pause(id, how, rc, why);
	e2b_lock();
	if (e2b_record_get(id, &rec) == 0) {
		if (rc == 0 && rec.paused == E2B_PAUSED_SESSION) {
			/* e2b_session_suspend() recorded it. */
		} else if (rc == 0) {
			rec.paused = memory ? E2B_PAUSED_MEMORY : E2B_PAUSED_FILESYSTEM;
			rec.pause_at_us = 0;
		} else if (rc == HANGAR_EGONE || rc == HANGAR_ENOTFOUND) {
			/* Gone: the next list forgets the record. */
			rec.pause_at_us = 0;
		} else {
			/* Tried again on the next pass, until the library's end. */
			rec.pause_at_us = wall_us() + 1000000;
		}
		e2b_record_put(id, &rec);
		e2b_record_dispose(&rec);
	}
	e2b_unlock();
	return 0;
}

static void *autopause_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!quit) {
		struct timespec at;

		pthread_mutex_unlock(&lock);
		e2b_records_walk(pause_one, NULL);
		pthread_mutex_lock(&lock);
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_nsec += SCAN_INTERVAL_MS * 1000000L;
		at.tv_sec += at.tv_nsec / 1000000000L;
		at.tv_nsec %= 1000000000L;
		while (!quit && pthread_cond_timedwait(&wake, &lock, &at) == 0)
			;
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

int e2b_autopause_start(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
	quit = 0;
	if (pthread_create(&thread, NULL, autopause_main, NULL) != 0) {
		fprintf(stderr, "hangard: cannot start the E2B autoPause thread\n");
		pthread_cond_destroy(&wake);
		return -1;
	}
	started = 1;
	return 0;
}

void e2b_autopause_stop(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&lock);
	quit = 1;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	pthread_cond_destroy(&wake);
	started = 0;
}
