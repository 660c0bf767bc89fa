/* The sandbox layer's private structures. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "core/internal.h"
#include "core/providers.h"
#include "core/sysbox.h"
#include "envd/client.h"

/*
 * An immutable snapshot of what the provider last said about a sandbox, with
 * the envd endpoint built from it. Calls hold a reference for their duration,
 * so a refresh on another thread never pulls strings from under them.
 */
struct sbview {
	atomic_int refs;
	struct hangar_sys_sandbox desc;
	struct envd_endpoint ep;
};

void sbview_put(struct sbview *v);
/* The sandbox's current view, referenced: release it with sbview_put(). */
struct sbview *sandbox_current_view(struct hangar_sandbox *sb);

/* The sandbox layer's per-context state (core/module.h). */
struct hmodule;
extern const struct hmodule sandbox_module;

/*
 * Destroys one parked sandbox to make room for a create, giving why as the
 * reason: 1 when one went, 0 when none could, or a failure. The session
 * layer, which parks sandboxes, lends it when it opens (sandbox_set_evict).
 */
typedef int (*sandbox_evict_fn)(hangar_ctx *ctx, const char *why);
void sandbox_set_evict(hangar_ctx *ctx, sandbox_evict_fn fn);

struct hangar_sandbox {
	atomic_int refs;
	hangar_ctx *ctx;                 /* referenced */
	struct hangar_provider *provider;
	char *id;
	pthread_mutex_t mu;
	struct sbview *view;             /* current, referenced */
	struct sbview *info_view;        /* what the last get_info returned, referenced */
	struct sbview *endpoint_view;    /* what the last envd_endpoint returned, referenced */
	atomic_int archive_api;          /* hangar-envd's archive endpoint (checkpoint/):
					    0 not asked yet, 1 there, -1 not */
};

/*
 * Starts a request to the sandbox's envd: fills call (endpoint, deadline from
 * HANGAR_REQUEST_TIMEOUT_SECONDS, user) and returns the view it points into,
 * to release with sbview_put() after the call. NULL with HANGAR_EPAUSED when
 * the sandbox is paused.
 */
struct sbview *sandbox_begin(struct hangar_sandbox *sb, struct envd_call *call, const char *user);

/*
 * After an envd call failed: decides whether the sandbox itself died and
 * turns the error into HANGAR_EGONE if so (a dead sandbox never looks like a
 * slow command), HANGAR_EPAUSED if it was paused meanwhile, else keeps rc.
 */
int sandbox_classify_failure(struct hangar_sandbox *sb, int rc, const struct envd_status *st);

/* Asks the provider again: 1 when the sandbox is paused now, 0 when it runs, or a failure (HANGAR_EGONE). */
int sandbox_paused_now(struct hangar_sandbox *sb);
/*
 * hangar_sandbox_snapshot(), but held by this process until
 * hangar_snapshot_release() or its end (the provider's snapshot_held), so
 * that nothing is left when the process dies first, where the provider
 * can (else an ordinary snapshot). A session fork's.
 */
int sandbox_snapshot_held(hangar_buf *out_id, hangar_sandbox *sb, const char *name);
/* Asks the provider about the sandbox again (its connect) and replaces its view. */
int sandbox_refresh(struct hangar_sandbox *sb);
/*
 * For every provider the store has records for: lists it and forgets the
 * records of sandboxes it says are gone, as a full hangar_sandbox_list()
 * does. *forgotten counts them. A provider that cannot list is skipped
 * (logged); 0 or the store's failure.
 */
int sandbox_prune(hangar_ctx *ctx, uint32_t *forgotten);

/* One event of a process stream (Start or Connect), decoded. */
struct proc_event {
	/* BAD: an event of a known kind that does not decode (a protocol error) */
	enum { PROC_EVENT_OTHER, PROC_EVENT_START, PROC_EVENT_DATA, PROC_EVENT_END, PROC_EVENT_BAD } kind;
	uint32_t pid;                   /* START */
	int stream;                     /* DATA: HANGAR_STREAM_STDOUT, _STDERR or _PTY */
	unsigned char *bytes;           /* DATA: decoded output, malloc'd; NULL when empty */
	size_t len;
	int32_t exit_code;              /* END: -1 when a signal ended it */
	int sigkill;                    /* END: 1 when SIGKILL ended it (status "signal: killed") */
};

/* Decodes msg into ev (free ev->bytes after). Keepalives and unknown events are OTHER. */
void proc_event_parse(const cJSON *msg, struct proc_event *ev);

/*
 * The order a process stream must keep: at most one start, output only
 * before the end, exactly one end. Anything else is a sandbox breaking the
 * protocol, and its answer cannot be trusted to mean what it says.
 */
struct proc_order {
	int started;
	int ended;
};

/* Checks ev against the order so far: 0, or HANGAR_EPROTOCOL (reported) naming what broke it. */
int proc_order_check(struct proc_order *o, const struct proc_event *ev, const char *what);
