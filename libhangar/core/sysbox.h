/*
 * What a provider reports about a sandbox: the structures behind the public
 * hangar_sys_sandbox and hangar_sys_list, filled by a provider through the
 * setters of hangar/sys/provider.h (core/sysbox.c), read by the layers that
 * create and attach sandboxes.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* What a provider reported about a sandbox (hangar_sys_sandbox). */
struct hangar_sys_sandbox {
	char *id;
	int state;
	char *envd_url;
	char *envd_socket;
	char *envd_ca_file;       /* PEM CAs trusted for an https envd besides the system's */
	char *access_token;
	char **headers;           /* "Name: value", NULL-terminated */
	size_t nheaders;
	char *port_url;           /* where a user port answers, {port} standing for it; NULL: none */
	char **port_headers;      /* "Name: value" for a user port, {port} in values; NULL-terminated */
	size_t nport_headers;
	char *user;
	char *template_id;
	int64_t created_at_us;
	int64_t expires_at_us;
	int error;                /* fork(): this fork failed with this code */
	char *error_message;
	struct hangar_sys_sandbox *next; /* in a hangar_sys_list */
};

struct hangar_sys_list {
	struct hangar_sys_sandbox *head, **tail;
};

void sysbox_clear(struct hangar_sys_sandbox *sb);   /* frees the contents, zeroes it */

