/*
 * Environments (HANGAR_ENVIRONMENTS_FILE): reading and checking the file,
 * and resolving one environment for a create. See core/environment.c.
 */
#pragma once

#include <stdint.h>

#include "internal.h"

struct cJSON;

/* [A-Za-z0-9._-]{1,64}, not starting with '.' or '-'. */
int env_valid_name(const char *s);

/* An image reference as an environment may name one: [A-Za-z0-9][A-Za-z0-9._/:@-]*, at most ENV_IMAGE_MAX. */
#define ENV_IMAGE_MAX 512
int env_valid_image(const char *s);

/* $XDG_CONFIG_HOME/hangar/environments.json, else ~/.config/...; NULL without a home. */
char *env_default_path(void);

/* Reads and checks a whole environments file; *out the parsed object, or NULL when
 * the file does not exist and may_be_missing. HANGAR_ECONFIG naming the variable. */
int env_file_load(const char *path, int may_be_missing, struct cJSON **out);

/* Checks the file the context's setting names (HANGAR_ECONFIG). */
int env_check_ctx(hangar_ctx *ctx);

/* One environment, resolved for a create; fields NULL/0 when it leaves them unset. */
struct env_resolved {
	struct cJSON *root;              /* the file, owned */
	const struct cJSON *def;
	const char *name;
	const char *tier;
	const char *workspace;
	const char *user;
	int64_t timeout_sec;
	int32_t network;                 /* HANGAR_NETWORK_* */
	const struct cJSON *templates;   /* provider -> template, "*" for any; or NULL */
	const char *image;               /* the OCI image its sandboxes run, or NULL */
	struct cJSON *for_tier;          /* templates, plus ENV_IMAGE_KEY and ENV_NAME_KEY with an image; owned */
	char **envv;                     /* "KEY=VALUE", NULL-terminated, owned */
};

/* HANGAR_ENOTFOUND when the file has no such environment; HANGAR_ECONFIG for a broken file. */
int env_resolve(hangar_ctx *ctx, const char *name, struct env_resolved **out);
void env_resolved_free(struct env_resolved *r);

/* The template an environment names for provider (or for "*"), or NULL. */
const char *env_template_for(const struct cJSON *templates, const char *provider);
/* The template it names for provider itself ("*" not taken), or NULL. */
const char *env_exact_template_for(const struct cJSON *templates, const char *provider);
/*
 * An environment's image and name ride with its templates to the tier
 * (env_resolved.for_tier), under keys no provider can be named.
 * env_image_of gives the image, or NULL, and *environment its name.
 */
#define ENV_IMAGE_KEY "@image"
#define ENV_NAME_KEY "@environment"
const char *env_image_of(const struct cJSON *templates, const char **environment);
