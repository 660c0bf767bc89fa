/*
 * An image from a registry (OCI distribution API) into an OCI image layout
 * directory: registry.h says what is trusted and what is not.
 *
 * One fetch is one struct fetch (registry-int.h): the parsed reference, how
 * the registry is reached (scheme, CA file, deadlines) and the Authorization
 * it earned. The steps, in order: resolve the manifest (an index or list
 * picks this host's platform: registry-manifest.c), fetch the config and
 * layers (registry-blob.c), write the manifest, then index.json last, so a
 * layout with an index.json is whole. Here: every request to the registry
 * (registry-auth.c answers its 401s) and the layout's files.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "registry-int.h"
#include "core/internal.h"
#include "net/net.h"
#include "util/buf.h"
#include "util/pjson.h"
#include "util/sjson.h"

/* Bytes per receive: fewer, larger writes and hash updates than curl's 16 KiB. */
#define BLOB_BUFFER (256L << 10)

void reg_on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct answer *a = ud;

	if (!name) {
		a->content_type[0] = a->docker_digest[0] = a->location[0] = a->www_auth[0] = '\0';
		return;
	}
#define IS(h) (nlen == sizeof(h) - 1 && strncasecmp(name, h, nlen) == 0)
	if (IS("Content-Type"))
		reg_quote(a->content_type, sizeof(a->content_type), value, vlen);
	else if (IS("Docker-Content-Digest"))
		reg_quote(a->docker_digest, sizeof(a->docker_digest), value, vlen);
	else if (IS("Location"))
		reg_quote(a->location, sizeof(a->location), value, vlen);
	else if (IS("WWW-Authenticate") && !a->www_auth[0])
		reg_quote(a->www_auth, sizeof(a->www_auth), value, vlen);
#undef IS
}

/* Workers stop when told to; the caller's own cancel is asked on its own thread only. */
static int cancel_hook(void *ud)
{
	struct fetch *f = ud;

	if (__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE))
		return 1;
	return pthread_equal(pthread_self(), f->caller) && f->p && f->p->cancel && f->p->cancel(f->p->ud);
}

/* The registry's own message in an error body ({"errors":[{"code","message"}]}), else its start. */
static void error_text(const struct hbuf *body, char *out, size_t cap)
{
	cJSON *root = NULL, *errs, *e;
	char err[64];

	out[0] = '\0';
	if (!body->data || !body->len)
		return;
	root = sjson_parse(body->data, body->len, 0, err, sizeof(err));
	errs = root ? cJSON_GetObjectItemCaseSensitive(root, "errors") : NULL;
	e = cJSON_IsArray(errs) ? cJSON_GetArrayItem(errs, 0) : NULL;
	if (e) {
		cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
		cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
		char c[64] = "", m[200] = "";

		if (cJSON_IsString(code))
			reg_quote(c, sizeof(c), code->valuestring, strlen(code->valuestring));
		if (cJSON_IsString(msg))
			reg_quote(m, sizeof(m), msg->valuestring, strlen(msg->valuestring));
		snprintf(out, cap, ": %s%s%s", c, c[0] && m[0] ? " " : "", m);
	} else {
		char q[160];

		reg_quote(q, sizeof(q), body->data, body->len);
		snprintf(out, cap, ": %s", q);
	}
	cJSON_Delete(root);
}

/* Reports a request that did not end in a usable answer; what: "the manifest of NAME:REF". */
int reg_net_fail(struct fetch *f, const struct answer *a, const char *peer, const char *what, int aborted_rc)
{
	const struct net_result *res = &a->res;
	char text[300];

	switch (res->cls) {
	case NET_OK:
		break;
	case NET_UNREACHABLE:
		return herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "registry %s: cannot reach %s for %s: %s",
			    f->r.registry, peer, what, res->detail);
	case NET_DROPPED:
		return herr(HANGAR_EUNAVAILABLE, HANGAR_ERRCAT_NET, "registry %s: the connection to %s broke during %s: %s",
			    f->r.registry, peer, what, res->detail);
	case NET_TIMEOUT:
		/* curl's whole-request deadline may fire a hair before our clock says it passed. */
		if (res->timeout == NET_TIMEOUT_STALL && !(a->timeout_ms > 0 && res->elapsed_ms + 100 >= a->timeout_ms))
			return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET,
				    "registry %s: %s sent nothing for %lld s during %s (HANGAR_REGISTRY_STALL_SECONDS)",
				    f->r.registry, peer, (long long)(f->stall_ms / 1000), what);
		if (res->timeout == NET_TIMEOUT_CONNECT)
			return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET, "registry %s: no connection to %s within %lld ms for %s",
				    f->r.registry, peer, (long long)res->connect_timeout_ms, what);
		return herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_NET,
			    "registry %s: %s did not finish %s within %lld s (HANGAR_REQUEST_TIMEOUT_SECONDS)",
			    f->r.registry, peer, what, (long long)(f->timeout_ms / 1000));
	case NET_PROTOCOL:
		if (res->protocol == NET_PROTO_OVERSIZED)
			return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is larger than it may be (%s)",
				    f->r.registry, what,
				    res->content_length >= 0 ? "announced" : "counted");
		if (res->protocol == NET_PROTO_ENCODED)
			return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
				    "registry %s: %s came with an encoding we did not ask for (%s)", f->r.registry, what,
				    res->encoding_name);
		if (res->protocol == NET_PROTO_TRUNCATED)
			return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_NET, "registry %s: %s broke off before its end: %s",
				    f->r.registry, what, res->detail);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s answered %s with something not HTTP/1.x",
			    f->r.registry, peer, what);
	case NET_ABORTED:
		return aborted_rc;
	case NET_CANCELLED:
		return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "registry %s: %s cancelled", f->r.registry, what);
	case NET_LOCAL:
		if (res->out_of_memory)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "registry %s: cannot make the request for %s: %s",
			    f->r.registry, what, res->detail);
	case NET_HTTP_STATUS: {
		int s = res->http_status, code;

		error_text(&res->body, text, sizeof(text));
		if (s == 404)
			code = HANGAR_ENOTFOUND;
		else if (s == 401 || s == 403)
			code = HANGAR_EREFUSED;
		else if (s == 429 || s >= 500)
			code = HANGAR_EUNAVAILABLE;
		else
			code = HANGAR_EPROTOCOL;
		herr_http(code, HANGAR_ERRCAT_PROVIDER, s, NULL, "registry %s: %s answered %s with HTTP %d%s", f->r.registry,
			  peer, what, s, text);
		if (code == HANGAR_EUNAVAILABLE && res->retry_after_s >= 0)
			herr_retry_after(res->retry_after_s);
		return code;
	}
	}
	return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s failed", f->r.registry, what);
}

struct body_sink {
	struct fetch *f;
	struct answer *a;
	int (*on_body)(void *ud, const char *data, size_t len);
	void *ud;
};

static int sink_body(void *ud, const char *data, size_t len)
{
	struct body_sink *s = ud;

	return s->on_body(s->ud, data, len);
}

static void sink_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct body_sink *s = ud;

	reg_on_header(s->a, name, nlen, value, vlen);
}

static int sink_cancel(void *ud)
{
	struct body_sink *s = ud;

	return cancel_hook(s->f);
}

/*
 * One request: to url (with the Authorization earned when authz), or
 * without credentials to a redirect's target. Fills a; returns its class.
 */
enum net_class reg_perform(struct fetch *f, const char *url, int authz, const char *accept, size_t max_body,
			      int64_t timeout_ms, int (*on_body)(void *, const char *, size_t), void *ud,
			      struct answer *a)
{
	struct body_sink s = { f, a, on_body, ud };
	struct net_request rq;
	enum net_class c;

	memset(a, 0, sizeof(*a));
	a->timeout_ms = timeout_ms;
	net_request_init(&rq);
	rq.url = url;
	rq.max_body = max_body;
	rq.timeout_ms = timeout_ms;
	rq.stall_ms = f->stall_ms;
	rq.extra_ca_file = f->ca_file;
	rq.on_header = sink_header;
	rq.on_body = on_body ? sink_body : NULL;
	rq.download_buffer = BLOB_BUFFER;
	rq.cancel = sink_cancel;
	rq.ud = &s;
	pthread_mutex_lock(&f->lock);
	if ((accept && net_header_add(&rq, "Accept: %s", accept) != 0) ||
	    (authz && f->authz && net_header_add(&rq, "Authorization: %s", f->authz) != 0)) {
		pthread_mutex_unlock(&f->lock);
		net_request_fini(&rq);
		a->res.cls = NET_LOCAL;
		a->res.out_of_memory = 1;
		return NET_LOCAL;
	}
	a->authz_gen = f->authz_gen;
	pthread_mutex_unlock(&f->lock);
	c = net_perform(f->pool, &rq, &a->res);
	net_request_fini(&rq);
	return c;
}

/*
 * GET base + path from the registry itself, answering one 401 challenge. A
 * first request over https to a registry allowed plain http falls back to
 * http when no TLS connection came up.
 */
enum net_class reg_get(struct fetch *f, const char *path, const char *accept, size_t max_body,
				   int64_t timeout_ms, int (*on_body)(void *, const char *, size_t), void *ud,
				   const char *what, struct answer *a, int *rc)
{
	char *url = NULL;
	enum net_class c = NET_LOCAL;

	*rc = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		free(url);
		if (asprintf(&url, "%s://%s%s", f->scheme, f->r.api_host, path) < 0) {
			url = NULL;
			*rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
			return NET_LOCAL;
		}
		c = reg_perform(f, url, 1, accept, max_body, timeout_ms, on_body, ud, a);
		if (c == NET_UNREACHABLE && !f->scheme_known && f->http_ok && !strcmp(f->scheme, "https")) {
			snprintf(f->scheme, sizeof(f->scheme), "http");
			f->scheme_known = 1;
			net_result_fini(&a->res);
			attempt--;
			continue;
		}
		if (c != NET_UNREACHABLE && c != NET_LOCAL)
			f->scheme_known = 1;
		if (c != NET_HTTP_STATUS || a->res.http_status != 401)
			break;
		if (attempt == 1) {
			int bearer;

			/* A fresh credential and still 401: the registry refuses it; asking again would loop. */
			pthread_mutex_lock(&f->lock);
			bearer = f->authz && !strncmp(f->authz, "Bearer", 6);
			pthread_mutex_unlock(&f->lock);
			*rc = herr_http(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER, 401, NULL,
					"registry %s: %s is refused (HTTP 401) even with the %s it asked for",
					f->r.registry, what, bearer ? "token" : "credentials");
			break;
		}
		/*
		 * Workers share one credential: when another request renewed it
		 * since this one went out, this one retries with it rather than
		 * asking for yet another.
		 */
		pthread_mutex_lock(&f->lock);
		if (a->authz_gen == f->authz_gen && (*rc = reg_authenticate(f, a->www_auth, what)) == 0)
			f->authz_gen++;
		pthread_mutex_unlock(&f->lock);
		if (*rc != 0)
			break;
		net_result_fini(&a->res);
	}
	free(url);
	return c;
}

/* Writes a file of the layout atomically: name.tmp, then renamed. */
static int write_file(struct fetch *f, const char *rel, const char *data, size_t len)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	size_t off = 0;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", f->dir, rel) >= sizeof(path))
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "the layout directory's path is too long: %s", f->dir);
	snprintf(tmp, sizeof(tmp), "%s.partial", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return herr_os(HANGAR_EFILE, errno, "cannot create %s", tmp);
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;

			close(fd);
			unlink(tmp);
			return herr_os(HANGAR_EFILE, e, "cannot write %s", tmp);
		}
		off += (size_t)w;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;

		unlink(tmp);
		return herr_os(HANGAR_EFILE, e, "cannot write %s", path);
	}
	return 0;
}

static int make_dirs(struct fetch *f)
{
	char p[PATH_MAX];

	if ((size_t)snprintf(p, sizeof(p), "%s/blobs/sha256", f->dir) >= sizeof(p) - 80)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "the layout directory's path is too long: %s", f->dir);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return herr_os(HANGAR_EFILE, errno, "cannot make %s", p);
		*s = '/';
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST)
		return herr_os(HANGAR_EFILE, errno, "cannot make %s", p);
	return 0;
}

/* What an earlier fetch that was killed left behind. */
static void sweep_partials(struct fetch *f)
{
	char p[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(p, sizeof(p), "%s/blobs/sha256", f->dir);
	if (!(d = opendir(p)))
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n > 8 && !strcmp(e->d_name + n - 8, ".partial"))
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

static int write_layout(struct fetch *f, const struct hbuf *manifest, const char *mt, const char *digest)
{
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}\n";
	cJSON *idx = cJSON_CreateObject(), *list, *m, *ann;
	char rel[128], *text = NULL;
	int rc;

	snprintf(rel, sizeof(rel), "blobs/sha256/%s", digest + 7);
	if ((rc = write_file(f, rel, manifest->data, manifest->len)) != 0 ||
	    (rc = write_file(f, "oci-layout", layout, sizeof(layout) - 1)) != 0)
		goto out;
	if (!idx || !cJSON_AddNumberToObject(idx, "schemaVersion", 2) ||
	    !cJSON_AddStringToObject(idx, "mediaType", MT_OCI_INDEX) || !(list = cJSON_AddArrayToObject(idx, "manifests")) ||
	    !(m = cJSON_CreateObject()) || !cJSON_AddItemToArray(list, m) || !cJSON_AddStringToObject(m, "mediaType", mt) ||
	    !cJSON_AddStringToObject(m, "digest", digest) || !sjson_add_int64(m, "size", (int64_t)manifest->len) ||
	    !(ann = cJSON_AddObjectToObject(m, "annotations")) ||
	    !cJSON_AddStringToObject(ann, "org.opencontainers.image.ref.name", f->r.normal) ||
	    !(text = cJSON_PrintUnformatted(idx))) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	rc = write_file(f, "index.json", text, strlen(text));
out:
	free(text);
	cJSON_Delete(idx);
	return rc;
}

/* Checks the config fetched: strict JSON naming the platform it was picked for. */
static int check_config(struct fetch *f, const struct desc *d)
{
	char path[PATH_MAX], err[160];
	struct hbuf b = HBUF_INIT;
	char buf[1 << 16];
	cJSON *root;
	ssize_t n;
	int fd, rc = 0;

	if ((rc = reg_blob_path(f, d->digest, "", path, sizeof(path))) != 0)
		return rc;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return herr_os(HANGAR_EFILE, errno, "cannot read %s", path);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (hbuf_put_bounded(&b, buf, (size_t)n, REGISTRY_CONFIG_MAX) != 0) {
			n = -1;
			errno = EFBIG;
			break;
		}
	close(fd);
	if (n < 0) {
		hbuf_free(&b);
		return herr_os(HANGAR_EFILE, errno, "cannot read %s", path);
	}
	root = sjson_parse(b.data ? b.data : "", b.len, 0, err, sizeof(err));
	if (!root || !cJSON_IsObject(root))
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: the config of %s (%s) is not a strict JSON object%s%s",
			  f->r.registry, f->r.normal, d->digest, root ? "" : ": ", root ? "" : err);
	cJSON_Delete(root);
	hbuf_free(&b);
	if (rc != 0)
		unlink(path);
	return rc;
}

static int fetch_run(struct fetch *f, char **out_digest)
{
	struct hbuf body = HBUF_INIT;
	char mt[128], digest[DIGEST_LEN + 1], picked[DIGEST_LEN + 1];
	cJSON *json = NULL;
	struct desc *d = NULL;
	size_t n = 0;
	int rc;

	if ((rc = make_dirs(f)) != 0)
		goto out;
	sweep_partials(f);
	if ((rc = reg_get_manifest(f, f->r.digest ? f->r.digest : f->r.tag, f->r.digest, &body, &json, mt, digest)) != 0)
		goto out;
	if (reg_is_index_type(mt)) {
		if ((rc = reg_pick_platform(f, json, picked)) != 0)
			goto out;
		cJSON_Delete(json);
		json = NULL;
		if ((rc = reg_get_manifest(f, picked, picked, &body, &json, mt, digest)) != 0)
			goto out;
		if (!reg_is_manifest_type(mt)) {
			rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: the index of %s names another index for this platform (%s)", f->r.registry,
				  f->r.normal, picked);
			goto out;
		}
	}
	if ((rc = reg_parse_manifest(f, json, &d, &n)) != 0)
		goto out;
	f->blobs_total = (uint32_t)n;
	if (f->p && f->p->fn && f->p->fn(f->p->ud, "manifest", digest, 0, 0, 0, f->blobs_total)) {
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "registry %s: the pull was cancelled", f->r.registry);
		goto out;
	}
	if ((rc = reg_fetch_blobs(f, d, n)) != 0)
		goto out;
	if ((rc = check_config(f, &d[0])) != 0 || (rc = write_layout(f, &body, mt, digest)) != 0)
		goto out;
	if (f->p && f->p->fn)
		f->p->fn(f->p->ud, "done", digest, 0, 0, f->blobs_done, f->blobs_total);
	if (!(*out_digest = strdup(digest)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
out:
	free(d);
	cJSON_Delete(json);
	hbuf_free(&body);
	return rc;
}

/* The manifest digest reference names for this platform, without its blobs. */
static int resolve_run(struct fetch *f, char **out_digest)
{
	struct hbuf body = HBUF_INIT;
	char mt[128], digest[DIGEST_LEN + 1], picked[DIGEST_LEN + 1];
	cJSON *json = NULL;
	int rc;

	if ((rc = reg_get_manifest(f, f->r.digest ? f->r.digest : f->r.tag, f->r.digest, &body, &json, mt, digest)) != 0)
		goto out;
	if (reg_is_index_type(mt)) {
		if ((rc = reg_pick_platform(f, json, picked)) != 0)
			goto out;
		snprintf(digest, sizeof(digest), "%s", picked);
	}
	if (!(*out_digest = strdup(digest)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
out:
	cJSON_Delete(json);
	hbuf_free(&body);
	return rc;
}

/* Sets f up for reference (dir: the layout, or NULL to resolve only) and runs run. */
static int with_fetch(hangar_ctx *ctx, const char *reference, const char *dir, const struct registry_progress *p,
		      char **out_digest, int (*run)(struct fetch *, char **))
{
	struct fetch f;
	const char *ca;
	int rc;

	memset(&f, 0, sizeof(f));
	if ((rc = reg_ref_parse(reference, &f.r)) != 0)
		return rc;
	f.caller = pthread_self();
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cond, NULL);
	f.ctx = ctx;
	f.dir = dir;
	f.p = p;
	reg_host_only(f.r.api_host, f.host, sizeof(f.host));
	f.http_ok = reg_http_allowed(ctx, f.r.registry);
	snprintf(f.scheme, sizeof(f.scheme), "https");
	ca = hctx_str(ctx, HS_REGISTRY_CA_FILE);
	f.ca_file = ca && ca[0] ? ca : NULL;
	f.stall_ms = hctx_int(ctx, HS_REGISTRY_STALL) * 1000;
	f.timeout_ms = hctx_int(ctx, HS_REQUEST_TIMEOUT) * 1000;
	if (f.ca_file && access(f.ca_file, R_OK) != 0)
		rc = herr_os(HANGAR_ECONFIG, errno, "registry %s: cannot read the CA file %s (HANGAR_REGISTRY_CA_FILE)",
			     f.r.registry, f.ca_file);
	else if ((rc = reg_load_credentials(&f)) == 0 && (rc = net_pool_new(&f.pool, 4)) == 0)
		rc = run(&f, out_digest);
	net_pool_free(f.pool);
	reg_drop_authz(&f);
	if (f.user) {
		sodium_memzero(f.user, strlen(f.user));
		free(f.user);
	}
	if (f.pass) {
		sodium_memzero(f.pass, strlen(f.pass));
		free(f.pass);
	}
	reg_ref_free(&f.r);
	free(f.jobs);
	pthread_cond_destroy(&f.cond);
	pthread_mutex_destroy(&f.lock);
	return rc;
}

int registry_fetch(hangar_ctx *ctx, const char *reference, const char *dir, const struct registry_progress *p,
		   char **out_digest)
{
	HCHECK_ARG(out_digest, "out_digest");
	*out_digest = NULL;
	HCHECK_ARG(ctx, "ctx");
	HCHECK_ARG(dir && dir[0], "dir");
	HCHECK_TEXT(dir, "dir");
	return with_fetch(ctx, reference, dir, p, out_digest, fetch_run);
}

int registry_resolve(hangar_ctx *ctx, const char *reference, char **out_digest)
{
	HCHECK_ARG(out_digest, "out_digest");
	*out_digest = NULL;
	HCHECK_ARG(ctx, "ctx");
	return with_fetch(ctx, reference, NULL, NULL, out_digest, resolve_run);
}
