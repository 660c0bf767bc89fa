/*
 * The envd client (client.h) on libcurl.
 *
 * Every request is one struct xfer: the easy handle borrowed from the
 * client's pool, the request headers, what we learnt from the response
 * headers, and the "sink" the response body goes to. The body is consumed as
 * it arrives (never buffered by curl), so every limit is applied before the
 * bytes are kept: a hostile daemon can make a call fail, never make us
 * allocate more than the limit that applies.
 *
 * Connection reuse. curl's shared connection cache (CURL_LOCK_DATA_CONNECT)
 * is documented as unsafe between concurrent threads (curl KNOWN_BUGS "A
 * shared connection cache is not thread-safe", still so in 7.88), so the
 * share only holds the DNS cache. Connections are reused instead by pooling
 * the easy handles themselves: each easy handle keeps its own live
 * connections across curl_easy_reset(), and the pool hands a thread the
 * handle that last talked to the same endpoint. Any thread may use any
 * handle, one at a time.
 *
 * Errors: callbacks run on the calling thread (curl_easy_perform is
 * synchronous), so they report with herr() right where the problem is seen
 * and remember the code in x->fail; the outcome of the transfer is then
 * decided in one place, xfer_perform().
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "client.h"
#include "../core/internal.h"
#include "pjson.h"

#define POOL_MAX 32                     /* idle easy handles kept */
#define CONNECT_TIMEOUT_MAX_MS 10000    /* connecting never waits longer than this */
#define ERRBODY_MAX (64u << 10)         /* body of an error answer we look at */
#define WRITE_ANSWER_MAX (1u << 20)     /* POST /files answer: a small JSON array */
#define MSG_MAX 400                     /* envd's message as quoted in ours */
#define PREALLOC_MAX (64u << 20)        /* most we allocate on a Content-Length's word */

/* ---- the client: a DNS share and a pool of easy handles ------------------- */

struct pooled {
	CURL *h;
	char *key;      /* the endpoint it last talked to, where its live connection is */
};

struct envd_client {
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t pool_lock;
	struct pooled idle[POOL_MAX];   /* oldest first */
	size_t nidle;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	/* Not thread-safe in curl itself; pthread_once makes it safe among our callers. */
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
	struct envd_client *c = ud;

	(void)h;
	(void)access;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&c->share_lock[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct envd_client *c = ud;

	(void)h;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&c->share_lock[data]);
}

int envd_client_new(struct envd_client **out)
{
	struct envd_client *c;

	HCHECK_ARG(out, "out");
	*out = NULL;
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "cannot initialise libcurl: %s",
			    curl_easy_strerror(curl_init_rc));
	c = calloc(1, sizeof(*c));
	if (!c)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_lock[i], NULL);
	pthread_mutex_init(&c->pool_lock, NULL);
	c->share = curl_share_init();
	if (!c->share || curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) != CURLSHE_OK ||
	    curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
		envd_client_free(c);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot set up the envd connection pool");
	}
	*out = c;
	return 0;
}

void envd_client_free(struct envd_client *c)
{
	if (!c)
		return;
	/* Handles first: they hold references to the share. */
	for (size_t i = 0; i < c->nidle; i++) {
		curl_easy_cleanup(c->idle[i].h);
		free(c->idle[i].key);
	}
	if (c->share)
		curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_lock[i]);
	pthread_mutex_destroy(&c->pool_lock);
	free(c);
}

/* The idle handle that last talked to key, else the most recent one, else a new one. */
static CURL *pool_take(struct envd_client *c, const char *key)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->pool_lock);
	if (c->nidle > 0) {
		size_t pick = c->nidle - 1;

		for (size_t i = c->nidle; i-- > 0;) {
			if (c->idle[i].key && strcmp(c->idle[i].key, key) == 0) {
				pick = i;
				break;
			}
		}
		h = c->idle[pick].h;
		free(c->idle[pick].key);
		memmove(&c->idle[pick], &c->idle[pick + 1], (c->nidle - pick - 1) * sizeof(c->idle[0]));
		c->nidle--;
	}
	pthread_mutex_unlock(&c->pool_lock);
	if (h) {
		/* Options go back to defaults; live connections and the share stay. */
		curl_easy_reset(h);
		return h;
	}
	h = curl_easy_init();
	if (h && curl_easy_setopt(h, CURLOPT_SHARE, c->share) != CURLE_OK) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

static void pool_give(struct envd_client *c, CURL *h, const char *key)
{
	CURL *evicted = NULL;

	pthread_mutex_lock(&c->pool_lock);
	if (c->nidle == POOL_MAX) {
		evicted = c->idle[0].h;
		free(c->idle[0].key);
		memmove(&c->idle[0], &c->idle[1], (POOL_MAX - 1) * sizeof(c->idle[0]));
		c->nidle--;
	}
	c->idle[c->nidle].h = h;
	c->idle[c->nidle].key = key ? strdup(key) : NULL;
	c->nidle++;
	pthread_mutex_unlock(&c->pool_lock);
	if (evicted)
		curl_easy_cleanup(evicted); /* closes its connections: outside the lock */
}

/* ---- one transfer ---------------------------------------------------------- */

enum xfer_kind {
	XK_UNARY,       /* body: one JSON message, capped at ENVD_MAX_UNARY */
	XK_STREAM,      /* body: envelopes, each handed to the caller */
	XK_FILE_MEM,    /* GET /files into memory, capped at the caller's limit */
	XK_FILE_FD,     /* GET /files into an fd */
	XK_WRITE,       /* POST /files: a small JSON answer */
	XK_HEALTH,      /* GET /health: no body expected */
};

enum body_enc { ENC_NONE, ENC_IDENTITY, ENC_GZIP, ENC_OTHER };

struct xfer {
	struct envd_client *c;
	const struct envd_call *call;
	struct envd_status *st;
	enum xfer_kind kind;
	const char *what;               /* names the call in messages: method or route */
	CURL *h;
	char *key;                      /* pool key of the endpoint */
	struct curl_slist *headers;
	char *reqbody;                  /* owned request body, if any */
	char errbuf[CURL_ERROR_SIZE];
	long connect_timeout_ms;

	/* what the answer's headers said */
	int connected;                  /* a connection was up and the request about to go */
	int headers_done;               /* the final (non-1xx) header block is complete */
	long status;
	curl_off_t content_length;      /* -1: not given */
	enum body_enc enc;              /* Content-Encoding or Connect-Content-Encoding */
	char enc_name[32];

	/* how the callbacks ended it */
	int fail;                       /* a HANGAR_E* code, already reported */
	int cancelled;

	struct hbuf errbody;            /* body of a non-success answer, bounded */
	struct hbuf body;               /* unary / write answer, or a file read into memory */
	size_t limit;                   /* cap on body */

	/* XK_STREAM */
	struct envelope_decoder dec;
	envd_msg_fn cb;
	void *cbctx;
	int ended;                      /* saw the end envelope */
	int end_rc;                     /* and what it said */

	/* /files bodies: gzip and the output */
	z_stream z;
	int z_live, z_done;
	int (*out)(struct xfer *x, const char *data, size_t len);
	int fd;
	uint64_t written;               /* XK_FILE_FD: bytes written to fd, checked against limit */

	/* POST /files from an fd */
	off_t up_start;
	curl_off_t up_size;             /* -1: unknown, sent chunked */
	curl_off_t up_sent;
};

/* Copies an untrusted message into one printable, bounded line. */
static void clean_message(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	for (; src && *src && n + 1 < cap; src++)
		dst[n++] = ((unsigned char)*src < 0x20 || *src == 0x7f) ? ' ' : *src;
	dst[n] = '\0';
}

static int xfail(struct xfer *x, int code)
{
	if (!x->fail)
		x->fail = code;
	return -1;
}

static int cancel_requested(const struct xfer *x)
{
	return x->call->cancel && x->call->cancel(x->call->cancel_arg);
}

/*
 * Appends to b without letting it grow past limit bytes: the check comes
 * before the allocation, and the allocation itself is capped too, so a
 * stream of data can never cost more than limit + 1 bytes.
 */
static int bounded_put(struct hbuf *b, const char *data, size_t len, size_t limit)
{
	size_t need;

	if (len > limit || b->len > limit - len)
		return 1;
	need = b->len + len + 1;
	if (need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < need)
			cap = cap > SIZE_MAX / 2 ? need : cap * 2;
		if (limit < SIZE_MAX && cap > limit + 1)
			cap = limit + 1;
		p = realloc(b->data, cap);
		if (!p)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
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

static int oom(struct xfer *x)
{
	return xfail(x, herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "%s: out of memory", x->what));
}

/* ---- response headers ------------------------------------------------------ */

static int xfer_success_status(const struct xfer *x)
{
	return x->status == 200 || (x->kind == XK_HEALTH && x->status == 204);
}

static void note_encoding(struct xfer *x, const char *v, size_t n)
{
	enum body_enc e;

	if (n == 8 && strncasecmp(v, "identity", 8) == 0)
		e = ENC_IDENTITY;
	else if (n == 4 && strncasecmp(v, "gzip", 4) == 0)
		e = ENC_GZIP;
	else
		e = ENC_OTHER;
	/* Two headers that disagree: nothing we decode. */
	if (x->enc != ENC_NONE && x->enc != e)
		e = ENC_OTHER;
	x->enc = e;
	clean_message(x->enc_name, n + 1 < sizeof(x->enc_name) ? n + 1 : sizeof(x->enc_name), v);
}

/* An announced length over a size_t limit (compared unsigned: SIZE_MAX means none). */
static int length_over(curl_off_t len, size_t limit)
{
	return len >= 0 && (uint64_t)len > (uint64_t)limit;
}

static void note_header(struct xfer *x, const char *line, size_t len)
{
	const char *colon = memchr(line, ':', len);
	const char *v, *end = line + len;
	size_t nlen;

	if (!colon)
		return;
	nlen = (size_t)(colon - line);
	for (v = colon + 1; v < end && (*v == ' ' || *v == '\t'); v++)
		;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if ((nlen == 16 && strncasecmp(line, "Content-Encoding", 16) == 0) ||
	    (nlen == 24 && strncasecmp(line, "Connect-Content-Encoding", 24) == 0)) {
		note_encoding(x, v, (size_t)(end - v));
	} else if (nlen == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
		char num[24];
		char *e;
		long long n;

		if ((size_t)(end - v) >= sizeof(num))
			return;
		memcpy(num, v, (size_t)(end - v));
		num[end - v] = '\0';
		errno = 0;
		n = strtoll(num, &e, 10);
		if (!errno && e != num && !*e && n >= 0)
			x->content_length = (curl_off_t)n;
	}
}

/* The answer's headers are in: refuse what we will not read, before its body comes. */
static int check_answer_headers(struct xfer *x)
{
	if (!xfer_success_status(x))
		return 0; /* an error body is read bounded, whatever it claims */
	switch (x->kind) {
	case XK_UNARY:
	case XK_STREAM:
		/* We never offer compression on RPCs; an answer that uses it anyway is not envd. */
		if (x->enc != ENC_NONE && x->enc != ENC_IDENTITY)
			return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
						  "%s: envd sent a compressed answer (%s) that was not asked for",
						  x->what, x->enc_name));
		if (x->kind == XK_UNARY && length_over(x->content_length, ENVD_MAX_UNARY))
			return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
						  "%s: answer of %lld bytes is over the %u-byte limit", x->what,
						  (long long)x->content_length, ENVD_MAX_UNARY));
		return 0;
	case XK_FILE_MEM:
	case XK_FILE_FD:
		if (x->enc == ENC_OTHER)
			return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
						  "%s: unsupported Content-Encoding %s", x->what, x->enc_name));
		if (x->enc == ENC_GZIP) {
			/* 15 + 32: gzip or zlib header, detected. */
			if (inflateInit2(&x->z, 15 + 32) != Z_OK)
				return oom(x);
			x->z_live = 1;
		} else if (length_over(x->content_length, x->limit)) {
			return xfail(x, herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
						  "%s: the file is %lld bytes, over the %zu-byte limit", x->what,
						  (long long)x->content_length, x->limit));
		}
		/*
		 * Announced and within the limit: one allocation of exactly that
		 * size, unless it is so large that it should grow as bytes come.
		 */
		if (x->kind == XK_FILE_MEM && x->enc != ENC_GZIP && x->content_length > 0 &&
		    reserve_exact(&x->body, x->content_length < PREALLOC_MAX ? (size_t)x->content_length
									     : PREALLOC_MAX) < 0)
			return oom(x);
		return 0;
	case XK_WRITE:
	case XK_HEALTH:
		return 0;
	}
	return 0;
}

static size_t header_cb(char *line, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	long code = 0;

	if (x->headers_done)
		return len; /* trailers */
	if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
		/* A new header block (after a 1xx, or the first): forget the last one. */
		x->content_length = -1;
		x->enc = ENC_NONE;
		x->enc_name[0] = '\0';
		return len;
	}
	if (len > 2 || (len == 2 && line[0] != '\r') || (len == 1 && line[0] != '\n')) {
		note_header(x, line, len);
		return len;
	}
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 100 && code < 200)
		return len;
	x->status = code;
	x->headers_done = 1;
	return check_answer_headers(x) == 0 ? len : 0;
}

/* ---- response bodies --------------------------------------------------------- */

static int sink_bounded(struct xfer *x, const char *data, size_t len)
{
	int r = bounded_put(&x->body, data, len, x->limit);

	if (r < 0)
		return oom(x);
	if (r > 0)
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: answer over the %zu-byte limit", x->what, x->limit));
	return 0;
}

/* The end envelope: {} is success, {"error":{code,message}} a mapped failure. */
static int connect_error(struct xfer *x, enum connect_code code, const char *message);

static int stream_end(struct xfer *x, const cJSON *end)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(end, "error");
	const cJSON *jc, *jm;

	if (!cJSON_IsObject(end))
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
				 "%s: malformed end-of-stream message", x->what);
	if (!err || cJSON_IsNull(err))
		return 0;
	if (!cJSON_IsObject(err))
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
				 "%s: malformed error in the end-of-stream message", x->what);
	jc = cJSON_GetObjectItemCaseSensitive(err, "code");
	jm = cJSON_GetObjectItemCaseSensitive(err, "message");
	return connect_error(x, cJSON_IsString(jc) ? connect_code_from_name(jc->valuestring) : CONNECT_UNKNOWN,
			     cJSON_IsString(jm) ? jm->valuestring : NULL);
}

static int on_envelope(uint8_t flags, const char *payload, size_t len, void *ud)
{
	struct xfer *x = ud;
	cJSON *msg;
	int stop;

	if (x->ended)
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: data after the end-of-stream message", x->what));
	if (flags & CONNECT_FLAG_COMPRESSED)
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: envd sent a compressed message that was not asked for", x->what));
	msg = cJSON_ParseWithLength(payload, len);
	if (!msg || !cJSON_IsObject(msg)) {
		cJSON_Delete(msg);
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: a stream message is not a JSON object", x->what));
	}
	if (flags & CONNECT_FLAG_END_STREAM) {
		/* Keep reading to the end of the body, so the connection can be reused. */
		x->ended = 1;
		x->end_rc = stream_end(x, msg);
		cJSON_Delete(msg);
		return 0;
	}
	/* Keepalives too: the caller decides what a message means. */
	stop = x->cb(msg, x->cbctx);
	cJSON_Delete(msg);
	if (stop) {
		x->cancelled = 1;
		return 1;
	}
	return 0;
}

static int sink_stream(struct xfer *x, const char *data, size_t len)
{
	switch (envelope_decoder_feed(&x->dec, data, len, on_envelope, x)) {
	case ENVELOPE_OK:
		return 0;
	case ENVELOPE_STOPPED:
		return -1; /* on_envelope said why */
	case ENVELOPE_TOO_LARGE:
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: a stream message is over the %u-byte limit", x->what, ENVD_MAX_FRAME));
	case ENVELOPE_NOMEM:
		return oom(x);
	default:
		return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: malformed stream envelope", x->what));
	}
}

/* A file into memory: the limit applies to what we keep, i.e. after inflating. */
static int out_mem(struct xfer *x, const char *data, size_t len)
{
	int r = bounded_put(&x->body, data, len, x->limit);

	if (r < 0)
		return oom(x);
	if (r > 0)
		return xfail(x, herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: the file is over the %zu-byte limit", x->what, x->limit));
	return 0;
}

static int out_fd(struct xfer *x, const char *data, size_t len)
{
	/* Counted as it comes (after inflating): an announced length may be absent or a lie. */
	if (len > x->limit || x->written > x->limit - len)
		return xfail(x, herr_http(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: the file is over the %zu-byte limit", x->what, x->limit));
	x->written += len;
	while (len > 0) {
		ssize_t n = write(x->fd, data, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return xfail(x, herr_os(HANGAR_EOS, errno, "%s: writing to fd %d", x->what, x->fd));
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

static int inflate_into_out(struct xfer *x, const char *data, size_t len)
{
	unsigned char buf[32 * 1024];
	int zr;

	x->z.next_in = (Bytef *)data;
	x->z.avail_in = (uInt)len; /* curl hands us at most CURL_MAX_WRITE_SIZE at a time */
	do {
		if (x->z_done) {
			if (x->z.avail_in == 0)
				break;
			/* Another gzip member follows, as gzip readers allow. */
			if (inflateReset(&x->z) != Z_OK)
				return oom(x);
			x->z_done = 0;
		}
		x->z.next_out = buf;
		x->z.avail_out = sizeof(buf);
		zr = inflate(&x->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
			return xfail(x, herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
						  "%s: corrupt gzip answer%s%s", x->what, x->z.msg ? ": " : "",
						  x->z.msg ? x->z.msg : ""));
		if (sizeof(buf) - x->z.avail_out > 0 &&
		    x->out(x, (const char *)buf, sizeof(buf) - x->z.avail_out) < 0)
			return -1;
		if (zr == Z_STREAM_END)
			x->z_done = 1;
		else if (zr == Z_BUF_ERROR)
			break; /* needs more input */
	} while (x->z.avail_in > 0 || x->z.avail_out == 0);
	return 0;
}

static int sink_file(struct xfer *x, const char *data, size_t len)
{
	if (x->z_live)
		return inflate_into_out(x, data, len);
	return x->out(x, data, len);
}

static int sink_errbody(struct xfer *x, const char *data, size_t len)
{
	int r = bounded_put(&x->errbody, data, len, ERRBODY_MAX);

	if (r < 0)
		return oom(x);
	/* Past the cap: stop reading; what we have is enough to report. */
	return r > 0 ? -1 : 0;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n;
	int r;

	if (cancel_requested(x)) {
		x->cancelled = 1;
		return 0;
	}
	if (!x->headers_done || !xfer_success_status(x)) {
		r = sink_errbody(x, data, len);
	} else {
		switch (x->kind) {
		case XK_UNARY:
		case XK_WRITE:
		case XK_HEALTH: /* no body expected; a bounded one is tolerated */
			r = sink_bounded(x, data, len);
			break;
		case XK_STREAM:
			r = sink_stream(x, data, len);
			break;
		case XK_FILE_MEM:
		case XK_FILE_FD:
			r = sink_file(x, data, len);
			break;
		default:
			r = 0;
			break;
		}
	}
	return r == 0 ? len : 0;
}

static int xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = ud;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	if (cancel_requested(x)) {
		x->cancelled = 1;
		return 1;
	}
	return 0;
}

static int prereq_cb(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	struct xfer *x = ud;

	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	x->connected = 1;
	return CURL_PREREQFUNC_OK;
}

/* ---- request bodies from an fd ---------------------------------------------- */

static size_t read_cb(char *buf, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t want = size * n;
	ssize_t got;

	if (cancel_requested(x)) {
		x->cancelled = 1;
		return CURL_READFUNC_ABORT;
	}
	if (x->up_size >= 0) {
		if (x->up_sent >= x->up_size)
			return 0;
		if ((curl_off_t)want > x->up_size - x->up_sent)
			want = (size_t)(x->up_size - x->up_sent);
	}
	do
		got = read(x->fd, buf, want);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		xfail(x, herr_os(HANGAR_EOS, errno, "%s: reading fd %d", x->what, x->fd));
		return CURL_READFUNC_ABORT;
	}
	if (got == 0 && x->up_size >= 0) {
		/* We announced a Content-Length; sending less would leave envd waiting. */
		xfail(x, herr(HANGAR_EFILE, HANGAR_ERRCAT_OS, "%s: the file shrank while it was sent", x->what));
		return CURL_READFUNC_ABORT;
	}
	x->up_sent += got;
	return (size_t)got;
}

/* curl rewinds when it resends on a fresh connection after a reused one died. */
static int seek_cb(void *ud, curl_off_t offset, int origin)
{
	struct xfer *x = ud;

	if (origin != SEEK_SET || x->up_size < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	if (lseek(x->fd, x->up_start + (off_t)offset, SEEK_SET) < 0)
		return CURL_SEEKFUNC_FAIL;
	x->up_sent = offset;
	return CURL_SEEKFUNC_OK;
}

/* ---- setting a transfer up ---------------------------------------------------- */

static int add_header(struct xfer *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int add_header(struct xfer *x, const char *fmt, ...)
{
	struct curl_slist *l;
	char *line = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	l = curl_slist_append(x->headers, line);
	/* The line may hold the access token: wipe our copy (curl keeps its own). */
	explicit_bzero(line, (size_t)n);
	free(line);
	if (!l)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	x->headers = l;
	return 0;
}

static int valid_header_value(const char *s)
{
	for (; *s; s++)
		if (*s == '\r' || *s == '\n')
			return 0;
	return 1;
}

static int add_auth_headers(struct xfer *x)
{
	const struct envd_endpoint *ep = x->call->ep;
	const char *user = x->call->user ? x->call->user : ep->user;
	int rc = 0;

	if (ep->access_token && *ep->access_token) {
		if (!valid_header_value(ep->access_token))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: access token");
		rc = add_header(x, "X-Access-Token: %s", ep->access_token);
	}
	for (const char *const *h = ep->headers; !rc && h && *h; h++) {
		if (!valid_header_value(*h) || !strchr(*h, ':'))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: extra header line");
		rc = add_header(x, "%s", *h);
	}
	if (!rc && user && *user) {
		/* envd picks the user from Basic auth: "<user>:" with no password. */
		char *pair = NULL, *b64;

		if (asprintf(&pair, "%s:", user) < 0)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		b64 = pjson_b64_encode(pair, strlen(pair));
		free(pair);
		if (!b64)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		rc = add_header(x, "Authorization: Basic %s", b64);
		free(b64);
	}
	return rc;
}

static char *endpoint_key(const struct envd_endpoint *ep)
{
	char *key = NULL;

	if (asprintf(&key, "%s\n%s", ep->socket_path ? ep->socket_path : "", ep->base_url) < 0)
		return NULL;
	return key;
}

static void set_timeouts(struct xfer *x)
{
	int64_t deadline = x->call->deadline_ms;

	x->connect_timeout_ms = CONNECT_TIMEOUT_MAX_MS;
	if (deadline > 0) {
		if (deadline < x->connect_timeout_ms)
			x->connect_timeout_ms = (long)deadline;
		curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, deadline > LONG_MAX ? LONG_MAX : (long)deadline);
	}
	curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, x->connect_timeout_ms);
	if (x->call->stall_ms > 0) {
		/* Less than a byte a second for that long counts as stalled. */
		curl_easy_setopt(x->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(x->h, CURLOPT_LOW_SPEED_TIME,
				 x->call->stall_ms < 1000 ? 1L : (long)(x->call->stall_ms / 1000));
	}
}

static int xfer_begin(struct xfer *x, struct envd_client *c, const struct envd_call *call, enum xfer_kind kind,
		      const char *what, struct envd_status *st)
{
	CURL *h;

	memset(x, 0, sizeof(*x));
	x->fd = -1;
	x->content_length = -1;
	x->up_size = -1;
	x->kind = kind;
	x->what = what;
	x->st = st;
	x->call = call;
	x->c = c;
	if (st)
		memset(st, 0, sizeof(*st));
	HCHECK_ARG(c, "client");
	HCHECK_ARG(call && call->ep && call->ep->base_url && *call->ep->base_url, "call endpoint");
	x->key = endpoint_key(call->ep);
	if (!x->key)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	h = x->h = pool_take(c, x->key);
	if (!h)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot create a curl handle");
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "libhangar/" HANGAR_VERSION_STRING);
	/* We inflate /files ourselves, so the limit applies to the output. */
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (call->ep->socket_path)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, call->ep->socket_path);
	set_timeouts(x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(h, CURLOPT_PREREQDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	/* No "Expect: 100-continue" round trip before a POST body. */
	if (add_header(x, "Expect:") < 0)
		return HANGAR_ENOMEM;
	return add_auth_headers(x);
}

/* base_url + path (+ ?query), without doubling the slash. */
static int set_url(struct xfer *x, const char *path, const char *query)
{
	const char *base = x->call->ep->base_url;
	size_t blen = strlen(base);
	struct hbuf url = HBUF_INIT;
	int rc = 0;

	while (blen > 0 && base[blen - 1] == '/')
		blen--;
	if (hbuf_put(&url, base, blen) < 0 || hbuf_printf(&url, "%s%s%s%s", path[0] == '/' ? "" : "/", path,
							    query ? "?" : "", query ? query : "") < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	else if (curl_easy_setopt(x->h, CURLOPT_URL, url.data) != CURLE_OK)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: envd URL");
	hbuf_free(&url);
	return rc;
}

static void xfer_end(struct xfer *x)
{
	if (x->h) {
		/* Drop pointers into this frame before the handle goes back. */
		curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, NULL);
		pool_give(x->c, x->h, x->key);
	}
	curl_slist_free_all(x->headers);
	free(x->reqbody);
	free(x->key);
	hbuf_free(&x->errbody);
	hbuf_free(&x->body);
	envelope_decoder_free(&x->dec);
	if (x->z_live)
		inflateEnd(&x->z);
}

/* ---- outcome ------------------------------------------------------------------ */

static const char *curl_detail(const struct xfer *x, CURLcode res)
{
	return x->errbuf[0] ? x->errbuf : curl_easy_strerror(res);
}

static int timeout_error(struct xfer *x)
{
	if (x->st)
		x->st->timed_out = 1;
	if (!x->connected)
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "%s: connecting to envd took longer than %ld ms",
			    x->what, x->connect_timeout_ms);
	if (x->call->deadline_ms <= 0)
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "%s: nothing moved for %lld ms", x->what,
			    (long long)x->call->stall_ms);
	return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "%s: no complete answer within the call deadline of %lld ms",
		    x->what, (long long)x->call->deadline_ms);
}

static int is_transport_failure(CURLcode res)
{
	switch (res) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_SEND_FAIL_REWIND: /* a reused connection died under a body we cannot resend */
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_PROXY:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

/* curl failed before any HTTP status arrived. */
static int no_answer_error(struct xfer *x, CURLcode res)
{
	char detail[CURL_ERROR_SIZE];

	clean_message(detail, sizeof(detail), curl_detail(x, res));
	if (res == CURLE_OUT_OF_MEMORY)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "%s: out of memory", x->what);
	if (is_transport_failure(res)) {
		if (x->st)
			x->st->transport_failed = 1;
		return herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "%s: envd unreachable: %s", x->what, detail);
	}
	if (!x->connected)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "%s: cannot reach envd at this address: %s",
			    x->what, detail);
	/* Something answered, but not in HTTP/1.1 (HTTP/0.9 garbage, a weird status line). */
	return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "%s: not an HTTP answer: %s", x->what, detail);
}

/*
 * Runs the transfer and reports everything but the meaning of an HTTP error
 * status, which depends on the route. Returns 0 when an answer is at hand
 * (a success status with its whole body, or an error status with the start of
 * its body: see xfer_success_status), ENVD_CANCELLED, or a reported code.
 */
static int xfer_perform(struct xfer *x)
{
	CURLcode res;

	curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
	res = curl_easy_perform(x->h);
	if (x->st)
		x->st->http_status = x->headers_done ? (int)x->status : 0;
	if (x->cancelled)
		return ENVD_CANCELLED;
	if (x->fail)
		return x->fail;
	if (res == CURLE_OPERATION_TIMEDOUT)
		return timeout_error(x);
	if (!x->headers_done)
		return no_answer_error(x, res != CURLE_OK ? res : CURLE_GOT_NOTHING);
	if (!xfer_success_status(x))
		return 0; /* even when its body was cut short: we report what it starts with */
	if (x->kind == XK_STREAM && x->ended)
		return 0; /* the end message counts, whatever happened to the connection after it */
	if (res != CURLE_OK) {
		char detail[CURL_ERROR_SIZE];

		clean_message(detail, sizeof(detail), curl_detail(x, res));
		return herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL, "%s: %s: %s",
				 x->what,
				 x->kind == XK_STREAM ? "stream ended without an end message" : "answer broke off",
				 detail);
	}
	return 0;
}

static int hangar_code_for(enum connect_code code)
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

static int connect_error(struct xfer *x, enum connect_code code, const char *message)
{
	char msg[MSG_MAX];

	if (code == CONNECT_OK)
		code = CONNECT_UNKNOWN; /* an error that calls itself "ok" is still an error */
	if (x->st)
		x->st->code = code;
	if (!message || !*message)
		return herr_http(hangar_code_for(code), HANGAR_ERRCAT_SANDBOX, (int)x->status, connect_code_name(code),
				 "%s: %s (HTTP %ld)", x->what, connect_code_name(code), x->status);
	clean_message(msg, sizeof(msg), message);
	return herr_http(hangar_code_for(code), HANGAR_ERRCAT_SANDBOX, (int)x->status, connect_code_name(code),
			 "%s: %s", x->what, msg);
}

/*
 * An RPC answered with an HTTP error. Its body is Connect's {"code":"…",
 * "message":…}; other bodies (envd's token middleware sends {"code":401,…},
 * a proxy sends HTML) leave the status to speak, as Connect clients do.
 */
static int rpc_http_error(struct xfer *x)
{
	enum connect_code code = connect_code_from_http_status((int)x->status);
	const char *message = NULL;
	cJSON *j = NULL;
	int rc;

	if (x->errbody.len)
		j = cJSON_ParseWithLength(x->errbody.data, x->errbody.len);
	if (cJSON_IsObject(j)) {
		const cJSON *jc = cJSON_GetObjectItemCaseSensitive(j, "code");
		const cJSON *jm = cJSON_GetObjectItemCaseSensitive(j, "message");

		if (cJSON_IsString(jc))
			code = connect_code_from_name(jc->valuestring);
		if (cJSON_IsString(jm))
			message = jm->valuestring;
	}
	rc = connect_error(x, code, message);
	cJSON_Delete(j);
	return rc;
}

static int files_code_for(long status)
{
	switch (status) {
	case 400: /* a directory, a bad path */
	case 404:
	case 500: /* envd's own stat/open/mkdir failures: the path is unusable */
		return HANGAR_EFILE;
	case 401:
	case 403:
		return HANGAR_EREFUSED;
	case 406:
		return HANGAR_EPROTOCOL;
	case 429:
	case 507:
		return HANGAR_ECAPACITY;
	default:
		return status >= 500 ? HANGAR_EUNAVAILABLE : HANGAR_EPROTOCOL;
	}
}

/*
 * /files answered with an HTTP error: envd's REST shape {"code":<int>,
 * "message":…}, or Connect's when its user middleware refused us.
 */
static int files_http_error(struct xfer *x)
{
	const char *message = NULL, *provider_code = NULL;
	char msg[MSG_MAX];
	cJSON *j = NULL;
	int rc;

	if (x->errbody.len)
		j = cJSON_ParseWithLength(x->errbody.data, x->errbody.len);
	if (cJSON_IsObject(j)) {
		const cJSON *jc = cJSON_GetObjectItemCaseSensitive(j, "code");
		const cJSON *jm = cJSON_GetObjectItemCaseSensitive(j, "message");

		if (cJSON_IsString(jm))
			message = jm->valuestring;
		if (cJSON_IsString(jc)) {
			enum connect_code code = connect_code_from_name(jc->valuestring);

			provider_code = connect_code_name(code);
			if (x->st)
				x->st->code = code;
		}
	}
	if (message && *message) {
		clean_message(msg, sizeof(msg), message);
		rc = herr_http(files_code_for(x->status), HANGAR_ERRCAT_SANDBOX, (int)x->status, provider_code,
			       "%s: %s", x->what, msg);
	} else {
		rc = herr_http(files_code_for(x->status), HANGAR_ERRCAT_SANDBOX, (int)x->status, provider_code,
			       "%s: envd answered HTTP %ld", x->what, x->status);
	}
	cJSON_Delete(j);
	return rc;
}

/* ---- RPCs ------------------------------------------------------------------------ */

static int valid_method(const char *m)
{
	if (!m || !*m)
		return 0;
	for (; *m; m++)
		if (!((*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') || (*m >= '0' && *m <= '9') ||
		      *m == '.' || *m == '/' || *m == '_' || *m == '-'))
			return 0;
	return 1;
}

static int rpc_setup(struct xfer *x, const char *method, const char *content_type)
{
	int rc = set_url(x, method, NULL);

	if (!rc)
		rc = add_header(x, "Content-Type: %s", content_type);
	/* Compression is never offered: an answer we cannot cap before inflating is not worth it. */
	if (!rc)
		rc = add_header(x, "Connect-Accept-Encoding: identity");
	if (!rc && x->call->connect_timeout_ms > 0)
		rc = add_header(x, "Connect-Timeout-Ms: %lld", (long long)x->call->connect_timeout_ms);
	return rc;
}

static char *request_json(const cJSON *req)
{
	return req ? cJSON_PrintUnformatted(req) : strdup("{}");
}

int envd_unary(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
	       cJSON **resp, struct envd_status *st)
{
	struct xfer x;
	cJSON *j;
	int rc;

	if (resp)
		*resp = NULL;
	rc = xfer_begin(&x, c, call, XK_UNARY, method ? method : "envd call", st);
	if (!rc && (!resp || !valid_method(method)))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s", resp ? "method" : "resp");
	if (!rc)
		rc = rpc_setup(&x, method, "application/json");
	if (!rc)
		rc = add_header(&x, "Connect-Protocol-Version: 1");
	if (!rc && !(x.reqbody = request_json(req)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc) {
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, x.reqbody);
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x.reqbody));
		x.limit = ENVD_MAX_UNARY;
		rc = xfer_perform(&x);
	}
	if (rc == 0 && !xfer_success_status(&x))
		rc = rpc_http_error(&x);
	if (rc == 0) {
		j = cJSON_ParseWithLength(x.body.data ? x.body.data : "", x.body.len);
		if (cJSON_IsObject(j)) {
			*resp = j;
		} else {
			cJSON_Delete(j);
			rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x.status, NULL,
				       "%s: the answer is not a JSON object", x.what);
		}
	}
	xfer_end(&x);
	return rc;
}

int envd_stream(struct envd_client *c, const struct envd_call *call, const char *method, const cJSON *req,
		envd_msg_fn cb, void *cbctx, struct envd_status *st)
{
	struct xfer x;
	char *json = NULL;
	size_t len;
	int rc;

	rc = xfer_begin(&x, c, call, XK_STREAM, method ? method : "envd stream", st);
	envelope_decoder_init(&x.dec, ENVD_MAX_FRAME);
	x.cb = cb;
	x.cbctx = cbctx;
	if (!rc && (!cb || !valid_method(method)))
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s", cb ? "method" : "cb");
	if (!rc)
		rc = rpc_setup(&x, method, "application/connect+json");
	if (!rc && call->keepalive_sec > 0)
		rc = add_header(&x, "Keepalive-Ping-Interval: %d", call->keepalive_sec);
	/* The request of a server stream is exactly one envelope. */
	if (!rc && (!(json = request_json(req)) || !(x.reqbody = malloc(CONNECT_ENVELOPE_HEADER + strlen(json)))))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc) {
		len = strlen(json);
		connect_envelope_header((uint8_t *)x.reqbody, 0, (uint32_t)len);
		memcpy(x.reqbody + CONNECT_ENVELOPE_HEADER, json, len);
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, x.reqbody);
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(CONNECT_ENVELOPE_HEADER + len));
		rc = xfer_perform(&x);
	}
	free(json);
	if (rc == 0 && !xfer_success_status(&x))
		rc = rpc_http_error(&x); /* e.g. 401 from the token check, 404 from an older envd */
	else if (rc == 0 && x.ended)
		rc = x.end_rc;
	else if (rc == 0)
		rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x.status, NULL, "%s: %s", x.what,
			       envelope_decoder_finish(&x.dec) == ENVELOPE_TRUNCATED
				       ? "stream ended inside a message"
				       : "stream ended without an end message");
	xfer_end(&x);
	return rc;
}

/* ---- /files ------------------------------------------------------------------------ */

/* ?path=<path>[&username=<user>], escaped. */
static int files_setup(struct xfer *x, const char *path)
{
	const char *user = x->call->user ? x->call->user : x->call->ep->user;
	char *epath, *euser = NULL;
	struct hbuf q = HBUF_INIT;
	int rc = 0;

	epath = curl_easy_escape(x->h, path, 0);
	if (user && *user)
		euser = curl_easy_escape(x->h, user, 0);
	if (!epath || (user && *user && !euser) ||
	    hbuf_printf(&q, "path=%s%s%s", epath, euser ? "&username=" : "", euser ? euser : "") < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc)
		rc = set_url(x, "/files", q.data);
	curl_free(epath);
	curl_free(euser);
	hbuf_free(&q);
	return rc;
}

/* GET /files into x->out; the caller has set the kind and the output. */
static int files_get(struct xfer *x, const char *path)
{
	int rc;

	if (!path || !*path)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: path");
	rc = files_setup(x, path);
	/* gzip is offered because we inflate it ourselves, under the limit. */
	if (!rc)
		rc = add_header(x, "Accept-Encoding: gzip");
	if (!rc)
		rc = xfer_perform(x);
	if (rc == 0 && !xfer_success_status(x))
		rc = files_http_error(x);
	if (rc == 0 && x->z_live && !x->z_done)
		rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
			       "%s: the gzip answer is truncated", x->what);
	return rc;
}

int envd_file_read(struct envd_client *c, const struct envd_call *call, const char *path, size_t limit,
		   struct hbuf *out, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_FILE_MEM, "GET /files", st);
	if (!rc && !out)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: out");
	x.limit = limit;
	x.out = out_mem;
	if (!rc)
		rc = files_get(&x, path);
	/* An empty file still comes back as a (NUL-terminated) buffer. */
	if (!rc && !x.body.data && hbuf_reserve(&x.body, 0) < 0)
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (!rc) {
		hbuf_free(out);
		*out = x.body;
		memset(&x.body, 0, sizeof(x.body));
	}
	xfer_end(&x);
	return rc;
}

int envd_file_download(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		       uint64_t limit, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_FILE_FD, "GET /files", st);
	if (!rc && fd < 0)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: fd");
	x.limit = limit && limit < SIZE_MAX ? (size_t)limit : SIZE_MAX;
	x.fd = fd;
	x.out = out_fd;
	if (!rc)
		rc = files_get(&x, path);
	xfer_end(&x);
	return rc;
}

/* POST /files with the body set up by the caller; the answer is a JSON array. */
static int files_post(struct xfer *x, const char *path)
{
	cJSON *j;
	int rc;

	if (!path || !*path)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: path");
	rc = files_setup(x, path);
	if (!rc)
		rc = add_header(x, "Content-Type: application/octet-stream");
	x->limit = WRITE_ANSWER_MAX;
	if (!rc)
		rc = xfer_perform(x);
	if (rc == 0 && !xfer_success_status(x))
		return files_http_error(x);
	if (rc != 0)
		return rc;
	/* envd sets no Content-Type here (Go sniffs text/plain): parse regardless. */
	j = cJSON_ParseWithLength(x->body.data ? x->body.data : "", x->body.len);
	rc = cJSON_IsArray(j) ? 0
			      : herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, (int)x->status, NULL,
					  "%s: the answer is not a JSON array", x->what);
	cJSON_Delete(j);
	return rc;
}

int envd_file_write(struct envd_client *c, const struct envd_call *call, const char *path, const void *data,
		    size_t len, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_WRITE, "POST /files", st);
	if (!rc && !data && len)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: data");
	if (!rc) {
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, data ? data : "");
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		rc = files_post(&x, path);
	}
	xfer_end(&x);
	return rc;
}

/* The size to announce: what is left of a regular file from its offset, else -1 (chunked). */
static void upload_size(struct xfer *x)
{
	struct stat sb;
	off_t pos;

	if (fstat(x->fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	pos = lseek(x->fd, 0, SEEK_CUR);
	if (pos < 0)
		return;
	x->up_start = pos;
	x->up_size = sb.st_size > pos ? (curl_off_t)(sb.st_size - pos) : 0;
}

int envd_file_upload(struct envd_client *c, const struct envd_call *call, const char *path, int fd,
		     struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_WRITE, "POST /files", st);
	if (!rc && fd < 0)
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: fd");
	x.fd = fd;
	if (!rc) {
		upload_size(&x);
		curl_easy_setopt(x.h, CURLOPT_POST, 1L);
		curl_easy_setopt(x.h, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(x.h, CURLOPT_READDATA, &x);
		curl_easy_setopt(x.h, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(x.h, CURLOPT_SEEKDATA, &x);
		if (x.up_size >= 0)
			curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE_LARGE, x.up_size);
		else
			rc = add_header(&x, "Transfer-Encoding: chunked");
	}
	if (!rc)
		rc = files_post(&x, path);
	xfer_end(&x);
	return rc;
}

int envd_health(struct envd_client *c, const struct envd_call *call, struct envd_status *st)
{
	struct xfer x;
	int rc;

	rc = xfer_begin(&x, c, call, XK_HEALTH, "GET /health", st);
	x.limit = ERRBODY_MAX;
	if (!rc)
		rc = set_url(&x, "/health", NULL);
	if (!rc)
		rc = xfer_perform(&x);
	/* Anything but 204/200 (a 502 from an edge proxy, say) means not serving. */
	if (rc == 0 && !xfer_success_status(&x))
		rc = herr_http(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_SANDBOX, (int)x.status, NULL,
			       "%s: envd answered HTTP %ld", x.what, x.status);
	xfer_end(&x);
	return rc;
}
