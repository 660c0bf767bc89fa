/*
 * The reaper: a thread that calls hangar_ctx_reap() every
 * HANGARD_REAPER_INTERVAL_SECONDS. Every replica runs one; the store's
 * lease "reaper" decides which of them reaps, and moves to another replica
 * when its holder stops renewing it (HANGARD_REAPER_LEASE_SECONDS after its
 * last pass) or gives it up on a clean shutdown.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "hangard.h"

#define LEASE_NAME "reaper"

static pthread_t thread;
static int started;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;
static int quit;

static atomic_int leader;
static atomic_uint_least64_t passes, sessions_reaped, records_forgotten, failures;

static void log_pass(const char *msg, const hangar_reap_result *r, int rc)
{
	cJSON *line = cJSON_CreateObject();

	cJSON_AddStringToObject(line, "msg", msg);
	cJSON_AddStringToObject(line, "lease", LEASE_NAME);
	if (r) {
		sjson_add_int64(line, "sessions_reaped", r->sessions_reaped);
		sjson_add_int64(line, "records_forgotten", r->records_forgotten);
	}
	if (rc) {
		cJSON_AddStringToObject(line, "error", hangar_error_name(rc));
		cJSON_AddStringToObject(line, "detail", hangar_error_last()->message);
	}
	log_line(line);
}

static void pass(struct server *srv)
{
	hangar_reap_result r = HANGAR_REAP_RESULT_INIT;
	int rc = hangar_ctx_reap(&r, srv->ctx, LEASE_NAME, srv->cfg->reaper_lease_s);
	int was = atomic_exchange(&leader, r.leader);

	if (r.leader != was)
		log_pass(r.leader ? "reaper lease taken" : "reaper lease lost", NULL, 0);
	if (rc) {
		atomic_fetch_add(&failures, 1);
		log_pass("reaper pass failed", &r, rc);
		return;
	}
	if (!r.leader)
		return;
	atomic_fetch_add(&passes, 1);
	atomic_fetch_add(&sessions_reaped, r.sessions_reaped);
	atomic_fetch_add(&records_forgotten, r.records_forgotten);
	if (r.sessions_reaped || r.records_forgotten)
		log_pass("reaper pass", &r, 0);
}

static void *reaper_main(void *arg)
{
	struct server *srv = arg;

	pthread_mutex_lock(&lock);
	while (!quit) {
		struct timespec at;

		pthread_mutex_unlock(&lock);
		pass(srv);
		pthread_mutex_lock(&lock);
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += srv->cfg->reaper_interval_s;
		while (!quit && pthread_cond_timedwait(&wake, &lock, &at) == 0)
			;
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

int reaper_start(struct server *srv)
{
	pthread_condattr_t ca;

	if (srv->cfg->reaper_interval_s == 0)
		return 0;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
	quit = 0;
	if (pthread_create(&thread, NULL, reaper_main, srv) != 0) {
		fprintf(stderr, "hangard: cannot start the reaper\n");
		pthread_cond_destroy(&wake);
		return -1;
	}
	started = 1;
	return 0;
}

void reaper_stop(struct server *srv)
{
	int released = 0;

	if (!started)
		return;
	pthread_mutex_lock(&lock);
	quit = 1;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	pthread_cond_destroy(&wake);
	started = 0;
	/* The next replica takes over on its next pass, not after the expiry. */
	if (hangar_ctx_reap_release(srv->ctx, LEASE_NAME, &released) != 0)
		log_pass("reaper lease not released", NULL, hangar_error_last()->code);
	else if (released)
		log_pass("reaper lease released", NULL, 0);
	atomic_store(&leader, 0);
}

size_t reaper_metrics(char *buf, size_t cap)
{
	int n = snprintf(buf, cap,
			 "# HELP hangard_reaper_leader 1 while this replica holds the reaper's lease.\n"
			 "# TYPE hangard_reaper_leader gauge\nhangard_reaper_leader %d\n"
			 "# HELP hangard_reaper_passes_total Reaping passes this replica ran as the lease holder.\n"
			 "# TYPE hangard_reaper_passes_total counter\nhangard_reaper_passes_total %" PRIu64 "\n"
			 "# HELP hangard_reaper_reaped_total What those passes reaped: parked sandboxes of sessions,"
			 " records of gone sandboxes.\n"
			 "# TYPE hangard_reaper_reaped_total counter\n"
			 "hangard_reaper_reaped_total{what=\"parked\"} %" PRIu64 "\n"
			 "hangard_reaper_reaped_total{what=\"records\"} %" PRIu64 "\n"
			 "# HELP hangard_reaper_failures_total Reaper calls that failed (the store, a provider).\n"
			 "# TYPE hangard_reaper_failures_total counter\nhangard_reaper_failures_total %" PRIu64 "\n",
			 atomic_load(&leader), (uint64_t)atomic_load(&passes), (uint64_t)atomic_load(&sessions_reaped),
			 (uint64_t)atomic_load(&records_forgotten), (uint64_t)atomic_load(&failures));

	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}
