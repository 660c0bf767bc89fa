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
 */
#ifndef HANGAR_ENVIRONMENT_H
#define HANGAR_ENVIRONMENT_H

#include "common.h"
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
} hangar_environment_info;

#define HANGAR_ENVIRONMENT_INFO_VERSION 1
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

HANGAR_END_DECL

#endif
