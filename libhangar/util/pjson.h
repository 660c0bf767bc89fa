/*
 * Proto3 JSON mapping helpers on cJSON: fields are found by their
 * lowerCamelCase or proto name, scalar kinds accept every spelling proto3 JSON
 * allows (int64 as string or number, enums as name or number, bytes as
 * standard or URL-safe base64 with or without padding), unknown fields are
 * simply never looked at.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* The member named camel or snake (snake may be NULL), or NULL. */
const cJSON *pjson_field(const cJSON *obj, const char *camel, const char *snake);

/*
 * Typed getters. Each returns 1 when the field is present and well formed
 * (storing the value), 0 when it is absent or null (leaving *out alone), and
 * -1 when it is present with the wrong type or out of range.
 */
int pjson_string(const cJSON *obj, const char *camel, const char *snake, const char **out);
int pjson_bool(const cJSON *obj, const char *camel, const char *snake, int *out);
int pjson_uint32(const cJSON *obj, const char *camel, const char *snake, uint32_t *out);
int pjson_int32(const cJSON *obj, const char *camel, const char *snake, int32_t *out);
int pjson_int64(const cJSON *obj, const char *camel, const char *snake, int64_t *out);
/* names[i] is the enum name for value values[i]; n entries. */
int pjson_enum(const cJSON *obj, const char *camel, const char *snake, const char *const *names,
	       const int *values, size_t n, int *out);
/* Decodes base64 into a malloc'd buffer (*out, *out_len); the caller frees it. */
int pjson_bytes(const cJSON *obj, const char *camel, const char *snake, unsigned char **out,
		size_t *out_len);

/* Standard base64 with padding, as proto3 JSON emits bytes. NULL when out of memory. */
char *pjson_b64_encode(const void *data, size_t len);
/* Accepts standard and URL-safe alphabets, padded or not. Returns 0 or -1. */
int pjson_b64_decode(const char *s, size_t slen, unsigned char **out, size_t *out_len);

/* Adds an int64 as a JSON string; a zero is omitted, as proto3 JSON does. */
int pjson_add_int64(cJSON *obj, const char *name, int64_t v);
/* RFC 3339 in UTC with nanoseconds: "2026-10-13T16:13:31.282056477Z". */
void pjson_format_timestamp(char out[40], int64_t sec, long nsec);
/* Parses an RFC 3339 timestamp. Returns 0 or -1. */
int pjson_parse_timestamp(const char *s, int64_t *sec, long *nsec);
