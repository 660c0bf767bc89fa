/*
 * The request a handler sees, and the REST error it can answer with.
 *
 * A module of its own so the handlers (the /files routes, auth.c, the RPC
 * services) and the server that calls them (server.c) each depend on it,
 * not on one another.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "envd.h"

struct MHD_Connection;
struct MHD_Response;

struct envd_req {
	struct MHD_Connection *conn;
	const char *method;
	const char *url;             /* path only */
	struct envd_user user;       /* run-as user (Basic auth or default) */
	int64_t timeout_ms;          /* Connect-Timeout-Ms, -1 when absent */
	int keepalive_sec;           /* Keepalive-Ping-Interval, clamped */
};

/* A request header (case-insensitive), or NULL. */
const char *envd_req_header(const struct envd_req *r, const char *name);
/* A query argument, or NULL. */
const char *envd_req_query(const struct envd_req *r, const char *name);

/* An envd REST error: {"code":<status>,"message":…}; NULL when out of memory. */
struct MHD_Response *envd_rest_error(int status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
