/*
 * libmicrohttpd's own error answers, in hangard's words.
 *
 * libmicrohttpd refuses some requests before hangard sees them: a request
 * line or headers that do not fit in the memory it keeps per connection
 * (past twice HANGARD_HEADER_LIMIT_BYTES), a request it cannot parse, an
 * HTTP version it does not speak. It answers those with a short HTML page
 * of its own, made by one call to MHD_create_response_from_buffer.
 *
 * This file is linked only when hangard links libmicrohttpd's static
 * archive, with the linker's --wrap for that function (meson.build): the
 * archive's call then comes here, and so do hangard's own. Ours pass
 * through unchanged; the library's page, which is the only HTML any of
 * them makes, is replaced by the JSON error every other answer carries,
 * with the X-Request-Id that libmicrohttpd's log line (server.c) got.
 * tests/hangard/test_strict.py fails if a libmicrohttpd of another shape
 * stops calling here.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "hangard.h"

struct MHD_Response *__real_MHD_create_response_from_buffer(size_t size, void *buffer,
							    enum MHD_ResponseMemoryMode mode);
struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
							    enum MHD_ResponseMemoryMode mode);

/* Its pages are static HTML; nothing hangard answers is. */
static int is_library_page(size_t size, const void *buffer, enum MHD_ResponseMemoryMode mode)
{
	static const char head[] = "<html>";

	return mode == MHD_RESPMEM_PERSISTENT && buffer && size >= sizeof(head) - 1 &&
	       memcmp(buffer, head, sizeof(head) - 1) == 0;
}

/* The status the page goes out with, from the library's log line, or else from its title. */
static unsigned page_status(unsigned logged, const char *page, size_t size)
{
	if (logged)
		return logged;
	if (memmem(page, size, "too big", 7))
		return 431;
	return 400;
}

struct MHD_Response *__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
							    enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *resp;
	char id[REQUEST_ID_SIZE];
	unsigned status;
	cJSON *doc;
	char *text;

	if (!is_library_page(size, buffer, mode))
		return __real_MHD_create_response_from_buffer(size, buffer, mode);
	status = page_status(server_library_refusal(id), buffer, size);
	doc = library_error_body(status);
	text = doc ? cJSON_PrintUnformatted(doc) : NULL;
	cJSON_Delete(doc);
	if (!text)
		/* Out of memory: the library's own page, rather than none. */
		return __real_MHD_create_response_from_buffer(size, buffer, mode);
	resp = __real_MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return NULL;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "X-Request-Id", id);
	return resp;
}
