/* The request accessors and REST errors (request.h). */
#include "request.h"

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *envd_req_header(const struct envd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *envd_req_query(const struct envd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct MHD_Response *envd_rest_error(int status, const char *fmt, ...)
{
	char msg[1024];
	cJSON *o = cJSON_CreateObject();
	char *json;
	const char *json_text;
	struct MHD_Response *resp;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(o, "code", status);
	cJSON_AddStringToObject(o, "message", msg);
	json = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	json_text = json ? json : "{}";
	resp = MHD_create_response_from_buffer(strlen(json_text), (void *)json_text, MHD_RESPMEM_MUST_COPY);
	free(json);
	if (resp) {
		MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
		MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	}
	return resp;
}
