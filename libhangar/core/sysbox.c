/* The setters providers use to describe sandboxes (hangar/sys/provider.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sysbox.h"

/* Header lines may hold tokens: they leave no copy behind in freed memory. */
static void free_lines(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		explicit_bzero(v[i], strlen(v[i]));
		free(v[i]);
	}
	free(v);
}

void sysbox_clear(struct hangar_sys_sandbox *sb)
{
	free(sb->id);
	free(sb->envd_url);
	free(sb->envd_socket);
	free(sb->envd_ca_file);
	if (sb->access_token) {
		/* Tokens leave no copy behind in freed memory. */
		explicit_bzero(sb->access_token, strlen(sb->access_token));
		free(sb->access_token);
	}
	free_lines(sb->headers, sb->nheaders);
	free(sb->port_url);
	free_lines(sb->port_headers, sb->nport_headers);
	free(sb->user);
	free(sb->template_id);
	free(sb->error_message);
	memset(sb, 0, sizeof(*sb));
}

static int set_str(char **dst, const char *v, const char *what)
{
	char *c;

	if (!v)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "%s is NULL", what);
	c = strdup(v);
	if (!c)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	free(*dst);
	*dst = c;
	return 0;
}

int hangar_sys_sandbox_set_id(hangar_sys_sandbox *sb, const char *id)
{
	size_t n;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(id, "id is NULL");
	n = strlen(id);
	if (n == 0 || n > 64 || strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != n)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "invalid sandbox id from provider");
	return set_str(&sb->id, id, "id");
}

int hangar_sys_sandbox_set_state(hangar_sys_sandbox *sb, int state)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(state == HANGAR_SANDBOX_RUNNING || state == HANGAR_SANDBOX_PAUSED, "state");
	sb->state = state;
	return 0;
}

int hangar_sys_sandbox_set_envd_url(hangar_sys_sandbox *sb, const char *url)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(url && (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)), "url must be http(s)");
	return set_str(&sb->envd_url, url, "url");
}

int hangar_sys_sandbox_set_envd_socket(hangar_sys_sandbox *sb, const char *path)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && path[0] == '/', "path must be absolute");
	return set_str(&sb->envd_socket, path, "path");
}

int hangar_sys_sandbox_set_envd_ca_file(hangar_sys_sandbox *sb, const char *path)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(path && path[0] == '/', "path must be absolute");
	return set_str(&sb->envd_ca_file, path, "path");
}

int hangar_sys_sandbox_set_access_token(hangar_sys_sandbox *sb, const char *token)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(token && !strpbrk(token, "\r\n"), "token");
	return set_str(&sb->access_token, token, "token");
}

/* Appends "name: value" to the NULL-terminated *v of *n lines. */
static int add_line(char ***v, size_t *n, const char *name, const char *value)
{
	char **nv, *line;
	size_t len;

	HCHECK_ARG(name && *name && !strpbrk(name, ":\r\n "), "header name");
	HCHECK_ARG(value && !strpbrk(value, "\r\n"), "header value");
	len = strlen(name) + strlen(value) + 3;
	line = malloc(len);
	nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!line || !nv) {
		free(line);
		if (nv)
			*v = nv;
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	snprintf(line, len, "%s: %s", name, value);
	*v = nv;
	nv[(*n)++] = line;
	nv[*n] = NULL;
	return 0;
}

int hangar_sys_sandbox_add_header(hangar_sys_sandbox *sb, const char *name, const char *value)
{
	HCHECK_ARG(sb, "sb is NULL");
	return add_line(&sb->headers, &sb->nheaders, name, value);
}

int hangar_sys_sandbox_set_port_url(hangar_sys_sandbox *sb, const char *url)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(url && (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) && !strpbrk(url, " \r\n"),
		   "url must be http(s)");
	return set_str(&sb->port_url, url, "url");
}

int hangar_sys_sandbox_add_port_header(hangar_sys_sandbox *sb, const char *name, const char *value)
{
	HCHECK_ARG(sb, "sb is NULL");
	return add_line(&sb->port_headers, &sb->nport_headers, name, value);
}

int hangar_sys_sandbox_set_user(hangar_sys_sandbox *sb, const char *user)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(user && *user && !strchr(user, ':'), "user");
	return set_str(&sb->user, user, "user");
}

int hangar_sys_sandbox_set_template(hangar_sys_sandbox *sb, const char *template_id)
{
	HCHECK_ARG(sb, "sb is NULL");
	return set_str(&sb->template_id, template_id, "template_id");
}

int hangar_sys_sandbox_set_times(hangar_sys_sandbox *sb, int64_t created_at_us, int64_t expires_at_us)
{
	HCHECK_ARG(sb, "sb is NULL");
	sb->created_at_us = created_at_us;
	sb->expires_at_us = expires_at_us;
	return 0;
}

int hangar_sys_sandbox_set_error(hangar_sys_sandbox *sb, int code, const char *message)
{
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(code < 0, "code must be a negative HANGAR_E* code");
	HCHECK_ARG(message, "message is NULL");
	sb->error = code;
	return set_str(&sb->error_message, message, "message");
}

hangar_sys_sandbox *hangar_sys_list_add(hangar_sys_list *list)
{
	struct hangar_sys_sandbox *sb;

	if (!list)
		return NULL;
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->state = HANGAR_SANDBOX_RUNNING;
	*list->tail = sb;
	list->tail = &sb->next;
	return sb;
}
