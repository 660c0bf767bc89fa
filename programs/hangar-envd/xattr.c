/* STUB */
#include "envd.h"
cJSON *envd_metadata_read(const char *path) { (void)path; return NULL; }
int envd_metadata_write(const char *path, const char *const *keys, const char *const *values, size_t n) { (void)path; (void)keys; (void)values; (void)n; return 0; }
