/*
 * libhangar: error codes and the last error of the calling thread.
 *
 * Every fallible function returns 0 on success or one of the negative codes
 * below. The codes are kinds a caller can act on, the same whatever the
 * provider: a sandbox that died is HANGAR_EGONE on every provider, never a
 * slow command, and a command that exits non-zero is not an error at all.
 * Values are frozen once released; new ones are only appended.
 */
#ifndef HANGAR_ERRORS_H
#define HANGAR_ERRORS_H

#include "common.h"

HANGAR_BEGIN_DECL

typedef enum hangar_error_code {
	HANGAR_OK = 0,
	/** An argument is missing, malformed or out of range, or text in it is
	 *  not valid UTF-8 (libhangar(3), TEXT AND JSON). */
	HANGAR_EINVAL = -1,
	/** Out of memory. */
	HANGAR_ENOMEM = -2,
	/** The settings are wrong: the message names the variable. */
	HANGAR_ECONFIG = -3,
	/** The provider is down or unreachable, or rejected our credentials. */
	HANGAR_EUNAVAILABLE = -4,
	/** The provider is full (rate-limited, out of capacity). */
	HANGAR_ECAPACITY = -5,
	/** The sandbox could not be created. */
	HANGAR_ECREATE = -6,
	/** The sandbox is gone: killed, expired or lost. */
	HANGAR_EGONE = -7,
	/** The sandbox is paused; resume it first. */
	HANGAR_EPAUSED = -8,
	/** A file is missing, unreadable, or not what the call needs. */
	HANGAR_EFILE = -9,
	/** Something is larger than the limit that applies to it. */
	HANGAR_ETOOLARGE = -10,
	/** A deadline of ours passed (a request, a wait). */
	HANGAR_ETIMEOUT = -11,
	/** A security rule refused the operation. */
	HANGAR_EREFUSED = -12,
	/** The provider lacks the capability this needs. */
	HANGAR_EUNSUPPORTED = -13,
	/** The other side answered something malformed, compressed or oversized. */
	HANGAR_EPROTOCOL = -14,
	/** No such process, provider or other named thing (not a sandbox: see EGONE). */
	HANGAR_ENOTFOUND = -15,
	/** A local operating-system call failed (see os_errno). */
	HANGAR_EOS = -16,
	/** It already exists. */
	HANGAR_EEXISTS = -17,
	/** The caller cancelled it (hangar_exec_opts.cancel returned non-zero). */
	HANGAR_ECANCELED = -18,
	/** Another caller is changing it now (a session under another's lease); retry_after_s says when to try again. */
	HANGAR_EBUSY = -19,
} hangar_error_code;

/*
 * hangar_error.flags: facts about a failure that callers and tiers act on.
 */
/** The request never reached the other side (no connection could be made). */
#define HANGAR_ERROR_UNREACHABLE 0x1u

/** Where an error came from, for messages and metrics; not for control flow. */
typedef enum hangar_error_category {
	HANGAR_ERRCAT_NONE = 0,
	HANGAR_ERRCAT_ARGUMENT = 1,
	HANGAR_ERRCAT_CONFIG = 2,
	HANGAR_ERRCAT_OS = 3,
	HANGAR_ERRCAT_PROVIDER = 4,  /* a control plane or local jail */
	HANGAR_ERRCAT_SANDBOX = 5,   /* envd inside the sandbox */
	HANGAR_ERRCAT_NET = 6,       /* the connection itself */
} hangar_error_category;

/** The details of the last failure on a thread. */
typedef struct hangar_error {
	int32_t code;            /**< a hangar_error_code */
	int32_t category;        /**< a hangar_error_category */
	const char *message;     /**< one line, never NULL, never holds a secret */
	int32_t os_errno;        /**< errno of a failed system call, or 0 */
	int32_t http_status;     /**< HTTP status of the failed request, or 0 */
	const char *provider_code; /**< e.g. the Connect code "not_found", or "" */
	/* Control flow reads the fields below, never the message. */
	int32_t retry_after_s;   /**< the wait the other side asked for (Retry-After), or 0 */
	uint32_t flags;          /**< HANGAR_ERROR_* */
} hangar_error;

/**
 * The last error reported on the calling thread.
 *
 * @return never NULL; after a success that cleared it, code is HANGAR_OK and
 *         message is "".
 *
 * **Ownership:** the library's; valid until the next libhangar call on this
 * thread. Copy what you need.
 * **Thread safety:** each thread has its own.
 */
HANGAR_EXTERN(const hangar_error *) hangar_error_last(void);

/**
 * A short static description of an error code ("sandbox is gone").
 *
 * @return a static string; "unknown error" for codes it does not know.
 *
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(const char *) hangar_strerror(int code);

/**
 * The stable lower-case name of a code ("gone", "timeout"), for logs and
 * bindings.
 *
 * @return a static string; "unknown" for codes it does not know.
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(const char *) hangar_error_name(int code);

HANGAR_END_DECL

#endif
