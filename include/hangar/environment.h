/*
 * libhangar: environments.
 *
 * An environment is a named description of a sandbox, kept in one JSON file
 * (HANGAR_ENVIRONMENTS_FILE; by default $XDG_CONFIG_HOME/hangar/
 * environments.json, else ~/.config/hangar/environments.json, when that file
 * exists). A create that names one (hangar_create_opts.environment) takes
 * from it whatever the options leave unset:
 *
 *   {
 *     "python": {
 *       "description": "Python 3 with the project's tools",
 *       "tier": "fast",                        fast, isolated, default or heavy
 *       "templates": { "e2b": "python-3-12",   the template per provider;
 *                      "*": "base" },          "*": any other provider
 *       "image": "docker.io/library/python:3.12",   the OCI image its sandboxes
 *                                              run where no template is named:
 *                                              the local provider runs it,
 *                                              a template-building provider
 *                                              the template published for it
 *       "env": { "PIP_NO_INPUT": "1" },        variables for every command
 *       "timeout_sec": 1800,                   the sandbox's lifetime
 *       "network": "on",                       "on" or "off"
 *       "workspace": "/workspace",             where its work lives (sessions,
 *       "user": "user"                         checkpoints) and as whom
 *     }
 *   }
 *
 * Every member is optional; an unknown member, a wrong type, a name outside
 * [A-Za-z0-9._-]{1,64} or a file that is not such an object is
 * HANGAR_ECONFIG naming the variable and the file, when the context opens,
 * when the setting changes, and at the next use after an edit breaks it.
 * The file is read again at each use, so an edit applies without reopening.
 * A create's own options win over its environment; its variables are the
 * environment's with the create's added, a create's value replacing the
 * environment's for the same name.
 *
 * With "image", a create on a provider the environment names no template
 * for takes the image: a provider that runs images (HANGAR_CAP_IMAGES, the
 * local provider) is given the reference as the template; one that builds
 * templates (HANGAR_CAP_TEMPLATES) the template hangar_environment_publish()
 * built from the image for it (a create on such a provider before the
 * publish fails with HANGAR_ECONFIG saying so); any other provider takes
 * the template named for "*", or cannot run the environment
 * (HANGAR_EUNSUPPORTED). A template named for the provider itself always
 * wins over the image, and the image over "*".
 */
#ifndef HANGAR_ENVIRONMENT_H
#define HANGAR_ENVIRONMENT_H

#include "common.h"
#include "template.h"   /* hangar_template_progress_fn */
#include "types.h"

HANGAR_BEGIN_DECL

/** One environment, as hangar_environment_list() and hangar_environment_get() report it. */
typedef struct hangar_environment_info {
	uint32_t version;
	uint32_t size;
	const char *name;
	const char *description;    /**< "" when none */
	const char *tier;           /**< "" when unset (a create's default tier applies) */
	const char *workspace;      /**< "" when unset */
	const char *user;           /**< "" when unset */
	int64_t timeout_sec;        /**< 0 when unset */
	int32_t network;            /**< HANGAR_NETWORK_DEFAULT (unset), _ON or _OFF (sandbox.h) */
	int32_t reserved0;
	const char *templates_json; /**< the "templates" object as JSON, "{}" when none */
	const char *env_json;       /**< the "env" object as JSON, "{}" when none */
	/* Version 2. */
	const char *image;          /**< the OCI image reference, "" when none */
} hangar_environment_info;

#define HANGAR_ENVIRONMENT_INFO_VERSION 2
#define HANGAR_ENVIRONMENT_INFO_INIT HANGAR_STRUCT_INIT(hangar_environment_info, HANGAR_ENVIRONMENT_INFO_VERSION)

/** Called per environment; return non-zero to stop. */
typedef int (*hangar_environment_fn)(const hangar_environment_info *info, void *payload);

/**
 * Lists the environments of HANGAR_ENVIRONMENTS_FILE, sorted by name. No
 * file (at the default place) is an empty list.
 *
 * @return 0, the non-zero value fn returned, HANGAR_EINVAL, HANGAR_ENOMEM or
 *         HANGAR_ECONFIG (the file cannot be read or is malformed; the
 *         message names the variable and the file).
 * **Ownership:** info and its strings are valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_environment_list(hangar_ctx *ctx, hangar_environment_fn fn, void *payload);

/**
 * Reports one environment by name.
 *
 * @return 0 (after fn ran once), the non-zero value fn returned,
 *         HANGAR_EINVAL (not an environment name), HANGAR_ENOTFOUND,
 *         HANGAR_ENOMEM or HANGAR_ECONFIG.
 * **Ownership:** info and its strings are valid during the callback only.
 * **Thread safety:** safe; fn runs on the calling thread.
 */
HANGAR_EXTERN(int) hangar_environment_get(hangar_ctx *ctx, const char *name, hangar_environment_fn fn,
					  void *payload);

/* ---- publishing an environment's image ------------------------------------------ */

/** What hangar_environment_publish() did for one provider of the environment's tier. */
typedef struct hangar_publish_result {
	uint32_t version;
	uint32_t size;
	const char *provider;
	const char *action;         /**< "built": a template was built from the image now;
	                                 "reused": one built before from the same image serves;
	                                 "named": the environment names a template for this
	                                 provider, which creates use (nothing built);
	                                 "image": the provider runs the image itself
	                                 (HANGAR_CAP_IMAGES) and the image store has it;
	                                 "pulled": the same, pulled into the store now;
	                                 "failed": see error and message */
	const char *template_id;    /**< what creates on this provider use, "" when failed */
	const char *digest;         /**< the image's digest where known, else "" */
	int32_t error;              /**< 0, or the HANGAR_E* code of this provider's failure */
	int32_t reserved0;
	const char *message;        /**< why it failed; "" when it did not */
} hangar_publish_result;

#define HANGAR_PUBLISH_RESULT_VERSION 1

/** Receives one provider's result, on the calling thread; strings valid during the call. */
typedef void (*hangar_publish_fn)(const hangar_publish_result *result, void *payload);

/** Options for hangar_environment_publish(). Zero means default for every field. */
typedef struct hangar_publish_opts {
	uint32_t version;
	uint32_t size;
	hangar_template_progress_fn progress; /**< each template build's progress, or NULL */
	void *progress_payload;
	int32_t rebuild;            /**< non-zero: build again even where a template exists */
	int32_t reserved0;
} hangar_publish_opts;

#define HANGAR_PUBLISH_OPTS_VERSION 1
#define HANGAR_PUBLISH_OPTS_INIT HANGAR_STRUCT_INIT(hangar_publish_opts, HANGAR_PUBLISH_OPTS_VERSION)

/** @param version HANGAR_PUBLISH_OPTS_VERSION. @return 0 or HANGAR_EINVAL. */
HANGAR_EXTERN(int) hangar_publish_opts_init(hangar_publish_opts *opts, uint32_t version);

/**
 * Makes what an environment with an image needs on every provider of its
 * tier, so that its creates never build anything: on a provider that
 * builds templates (HANGAR_CAP_TEMPLATES), a template built from the image
 * (hangar_template_build()), recorded in the state store by provider and
 * reference with the image's digest where known, and built only once per
 * image: a template already built from the same reference, or from another
 * reference of the same digest, is reused. A provider the environment names
 * a template for needs nothing; one that runs images itself
 * (HANGAR_CAP_IMAGES, the local provider) gets the image pulled into the
 * image store when the store lacks it (hangar_image_pull()).
 *
 * @param name an environment with an "image".
 * @param opts NULL for the defaults.
 * @return 0 once fn has been called for each provider of the tier (any
 *         result may report a failure); HANGAR_EINVAL (the environment
 *         names no image), HANGAR_ENOTFOUND (no such environment),
 *         HANGAR_ECONFIG, HANGAR_EOS (the state store).
 * **Ownership:** results are valid during the callback only.
 * **Thread safety:** safe; fn and progress run on the calling thread.
 */
HANGAR_EXTERN(int) hangar_environment_publish(hangar_ctx *ctx, const char *name, const hangar_publish_opts *opts,
					      hangar_publish_fn fn, void *payload);

HANGAR_END_DECL

#endif
