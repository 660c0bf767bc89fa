#pragma once

#include <stdint.h>

struct server_opts {
	const char *bind_addr;   /* NULL: 0.0.0.0 */
	uint16_t port;
	const char *socket_path; /* unix socket instead of TCP */
	int listen_fd;           /* an already listening socket, or -1 */
	uint16_t bound_port;     /* out: the TCP port listened on (for -port 0) */
};

struct MHD_Daemon;

/* Starts the HTTP server; NULL with a message on stderr on failure. */
struct MHD_Daemon *server_start(struct server_opts *o);
