/*
 * The strict JSON check (libhangar/util/sjson.c) on any bytes: the message
 * is always a bounded, valid UTF-8 string; what it accepts is valid UTF-8
 * without a raw NUL, cJSON parses it, no string in the tree holds a NUL or
 * bad UTF-8, and cJSON's own printing of it is accepted again.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json-strings.h"
#include "sjson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	/* Small buffers too, where a message must be cut on a character boundary. */
	size_t errlen = size ? 1 + data[0] % 96 : 64;
	char *err = malloc(errlen);
	unsigned depth = size > 1 ? data[size - 1] % 40 : 0;

	if (!err)
		return 0;
	memset(err, 'x', errlen);
	int rc = sjson_check(text, size, depth, err, errlen);
	if (strnlen(err, errlen) >= errlen || !sjson_text_ok(err, strlen(err)))
		abort();
	if (rc == 0 && err[0])
		abort();
	if (rc != 0 && errlen > 1 && !err[0])
		abort();
	if (rc == 0) {
		if (!sjson_text_ok(text, size))
			abort();
		char err2[256];
		cJSON *doc = sjson_parse(text, size, depth, err2, sizeof(err2));
		if (!doc)
			abort();
		every_string_is_text(doc);
		char *again = cJSON_PrintUnformatted(doc);
		if (again && sjson_check(again, strlen(again), depth, err2, sizeof(err2)) != 0)
			abort();
		free(again);
		cJSON_Delete(doc);
	}
	free(err);
	return 0;
}
