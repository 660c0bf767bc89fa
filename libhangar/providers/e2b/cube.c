/*
 * The e2b provider on Tencent's CubeSandbox, whose CubeAPI differs from E2B's
 * (reference/cube/NOTES.md §9): create and connect only at the v1 paths
 * (the v2 ones answer 405 or 404), no envd access token, the traffic token
 * only in create's answer (so it is kept sealed), connect answering 200,
 * plain-text or empty framework errors, pause always keeping memory (a
 * filesystem-only pause is refused, never downgraded), templates built by
 * POST /templates, templates named by alias looked up for their tpl- id
 * before a create. Logs come from GET /v2/sandboxes/{id}/logs; CubeAPI has
 * no metrics and no fork (NOTES §4.4), so those are HANGAR_EUNSUPPORTED.
 * Its v2 list has no pagination: one answer of at most 100 sandboxes.
 * HANGAR_E2B_API_URL is required; the API key is optional.
 */
#include "e2b.h"
#include "hangar/provider.h"

const struct e2b_flavour e2b_flavour_cube = {
	.name = "cube",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_TEMPLATES,
	.cube = 1,
	.need_api_url = 1,
	.create_path = "/sandboxes",
};
