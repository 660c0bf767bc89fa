/*
 * libhangar: templates, the images sandboxes are created from.
 *
 * A provider that builds templates (HANGAR_CAP_TEMPLATES: the e2b provider)
 * turns an OCI image into a template id that hangar_create_opts.template_id
 * can name. Builds run on the platform; the library starts one, follows it
 * until it is ready or failed, and reports its progress through a callback.
 */
#ifndef HANGAR_TEMPLATE_H
#define HANGAR_TEMPLATE_H

#include "buffer.h"
#include "common.h"
#include "provider.h"   /* HANGAR_CAP_TEMPLATES, with every capability bit */
#include "types.h"

HANGAR_BEGIN_DECL

/**
 * Receives a build's progress, on the calling thread: status is the
 * platform's state ("waiting", "building", "ready", "error"), message a line
 * of its log or phase ("" when none). Both are valid during the call only.
 */
typedef void (*hangar_template_progress_fn)(const char *status, const char *message, void *payload);

/** Options for hangar_template_build(). Zero means default for every field. */
typedef struct hangar_template_build_opts {
	uint32_t version;
	uint32_t size;
	const char *name;           /**< the template's name (alias), [a-z0-9][a-z0-9._:-]*; required */
	const char *image;          /**< the OCI image to build from, pullable by the platform; required */
	uint32_t cpu_millis;        /**< CPU in thousandths of a core (2000: two cores); 0: the platform's default */
	uint32_t memory_mb;         /**< memory in MiB; 0: the platform's default */
	uint32_t disk_mb;           /**< writable disk in MiB; 0: the platform's default */
	uint32_t reserved0;
	hangar_template_progress_fn progress; /**< progress lines, or NULL */
	void *payload;
} hangar_template_build_opts;

#define HANGAR_TEMPLATE_BUILD_OPTS_VERSION 1
#define HANGAR_TEMPLATE_BUILD_OPTS_INIT \
	HANGAR_STRUCT_INIT(hangar_template_build_opts, HANGAR_TEMPLATE_BUILD_OPTS_VERSION)

/** @param version HANGAR_TEMPLATE_BUILD_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_template_build_opts_init(hangar_template_build_opts *opts, uint32_t version);

/**
 * Builds a template from an image and waits until it is ready, polling the
 * platform within HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS.
 *
 * @param out_template_id receives the new template's id, for
 *                        hangar_create_opts.template_id.
 * @param ctx             the context.
 * @param provider        a provider name, or NULL for HANGAR_DEFAULT_PROVIDER.
 * @param opts            what to build; name and image are required.
 * @return 0, HANGAR_EINVAL, HANGAR_ENOTFOUND (no such provider),
 *         HANGAR_EUNSUPPORTED (the provider builds no templates),
 *         HANGAR_ECREATE (the build failed: the message says why),
 *         HANGAR_ETIMEOUT (not ready in time; the build may go on),
 *         HANGAR_EUNAVAILABLE, HANGAR_ECAPACITY, HANGAR_EPROTOCOL.
 *
 * **Ownership:** release out_template_id with hangar_buf_dispose(); opts is
 * not kept after the call.
 * **Thread safety:** safe from any thread; progress runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_template_build(hangar_buf *out_template_id, hangar_ctx *ctx, const char *provider,
					 const hangar_template_build_opts *opts);

/** One template, as hangar_template_list() reports it. Strings are borrowed. */
typedef struct hangar_template_info {
	uint32_t version;
	uint32_t size;
	const char *template_id;
	const char *name;           /**< its first name or alias; "" when none */
	const char *status;         /**< the platform's word ("ready", "building", ...); "" when unknown */
	const char *provider;
} hangar_template_info;

#define HANGAR_TEMPLATE_INFO_VERSION 1

/** Called per template; return non-zero to stop. */
typedef int (*hangar_template_fn)(const hangar_template_info *info, void *payload);

/**
 * Lists the templates a provider can create sandboxes from.
 *
 * @param ctx      the context.
 * @param provider a provider name, or NULL for HANGAR_DEFAULT_PROVIDER.
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL, HANGAR_ENOTFOUND,
 *         HANGAR_EUNSUPPORTED, HANGAR_EUNAVAILABLE or HANGAR_EPROTOCOL. On
 *         an error fn has been called for none of them.
 * **Ownership:** info is valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_template_list(hangar_ctx *ctx, const char *provider, hangar_template_fn fn,
					void *payload);

HANGAR_END_DECL

#endif
