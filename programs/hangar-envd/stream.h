/* Server-stream plumbing private to server.c and stream.c. */
#pragma once

#include "envd.h"

struct MHD_Response;

/* A new stream for a request on conn (refcount 1, the handler's). */
struct envd_stream *envd_stream_new(struct MHD_Connection *conn, int keepalive_sec);
/* The chunked response that drains s; takes a reference for the connection. */
struct MHD_Response *envd_stream_response(struct envd_stream *s);
