/* STUB: the local provider is being written. */
#include "../../core/internal.h"
int provider_local_register(hangar_ctx *ctx);
static int l_init(void **state, hangar_ctx *ctx, void *data) { (void)ctx; (void)data; *state = NULL; return 0; }
static int l_fail(void) { return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "local provider not built yet"); }
static int l_create(void *s, const struct hangar_create_opts *o, hangar_sys_sandbox *out) { (void)s; (void)o; (void)out; return l_fail(); }
static int l_connect(void *s, const char *id, hangar_sys_sandbox *out) { (void)s; (void)id; (void)out; return l_fail(); }
static int l_kill(void *s, const char *id) { (void)s; (void)id; return l_fail(); }
static const struct hangar_provider_ops local_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION, .size = sizeof(struct hangar_provider_ops), .name = "local",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY,
	.init = l_init, .create = l_create, .connect = l_connect, .kill = l_kill,
};
int provider_local_register(hangar_ctx *ctx) { return hangar_provider_register(ctx, &local_ops, NULL); }
