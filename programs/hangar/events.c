/* --events: the library's audit events as JSON lines. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static int events_fd = -1;
static pthread_mutex_t events_mu = PTHREAD_MUTEX_INITIALIZER;

/* One line per event: {"time":"...","event":NAME,"data":{...}}; NAME is a
 * plain dotted word and data already JSON, so neither needs escaping. */
static void write_event(const char *name, const char *json, void *payload)
{
	char when[40], *line = NULL;
	int64_t us;
	struct timespec ts;
	int n;

	(void)payload;
	clock_gettime(CLOCK_REALTIME, &ts);
	us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	format_time_us(when, sizeof(when), us);
	n = asprintf(&line, "{\"time\":\"%s\",\"event\":\"%s\",\"data\":%s}\n", when, name, json);
	if (n < 0)
		return;
	/* One write per line, so events from several threads never interleave. */
	pthread_mutex_lock(&events_mu);
	write_all(events_fd, line, (size_t)n);
	pthread_mutex_unlock(&events_mu);
	free(line);
}

int cli_events_install(const struct cli *cli, hangar_ctx *ctx)
{
	if (!cli->events)
		return 0;
	if (events_fd < 0) {
		if (!*cli->events) {
			events_fd = STDERR_FILENO;
		} else {
			events_fd = open(cli->events, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
			if (events_fd < 0)
				return cli_fail("cannot open %s for the events: %s", cli->events, strerror(errno));
		}
	}
	hangar_ctx_set_event(ctx, write_event, NULL);
	return 0;
}
