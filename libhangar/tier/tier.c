/*
 * Tiers: routing a create to a provider by tier, fallback past providers
 * that are full or unreachable, cooldowns, hedged creates, and the
 * introspection behind hangar_tier_foreach().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/environment.h"
#include "util/sjson.h"
#include "tier.h"
#include "core/module.h"
#include "core/providers.h"
#include "core/sysbox.h"
#include "store/store.h"

enum { T_FAST, T_ISOLATED, T_DEFAULT, T_HEAVY, T_COUNT };

static const char *const tier_names[T_COUNT] = { "fast", "isolated", "default", "heavy" };

/* A provider skipped until until_ms (monotonic), and the failure that put it there. */
struct cooldown {
	char name[40];
	int64_t until_ms;
	int code;
	struct cooldown *next;
};

/* A thread of a hedged create; joined once finished, or when the context goes. */
struct hedge_thread {
	pthread_t th;
	atomic_int finished;
	struct hedge_thread *next;
};

struct tier_state {
	pthread_mutex_t mu;
	struct cooldown *cooling;
	struct hedge_thread *threads;
};

static int tier_module_open(hangar_ctx *ctx, void *state)
{
	struct tier_state *ts = state;

	(void)ctx;
	pthread_mutex_init(&ts->mu, NULL);
	return 0;
}

/* Waits for the hedged creates still running (killing what they bring), then frees the state. */
static void tier_module_close(hangar_ctx *ctx, void *state)
{
	struct tier_state *ts = state;
	struct hedge_thread *t, *next;

	(void)ctx;
	/* The threads may still record cooldowns: join them without the lock. */
	pthread_mutex_lock(&ts->mu);
	t = ts->threads;
	ts->threads = NULL;
	pthread_mutex_unlock(&ts->mu);
	for (; t; t = next) {
		next = t->next;
		pthread_join(t->th, NULL);
		free(t);
	}
	while (ts->cooling) {
		struct cooldown *c = ts->cooling;

		ts->cooling = c->next;
		free(c);
	}
	pthread_mutex_destroy(&ts->mu);
}

const struct hmodule tier_module = { "tier", sizeof(struct tier_state), tier_module_open, tier_module_close, NULL };

static struct tier_state *tiers_of(hangar_ctx *ctx)
{
	return hctx_module(ctx, &tier_module);
}

/* Joins the hedge threads that are done, so a long-lived context does not collect them. */
static void reap_finished(struct tier_state *ts)
{
	struct hedge_thread **pp, *done = NULL;

	pthread_mutex_lock(&ts->mu);
	for (pp = &ts->threads; *pp;) {
		struct hedge_thread *t = *pp;

		if (atomic_load(&t->finished)) {
			*pp = t->next;
			t->next = done;
			done = t;
		} else {
			pp = &t->next;
		}
	}
	pthread_mutex_unlock(&ts->mu);
	while (done) {
		struct hedge_thread *t = done;

		done = t->next;
		pthread_join(t->th, NULL);
		free(t);
	}
}

/* ---- tiers and their providers -------------------------------------------------- */

static int tier_index(const char *name)
{
	if (!name)
		return T_DEFAULT;
	for (int i = 0; i < T_COUNT; i++)
		if (!strcmp(name, tier_names[i]))
			return i;
	return -1;
}

const char *tier_name_of(const char *tier)
{
	int t = tier_index(tier);

	if (t < 0) {
		herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
		     "invalid argument: opts->tier must be fast, isolated, default or heavy");
		return NULL;
	}
	return tier_names[t];
}

static int falls_back(int tier)
{
	return tier == T_FAST || tier == T_DEFAULT;
}

/* The providers a tier tries, in order: its HANGAR_TIERS list, then the
 * default provider when the tier falls back to it. */
struct plan {
	int tier;
	char **names;
	size_t n;
	int64_t hedge_ms;
};

static void plan_free(struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		free(pl->names[i]);
	free(pl->names);
	memset(pl, 0, sizeof(*pl));
}

static int plan_has(const struct plan *pl, const char *name)
{
	for (size_t i = 0; i < pl->n; i++)
		if (!strcmp(pl->names[i], name))
			return 1;
	return 0;
}

static int plan_add(struct plan *pl, const char *name)
{
	char **v;

	if (plan_has(pl, name))
		return 0;
	v = realloc(pl->names, (pl->n + 1) * sizeof(*v));
	if (!v)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	pl->names = v;
	if (!(pl->names[pl->n] = strdup(name)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	pl->n++;
	return 0;
}

static int plan_build(hangar_ctx *ctx, int tier, struct plan *pl)
{
	const char *tv = hctx_str(ctx, HS_TIERS), *hv = hctx_str(ctx, HS_TIER_HEDGE);
	cJSON *tiers = sjson_parse(tv, strlen(tv), 0, NULL, 0);
	cJSON *hedge = sjson_parse(hv, strlen(hv), 0, NULL, 0);
	const cJSON *list, *delay;
	int rc = 0;

	memset(pl, 0, sizeof(*pl));
	pl->tier = tier;
	/* Both settings were validated when they were set. */
	list = cJSON_GetObjectItemCaseSensitive(tiers, tier_names[tier]);
	for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e && rc == 0; e = e->next)
		if (cJSON_IsString(e))
			rc = plan_add(pl, e->valuestring);
	if (rc == 0 && falls_back(tier))
		rc = plan_add(pl, hctx_str(ctx, HS_DEFAULT_PROVIDER));
	delay = cJSON_GetObjectItemCaseSensitive(hedge, tier_names[tier]);
	if (cJSON_IsNumber(delay))
		pl->hedge_ms = (int64_t)delay->valuedouble;
	cJSON_Delete(tiers);
	cJSON_Delete(hedge);
	if (rc)
		plan_free(pl);
	return rc;
}

int tier_providers(hangar_ctx *ctx, const char *tier, char ***names, size_t *n)
{
	const char *t = tier_name_of(tier);
	struct plan pl;
	int rc;

	*names = NULL;
	*n = 0;
	if (!t)
		return hangar_error_last()->code;
	if ((rc = plan_build(ctx, tier_index(t), &pl)) != 0)
		return rc;
	*names = pl.names;
	*n = pl.n;
	return 0;
}

/* ---- cooldowns --------------------------------------------------------------------- */

/* How long name still cools down, in ms (0: it does not), and the code that put it there. */
static int64_t cooling_left_ms(struct tier_state *ts, const char *name, int *code)
{
	int64_t now = clock_mono_ms(), left = 0;

	pthread_mutex_lock(&ts->mu);
	for (struct cooldown **pp = &ts->cooling; *pp;) {
		struct cooldown *c = *pp;

		if (c->until_ms <= now) {
			*pp = c->next;
			free(c);
			continue;
		}
		if (!strcmp(c->name, name)) {
			left = c->until_ms - now;
			if (code)
				*code = c->code;
		}
		pp = &c->next;
	}
	pthread_mutex_unlock(&ts->mu);
	return left;
}

static void cool(struct tier_state *ts, const char *name, int64_t seconds, int code)
{
	int64_t until = clock_mono_ms() + seconds * 1000;
	struct cooldown *c;

	if (seconds <= 0)
		return;
	pthread_mutex_lock(&ts->mu);
	for (c = ts->cooling; c; c = c->next)
		if (!strcmp(c->name, name))
			break;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		snprintf(c->name, sizeof(c->name), "%s", name);
		c->next = ts->cooling;
		ts->cooling = c;
	}
	if (c && until > c->until_ms) {
		c->until_ms = until;
		c->code = code;
	}
	pthread_mutex_unlock(&ts->mu);
}

/*
 * Whether a failed create lets the tier move on, and why: "capacity" (the
 * provider is full: HANGAR_ECAPACITY, HTTP 429), "unavailable" (HTTP 502,
 * 503, 504) or "unreachable" (no connection, a connect timeout). NULL for
 * anything else, such as a rejected key (401, 403), a missing template or a
 * bad argument: those fail the create.
 */
static const char *fallback_reason(int rc, const hangar_error *e)
{
	if (rc == HANGAR_ECAPACITY || (rc == HANGAR_EUNAVAILABLE && e->http_status == 429))
		return "capacity";
	if (rc != HANGAR_EUNAVAILABLE)
		return NULL;
	switch (e->http_status) {
	case 502:
	case 503:
	case 504:
		return "unavailable";
	case 0:
		if (e->flags & HANGAR_ERROR_UNREACHABLE)
			return "unreachable";
		switch (e->os_errno) {
		case ECONNREFUSED:
		case ECONNRESET:
		case ETIMEDOUT:
		case EHOSTUNREACH:
		case ENETUNREACH:
		case EHOSTDOWN:
			return "unreachable";
		}
		return NULL;
	default:
		return NULL;
	}
}

/* After a failed create: puts the provider in cooldown when the failure is
 * one a tier moves past; returns the cooldown in seconds (0 when none). */
static int64_t note_failure(hangar_ctx *ctx, const char *provider, int rc)
{
	const hangar_error *e = hangar_error_last();
	int64_t secs, ra;

	if (!fallback_reason(rc, e))
		return 0;
	secs = hctx_int(ctx, HS_TIER_COOLDOWN);
	ra = e->retry_after_s < TIER_RETRY_AFTER_MAX_S ? e->retry_after_s : TIER_RETRY_AFTER_MAX_S;
	if (ra > secs)
		secs = ra;
	cool(tiers_of(ctx), provider, secs, rc);
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "provider %s skipped for %lld s: %s", provider, (long long)secs, e->message);
	return secs;
}

/*
 * The template an environment gives p (*out, NULL: none; *owned to free):
 * the one it names for p, else its image where p runs images, or the
 * template published from the image for p, else the one it names for "*".
 * 0, or the failure of a create that cannot go on.
 */
static int environment_template(hangar_ctx *ctx, struct hangar_provider *p, const cJSON *templates,
				const char **out, char **owned)
{
	const char *env, *image = env_image_of(templates, &env);
	uint64_t caps = p->capabilities;
	int rc;

	*owned = NULL;
	if ((*out = env_exact_template_for(templates, p->ops.name)) || !image) {
		*out = env_template_for(templates, p->ops.name);
		return 0;
	}
	if (caps & HANGAR_CAP_IMAGES) {
		*out = image;
		return 0;
	}
	if (caps & HANGAR_CAP_TEMPLATES) {
		rc = store_image_template_get(ctx, p->ops.name, image, owned, NULL);
		if (rc == HANGAR_ENOTFOUND)
			return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				    "environment %s: its image %s has no template on provider %s yet; build it with "
				    "`hangar environment publish %s` (hangar_environment_publish)",
				    env, image, p->ops.name, env);
		*out = *owned;
		return rc;
	}
	if ((*out = env_template_for(templates, p->ops.name)))
		return 0;
	return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_CONFIG,
		    "environment %s: provider %s runs no images and the environment names no template for it", env,
		    p->ops.name);
}

/* One create on p, on the calling thread, with the environment's template for p
 * (templates) when the create names none. */
static int attempt(hangar_ctx *ctx, struct hangar_provider *p, const hangar_create_opts *o,
		   const cJSON *templates, struct hangar_sys_sandbox *desc, int64_t *cool_secs)
{
	hangar_create_opts mine;
	const char *tpl = NULL;
	char *owned = NULL;
	int rc;

	*cool_secs = 0;
	if (!o->template_id && templates) {
		/* Not the provider's failure: no cooldown. */
		if ((rc = environment_template(ctx, p, templates, &tpl, &owned)) != 0)
			return rc;
		if (tpl) {
			mine = *o;
			mine.template_id = tpl;
			o = &mine;
		}
	}
	rc = PROVIDER_CALL(p, "create", create, o, desc);
	free(owned);

	if (rc == 0)
		return 0;
	sysbox_clear(desc);
	*cool_secs = note_failure(ctx, p->ops.name, rc);
	return rc;
}

/* ---- events ------------------------------------------------------------------------ */

static void event_fallback(hangar_ctx *ctx, const char *tier, const char *from, const char *to, int rc,
			   const hangar_error *e, int64_t cool_secs)
{
	cJSON *o;

	if (!hevent_wanted(ctx))
		return;
	o = cJSON_CreateObject();
	if (!o)
		return;
	cJSON_AddStringToObject(o, "tier", tier);
	cJSON_AddStringToObject(o, "from", from);
	cJSON_AddStringToObject(o, "to", to);
	cJSON_AddStringToObject(o, "reason", fallback_reason(rc, e));
	cJSON_AddNumberToObject(o, "http_status", e->http_status);
	cJSON_AddNumberToObject(o, "cooldown_seconds", (double)cool_secs);
	/* What the provider did about the failure (e.g. killed what an unanswered create made). */
	if (e->provider_code && *e->provider_code)
		cJSON_AddStringToObject(o, "provider_code", e->provider_code);
	cJSON_AddStringToObject(o, "message", e->message);
	hevent(ctx, "sandbox.tier_fallback", o);
}

/* ---- hedged creates -------------------------------------------------------------------- */

struct hedge_run {
	struct hangar_provider *p;
	int started, done, abandoned;
	int rc;
	int64_t cool_secs;
	hangar_sys_saved_error err;
	struct hangar_sys_sandbox desc;
};

/* Shared by the caller and both threads; the last to let go frees it. */
struct hedge {
	atomic_int refs;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	hangar_ctx *ctx;                 /* not referenced: the context joins the threads */
	const char *tier;                /* static */
	hangar_create_opts o;            /* a deep copy: the caller's may be gone */
	char *template_id;
	char **env;
	cJSON *templates;                /* a copy of the environment's, or NULL */
	struct hedge_run run[2];
};

struct hedge_start {
	struct hedge *h;
	int i;
	struct hedge_thread *t;
};

static void hedge_put(struct hedge *h)
{
	if (atomic_fetch_sub(&h->refs, 1) != 1)
		return;
	for (int i = 0; i < 2; i++)
		sysbox_clear(&h->run[i].desc);
	for (char **e = h->env; e && *e; e++)
		free(*e);
	free(h->env);
	free(h->template_id);
	cJSON_Delete(h->templates);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

static struct hedge *hedge_new(hangar_ctx *ctx, const char *tier, const hangar_create_opts *o,
			       const cJSON *templates)
{
	struct hedge *h = calloc(1, sizeof(*h));
	pthread_condattr_t ca;
	size_t n = 0;

	if (!h)
		return NULL;
	atomic_init(&h->refs, 1);
	pthread_mutex_init(&h->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	h->ctx = ctx;
	h->tier = tier;
	h->o = *o;
	/* Only what providers read; the names were used already. */
	h->o.provider = NULL;
	h->o.tier = tier;
	h->o.environment = NULL;
	if (templates && !(h->templates = cJSON_Duplicate(templates, 1)))
		goto fail;
	if (o->template_id && !(h->template_id = strdup(o->template_id)))
		goto fail;
	h->o.template_id = h->template_id;
	for (const char *const *e = o->env; e && *e; e++)
		n++;
	if (o->env) {
		if (!(h->env = calloc(n + 1, sizeof(*h->env))))
			goto fail;
		for (size_t i = 0; i < n; i++)
			if (!(h->env[i] = strdup(o->env[i])))
				goto fail;
	}
	h->o.env = (const char *const *)h->env;
	return h;
fail:
	hedge_put(h);
	return NULL;
}

/* The sandbox of a run nobody wants any more: kill it, and say so. */
static void discard(struct hedge *h, struct hedge_run *r)
{
	int rc = PROVIDER_CALL(r->p, "kill", kill, r->desc.id);

	if (rc)
		hangar_sys_log(h->ctx, HANGAR_LOG_WARNING, "hedged create: cannot kill the extra sandbox %s on %s: %s",
		     r->desc.id, r->p->ops.name, hangar_error_last()->message);
	if (hevent_wanted(h->ctx)) {
		cJSON *o = cJSON_CreateObject();

		if (o) {
			cJSON_AddStringToObject(o, "tier", h->tier);
			cJSON_AddStringToObject(o, "provider", r->p->ops.name);
			cJSON_AddStringToObject(o, "id", r->desc.id);
			cJSON_AddBoolToObject(o, "killed", rc == 0);
		}
		hevent(h->ctx, "sandbox.hedge_discarded", o);
	}
	sysbox_clear(&r->desc);
}

static void *hedge_main(void *arg)
{
	struct hedge_start *s = arg;
	struct hedge *h = s->h;
	struct hedge_run *r = &h->run[s->i];
	struct hedge_thread *t = s->t;
	struct hangar_sys_sandbox desc = { .state = HANGAR_SANDBOX_RUNNING };
	int64_t cool_secs;
	int rc, abandoned;

	free(s);
	rc = attempt(h->ctx, r->p, &h->o, h->templates, &desc, &cool_secs);
	if (rc == 0 && !desc.id) {
		/* Nothing to keep or kill; the caller's checks would refuse it too. */
		sysbox_clear(&desc);
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s described a sandbox without an id",
			  r->p->ops.name);
	}
	pthread_mutex_lock(&h->mu);
	r->rc = rc;
	r->cool_secs = cool_secs;
	hangar_sys_error_save(&r->err);
	r->desc = desc;
	r->done = 1;
	abandoned = r->abandoned;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->mu);
	if (abandoned && rc == 0)
		discard(h, r);
	hedge_put(h);
	atomic_store(&t->finished, 1);
	return NULL;
}

static int hedge_start(struct hedge *h, int i, struct hangar_provider *p)
{
	struct tier_state *ts = tiers_of(h->ctx);
	struct hedge_start *s = calloc(1, sizeof(*s));
	struct hedge_thread *t = calloc(1, sizeof(*t));
	int e;

	if (!s || !t) {
		free(s);
		free(t);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	h->run[i].p = p;
	h->run[i].started = 1;
	s->h = h;
	s->i = i;
	s->t = t;
	atomic_init(&t->finished, 0);
	atomic_fetch_add(&h->refs, 1);
	pthread_mutex_lock(&ts->mu);
	e = pthread_create(&t->th, NULL, hedge_main, s);
	if (e == 0) {
		t->next = ts->threads;
		ts->threads = t;
	}
	pthread_mutex_unlock(&ts->mu);
	if (e) {
		h->run[i].started = 0;
		atomic_fetch_sub(&h->refs, 1);
		free(s);
		free(t);
		return herr_os(HANGAR_EOS, e, "cannot start a thread for a hedged create");
	}
	return 0;
}

/* Waits until run 0 is done or delay_ms passed; 1 when it is done. */
static int wait_first(struct hedge *h, int64_t delay_ms)
{
	struct timespec ts;
	int done;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += delay_ms / 1000;
	ts.tv_nsec += (delay_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&h->mu);
	while (!h->run[0].done)
		if (pthread_cond_timedwait(&h->cond, &h->mu, &ts) == ETIMEDOUT)
			break;
	done = h->run[0].done;
	pthread_mutex_unlock(&h->mu);
	return done;
}

static int run_ok(const struct hedge_run *r)
{
	return r->done && r->rc == 0;
}

/* A candidate provider of a create. */
struct cand {
	struct hangar_provider *p;
};

/*
 * The outcome of one step of a tier's walk, for the caller to act on: 0 with
 * *won set (index into cands) and desc filled, or the failing code with the
 * thread's last error describing it; *used is how many candidates the step
 * consumed, and a fallback event was sent for every failed one but the last.
 */
static int hedged_step(hangar_ctx *ctx, const struct plan *pl, const struct cand *c, size_t i, size_t n,
		       const hangar_create_opts *o, const cJSON *templates, struct hangar_sys_sandbox *desc,
		       size_t *won, size_t *used)
{
	const char *tier = tier_names[pl->tier];
	struct hedge *h = hedge_new(ctx, tier, o, templates);
	struct hedge_run *a, *b, *w = NULL, *l = NULL;
	int kill_loser = 0, a_done, rc;

	if (!h)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	reap_finished(tiers_of(ctx));
	a = &h->run[0];
	b = &h->run[1];
	if ((rc = hedge_start(h, 0, c[i].p)) != 0) {
		hedge_put(h);
		return rc;
	}
	*used = 1;
	if (!wait_first(h, pl->hedge_ms) && hedge_start(h, 1, c[i + 1].p) == 0) {
		*used = 2;
		hangar_sys_log(ctx, HANGAR_LOG_INFO, "tier %s: %s has not answered in %lld ms; asking %s too", tier,
		     c[i].p->ops.name, (long long)pl->hedge_ms, c[i + 1].p->ops.name);
	}
	pthread_mutex_lock(&h->mu);
	for (;;) {
		if (run_ok(a)) {
			w = a;
			l = b;
		} else if (run_ok(b)) {
			w = b;
			l = a;
		}
		if (w || (a->done && (b->done || !b->started)))
			break;
		pthread_cond_wait(&h->cond, &h->mu);
	}
	if (w && l->started) {
		if (!l->done)
			l->abandoned = 1;          /* its thread kills what it brings */
		else if (l->rc == 0)
			kill_loser = 1;
	}
	/* A run seen done here is not written again by its thread. */
	a_done = a->done;
	pthread_mutex_unlock(&h->mu);

	if (w) {
		*won = i + (size_t)(w == b);
		*desc = w->desc;
		memset(&w->desc, 0, sizeof(w->desc));
		if (w == b && a_done) {
			hangar_sys_error_restore(&a->err);
			if (fallback_reason(a->rc, hangar_error_last()))
				event_fallback(ctx, tier, c[i].p->ops.name, c[i + 1].p->ops.name, a->rc,
					       hangar_error_last(), a->cool_secs);
		}
		if (l->started && hevent_wanted(ctx)) {
			cJSON *ev = cJSON_CreateObject();

			if (ev) {
				cJSON_AddStringToObject(ev, "tier", tier);
				cJSON_AddStringToObject(ev, "winner", w->p->ops.name);
				cJSON_AddStringToObject(ev, "loser", l->p->ops.name);
				cJSON_AddNumberToObject(ev, "delay_ms", (double)pl->hedge_ms);
			}
			hevent(ctx, "sandbox.tier_hedge", ev);
		}
		if (kill_loser)
			discard(h, l);
		hedge_put(h);
		return 0;
	}
	/* Every run failed: report them in order, as a sequential walk would. */
	hangar_sys_error_restore(&a->err);
	rc = a->rc;
	if (b->started && fallback_reason(rc, hangar_error_last())) {
		event_fallback(ctx, tier, c[i].p->ops.name, c[i + 1].p->ops.name, rc, hangar_error_last(),
			       a->cool_secs);
		hangar_sys_error_restore(&b->err);
		rc = b->rc;
		if (i + 2 < n && fallback_reason(rc, hangar_error_last()))
			event_fallback(ctx, tier, c[i + 1].p->ops.name, c[i + 2].p->ops.name, rc,
				       hangar_error_last(), b->cool_secs);
	} else if (!b->started && i + 1 < n && fallback_reason(rc, hangar_error_last())) {
		event_fallback(ctx, tier, c[i].p->ops.name, c[i + 1].p->ops.name, rc, hangar_error_last(),
			       a->cool_secs);
	}
	hedge_put(h);
	return rc;
}

/* ---- picking ----------------------------------------------------------------------------- */

static int isolated_allows(struct hangar_provider *p)
{
	return (provider_caps(p) & HANGAR_CAP_KERNEL_ISOLATION) != 0;
}

static int refuse_isolated(struct hangar_provider *p)
{
	return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_CONFIG,
		    "provider %s has no kernel boundary (HANGAR_CAP_KERNEL_ISOLATION) and may not serve the isolated "
		    "tier; list only such providers for it in HANGAR_TIERS",
		    p->ops.name);
}

/* A create that names its provider: that provider, without fallback. */
static int create_named(hangar_ctx *ctx, int tier, const hangar_create_opts *o, const cJSON *templates,
			struct hangar_provider **out_p, struct hangar_sys_sandbox *desc)
{
	struct hangar_provider *p;
	int64_t cool_secs;
	int rc;

	if (tier == T_ISOLATED) {
		struct plan pl;
		int listed;

		if ((rc = plan_build(ctx, tier, &pl)) != 0)
			return rc;
		listed = plan_has(&pl, o->provider);
		plan_free(&pl);
		if (!listed)
			return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_CONFIG,
				    "an isolated create only runs on a provider listed for the isolated tier in "
				    "HANGAR_TIERS; %s is not",
				    o->provider);
	}
	p = provider_get(ctx, o->provider);
	if (!p)
		return hangar_error_last()->code;
	if (tier == T_ISOLATED && !isolated_allows(p))
		return refuse_isolated(p);
	rc = attempt(ctx, p, o, templates, desc, &cool_secs);
	if (rc == 0)
		*out_p = p;
	return rc;
}

/* No provider of the tier can be asked: say why, as precisely as possible. */
static int none_usable(const struct plan *pl, const char *cooling, int64_t cooling_ms,
		       int cooling_code, struct hangar_provider *refused, const hangar_sys_saved_error *unloaded,
		       const char *unloaded_name)
{
	const char *tier = tier_names[pl->tier];

	/* As hangar_sandbox_create() documents: no room anywhere right now,
	 * whatever put each provider out (it is in the message). */
	if (cooling)
		return herr(HANGAR_ECAPACITY, HANGAR_ERRCAT_PROVIDER,
			    "tier %s: every provider is full or unreachable and cooling down (%s, after %s, for "
			    "%lld s more)",
			    tier, cooling, hangar_error_name(cooling_code), (long long)((cooling_ms + 999) / 1000));
	if (refused)
		return refuse_isolated(refused);
	if (pl->n == 0)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_TIERS lists no provider for tier %s", tier);
	/* A tier that falls back ends on the default provider: its own error, as
	 * a create without tiers reported it. */
	if (falls_back(pl->tier))
		return hangar_sys_error_restore(unloaded);
	return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_TIERS: no provider of tier %s can be used (%s: %s)",
		    tier, unloaded_name, unloaded->message);
}

int tier_create(hangar_ctx *ctx, const hangar_create_opts *o, const cJSON *templates,
		struct hangar_provider **out_p, struct hangar_sys_sandbox *desc)
{
	int tier = tier_index(o->tier);
	hangar_sys_saved_error unloaded = { 0 };
	const char *cooling = NULL, *unloaded_name = NULL;
	struct hangar_provider *refused = NULL;
	int64_t cooling_ms = 0;
	int cooling_code = HANGAR_EUNAVAILABLE, rc;
	struct cand *c;
	struct plan pl;
	size_t n = 0;

	*out_p = NULL;
	if (tier < 0)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: opts->tier must be fast, isolated, default or heavy");
	if (o->provider)
		return create_named(ctx, tier, o, templates, out_p, desc);
	if ((rc = plan_build(ctx, tier, &pl)) != 0)
		return rc;
	c = calloc(pl.n ? pl.n : 1, sizeof(*c));
	if (!c) {
		plan_free(&pl);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	/* The providers that can be asked now: loaded, allowed, not cooling down. */
	for (size_t k = 0; k < pl.n; k++) {
		struct hangar_provider *p = provider_get(ctx, pl.names[k]);
		int64_t left;
		int code = HANGAR_EUNAVAILABLE;

		if (!p) {
			hangar_sys_log(ctx, HANGAR_LOG_DEBUG, "tier %s: %s", tier_names[tier], hangar_error_last()->message);
			hangar_sys_error_save(&unloaded);
			unloaded_name = pl.names[k];
			continue;
		}
		if (tier == T_ISOLATED && !isolated_allows(p)) {
			hangar_sys_log(ctx, HANGAR_LOG_WARNING, "tier isolated: provider %s has no kernel boundary; skipped",
			     p->ops.name);
			if (!refused)
				refused = p;
			continue;
		}
		if ((left = cooling_left_ms(tiers_of(ctx), p->ops.name, &code)) > 0) {
			if (!cooling) {
				cooling = p->ops.name;
				cooling_ms = left;
				cooling_code = code;
			}
			continue;
		}
		c[n++].p = p;
	}
	if (n == 0) {
		rc = none_usable(&pl, cooling, cooling_ms, cooling_code, refused, &unloaded, unloaded_name);
		goto out;
	}
	for (size_t i = 0; i < n;) {
		int hedged = pl.hedge_ms > 0 && i + 1 < n;
		size_t used = 1, won = i;
		int64_t cool_secs = 0;

		if (hedged)
			rc = hedged_step(ctx, &pl, c, i, n, o, templates, desc, &won, &used);
		else
			rc = attempt(ctx, c[i].p, o, templates, desc, &cool_secs);
		if (rc == 0) {
			*out_p = c[won].p;
			break;
		}
		if (!fallback_reason(rc, hangar_error_last()))
			break;               /* any other failure fails the create */
		i += used;
		if (i >= n) {
			if (n > 1)
				herr_prefix("tier %s: no provider could create the sandbox; the last said",
					    tier_names[tier]);
			break;
		}
		if (!hedged)                 /* a hedged step reports its own */
			event_fallback(ctx, tier_names[tier], c[i - 1].p->ops.name, c[i].p->ops.name, rc,
				       hangar_error_last(), cool_secs);
	}
out:
	free(c);
	plan_free(&pl);
	return rc;
}

/* ---- introspection -------------------------------------------------------------------------- */

int hangar_tier_foreach(hangar_ctx *ctx, hangar_tier_fn fn, void *payload)
{
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	for (int t = 0; t < T_COUNT; t++) {
		hangar_tier_info info = { HANGAR_TIER_INFO_VERSION, (uint32_t)sizeof(info), tier_names[t], 0, 0, NULL,
					  NULL, NULL, 0 };
		int64_t *until = NULL, now_us = clock_wall_us();
		int32_t *loaded = NULL;
		struct plan pl;
		int rc;

		if ((rc = plan_build(ctx, t, &pl)) != 0)
			return rc;
		if (pl.n) {
			until = calloc(pl.n, sizeof(*until));
			loaded = calloc(pl.n, sizeof(*loaded));
			if (!until || !loaded) {
				free(until);
				free(loaded);
				plan_free(&pl);
				return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			}
		}
		for (size_t k = 0; k < pl.n; k++) {
			struct hangar_provider *p = provider_get(ctx, pl.names[k]);
			int64_t left = cooling_left_ms(tiers_of(ctx), pl.names[k], NULL);

			loaded[k] = p && (t != T_ISOLATED || isolated_allows(p));
			until[k] = left > 0 ? now_us + left * 1000 : 0;
		}
		info.n_providers = (uint32_t)pl.n;
		info.falls_back = falls_back(t);
		info.providers = (const char *const *)pl.names;
		info.cooling_until_us = until;
		info.loaded = loaded;
		info.hedge_ms = pl.hedge_ms;
		herr_clear();
		rc = fn(&info, payload);
		free(until);
		free(loaded);
		plan_free(&pl);
		if (rc)
			return rc;
	}
	return 0;
}
