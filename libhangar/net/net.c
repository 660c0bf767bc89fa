/*
 * The HTTP layer (net.h) on libcurl.
 *
 * Connection reuse. curl's shared connection cache (CURL_LOCK_DATA_CONNECT)
 * is documented as unsafe between concurrent threads (curl KNOWN_BUGS "A
 * shared connection cache is not thread-safe", still so in 7.88), so the
 * share only holds the DNS cache. Connections are reused instead by pooling
 * the easy handles themselves: each easy handle keeps its own live
 * connections across curl_easy_reset(), and the pool hands a thread the
 * handle that last talked to the same endpoint.
 *
 * One transfer is one struct xfer on the caller's stack. curl_easy_perform
 * is synchronous, so every callback runs on the calling thread; they note
 * what they saw in the xfer, and the outcome is classified in one place,
 * classify().
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
#include <time.h>

#include "net.h"
#include "core/internal.h"

/* ---- global init ------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init_once(void)
{
	/* Not thread-safe in curl itself; pthread_once makes it safe among our callers. */
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int net_global_init(void)
{
	const char *why;

	if (!curl_loaded(&why))
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "%s (libhangar loads libcurl for HTTP)", why);
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "cannot initialise libcurl: %s",
			    curl_easy_strerror(curl_init_rc));
	return 0;
}

/* ---- the pool ---------------------------------------------------------------- */

struct pooled {
	CURL *h;
	char *key;      /* the endpoint it last talked to, where its live connection is */
};

struct net_pool {
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock;
	size_t max, nidle;
	struct pooled idle[];   /* oldest first */
};

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
	struct net_pool *p = ud;

	(void)h;
	(void)access;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_lock(&p->share_lock[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct net_pool *p = ud;

	(void)h;
	if ((int)data >= 0 && data < CURL_LOCK_DATA_LAST)
		pthread_mutex_unlock(&p->share_lock[data]);
}

int net_pool_new(struct net_pool **out, size_t max_idle)
{
	struct net_pool *p;
	int rc;

	HCHECK_ARG(out, "out");
	*out = NULL;
	if ((rc = net_global_init()) != 0)
		return rc;
	if (max_idle == 0)
		max_idle = 1;
	p = calloc(1, sizeof(*p) + max_idle * sizeof(p->idle[0]));
	if (!p)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	p->max = max_idle;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&p->share_lock[i], NULL);
	pthread_mutex_init(&p->lock, NULL);
	p->share = curl_share_init();
	if (!p->share || curl_share_setopt(p->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
	    curl_share_setopt(p->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
	    curl_share_setopt(p->share, CURLSHOPT_USERDATA, p) != CURLSHE_OK ||
	    curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK) {
		net_pool_free(p);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "cannot set up a connection pool");
	}
	*out = p;
	return 0;
}

void net_pool_free(struct net_pool *p)
{
	if (!p)
		return;
	/* Handles first: they hold references to the share. */
	for (size_t i = 0; i < p->nidle; i++) {
		curl_easy_cleanup(p->idle[i].h);
		free(p->idle[i].key);
	}
	if (p->share)
		curl_share_cleanup(p->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&p->share_lock[i]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* The idle handle that last talked to key, else the most recent one, else a new one. */
static CURL *pool_take(struct net_pool *p, const char *key)
{
	CURL *h = NULL;

	if (p) {
		pthread_mutex_lock(&p->lock);
		if (p->nidle > 0) {
			size_t pick = p->nidle - 1;

			for (size_t i = p->nidle; i-- > 0;) {
				if (p->idle[i].key && strcmp(p->idle[i].key, key) == 0) {
					pick = i;
					break;
				}
			}
			h = p->idle[pick].h;
			free(p->idle[pick].key);
			memmove(&p->idle[pick], &p->idle[pick + 1], (p->nidle - pick - 1) * sizeof(p->idle[0]));
			p->nidle--;
		}
		pthread_mutex_unlock(&p->lock);
	}
	if (h) {
		/* Options go back to defaults; live connections and the share stay. */
		curl_easy_reset(h);
		return h;
	}
	h = curl_easy_init();
	if (h && p && curl_easy_setopt(h, CURLOPT_SHARE, p->share) != CURLE_OK) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

static void pool_give(struct net_pool *p, CURL *h, const char *key)
{
	CURL *evicted = NULL;

	if (!p) {
		curl_easy_cleanup(h);
		return;
	}
	pthread_mutex_lock(&p->lock);
	if (p->nidle == p->max) {
		evicted = p->idle[0].h;
		free(p->idle[0].key);
		memmove(&p->idle[0], &p->idle[1], (p->max - 1) * sizeof(p->idle[0]));
		p->nidle--;
	}
	p->idle[p->nidle].h = h;
	p->idle[p->nidle].key = key ? strdup(key) : NULL;
	p->nidle++;
	pthread_mutex_unlock(&p->lock);
	if (evicted)
		curl_easy_cleanup(evicted); /* closes its connections: outside the lock */
}

/* "<socket>\n<scheme>://<authority>": where a connection goes. */
static char *endpoint_key(const struct net_request *rq)
{
	const char *u = rq->url, *s = strstr(u, "://");
	size_t n = strlen(u);
	char *key = NULL;

	if (s)
		n = (size_t)(s + 3 - u) + strcspn(s + 3, "/?#");
	if (asprintf(&key, "%s\n%.*s", rq->unix_socket ? rq->unix_socket : "", (int)n, u) < 0)
		return NULL;
	return key;
}

/* ---- requests ------------------------------------------------------------------ */

void net_request_init(struct net_request *rq)
{
	memset(rq, 0, sizeof(*rq));
	rq->upload_size = -1;
}

int net_header_add(struct net_request *rq, const char *fmt, ...)
{
	struct curl_slist *l;
	char *line = NULL;
	va_list ap;
	int n, bad;

	va_start(ap, fmt);
	n = vasprintf(&line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	bad = strpbrk(line, "\r\n") != NULL;
	l = bad ? NULL : curl_slist_append(rq->headers_, line);
	/* The line may hold a credential: wipe our copy (the list's copy is wiped in fini). */
	explicit_bzero(line, (size_t)n);
	free(line);
	if (bad)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: a header line with a line break");
	if (!l)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	rq->headers_ = l;
	return 0;
}

void net_request_fini(struct net_request *rq)
{
	for (struct curl_slist *l = rq->headers_; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(rq->headers_);
	rq->headers_ = NULL;
}

void net_result_fini(struct net_result *res)
{
	hbuf_free(&res->body);
}

const char *net_class_name(enum net_class cls)
{
	switch (cls) {
	case NET_OK: return "ok";
	case NET_HTTP_STATUS: return "HTTP status";
	case NET_UNREACHABLE: return "unreachable";
	case NET_DROPPED: return "connection dropped";
	case NET_TIMEOUT: return "timeout";
	case NET_PROTOCOL: return "protocol";
	case NET_ABORTED: return "aborted";
	case NET_CANCELLED: return "cancelled";
	case NET_LOCAL: return "local";
	}
	return "unknown";
}

char *net_escape(const char *s)
{
	char *e, *copy;

	if (net_global_init() != 0)
		return NULL;
	/* The handle argument is ignored by curl since 7.82. */
	e = curl_easy_escape(NULL, s, 0);
	if (!e)
		return NULL;
	copy = strdup(e);
	curl_free(e);
	return copy;
}

/* ---- one transfer ------------------------------------------------------------------ */

struct xfer {
	struct net_request *rq;
	struct net_result *res;
	CURL *h;
	char errbuf[CURL_ERROR_SIZE];
	int headers_done;       /* the final (non-1xx) header block is complete */
	int success;            /* and its status is 2xx */
	int cancelled;
	int aborted;            /* a caller's callback stopped it */
	int errbody_full;       /* we stopped reading an error body at its cap */
	int nomem;
	uint64_t received;      /* body bytes of a 2xx answer */
	enum net_protocol refused;
	enum net_encoding enc_ce, enc_te;
	int64_t cancel_asked_ms; /* when the caller's cancel was last asked */
};

/*
 * How often, at most, a caller's cancel callback is asked. libcurl calls
 * back many times a millisecond on a busy transfer; a callback into another
 * language (the Python bindings') costs a lock each time.
 */
#define CANCEL_POLL_MS 20

/* Copies untrusted text into one printable, bounded line. */
static void clean_line(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; src && i < n && src[i] && o + 1 < cap; i++)
		dst[o++] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f) ? ' ' : src[i];
	dst[o] = '\0';
}

static int cancel_requested(struct xfer *x)
{
	int64_t now;

	if (x->cancelled || !x->rq->cancel)
		return x->cancelled;
	now = clock_mono_ms();
	if (x->cancel_asked_ms && now - x->cancel_asked_ms < CANCEL_POLL_MS)
		return 0;
	x->cancel_asked_ms = now;
	if (x->rq->cancel(x->rq->ud))
		x->cancelled = 1;
	return x->cancelled;
}

static enum net_encoding encoding_of(const char *v, size_t n)
{
	if (n == 8 && strncasecmp(v, "identity", 8) == 0)
		return NET_ENC_IDENTITY;
	if (n == 4 && strncasecmp(v, "gzip", 4) == 0)
		return NET_ENC_GZIP;
	return NET_ENC_OTHER;
}

/* Content-Encoding and Connect-Content-Encoding: two that disagree decode as nothing. */
static void note_content_encoding(struct xfer *x, const char *v, size_t n)
{
	enum net_encoding e = encoding_of(v, n);

	if (x->enc_ce != NET_ENC_NONE && x->enc_ce != e)
		e = NET_ENC_OTHER;
	x->enc_ce = e;
	clean_line(x->res->encoding_name, sizeof(x->res->encoding_name), v, n);
}

/* Transfer-Encoding: chunked (and identity) are the transport's; anything else is a compression. */
static void note_transfer_encoding(struct xfer *x, const char *v, size_t n)
{
	while (n > 0) {
		size_t t = 0, e;

		while (t < n && v[t] != ',')
			t++;
		e = t;
		while (e > 0 && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > 0 && !(e == 7 && strncasecmp(v, "chunked", 7) == 0) &&
		    !(e == 8 && strncasecmp(v, "identity", 8) == 0)) {
			x->enc_te = NET_ENC_OTHER;
			clean_line(x->res->encoding_name, sizeof(x->res->encoding_name), v, e);
		}
		if (t < n)
			t++;
		v += t;
		n -= t;
		while (n > 0 && (*v == ' ' || *v == '\t')) {
			v++;
			n--;
		}
	}
}

static int parse_int64(const char *v, size_t n, int64_t *out)
{
	char num[24];
	char *e;
	long long r;

	if (n == 0 || n >= sizeof(num))
		return -1;
	memcpy(num, v, n);
	num[n] = '\0';
	if (num[0] < '0' || num[0] > '9')
		return -1;
	errno = 0;
	r = strtoll(num, &e, 10);
	if (errno || *e || r < 0)
		return -1;
	*out = r;
	return 0;
}

/* Retry-After: delay-seconds or an HTTP-date; -1 when unusable. */
static int retry_after(const char *v, size_t n)
{
	char date[64];
	int64_t s;
	time_t t, now;

	if (parse_int64(v, n, &s) == 0)
		return s <= NET_RETRY_AFTER_MAX ? (int)s : -1;
	if (n == 0 || n >= sizeof(date))
		return -1;
	memcpy(date, v, n);
	date[n] = '\0';
	t = curl_getdate(date, NULL);
	if (t == (time_t)-1)
		return -1;
	now = time(NULL);
	if (t <= now)
		return 0;
	return t - now <= NET_RETRY_AFTER_MAX ? (int)(t - now) : -1;
}

static int header_named(const char *name, size_t nlen, const char *want)
{
	return nlen == strlen(want) && strncasecmp(name, want, nlen) == 0;
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
	if (header_named(line, nlen, "Content-Encoding") || header_named(line, nlen, "Connect-Content-Encoding"))
		note_content_encoding(x, v, (size_t)(end - v));
	else if (header_named(line, nlen, "Transfer-Encoding"))
		note_transfer_encoding(x, v, (size_t)(end - v));
	else if (header_named(line, nlen, "Content-Length")) {
		int64_t n;

		if (parse_int64(v, (size_t)(end - v), &n) == 0)
			x->res->content_length = n;
	} else if (header_named(line, nlen, "Retry-After"))
		x->res->retry_after_s = retry_after(v, (size_t)(end - v));
	if (x->rq->on_header)
		x->rq->on_header(x->rq->ud, line, nlen, v, (size_t)(end - v));
}

static int is_head(const struct net_request *rq)
{
	return rq->method && strcmp(rq->method, "HEAD") == 0;
}

/* The final headers are in: refuse what we will not read, before its body comes. */
static int check_answer(struct xfer *x)
{
	struct net_result *res = x->res;
	enum net_encoding e = x->enc_te == NET_ENC_OTHER ? NET_ENC_OTHER : x->enc_ce;

	res->encoding = e;
	if (e == NET_ENC_OTHER || (e == NET_ENC_GZIP && !x->rq->allow_gzip)) {
		x->refused = NET_PROTO_ENCODED;
		return -1;
	}
	if (x->success && x->rq->max_body && res->content_length >= 0 && !is_head(x->rq) &&
	    (uint64_t)res->content_length > (uint64_t)x->rq->max_body) {
		x->refused = NET_PROTO_OVERSIZED;
		return -1;
	}
	if (x->rq->on_answer && x->rq->on_answer(x->rq->ud, res)) {
		x->aborted = 1;
		return -1;
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
		x->res->content_length = -1;
		x->res->retry_after_s = -1;
		x->res->encoding_name[0] = '\0';
		x->enc_ce = x->enc_te = NET_ENC_NONE;
		if (x->rq->on_header)
			x->rq->on_header(x->rq->ud, NULL, 0, NULL, 0);
		return len;
	}
	if (len > 2 || (len == 2 && line[0] != '\r') || (len == 1 && line[0] != '\n')) {
		note_header(x, line, len);
		return len;
	}
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 100 && code < 200)
		return len;
	x->res->http_status = (int)code;
	x->headers_done = 1;
	x->success = code >= 200 && code <= 299;
	return check_answer(x) == 0 ? len : 0;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	size_t len = size * n, cap;
	int r;

	if (cancel_requested(x))
		return 0;
	if (!x->headers_done || !x->success) {
		cap = x->rq->max_error_body ? x->rq->max_error_body : NET_ERROR_BODY_MAX;
		r = hbuf_put_bounded(&x->res->body, data, len, cap);
		if (r < 0) {
			x->nomem = 1;
			return 0;
		}
		if (r > 0) {
			/* Past the cap: stop reading; what we have is enough to quote. */
			x->errbody_full = 1;
			return 0;
		}
		return len;
	}
	x->received += len;
	if (x->rq->max_body && x->received > x->rq->max_body) {
		x->refused = NET_PROTO_OVERSIZED;
		return 0;
	}
	if (x->rq->on_body) {
		if (x->rq->on_body(x->rq->ud, data, len)) {
			x->aborted = 1;
			return 0;
		}
		return len;
	}
	r = hbuf_put_bounded(&x->res->body, data, len, x->rq->max_body ? x->rq->max_body : SIZE_MAX);
	if (r != 0)
		x->nomem = 1; /* r > 0 cannot happen: received was checked */
	return r == 0 ? len : 0;
}

static int xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	struct xfer *x = ud;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancel_requested(x) ? 1 : 0;
}

static int prereq_cb(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	struct xfer *x = ud;

	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	x->res->connected = 1;
	return CURL_PREREQFUNC_OK;
}

static size_t read_cb(char *buf, size_t size, size_t n, void *ud)
{
	struct xfer *x = ud;
	ssize_t got;

	if (cancel_requested(x))
		return CURL_READFUNC_ABORT;
	got = x->rq->read(x->rq->ud, buf, size * n);
	if (got < 0) {
		x->aborted = 1;
		return CURL_READFUNC_ABORT;
	}
	return (size_t)got;
}

/* curl rewinds when it resends on a fresh connection after a reused one died. */
static int seek_cb(void *ud, curl_off_t offset, int origin)
{
	struct xfer *x = ud;

	if (origin != SEEK_SET || !x->rq->seek)
		return CURL_SEEKFUNC_CANTSEEK;
	return x->rq->seek(x->rq->ud, (int64_t)offset) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

/* Reads a whole file of at most max bytes onto b; 0, or -1 when it cannot be read. */
static int read_pem(struct hbuf *b, const char *path, size_t max)
{
	char chunk[16384];
	size_t got;
	FILE *f = fopen(path, "re");
	int rc = 0;

	if (!f)
		return -1;
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (hbuf_put_bounded(b, chunk, got, max) != 0) {
			rc = -1;
			break;
		}
	if (ferror(f))
		rc = -1;
	fclose(f);
	return rc;
}

/*
 * Trust extra CAs on top of the system's. CURLOPT_CAINFO would replace the
 * system bundle, so both go in one in-memory bundle: curl's own default
 * file (whatever this build of libcurl was configured with) and then the
 * extra file. The default directory (CURLOPT_CAPATH) stays as it was.
 */
static int add_ca_file(CURL *h, const char *extra, char *detail, size_t dlen)
{
	struct hbuf b = { 0 };
	struct curl_blob blob;
	char *def = NULL;
	int rc = -1;

	if (curl_easy_getinfo(h, CURLINFO_CAINFO, &def) == CURLE_OK && def && def[0])
		(void)read_pem(&b, def, 16u << 20); /* no system bundle: the extra file alone */
	if (hbuf_put_bounded(&b, "\n", 1, SIZE_MAX) != 0 || read_pem(&b, extra, 32u << 20) != 0) {
		snprintf(detail, dlen, "cannot read the CA file %s", extra);
		goto out;
	}
	blob.data = b.data;
	blob.len = b.len;
	blob.flags = CURL_BLOB_COPY;
	if (curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob) != CURLE_OK) {
		snprintf(detail, dlen, "this libcurl cannot take CA certificates from memory");
		goto out;
	}
	rc = 0;
out:
	hbuf_free(&b);
	return rc;
}

/* The security settings and deadlines every request gets: the one place they are set. */
static int setup(struct xfer *x)
{
	struct net_request *rq = x->rq;
	CURL *h = x->h;
	int64_t connect_ms = rq->connect_timeout_ms > 0 ? rq->connect_timeout_ms : NET_CONNECT_TIMEOUT_MS;

	if (connect_ms > NET_CONNECT_TIMEOUT_MS)
		connect_ms = NET_CONNECT_TIMEOUT_MS;
	if (rq->timeout_ms > 0 && rq->timeout_ms < connect_ms)
		connect_ms = rq->timeout_ms;
	x->res->connect_timeout_ms = connect_ms;

	if (curl_easy_setopt(h, CURLOPT_URL, rq->url) != CURLE_OK)
		return -1;
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 0L);
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	/* No Accept-Encoding is sent, and curl undoes no Content-Encoding: callers see raw bytes. */
	curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, NULL);
	curl_easy_setopt(h, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(h, CURLOPT_TRANSFER_ENCODING, 0L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "libhangar/" HANGAR_VERSION_STRING);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	if (rq->unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, rq->unix_socket);
	if (rq->fresh_connect)
		curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
	if (rq->download_buffer > 0)
		curl_easy_setopt(h, CURLOPT_BUFFERSIZE, rq->download_buffer);
	if (rq->extra_ca_file && add_ca_file(h, rq->extra_ca_file, x->res->detail, sizeof(x->res->detail)) != 0)
		return -1;

	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)connect_ms);
	if (rq->timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms > LONG_MAX ? LONG_MAX : (long)rq->timeout_ms);
	if (rq->stall_ms > 0) {
		/* Less than a byte a second for that long counts as stalled. */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, rq->stall_ms < 1000 ? 1L : (long)(rq->stall_ms / 1000));
	}

	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, prereq_cb);
	curl_easy_setopt(h, CURLOPT_PREREQDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);

	if (rq->read) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
		if (rq->upload_buffer > 0)
			curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, rq->upload_buffer);
		if (rq->upload_size >= 0)
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->upload_size);
		else if (net_header_add(rq, "Transfer-Encoding: chunked") != 0)
			return -1;
	} else if (rq->has_body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? (const char *)rq->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
	} else if (!rq->method || strcmp(rq->method, "GET") == 0) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (is_head(rq)) {
		/* A HEAD answer announces a body that never comes: curl must not wait for it. */
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	}
	if (rq->aws_sigv4) {
		if (!rq->auth_user || !rq->auth_secret ||
		    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, rq->aws_sigv4) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_USERNAME, rq->auth_user) != CURLE_OK ||
		    curl_easy_setopt(h, CURLOPT_PASSWORD, rq->auth_secret) != CURLE_OK)
			return -1;
	}
	if (rq->method && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "POST") != 0 && !is_head(rq))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	else if (rq->method && strcmp(rq->method, "POST") == 0 && !rq->read && !rq->has_body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	/* No "Expect: 100-continue" round trip before a body. */
	if (net_header_add(rq, "Expect:") != 0)
		return -1;
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, (struct curl_slist *)rq->headers_);
	return 0;
}

/* Failures below HTTP that mean the peer was not there, or went away. */
static int is_transport_failure(CURLcode cc)
{
	switch (cc) {
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

static enum net_class classify(struct xfer *x, CURLcode cc)
{
	struct net_result *res = x->res;

	if (x->cancelled)
		return NET_CANCELLED;
	if (x->aborted)
		return NET_ABORTED;
	if (x->refused != NET_PROTO_NONE) {
		res->protocol = x->refused;
		return NET_PROTOCOL;
	}
	if (cc == CURLE_OPERATION_TIMEDOUT) {
		if (!res->connected)
			res->timeout = NET_TIMEOUT_CONNECT;
		else if (x->rq->stall_ms > 0 && (x->rq->timeout_ms <= 0 || res->elapsed_ms < x->rq->timeout_ms))
			res->timeout = NET_TIMEOUT_STALL;
		else
			res->timeout = NET_TIMEOUT_TOTAL;
		return NET_TIMEOUT;
	}
	if (cc == CURLE_OUT_OF_MEMORY || x->nomem) {
		res->out_of_memory = 1;
		snprintf(res->detail, sizeof(res->detail), "out of memory");
		return NET_LOCAL;
	}
	if (!x->headers_done) {
		if (cc == CURLE_OK)
			return NET_LOCAL;
		if (is_transport_failure(cc))
			return res->connected ? NET_DROPPED : NET_UNREACHABLE;
		if (!res->connected)
			return NET_LOCAL; /* a bad URL, a protocol not allowed */
		/* Something answered, but not in HTTP/1.x (HTTP/0.9 garbage, a weird status line). */
		res->protocol = NET_PROTO_NOT_HTTP;
		return NET_PROTOCOL;
	}
	if (!x->success)
		return NET_HTTP_STATUS; /* even when its body was cut short: we quote what it starts with */
	if (cc != CURLE_OK) {
		res->protocol = NET_PROTO_TRUNCATED;
		return NET_PROTOCOL;
	}
	return NET_OK;
}

enum net_class net_perform(struct net_pool *pool, struct net_request *rq, struct net_result *res)
{
	struct xfer x;
	int64_t t0 = clock_mono_ms();
	char *key = NULL;
	CURLcode cc;

	memset(res, 0, sizeof(*res));
	res->content_length = -1;
	res->retry_after_s = -1;
	memset(&x, 0, sizeof(x));
	x.rq = rq;
	x.res = res;
	if (!rq->url || net_global_init() != 0) {
		snprintf(res->detail, sizeof(res->detail), "%s", rq->url ? "cannot initialise libcurl" : "no URL");
		return res->cls = NET_LOCAL;
	}
	key = endpoint_key(rq);
	x.h = key ? pool_take(pool, key) : NULL;
	if (!x.h) {
		free(key);
		res->out_of_memory = 1;
		snprintf(res->detail, sizeof(res->detail), "out of memory");
		return res->cls = NET_LOCAL;
	}
	if (setup(&x) != 0) {
		if (!res->detail[0])
			snprintf(res->detail, sizeof(res->detail), "cannot set the request up (URL or header)");
		res->cls = NET_LOCAL;
		cc = CURLE_URL_MALFORMAT;
	} else {
		cc = curl_easy_perform(x.h);
		res->elapsed_ms = clock_mono_ms() - t0;
		res->curl_code = (int)cc;
		if (cc != CURLE_OK)
			clean_line(res->detail, sizeof(res->detail), x.errbuf[0] ? x.errbuf : curl_easy_strerror(cc),
				   sizeof(x.errbuf));
		if (!x.headers_done)
			res->http_status = 0;
		res->cls = classify(&x, cc);
	}
	/* Drop pointers into this frame and the request before the handle goes back. */
	curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(x.h, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, NULL);
	if (rq->aws_sigv4) {
		/* curl frees its copies: an idle handle keeps no credential. */
		curl_easy_setopt(x.h, CURLOPT_AWS_SIGV4, NULL);
		curl_easy_setopt(x.h, CURLOPT_USERNAME, NULL);
		curl_easy_setopt(x.h, CURLOPT_PASSWORD, NULL);
	}
	if (cc == CURLE_OUT_OF_MEMORY || res->cls == NET_LOCAL)
		pool_give(NULL, x.h, NULL); /* not kept */
	else
		pool_give(pool, x.h, key);
	free(key);
	return res->cls;
}
