/*
 * The e2b provider on E2B's cloud (or BYOC): api.<domain>, the v2 create and
 * connect routes, an envd access token on every sandbox, pause with or
 * without memory, snapshots, native forks (POST /sandboxes/{id}/fork),
 * metrics, logs, templates built from an image.
 */
#include "e2b.h"
#include "hangar/template.h"

static const struct e2b_flavour cloud = {
	.name = "cloud",
	.need_key = 1,
	.fs_pause = 1,
	.create_path = "/v2/sandboxes",
};

static int cloud_init(void **state, hangar_ctx *ctx, void *data)
{
	return e2b_init(state, ctx, (void *)&cloud);
}

const struct hangar_provider_ops e2b_cloud_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "e2b",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_FS_PAUSE | HANGAR_CAP_TEMPLATES | HANGAR_CAP_FORK,
	.init = cloud_init,
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
	.fork = e2b_fork,
	.metrics = e2b_metrics,
	.logs = e2b_logs,
};
