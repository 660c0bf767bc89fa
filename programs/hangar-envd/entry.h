/*
 * EntryInfo (entry.c), shared by the filesystem service (filesystem.c) and
 * the directory watches (watch.c).
 */
#pragma once

#include <sys/stat.h>

#include "envd.h"

/* EntryInfo of path (lstat-based, as upstream); NULL with err set when it
 * cannot be stat'ed (not_found when missing). */
cJSON *envd_entry_info(const char *path, struct rpc_error *err);

/* EntryInfo from an lstat result of path; NULL when out of memory. */
cJSON *envd_entry_from_stat(const char *path, const struct stat *lst);
