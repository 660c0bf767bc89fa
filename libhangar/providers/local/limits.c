/*
 * What a local sandbox's limits say, read by usage.c: metrics, the limits
 * it has hit as log entries, and its OOM kills.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "util/clock.h"
#include "local.h"
#include "usage.h"

int local_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		  void *payload)
{
	struct local *l = state;
	hangar_sandbox_metric m;
	char dir[DIR_MAX];
	int pid, r = local_find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	r = usage_metric(dir, id, pid, &m);
	if (r < 0)
		return hangar_sys_error(r == -ENOENT ? HANGAR_EGONE : HANGAR_EOS, 0, -r,
					"local sandbox %s: cannot read its limits", id);
	return fn(&m, payload);
}

/* The limits the sandbox has hit so far (the OOM killer, refused forks, a full disk), one entry each. */
int local_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	       void *payload)
{
	struct local *l = state;
	char dir[DIR_MAX], msgs[USAGE_EVENTS][USAGE_MSG_MAX];
	const char *levels[USAGE_EVENTS];
	int pid, n, r = local_find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	n = usage_events(dir, id, pid, msgs, levels);
	if (n < 0)
		return hangar_sys_error(n == -ENOENT ? HANGAR_EGONE : HANGAR_EOS, 0, -n,
					"local sandbox %s: cannot read its limits", id);
	for (int i = 0; i < n; i++) {
		hangar_sandbox_log_entry e = { HANGAR_SANDBOX_LOG_ENTRY_VERSION, sizeof(e), clock_wall_us(), levels[i],
					       msgs[i] };

		r = fn(&e, payload);
		if (r)
			return r;
	}
	return 0;
}

int local_oom_kills(void *state, const char *id, uint64_t *out)
{
	struct local *l = state;
	char dir[DIR_MAX];
	long long n;
	int pid = 0, r = local_find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	n = usage_oom_kills(dir, id);
	if (n < 0)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "local sandbox %s has no memory cgroup", id);
	*out = (uint64_t)n;
	return 0;
}
