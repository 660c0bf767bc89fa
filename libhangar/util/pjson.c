#define _GNU_SOURCE
#include "pjson.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const cJSON *pjson_field(const cJSON *obj, const char *camel, const char *snake)
{
	const cJSON *it;

	if (!cJSON_IsObject(obj))
		return NULL;
	it = cJSON_GetObjectItemCaseSensitive(obj, camel);
	if (!it && snake)
		it = cJSON_GetObjectItemCaseSensitive(obj, snake);
	if (it && cJSON_IsNull(it))
		return NULL;
	return it;
}

int pjson_string(const cJSON *obj, const char *camel, const char *snake, const char **out)
{
	const cJSON *it = pjson_field(obj, camel, snake);

	if (!it)
		return 0;
	if (!cJSON_IsString(it) || !it->valuestring)
		return -1;
	*out = it->valuestring;
	return 1;
}

int pjson_bool(const cJSON *obj, const char *camel, const char *snake, int *out)
{
	const cJSON *it = pjson_field(obj, camel, snake);

	if (!it)
		return 0;
	if (!cJSON_IsBool(it))
		return -1;
	*out = cJSON_IsTrue(it) ? 1 : 0;
	return 1;
}

/* A JSON number or a decimal string (proto3 accepts both for every integer kind). */
static int integer_of(const cJSON *it, int64_t lo, int64_t hi, int64_t *out)
{
	if (cJSON_IsNumber(it)) {
		double d = it->valuedouble;

		/* hi + 1 rounds to a power of two for INT64_MAX, so 2^63 itself is refused. */
		if (!isfinite(d) || d != floor(d) || d < (double)lo || d >= (double)hi + 1.0)
			return -1;
		*out = (int64_t)d;
		return 1;
	}
	if (cJSON_IsString(it) && it->valuestring && it->valuestring[0]) {
		const char *s = it->valuestring;
		char *end;
		long long v;

		errno = 0;
		v = strtoll(s, &end, 10);
		if (errno || *end || end == s || v < lo || v > hi)
			return -1;
		*out = v;
		return 1;
	}
	return -1;
}

int pjson_uint32(const cJSON *obj, const char *camel, const char *snake, uint32_t *out)
{
	const cJSON *it = pjson_field(obj, camel, snake);
	int64_t v;

	if (!it)
		return 0;
	if (integer_of(it, 0, UINT32_MAX, &v) < 0)
		return -1;
	*out = (uint32_t)v;
	return 1;
}

int pjson_int32(const cJSON *obj, const char *camel, const char *snake, int32_t *out)
{
	const cJSON *it = pjson_field(obj, camel, snake);
	int64_t v;

	if (!it)
		return 0;
	if (integer_of(it, INT32_MIN, INT32_MAX, &v) < 0)
		return -1;
	*out = (int32_t)v;
	return 1;
}

int pjson_int64(const cJSON *obj, const char *camel, const char *snake, int64_t *out)
{
	const cJSON *it = pjson_field(obj, camel, snake);
	int64_t v;

	if (!it)
		return 0;
	/* Doubles lose precision above 2^53; strings carry the full range. */
	if (integer_of(it, INT64_MIN, INT64_MAX, &v) < 0)
		return -1;
	*out = v;
	return 1;
}

int pjson_enum(const cJSON *obj, const char *camel, const char *snake, const char *const *names,
	       const int *values, size_t n, int *out)
{
	const cJSON *it = pjson_field(obj, camel, snake);

	if (!it)
		return 0;
	if (cJSON_IsString(it) && it->valuestring) {
		for (size_t i = 0; i < n; i++)
			if (strcmp(names[i], it->valuestring) == 0) {
				*out = values[i];
				return 1;
			}
		return -1;
	}
	if (cJSON_IsNumber(it)) {
		int64_t v;

		if (integer_of(it, INT32_MIN, INT32_MAX, &v) < 0)
			return -1;
		/* proto3 open enums keep unknown numbers; callers decide what they mean. */
		*out = (int)v;
		return 1;
	}
	return -1;
}

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *pjson_b64_encode(const void *data, size_t len)
{
	const unsigned char *p = data;
	size_t outlen;
	char *out, *o;

	if (len > (SIZE_MAX - 1) / 4 * 3 - 3)
		return NULL;
	outlen = (len + 2) / 3 * 4;
	out = malloc(outlen + 1);
	if (!out)
		return NULL;
	o = out;
	while (len >= 3) {
		*o++ = b64_alphabet[p[0] >> 2];
		*o++ = b64_alphabet[(p[0] & 3) << 4 | p[1] >> 4];
		*o++ = b64_alphabet[(p[1] & 15) << 2 | p[2] >> 6];
		*o++ = b64_alphabet[p[2] & 63];
		p += 3;
		len -= 3;
	}
	if (len) {
		*o++ = b64_alphabet[p[0] >> 2];
		if (len == 1) {
			*o++ = b64_alphabet[(p[0] & 3) << 4];
			*o++ = '=';
		} else {
			*o++ = b64_alphabet[(p[0] & 3) << 4 | p[1] >> 4];
			*o++ = b64_alphabet[(p[1] & 15) << 2];
		}
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int pjson_b64_decode(const char *s, size_t slen, unsigned char **out, size_t *out_len)
{
	unsigned char *buf, *o;
	uint32_t acc = 0;
	int bits = 0;

	while (slen > 0 && s[slen - 1] == '=')
		slen--;
	if (slen % 4 == 1)
		return -1;
	buf = malloc(slen / 4 * 3 + 3);
	if (!buf)
		return -1;
	o = buf;
	for (size_t i = 0; i < slen; i++) {
		int v = b64_value((unsigned char)s[i]);

		if (v < 0) {
			free(buf);
			return -1;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (unsigned char)(acc >> bits);
		}
	}
	*out = buf;
	*out_len = (size_t)(o - buf);
	return 0;
}

int pjson_bytes(const cJSON *obj, const char *camel, const char *snake, unsigned char **out,
		size_t *out_len)
{
	const cJSON *it = pjson_field(obj, camel, snake);

	if (!it)
		return 0;
	if (!cJSON_IsString(it) || !it->valuestring)
		return -1;
	if (pjson_b64_decode(it->valuestring, strlen(it->valuestring), out, out_len) < 0)
		return -1;
	return 1;
}

int pjson_add_int64(cJSON *obj, const char *name, int64_t v)
{
	char tmp[24];

	if (v == 0)
		return 0;
	snprintf(tmp, sizeof(tmp), "%" PRId64, v);
	return cJSON_AddStringToObject(obj, name, tmp) ? 0 : -1;
}

void pjson_format_timestamp(char out[40], int64_t sec, long nsec)
{
	struct tm tm;
	time_t t = (time_t)sec;
	size_t n;

	if (!gmtime_r(&t, &tm)) {
		snprintf(out, 40, "1970-01-01T00:00:00Z");
		return;
	}
	n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec > 0)
		snprintf(out + n, 40 - n, ".%09ldZ", nsec);
	else
		snprintf(out + n, 40 - n, "Z");
}

int pjson_parse_timestamp(const char *s, int64_t *sec, long *nsec)
{
	struct tm tm;
	const char *p;
	long frac = 0;
	int digits = 0;
	long off = 0;

	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -1;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (digits < 9) {
				frac = frac * 10 + (*p - '0');
				digits++;
			}
			p++;
		}
		if (digits == 0)
			return -1;
		while (digits++ < 9)
			frac *= 10;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		/* Exactly "+HH:MM": two digits, a colon, two digits. */
		const char *d = p + 1;
		int hh, mm;

		for (int i = 0; i < 5; i++)
			if (i == 2 ? d[i] != ':' : (d[i] < '0' || d[i] > '9'))
				return -1;
		hh = (d[0] - '0') * 10 + (d[1] - '0');
		mm = (d[3] - '0') * 10 + (d[4] - '0');
		if (hh > 23 || mm > 59)
			return -1;
		off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*sec = (int64_t)timegm(&tm) - off;
	*nsec = frac;
	return 0;
}
