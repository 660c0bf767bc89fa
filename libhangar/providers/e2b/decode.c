/* Decoding of the control API's answers (decode.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "util/pjson.h"
#include "util/sjson.h"

int e2b_valid_id(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 0 && n <= E2B_ID_MAX &&
	       strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int e2b_valid_domain(const char *d)
{
	size_t n = strlen(d);

	return n > 0 && n < 254 && d[0] != '.' && d[0] != '-' &&
	       strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") == n;
}

const char *e2b_jstr(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;

	return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

int64_t e2b_jtime_us(const cJSON *obj, const char *name)
{
	const char *s = e2b_jstr(obj, name);
	int64_t sec;
	long nsec;

	if (!s || pjson_parse_timestamp(s, &sec, &nsec) != 0)
		return 0;
	/* A time no clock of ours reaches is as good as none (and would overflow). */
	if (sec < 0 || sec > INT64_MAX / 1000000 - 1)
		return 0;
	return sec * 1000000 + nsec / 1000;
}

void e2b_error_text(const char *body, size_t len, char *out, size_t size)
{
	const char *src = NULL;
	size_t n = 0, o = 0;
	cJSON *j = NULL;

	if (size == 0)
		return;
	out[0] = '\0';
	if (!body || len == 0)
		return;
	j = sjson_parse(body, len, 0, NULL, 0);
	if (cJSON_IsObject(j)) {
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");

		if (!cJSON_IsString(m))
			m = cJSON_GetObjectItemCaseSensitive(j, "error");
		if (cJSON_IsString(m)) {
			src = m->valuestring;
			n = strlen(src);
		}
	} else if (!j) {
		src = body;
		n = len;
	}
	for (size_t i = 0; src && i < n && o + 1 < size && o < 200; i++) {
		unsigned char c = (unsigned char)src[i];

		if (c == '\n' || c == '\r')
			break;
		out[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	out[o] = '\0';
	cJSON_Delete(j);
}

int e2b_body_is_json_object(const char *body, size_t len)
{
	cJSON *j = body && len ? sjson_parse(body, len, 0, NULL, 0) : NULL;
	int is = cJSON_IsObject(j);

	cJSON_Delete(j);
	return is;
}

int e2b_capacity_error(const char *body, size_t len)
{
	static const char *const codes[] = { "sandbox_capacity_unavailable", "sandbox_no_compatible_node",
					     "sandbox_placement_timeout" };

	for (size_t i = 0; body && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (memmem(body, len, codes[i], strlen(codes[i])))
			return 1;
	return 0;
}

int e2b_decode_sandbox(const cJSON *j, struct e2b_sandbox_fields *f)
{
	const char *state;

	memset(f, 0, sizeof(*f));
	f->id = e2b_jstr(j, "sandboxID");
	if (!f->id || !e2b_valid_id(f->id)) {
		f->id = NULL;
		return -1;
	}
	f->template_id = e2b_jstr(j, "templateID");
	f->envd_token = e2b_jstr(j, "envdAccessToken");
	f->traffic_token = e2b_jstr(j, "trafficAccessToken");
	f->domain = e2b_jstr(j, "domain");
	f->domain_bad = f->domain && !e2b_valid_domain(f->domain);
	f->create_id = e2b_jstr(cJSON_GetObjectItemCaseSensitive(j, "metadata"), E2B_CREATE_ID_KEY);
	state = e2b_jstr(j, "state");
	f->paused = state && (!strcmp(state, "paused") || !strcmp(state, "pausing"));
	f->started_us = e2b_jtime_us(j, "startedAt");
	f->end_us = e2b_jtime_us(j, "endAt");
	return 0;
}

int e2b_decode_template(const cJSON *t, struct hangar_template_info *info)
{
	const cJSON *names = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "names") : NULL;
	const cJSON *aliases = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "aliases") : NULL;
	const char *st;

	info->template_id = e2b_jstr(t, "templateID");
	if (!info->template_id)
		return -1;
	info->name = "";
	if (cJSON_IsArray(names) && cJSON_IsString(names->child))
		info->name = names->child->valuestring;
	else if (cJSON_IsArray(aliases) && cJSON_IsString(aliases->child))
		info->name = aliases->child->valuestring;
	st = e2b_jstr(t, "buildStatus");
	if (!st)
		st = e2b_jstr(t, "status");
	info->status = st ? st : "";
	return 0;
}

static double jnum(const cJSON *o, const char *name, int *ok)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!cJSON_IsNumber(v) || v->valuedouble != v->valuedouble || v->valuedouble < 0 ||
	    v->valuedouble > 9.2e18) {
		*ok = 0;
		return 0;
	}
	return v->valuedouble;
}

int e2b_decode_metric(const cJSON *x, struct hangar_sandbox_metric *m)
{
	int ok = 1;
	double cpus;

	if (!cJSON_IsObject(x))
		return -1;
	m->version = HANGAR_SANDBOX_METRIC_VERSION;
	m->size = sizeof(*m);
	if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(x, "timestampUnix"))) {
		double t = jnum(x, "timestampUnix", &ok);

		m->timestamp_us = t < 9.2e12 ? (int64_t)t * 1000000 : 0;
	} else {
		m->timestamp_us = e2b_jtime_us(x, "timestamp");
	}
	cpus = jnum(x, "cpuCount", &ok);
	m->cpu_count = (uint32_t)(cpus > 65536 ? 0 : cpus);
	m->cpu_used_pct = jnum(x, "cpuUsedPct", &ok);
	m->mem_used_bytes = (uint64_t)jnum(x, "memUsed", &ok);
	m->mem_total_bytes = (uint64_t)jnum(x, "memTotal", &ok);
	m->disk_used_bytes = (uint64_t)jnum(x, "diskUsed", &ok);
	m->disk_total_bytes = (uint64_t)jnum(x, "diskTotal", &ok);
	return ok ? 0 : -1;
}

char *e2b_clean_line(const char *src, size_t max)
{
	size_t n = src ? strnlen(src, max) : 0;
	char *out = malloc(n + 1);

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];

		out[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	if (n == max && src[n]) {
		/* Cut: drop the last character, which may have been cut in half. */
		while (n > 0 && ((unsigned char)out[n - 1] & 0xc0) == 0x80)
			n--;
		if (n > 0 && ((unsigned char)out[n - 1] & 0xc0) == 0xc0)
			n--;
	}
	out[n] = '\0';
	return out;
}

int e2b_decode_log(const cJSON *x, struct hangar_sandbox_log_entry *e, size_t message_max)
{
	const cJSON *msg = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "message") : NULL;
	const char *level = e2b_jstr(x, "level");

	e->level = NULL;
	e->message = NULL;
	if (!cJSON_IsString(msg))
		return -1;
	e->version = HANGAR_SANDBOX_LOG_ENTRY_VERSION;
	e->size = sizeof(*e);
	e->timestamp_us = e2b_jtime_us(x, "timestamp");
	e->level = e2b_clean_line(level ? level : "info", 16);
	e->message = e2b_clean_line(msg->valuestring, message_max);
	return e->level && e->message ? 0 : -2;
}

int e2b_decode_fork_error(const cJSON *err, char *why, size_t size)
{
	const cJSON *code = cJSON_IsObject(err) ? cJSON_GetObjectItemCaseSensitive(err, "code") : NULL;
	const char *reason = e2b_jstr(err, "message"), *ec = e2b_jstr(err, "error_code");
	char *line = e2b_clean_line(reason ? reason : "no reason given", 200);

	if (size)
		snprintf(why, size, "%s", line ? line : "");
	free(line);
	if ((cJSON_IsNumber(code) && code->valuedouble == 429) || (ec && strstr(ec, "capacity")))
		return HANGAR_ECAPACITY;
	return HANGAR_ECREATE;
}
