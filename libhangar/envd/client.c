/* STUB: the envd client is being written. */
#include "client.h"
#include "../core/internal.h"
#define STUBRET return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_NET, "envd client not built yet")
int envd_client_new(struct envd_client **out) { *out = (struct envd_client *)1; return 0; }
void envd_client_free(struct envd_client *c) { (void)c; }
int envd_unary(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req, cJSON **resp, struct envd_status *st) { (void)c; (void)call; (void)method; (void)req; (void)resp; (void)st; STUBRET; }
int envd_stream(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req, envd_msg_fn cb, void *cbctx, struct envd_status *st) { (void)c; (void)call; (void)method; (void)req; (void)cb; (void)cbctx; (void)st; STUBRET; }
int envd_file_read(struct envd_client *c, const struct envd_call *call, const char *path, size_t limit, struct hbuf *out, struct envd_status *st) { (void)c; (void)call; (void)path; (void)limit; (void)out; (void)st; STUBRET; }
int envd_file_download(struct envd_client *c, const struct envd_call *call, const char *path, int fd, struct envd_status *st) { (void)c; (void)call; (void)path; (void)fd; (void)st; STUBRET; }
int envd_file_write(struct envd_client *c, const struct envd_call *call, const char *path, const void *data, size_t len, struct envd_status *st) { (void)c; (void)call; (void)path; (void)data; (void)len; (void)st; STUBRET; }
int envd_file_upload(struct envd_client *c, const struct envd_call *call, const char *path, int fd, struct envd_status *st) { (void)c; (void)call; (void)path; (void)fd; (void)st; STUBRET; }
int envd_health(struct envd_client *c, const struct envd_call *call, struct envd_status *st) { (void)c; (void)call; (void)st; STUBRET; }
