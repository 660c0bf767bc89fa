/*
 * libhangar: background processes and terminals.
 *
 * A process handle follows one process in a sandbox: its output arrives
 * through a callback on a library thread, input goes to its stdin or
 * terminal, and hangar_process_wait() collects its exit. Releasing the handle
 * stops following it; the process keeps running until it exits or is
 * signalled, and hangar_process_attach() can follow it again by pid.
 */
#ifndef HANGAR_PROCESS_H
#define HANGAR_PROCESS_H

#include "common.h"
#include "sandbox.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** Options for hangar_process_start() and hangar_process_attach(). */
typedef struct hangar_process_opts {
	uint32_t version;
	uint32_t size;
	const char *cwd;            /**< NULL: the sandbox's working directory */
	const char *user;           /**< NULL: the sandbox's default user */
	const char *const *env;     /**< NULL-terminated "KEY=VALUE", or NULL */
	int32_t pty;                /**< 1: run on a terminal (HANGAR_CAP_PTY) */
	uint32_t cols;              /**< terminal size; 0: 80 */
	uint32_t rows;              /**< terminal size; 0: 24 */
	int32_t stdin_enabled;      /**< pipes only: keep stdin open for hangar_process_write() */
	int64_t timeout_sec;        /**< lifetime, at most 31622400 (366 days); 0: none (long-lived) */
	hangar_output_fn on_output; /**< live output, or NULL */
	void *payload;
} hangar_process_opts;

#define HANGAR_PROCESS_OPTS_VERSION 1
#define HANGAR_PROCESS_OPTS_INIT HANGAR_STRUCT_INIT(hangar_process_opts, HANGAR_PROCESS_OPTS_VERSION)

/** @param version HANGAR_PROCESS_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_process_opts_init(hangar_process_opts *opts, uint32_t version);

/**
 * Starts a command in the background: `bash -lc <command>`, or with a
 * terminal and command NULL, an interactive login shell. Output is delivered
 * from a library thread from the first byte on.
 *
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (no PTY), HANGAR_EGONE,
 *         HANGAR_EPAUSED, HANGAR_EUNAVAILABLE, HANGAR_EPROTOCOL.
 * **Ownership:** *out is the caller's (hangar_process_unref()); opts copied.
 * **Thread safety:** the handle's functions may be called from any thread.
 */
HANGAR_EXTERN(int) hangar_process_start(hangar_process **out, hangar_sandbox *sb, const char *command,
					const hangar_process_opts *opts);

/**
 * Follows a process that is already running, by pid. Only output produced
 * from now on is delivered. Only on_output and payload of opts are used.
 *
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (no such process),
 *         HANGAR_EGONE, HANGAR_EPAUSED, HANGAR_EUNAVAILABLE.
 * **Ownership:** as hangar_process_start(). **Thread safety:** safe.
 */
HANGAR_EXTERN(int) hangar_process_attach(hangar_process **out, hangar_sandbox *sb, uint32_t pid,
					 const hangar_process_opts *opts);

/** Takes a reference (NULL allowed). @return p. **Thread safety:** safe. */
HANGAR_EXTERN(hangar_process *) hangar_process_ref(hangar_process *p);

/**
 * Drops a reference (NULL allowed). The last one stops following the process
 * (no more callbacks once it returns); the process itself keeps running.
 * Must not be called from the process's own output callback.
 * @return NULL.
 */
HANGAR_EXTERN(hangar_process *) hangar_process_unref(hangar_process *p);

/**
 * The process id inside the sandbox.
 * @return the pid, or 0 when p is NULL. **Thread safety:** safe.
 */
HANGAR_EXTERN(uint32_t) hangar_process_pid(const hangar_process *p);

/**
 * Writes to the process's stdin (pipes with stdin_enabled) or terminal.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (it exited), HANGAR_EGONE,
 *         HANGAR_EPAUSED.
 * **Ownership:** data is not kept. **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_process_write(hangar_process *p, const void *data, size_t len);

/**
 * Closes the process's stdin, so it reads EOF. On a terminal, write "\x04".
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (a terminal),
 *         HANGAR_ENOTFOUND (it exited), HANGAR_EGONE, HANGAR_EPAUSED.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_process_close_stdin(hangar_process *p);

/**
 * Resizes the process's terminal (the process gets SIGWINCH).
 * @return 0, HANGAR_EINVAL, HANGAR_EUNSUPPORTED (no terminal),
 *         HANGAR_ENOTFOUND (it exited), HANGAR_EGONE, HANGAR_EPAUSED.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_process_resize(hangar_process *p, uint32_t cols, uint32_t rows);

#define HANGAR_SIGTERM 15
#define HANGAR_SIGKILL 9

/**
 * Sends HANGAR_SIGTERM or HANGAR_SIGKILL to the process (not its children).
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (it exited), HANGAR_EGONE,
 *         HANGAR_EPAUSED.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_process_signal(hangar_process *p, int32_t sig);

/**
 * Waits for the process to end.
 *
 * @param exit_code  receives the exit status (-1 if a signal killed it); may be NULL.
 * @param p          the process.
 * @param timeout_ms how long to wait; <0 waits as long as it takes.
 * @return 0, HANGAR_ETIMEOUT (still running), HANGAR_EGONE (the sandbox
 *         died), HANGAR_EPROTOCOL (the stream broke without an end while
 *         the sandbox lives, or broke the process protocol).
 */
HANGAR_EXTERN(int) hangar_process_wait(int32_t *exit_code, hangar_process *p, int64_t timeout_ms);

HANGAR_END_DECL

#endif
