/* The fake's state: sandboxes, templates and queued faults. */
#define _GNU_SOURCE
#include "fake-e2b.h"

/* ------------------------------------------------------ sandboxes and state */

struct sandbox *find_sandbox_locked(const char *id)
{
	for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next)
		if (strcmp(sb->id, id) == 0)
			return sb;
	return NULL;
}

struct sandbox *find_live(const char *id)
{
	struct sandbox *sb;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (sb && sb->state == SB_DEAD)
		sb = NULL;
	pthread_mutex_unlock(&g.lock);
	return sb;
}

void set_expiry_locked(struct sandbox *sb, int64_t expires)
{
	sb->expires = expires;
	pthread_cond_broadcast(&g.cond);
}

int64_t expiry_after(int64_t seconds)
{
	if (seconds < 0)
		return NEVER;
	return clock_mono_ms() + seconds * 1000;
}

int64_t expires_wall_ms(const struct sandbox *sb)
{
	if (sb->expires == NEVER)
		return NEVER;
	return wall_ms() + (sb->expires - clock_mono_ms());
}

void new_token(char *out)
{
	random_hex(out, 64);
}

/* With sb->op held. */
void sb_pause(struct sandbox *sb, int memory)
{
	if (memory)
		stop_tree(sb);
	else
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	if (!memory)
		sb->envd_pid = 0;
	sb->state = SB_PAUSED;
	sb->pause_full = memory;
	sb_log(sb, "sandbox paused (%s)", memory ? "full" : "filesystem");
	pthread_mutex_unlock(&g.lock);
}

/* With sb->op held. E2B mints a new envd token on every resume. */
int sb_resume(struct sandbox *sb)
{
	if (sb->envd_pid > 0)
		cont_tree(sb);
	else if (start_envd(sb) < 0)
		return -1;
	pthread_mutex_lock(&g.lock);
	sb->state = SB_RUNNING;
	if (!is_cube() && sb->secure)
		new_token(sb->envd_token);
	sb_log(sb, "sandbox resumed");
	pthread_mutex_unlock(&g.lock);
	return 0;
}

/* With sb->op held. */
void sb_kill(struct sandbox *sb)
{
	if (sb->envd_pid > 0)
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = 0;
	sb->envd_port = 0;
	sb->state = SB_DEAD;
	sb_log(sb, "sandbox killed");
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

void free_sandbox(struct sandbox *sb)
{
	free(sb->alias);
	cJSON_Delete(sb->metadata);
	cJSON_Delete(sb->env_vars);
	cJSON_Delete(sb->network);
	cJSON_Delete(sb->logs);
	pthread_mutex_destroy(&sb->op);
	free(sb);
}

void *reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.lock);
	while (!g.stopping) {
		int64_t now = clock_mono_ms(), next = NEVER;
		struct sandbox *due = NULL;

		for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
			if (sb->state != SB_RUNNING)
				continue;
			if (sb->expires <= now) {
				due = sb;
				break;
			}
			if (sb->expires < next)
				next = sb->expires;
		}
		if (due) {
			pthread_mutex_unlock(&g.lock);
			pthread_mutex_lock(&due->op);
			pthread_mutex_lock(&g.lock);
			if (due->state == SB_RUNNING && due->expires <= clock_mono_ms()) {
				int pause = due->auto_pause;

				sb_log(due, "sandbox timed out");
				pthread_mutex_unlock(&g.lock);
				if (pause)
					sb_pause(due, due->auto_pause_memory);
				else
					sb_kill(due);
				pthread_mutex_lock(&g.lock);
			}
			pthread_mutex_unlock(&g.lock);
			pthread_mutex_unlock(&due->op);
			pthread_mutex_lock(&g.lock);
			continue;
		}
		if (next == NEVER) {
			pthread_cond_wait(&g.cond, &g.lock);
		} else {
			struct timespec ts;

			ms_to_timespec(next, &ts);
			pthread_cond_timedwait(&g.cond, &g.lock, &ts);
		}
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

/* ---------------------------------------------------------------- templates */

struct template *add_template(const char *id, const char *alias)
{
	struct template *t = calloc(1, sizeof(*t));

	if (!t)
		abort();
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->alias = alias ? strdup(alias) : NULL;
	t->names = cJSON_CreateArray();
	t->build_logs = cJSON_CreateArray();
	t->created_ms = wall_ms();
	t->cpu = 2;
	t->mem_mb = 512;
	t->next = g.templates;
	g.templates = t;
	return t;
}

void new_template_id(char *out, size_t n)
{
	char r[40];

	if (is_cube()) {
		random_hex(r, 32);
		snprintf(out, n, "tpl-%s", r);
	} else {
		random_from(r, 20, "abcdefghijklmnopqrstuvwxyz0123456789");
		snprintf(out, n, "%s", r);
	}
}

/* "team/name:tag" → "name". */
static void strip_ref(const char *ref, char *out, size_t n)
{
	const char *slash = strrchr(ref, '/');
	const char *s = slash ? slash + 1 : ref;
	const char *colon = strchr(s, ':');
	size_t len = colon ? (size_t)(colon - s) : strlen(s);

	if (len >= n)
		len = n - 1;
	memcpy(out, s, len);
	out[len] = '\0';
}

struct template *resolve_template_locked(const char *ref)
{
	char bare[160];

	strip_ref(ref, bare, sizeof(bare));
	for (struct template *t = g.templates; t; t = t->next) {
		if (t->deleted)
			continue;
		if (strcmp(t->id, ref) == 0 || strcmp(t->id, bare) == 0 ||
		    (t->snap_id[0] && strcmp(t->snap_id, ref) == 0) ||
		    (t->alias && (strcmp(t->alias, ref) == 0 || strcmp(t->alias, bare) == 0)))
			return t;
	}
	return NULL;
}

struct template *find_template_by_build_locked(const char *build)
{
	for (struct template *t = g.templates; t; t = t->next)
		if (!t->deleted && strcmp(t->build_id, build) == 0)
			return t;
	return NULL;
}

void free_template(struct template *t)
{
	free(t->alias);
	free(t->tag);
	cJSON_Delete(t->names);
	cJSON_Delete(t->build_logs);
	cJSON_Delete(t->create_request);
	free(t);
}

void start_build_locked(struct template *t, int new_id)
{
	if (new_id)
		random_uuid(t->build_id);
	t->status = T_BUILDING;
	t->steps_left = g.build_steps;
	t->phase = 0;
	cJSON_Delete(t->build_logs);
	t->build_logs = cJSON_CreateArray();
}

/* One status poll: a build advances by one step per poll. */
void advance_build_locked(struct template *t)
{
	cJSON *e;
	char msg[128];

	if (t->status != T_BUILDING)
		return;
	if (t->steps_left > 0)
		t->steps_left--;
	snprintf(msg, sizeof(msg), "build step %d of %d", g.build_steps - t->steps_left, g.build_steps);
	if (t->steps_left == 0) {
		t->status = T_READY;
		snprintf(msg, sizeof(msg), "build finished");
	}
	e = cJSON_CreateObject();
	add_time(e, "timestamp", wall_ms());
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "level", "info");
	cJSON_AddItemToArray(t->build_logs, e);
}

/* ------------------------------------------------------------------- faults */

int take_fault(const char *route, struct fault *out)
{
	int found = 0;

	pthread_mutex_lock(&g.lock);
	for (struct fault **pp = &g.faults; *pp; pp = &(*pp)->next) {
		struct fault *f = *pp;

		if (strcmp(f->route, "any") != 0 && strcmp(f->route, route) != 0)
			continue;
		*out = *f;
		found = 1;
		if (--f->count <= 0) {
			*pp = f->next;
			free(f);
		}
		break;
	}
	pthread_mutex_unlock(&g.lock);
	return found;
}

/* The next fault of the edge for route ("exec" or "files"): only faults naming it and an envd mode. */
int take_edge_fault(const char *route, struct fault *out)
{
	int found = 0;

	pthread_mutex_lock(&g.lock);
	for (struct fault **pp = &g.faults; *pp; pp = &(*pp)->next) {
		struct fault *f = *pp;

		if (strcmp(f->route, route) != 0 || !f->envd[0])
			continue;
		*out = *f;
		found = 1;
		if (--f->count <= 0) {
			*pp = f->next;
			free(f);
		}
		break;
	}
	pthread_mutex_unlock(&g.lock);
	return found;
}

void clear_faults_locked(void)
{
	while (g.faults) {
		struct fault *f = g.faults;

		g.faults = f->next;
		free(f);
	}
}
