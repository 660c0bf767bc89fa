/*
 * For the JSON fuzzers: aborts unless every member name and string value
 * of a parsed tree is valid UTF-8 without NUL (as the strict check
 * promises of what it lets through).
 */
#ifndef FUZZ_JSON_STRINGS_H
#define FUZZ_JSON_STRINGS_H

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "sjson.h"

static inline void every_string_is_text(const cJSON *it)
{
	for (; it; it = it->next) {
		if (it->string && !sjson_text_ok(it->string, strlen(it->string)))
			abort();
		if (cJSON_IsString(it) && !sjson_text_ok(it->valuestring, strlen(it->valuestring)))
			abort();
		every_string_is_text(it->child);
	}
}

#endif
