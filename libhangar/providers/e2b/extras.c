/*
 * The platform's own extras: native forks (E2B's cloud), resource metrics,
 * and its logs of a sandbox.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "decode.h"
#include "e2b.h"
#include "hangar/sandbox.h"

#define METRICS_MAX 1000
#define LOGS_MAX 1000
#define LOG_MESSAGE_MAX 4096

int e2b_fork(void *state, const char *id, uint32_t count, int64_t timeout_sec, hangar_sys_list *out)
{
	struct e2b *e = state;
	cJSON *body;
	struct e2b_resp r;
	char path[160];
	uint32_t i = 0;
	int rc;

	if (!(e->fl->capabilities & HANGAR_CAP_FORK))
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "e2b: the %s flavour has no native fork",
					e->fl->name);
	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	if (count < 1 || count > 100)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "e2b: a fork makes 1 to 100 sandboxes");
	if (timeout_sec <= 0 || timeout_sec > E2B_MAX_TIMEOUT)
		timeout_sec = E2B_MAX_TIMEOUT;
	body = cJSON_CreateObject();
	if (!body)
		return e2b_oom();
	cJSON_AddNumberToObject(body, "timeout", (double)timeout_sec);
	cJSON_AddNumberToObject(body, "count", count);
	snprintf(path, sizeof(path), "/sandboxes/%s/fork", id);
	rc = e2b_call(&e->api, "POST", path, body, 1, E2B_ROUTE_SANDBOX, "fork", &r);
	cJSON_Delete(body);
	if (rc == 0 && !cJSON_IsArray(r.json))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the fork answer is not an array");
	if (rc) {
		e2b_resp_free(&r);
		return rc;
	}
	for (const cJSON *x = r.json->child; x; x = x->next, i++) {
		const cJSON *sbj = cJSON_GetObjectItemCaseSensitive(x, "sandbox");
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(x, "error");
		hangar_sys_sandbox *d = i < count ? hangar_sys_list_add(out) : NULL;

		if (!d) {
			/* More forks than asked for, or no memory to describe one: nobody may keep it. */
			const char *extra = cJSON_IsObject(sbj) ? e2b_jstr(sbj, "sandboxID") : NULL;

			if (extra && e2b_valid_id(extra))
				e2b_kill_refused(e, extra);
			continue;
		}
		if (cJSON_IsObject(sbj)) {
			int a = e2b_adopt(e, sbj, timeout_sec, d);

			if (a && hangar_sys_sandbox_set_error(d, a, hangar_error_last()->message) != 0)
				hangar_sys_sandbox_set_error(d, a, "");
		} else {
			char why[256], msg[320];
			int c = e2b_decode_fork_error(err, why, sizeof(why));

			snprintf(msg, sizeof(msg), "e2b: fork %u of %s failed: %s", i, id, why);
			hangar_sys_sandbox_set_error(d, c, msg);
		}
	}
	e2b_resp_free(&r);
	return 0;
}

static int cmp_metric(const void *a, const void *b)
{
	const struct hangar_sandbox_metric *x = a, *y = b;

	return (x->timestamp_us > y->timestamp_us) - (x->timestamp_us < y->timestamp_us);
}

int e2b_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		void *payload)
{
	struct e2b *e = state;
	struct hangar_sandbox_metric *v = NULL;
	struct e2b_resp r;
	char path[160];
	int rc, n = 0, skip;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	if (e->fl->no_metrics)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "e2b: the %s flavour keeps no metrics: %s",
					e->fl->name, e->fl->no_metrics);
	snprintf(path, sizeof(path), "/sandboxes/%s/metrics", id);
	rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "metrics", &r);
	if (rc == 0 && !cJSON_IsArray(r.json))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the metrics are not an array");
	if (rc == 0) {
		/* Only the newest METRICS_MAX samples, whatever the platform sends. */
		skip = cJSON_GetArraySize(r.json) - METRICS_MAX;
		v = calloc(METRICS_MAX, sizeof(*v));
		if (!v)
			rc = e2b_oom();
		for (const cJSON *x = r.json->child; rc == 0 && x; x = x->next) {
			if (skip-- > 0)
				continue;
			if (e2b_decode_metric(x, &v[n]) < 0)
				rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a malformed metrics sample");
			n++;
		}
	}
	e2b_resp_free(&r);
	if (rc == 0 && n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_metric);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = fn(&v[i], payload);
	free(v);
	return rc;
}

struct log_line {
	struct hangar_sandbox_log_entry entry;
	int index;
};

static int cmp_log(const void *a, const void *b)
{
	const struct log_line *x = a, *y = b;

	if (x->entry.timestamp_us != y->entry.timestamp_us)
		return x->entry.timestamp_us < y->entry.timestamp_us ? -1 : 1;
	return (x->index > y->index) - (x->index < y->index);
}

int e2b_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	     void *payload)
{
	struct e2b *e = state;
	struct log_line *v = NULL;
	const cJSON *logs;
	struct e2b_resp r;
	char path[160];
	int rc, n = 0;

	if (!e2b_valid_id(id))
		return e2b_bad_id(id);
	/* The v2 route on every flavour: CubeAPI has it too. */
	snprintf(path, sizeof(path), "/v2/sandboxes/%s/logs?limit=%d", id, LOGS_MAX);
	rc = e2b_call(&e->api, "GET", path, NULL, 1, E2B_ROUTE_SANDBOX, "logs", &r);
	logs = rc == 0 ? cJSON_GetObjectItemCaseSensitive(r.json, "logs") : NULL;
	if (rc == 0 && !cJSON_IsArray(logs))
		rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: the logs answer has no list of entries");
	if (rc == 0 && !(v = calloc(LOGS_MAX, sizeof(*v))))
		rc = e2b_oom();
	for (const cJSON *x = rc == 0 ? logs->child : NULL; x && n < LOGS_MAX; x = x->next) {
		struct log_line *l = &v[n];
		int d = e2b_decode_log(x, &l->entry, LOG_MESSAGE_MAX);

		l->index = n++;
		if (d == -1) {
			rc = hangar_sys_error(HANGAR_EPROTOCOL, 0, 0, "e2b: a malformed log entry");
			break;
		}
		if (d < 0) {
			rc = e2b_oom();
			break;
		}
	}
	e2b_resp_free(&r);
	if (rc == 0 && n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_log);
	for (int i = 0; rc == 0 && i < n; i++)
		rc = fn(&v[i].entry, payload);
	for (int i = 0; i < n; i++) {
		free((char *)v[i].entry.level);
		free((char *)v[i].entry.message);
	}
	free(v);
	return rc;
}
