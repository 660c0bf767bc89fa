/*
 * libhangar: sandboxes.
 *
 * A sandbox handle names one sandbox on one provider. Every operation behaves
 * the same whatever the provider: commands run once in a login shell under an
 * in-sandbox timeout, output is capped, big files are refused rather than cut,
 * and failures come back as the kinds in errors.h. Releasing a handle frees
 * memory only; hangar_sandbox_kill() destroys the sandbox.
 */
#ifndef HANGAR_SANDBOX_H
#define HANGAR_SANDBOX_H

#include "buffer.h"
#include "common.h"
#include "types.h"

HANGAR_BEGIN_DECL

/* ---- creating and finding sandboxes ------------------------------------ */

#define HANGAR_NETWORK_DEFAULT 0   /* the provider's setting (HANGAR_LOCAL_NETWORK) */
#define HANGAR_NETWORK_ON      1
#define HANGAR_NETWORK_OFF     2

/** Options for hangar_sandbox_create(). Zero means default for every field. */
typedef struct hangar_create_opts {
	uint32_t version;
	uint32_t size;
	const char *provider;       /**< provider name; NULL: the tier picks one */
	const char *template_id;    /**< template or image; NULL: the provider's default */
	int64_t timeout_sec;        /**< lifetime; 0: HANGAR_SANDBOX_TIMEOUT_SECONDS; <0: none */
	const char *const *env;     /**< NULL-terminated "KEY=VALUE" for every command, or NULL */
	int32_t network;            /**< HANGAR_NETWORK_* */
	int32_t reserved0;
	const char *tier;           /**< "fast", "isolated", "default" or "heavy"; NULL: the
	                                 environment's, else "default" (see hangar/tier.h) */
	/* Version 2. */
	const char *environment;    /**< a name in HANGAR_ENVIRONMENTS_FILE, or NULL: fills
	                                 what is left unset here (see hangar/environment.h) */
} hangar_create_opts;

#define HANGAR_CREATE_OPTS_VERSION 2
#define HANGAR_CREATE_OPTS_INIT HANGAR_STRUCT_INIT(hangar_create_opts, HANGAR_CREATE_OPTS_VERSION)

/**
 * Initialises create options to their defaults.
 * @param version HANGAR_CREATE_OPTS_VERSION.
 * @return 0 or HANGAR_EINVAL.
 */
HANGAR_EXTERN(int) hangar_create_opts_init(hangar_create_opts *opts, uint32_t version);

/**
 * Creates a sandbox and waits until it answers.
 *
 * Without opts->provider, the tier (opts->tier) picks the provider and
 * falls back past providers that are full or unreachable (hangar/tier.h).
 * A named provider is used whatever the tier, except that an "isolated"
 * create only ever runs on a provider listed for that tier.
 *
 * @param out  receives the sandbox; NULL on failure.
 * @param ctx  the context.
 * @param opts options, or NULL for all defaults.
 * @return 0, HANGAR_EINVAL (also: an unknown tier), HANGAR_ENOTFOUND (no
 *         such provider), HANGAR_ECONFIG (also: no provider configured for
 *         the tier), HANGAR_EUNAVAILABLE, HANGAR_ECAPACITY (the last
 *         provider tried was full, or every one is cooling down),
 *         HANGAR_EREFUSED (a provider the isolated tier does not allow),
 *         HANGAR_ECREATE or HANGAR_ETIMEOUT.
 *
 * **Ownership:** *out is the caller's; hangar_sandbox_unref() releases the
 * handle, the sandbox lives on until killed or expired. opts is copied.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_create(hangar_sandbox **out, hangar_ctx *ctx, const hangar_create_opts *opts);

/**
 * Attaches to an existing sandbox by id, on whichever provider holds it
 * (provider may be NULL to search all). A paused sandbox stays paused:
 * commands on it fail with HANGAR_EPAUSED until hangar_sandbox_resume().
 * The context remembers which provider holds the sandbox (and, for a local
 * one, envd's token), so attaching again costs no store query and no round
 * trip to the sandbox's supervisor.
 *
 * @return 0, HANGAR_EINVAL, HANGAR_EGONE (no such sandbox, or it is dead),
 *         HANGAR_ENOTFOUND (no such provider) or HANGAR_EUNAVAILABLE.
 * **Ownership:** as hangar_sandbox_create().
 */
HANGAR_EXTERN(int) hangar_sandbox_attach(hangar_sandbox **out, hangar_ctx *ctx, const char *provider, const char *id);

/** Takes a reference (NULL allowed). @return sb. **Thread safety:** safe. */
HANGAR_EXTERN(hangar_sandbox *) hangar_sandbox_ref(hangar_sandbox *sb);

/**
 * Drops a reference (NULL allowed); the last one frees the handle. It never
 * touches the sandbox itself: use hangar_sandbox_kill() for that.
 * @return NULL. **Thread safety:** safe.
 */
HANGAR_EXTERN(hangar_sandbox *) hangar_sandbox_unref(hangar_sandbox *sb);

/**
 * The sandbox's id.
 * @return the id, or NULL when sb is NULL.
 * **Ownership:** borrowed, valid while sb is. **Thread safety:** safe.
 */
HANGAR_EXTERN(const char *) hangar_sandbox_id(const hangar_sandbox *sb);

/**
 * The sandbox's provider.
 * @return the provider, or NULL when sb is NULL.
 * **Ownership:** borrowed, valid while sb is; take a reference to keep it.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(hangar_provider *) hangar_sandbox_provider(const hangar_sandbox *sb);

typedef enum hangar_sandbox_state {
	HANGAR_SANDBOX_RUNNING = 1,
	HANGAR_SANDBOX_PAUSED = 2,
} hangar_sandbox_state;

/** What hangar_sandbox_get_info() and hangar_sandbox_list() report. */
typedef struct hangar_sandbox_info {
	uint32_t version;
	uint32_t size;
	const char *id;
	const char *provider;
	const char *template_id;    /**< "" when unknown */
	int32_t state;              /**< hangar_sandbox_state */
	int32_t reserved0;
	int64_t created_at_us;      /**< microseconds since the epoch; 0 unknown */
	int64_t expires_at_us;      /**< 0: no expiry (or paused) */
} hangar_sandbox_info;

#define HANGAR_SANDBOX_INFO_VERSION 1
#define HANGAR_SANDBOX_INFO_INIT HANGAR_STRUCT_INIT(hangar_sandbox_info, HANGAR_SANDBOX_INFO_VERSION)

/**
 * Asks the provider for the sandbox's current state.
 *
 * @param out caller-initialised with HANGAR_SANDBOX_INFO_INIT.
 * @return 0, HANGAR_EINVAL, HANGAR_EGONE or HANGAR_EUNAVAILABLE (the
 *         provider could not be asked: the sandbox is not reported dead).
 * **Ownership:** the strings in out are borrowed from sb, valid until the
 * next hangar_sandbox_get_info() on sb or its release.
 * **Thread safety:** safe; concurrent calls on one sandbox each get a
 * consistent answer.
 */
HANGAR_EXTERN(int) hangar_sandbox_get_info(hangar_sandbox_info *out, hangar_sandbox *sb);

/**
 * Where a sandbox's envd answers, for a caller that speaks the envd
 * protocol itself (a proxy in front of sandboxes, such as hangard's E2B
 * edge). Strings are borrowed from the sandbox handle.
 */
typedef struct hangar_envd_endpoint {
	uint32_t version;
	uint32_t size;
	const char *url;             /**< the base of envd's paths: "http://HOST:PORT" or "https://..." */
	const char *socket_path;     /**< a unix socket to connect to instead of url's host, or "" */
	const char *access_token;    /**< envd's own X-Access-Token, "" when envd takes none: a secret,
	                                  never to be shown to the sandbox's users */
	const char *const *headers;  /**< "Name: value" lines every request must carry (a platform's
	                                  traffic token), NULL-terminated; never NULL */
} hangar_envd_endpoint;

#define HANGAR_ENVD_ENDPOINT_VERSION 1
#define HANGAR_ENVD_ENDPOINT_INIT HANGAR_STRUCT_INIT(hangar_envd_endpoint, HANGAR_ENVD_ENDPOINT_VERSION)

/**
 * Reports where the sandbox's envd answers and with what credentials, as
 * the provider last said (no round trip: hangar_sandbox_get_info() asks
 * again).
 *
 * @param out caller-initialised with HANGAR_ENVD_ENDPOINT_INIT.
 * @return 0, HANGAR_EINVAL, HANGAR_EPAUSED (the sandbox is paused: its
 *         envd does not answer until it is resumed).
 * **Ownership:** the strings in out are borrowed from sb, valid until the
 * next hangar_sandbox_envd_endpoint() on sb or its release.
 * **Thread safety:** safe; concurrent calls on one sandbox each get a
 * consistent answer.
 */
HANGAR_EXTERN(int) hangar_sandbox_envd_endpoint(hangar_envd_endpoint *out, hangar_sandbox *sb);

/** Called per sandbox by hangar_sandbox_list(); return non-zero to stop. */
typedef int (*hangar_sandbox_list_fn)(const hangar_sandbox_info *info, void *payload);

/**
 * Lists the sandboxes of one provider (or of all, with provider NULL).
 *
 * With provider NULL, every provider that answers is listed and the ones
 * that cannot be asked are reported after, by name, in the error: a
 * provider is left out silently only when nobody configured it
 * (HANGAR_ECONFIG), it is not HANGAR_DEFAULT_PROVIDER and the state store
 * records no sandbox on it. A full list also makes the store forget the
 * sandboxes the provider says are gone.
 *
 * @return 0, the non-zero value fn returned, or an error (the first
 *         failing provider's code, e.g. HANGAR_EUNAVAILABLE or
 *         HANGAR_ECONFIG). On an error nothing is reported as missing: a
 *         provider that cannot be asked fails the call rather than listing
 *         nothing.
 * **Ownership:** info is valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_list(hangar_ctx *ctx, const char *provider, hangar_sandbox_list_fn fn, void *payload);

/* ---- lifecycle ----------------------------------------------------------- */

/**
 * Pauses the sandbox, keeping its memory (HANGAR_CAP_PAUSE): every process in
 * it stops where it is and continues on resume. Its lifetime clock stops too.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED, HANGAR_EGONE or
 *         HANGAR_EUNAVAILABLE.
 * **Thread safety:** safe from any thread; calls in flight on other threads
 * fail with HANGAR_EPAUSED or wait until resume.
 */
HANGAR_EXTERN(int) hangar_sandbox_pause(hangar_sandbox *sb);
/**
 * Resumes a paused sandbox; its processes continue and its lifetime starts
 * again from the timeout it was created with.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED, HANGAR_EGONE or
 *         HANGAR_EUNAVAILABLE.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_resume(hangar_sandbox *sb);
/**
 * Sets the sandbox's remaining lifetime to seconds from now (0: no limit);
 * it may shorten it. When it runs out the provider kills the sandbox.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED, HANGAR_EGONE or
 *         HANGAR_EUNAVAILABLE.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_set_timeout(hangar_sandbox *sb, int64_t seconds);
/**
 * Destroys the sandbox and everything in it. The handle stays valid (release
 * it with hangar_sandbox_unref()); calls on it then fail with HANGAR_EGONE.
 * @return 0, HANGAR_EINVAL, HANGAR_EGONE (already gone) or HANGAR_EUNAVAILABLE.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_kill(hangar_sandbox *sb);

/* ---- commands -------------------------------------------------------------- */

#define HANGAR_STREAM_STDOUT 1
#define HANGAR_STREAM_STDERR 2
#define HANGAR_STREAM_PTY    3

/**
 * Receives output as it arrives, in order, from a library thread (exec: the
 * calling thread). The bytes are valid during the call only.
 */
typedef void (*hangar_output_fn)(int stream, const char *data, size_t len, void *payload);

/**
 * Asked, with the options' payload, whether to give up (at least once a
 * second while a command runs, from the thread running it). Return non-zero
 * to cancel; once it has, it is not asked again.
 */
typedef int (*hangar_cancel_fn)(void *payload);

/** Options for hangar_sandbox_exec(). Zero means default for every field. */
typedef struct hangar_exec_opts {
	uint32_t version;
	uint32_t size;
	int64_t timeout_sec;        /**< in-sandbox timeout, at most 604800 (7 days);
	                                 0: HANGAR_EXEC_TIMEOUT_SECONDS */
	const char *cwd;            /**< NULL: the sandbox's working directory */
	const char *user;           /**< NULL: the sandbox's default user */
	const char *const *env;     /**< NULL-terminated "KEY=VALUE" (each under 128 KiB), or NULL */
	uint64_t output_limit;      /**< bytes kept per stream, at most 2^32; 0: HANGAR_OUTPUT_LIMIT_BYTES */
	const void *stdin_data;     /**< fed to the command's stdin, then closed; NULL: none */
	size_t stdin_len;
	hangar_output_fn on_output; /**< live output (uncapped), or NULL */
	void *payload;              /**< passed to on_output and cancel */
	/**
	 * Polled while the command runs; when it returns non-zero the
	 * command's process group in the sandbox gets SIGTERM and the call
	 * returns HANGAR_ECANCELED. NULL: never.
	 */
	hangar_cancel_fn cancel;
} hangar_exec_opts;

#define HANGAR_EXEC_OPTS_VERSION 1
#define HANGAR_EXEC_OPTS_INIT HANGAR_STRUCT_INIT(hangar_exec_opts, HANGAR_EXEC_OPTS_VERSION)

/** @param version HANGAR_EXEC_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_exec_opts_init(hangar_exec_opts *opts, uint32_t version);

/**
 * The outcome of a command. A non-zero exit is a result, not an error.
 * Each stream keeps its first and last halves of output_limit bytes, with a
 * marker line between them when the middle was dropped.
 */
typedef struct hangar_exec_result {
	uint32_t version;
	uint32_t size;
	int32_t exit_code;          /**< the command's status; -1 if a signal killed it */
	int32_t timed_out;          /**< 1 when the in-sandbox timeout stopped it (exit 124; SIGKILLed: 137 or -1) */
	hangar_buf out;             /**< stdout as kept */
	hangar_buf err;             /**< stderr as kept */
	uint64_t out_bytes;         /**< stdout bytes produced, kept or not */
	uint64_t err_bytes;
	int64_t duration_us;
	/* Version 2. */
	int32_t oom_killed;         /**< 1 when the OOM killer killed the command (see hangar_sandbox_exec) */
	int32_t reserved0;
} hangar_exec_result;

#define HANGAR_EXEC_RESULT_VERSION 2
#define HANGAR_EXEC_RESULT_INIT                                                                              \
	{ HANGAR_EXEC_RESULT_VERSION, (uint32_t)sizeof(hangar_exec_result), 0, 0, HANGAR_BUF_INIT, HANGAR_BUF_INIT, \
	  0, 0, 0, 0, 0 }

/**
 * Runs a shell command once: `timeout -k 5s <N>s bash -lc <command>` (in an
 * image without timeout or bash, hangar-envd stands in for them: `sh -lc`
 * under a timeout of its own, with the same signals and exit statuses).
 *
 * @param out     caller-initialised with HANGAR_EXEC_RESULT_INIT; filled on
 *                success (also for non-zero exits and timeouts), never
 *                past out->size: a caller built against an older, smaller
 *                struct gets the fields it has. out->oom_killed is set
 *                where the provider counts the OOM killer's kills (local
 *                sandboxes with a memory cgroup): SIGKILL ended the
 *                command (itself, or the process its shell waited on
 *                last: status 137), it did not time out, and the
 *                sandbox's count went up while it ran. A command that
 *                ended otherwise is never flagged, whatever was killed
 *                beside it; one killed by another's SIGKILL while the
 *                OOM killer killed elsewhere in the sandbox would be.
 * @param sb      the sandbox.
 * @param command the command line, interpreted by bash; under 128 KiB (the
 *                longest argument a program in the sandbox may get).
 * @param opts    options, or NULL for defaults.
 * @return 0 (see out->exit_code and out->timed_out), HANGAR_EINVAL (also a
 *         command line too long, or a struct version newer than the
 *         library's),
 *         HANGAR_EGONE (the sandbox died), HANGAR_EPAUSED (also when
 *         another caller pauses it while the command runs: within seconds),
 *         HANGAR_ETIMEOUT (the sandbox stopped answering: our backstop
 *         deadline passed, the sandbox is alive), HANGAR_EUNAVAILABLE,
 *         HANGAR_EPROTOCOL, HANGAR_ECANCELED (opts->cancel said stop).
 * **Ownership:** release out with hangar_exec_result_dispose().
 * **Thread safety:** several threads may exec on one sandbox at once.
 */
HANGAR_EXTERN(int) hangar_sandbox_exec(hangar_exec_result *out, hangar_sandbox *sb, const char *command,
				       const hangar_exec_opts *opts);

/**
 * Frees the buffers of a result; it can be reused after. NULL allowed.
 * **Thread safety:** on results not used concurrently.
 */
HANGAR_EXTERN(void) hangar_exec_result_dispose(hangar_exec_result *result);

/*
 * ---- files -------------------------------------------------------------------
 *
 * Paths inside the sandbox are absolute, or relative to the home of the
 * sandbox's default user. Every file function is safe from any thread, and
 * callbacks run on the calling thread. Besides the codes each lists, every
 * one can fail with the common codes: HANGAR_EINVAL, HANGAR_EGONE,
 * HANGAR_EPAUSED, HANGAR_ETIMEOUT, HANGAR_EUNAVAILABLE and HANGAR_EPROTOCOL.
 */

/**
 * Reads a whole file. Files over HANGAR_READ_LIMIT_BYTES are refused, never
 * truncated.
 *
 * @param out receives the bytes (NUL-terminated).
 * @return 0, HANGAR_EFILE (missing, a directory, unreadable),
 *         HANGAR_ETOOLARGE, HANGAR_EGONE, HANGAR_EPAUSED, HANGAR_ETIMEOUT,
 *         HANGAR_EPROTOCOL.
 * **Ownership:** release out with hangar_buf_dispose().
 */
HANGAR_EXTERN(int) hangar_sandbox_read_file(hangar_buf *out, hangar_sandbox *sb, const char *path);

/**
 * Writes a whole file, creating parent directories, replacing what was there.
 * @return 0, HANGAR_EFILE (a parent is a file, the target is a directory),
 *         and the common codes.
 * **Ownership:** data is not kept after the call.
 */
HANGAR_EXTERN(int) hangar_sandbox_write_file(hangar_sandbox *sb, const char *path, const void *data, size_t len);

/**
 * Copies a local file into the sandbox, streaming it (any size).
 * @return 0, HANGAR_EOS (the local file), HANGAR_EFILE, or a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_copy_in(hangar_sandbox *sb, const char *local_path, const char *remote_path);

/** Options for hangar_sandbox_copy_out(). Zero means default for every field. */
typedef struct hangar_copy_opts {
	uint32_t version;
	uint32_t size;
	uint64_t limit_bytes;       /**< the largest file taken; 0: HANGAR_COPY_LIMIT_BYTES */
	int64_t timeout_sec;        /**< the whole copy, at most 86400; 0: HANGAR_COPY_TIMEOUT_SECONDS */
	hangar_cancel_fn cancel;    /**< polled with payload; non-zero gives up (HANGAR_ECANCELED); NULL: never */
	void *payload;
} hangar_copy_opts;

#define HANGAR_COPY_OPTS_VERSION 1
#define HANGAR_COPY_OPTS_INIT HANGAR_STRUCT_INIT(hangar_copy_opts, HANGAR_COPY_OPTS_VERSION)

/** @param version HANGAR_COPY_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_copy_opts_init(hangar_copy_opts *opts, uint32_t version);

/**
 * Copies a file out of the sandbox to a local path, streaming it. The local
 * file is written under a temporary name and renamed when complete; on any
 * failure the temporary file is removed. A file over the size limit (by the
 * length the sandbox announces, before a byte is written, or by the bytes
 * that arrive) is refused, and the whole copy has a deadline besides the
 * request timeout that bounds a stall.
 *
 * @param opts options, or NULL for defaults.
 * @return 0, HANGAR_EOS (the local file), HANGAR_EFILE, HANGAR_ETOOLARGE
 *         (over the limit), HANGAR_ETIMEOUT (the deadline passed or the
 *         transfer stalled), HANGAR_ECANCELED (opts->cancel said stop), or
 *         a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_copy_out(hangar_sandbox *sb, const char *remote_path, const char *local_path,
					   const hangar_copy_opts *opts);

#define HANGAR_FILE_OTHER 0
#define HANGAR_FILE_REGULAR 1
#define HANGAR_FILE_DIRECTORY 2

/** One directory entry. Strings are borrowed: valid during the callback only. */
typedef struct hangar_file_info {
	uint32_t version;
	uint32_t size;
	const char *name;
	const char *path;
	int32_t type;               /**< HANGAR_FILE_*; a symlink reports its target's type */
	uint32_t mode;              /**< permission bits */
	uint64_t bytes;             /**< size in bytes */
	int64_t mtime_us;           /**< modification time, microseconds since the epoch */
	const char *owner;
	const char *group;
	const char *permissions;    /**< e.g. "-rw-r--r--" */
	const char *symlink_target; /**< NULL unless a symlink */
} hangar_file_info;

#define HANGAR_FILE_INFO_VERSION 1

/** Called per entry; return non-zero to stop. */
typedef int (*hangar_file_fn)(const hangar_file_info *info, void *payload);

/**
 * Lists a directory, depth levels deep (1: its entries only), without
 * following symbolic links inside it.
 * @return 0, the non-zero value fn returned, HANGAR_EFILE (missing, not a
 *         directory), or a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_list_files(hangar_sandbox *sb, const char *path, uint32_t depth,
					     hangar_file_fn fn, void *payload);

/**
 * Describes one path (a symlink itself, not its target); fn is called once.
 * @return 0, the non-zero value fn returned, HANGAR_EFILE (missing), or a
 *         common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_stat(hangar_sandbox *sb, const char *path, hangar_file_fn fn, void *payload);

/**
 * Whether a path exists.
 * @return 1, 0, or a common code — never 0 on failure.
 */
HANGAR_EXTERN(int) hangar_sandbox_exists(hangar_sandbox *sb, const char *path);

/**
 * Creates a directory and its parents.
 * @return 0, HANGAR_EEXISTS (a directory is already there), HANGAR_EFILE (a
 *         file is in the way), or a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_mkdir(hangar_sandbox *sb, const char *path);

/**
 * Renames, creating the destination's parents; replaces an existing file.
 * @return 0, HANGAR_EFILE (the source is missing), or a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_rename(hangar_sandbox *sb, const char *from, const char *to);

/**
 * Removes a file or a whole tree, not following symbolic links; a missing
 * path is not an error.
 * @return 0, or a common code.
 */
HANGAR_EXTERN(int) hangar_sandbox_remove(hangar_sandbox *sb, const char *path);

/* ---- filesystem pauses and snapshots ------------------------------------------ */

/**
 * Pauses the sandbox keeping only its filesystem (HANGAR_CAP_FS_PAUSE): its
 * processes end, and hangar_sandbox_resume() boots it afresh on the same
 * files. Cheaper to keep than a memory pause. Never falls back to another
 * kind of pause.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (the provider cannot),
 *         HANGAR_EGONE or HANGAR_EUNAVAILABLE.
 * **Thread safety:** as hangar_sandbox_pause().
 */
HANGAR_EXTERN(int) hangar_sandbox_pause_filesystem(hangar_sandbox *sb);

/**
 * Takes a persistent snapshot of the sandbox, memory and filesystem
 * (HANGAR_CAP_SNAPSHOT). It outlives the sandbox, and its id can be given as
 * hangar_create_opts.template_id to create sandboxes from it. The sandbox
 * may be briefly paused while it is taken, and goes on running after.
 *
 * @param out_id receives the snapshot's id.
 * @param sb     the sandbox.
 * @param name   a name for the snapshot, or NULL.
 * @return 0, HANGAR_EINVAL (also: a snapshot is already being taken),
 *         HANGAR_EUNSUPPORTED, HANGAR_EGONE, HANGAR_EUNAVAILABLE or
 *         HANGAR_EPROTOCOL.
 * **Ownership:** release out_id with hangar_buf_dispose(); name is not kept.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_snapshot(hangar_buf *out_id, hangar_sandbox *sb, const char *name);

/**
 * Deletes a snapshot hangar_sandbox_snapshot() took on provider (NULL:
 * HANGAR_DEFAULT_PROVIDER), where the provider deletes them (the local
 * provider does).
 *
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (the provider cannot),
 *         HANGAR_ENOTFOUND (no such provider), HANGAR_EGONE (no such
 *         snapshot), HANGAR_EBUSY (a sandbox made from it still runs) or
 *         HANGAR_EOS.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_snapshot_delete(hangar_ctx *ctx, const char *provider, const char *snapshot_id);

/**
 * Releases a snapshot hangar_sandbox_snapshot() took on provider (NULL:
 * HANGAR_DEFAULT_PROVIDER): it is deleted once no sandbox made from it
 * runs, at once when none does, else when the last of them is killed,
 * expires or ends in any other way. Until then creates from it go on
 * working. A session fork by snapshot releases its snapshot this way.
 *
 * @return 0 (deleted now or later), HANGAR_EINVAL, HANGAR_EUNSUPPORTED (the
 *         provider cannot), HANGAR_ENOTFOUND (no such provider),
 *         HANGAR_EGONE (no such snapshot) or HANGAR_EOS.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_snapshot_release(hangar_ctx *ctx, const char *provider, const char *snapshot_id);

/** One snapshot, as hangar_snapshot_list() reports it. Strings are borrowed. */
typedef struct hangar_snapshot_info {
	uint32_t version;
	uint32_t size;
	const char *snapshot_id;    /**< a template id for hangar_create_opts.template_id */
	const char *name;           /**< the name it was taken with; "" when none */
	const char *sandbox_id;     /**< the sandbox it was taken of (which may be gone); "" when unknown */
	const char *provider;
	int64_t created_at_us;      /**< microseconds since the epoch; 0 when unknown */
	uint32_t released;          /**< 1: goes with the last sandbox made from it (hangar_snapshot_release()) */
	uint32_t reserved;          /**< 0 */
} hangar_snapshot_info;

#define HANGAR_SNAPSHOT_INFO_VERSION 1

/** Called per snapshot by hangar_snapshot_list(); return non-zero to stop. */
typedef int (*hangar_snapshot_fn)(const hangar_snapshot_info *info, void *payload);

/**
 * Lists the snapshots a provider (NULL: HANGAR_DEFAULT_PROVIDER) keeps, a
 * session fork's among them until they go, oldest first where the provider
 * knows.
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL, HANGAR_ENOTFOUND
 *         (no such provider), HANGAR_EUNSUPPORTED (the provider lists no
 *         snapshots) or HANGAR_EOS. On an error fn has been called for none
 *         of them.
 * **Ownership:** info is valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_snapshot_list(hangar_ctx *ctx, const char *provider, hangar_snapshot_fn fn, void *payload);

/* ---- forks ------------------------------------------------------------------- */

/** One fork, as hangar_sandbox_fork() reports it. */
typedef struct hangar_fork_result {
	uint32_t version;
	uint32_t size;
	uint32_t index;             /**< 0 to count - 1, in the platform's order */
	int32_t error;              /**< 0, or the HANGAR_E* code of this fork's failure */
	hangar_sandbox *sandbox;    /**< the new sandbox when error is 0, else NULL; borrowed */
	const char *message;        /**< why this fork failed; "" when it did not */
} hangar_fork_result;

#define HANGAR_FORK_RESULT_VERSION 1

/**
 * Receives one fork's result, on the calling thread. result and what it
 * points to are valid during the call only: take a reference with
 * hangar_sandbox_ref() to keep the sandbox.
 */
typedef void (*hangar_fork_fn)(const hangar_fork_result *result, void *payload);

/**
 * Forks a running sandbox natively (HANGAR_CAP_FORK): the platform makes
 * count new sandboxes from it in one request, each reported through fn,
 * with a lifetime of HANGAR_SANDBOX_TIMEOUT_SECONDS. Each fork is a sandbox
 * like a created one: recorded in the state store (so hangar_sandbox_attach()
 * finds it after a restart), checked as a create is (a fork nobody could
 * use safely is killed and reported failed), and killed only by
 * hangar_sandbox_kill().
 *
 * @param sb      the sandbox to fork; it goes on running.
 * @param count   how many forks, 1 to 100.
 * @param fn      called once per fork, also for each one that failed.
 * @param payload passed to fn.
 * @return 0 when the platform answered: fn has been called count times,
 *         and any of those may report an error; otherwise fn has not been
 *         called and no fork exists: HANGAR_EINVAL (also: the sandbox is
 *         not running), HANGAR_EUNSUPPORTED (the provider cannot fork),
 *         HANGAR_EGONE, HANGAR_ECAPACITY, HANGAR_EUNAVAILABLE or
 *         HANGAR_EPROTOCOL; except after HANGAR_ETIMEOUT (the request went
 *         out unanswered), when the platform may have made forks that the
 *         caller cannot name and that expire with their lifetime.
 * **Ownership:** the sandboxes fn receives are borrowed; the forks
 * themselves live on until killed or expired.
 * **Thread safety:** safe from any thread; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_fork(hangar_sandbox *sb, uint32_t count, hangar_fork_fn fn, void *payload);

/* ---- metrics and logs ------------------------------------------------------------ */

/** One resource sample, as hangar_sandbox_metrics() reports it. */
typedef struct hangar_sandbox_metric {
	uint32_t version;
	uint32_t size;
	int64_t timestamp_us;       /**< when it was taken, microseconds since the epoch */
	uint32_t cpu_count;         /**< virtual CPUs */
	uint32_t reserved0;
	double cpu_used_pct;        /**< CPU in use, percent (0 to 100) */
	uint64_t mem_used_bytes;
	uint64_t mem_total_bytes;
	uint64_t disk_used_bytes;
	uint64_t disk_total_bytes;
	/* Version 2: check size before reading. */
	uint32_t pids_used;         /**< processes and threads in the sandbox; 0: unknown */
	uint32_t pids_max;          /**< the most it may have; 0: unknown or unlimited */
} hangar_sandbox_metric;

#define HANGAR_SANDBOX_METRIC_VERSION 2

/** Called per sample; return non-zero to stop. */
typedef int (*hangar_sandbox_metric_fn)(const hangar_sandbox_metric *metric, void *payload);

/**
 * Reports the sandbox's recent resource samples, oldest first, as the
 * platform keeps them (at most 1000).
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL,
 *         HANGAR_EUNSUPPORTED (the provider keeps no metrics), HANGAR_EGONE,
 *         HANGAR_EUNAVAILABLE or HANGAR_EPROTOCOL. On an error fn has been
 *         called for none.
 * **Ownership:** metric is valid during the callback only.
 * **Thread safety:** safe from any thread; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_metrics(hangar_sandbox *sb, hangar_sandbox_metric_fn fn, void *payload);

/* ---- ports ---------------------------------------------------------------------- */

/**
 * Makes a TCP port of the sandbox reachable from the caller's machine: a
 * program in the sandbox listening on it (on its loopback or on every
 * address) is then reached at the address returned. Nothing is reachable
 * before it is exposed; exposing a port again returns the same address;
 * the exposure ends with the sandbox.
 *
 * Local sandboxes expose it on an ephemeral port of the host's loopback
 * ("127.0.0.1:41234"), reachable by every program on the host but by no
 * other sandbox; platforms that route ports themselves return the host name
 * they route to it.
 *
 * @param out_addr receives "host:port", or a host name (HTTPS on port 443).
 * @param sb       the sandbox.
 * @param port     the port inside the sandbox, 1 to 65535.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (the provider cannot expose
 *         ports), HANGAR_EGONE, HANGAR_EUNAVAILABLE (the sandbox did not
 *         answer, or at most 64 ports are exposed per sandbox) or HANGAR_EOS.
 * **Ownership:** out_addr is the caller's (hangar_buf_dispose()).
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_expose_port(hangar_buf *out_addr, hangar_sandbox *sb, uint32_t port);

/**
 * Where one of a sandbox's TCP ports answers on a platform that routes
 * ports itself, and with what credentials, for a caller that forwards
 * requests to it itself (a proxy in front of sandboxes, such as hangard's
 * E2B edge).
 */
typedef struct hangar_port_endpoint {
	uint32_t version;
	uint32_t size;
	const char *url;             /**< "http://HOST:PORT" or "https://HOST[:PORT]": connect to HOST:PORT
	                                  and send HOST[:PORT] as Host; paths go under it */
	const char *const *headers;  /**< "Name: value" lines every request must carry (a platform's
	                                  traffic token: a secret, never to be shown to the sandbox's
	                                  users), NULL-terminated; never NULL */
	hangar_buf storage;          /**< holds url and headers: the caller's, hangar_buf_dispose() */
} hangar_port_endpoint;

#define HANGAR_PORT_ENDPOINT_VERSION 1
#define HANGAR_PORT_ENDPOINT_INIT \
	{ HANGAR_PORT_ENDPOINT_VERSION, (uint32_t)sizeof(hangar_port_endpoint), NULL, NULL, HANGAR_BUF_INIT }

/**
 * Reports where TCP port of the sandbox answers and with what credentials,
 * as the provider last said (no round trip), for a trusted caller: unlike
 * hangar_sandbox_expose_port(), whose address may be shown to anyone, the
 * headers carry the platform's secret. Providers whose ports are exposed
 * by hangar_sandbox_expose_port() (local sandboxes) answer
 * HANGAR_EUNSUPPORTED.
 *
 * @param out  caller-initialised with HANGAR_PORT_ENDPOINT_INIT (its size
 *             must cover storage); out->storage is replaced.
 * @param sb   the sandbox.
 * @param port the port inside the sandbox, 1 to 65535.
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (the provider routes no
 *         ports itself), HANGAR_EPAUSED (the sandbox is paused) or
 *         HANGAR_ENOMEM.
 * **Ownership:** url and headers point into out->storage, the caller's:
 * valid until hangar_buf_dispose(&out->storage).
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_port_endpoint(hangar_port_endpoint *out, hangar_sandbox *sb, uint32_t port);

/** One line of a sandbox's platform log. Strings are borrowed. */
typedef struct hangar_sandbox_log_entry {
	uint32_t version;
	uint32_t size;
	int64_t timestamp_us;       /**< microseconds since the epoch; 0 when unknown */
	const char *level;          /**< "debug", "info", "warn", "error", or the platform's word */
	const char *message;        /**< one line, control characters replaced, at most 4 KiB */
} hangar_sandbox_log_entry;

#define HANGAR_SANDBOX_LOG_ENTRY_VERSION 1

/** Called per log entry; return non-zero to stop. */
typedef int (*hangar_sandbox_log_fn)(const hangar_sandbox_log_entry *entry, void *payload);

/**
 * Reports the sandbox's platform log (its lifecycle and system lines, not
 * the output of commands), oldest first, at most the newest 1000 entries.
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL,
 *         HANGAR_EUNSUPPORTED (the provider keeps no logs), HANGAR_EGONE,
 *         HANGAR_EUNAVAILABLE or HANGAR_EPROTOCOL. On an error fn has been
 *         called for none.
 * **Ownership:** entry is valid during the callback only.
 * **Thread safety:** safe from any thread; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_sandbox_logs(hangar_sandbox *sb, hangar_sandbox_log_fn fn, void *payload);

HANGAR_END_DECL

#endif
