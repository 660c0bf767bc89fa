/*
 * The e2b provider on E2B's cloud (or BYOC): api.<domain>, the v2 create and
 * connect routes, an envd access token on every sandbox, pause with or
 * without memory, snapshots, native forks (POST /sandboxes/{id}/fork),
 * metrics, logs, templates built from an image.
 */
#include <string.h>

#include "e2b.h"
#include "hangar/provider.h"

const struct e2b_flavour e2b_flavour_cloud = {
	.name = "cloud",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_SNAPSHOT |
			HANGAR_CAP_KERNEL_ISOLATION | HANGAR_CAP_FS_PAUSE | HANGAR_CAP_TEMPLATES | HANGAR_CAP_FORK,
	.need_key = 1,
	.fs_pause = 1,
	.create_path = "/v2/sandboxes",
};

const struct e2b_flavour *e2b_flavour_named(const char *name)
{
	static const struct e2b_flavour *const all[] = { &e2b_flavour_cloud, &e2b_flavour_selfhosted,
							 &e2b_flavour_cube };

	for (size_t i = 0; name && i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}
