/*
 * s3://BUCKET/PREFIX: one object per blob in any S3-compatible service,
 * addressed path-style against HANGAR_S3_ENDPOINT, signed with SigV4.
 *
 * A blob no larger than one part goes up in a single PUT when it is
 * committed, so nothing exists until then. A larger one is a multipart
 * upload: parts go up as they fill, and the object appears only when
 * CompleteMultipartUpload succeeds; any failure or an abort sends
 * AbortMultipartUpload, so no partial object is left and an object of the
 * same name stays as it was. The credentials go to libcurl's signing only:
 * never into a URL, a log line or an error message.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3http.h"
#include "s3list.h"
#include "util/buf.h"

#define MIN_PART (5u << 20)     /* S3's smallest part but the last */
#define DEFAULT_PART (8u << 20)
#define MAX_PARTS 10000

struct s3_store {
	struct blobstore base;
	struct s3_credentials cred;
	char *endpoint, *bucket, *prefix;
	char *akid, *secret, *region;
	size_t part_size;
	long timeout_ms;
	int sweep_page;         /* uploads asked for per listing */
	int swept;              /* the sweep ran through this handle */
};

struct s3_writer {
	struct blob_writer base;
	char *key;
	unsigned char *buf;
	size_t fill;
	char *upload_id;        /* percent-encoded, once a multipart upload began */
	int parts;
	char **etags;
};

static struct s3_store *s3_of(struct blobstore *bs)
{
	return (struct s3_store *)bs;
}

static char *url_of(struct s3_store *s, const char *key, const char *query)
{
	char *u;

	/* An empty key is the bucket itself: /BUCKET, not /BUCKET/. */
	if (asprintf(&u, "%s/%s%s%s%s%s", s->endpoint, s->bucket, *key ? "/" : "", key, query ? "?" : "",
		     query ? query : "") < 0)
		return NULL;
	return u;
}

/* Copies the text of <tag>...</tag> in xml, printable ASCII only, capped. */
static int xml_text(const char *xml, const char *tag, char *out, size_t size)
{
	char open[64], close[64];
	const char *a, *b;
	size_t n = 0;

	out[0] = '\0';
	if (!xml)
		return 0;
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (!(a = strstr(xml, open)) || !(b = strstr(a, close)))
		return 0;
	for (a += strlen(open); a < b && n + 1 < size; a++)
		out[n++] = (*a >= 0x20 && *a < 0x7f) ? *a : '?';
	out[n] = '\0';
	return 1;
}

/* The error for an answer that is not what was asked for. What the service
 * says goes in, unless it quotes a credential back. */
static int s3_fail(struct s3_store *s, const char *what, const char *key, const struct s3_response *rs)
{
	char code[64], msg[256];
	int hcode;

	xml_text(rs->body, "Code", code, sizeof(code));
	xml_text(rs->body, "Message", msg, sizeof(msg));
	if (strstr(msg, s->secret) || strstr(msg, s->akid) || strstr(code, s->secret) || strstr(code, s->akid)) {
		snprintf(msg, sizeof(msg), "(a message quoting credentials, withheld)");
		code[0] = '\0';
	}
	if (rs->status == 404)
		hcode = HANGAR_ENOTFOUND;
	else if (rs->status == 401 || rs->status == 403)
		hcode = HANGAR_EREFUSED;
	else
		hcode = HANGAR_EUNAVAILABLE;
	return herr_http(hcode, HANGAR_ERRCAT_PROVIDER, (int)rs->status, code,
			 "s3 store %s: %s %s/%s: HTTP %ld%s%s%s%s%s", s->base.url, what, s->bucket, key, rs->status,
			 *code ? " " : "", code, *msg ? " (" : "", msg, *msg ? ")" : "");
}

/* One request; *rs is the answer when 0 is returned. Transport errors get context. */
static int request(struct s3_store *s, const char *method, const char *key, const char *query, const void *body,
		   size_t len, blob_sink sink, void *payload, struct s3_response *rs)
{
	struct s3_request rq = { .method = method, .body = body, .body_len = len, .cred = &s->cred,
				 .timeout_ms = s->timeout_ms, .sink = sink, .payload = payload };
	char *url = url_of(s, key, query);
	int rc;

	if (!url) {
		memset(rs, 0, sizeof(*rs));
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	rq.url = url;
	rc = s3_http(&rq, rs);
	free(url);
	if (rc < 0 && rc != HANGAR_ENOMEM && (!sink || rs->status < 200 || rs->status >= 300))
		herr_prefix("s3 store %s: %s %s/%s", s->base.url, method, s->bucket, key);
	hangar_sys_log(s->base.ctx, HANGAR_LOG_DEBUG, "s3 store %s: %s %s/%s%s%s: %ld", s->base.url, method, s->bucket, key,
	     query ? "?" : "", query ? query : "", rs->status);
	return rc;
}

static char *key_of(struct s3_store *s, const char *name)
{
	char *k;

	return asprintf(&k, "%s%s", s->prefix, name) < 0 ? NULL : k;
}

/* RFC 3986 percent-encoding of a query value (SigV4's canonical form). */
static char *encode(const char *v)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(v) * 3 + 1), *o = out;

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- sweeping what killed writers left ---------------------------------------- */

/*
 * A writer killed between its first part and CompleteMultipartUpload leaves
 * an incomplete upload whose parts S3 keeps, and bills, for good. The first
 * write through a store handle (one per capture) lists the incomplete uploads
 * under the prefix and aborts those initiated more than a day ago, the
 * directory store's rule for temporary files of unknown making. No shorter
 * age applies to any upload: a listing names no process, the upload id is the
 * service's, and another process or replica may be writing through the same
 * prefix right now, so age is the only sign of a dead writer that holds. Only
 * keys that are this store's blobs (PREFIX + a blob name, no further slash)
 * are touched: a store whose prefix nests under this one keeps its uploads,
 * and the listing asks for them rolled up (delimiter "/") so that however
 * many there are, they take one entry of a page.
 *
 * Bounded, so that a huge or hostile bucket cannot stall a capture: at most
 * SWEEP_PAGES answers of sweep_page uploads, LIST_MAX bytes each, at most
 * SWEEP_ABORTS aborts, and SWEEP_BUDGET_MS for all the sweep's requests.
 * A page is parsed whole, strictly, before any of it is acted on: an answer
 * that is not a well-formed listing ends the sweep and aborts nothing from
 * it. A sweep that fails is a warning; the write goes on. Before the
 * listing, the sweep retries the aborts that failed earlier in this process
 * (see remember_failed_abort), which need no listing and no age.
 */
#define STALE_UPLOAD_SECONDS 86400
#define SWEEP_PAGE 100
#define SWEEP_PAGES 10
#define SWEEP_ABORTS 50
#define SWEEP_BUDGET_MS 15000
#define LIST_MAX (256u << 10)

static int list_sink(void *payload, const void *data, size_t len)
{
	int r = hbuf_put_bounded(payload, data, len, LIST_MAX);

	if (r > 0)
		return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER, "the listing is larger than %u bytes", LIST_MAX);
	return r < 0 ? herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory") : 0;
}

/* One page of ListMultipartUploads after the markers (NULL: from the start). */
static int list_page(struct s3_store *s, const char *key_marker, const char *id_marker, struct s3_listing *l)
{
	struct hbuf body = HBUF_INIT, q = HBUF_INIT;
	struct s3_response rs;
	char *km = key_marker ? encode(key_marker) : NULL, *im = id_marker ? encode(id_marker) : NULL;
	char *pfx = encode(s->prefix);
	const char *why;
	int rc;

	memset(l, 0, sizeof(*l));
	/* The query in SigV4's canonical order: sorted by name. The delimiter
	 * rolls what lies under a nested prefix up into one CommonPrefixes
	 * entry, so other stores' uploads cannot crowd this store's out of the
	 * pages a sweep reads. */
	if (!pfx || (key_marker && !km) || (id_marker && !im) || hbuf_puts(&q, "delimiter=%2F&") < 0 ||
	    (km && hbuf_printf(&q, "key-marker=%s&", km) < 0) || hbuf_printf(&q, "max-uploads=%d&", s->sweep_page) < 0 ||
	    (*pfx && hbuf_printf(&q, "prefix=%s&", pfx) < 0) ||
	    (km && im && *im && hbuf_printf(&q, "upload-id-marker=%s&", im) < 0) || hbuf_puts(&q, "uploads=") < 0) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	rc = request(s, "GET", "", q.data, NULL, 0, list_sink, &body, &rs);
	/* The sink's refusal of a 2xx answer came without the store's name. */
	if (rc < 0 && rs.status >= 200 && rs.status < 300)
		herr_prefix("s3 store %s: listing the unfinished uploads", s->base.url);
	if (rc == 0 && rs.status != 200)
		rc = s3_fail(s, "listing the unfinished uploads under", s->prefix, &rs);
	s3_response_free(&rs);
	if (rc == 0 && s3_listing_parse(l, body.data ? body.data : "", body.len, (size_t)s->sweep_page, &why) < 0)
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			  "s3 store %s: listing the unfinished uploads: not a valid ListMultipartUploadsResult (%s)",
			  s->base.url, why);
out:
	hbuf_free(&body);
	hbuf_free(&q);
	free(km);
	free(im);
	free(pfx);
	return rc;
}

/* A key this store writes: PREFIX + a blob name (see blobstore.h). */
static int own_key(struct s3_store *s, const char *key)
{
	size_t pl = strlen(s->prefix), n;

	if (strncmp(key, s->prefix, pl) != 0)
		return 0;
	key += pl;
	n = strlen(key);
	return n > 0 && n <= 128 && key[0] != '.' &&
	       strspn(key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static long mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Aborts the upload id of key; 0 when it is gone (404 included). */
static int abort_stale(struct s3_store *s, const char *key, const char *id)
{
	struct s3_response rs;
	char *eid = encode(id), *query = NULL;
	int rc;

	if (!eid || asprintf(&query, "uploadId=%s", eid) < 0) {
		free(eid);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	rc = request(s, "DELETE", key, query, NULL, 0, NULL, NULL, &rs);
	if (rc == 0 && rs.status != 204 && rs.status != 200 && rs.status != 404)
		rc = s3_fail(s, "aborting the stale upload of", key, &rs);
	s3_response_free(&rs);
	free(query);
	free(eid);
	return rc;
}

/*
 * Uploads whose own abort failed (the service unreachable or refusing for a
 * moment): their writer knows they are dead, so the next sweep in this
 * process aborts them first, whatever their age, rather than leaving them a
 * day. Kept in the process only, so that nothing written outside the store
 * can name an upload for a sweep to abort; a process that ends first leaves
 * them to the day-old rule. Bounded: past FAILED_ABORTS_MAX the oldest is
 * forgotten, and said.
 */
#define FAILED_ABORTS_MAX 64

struct failed_abort {
	char *where;            /* endpoint and bucket: the service the upload is in */
	char *key, *id;
};

static pthread_mutex_t failed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct failed_abort failed[FAILED_ABORTS_MAX];
static size_t n_failed;

static char *store_where(const struct s3_store *s)
{
	char *w = NULL;

	return asprintf(&w, "%s %s", s->endpoint, s->bucket) < 0 ? NULL : w;
}

static void failed_free(struct failed_abort *f)
{
	free(f->where);
	free(f->key);
	free(f->id);
	memset(f, 0, sizeof(*f));
}

static void remember_failed_abort(struct s3_store *s, const char *key, const char *id)
{
	struct failed_abort f = { store_where(s), strdup(key), strdup(id) }, dropped = { 0 };

	if (!f.where || !f.key || !f.id) {
		failed_free(&f);
		return;
	}
	pthread_mutex_lock(&failed_lock);
	if (n_failed == FAILED_ABORTS_MAX) {
		dropped = failed[0];
		memmove(failed, failed + 1, (FAILED_ABORTS_MAX - 1) * sizeof(failed[0]));
		n_failed--;
	}
	failed[n_failed++] = f;
	pthread_mutex_unlock(&failed_lock);
	if (dropped.key)
		hangar_sys_log(s->base.ctx, HANGAR_LOG_WARNING,
			       "s3: more than %d aborts failed; the upload of %s is left to the day-old sweep",
			       FAILED_ABORTS_MAX, dropped.key);
	failed_free(&dropped);
}

/* Takes out (into *out) the first remembered upload of this store, if any. 1, or 0 when none. */
static int take_failed_abort(struct s3_store *s, const char *where, struct failed_abort *out)
{
	int found = 0;

	pthread_mutex_lock(&failed_lock);
	for (size_t i = 0; i < n_failed; i++) {
		if (strcmp(failed[i].where, where) != 0 || !own_key(s, failed[i].key))
			continue;
		*out = failed[i];
		memmove(failed + i, failed + i + 1, (n_failed - i - 1) * sizeof(failed[0]));
		n_failed--;
		found = 1;
		break;
	}
	pthread_mutex_unlock(&failed_lock);
	return found;
}

/* Retries the aborts of this store that failed before; one that fails again is kept. */
static int retry_failed_aborts(struct s3_store *s, long deadline, int *aborted)
{
	char *where = store_where(s);
	struct failed_abort f, again[FAILED_ABORTS_MAX];
	size_t n_again = 0;
	int rc = 0;

	if (!where)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	while (*aborted < SWEEP_ABORTS && n_again < FAILED_ABORTS_MAX && take_failed_abort(s, where, &f)) {
		long left = deadline - mono_ms();

		if (left <= 0 || rc < 0) {
			again[n_again++] = f;
			continue;
		}
		s->timeout_ms = left < s->timeout_ms ? left : s->timeout_ms;
		if ((rc = abort_stale(s, f.key, f.id)) == 0) {
			(*aborted)++;
			hangar_sys_log(s->base.ctx, HANGAR_LOG_INFO,
				       "s3 store %s: aborted the upload of %s/%s whose own abort had failed", s->base.url,
				       s->bucket, f.key);
			failed_free(&f);
		} else {
			again[n_again++] = f;
		}
	}
	for (size_t i = 0; i < n_again; i++) {
		remember_failed_abort(s, again[i].key, again[i].id);
		failed_free(&again[i]);
	}
	free(where);
	return rc;
}

static int sweep_pages(struct s3_store *s, long deadline, int *aborted)
{
	char *key_marker = NULL, *id_marker = NULL;
	time_t now = time(NULL);
	int rc = 0, page;

	for (page = 0; page < SWEEP_PAGES && rc == 0; page++) {
		struct s3_listing l;
		long left = deadline - mono_ms();

		if (left <= 0 || *aborted == SWEEP_ABORTS)
			break;
		s->timeout_ms = left < s->timeout_ms ? left : s->timeout_ms;
		if ((rc = list_page(s, key_marker, id_marker, &l)) < 0)
			break;
		for (size_t i = 0; i < l.n && rc == 0 && *aborted < SWEEP_ABORTS; i++) {
			struct s3_upload *u = &l.u[i];

			if (!own_key(s, u->key) || now - u->initiated <= STALE_UPLOAD_SECONDS)
				continue;
			if ((left = deadline - mono_ms()) <= 0)
				break;
			s->timeout_ms = left < s->timeout_ms ? left : s->timeout_ms;
			if ((rc = abort_stale(s, u->key, u->id)) == 0) {
				(*aborted)++;
				hangar_sys_log(s->base.ctx, HANGAR_LOG_INFO,
					       "s3 store %s: aborted the upload of %s/%s begun %lld s ago, left by a writer "
					       "that stopped",
					       s->base.url, s->bucket, u->key, (long long)(now - u->initiated));
			}
		}
		/* Paging must move on, or the listing runs in a circle. */
		if (rc == 0 && l.truncated) {
			if (key_marker && !strcmp(key_marker, l.next_key) &&
			    (id_marker && l.next_id ? !strcmp(id_marker, l.next_id) : id_marker == l.next_id))
				rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
					  "s3 store %s: listing the unfinished uploads: the next page starts where the "
					  "last one did",
					  s->base.url);
			free(key_marker);
			free(id_marker);
			key_marker = l.next_key;
			id_marker = l.next_id;
			l.next_key = l.next_id = NULL;
		} else {
			page = SWEEP_PAGES + 1; /* done */
		}
		s3_listing_free(&l);
	}
	if (rc == 0 && page <= SWEEP_PAGES)
		hangar_sys_log(s->base.ctx, HANGAR_LOG_INFO,
			       "s3 store %s: the sweep of unfinished uploads stopped at its bound (%d pages, %d aborts, "
			       "%d ms); the next sweep goes on",
			       s->base.url, SWEEP_PAGES, SWEEP_ABORTS, SWEEP_BUDGET_MS);
	free(key_marker);
	free(id_marker);
	return rc;
}

/* Never fails the caller: what goes wrong is a warning, and the caller's
 * error state is as it was. */
static void sweep_stale_uploads(struct s3_store *s)
{
	hangar_sys_saved_error saved;
	long timeout = s->timeout_ms, deadline = mono_ms() + SWEEP_BUDGET_MS;
	int aborted = 0;

	hangar_sys_error_save(&saved);
	if (retry_failed_aborts(s, deadline, &aborted) < 0)
		hangar_sys_log(s->base.ctx, HANGAR_LOG_WARNING, "%s; the upload stays for the next sweep",
			       hangar_error_last()->message);
	else if (sweep_pages(s, deadline, &aborted) < 0)
		hangar_sys_log(s->base.ctx, HANGAR_LOG_WARNING,
			       "%s; the sweep of unfinished uploads stopped (%d aborted), the write goes on",
			       hangar_error_last()->message, aborted);
	s->timeout_ms = timeout;
	hangar_sys_error_restore(&saved);
}

/* ---- writing ---------------------------------------------------------------- */

static int write_begin(struct blob_writer **out, struct blobstore *bs, const char *name)
{
	struct s3_store *s = s3_of(bs);
	struct s3_writer *w = calloc(1, sizeof(*w));

	if (!w || !(w->key = key_of(s, name)) || !(w->buf = malloc(s->part_size))) {
		if (w)
			free(w->key);
		free(w);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	if (!s->swept) {
		s->swept = 1;
		sweep_stale_uploads(s);
	}
	w->base.bs = bs;
	*out = &w->base;
	return 0;
}

static int initiate(struct s3_store *s, struct s3_writer *w)
{
	struct s3_response rs;
	char id[1024];
	int rc = request(s, "POST", w->key, "uploads=", NULL, 0, NULL, NULL, &rs);

	if (rc == 0 && (rs.status != 200 || !xml_text(rs.body, "UploadId", id, sizeof(id)) || !*id))
		rc = rs.status == 200 ? herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
					     "s3 store %s: starting an upload of %s/%s: no upload id in the answer",
					     s->base.url, s->bucket, w->key)
				      : s3_fail(s, "starting an upload of", w->key, &rs);
	if (rc == 0 && !(w->upload_id = encode(id)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	s3_response_free(&rs);
	return rc;
}

static int upload_part(struct s3_store *s, struct s3_writer *w)
{
	struct s3_response rs;
	char query[1200], **etags;
	int rc;

	if (w->parts >= MAX_PARTS)
		return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_ARGUMENT,
			    "s3 store %s: %s/%s would need more than %d parts", s->base.url, s->bucket, w->key, MAX_PARTS);
	if (!(etags = realloc(w->etags, sizeof(*etags) * (size_t)(w->parts + 1))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	w->etags = etags;
	snprintf(query, sizeof(query), "partNumber=%d&uploadId=%s", w->parts + 1, w->upload_id);
	rc = request(s, "PUT", w->key, query, w->buf, w->fill, NULL, NULL, &rs);
	if (rc == 0 && (rs.status != 200 || !*rs.etag))
		rc = rs.status == 200 ? herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
					     "s3 store %s: uploading a part of %s/%s: no ETag in the answer", s->base.url,
					     s->bucket, w->key)
				      : s3_fail(s, "uploading a part of", w->key, &rs);
	if (rc == 0 && !(w->etags[w->parts] = strdup(rs.etag)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (rc == 0)
		w->parts++;
	s3_response_free(&rs);
	w->fill = 0;
	return rc;
}

static int write_data(struct blob_writer *bw, const void *data, size_t len)
{
	struct s3_writer *w = (struct s3_writer *)bw;
	struct s3_store *s = s3_of(bw->bs);
	const unsigned char *p = data;
	int rc;

	while (len) {
		size_t n;

		/* A full part goes up only once more data follows: a blob of exactly
		 * one part is a single PUT at commit. */
		if (w->fill == s->part_size) {
			if (!w->upload_id && (rc = initiate(s, w)) < 0)
				return rc;
			if ((rc = upload_part(s, w)) < 0)
				return rc;
		}
		n = s->part_size - w->fill < len ? s->part_size - w->fill : len;
		memcpy(w->buf + w->fill, p, n);
		w->fill += n;
		p += n;
		len -= n;
	}
	return 0;
}

static void free_writer(struct s3_writer *w)
{
	for (int i = 0; i < w->parts; i++)
		free(w->etags[i]);
	free(w->etags);
	free(w->upload_id);
	free(w->key);
	free(w->buf);
	free(w);
}

static void abort_upload(struct s3_store *s, struct s3_writer *w)
{
	hangar_sys_saved_error saved;
	struct s3_response rs;
	char query[1100];
	int rc;

	if (!w->upload_id)
		return;
	hangar_sys_error_save(&saved);
	snprintf(query, sizeof(query), "uploadId=%s", w->upload_id);
	rc = request(s, "DELETE", w->key, query, NULL, 0, NULL, NULL, &rs);
	if (rc == 0 && rs.status != 204 && rs.status != 200 && rs.status != 404)
		rc = s3_fail(s, "aborting the upload of", w->key, &rs);
	if (rc < 0) {
		hangar_sys_log(s->base.ctx, HANGAR_LOG_WARNING,
		     "%s; the parts of the unfinished upload %s stay until the next capture's sweep in this "
		     "process, or the sweep of any capture a day on, or the bucket's lifecycle, removes them",
		     hangar_error_last()->message, w->upload_id);
		remember_failed_abort(s, w->key, w->upload_id);
	}
	s3_response_free(&rs);
	hangar_sys_error_restore(&saved);
}

static void abort_write(struct blob_writer *bw)
{
	struct s3_writer *w = (struct s3_writer *)bw;

	abort_upload(s3_of(bw->bs), w);
	free_writer(w);
}

static int xml_escape_into(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '&')
			fputs("&amp;", f);
		else if (*v == '<')
			fputs("&lt;", f);
		else if (*v == '>')
			fputs("&gt;", f);
		else
			fputc(*v, f);
	}
	return 0;
}

static int complete(struct s3_store *s, struct s3_writer *w)
{
	struct s3_response rs;
	char query[1100], *xml = NULL;
	size_t xml_len = 0;
	FILE *f = open_memstream(&xml, &xml_len);
	int rc;

	if (!f)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	fputs("<CompleteMultipartUpload>", f);
	for (int i = 0; i < w->parts; i++) {
		fprintf(f, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
		xml_escape_into(f, w->etags[i]);
		fputs("</ETag></Part>", f);
	}
	fputs("</CompleteMultipartUpload>", f);
	if (fclose(f) != 0 || !xml) {
		free(xml);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	snprintf(query, sizeof(query), "uploadId=%s", w->upload_id);
	rc = request(s, "POST", w->key, query, xml, xml_len, NULL, NULL, &rs);
	/* S3 may answer 200 and still fail: the error is then in the body. */
	if (rc == 0 && (rs.status != 200 || (rs.body && strstr(rs.body, "<Error>"))))
		rc = s3_fail(s, "completing the upload of", w->key, &rs);
	s3_response_free(&rs);
	free(xml);
	return rc;
}

static int commit(struct blob_writer *bw)
{
	struct s3_writer *w = (struct s3_writer *)bw;
	struct s3_store *s = s3_of(bw->bs);
	struct s3_response rs;
	int rc;

	if (!w->upload_id) {
		rc = request(s, "PUT", w->key, NULL, w->buf, w->fill, NULL, NULL, &rs);
		if (rc == 0 && rs.status != 200)
			rc = s3_fail(s, "storing", w->key, &rs);
		s3_response_free(&rs);
	} else {
		rc = upload_part(s, w);
		if (rc == 0)
			rc = complete(s, w);
		if (rc < 0)
			abort_upload(s, w);
	}
	free_writer(w);
	return rc;
}

/* ---- the rest ---------------------------------------------------------------- */

static int read_blob(struct blobstore *bs, const char *name, blob_sink sink, void *payload)
{
	struct s3_store *s = s3_of(bs);
	struct s3_response rs;
	char *key = key_of(s, name);
	int rc;

	if (!key)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	rc = request(s, "GET", key, NULL, NULL, 0, sink, payload, &rs);
	if (rc == 0 && rs.status != 200)
		rc = s3_fail(s, "reading", key, &rs);
	s3_response_free(&rs);
	free(key);
	return rc;
}

static int exists(struct blobstore *bs, const char *name)
{
	struct s3_store *s = s3_of(bs);
	struct s3_response rs;
	char *key = key_of(s, name);
	int rc;

	if (!key)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	rc = request(s, "HEAD", key, NULL, NULL, 0, NULL, NULL, &rs);
	if (rc == 0)
		rc = rs.status == 200 ? 1 : rs.status == 404 ? 0 : s3_fail(s, "looking up", key, &rs);
	s3_response_free(&rs);
	free(key);
	return rc;
}

static int del(struct blobstore *bs, const char *name)
{
	struct s3_store *s = s3_of(bs);
	struct s3_response rs;
	char *key;
	int rc = exists(bs, name);

	/* S3 answers a DELETE of nothing with success: ask first. */
	if (rc == 0)
		return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no checkpoint %s in %s", name, bs->url);
	if (rc < 0)
		return rc;
	if (!(key = key_of(s, name)))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	rc = request(s, "DELETE", key, NULL, NULL, 0, NULL, NULL, &rs);
	if (rc == 0 && rs.status != 204 && rs.status != 200)
		rc = s3_fail(s, "deleting", key, &rs);
	s3_response_free(&rs);
	free(key);
	return rc;
}

static void free_store(struct blobstore *bs)
{
	struct s3_store *s = s3_of(bs);

	if (s->secret)
		sodium_memzero(s->secret, strlen(s->secret));
	free(s->secret);
	free(s->akid);
	free(s->region);
	free(s->endpoint);
	free(s->bucket);
	free(s->prefix);
	free(bs->url);
	hangar_ctx_unref(bs->ctx);
	free(s);
}

static const struct blob_ops s3_ops = {
	.write_begin = write_begin,
	.write = write_data,
	.commit = commit,
	.abort = abort_write,
	.read = read_blob,
	.del = del,
	.exists = exists,
	.free = free_store,
};

int blobstore_s3_open(struct blobstore **out, hangar_ctx *ctx, const char *bucket, const char *prefix)
{
	const char *endpoint = hctx_str(ctx, HS_S3_ENDPOINT), *akid = hctx_str(ctx, HS_S3_ACCESS_KEY_ID),
		   *secret = hctx_str(ctx, HS_S3_SECRET_ACCESS_KEY), *region = hctx_str(ctx, HS_S3_REGION);
	size_t elen = strlen(endpoint), plen = strlen(prefix);
	struct s3_store *s;

	*out = NULL;
	if (!*endpoint)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_S3_ENDPOINT is not set: an s3:// checkpoint store needs the service's URL");
	if (!*akid || !*secret)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s is not set: an s3:// checkpoint store needs it",
			    !*akid ? "HANGAR_S3_ACCESS_KEY_ID" : "HANGAR_S3_SECRET_ACCESS_KEY");
	if (strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region) || !*region || strlen(region) > 32)
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "HANGAR_S3_REGION must be a region name such as us-east-1");
	if (strchr(endpoint, '?') || strchr(endpoint, '#') || strchr(endpoint, '@'))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
			    "HANGAR_S3_ENDPOINT must be a plain http(s) URL, without credentials, query or fragment");
	if (!(s = calloc(1, sizeof(*s))))
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	while (elen && endpoint[elen - 1] == '/')
		elen--;
	s->endpoint = strndup(endpoint, elen);
	s->bucket = strdup(bucket);
	/* The prefix is a folder: "a/b" keeps blobs as a/b/NAME. */
	if (asprintf(&s->prefix, "%s%s", prefix, plen && prefix[plen - 1] != '/' ? "/" : "") < 0)
		s->prefix = NULL;
	s->akid = strdup(akid);
	s->secret = strdup(secret);
	s->region = strdup(region);
	if (asprintf(&s->base.url, "s3://%s/%s", bucket, prefix) < 0)
		s->base.url = NULL;
	s->base.ops = &s3_ops;
	s->base.ctx = hangar_ctx_ref(ctx);
	if (!s->endpoint || !s->bucket || !s->prefix || !s->akid || !s->secret || !s->region || !s->base.url) {
		free_store(&s->base);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	s->cred.access_key_id = s->akid;
	s->cred.secret_access_key = s->secret;
	s->cred.region = s->region;
	s->part_size = DEFAULT_PART;
	s->sweep_page = SWEEP_PAGE;
	s->timeout_ms = (long)hctx_int(ctx, HS_REQUEST_TIMEOUT) * 1000;
	*out = &s->base;
	return 0;
}

int blobstore_s3_set_part_size(struct blobstore *bs, size_t part_size)
{
	struct s3_store *s = s3_of(bs);

	if (bs->ops != &s3_ops || part_size < MIN_PART || part_size > (1u << 30))
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: a part size from 5 MiB to 1 GiB");
	s->part_size = part_size;
	return 0;
}

int blobstore_s3_set_sweep_page(struct blobstore *bs, int uploads)
{
	if (bs->ops != &s3_ops || uploads < 1 || uploads > 1000)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: a listing page of 1 to 1000 uploads");
	s3_of(bs)->sweep_page = uploads;
	return 0;
}
