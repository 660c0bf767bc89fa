/*
 * libhangar internals shared by every module. Nothing here is exported.
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"
#include "util/clock.h"

/* ---- errors (core/error.c) ------------------------------------------------ */

/* Sets the calling thread's last error and returns code. */
int herr(int code, int category, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with an HTTP status and a provider code (e.g. the Connect code). */
int herr_http(int code, int category, int http_status, const char *provider_code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The same with errno: appends ": <strerror>" to the message. */
int herr_os(int code, int os_errno, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Rewrites the code of the last error, keeping its details (for remapping). */
int herr_recode(int code);
/* Prefixes the last error's message with context ("reading /x: ..."). */
void herr_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void herr_clear(void);
/* Sets the last error's retry_after_s (cut to 0..86400) / adds HANGAR_ERROR_* flags. */
void herr_retry_after(int64_t seconds);
void herr_flags(uint32_t flags);

/* Keeping the last error across calls that may overwrite it: the public
 * hangar_sys_error_save() / hangar_sys_error_restore(). */

/* Argument checks every entry point makes. */
#define HCHECK_ARG(cond, what)                                                            \
	do {                                                                              \
		if (!(cond))                                                              \
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s", what); \
	} while (0)

/*
 * The one rule for text a caller gives the library (ids, paths, commands,
 * names, labels, env entries, setting values): valid UTF-8, or
 * HANGAR_EINVAL naming what (an argument, "opts->cwd") and where the first
 * bad byte is, never quoting the bytes. NULL passes: whether an argument
 * may be NULL is the caller's own check. C strings hold no NUL, so UTF-8 is
 * the whole rule here; length-counted data (file contents) is not text.
 */
int hcheck_text(const char *s, const char *what);
/* The same for each string of a NULL-terminated list (NULL passes). */
int hcheck_texts(const char *const *v, const char *what);
#define HCHECK_TEXT(s, what)                      \
	do {                                      \
		if (hcheck_text((s), (what)))     \
			return HANGAR_EINVAL;     \
	} while (0)

/* ---- settings (core/settings.c) ------------------------------------------- */

/* The library's own settings; providers declare theirs in their table. */
enum hsetting {
	HS_DEFAULT_PROVIDER,
	HS_STATE_DIR,
	HS_SANDBOX_TIMEOUT,
	HS_EXEC_TIMEOUT,
	HS_REQUEST_TIMEOUT,
	HS_OUTPUT_LIMIT,
	HS_READ_LIMIT,
	HS_COPY_LIMIT,
	HS_COPY_TIMEOUT,
	HS_SECRET_KEY,
	HS_TIERS,
	HS_TIER_COOLDOWN,
	HS_TIER_HEDGE,
	HS_SECRET_KEY_PREVIOUS,
	HS_CHECKPOINT_STORE,
	HS_S3_ENDPOINT,
	HS_S3_REGION,
	HS_S3_ACCESS_KEY_ID,
	HS_S3_SECRET_ACCESS_KEY,
	HS_ENVIRONMENTS_FILE,
	HS_WORKSPACE,
	HS_CHECKPOINT_MAX_BYTES,
	HS_CHECKPOINT_TIMEOUT,
	HS_STORE,
	HS_SESSION_HOT_RESUME_MINUTES,
	HS_SESSION_HOT_RESUME_MAX,
	HS_SESSION_CHECK_SECONDS,
	HS_MAX_SANDBOXES,
	HS_SESSION_BUSY_WAIT,
	HS_IMAGE_DIR,
	HS_REGISTRY_AUTH_FILE,
	HS_REGISTRY_INSECURE,
	HS_REGISTRY_CA_FILE,
	HS_REGISTRY_STALL,
	HS_IMAGE_CACHE_MB,
	HS_COUNT
};

/* Typed views of validated settings. */
const char *hctx_str(hangar_ctx *ctx, enum hsetting s);
int64_t hctx_int(hangar_ctx *ctx, enum hsetting s);

/* ---- built-in providers (libhangar/modules.c) --------------------------------------- */

/* The tables of the providers every context has, NULL-terminated, in order. */
extern const struct hangar_provider_ops *const hangar_builtin_providers[];

/* ---- files (core/misc.c) ------------------------------------------------- */

/* Creates dir and its missing parents, 0700; failures name setting, the one dir comes from. */
int hmkdirs(const char *dir, const char *setting);

/*
 * This process, named so that another process can tell whether it still
 * runs: "b<boot>.n<pid namespace>.p<pid>.s<start time>.<random>". A name
 * is dead when it is of this machine's boot and pid namespace and no
 * process of that pid and start time runs; of elsewhere, it is never known
 * dead (0). Leases and temporary files carry it, so what a killed process
 * held is taken over or swept at once.
 */
void hproc_identity(char *out, size_t size);
int hproc_dead(const char *identity);

/* ---- keys (core/kdf.c) ---------------------------------------------------- */

/* Derives outlen (16..64) bytes for the purpose named by context from a secret
 * string. The same (secret, context) always gives the same key. */
int hkdf_secret(unsigned char *out, size_t outlen, const char *secret, size_t secret_len, const char *context);

/* Logging is the public hangar_sys_log() (hangar/sys/provider.h). */

/* ---- audit events (core/context.c) ------------------------------------------ */

struct cJSON;
/* Whether anyone listens: build an event only when this is true. */
int hevent_wanted(hangar_ctx *ctx);
/* Passes event name with the JSON object obj to the context's callback, and
 * frees obj (NULL is allowed: nothing happens). */
void hevent(hangar_ctx *ctx, const char *name, struct cJSON *obj);

/* ---- the context ---------------------------------------------------------- */

/* Who this context is among the holders of a store lease: host, process and a
 * random part, fixed when it opened. */
const char *hctx_instance(hangar_ctx *ctx);
