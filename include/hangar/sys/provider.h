/*
 * libhangar: the provider table, for authors of provider flavours.
 *
 * A provider implements the lifecycle of its sandboxes (create, connect,
 * pause, resume, kill, timeouts, list) and says where each sandbox's envd is
 * and which credentials it takes (and, on a platform that routes the
 * sandbox's ports itself, where those are). Commands, files and terminals then go
 * through the library's own envd client, the same for every provider.
 *
 * The table is versioned: it starts with version and size, slots are only
 * appended in groups marked "valid from version N", a NULL slot means the
 * operation is unsupported, and the library calls a newer slot only after
 * checking both the version and the pointer. Built-in providers use exactly
 * this table.
 *
 * Version 3 lets a provider own its settings and capabilities: it declares
 * its HANGAR_* settings in the table (struct hangar_setting_def), the
 * context validates them when it opens or when the provider registers, and
 * the provider reads them back through the typed getters below, so each
 * setting has one default. It reports its capabilities once set up
 * (get_capabilities), so one table can serve several flavours of a platform.
 * Tables of versions 1 and 2 keep working unchanged.
 *
 * Version 4 adds exposing a sandbox's ports to the caller (expose_port) and
 * the OOM killer's count (oom_kills), by which a command killed for memory
 * is reported as such.
 *
 * Version 5 adds deleting a snapshot (snapshot_delete). Version 6 adds
 * releasing one, so that it goes with the last sandbox made from it
 * (snapshot_release), and listing them (snapshot_list). Version 7 adds
 * taking a snapshot held by the calling process (snapshot_held), so that a
 * session fork killed before it releases its snapshot leaves none. The setters of a
 * sandbox's port routing (hangar_sys_sandbox_set_port_url() and
 * hangar_sys_sandbox_add_port_header()) need no new slot: a provider of any
 * version may call them wherever it fills a hangar_sys_sandbox.
 *
 * Provider functions report failures by returning a negative HANGAR_E* code
 * after describing it with hangar_sys_error(); what control flow needs (a
 * Retry-After, an unreachable peer) goes in fields, through
 * hangar_sys_error_retry_after() and hangar_sys_error_flags(). The library
 * clears the thread's last error before every provider call.
 */
#ifndef HANGAR_SYS_PROVIDER_H
#define HANGAR_SYS_PROVIDER_H

#include "../common.h"
#include "../buffer.h"
#include "../errors.h"
#include "../sandbox.h"
#include "../types.h"

HANGAR_BEGIN_DECL

struct hangar_create_opts;
struct hangar_template_build_opts;
struct hangar_template_info;
struct hangar_snapshot_info;
struct hangar_sandbox_metric;
struct hangar_sandbox_log_entry;

/** What a provider reports about one sandbox; filled with the setters below. */
typedef struct hangar_sys_sandbox hangar_sys_sandbox;
/** A list being filled by a provider's list(). */
typedef struct hangar_sys_list hangar_sys_list;

#define HANGAR_PROVIDER_OPS_VERSION 7

/* Types of a provider's setting (struct hangar_setting_def.type). */
#define HANGAR_SETTING_TYPE_STRING 1 /**< any non-empty text */
#define HANGAR_SETTING_TYPE_INT    2 /**< a whole number from min to max */
#define HANGAR_SETTING_TYPE_BOOL   3 /**< "on", "true", "1" or "off", "false", "0" */
#define HANGAR_SETTING_TYPE_JSON   4 /**< a JSON object */
#define HANGAR_SETTING_TYPE_PATH   5 /**< an absolute path */
#define HANGAR_SETTING_TYPE_URL    6 /**< an http:// or https:// URL */
#define HANGAR_SETTING_TYPE_HOST   7 /**< a domain name (or host:port) */
#define HANGAR_SETTING_TYPE_CHOICE 8 /**< one of choices, "a|b|c" */

/** struct hangar_setting_def.flags: the value is a secret; never shown. */
#define HANGAR_SETTING_SECRET   0x1u
/** The setting may be left unset (""), whatever its type. */
#define HANGAR_SETTING_OPTIONAL 0x2u
/** Read once when the provider is set up: changing it afterwards is refused. */
#define HANGAR_SETTING_FIXED    0x4u

/**
 * One HANGAR_* setting a provider owns (table version 3). The context reads
 * it from the environment, checks it against its type and validate, and
 * fails with HANGAR_ECONFIG naming it when the value is wrong.
 */
struct hangar_setting_def {
	const char *name;           /**< HANGAR_[A-Z0-9_]{1,57}; unique in a context */
	uint32_t type;              /**< HANGAR_SETTING_TYPE_* */
	uint32_t flags;             /**< HANGAR_SETTING_* */
	const char *default_value;  /**< the one default; NULL or "" only for an optional setting */
	int64_t min, max;           /**< HANGAR_SETTING_TYPE_INT: the bounds */
	const char *choices;        /**< HANGAR_SETTING_TYPE_CHOICE: "a|b|c" */
	const char *description;    /**< one line for hangar config check, or NULL */
	/**
	 * Checks a value the type accepted (NULL: none). Returns 0, or a
	 * negative code after describing the fault with hangar_sys_error()
	 * naming the setting; any failure becomes HANGAR_ECONFIG.
	 */
	int (*validate)(const char *name, const char *value);
};

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

	/* Valid from version 3. Every slot is optional. */

	/**
	 * The settings the provider owns, ended by an entry whose name is
	 * NULL (NULL: none). Validated when the provider is registered; the
	 * array and its strings must outlive every context it is registered on.
	 */
	const struct hangar_setting_def *settings;
	/**
	 * The provider's HANGAR_CAP_* once init has run (NULL: capabilities
	 * above). Asked once, right after init, so a table serving several
	 * flavours reports the one its settings chose.
	 */
	uint64_t (*get_capabilities)(void *state);

	/* Valid from version 4. Every slot is optional. */

	/**
	 * Makes TCP port (1 to 65535) of the sandbox reachable by the caller
	 * and puts where to connect in out_addr: "host:port", or a host name
	 * the platform routes to the port (e.g. over HTTPS). Exposing a port
	 * again gives the same address.
	 */
	int (*expose_port)(void *state, const char *id, uint32_t port, hangar_buf *out_addr);
	/**
	 * How many processes the OOM killer has killed in the sandbox so far,
	 * in out (a counter that only grows). Read before and after each
	 * command; HANGAR_EUNSUPPORTED when the sandbox has no such counter.
	 */
	int (*oom_kills)(void *state, const char *id, uint64_t *out);

	/* Valid from version 5. Every slot is optional. */

	/**
	 * Deletes a snapshot snapshot took (HANGAR_CAP_SNAPSHOT). HANGAR_EGONE
	 * when there is no such snapshot; HANGAR_EBUSY while a sandbox made
	 * from it runs, where the provider keeps it for them.
	 */
	int (*snapshot_delete)(void *state, const char *snapshot_id);

	/* Valid from version 6. Every slot is optional. */

	/**
	 * Releases a snapshot snapshot took (HANGAR_CAP_SNAPSHOT): deletes it
	 * once no sandbox made from it runs, at once when none does, and
	 * whichever way the last one ends. HANGAR_EGONE when there is no such
	 * snapshot.
	 */
	int (*snapshot_release)(void *state, const char *snapshot_id);
	/**
	 * Reports every snapshot the provider keeps with fn (HANGAR_CAP_SNAPSHOT),
	 * after reading them all, so that a failure reports none; returns
	 * fn's non-zero value when it stops.
	 */
	int (*snapshot_list)(void *state, int (*fn)(const struct hangar_snapshot_info *info, void *payload),
			     void *payload);

	/* Valid from version 7. Every slot is optional. */

	/**
	 * As snapshot, but the snapshot is released from the start and held
	 * by the calling process: it goes with the last sandbox made from it
	 * once the holder lets go, which snapshot_release does, and so does
	 * the end of the process however it ends (a session fork's snapshot,
	 * which nothing must outlive). Without this slot the library takes
	 * such a snapshot with snapshot and releases it afterwards.
	 */
	int (*snapshot_held)(void *state, const char *id, const char *name, hangar_buf *out_id);
};

/** Older names of HANGAR_SANDBOX_RUNNING and HANGAR_SANDBOX_PAUSED (hangar/sandbox.h), kept for sources that use them. */
#define HANGAR_SYS_STATE_RUNNING HANGAR_SANDBOX_RUNNING
#define HANGAR_SYS_STATE_PAUSED  HANGAR_SANDBOX_PAUSED

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

/** HANGAR_SANDBOX_RUNNING (the default) or HANGAR_SANDBOX_PAUSED, a hangar_sandbox_state. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_state(hangar_sys_sandbox *sb, int state);
/** The envd base URL, "http://host:port" or "https://…". */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_envd_url(hangar_sys_sandbox *sb, const char *url);
/** Reach envd through a unix socket instead; the URL's host is then ignored. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_envd_socket(hangar_sys_sandbox *sb, const char *path);
/**
 * An absolute path to PEM certificates trusted for an https envd URL on top of
 * the system's (a platform with a private CA). Read on every request, so a
 * file that becomes unreadable fails the request that needs it.
 */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_envd_ca_file(hangar_sys_sandbox *sb, const char *path);
/** envd's access token (sent as X-Access-Token); kept in memory only. */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_access_token(hangar_sys_sandbox *sb, const char *token);
/** One more header sent with every envd request (e.g. a traffic token). */
HANGAR_EXTERN(int) hangar_sys_sandbox_add_header(hangar_sys_sandbox *sb, const char *name, const char *value);
/**
 * Where the sandbox's TCP ports answer when the platform routes them itself,
 * for hangar_sandbox_port_endpoint(): an http(s) URL in which every {port}
 * stands for the port ("https://{port}-ID.example.com"). Without one, ports
 * are the provider's expose_port's.
 */
HANGAR_EXTERN(int) hangar_sys_sandbox_set_port_url(hangar_sys_sandbox *sb, const char *url);
/** One more header sent with every request to a port of the sandbox; {port} in value stands for the port. */
HANGAR_EXTERN(int) hangar_sys_sandbox_add_port_header(hangar_sys_sandbox *sb, const char *name, const char *value);
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
 * Records on the calling thread's last error how long the other side asked
 * to be left alone (an HTTP Retry-After header), after hangar_sys_error().
 * Tiers cool the provider down for at least that long (bounded; see
 * hangar/tier.h). Never derive it from a message or a body.
 *
 * @param seconds 0 (none) to 86400; larger values are cut to 86400.
 * **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_retry_after(int32_t seconds);

/**
 * Adds HANGAR_ERROR_* bits (e.g. HANGAR_ERROR_UNREACHABLE) to the calling
 * thread's last error, after hangar_sys_error().
 * **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_flags(uint32_t flags);

/**
 * Sets the kind of fault (a hangar_error_category) on the calling thread's
 * last error, after hangar_sys_error(), which reports
 * HANGAR_ERRCAT_PROVIDER (HANGAR_ERRCAT_OS with an errno): e.g.
 * HANGAR_ERRCAT_NET when the connection itself failed.
 * **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_category(int32_t category);

/**
 * Sets the platform's own short code for the fault (e.g. a Connect code
 * "not_found", or an API's error name) on the calling thread's last error,
 * after hangar_sys_error(). Codes are cut to 63 bytes; NULL clears it.
 * **Ownership:** code is copied. **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_provider_code(const char *code);

/**
 * Puts context before the calling thread's last error message ("killing
 * abc: <message>"), keeping its code and fields; for a failure passed up
 * from a deeper call.
 * **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_prefix(const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
	__attribute__((format(printf, 1, 2)))
#endif
	;

/**
 * A copy of the calling thread's last error, kept across calls that may
 * overwrite it (clean-up on an error path). The layout is fixed: messages
 * longer than message holds are cut, as the library's own are.
 */
typedef struct hangar_sys_saved_error {
	hangar_error error;         /**< its strings point into the buffers below once restored */
	char message[1024];
	char provider_code[64];
} hangar_sys_saved_error;

/**
 * Copies the calling thread's last error into out.
 * **Ownership:** out is the caller's. **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(void) hangar_sys_error_save(hangar_sys_saved_error *out);

/**
 * Makes saved the calling thread's last error again, every field as it was.
 * @return the saved code, so a provider can `return hangar_sys_error_restore(&saved);`.
 * **Thread safety:** the calling thread's error only.
 */
HANGAR_EXTERN(int) hangar_sys_error_restore(const hangar_sys_saved_error *saved);

/**
 * Passes a message to the context's log callback (hangar_ctx_set_log())
 * when one is set and level (a hangar_log_level) is within its bound;
 * otherwise nothing happens. Messages are cut to 1023 bytes and must hold
 * no secret.
 * **Thread safety:** safe; the callback runs on the calling thread.
 */
HANGAR_EXTERN(void) hangar_sys_log(hangar_ctx *ctx, int32_t level, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
	__attribute__((format(printf, 3, 4)))
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
 * A setting's effective value as text: one of the library's or one a
 * provider declared (its own or another's).
 *
 * @return the value, "" when unset, or NULL for an unknown name.
 * **Ownership:** borrowed, valid until the setting changes.
 * **Thread safety:** safe, except against hangar_ctx_set() on that setting.
 */
HANGAR_EXTERN(const char *) hangar_sys_ctx_setting(hangar_ctx *ctx, const char *name);

/**
 * The typed getters: a validated setting's value, its declared default when
 * unset. They never fail on a setting of the right type, as the value was
 * checked when it was set.
 *
 * hangar_sys_ctx_setting_int() reads HANGAR_SETTING_TYPE_INT settings
 * (within their bounds), hangar_sys_ctx_setting_bool() BOOL ones (0 or 1),
 * hangar_sys_ctx_setting_string() any setting as text ("" when unset), and
 * hangar_sys_ctx_setting_json() JSON ones: text that parses as a JSON object
 * the setting's validate accepted.
 *
 * @param out receives the value.
 * @return 0, or HANGAR_EINVAL (NULL argument, unknown name, or a setting of
 *         another type).
 * **Ownership:** strings are borrowed, valid until the setting changes.
 * **Thread safety:** safe, except against hangar_ctx_set() on that setting.
 */
HANGAR_EXTERN(int) hangar_sys_ctx_setting_string(const char **out, hangar_ctx *ctx, const char *name);
/** See hangar_sys_ctx_setting_string(). */
HANGAR_EXTERN(int) hangar_sys_ctx_setting_int(int64_t *out, hangar_ctx *ctx, const char *name);
/** See hangar_sys_ctx_setting_string(). */
HANGAR_EXTERN(int) hangar_sys_ctx_setting_bool(int32_t *out, hangar_ctx *ctx, const char *name);
/** See hangar_sys_ctx_setting_string(). */
HANGAR_EXTERN(int) hangar_sys_ctx_setting_json(const char **out, hangar_ctx *ctx, const char *name);

HANGAR_END_DECL

#endif
