/* The thread's last error (hangar_error_last) and the code tables. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "util/sjson.h"

struct err_state {
	hangar_error e;
	char message[1024];
	char provider_code[64];
};

static __thread struct err_state last;

static void set_message(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/*
 * Messages quote what peers sent (ids, error bodies, paths): control bytes
 * and bytes that are not UTF-8 are written as \xNN, so one message is one
 * line of valid UTF-8 whatever it quotes.
 */
static void escape_controls(char *msg, size_t cap)
{
	char out[sizeof(last.message)];
	size_t n = 0;
	int any = 0;

	for (const char *p = msg; *p && n + 1 < sizeof(out); p++) {
		unsigned char c = (unsigned char)*p;

		if (c >= 0x20 && c < 0x7f) {
			out[n++] = (char)c;
			continue;
		}
		if (c >= 0x80) {
			size_t k = sjson_char_len(p, strnlen(p, 4));

			if (k) {
				if (n + k >= sizeof(out))
					break;
				memcpy(out + n, p, k);
				n += k;
				p += k - 1;
				continue;
			}
		}
		any = 1;
		if (n + 5 >= sizeof(out))
			break;
		n += (size_t)snprintf(out + n, sizeof(out) - n, "\\x%02x", c);
	}
	out[n] = '\0';
	if (any)
		snprintf(msg, cap, "%s", out);
}

static void set_message(const char *fmt, va_list ap)
{
	vsnprintf(last.message, sizeof(last.message), fmt, ap);
	escape_controls(last.message, sizeof(last.message));
	last.e.message = last.message;
}

static void reset(int code, int category)
{
	last.e.code = code;
	last.e.category = category;
	last.e.os_errno = 0;
	last.e.http_status = 0;
	last.e.retry_after_s = 0;
	last.e.flags = 0;
	last.provider_code[0] = '\0';
	last.e.provider_code = last.provider_code;
	last.e.message = last.message;
}

int herr(int code, int category, const char *fmt, ...)
{
	va_list ap;

	reset(code, category);
	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	return code;
}

int herr_http(int code, int category, int http_status, const char *provider_code, const char *fmt, ...)
{
	va_list ap;

	reset(code, category);
	last.e.http_status = http_status;
	if (provider_code)
		snprintf(last.provider_code, sizeof(last.provider_code), "%s", provider_code);
	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	return code;
}

int herr_os(int code, int os_errno, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	reset(code, HANGAR_ERRCAT_OS);
	last.e.os_errno = os_errno;
	va_start(ap, fmt);
	set_message(fmt, ap);
	va_end(ap);
	n = strlen(last.message);
	if (os_errno && n < sizeof(last.message))
		snprintf(last.message + n, sizeof(last.message) - n, ": %s", strerror(os_errno));
	return code;
}

int herr_recode(int code)
{
	last.e.code = code;
	return code;
}

void herr_prefix(const char *fmt, ...)
{
	char prefix[512], old[sizeof(last.message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, last.message, sizeof(old));
	{
		size_t n = strlen(prefix);

		if (n > sizeof(last.message) - 3)
			n = sizeof(last.message) - 3;
		memcpy(last.message, prefix, n);
		memcpy(last.message + n, ": ", 2);
		memcpy(last.message + n + 2, old, sizeof(last.message) - n - 2);
		last.message[sizeof(last.message) - 1] = '\0';
	}
	escape_controls(last.message, sizeof(last.message));
}

void herr_clear(void)
{
	reset(HANGAR_OK, HANGAR_ERRCAT_NONE);
	last.message[0] = '\0';
}

int hangar_sys_error(int code, int http_status, int os_errno, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (code >= 0)
		code = HANGAR_EUNAVAILABLE; /* a provider must report a failure as one */
	if (os_errno)
		return herr_os(code, os_errno, "%s", msg);
	return herr_http(code, HANGAR_ERRCAT_PROVIDER, http_status, NULL, "%s", msg);
}

void hangar_sys_error_save(hangar_sys_saved_error *out)
{
	const hangar_error *e = hangar_error_last();

	if (!out)
		return;
	out->error = *e;
	snprintf(out->message, sizeof(out->message), "%s", e->message);
	snprintf(out->provider_code, sizeof(out->provider_code), "%s", e->provider_code);
	out->error.message = out->message;
	out->error.provider_code = out->provider_code;
}

int hangar_sys_error_restore(const hangar_sys_saved_error *s)
{
	if (!s)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: saved is NULL");
	reset(s->error.code, s->error.category);
	last.e.os_errno = s->error.os_errno;
	last.e.http_status = s->error.http_status;
	last.e.retry_after_s = s->error.retry_after_s;
	last.e.flags = s->error.flags;
	snprintf(last.message, sizeof(last.message), "%s", s->message);
	snprintf(last.provider_code, sizeof(last.provider_code), "%s", s->provider_code);
	return s->error.code;
}

void hangar_sys_error_category(int32_t category)
{
	last.e.category = category;
}

void hangar_sys_error_provider_code(const char *code)
{
	snprintf(last.provider_code, sizeof(last.provider_code), "%s", code ? code : "");
}

void hangar_sys_error_prefix(const char *fmt, ...)
{
	char prefix[512];
	va_list ap;

	if (!fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	herr_prefix("%s", prefix);
}

void herr_retry_after(int64_t seconds)
{
	last.e.retry_after_s = seconds < 0 ? 0 : seconds > 86400 ? 86400 : (int32_t)seconds;
}

void herr_flags(uint32_t flags)
{
	last.e.flags |= flags;
}

void hangar_sys_error_retry_after(int32_t seconds)
{
	herr_retry_after(seconds);
}

void hangar_sys_error_flags(uint32_t flags)
{
	herr_flags(flags);
}

const hangar_error *hangar_error_last(void)
{
	if (!last.e.message) {
		last.e.message = last.message;
		last.e.provider_code = last.provider_code;
	}
	return &last.e;
}

static const struct {
	int code;
	const char *name;
	const char *text;
} codes[] = {
	{ HANGAR_OK, "ok", "success" },
	{ HANGAR_EINVAL, "invalid", "invalid argument" },
	{ HANGAR_ENOMEM, "nomem", "out of memory" },
	{ HANGAR_ECONFIG, "config", "invalid configuration" },
	{ HANGAR_EUNAVAILABLE, "unavailable", "provider unavailable" },
	{ HANGAR_ECAPACITY, "capacity", "provider out of capacity" },
	{ HANGAR_ECREATE, "create", "sandbox could not be created" },
	{ HANGAR_EGONE, "gone", "sandbox is gone" },
	{ HANGAR_EPAUSED, "paused", "sandbox is paused" },
	{ HANGAR_EFILE, "file", "file missing or unusable" },
	{ HANGAR_ETOOLARGE, "too_large", "too large" },
	{ HANGAR_ETIMEOUT, "timeout", "deadline exceeded" },
	{ HANGAR_EREFUSED, "refused", "refused by a security rule" },
	{ HANGAR_EUNSUPPORTED, "unsupported", "not supported by the provider" },
	{ HANGAR_EPROTOCOL, "protocol", "malformed answer" },
	{ HANGAR_ENOTFOUND, "not_found", "not found" },
	{ HANGAR_EOS, "os", "system call failed" },
	{ HANGAR_EEXISTS, "exists", "already exists" },
	{ HANGAR_ECANCELED, "canceled", "cancelled by the caller" },
	{ HANGAR_EBUSY, "busy", "being changed by another caller" },
};

const char *hangar_strerror(int code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].code == code)
			return codes[i].text;
	return "unknown error";
}

const char *hangar_error_name(int code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (codes[i].code == code)
			return codes[i].name;
	return "unknown";
}

/* Where the first byte that does not begin a valid UTF-8 character is. */
static size_t first_bad_byte(const char *s, size_t len)
{
	size_t i = 0, n;

	while (i < len && (n = sjson_char_len(s + i, len - i)) != 0)
		i += n;
	return i;
}

int hcheck_text(const char *s, const char *what)
{
	size_t len;

	if (!s)
		return 0;
	len = strlen(s);
	if (sjson_text_ok(s, len))
		return 0;
	return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
		    "invalid argument: %s is not valid UTF-8 (byte %zu of %zu)", what, first_bad_byte(s, len) + 1,
		    len);
}

int hcheck_texts(const char *const *v, const char *what)
{
	size_t i = 0;

	for (const char *const *e = v; e && *e; e++, i++) {
		char name[160];

		snprintf(name, sizeof(name), "%s[%zu]", what, i);
		if (hcheck_text(*e, name))
			return HANGAR_EINVAL;
	}
	return 0;
}
