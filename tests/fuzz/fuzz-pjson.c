/*
 * The proto3 JSON helpers as the daemon uses them: parse a request with
 * cJSON, then read it the way StartRequest, SendInputRequest, Update and
 * the selectors are read, plus every getter over every member found.
 * Decoded bytes must re-encode to something that decodes the same; parsed
 * timestamps must format and parse back to the same instant.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pjson.h"

static const char *const signal_names[] = { "SIGNAL_UNSPECIFIED", "SIGNAL_SIGTERM", "SIGNAL_SIGKILL" };
static const int signal_values[] = { 0, 15, 9 };

static void check_bytes(const cJSON *obj, const char *camel, const char *snake)
{
	unsigned char *out = NULL, *again = NULL;
	size_t len = 0, len2 = 0;
	char *enc;
	int r = pjson_bytes(obj, camel, snake, &out, &len);

	if (r != 1)
		return;
	enc = pjson_b64_encode(out, len);
	if (!enc)
		abort();
	if (strlen(enc) != (len + 2) / 3 * 4)
		abort();
	if (pjson_b64_decode(enc, strlen(enc), &again, &len2) != 0 || len2 != len ||
	    (len && memcmp(out, again, len) != 0))
		abort();
	free(again);
	free(enc);
	free(out);
}

static void check_timestamp(const char *s)
{
	int64_t sec, sec2;
	long nsec, nsec2;
	char buf[40];

	if (pjson_parse_timestamp(s, &sec, &nsec) != 0)
		return;
	if (nsec < 0 || nsec > 999999999)
		abort();
	/* Years 0..9999 only: the format has four year digits. */
	if (sec < -62135596800LL || sec > 253402300799LL)
		return;
	pjson_format_timestamp(buf, sec, nsec);
	if (pjson_parse_timestamp(buf, &sec2, &nsec2) != 0 || sec2 != sec || nsec2 != nsec)
		abort();
}

/* Every getter on one field name; results only need to be self-consistent. */
static void all_getters(const cJSON *obj, const char *camel, const char *snake)
{
	const char *s = NULL;
	int b = -7, e = -7;
	uint32_t u = 7;
	int32_t i32 = 7;
	int64_t i64 = 7;
	int r;

	(void)pjson_field(obj, camel, snake);
	r = pjson_string(obj, camel, snake, &s);
	if (r == 1) {
		if (!s)
			abort();
		(void)strlen(s);
		check_timestamp(s);
		{
			unsigned char *out = NULL;
			size_t len = 0;

			if (pjson_b64_decode(s, strlen(s), &out, &len) == 0)
				free(out);
		}
	} else if (s) {
		abort(); /* left alone unless found */
	}
	r = pjson_bool(obj, camel, snake, &b);
	if (r == 1 && b != 0 && b != 1)
		abort();
	if (r != 1 && b != -7)
		abort();
	r = pjson_uint32(obj, camel, snake, &u);
	if (r != 1 && u != 7)
		abort();
	r = pjson_int32(obj, camel, snake, &i32);
	if (r != 1 && i32 != 7)
		abort();
	r = pjson_int64(obj, camel, snake, &i64);
	if (r != 1 && i64 != 7)
		abort();
	if (r == 1) {
		cJSON *tmp = cJSON_CreateObject();
		int64_t back = 0;

		if (tmp && pjson_add_int64(tmp, "v", i64) == 0 && i64 != 0 &&
		    (pjson_int64(tmp, "v", NULL, &back) != 1 || back != i64))
			abort();
		cJSON_Delete(tmp);
	}
	r = pjson_enum(obj, camel, snake, signal_names, signal_values, 3, &e);
	if (r != 1 && e != -7)
		abort();
	check_bytes(obj, camel, snake);
}

static void every_member(const cJSON *obj, int depth)
{
	if (!cJSON_IsObject(obj) || depth > 3)
		return;
	for (const cJSON *it = obj->child; it; it = it->next) {
		if (!it->string)
			continue;
		all_getters(obj, it->string, NULL);
		all_getters(obj, "noSuchField", it->string);
		every_member(it, depth + 1);
	}
}

/* StartRequest: process{cmd,args[],envs{},cwd}, tag, stdin, pty{size{cols,rows}}. */
static void as_start_request(const cJSON *in)
{
	const cJSON *proc = pjson_field(in, "process", NULL);
	const cJSON *pty = pjson_field(in, "pty", NULL);
	const cJSON *size = pjson_field(pty, "size", NULL);
	const char *s;
	int b;
	uint32_t u;

	(void)pjson_string(proc, "cmd", NULL, &s);
	(void)pjson_string(proc, "cwd", NULL, &s);
	(void)pjson_string(in, "tag", NULL, &s);
	(void)pjson_bool(in, "stdin", NULL, &b);
	for (const cJSON *a = cJSON_IsArray(pjson_field(proc, "args", NULL)) ? pjson_field(proc, "args", NULL)->child : NULL;
	     a; a = a->next)
		if (cJSON_IsString(a))
			(void)strlen(a->valuestring);
	for (const cJSON *e = cJSON_IsObject(pjson_field(proc, "envs", NULL)) ? pjson_field(proc, "envs", NULL)->child : NULL;
	     e; e = e->next)
		if (cJSON_IsString(e) && e->string)
			(void)strlen(e->valuestring);
	(void)pjson_uint32(size, "cols", NULL, &u);
	(void)pjson_uint32(size, "rows", NULL, &u);
}

/* Selector + SendInputRequest/SendSignalRequest/UpdateRequest. */
static void as_input_request(const cJSON *in)
{
	const cJSON *sel = pjson_field(in, "process", NULL);
	const cJSON *input = pjson_field(in, "input", NULL);
	const char *s;
	uint32_t pid;
	int sig;

	(void)pjson_uint32(sel, "pid", NULL, &pid);
	(void)pjson_string(sel, "tag", NULL, &s);
	check_bytes(input, "stdin", NULL);
	check_bytes(input, "pty", NULL);
	(void)pjson_enum(in, "signal", NULL, signal_names, signal_values, 3, &sig);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *in = cJSON_ParseWithLength((const char *)data, size);

	/* The raw bytes as base64 text, too. */
	{
		unsigned char *out = NULL;
		size_t len = 0;

		if (pjson_b64_decode((const char *)data, size, &out, &len) == 0) {
			if (len > size)
				abort();
			free(out);
		}
	}
	if (!in)
		return 0;
	as_start_request(in);
	as_input_request(in);
	every_member(in, 0);
	every_member(pjson_field(in, "process", NULL), 0);
	every_member(pjson_field(in, "pty", NULL), 0);
	every_member(pjson_field(in, "input", NULL), 0);
	cJSON_Delete(in);
	return 0;
}
