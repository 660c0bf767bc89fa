/*
 * libhangar: sandbox providers.
 *
 * A provider is one flavour of backend ("local" runs bubblewrap jails on this
 * machine). Each has a name and a capability bitmask; callers check the
 * bitmask rather than the name. Custom providers are registered with a
 * versioned table of functions (see hangar/sys/provider.h).
 *
 * Every HANGAR_CAP_* bit is defined here, and only here.
 */
#ifndef HANGAR_PROVIDER_H
#define HANGAR_PROVIDER_H

#include "common.h"
#include "types.h"

HANGAR_BEGIN_DECL

/** Pause keeps the sandbox's memory, so running processes continue on resume. */
#define HANGAR_CAP_PAUSE            (UINT64_C(1) << 0)
/** Resume from a memory pause is fast enough to park sessions on (hot resume). */
#define HANGAR_CAP_HOT_RESUME       (UINT64_C(1) << 1)
/** Terminals (PTY processes). */
#define HANGAR_CAP_PTY              (UINT64_C(1) << 2)
/** Persistent snapshots usable as templates. */
#define HANGAR_CAP_SNAPSHOT         (UINT64_C(1) << 3)
/** Native fork of a running sandbox. */
#define HANGAR_CAP_FORK             (UINT64_C(1) << 4)
/** A kernel boundary (a VM): may serve the isolated tier. */
#define HANGAR_CAP_KERNEL_ISOLATION (UINT64_C(1) << 5)
/** Pause keeping only the filesystem. */
#define HANGAR_CAP_FS_PAUSE         (UINT64_C(1) << 6)
/** Builds and lists templates (hangar/template.h). */
#define HANGAR_CAP_TEMPLATES        (UINT64_C(1) << 7)
/** Runs an OCI image given as the template: a reference or digest (hangar/image.h). */
#define HANGAR_CAP_IMAGES           (UINT64_C(1) << 8)

struct hangar_provider_ops;

/**
 * Finds a provider by name.
 *
 * @param out  receives the provider; NULL on failure.
 * @param ctx  the context.
 * @param name a provider name, or NULL for HANGAR_DEFAULT_PROVIDER.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (no such provider), or the
 *         provider's own set-up error (e.g. HANGAR_ECONFIG).
 *
 * **Ownership:** *out is the caller's; release with hangar_provider_unref().
 * **Thread safety:** safe from any thread.
 */
HANGAR_EXTERN(int) hangar_provider_lookup(hangar_provider **out, hangar_ctx *ctx, const char *name);

/** Takes a reference (on its context; NULL allowed). @return p. **Thread safety:** safe. */
HANGAR_EXTERN(hangar_provider *) hangar_provider_ref(hangar_provider *p);

/** Drops a reference (NULL allowed). @return NULL. **Thread safety:** safe. */
HANGAR_EXTERN(hangar_provider *) hangar_provider_unref(hangar_provider *p);

/**
 * The provider's name.
 * @return the name, or NULL when p is NULL.
 * **Ownership:** borrowed, valid while p is. **Thread safety:** safe.
 */
HANGAR_EXTERN(const char *) hangar_provider_name(const hangar_provider *p);

/**
 * The provider's HANGAR_CAP_* bitmask: what it reported when it was set up
 * (a provider serving several flavours reports the one its settings chose),
 * or what its table declares when it has not been set up yet (a provider
 * found with hangar_provider_lookup() always has been).
 * @return the bits; 0 when p is NULL.
 * **Thread safety:** safe.
 */
HANGAR_EXTERN(uint64_t) hangar_provider_capabilities(const hangar_provider *p);

/**
 * Registers a custom provider on a context, or with ctx NULL process-wide:
 * then every context opened afterwards has it, after the built-in ones, and
 * its settings are validated by hangar_ctx_new() like the library's own.
 * The table is checked (version, size, name, mandatory slots, declared
 * settings) and copied; data is passed to its init(). A table of version 3
 * declaring settings has them read from the environment (unless the context
 * was opened with HANGAR_CTX_NO_ENV) and validated here.
 *
 * @return 0, HANGAR_EINVAL (bad table or setting declaration), HANGAR_EEXISTS
 *         (name taken, or a setting already declared), HANGAR_ECONFIG (one of
 *         its settings has a wrong value; the message names it) or
 *         HANGAR_ENOMEM.
 * **Ownership:** ops is copied; the strings and the settings array it points
 * to, and data, must outlive the context (process-wide: the process).
 * **Thread safety:** on a context, before sharing it between threads;
 * process-wide registration is safe from any thread.
 */
HANGAR_EXTERN(int) hangar_provider_register(hangar_ctx *ctx, const struct hangar_provider_ops *ops, void *data);

/** Called once per provider; return non-zero to stop. */
typedef int (*hangar_provider_fn)(hangar_provider *p, void *payload);

/**
 * Walks the registered providers in registration order (built-in first).
 *
 * @return 0, or the non-zero value fn returned.
 * **Ownership:** p is borrowed for the call; take a reference to keep it.
 * **Thread safety:** safe once registration is over; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_provider_foreach(hangar_ctx *ctx, hangar_provider_fn fn, void *payload);

HANGAR_END_DECL

#endif
