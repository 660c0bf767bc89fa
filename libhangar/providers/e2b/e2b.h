/*
 * The e2b provider: sandboxes on E2B (cloud, self-hosted) or CubeSandbox,
 * through their control API (api.h); commands, files and terminals go to each
 * sandbox's envd through the library's envd client.
 *
 * Each flavour is its own table (cloud.c, selfhosted.c, cube.c), all named
 * "e2b", over the operations here; the flavour says which routes, bodies and
 * checks apply. HANGAR_E2B_FLAVOR picks the table registered on a context.
 */
#pragma once

#include "../../core/internal.h"

struct e2b_flavour {
	const char *name;           /* "cloud", "selfhosted", "cube" */
	int cube;                   /* v1 create and connect, "{}" bodies, CubeAPI's shapes */
	int need_key;               /* HANGAR_E2B_API_KEY is required */
	int need_api_url;           /* HANGAR_E2B_API_URL is required */
	int fs_pause;               /* pause with memory=false exists */
	const char *create_path;    /* "/v2/sandboxes" or "/sandboxes"; connect likewise */
};

/* Shared operations; init's data is the struct e2b_flavour of the table. */
int e2b_init(void **state, hangar_ctx *ctx, void *data);
void e2b_fini(void *state);
int e2b_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out);
int e2b_connect(void *state, const char *id, hangar_sys_sandbox *out);
int e2b_kill(void *state, const char *id);
int e2b_pause(void *state, const char *id);
int e2b_pause_filesystem(void *state, const char *id);
int e2b_resume(void *state, const char *id, hangar_sys_sandbox *out);
int e2b_set_timeout(void *state, const char *id, int64_t seconds);
int e2b_list(void *state, hangar_sys_list *out);
int e2b_snapshot(void *state, const char *id, const char *name, hangar_buf *out_id);
int e2b_template_build(void *state, const struct hangar_template_build_opts *opts, hangar_buf *out_template_id);
int e2b_fork(void *state, const char *id, uint32_t count, int64_t timeout_sec, hangar_sys_list *out);
int e2b_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		void *payload);
int e2b_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	     void *payload);
int e2b_template_list(void *state, int (*fn)(const struct hangar_template_info *info, void *payload),
		      void *payload);

/* The tables, and the one HANGAR_E2B_FLAVOR names (NULL for an unknown name). */
extern const struct hangar_provider_ops e2b_cloud_ops;
extern const struct hangar_provider_ops e2b_selfhosted_ops;
extern const struct hangar_provider_ops e2b_cube_ops;
const struct hangar_provider_ops *e2b_ops_for(const char *flavour);

/* Registers the table for the context's HANGAR_E2B_FLAVOR. */
int provider_e2b_register(hangar_ctx *ctx);
