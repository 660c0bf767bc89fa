/* Decoding envd's stream and file bodies (decode.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "core/internal.h"
#include "util/sjson.h"

void envd_clean_message(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	for (; src && *src && n + 1 < cap; src++)
		dst[n++] = ((unsigned char)*src < 0x20 || *src == 0x7f) ? ' ' : *src;
	dst[n] = '\0';
}

int envd_hangar_code(enum connect_code code)
{
	switch (code) {
	case CONNECT_NOT_FOUND: return HANGAR_ENOTFOUND;
	case CONNECT_ALREADY_EXISTS: return HANGAR_EEXISTS;
	case CONNECT_INVALID_ARGUMENT:
	case CONNECT_FAILED_PRECONDITION:
	case CONNECT_OUT_OF_RANGE: return HANGAR_EINVAL;
	case CONNECT_DEADLINE_EXCEEDED: return HANGAR_ETIMEOUT;
	case CONNECT_RESOURCE_EXHAUSTED: return HANGAR_ECAPACITY;
	case CONNECT_UNAUTHENTICATED:
	case CONNECT_PERMISSION_DENIED: return HANGAR_EREFUSED;
	case CONNECT_UNAVAILABLE: return HANGAR_EUNAVAILABLE;
	case CONNECT_UNIMPLEMENTED: return HANGAR_EUNSUPPORTED;
	default: return HANGAR_EPROTOCOL;
	}
}

int envd_connect_error(const char *what, int http_status, enum connect_code code, const char *message,
		       enum connect_code *code_out)
{
	char msg[ENVD_MSG_MAX];

	if (code == CONNECT_OK)
		code = CONNECT_UNKNOWN; /* an error that calls itself "ok" is still an error */
	if (code_out)
		*code_out = code;
	if (!message || !*message)
		return herr_http(envd_hangar_code(code), HANGAR_ERRCAT_SANDBOX, http_status, connect_code_name(code),
				 "%s: %s (HTTP %d)", what, connect_code_name(code), http_status);
	envd_clean_message(msg, sizeof(msg), message);
	return herr_http(envd_hangar_code(code), HANGAR_ERRCAT_SANDBOX, http_status, connect_code_name(code),
			 "%s: %s", what, msg);
}

/* ---- streams ------------------------------------------------------------------ */

void envd_stream_dec_init(struct envd_stream_dec *d, const char *what, int http_status, envd_msg_fn cb,
			  void *cbctx)
{
	memset(d, 0, sizeof(*d));
	envelope_decoder_init(&d->env, ENVD_MAX_FRAME);
	d->what = what;
	d->http_status = http_status;
	d->cb = cb;
	d->cbctx = cbctx;
}

void envd_stream_dec_free(struct envd_stream_dec *d)
{
	envelope_decoder_free(&d->env);
}

static int dec_fail(struct envd_stream_dec *d, int code)
{
	if (!d->fail)
		d->fail = code;
	return -1;
}

/* The end envelope: {} is success, {"error":{code,message}} a mapped failure. */
static int stream_end(struct envd_stream_dec *d, const cJSON *end)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(end, "error");
	const cJSON *jc, *jm;

	if (!err || cJSON_IsNull(err))
		return 0;
	if (!cJSON_IsObject(err))
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
				 "%s: malformed error in the end-of-stream message", d->what);
	jc = cJSON_GetObjectItemCaseSensitive(err, "code");
	jm = cJSON_GetObjectItemCaseSensitive(err, "message");
	return envd_connect_error(d->what, d->http_status,
				  cJSON_IsString(jc) ? connect_code_from_name(jc->valuestring) : CONNECT_UNKNOWN,
				  cJSON_IsString(jm) ? jm->valuestring : NULL, &d->code);
}

static int on_envelope(uint8_t flags, const char *payload, size_t len, void *ud)
{
	struct envd_stream_dec *d = ud;
	char err[160];
	cJSON *msg;
	int stop;

	if (d->ended)
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: data after the end-of-stream message", d->what));
	if (flags & CONNECT_FLAG_COMPRESSED)
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: envd sent a compressed message that was not asked for", d->what));
	/* Strict: a message with two members of one name says two things. */
	msg = sjson_parse(payload, len, 0, err, sizeof(err));
	if (!msg)
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: a stream message is not strict JSON: %s", d->what, err));
	if (!cJSON_IsObject(msg)) {
		cJSON_Delete(msg);
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: a stream message is not a JSON object", d->what));
	}
	if (flags & CONNECT_FLAG_END_STREAM) {
		/* Keep reading to the end of the body, so the connection can be reused. */
		d->ended = 1;
		d->end_rc = stream_end(d, msg);
		cJSON_Delete(msg);
		return 0;
	}
	/* Keepalives too: the caller decides what a message means. */
	stop = d->cb(msg, d->cbctx);
	cJSON_Delete(msg);
	if (stop) {
		d->stopped = 1;
		return 1;
	}
	return 0;
}

int envd_stream_dec_feed(struct envd_stream_dec *d, const char *data, size_t len)
{
	switch (envelope_decoder_feed(&d->env, data, len, on_envelope, d)) {
	case ENVELOPE_OK:
		return 0;
	case ENVELOPE_STOPPED:
		return -1; /* on_envelope said why */
	case ENVELOPE_TOO_LARGE:
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: a stream message is over the %u-byte limit", d->what, ENVD_MAX_FRAME));
	case ENVELOPE_NOMEM:
		return dec_fail(d, herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "%s: out of memory", d->what));
	default:
		return dec_fail(d, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					     "%s: malformed stream envelope", d->what));
	}
}

int envd_stream_dec_finish(struct envd_stream_dec *d)
{
	if (d->fail)
		return d->fail;
	if (d->ended)
		return d->end_rc;
	return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL, "%s: %s", d->what,
			 envelope_decoder_finish(&d->env) == ENVELOPE_TRUNCATED ? "stream ended inside a message"
										  : "stream ended without an end message");
}

/* ---- /files bodies -------------------------------------------------------------- */

void envd_file_dec_init(struct envd_file_dec *d, const char *what, size_t limit, int fd)
{
	memset(d, 0, sizeof(*d));
	d->what = what;
	d->limit = limit;
	d->fd = fd;
}

void envd_file_dec_free(struct envd_file_dec *d)
{
	hbuf_free(&d->body);
	if (d->z_live)
		inflateEnd(&d->z);
	d->z_live = 0;
}

static int file_oom(struct envd_file_dec *d)
{
	return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "%s: out of memory", d->what);
}

/* Room for exactly n more bytes and the NUL, for sizes announced up front. */
static int reserve_exact(struct hbuf *b, size_t n)
{
	char *p;

	if (n > (size_t)-1 - b->len - 1)
		return -1;
	if (b->len + n + 1 <= b->cap)
		return 0;
	p = realloc(b->data, b->len + n + 1);
	if (!p)
		return -1;
	b->data = p;
	b->cap = b->len + n + 1;
	return 0;
}

int envd_file_dec_begin(struct envd_file_dec *d, int http_status, enum net_encoding enc, const char *enc_name,
			int64_t content_length)
{
	d->http_status = http_status;
	if (enc == NET_ENC_OTHER)
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, http_status, NULL,
				 "%s: unsupported Content-Encoding %s", d->what, enc_name ? enc_name : "");
	if (enc == NET_ENC_GZIP) {
		/* 15 + 32: gzip or zlib header, detected. */
		if (inflateInit2(&d->z, 15 + 32) != Z_OK)
			return file_oom(d);
		d->z_live = 1;
		return 0;
	}
	if (content_length < 0)
		return 0;
	if ((uint64_t)content_length > (uint64_t)d->limit)
		return herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, http_status, NULL,
				 "%s: the file is %lld bytes, over the %zu-byte limit", d->what,
				 (long long)content_length, d->limit);
	/*
	 * Announced and within the limit: one allocation of exactly that size,
	 * unless it is so large that it should grow as bytes come.
	 */
	if (d->fd < 0 && !d->sink && content_length > 0 &&
	    reserve_exact(&d->body, content_length < ENVD_PREALLOC_MAX ? (size_t)content_length : ENVD_PREALLOC_MAX) < 0)
		return file_oom(d);
	return 0;
}

/* Plain bytes of the file: the limit applies to what we keep, i.e. after inflating. */
static int file_out(struct envd_file_dec *d, const char *data, size_t len)
{
	int r;

	if (d->fd < 0 && !d->sink) {
		r = hbuf_put_bounded(&d->body, data, len, d->limit);
		if (r < 0)
			return file_oom(d);
		if (r > 0)
			return herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
					 "%s: the file is over the %zu-byte limit", d->what, d->limit);
		return 0;
	}
	/* Counted as it comes (after inflating): an announced length may be absent or a lie. */
	if (len > d->limit || d->written > d->limit - len)
		return herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
				 "%s: the file is over the %zu-byte limit", d->what, d->limit);
	d->written += len;
	if (d->sink)
		return d->sink(d->sink_payload, data, len);
	while (len > 0) {
		ssize_t n = write(d->fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return herr_os(HANGAR_EOS, errno, "%s: writing to fd %d", d->what, d->fd);
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int inflate_into_out(struct envd_file_dec *d, const char *data, size_t len)
{
	unsigned char buf[32 * 1024];
	size_t chunk;
	int zr, rc;

	while (len > 0) {
		/* avail_in is a uInt: feed at most that much at a time. */
		chunk = len > (size_t)UINT32_MAX ? (size_t)UINT32_MAX : len;
		d->z.next_in = (Bytef *)data;
		d->z.avail_in = (uInt)chunk;
		data += chunk;
		len -= chunk;
		do {
			if (d->z_done) {
				if (d->z.avail_in == 0)
					break;
				/* Another gzip member follows, as gzip readers allow. */
				if (inflateReset(&d->z) != Z_OK)
					return file_oom(d);
				d->z_done = 0;
			}
			d->z.next_out = buf;
			d->z.avail_out = sizeof(buf);
			zr = inflate(&d->z, Z_NO_FLUSH);
			if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
				return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
						 "%s: corrupt gzip answer%s%s", d->what, d->z.msg ? ": " : "",
						 d->z.msg ? d->z.msg : "");
			if (sizeof(buf) - d->z.avail_out > 0 &&
			    (rc = file_out(d, (const char *)buf, sizeof(buf) - d->z.avail_out)) != 0)
				return rc;
			if (zr == Z_STREAM_END)
				d->z_done = 1;
			else if (zr == Z_BUF_ERROR)
				break; /* needs more input */
		} while (d->z.avail_in > 0 || d->z.avail_out == 0);
	}
	return 0;
}

int envd_file_dec_feed(struct envd_file_dec *d, const char *data, size_t len)
{
	if (d->z_live)
		return inflate_into_out(d, data, len);
	return file_out(d, data, len);
}

int envd_file_dec_finish(struct envd_file_dec *d)
{
	if (d->z_live && !d->z_done)
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, d->http_status, NULL,
				 "%s: the gzip answer is truncated", d->what);
	return 0;
}
