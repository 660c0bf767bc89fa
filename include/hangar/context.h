/*
 * libhangar: the library context.
 *
 * A context holds the settings (read from HANGAR_* environment variables,
 * overridable with hangar_ctx_set()), the registered providers, and the
 * optional log callback. Everything else hangs off a context.
 *
 * Settings (see libhangar(3) for the full table; the local and e2b
 * providers declare theirs, as any provider may, and hangar_ctx_new()
 * validates them with the library's own):
 *   HANGAR_DEFAULT_PROVIDER          provider for creates that name none ("local")
 *   HANGAR_STATE_DIR                 where sandbox records live
 *                                    ($XDG_STATE_HOME/hangar, else ~/.local/state/hangar)
 *   HANGAR_IMAGE_DIR                 the image store ($HANGAR_STATE_DIR/images)
 *   HANGAR_ENVD_PATH                 the hangar-envd binary local sandboxes run
 *   HANGAR_JAIL_PATH                 the hangar-jail supervisor of local sandboxes
 *   HANGAR_BWRAP_PATH                the bubblewrap binary ("bwrap" on PATH)
 *   HANGAR_LOCAL_NETWORK             "on" or "off": network inside local sandboxes ("on")
 *   HANGAR_LOCAL_FREEZER             how local sandboxes pause: "auto", "v2" or "v1"
 *                                    (a cgroup freezer), "none" (SIGSTOP) ("auto")
 *   HANGAR_LOCAL_ETC                 how a local sandbox's /etc is mounted: "auto" (an
 *                                    overlay, else binds) or "binds" ("auto")
 *   HANGAR_LOCAL_MEMORY_MB           a local sandbox's memory limit in MiB (2048)
 *   HANGAR_LOCAL_PIDS                a local sandbox's process limit (512)
 *   HANGAR_LOCAL_CPUS                a local sandbox's CPU quota in CPUs (2)
 *   HANGAR_LOCAL_DISK_MB             a local sandbox's writable file system in MiB (1024)
 *   HANGAR_LOCAL_UID_RANGE           START:COUNT host ids for local sandboxes' user
 *                                    namespaces (/etc/subuid, else 1000000000:67108864)
 *   HANGAR_LOCAL_NET_ALLOW           IPv4 ranges local sandboxes may reach although
 *                                    private ("A.B.C.D/N,..."; none)
 *   HANGAR_LOCAL_RUN_DIR             where running local sandboxes keep their sockets and
 *                                    records: "auto" (a tmpfs), "state" or a directory ("auto")
 *   HANGAR_SANDBOX_TIMEOUT_SECONDS   a new sandbox's lifetime (300; 0 = no limit)
 *   HANGAR_EXEC_TIMEOUT_SECONDS      a command's in-sandbox timeout (120; at least 1)
 *   HANGAR_REQUEST_TIMEOUT_SECONDS   one request to a sandbox or provider (60; at least 1)
 *   HANGAR_OUTPUT_LIMIT_BYTES        output kept per stream of a command (1048576)
 *   HANGAR_READ_LIMIT_BYTES          the largest file read into memory (10485760; at least 1)
 *   HANGAR_COPY_LIMIT_BYTES          the largest file hangar_sandbox_copy_out() takes (4294967296)
 *   HANGAR_COPY_TIMEOUT_SECONDS      a whole copy out of a sandbox (3600)
 *   HANGAR_TIERS                     tier -> provider names in order, JSON
 *                                    ({"fast":["e2b"]}; see hangar/tier.h)
 *   HANGAR_TIER_COOLDOWN_SECONDS     how long a full or unreachable provider is skipped (60)
 *   HANGAR_TIER_HEDGE                tier -> hedge delay in milliseconds, JSON ({})
 *   HANGAR_ENVIRONMENTS_FILE         named sandbox descriptions, JSON (see hangar/environment.h;
 *                                    $XDG_CONFIG_HOME/hangar/environments.json when it exists)
 *   HANGAR_MAX_SANDBOXES             most sandboxes the state store records, paused ones
 *                                    included; at the cap a create evicts a parked one (0: none)
 *   HANGAR_SESSION_HOT_RESUME_MINUTES how long a suspended session's sandbox stays parked
 *                                    (1440; 0: never parked; see hangar/session.h)
 *   HANGAR_SESSION_HOT_RESUME_MAX    most sandboxes parked at once (20)
 *   HANGAR_SESSION_CHECK_SECONDS     how long a woken sandbox has to answer a command (10)
 *   HANGAR_IMAGE_DIR                 the image store (images in the state directory; see
 *                                    hangar/image.h)
 *   HANGAR_IMAGE_CACHE_MB            the image store's size cap in MiB (20480)
 *   HANGAR_E2B_CA_FILE               PEM certificates the e2b provider trusts for its control
 *                                    API and envd besides the system's (none)
 */
#ifndef HANGAR_CONTEXT_H
#define HANGAR_CONTEXT_H

#include "buffer.h"
#include "common.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** hangar_ctx_new() flag: ignore the HANGAR_* environment; start from defaults. */
#define HANGAR_CTX_NO_ENV 0x1u

/**
 * Opens a context from the HANGAR_* settings.
 *
 * Every setting is validated here: a malformed value fails the call with
 * HANGAR_ECONFIG and a message that names the variable.
 *
 * @param out   receives the context; set to NULL on failure.
 * @param flags 0 or HANGAR_CTX_NO_ENV.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOMEM or HANGAR_ECONFIG.
 *
 * **Ownership:** *out is the caller's; release it with hangar_ctx_unref().
 * **Thread safety:** a context may be used from several threads at once,
 * except for the setters, which must not race with other calls on it.
 */
HANGAR_EXTERN(int) hangar_ctx_new(hangar_ctx **out, uint32_t flags);

/**
 * Takes a reference on a context.
 *
 * @return ctx.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(hangar_ctx *) hangar_ctx_ref(hangar_ctx *ctx);

/**
 * Drops a reference; the context is freed when the last one goes (sandboxes,
 * providers and processes keep their context alive).
 *
 * @param ctx the context; NULL is allowed.
 * @return NULL, so `ctx = hangar_ctx_unref(ctx);` clears the pointer.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(hangar_ctx *) hangar_ctx_unref(hangar_ctx *ctx);

/**
 * Overrides one setting, validating it as hangar_ctx_new() does.
 *
 * @param ctx   the context.
 * @param name  the setting's name, e.g. "HANGAR_EXEC_TIMEOUT_SECONDS".
 * @param value the new value; NULL restores the default.
 * @return 0, HANGAR_EINVAL (unknown name, name or value not valid UTF-8,
 *         or a provider's setting it reads only when set up, e.g.
 *         HANGAR_E2B_FLAVOR, once that provider is in use), HANGAR_ECONFIG
 *         (bad value: JSON values are parsed strictly) or HANGAR_ENOMEM.
 *
 * **Ownership:** value is copied.
 * **Thread safety:** not with concurrent calls on the same context.
 */
HANGAR_EXTERN(int) hangar_ctx_set(hangar_ctx *ctx, const char *name, const char *value);

/**
 * The effective value of one setting.
 *
 * @param out  receives the value ("" when unset); secrets are returned in
 *             clear, so never log this for a secret setting.
 * @param ctx  the context.
 * @param name the setting's name.
 * @return 0, HANGAR_EINVAL (unknown name) or HANGAR_ENOMEM.
 *
 * **Ownership:** out is the caller's; release with hangar_buf_dispose().
 * **Thread safety:** safe, except against a concurrent hangar_ctx_set().
 */
HANGAR_EXTERN(int) hangar_ctx_get(hangar_buf *out, hangar_ctx *ctx, const char *name);

/** Where a setting's effective value came from. */
typedef enum hangar_setting_source {
	HANGAR_SETTING_DEFAULT = 0,
	HANGAR_SETTING_ENVIRONMENT = 1,
	HANGAR_SETTING_EXPLICIT = 2,   /* hangar_ctx_set() */
} hangar_setting_source;

/**
 * Called once per setting by hangar_ctx_foreach_setting(). value has secrets
 * masked. Return 0 to go on, non-zero to stop (that value is returned).
 */
typedef int (*hangar_setting_fn)(const char *name, const char *value, int source, void *payload);

/**
 * Walks every setting in a fixed order, with secret values masked: the
 * library's own, then each provider's in registration order.
 *
 * @return 0, or the non-zero value fn returned.
 * **Ownership:** the strings passed to fn are valid during the call only.
 * **Thread safety:** not with a concurrent hangar_ctx_set(); fn runs on the
 * calling thread.
 */
HANGAR_EXTERN(int) hangar_ctx_foreach_setting(hangar_ctx *ctx, hangar_setting_fn fn, void *payload);

/**
 * Walks the settings of one owner, in the same order: with provider NULL the
 * library's own, else those the provider of that name declared (table
 * version 3), as `hangar config check` lists them per provider.
 *
 * @param provider a registered provider's name, or NULL.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (no such provider), or the
 *         non-zero value fn returned.
 * **Ownership:** the strings passed to fn are valid during the call only.
 * **Thread safety:** as hangar_ctx_foreach_setting().
 */
HANGAR_EXTERN(int) hangar_ctx_foreach_setting_of(hangar_ctx *ctx, const char *provider, hangar_setting_fn fn,
						 void *payload);

/** Log levels, as syslog orders them. */
typedef enum hangar_log_level {
	HANGAR_LOG_ERROR = 3,
	HANGAR_LOG_WARNING = 4,
	HANGAR_LOG_INFO = 6,
	HANGAR_LOG_DEBUG = 7,
} hangar_log_level;

/**
 * Receives the library's log lines. Called from whichever thread logs; keep
 * it short and thread-safe. Messages never contain secrets.
 */
typedef void (*hangar_log_fn)(int level, const char *message, void *payload);

/**
 * Sets (or with fn NULL, removes) the log callback. The library never prints
 * on its own.
 *
 * @param max_level the most verbose level passed on (e.g. HANGAR_LOG_INFO).
 * **Thread safety:** set it before sharing the context between threads.
 */
HANGAR_EXTERN(void) hangar_ctx_set_log(hangar_ctx *ctx, int max_level, hangar_log_fn fn, void *payload);

/* ---- audit events ---------------------------------------------------------- */

/**
 * Receives the library's audit events. name is a dotted event name, json a
 * JSON object with its details; neither ever holds a secret. Events:
 *
 *   sandbox.created        {"id","provider","tier"}
 *   sandbox.killed         {"id","provider"}
 *   sandbox.tier_fallback  {"tier","from","to","reason","http_status",
 *                           "cooldown_seconds"}; reason is "capacity",
 *                           "unavailable" (HTTP 502-504) or "unreachable"
 *   sandbox.tier_hedge     {"tier","winner","loser","delay_ms"}
 *   sandbox.hedge_discarded {"tier","provider","id","killed"}: the losing
 *                           sandbox of a hedged create, killed when it arrived
 *
 * Called on whichever thread the event happens on, possibly several at once,
 * and possibly from hangar_ctx_unref() (the last sandboxes of hedged
 * creates): keep it short and thread-safe. The strings are valid during the
 * call only.
 */
typedef void (*hangar_event_fn)(const char *name, const char *json, void *payload);

/**
 * Sets (or with fn NULL, removes) the context's event callback.
 *
 * @param ctx     the context; NULL does nothing.
 * @param fn      the callback, or NULL.
 * @param payload passed to fn.
 *
 * **Ownership:** payload stays the caller's; it must outlive the context or
 * the next call.
 * **Thread safety:** set it before sharing the context between threads.
 */
HANGAR_EXTERN(void) hangar_ctx_set_event(hangar_ctx *ctx, hangar_event_fn fn, void *payload);

/* ---- the reaper, one process at a time -------------------------------------- */

/** What one call of hangar_ctx_reap() did. */
typedef struct hangar_reap_result {
	uint32_t version;
	uint32_t size;
	int32_t leader;                /**< 1: this context holds the lease and reaped; 0: another holder does */
	uint32_t sessions_reaped;      /**< parked sandboxes destroyed, as hangar_session_reap() counts them */
	uint32_t records_forgotten;    /**< records of sandboxes their provider says are gone (expired) */
	uint32_t reserved0;
	int64_t lease_expires_us;      /**< wall clock: when this context's lease runs out unless renewed; 0 when not leader */
} hangar_reap_result;

#define HANGAR_REAP_RESULT_VERSION 1
#define HANGAR_REAP_RESULT_INIT HANGAR_STRUCT_INIT(hangar_reap_result, HANGAR_REAP_RESULT_VERSION)

/**
 * Runs one reaping pass, but only in the context that holds the state
 * store's lease named lease: several processes sharing one store (hangard
 * replicas on one PostgreSQL database) each call this periodically and one
 * of them at a time reaps.
 *
 * The lease is a row in the store with an expiry, held by this context's
 * instance name (host, process and a random part, fixed when the context
 * is opened): the call takes it when nobody holds it or its holder let it
 * run out, renews it when this context holds it, and otherwise does
 * nothing and reports leader 0. No session or advisory lock is used, so
 * it works behind a transaction-pooling proxy, and a holder that dies
 * loses the lease lease_seconds after its last renewal. The holder reaps:
 * records of sandboxes their provider reports gone (they expired or were
 * killed elsewhere) are forgotten, for every provider that has records,
 * as a full hangar_sandbox_list() would; then hangar_session_reap() runs.
 * The lease is renewed once more after the pass, so a long pass does not
 * hand it over midway.
 *
 * Call it more often than lease_seconds (a third of it is a good
 * interval); holders compare their own wall clocks, so keep lease_seconds
 * well above their skew.
 *
 * @param out           caller-initialised with HANGAR_REAP_RESULT_INIT;
 *                      filled on success, and on a failure of the pass
 *                      (leader then says whether this context held the lease).
 * @param ctx           the context.
 * @param lease         the lease's name: 1 to 64 characters of [A-Za-z0-9._-],
 *                      e.g. "reaper"; every process that shares the duty uses the same.
 * @param lease_seconds how long the lease lasts without renewal, 1 to 86400.
 * @return 0 (leader or not), HANGAR_EINVAL, HANGAR_EOS (the state store), or
 *         the failure of hangar_session_reap().
 * **Ownership:** lease is copied when it is needed.
 * **Thread safety:** safe from any thread; calls from several threads of one
 * context share its lease.
 */
HANGAR_EXTERN(int) hangar_ctx_reap(hangar_reap_result *out, hangar_ctx *ctx, const char *lease,
				   uint32_t lease_seconds);

/**
 * Gives the lease named lease up if this context holds it, so another
 * process takes the reaper's duty on its next hangar_ctx_reap() instead of
 * waiting for the lease to run out. Call it on a clean shutdown.
 *
 * @param released receives 1 when this context held the lease and gave it
 *                 up, else 0; may be NULL.
 * @return 0, HANGAR_EINVAL or HANGAR_EOS.
 * **Thread safety:** safe from any thread; a hangar_ctx_reap() running at the
 * same time may take the lease again.
 */
HANGAR_EXTERN(int) hangar_ctx_reap_release(hangar_ctx *ctx, const char *lease, int *released);

/**
 * Checks that the context's state store answers now: opens it when no call
 * has yet (creating and migrating it, as any first use does), then reads one
 * of its tables. On SQLite it also checks that the database file at its path
 * is still the one opened: a file moved, replaced or deleted under an open
 * connection goes on answering, but what is written to it is lost. Meant for
 * readiness probes; it changes nothing.
 *
 * @param ctx the context.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNAVAILABLE (the PostgreSQL server
 *         cannot be reached or refuses the credentials), HANGAR_ECONFIG
 *         (HANGAR_STORE is unusable, or the schema is newer than this
 *         library), HANGAR_EOS (the database file cannot be read or
 *         written, is not a database, or was moved, replaced or deleted).
 * **Thread safety:** safe from any thread; it waits for the connection as
 * every call on the store does.
 */
HANGAR_EXTERN(int) hangar_ctx_ping_store(hangar_ctx *ctx);


HANGAR_END_DECL

#endif
