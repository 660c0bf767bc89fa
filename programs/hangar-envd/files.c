/* STUB: replaced by the /files routes. */
#include "envd.h"
#include <microhttpd.h>
unsigned files_download(struct envd_req *r, struct MHD_Response **resp) { (void)r; *resp = envd_rest_error(501, "not yet"); return 501; }
struct files_upload *files_upload_begin(struct envd_req *r, unsigned *status, struct MHD_Response **resp) { (void)r; *status = 501; *resp = envd_rest_error(501, "not yet"); return NULL; }
void files_upload_data(struct files_upload *u, const char *data, size_t len) { (void)u; (void)data; (void)len; }
unsigned files_upload_finish(struct files_upload *u, struct MHD_Response **resp) { (void)u; *resp = envd_rest_error(501, "not yet"); return 501; }
void files_upload_free(struct files_upload *u) { (void)u; }
