/*
 * The control API's answers as the e2b provider decodes them, for every
 * flavour (E2B cloud and self-hosted, CubeAPI): the first byte says what
 * the rest is, an error body (0) or a JSON answer (a sandbox detail, a list, a
 * create or connect answer, a template list, metrics, logs, fork results),
 * which is run through every decoder, at its top level and for each
 * element. What a decoder hands on must keep its
 * promises: ids fit in a URL path, messages are one short printable line.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

#define LOG_MESSAGE_MAX 4096

static void check_line(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n > max)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			abort();
}

static void decode_all(const cJSON *x)
{
	struct e2b_sandbox_fields f;
	struct hangar_template_info info = { HANGAR_TEMPLATE_INFO_VERSION, sizeof(info), NULL, "", "", "e2b" };
	struct hangar_sandbox_metric m;
	struct hangar_sandbox_log_entry e;
	char why[256];
	int r;

	if (e2b_decode_sandbox(x, &f) == 0) {
		if (!e2b_valid_id(f.id) || strlen(f.id) > E2B_ID_MAX)
			abort();
		if (f.domain && !f.domain_bad && !e2b_valid_domain(f.domain))
			abort();
		if (f.started_us < 0 || f.end_us < 0)
			abort();
	}
	if (e2b_decode_template(x, &info) == 0 && (!info.template_id || !info.name || !info.status))
		abort();
	if (e2b_decode_metric(x, &m) == 0 && m.cpu_count > 65536)
		abort();
	r = e2b_decode_log(x, &e, LOG_MESSAGE_MAX);
	if (r == 0) {
		check_line(e.level, 16);
		check_line(e.message, LOG_MESSAGE_MAX);
	}
	free((char *)e.level);
	free((char *)e.message);
	r = e2b_decode_fork_error(x, why, sizeof(why));
	if (r != HANGAR_ECAPACITY && r != HANGAR_ECREATE)
		abort();
	check_line(why, 200);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *body = (const char *)data + 1;
	char text[256];
	cJSON *j;

	if (size < 1)
		return 0;
	size--;
	if (data[0] == 0) {
		e2b_error_text(body, size, text, sizeof(text));
		check_line(text, 200);
		e2b_body_is_json_object(body, size);
		e2b_capacity_error(body, size);
		return 0;
	}
	j = cJSON_ParseWithLength(body, size);
	decode_all(j);
	for (const cJSON *c = j ? j->child : NULL; c; c = c->next) {
		decode_all(c);
		for (const cJSON *g = c->child; g; g = g->next)
			decode_all(g);
	}
	cJSON_Delete(j);
	return 0;
}
