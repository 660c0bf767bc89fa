/*
 * The e2b provider on self-hosted E2B (infra, Embed): HANGAR_E2B_API_URL or
 * api.<domain>, the v2 create and connect routes, an envd access token on
 * every sandbox, pause with or without memory, snapshots, metrics, logs,
 * templates built from an image; the routes and bodies of E2B's own
 * control API (infra.c).
 *
 * No fork (HANGAR_CAP_FORK off), although E2B's API has one: a self-hosted
 * cluster runs whichever infra release it deployed, and the fake control
 * plane this flavour is tested against models it without the fork route
 * (tests/fakes: 404, asserted by test_fake.py). A capability is claimed only
 * where it is exercised; hangar_sandbox_fork() answers HANGAR_EUNSUPPORTED.
 */
#include "e2b.h"
#include "hangar/provider.h"

const struct e2b_flavour e2b_flavour_selfhosted = {
	.name = "selfhosted",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_FS_PAUSE | HANGAR_CAP_TEMPLATES,
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
