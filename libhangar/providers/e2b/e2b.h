/*
 * The e2b provider: sandboxes on E2B (cloud, self-hosted) or CubeSandbox,
 * through their control API (api.h); commands, files and terminals go to each
 * sandbox's envd through the library's envd client.
 *
 * One table, e2b_provider_ops (e2b.c), serves every flavour: its init reads
 * HANGAR_E2B_FLAVOR and takes that flavour's description (cloud.c,
 * selfhosted.c, cube.c), which says which routes, bodies, checks and
 * capabilities apply. The core knows none of this.
 */
#pragma once

#include "../../core/internal.h"

struct e2b_flavour {
	const char *name;           /* "cloud", "selfhosted", "cube" */
	uint64_t capabilities;      /* HANGAR_CAP_* the provider reports on this flavour */
	int cube;                   /* v1 create and connect, "{}" bodies, CubeAPI's shapes */
	int need_key;               /* HANGAR_E2B_API_KEY is required */
	int need_api_url;           /* HANGAR_E2B_API_URL is required */
	int fs_pause;               /* pause with memory=false exists */
	const char *create_path;    /* "/v2/sandboxes" or "/sandboxes"; connect likewise */
};

/* The flavours, and the one HANGAR_E2B_FLAVOR names (NULL for an unknown name). */
extern const struct e2b_flavour e2b_flavour_cloud;
extern const struct e2b_flavour e2b_flavour_selfhosted;
extern const struct e2b_flavour e2b_flavour_cube;
const struct e2b_flavour *e2b_flavour_named(const char *name);

/* The operations of the one table (e2b.c). */
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

/* The provider's table, listed in libhangar/providers/builtin.c. */
extern const struct hangar_provider_ops e2b_provider_ops;
