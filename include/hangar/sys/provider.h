/*
 * libhangar: the provider table, for authors of provider flavours.
 *
 * A provider implements the lifecycle of its sandboxes (create, connect,
 * pause, resume, kill, timeouts, list) and says where each sandbox's envd is
 * and which credentials it takes. Commands, files and terminals then go
 * through the library's own envd client, the same for every provider.
 *
 * The table is versioned: it starts with version and size, slots are only
 * appended in groups marked "valid from version N", a NULL slot means the
 * operation is unsupported, and the library calls a newer slot only after
 * checking both the version and the pointer. Built-in providers use exactly
 * this table.
 *
 * Provider functions report failures by returning a negative HANGAR_E* code
 * after describing it with hangar_sys_error().
 */
#ifndef HANGAR_SYS_PROVIDER_H
#define HANGAR_SYS_PROVIDER_H

#include "../common.h"
#include "../buffer.h"
#include "../types.h"

HANGAR_BEGIN_DECL

struct hangar_create_opts;
struct hangar_template_build_opts;
struct hangar_template_info;
struct hangar_sandbox_metric;
struct hangar_sandbox_log_entry;

/** What a provider reports about one sandbox; filled with the setters below. */
typedef struct hangar_sys_sandbox hangar_sys_sandbox;
/** A list being filled by a provider's list(). */
typedef struct hangar_sys_list hangar_sys_list;

#define HANGAR_PROVIDER_OPS_VERSION 2

struct hangar_provider_ops {
	uint32_t version;           /**< HANGAR_PROVIDER_OPS_VERSION the table was built for */
	uint32_t size;              /**< sizeof(struct hangar_provider_ops) */
	const char *name;           /**< [a-z0-9_-]{1,32} */
	uint64_t capabilities;      /**< HANGAR_CAP_* */

	/* Valid from version 1. init, create, connect and kill are mandatory. */

	/** Sets up per-context state; may validate settings (HANGAR_ECONFIG). */
	int (*init)(void **state, hangar_ctx *ctx, void *data);
	/** Frees what init set up. */
	void (*fini)(void *state);
	/** Creates a sandbox and describes it in out (id, envd endpoint, ...). */
	int (*create)(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out);
	/**
	 * Describes an existing sandbox by id, without changing it: a paused
	 * sandbox is reported paused, never resumed. HANGAR_EGONE when unknown.
	 */
	int (*connect)(void *state, const char *id, hangar_sys_sandbox *out);
	/** Destroys a sandbox. HANGAR_EGONE when it is already gone. */
	int (*kill)(void *state, const char *id);
	/** Pauses with memory (HANGAR_CAP_PAUSE). */
	int (*pause)(void *state, const char *id);
	/** Resumes a paused sandbox and describes it again (endpoints may change). */
	int (*resume)(void *state, const char *id, hangar_sys_sandbox *out);
	/** Sets the sandbox's remaining lifetime to seconds from now (0: none). */
	int (*set_timeout)(void *state, const char *id, int64_t seconds);
	/** Adds every sandbox it knows of with hangar_sys_list_add(). */
	int (*list)(void *state, hangar_sys_list *out);

	/* Valid from version 2. Every slot is optional. */

	/** Pauses keeping only the filesystem (HANGAR_CAP_FS_PAUSE); resume cold-boots. */
	int (*pause_filesystem)(void *state, const char *id);
	/**
	 * Takes a persistent snapshot (HANGAR_CAP_SNAPSHOT), named name (may be
	 * NULL), and puts its id, usable as a template id, in out_id.
	 */
	int (*snapshot)(void *state, const char *id, const char *name, hangar_buf *out_id);
	/** Builds a template (HANGAR_CAP_TEMPLATES) and waits for it; its id goes to out_template_id. */
	int (*template_build)(void *state, const struct hangar_template_build_opts *opts, hangar_buf *out_template_id);
	/**
	 * Reports every template with fn, after fetching them all, so that a
	 * failure reports none; returns fn's non-zero value when it stops.
	 */
	int (*template_list)(void *state, int (*fn)(const struct hangar_template_info *info, void *payload),
			     void *payload);
	/**
	 * Forks a running sandbox natively (HANGAR_CAP_FORK) into count (1 to
	 * 100) new ones living timeout_sec each, adding one entry to out per
	 * fork with hangar_sys_list_add(): described like a created sandbox, or
	 * marked failed with hangar_sys_sandbox_set_error(). A fork the
	 * provider refuses to hand out is killed by it first. On a non-zero
	 * return no fork exists and out is ignored.
	 */
	int (*fork)(void *state, const char *id, uint32_t count, int64_t timeout_sec, hangar_sys_list *out);
	/**
	 * Reports the sandbox's resource samples with fn, oldest first, after
	 * reading them all, so that a failure reports none; returns fn's
	 * non-zero value when it stops.
	 */
	int (*metrics)(void *state, const char *id,
		       int (*fn)(const struct hangar_sandbox_metric *metric, void *payload), void *payload);
	/** Reports the sandbox's platform log with fn, oldest first, as metrics does. */
	int (*logs)(void *state, const char *id,
		    int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload), void *payload);
};

/** Sandbox states, as hangar_sandbox_info reports them. */
#define HANGAR_SYS_STATE_RUNNING 1
#define HANGAR_SYS_STATE_PAUSED  2

/**
 * The sandbox's id: [A-Za-z0-9_-]{1,64}. Mandatory.
 * @return 0, HANGAR_EINVAL (NULL), HANGAR_EPROTOCOL (malformed) or HANGAR_ENOMEM.
 */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_id(hangar_sys_sandbox *sb, const char *id);
/*
 * The setters below copy their arguments and return 0, HANGAR_EINVAL (a
 * missing or malformed argument) or HANGAR_ENOMEM. They are called by a
 * provider on the thread running its operation, on the sandbox description
 * it was handed.
 */

/** HANGAR_SYS_STATE_RUNNING (the default) or HANGAR_SYS_STATE_PAUSED. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_state(hangar_sys_sandbox *sb, int state);
/** The envd base URL, "http://host:port" or "https://…". */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_envd_url(hangar_sys_sandbox *sb, const char *url);
/** Reach envd through a unix socket instead; the URL's host is then ignored. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_envd_socket(hangar_sys_sandbox *sb, const char *path);
/** envd's access token (sent as X-Access-Token); kept in memory only. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_access_token(hangar_sys_sandbox *sb, const char *token);
/** One more header sent with every envd request (e.g. a traffic token). */
HANGAR_EXTERN(int) hangar_sys_sandbox_add_header(hangar_sys_sandbox *sb, const char *name, const char *value);
/** The user commands run as by default (sent as Basic auth); default "user". */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_user(hangar_sys_sandbox *sb, const char *user);
/** Template (image) name, for information. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_template(hangar_sys_sandbox *sb, const char *template_id);
/** Creation and expiry times, microseconds since the epoch (0: unknown / none). */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_times(hangar_sys_sandbox *sb, int64_t created_at_us, int64_t expires_at_us);

/**
 * Marks an entry of fork()'s list as a fork that failed, with its HANGAR_E*
 * code (negative) and why; the entry's other fields are then ignored.
 * @return 0, HANGAR_EINVAL or HANGAR_ENOMEM.
 */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_error(hangar_sys_sandbox *sb, int code, const char *message);

/** A new entry for list() or fork(), to fill with the setters above. NULL when out of memory. */
HANGAR_EXTERN(hangar_sys_sandbox *) hangar_sys_list_add(hangar_sys_list *list);

/**
 * Describes the failure a provider function is about to return, on the
 * calling thread's last error.
 *
 * @param code        the HANGAR_E* code.
 * @param http_status the HTTP status behind it, or 0.
 * @param os_errno    the errno behind it, or 0.
 * @return code, so providers can `return hangar_sys_error(...)`.
 */
HANGAR_EXTERN(int) hangar_sys_error(int code, int http_status, int os_errno, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

/**
 * Keeps a secret of a sandbox across restarts (e.g. a traffic token the
 * platform hands out only once), sealed with a key derived from
 * HANGAR_SECRET_KEY, in the state store. It is forgotten when the sandbox is
 * killed through the library.
 *
 * @param name [a-z0-9_.-]{1,64}.
 * @return 0, HANGAR_EINVAL, HANGAR_ECONFIG (HANGAR_SECRET_KEY is not set),
 *         HANGAR_EOS (the store cannot be written) or HANGAR_ENOMEM.
 * **Ownership:** value is copied. **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_sys_secret_put(hangar_ctx *ctx, const char *sandbox_id, const char *name, const char *value);

/**
 * Reads back a secret kept with hangar_sys_secret_put().
 *
 * @param out receives the value.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (none kept), HANGAR_ECONFIG
 *         (no HANGAR_SECRET_KEY), HANGAR_EREFUSED (it does not open with
 *         the current key) or HANGAR_EOS.
 * **Ownership:** out is the caller's (hangar_buf_dispose()). **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_sys_secret_get(hangar_buf *out, hangar_ctx *ctx, const char *sandbox_id, const char *name);

/**
 * A setting's effective value, for providers reading their own settings.
 *
 * @return the value, "" when unset, or NULL for an unknown name.
 * **Ownership:** borrowed, valid until the setting changes.
 */
HANGAR_EXTERN(const char *) hangar_sys_ctx_setting(hangar_ctx *ctx, const char *name);

HANGAR_END_DECL

#endif
