/*
 * hangard's request decoding (programs/hangard/body.c): a request target
 * and a JSON body, as sent. Whatever the bytes, a refusal has a valid UTF-8
 * message and an accepted body is an object of allowed members only, each
 * of whose strings is valid UTF-8 without NUL.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "json-strings.h"
#include "sjson.h"

static const char *const allowed[] = { "command", "env", "labels", "timeout", "cwd", "stdin", NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Up to the first newline: the target; after it: the body. */
	const uint8_t *nl = memchr(data, '\n', size);
	size_t tlen = nl ? (size_t)(nl - data) : size;
	char *target = malloc(tlen + 1), err[512];

	if (!target)
		return 0;
	memcpy(target, data, tlen);
	target[tlen] = '\0';
	err[0] = '\0';
	if (target_check(target, err, sizeof(err)) < 0 && (!err[0] || !sjson_text_ok(err, strlen(err))))
		abort();
	free(target);
	if (!nl)
		return 0;
	const char *body = (const char *)nl + 1;
	size_t blen = size - tlen - 1;
	err[0] = '\0';
	cJSON *doc = body_decode(body, blen, allowed, err, sizeof(err));
	if (!doc) {
		if (!err[0] || !sjson_text_ok(err, strlen(err)))
			abort();
		return 0;
	}
	if (!cJSON_IsObject(doc))
		abort();
	for (const cJSON *it = doc->child; it; it = it->next) {
		const char *const *a = allowed;
		while (*a && strcmp(*a, it->string) != 0)
			a++;
		if (!*a)
			abort();
	}
	every_string_is_text(doc);
	cJSON_Delete(doc);
	return 0;
}
