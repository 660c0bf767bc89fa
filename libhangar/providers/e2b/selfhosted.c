/*
 * The e2b provider on self-hosted E2B (infra, Embed): HANGAR_E2B_API_URL or
 * api.<domain>, the v2 create and connect routes, an envd access token on
 * every sandbox, pause with or without memory, snapshots, metrics, logs,
 * templates built from an image.
 *
 * No fork (HANGAR_CAP_FORK off), although E2B's API has one: a self-hosted
 * cluster runs whichever infra release it deployed, and the fake control
 * plane this flavour is tested against models it without the fork route
 * (tests/fakes: 404, asserted by test_fake.py). A capability is claimed only
 * where it is exercised; hangar_sandbox_fork() answers HANGAR_EUNSUPPORTED.
 */
#include "e2b.h"
#include "hangar/template.h"

static const struct e2b_flavour selfhosted = {
	.name = "selfhosted",
	.need_key = 1,
	.fs_pause = 1,
	.create_path = "/v2/sandboxes",
};

static int selfhosted_init(void **state, hangar_ctx *ctx, void *data)
{
	return e2b_init(state, ctx, (void *)&selfhosted);
}

const struct hangar_provider_ops e2b_selfhosted_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "e2b",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_FS_PAUSE | HANGAR_CAP_TEMPLATES,
	.init = selfhosted_init,
	.fini = e2b_fini,
	.create = e2b_create,
	.connect = e2b_connect,
	.kill = e2b_kill,
	.pause = e2b_pause,
	.resume = e2b_resume,
	.set_timeout = e2b_set_timeout,
	.list = e2b_list,
	.pause_filesystem = e2b_pause_filesystem,
	.snapshot = e2b_snapshot,
	.template_build = e2b_template_build,
	.template_list = e2b_template_list,
	.metrics = e2b_metrics,
	.logs = e2b_logs,
};
