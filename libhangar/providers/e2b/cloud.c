/*
 * The e2b provider on E2B's cloud (or BYOC): api.<domain>, the v2 create and
 * connect routes, an envd access token on every sandbox, pause with or
 * without memory, snapshots, native forks (POST /sandboxes/{id}/fork),
 * metrics, logs, templates built from an image; the routes and bodies of
 * E2B's own control API (infra.c).
 */
#include "e2b.h"
#include "hangar/provider.h"

const struct e2b_flavour e2b_flavour_cloud = {
	.name = "cloud",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_FS_PAUSE | HANGAR_CAP_TEMPLATES | HANGAR_CAP_FORK,
	.need_key = 1,
	.sandboxes_path = "/v2/sandboxes",
	.no_limit_timeout = E2B_MAX_TIMEOUT, /* E2B has no "no limit": the longest we allow */
	.pages = 1,
	.resolve_template = e2b_infra_resolve_template,
	.connect_body = e2b_infra_connect_body,
	.pause_body = e2b_infra_pause_body,
	.template_build = e2b_infra_template_build,
	.build_status_path = e2b_infra_build_status_path,
	.template_list_path = e2b_infra_template_list_path,
};
