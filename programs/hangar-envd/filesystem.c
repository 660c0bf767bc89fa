/* STUB: replaced by the filesystem service. */
#include "envd.h"
const struct rpc_method filesystem_methods[] = { { NULL, NULL, NULL } };
int filesystem_service_init(void) { return 0; }
void filesystem_service_shutdown(void) {}
cJSON *envd_entry_info(const char *path, struct rpc_error *err) { (void)path; rpc_fail(err, CONNECT_UNIMPLEMENTED, "stub"); return NULL; }
