/*
 * Directory watches (watch.c) for the filesystem service.
 */
#pragma once

#include "envd.h"

/* WatchDir: arms inotify, sends {"start":{}}, then streams events until the
 * client leaves, the deadline passes or the watcher fails. */
int watch_rpc_watch_dir(struct envd_req *r, const cJSON *in, struct envd_stream *s, struct rpc_error *err);

/* CreateWatcher / GetWatcherEvents / RemoveWatcher: a watcher that buffers
 * events until polled and lives until removed (or the daemon stops). */
int watch_rpc_create(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err);
int watch_rpc_get_events(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err);
int watch_rpc_remove(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err);

/* Lets watches be made again (after a shutdown). Always 0. */
int watch_service_init(void);
/* Stops and frees every watcher; new watches are refused afterwards. */
void watch_service_shutdown(void);

