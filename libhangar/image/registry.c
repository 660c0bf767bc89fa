/*
 * An image from a registry (OCI distribution API) into an OCI image layout
 * directory: registry.h says what is trusted and what is not.
 *
 * One fetch is one struct fetch: the parsed reference, how the registry is
 * reached (scheme, CA file, deadlines) and the Authorization it earned. The
 * steps, in order: resolve the manifest (an index or list picks this host's
 * platform), fetch the config and layers, write the manifest, then
 * index.json last, so a layout with an index.json is whole.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "registry.h"
#include "core/internal.h"
#include "net/net.h"
#include "util/buf.h"
#include "util/pjson.h"
#include "util/sjson.h"

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_V1 "application/vnd.docker.distribution.manifest.v1"

#define TOKEN_ANSWER_MAX (1u << 20)
#define AUTH_FILE_MAX (1u << 20)
#define HEADER_VALUE_MAX 8192
#define LAYERS_MAX 1000
#define DIGEST_LEN 71 /* "sha256:" + 64 */
/* Blobs fetched at once: hashing is most of a blob's cost on loopback, so two layers hash on two CPUs. */
#define BLOB_WORKERS 3
/* How often the calling thread reports progress and asks its cancel while blobs arrive. */
#define PROGRESS_TICK_MS 50
/* Bytes per receive: fewer, larger writes and hash updates than curl's 16 KiB. */
#define BLOB_BUFFER (256L << 10)

/* ---- references ---------------------------------------------------------------- */

struct ref {
	char *registry; /* host[:port] as in the reference, host in lower case; "docker.io" by default */
	char *api_host; /* where its API is: docker.io's is registry-1.docker.io */
	char *name;     /* "library/debian" */
	char *tag;      /* or NULL */
	char *digest;   /* "sha256:<hex>" or NULL */
	char *normal;   /* registry/name[:tag][@digest] */
};

static void ref_free(struct ref *r)
{
	free(r->registry);
	free(r->api_host);
	free(r->name);
	free(r->tag);
	free(r->digest);
	free(r->normal);
	memset(r, 0, sizeof(*r));
}

static int is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int digest_ok(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != DIGEST_LEN)
		return 0;
	for (int i = 7; i < DIGEST_LEN; i++)
		if (!((d[i] >= '0' && d[i] <= '9') || (d[i] >= 'a' && d[i] <= 'f')))
			return 0;
	return 1;
}

/* One path component: [a-z0-9]+ joined by ".", "_", "__" or runs of "-". */
static int component_ok(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return 0;
	while (i < n) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		if (s[i] == '.' || (s[i] == '_' && s[i + 1] != '_'))
			i++;
		else if (s[i] == '_' && i + 1 < n && s[i + 1] == '_')
			i += 2;
		else if (s[i] == '-')
			while (i < n && s[i] == '-')
				i++;
		else
			return 0;
		if (i >= n || !is_lower_alnum(s[i]))
			return 0;
	}
	return 1;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255)
		return 0;
	while (*s) {
		size_t c = strcspn(s, "/");

		if (!component_ok(s, c))
			return 0;
		s += c;
		if (*s == '/' && !*++s)
			return 0;
	}
	return 1;
}

static int tag_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* host[:port] or [v6][:port]; a port 1..65535. */
static int registry_ok(const char *s)
{
	const char *port = NULL;
	size_t hn;

	if (s[0] == '[') {
		const char *e = strchr(s, ']');

		if (!e || e == s + 1 || strspn(s + 1, "0123456789abcdefABCDEF:.") != (size_t)(e - s - 1))
			return 0;
		if (e[1] == ':')
			port = e + 2;
		else if (e[1])
			return 0;
	} else {
		hn = strcspn(s, ":");
		if (hn == 0 || hn > 253 ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != hn ||
		    s[0] == '.' || s[0] == '-' || s[hn - 1] == '.' || s[hn - 1] == '-')
			return 0;
		if (s[hn] == ':')
			port = s + hn + 1;
	}
	if (port) {
		size_t pn = strlen(port);
		long v;

		if (pn == 0 || pn > 5 || strspn(port, "0123456789") != pn)
			return 0;
		v = strtol(port, NULL, 10);
		if (v < 1 || v > 65535)
			return 0;
	}
	return 1;
}

static int ref_bad(const char *reference, const char *why)
{
	char shown[128];
	size_t o = 0;

	for (size_t i = 0; reference[i] && o + 1 < sizeof(shown); i++)
		shown[o++] = ((unsigned char)reference[i] < 0x20 || (unsigned char)reference[i] >= 0x7f) ? '?' : reference[i];
	shown[o] = '\0';
	return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid image reference \"%s\": %s", shown, why);
}

static int ref_parse(const char *reference, struct ref *r)
{
	char *s, *at, *slash, *colon, *path;
	int rc = HANGAR_ENOMEM;

	memset(r, 0, sizeof(*r));
	if (!reference || !reference[0])
		return ref_bad("", "it is empty");
	if (strlen(reference) > 1024)
		return ref_bad(reference, "longer than 1024 bytes");
	for (const char *c = reference; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return ref_bad(reference, "a character outside printable ASCII");
	if (!(s = strdup(reference)))
		goto nomem;
	if ((at = strchr(s, '@'))) {
		*at++ = '\0';
		if (!digest_ok(at)) {
			rc = ref_bad(reference, "a digest must be sha256: and 64 lower-case hex digits");
			goto out;
		}
		if (!(r->digest = strdup(at)))
			goto nomem;
	}
	path = s;
	slash = strchr(s, '/');
	if (slash && (memchr(s, '.', (size_t)(slash - s)) || memchr(s, ':', (size_t)(slash - s)) ||
		      (slash - s == 9 && strncmp(s, "localhost", 9) == 0) || s[0] == '[')) {
		*slash = '\0';
		if (!registry_ok(s)) {
			rc = ref_bad(reference, "the registry must be host[:port]");
			goto out;
		}
		for (char *c = s; *c && *c != ':'; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c = (char)(*c - 'A' + 'a');
		if (!strcmp(s, "index.docker.io") || !strcmp(s, "registry-1.docker.io"))
			r->registry = strdup("docker.io");
		else
			r->registry = strdup(s);
		path = slash + 1;
	} else {
		r->registry = strdup("docker.io");
	}
	if (!r->registry)
		goto nomem;
	colon = strrchr(path, ':');
	if (colon && !strchr(colon, '/')) {
		*colon++ = '\0';
		if (!tag_ok(colon)) {
			rc = ref_bad(reference, "a tag is [A-Za-z0-9_.-], at most 128, not starting with . or -");
			goto out;
		}
		if (!(r->tag = strdup(colon)))
			goto nomem;
	}
	if (!name_ok(path)) {
		rc = ref_bad(reference,
			     "a name is lower-case components ([a-z0-9] joined by ., _, __ or -) separated by /");
		goto out;
	}
	if (!strcmp(r->registry, "docker.io") && !strchr(path, '/')) {
		if (asprintf(&r->name, "library/%s", path) < 0) {
			r->name = NULL;
			goto nomem;
		}
	} else if (!(r->name = strdup(path)))
		goto nomem;
	if (!r->tag && !r->digest && !(r->tag = strdup("latest")))
		goto nomem;
	r->api_host = strdup(!strcmp(r->registry, "docker.io") ? "registry-1.docker.io" : r->registry);
	if (!r->api_host ||
	    asprintf(&r->normal, "%s/%s%s%s%s%s", r->registry, r->name, r->tag ? ":" : "", r->tag ? r->tag : "",
		     r->digest ? "@" : "", r->digest ? r->digest : "") < 0) {
		r->normal = NULL;
		goto nomem;
	}
	free(s);
	return 0;
nomem:
	rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
out:
	free(s);
	ref_free(r);
	return rc;
}

int registry_ref_normalize(const char *reference, char **out)
{
	struct ref r;
	int rc;

	HCHECK_ARG(out, "out");
	*out = NULL;
	if ((rc = ref_parse(reference, &r)) != 0)
		return rc;
	*out = r.normal;
	r.normal = NULL;
	ref_free(&r);
	return 0;
}

/* ---- hosts ----------------------------------------------------------------------- */

/* The host of host[:port] or [v6][:port], without brackets, into out. */
static void host_only(const char *authority, char *out, size_t cap)
{
	size_t n;

	if (authority[0] == '[') {
		n = strcspn(authority + 1, "]");
		snprintf(out, cap, "%.*s", (int)n, authority + 1);
	} else {
		n = strcspn(authority, ":");
		snprintf(out, cap, "%.*s", (int)n, authority);
	}
	for (char *c = out; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
}

static int host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;

	if (!strcmp(host, "localhost"))
		return 1;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return 0;
}

/* Whether authority (host[:port]) may be reached over plain http. */
static int http_allowed(hangar_ctx *ctx, const char *authority)
{
	const char *list = hctx_str(ctx, HS_REGISTRY_INSECURE);
	char host[256];

	host_only(authority, host, sizeof(host));
	if (host_is_loopback(host))
		return 1;
	while (list && *list) {
		size_t n = strcspn(list, ","), b = 0, e = n;
		char entry[300];

		while (b < e && list[b] == ' ')
			b++;
		while (e > b && list[e - 1] == ' ')
			e--;
		snprintf(entry, sizeof(entry), "%.*s", (int)(e - b), list + b);
		if (strcasecmp(entry, authority) == 0)
			return 1;
		/* An entry without a port names the host on any port. */
		if (entry[0] == '[' ? !strstr(entry, "]:") : !strchr(entry, ':')) {
			char eh[256];

			host_only(entry, eh, sizeof(eh));
			if (!strcmp(eh, host))
				return 1;
		}
		list += n;
		if (*list == ',')
			list++;
	}
	return 0;
}

/*
 * Whether a token service at realm_host may see the registry's credentials:
 * the same host, or (for DNS names) a host under the registry's parent
 * domain when that parent has at least two labels (registry-1.docker.io and
 * auth.docker.io).
 */
static int same_site(const char *registry_host, const char *realm_host)
{
	const char *parent;
	size_t pl, rl;
	struct in6_addr a;

	if (!strcmp(registry_host, realm_host))
		return 1;
	if (inet_pton(AF_INET, registry_host, &a) == 1 || inet_pton(AF_INET6, registry_host, &a) == 1)
		return 0;
	parent = strchr(registry_host, '.');
	if (!parent || !strchr(parent + 1, '.'))
		return 0;
	pl = strlen(parent);
	rl = strlen(realm_host);
	return rl > pl && strcmp(realm_host + rl - pl, parent) == 0;
}

/* Splits an http(s) URL: scheme ("http"/"https") and authority (host[:port]). -1 when it is not one. */
static int url_split(const char *url, char *scheme, size_t scap, char *authority, size_t acap)
{
	const char *rest;
	size_t an;

	if (!strncasecmp(url, "https://", 8)) {
		snprintf(scheme, scap, "https");
		rest = url + 8;
	} else if (!strncasecmp(url, "http://", 7)) {
		snprintf(scheme, scap, "http");
		rest = url + 7;
	} else {
		return -1;
	}
	an = strcspn(rest, "/?#");
	if (an == 0 || an >= acap || memchr(rest, '@', an))
		return -1;
	snprintf(authority, acap, "%.*s", (int)an, rest);
	return registry_ok(authority) ? 0 : -1;
}

/* Untrusted text quoted in a message: printable ASCII, bounded. */
static void quote(char *dst, size_t cap, const char *src, size_t n)
{
	size_t o = 0;

	for (size_t i = 0; src && i < n && src[i] && o + 1 < cap; i++)
		dst[o++] = ((unsigned char)src[i] < 0x20 || (unsigned char)src[i] >= 0x7f) ? '?' : src[i];
	dst[o] = '\0';
}

/* ---- one fetch ------------------------------------------------------------------- */

enum job_state { JOB_WAITING, JOB_RUNNING, JOB_FETCHED, JOB_CACHED, JOB_FAILED };

/* One blob to fetch, taken by a worker thread. */
struct job {
	const struct desc *d;
	uint64_t got;                  /* bytes so far (atomic) */
	enum job_state state;          /* under fetch.lock */
	hangar_sys_saved_error err;    /* with JOB_FAILED */
	/* the calling thread's own: what it reported */
	uint64_t reported;
	int announced;
};

struct fetch {
	hangar_ctx *ctx;
	struct ref r;
	const char *dir;
	const struct registry_progress *p;
	struct net_pool *pool;
	char scheme[8];          /* how the registry is reached */
	int http_ok;             /* it may be reached over http */
	int scheme_known;        /* an answer came over scheme: no more falling back */
	const char *ca_file;     /* or NULL */
	int64_t stall_ms, timeout_ms;
	char host[256];          /* the registry's host, no port */
	char *authz;             /* the Authorization header's value earned, or NULL */
	char *user, *pass;       /* from the auth file, or NULL */
	uint32_t blobs_done, blobs_total;
	pthread_t caller;        /* the thread that runs callbacks */
	pthread_mutex_t lock;    /* authz, blobs_done and the jobs */
	pthread_cond_t cond;     /* a job or a worker finished */
	int stop;                /* atomic: workers give up (a failure or a cancel) */
	struct job *jobs, *failed;
	size_t njobs, next_job, workers;
};

/* What one answer said beyond its status and body. */
struct answer {
	struct net_result res;
	int64_t timeout_ms;     /* the request's whole deadline, 0: none */
	char content_type[256];
	char docker_digest[128];
	char location[HEADER_VALUE_MAX];
	char www_auth[HEADER_VALUE_MAX];
};

static void on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	struct answer *a = ud;

	if (!name) {
		a->content_type[0] = a->docker_digest[0] = a->location[0] = a->www_auth[0] = '\0';
		return;
	}
#define IS(h) (nlen == sizeof(h) - 1 && strncasecmp(name, h, nlen) == 0)
	if (IS("Content-Type"))
		quote(a->content_type, sizeof(a->content_type), value, vlen);
	else if (IS("Docker-Content-Digest"))
		quote(a->docker_digest, sizeof(a->docker_digest), value, vlen);
	else if (IS("Location"))
		quote(a->location, sizeof(a->location), value, vlen);
	else if (IS("WWW-Authenticate") && !a->www_auth[0])
		quote(a->www_auth, sizeof(a->www_auth), value, vlen);
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
			quote(c, sizeof(c), code->valuestring, strlen(code->valuestring));
		if (cJSON_IsString(msg))
			quote(m, sizeof(m), msg->valuestring, strlen(msg->valuestring));
		snprintf(out, cap, ": %s%s%s", c, c[0] && m[0] ? " " : "", m);
	} else {
		char q[160];

		quote(q, sizeof(q), body->data, body->len);
		snprintf(out, cap, ": %s", q);
	}
	cJSON_Delete(root);
}

/* Reports a request that did not end in a usable answer; what: "the manifest of NAME:REF". */
static int net_fail(struct fetch *f, const struct answer *a, const char *peer, const char *what, int aborted_rc)
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

/* ---- authentication ----------------------------------------------------------------- */

/* The value of param in a challenge's parameter list (k=v or k="v", comma-separated), or 0 when absent. */
static int challenge_param(const char *params, const char *key, char *out, size_t cap)
{
	const char *p = params;
	size_t kl = strlen(key);

	while (*p) {
		const char *k;
		size_t kn, o = 0;
		int match;

		while (*p == ' ' || *p == ',')
			p++;
		k = p;
		while (*p && *p != '=' && *p != ',')
			p++;
		kn = (size_t)(p - k);
		while (kn > 0 && k[kn - 1] == ' ')
			kn--;
		match = kn == kl && strncasecmp(k, key, kl) == 0;
		if (*p != '=')
			continue;
		p++;
		while (*p == ' ')
			p++;
		if (*p == '"') {
			p++;
			while (*p && *p != '"') {
				if (*p == '\\' && p[1])
					p++;
				if (match && o + 1 < cap)
					out[o++] = *p;
				p++;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ',' && *p != ' ') {
				if (match && o + 1 < cap)
					out[o++] = *p;
				p++;
			}
		}
		if (match) {
			out[o] = '\0';
			return 1;
		}
	}
	return 0;
}

static int set_basic(struct fetch *f, char **out)
{
	char *plain = NULL, *b64;
	int n;

	n = asprintf(&plain, "%s:%s", f->user, f->pass);
	if (n < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	b64 = pjson_b64_encode(plain, (size_t)n);
	sodium_memzero(plain, (size_t)n);
	free(plain);
	if (!b64)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	n = asprintf(out, "Basic %s", b64);
	sodium_memzero(b64, strlen(b64));
	free(b64);
	if (n < 0) {
		*out = NULL;
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	return 0;
}

static void drop_authz(struct fetch *f)
{
	if (f->authz) {
		sodium_memzero(f->authz, strlen(f->authz));
		free(f->authz);
		f->authz = NULL;
	}
}

/* GET the token service's realm for a bearer token: f->authz = "Bearer <token>". */
static int get_token(struct fetch *f, const char *params)
{
	char realm[2048] = "", service[512] = "", scope[1024] = "", rscheme[8], rauth[300], rhost[256];
	char *url = NULL, *esc_service = NULL, *esc_scope = NULL, *basic = NULL, *default_scope = NULL;
	struct net_request rq;
	struct answer a;
	cJSON *root = NULL;
	const char *tok = NULL;
	char err[160];
	int rc;

	memset(&a, 0, sizeof(a));
	if (!challenge_param(params, "realm", realm, sizeof(realm)) ||
	    url_split(realm, rscheme, sizeof(rscheme), rauth, sizeof(rauth)) != 0) {
		quote(err, sizeof(err), realm, strlen(realm));
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: its bearer challenge names no usable token service (realm \"%s\")",
			    f->r.registry, err);
	}
	host_only(rauth, rhost, sizeof(rhost));
	if (!strcmp(rscheme, "http") && !http_allowed(f->ctx, rauth))
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: its token service %s is plain http; only https is used for tokens "
			    "(or a host in HANGAR_REGISTRY_INSECURE)", f->r.registry, rauth);
	challenge_param(params, "service", service, sizeof(service));
	if (!challenge_param(params, "scope", scope, sizeof(scope))) {
		if (asprintf(&default_scope, "repository:%s:pull", f->r.name) < 0)
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		snprintf(scope, sizeof(scope), "%s", default_scope);
		free(default_scope);
	}
	esc_service = net_escape(service);
	esc_scope = net_escape(scope);
	if (!esc_service || !esc_scope ||
	    asprintf(&url, "%s%s%s%s%sscope=%s", realm, strchr(realm, '?') ? "&" : "?", service[0] ? "service=" : "",
		     service[0] ? esc_service : "", service[0] ? "&" : "", esc_scope) < 0) {
		url = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	net_request_init(&rq);
	rq.url = url;
	rq.max_body = TOKEN_ANSWER_MAX;
	rq.timeout_ms = a.timeout_ms = f->timeout_ms;
	rq.stall_ms = f->stall_ms;
	rq.extra_ca_file = f->ca_file;
	rq.on_header = on_header;
	rq.ud = &a;
	/* The credentials go to a token service of the registry's own site only. */
	if (f->user && same_site(f->host, rhost)) {
		if ((rc = set_basic(f, &basic)) != 0 || (rc = net_header_add(&rq, "Authorization: %s", basic)) != 0) {
			net_request_fini(&rq);
			goto out;
		}
	}
	net_perform(f->pool, &rq, &a.res);
	net_request_fini(&rq);
	if (a.res.cls != NET_OK) {
		char what[300];

		snprintf(what, sizeof(what), "a token for %s", scope);
		rc = net_fail(f, &a, rauth, what, HANGAR_EPROTOCOL);
		if (a.res.cls == NET_HTTP_STATUS && a.res.http_status == 401 && f->user && !same_site(f->host, rhost))
			herr_prefix("credentials are only sent to the registry's own site, not to this token service");
		goto out;
	}
	root = sjson_parse(a.res.body.data, a.res.body.len, 0, err, sizeof(err));
	if (root) {
		cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "token");

		if (!cJSON_IsString(t) || !t->valuestring[0])
			t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
		if (cJSON_IsString(t) && t->valuestring[0])
			tok = t->valuestring;
	}
	if (!tok || strlen(tok) > 65536 || strpbrk(tok, "\r\n")) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			  "registry %s: the token service %s answered without a usable token%s%s", f->r.registry, rauth,
			  root ? "" : ": ", root ? "" : err);
		goto out;
	}
	drop_authz(f);
	if (asprintf(&f->authz, "Bearer %s", tok) < 0) {
		f->authz = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	rc = 0;
out:
	if (root) {
		cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "token");

		if (cJSON_IsString(t))
			sodium_memzero(t->valuestring, strlen(t->valuestring));
		t = cJSON_GetObjectItemCaseSensitive(root, "access_token");
		if (cJSON_IsString(t))
			sodium_memzero(t->valuestring, strlen(t->valuestring));
		cJSON_Delete(root);
	}
	if (a.res.body.data)
		sodium_memzero(a.res.body.data, a.res.body.len);
	net_result_fini(&a.res);
	if (basic) {
		sodium_memzero(basic, strlen(basic));
		free(basic);
	}
	free(esc_service);
	free(esc_scope);
	free(url);
	return rc;
}

/* Answers a 401's challenge: a bearer token, or basic credentials. */
static int authenticate(struct fetch *f, const char *challenge, const char *what)
{
	if (!strncasecmp(challenge, "Bearer ", 7))
		return get_token(f, challenge + 7);
	if (!strncasecmp(challenge, "Basic", 5) && (challenge[5] == ' ' || !challenge[5])) {
		if (!f->user)
			return herr_http(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER, 401, NULL,
					 "registry %s: %s needs a user name and password, and the auth file "
					 "(HANGAR_REGISTRY_AUTH_FILE, else the docker config.json) has none for %s",
					 f->r.registry, what, f->r.registry);
		drop_authz(f);
		return set_basic(f, &f->authz);
	}
	{
		char q[120];

		quote(q, sizeof(q), challenge, strlen(challenge));
		return herr_http(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER, 401, NULL,
				 "registry %s: %s asks for authentication we do not speak (\"%s\")", f->r.registry, what,
				 q[0] ? q : "no WWW-Authenticate");
	}
}

/* ---- credentials ------------------------------------------------------------------- */

/* "https://host:port/v1/" and the like -> host:port, lower-cased. */
static void auth_key(const char *k, char *out, size_t cap)
{
	const char *s = strstr(k, "://");

	s = s ? s + 3 : k;
	snprintf(out, cap, "%.*s", (int)strcspn(s, "/"), s);
	for (char *c = out; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (!strcmp(out, "index.docker.io") || !strcmp(out, "registry-1.docker.io"))
		snprintf(out, cap, "docker.io");
}

static int load_credentials(struct fetch *f)
{
	const char *set = hctx_str(f->ctx, HS_REGISTRY_AUTH_FILE);
	char *path = NULL, *text = NULL, err[160];
	cJSON *root = NULL, *auths, *e;
	struct stat st;
	int fd = -1, rc = 0, explicit = set && set[0];
	ssize_t got;

	if (explicit) {
		path = strdup(set);
	} else if (getenv("DOCKER_CONFIG") && getenv("DOCKER_CONFIG")[0]) {
		if (asprintf(&path, "%s/config.json", getenv("DOCKER_CONFIG")) < 0)
			path = NULL;
	} else {
		const char *home = getenv("HOME");
		struct passwd *pw;

		if ((!home || !home[0]) && (pw = getpwuid(geteuid())))
			home = pw->pw_dir;
		if (!home || !home[0])
			return 0;
		if (asprintf(&path, "%s/.docker/config.json", home) < 0)
			path = NULL;
	}
	if (!path)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (explicit || errno != ENOENT)
			rc = herr_os(HANGAR_ECONFIG, errno, "registry %s: cannot read the auth file %s%s", f->r.registry,
				     path, explicit ? " (HANGAR_REGISTRY_AUTH_FILE)" : "");
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)AUTH_FILE_MAX) {
		rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "registry %s: the auth file %s is not a regular file of at most 1 MiB",
			  f->r.registry, path);
		goto out;
	}
	text = malloc((size_t)st.st_size + 1);
	if (!text) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	got = read(fd, text, (size_t)st.st_size);
	if (got != st.st_size) {
		rc = herr_os(HANGAR_ECONFIG, got < 0 ? errno : EIO, "registry %s: cannot read the auth file %s", f->r.registry, path);
		goto out;
	}
	root = sjson_parse(text, (size_t)got, 0, err, sizeof(err));
	if (!root) {
		rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "registry %s: the auth file %s is not strict JSON: %s",
			  f->r.registry, path, err);
		goto out;
	}
	auths = cJSON_GetObjectItemCaseSensitive(root, "auths");
	if (!cJSON_IsObject(auths))
		auths = NULL;
	cJSON_ArrayForEach(e, auths)
	{
		char key[300];
		const cJSON *a, *u, *pw;

		auth_key(e->string, key, sizeof(key));
		if (strcmp(key, f->r.registry) != 0)
			continue;
		a = cJSON_GetObjectItemCaseSensitive(e, "auth");
		u = cJSON_GetObjectItemCaseSensitive(e, "username");
		pw = cJSON_GetObjectItemCaseSensitive(e, "password");
		if (cJSON_IsString(a) && a->valuestring[0]) {
			unsigned char *dec = NULL;
			size_t dl = 0;
			char *colon;

			if (pjson_b64_decode(a->valuestring, strlen(a->valuestring), &dec, &dl) != 0 || !dec ||
			    !(colon = memchr(dec, ':', dl)) || memchr(dec, '\0', dl)) {
				if (dec) {
					sodium_memzero(dec, dl);
					free(dec);
				}
				rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
					  "registry %s: the auth file %s has an \"auth\" for it that is not base64 of user:password",
					  f->r.registry, path);
				goto out;
			}
			f->user = strndup((char *)dec, (size_t)(colon - (char *)dec));
			f->pass = strndup(colon + 1, dl - (size_t)(colon + 1 - (char *)dec));
			sodium_memzero(dec, dl);
			free(dec);
		} else if (cJSON_IsString(u) && cJSON_IsString(pw)) {
			f->user = strdup(u->valuestring);
			f->pass = strdup(pw->valuestring);
		} else {
			continue;
		}
		if (!f->user || !f->pass)
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		else if (strpbrk(f->user, "\r\n") || strpbrk(f->pass, "\r\n"))
			rc = herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG,
				  "registry %s: the credentials for it in %s hold a line break", f->r.registry, path);
		break;
	}
out:
	if (text) {
		sodium_memzero(text, (size_t)st.st_size);
		free(text);
	}
	if (root) {
		/* Wipe the parsed copies of every secret before freeing. */
		cJSON *a2 = cJSON_GetObjectItemCaseSensitive(root, "auths");

		if (!cJSON_IsObject(a2))
			a2 = NULL;
		cJSON_ArrayForEach(e, a2)
		{
			cJSON *x;

			cJSON_ArrayForEach(x, e)
			if (cJSON_IsString(x))
				sodium_memzero(x->valuestring, strlen(x->valuestring));
		}
		cJSON_Delete(root);
	}
	if (fd >= 0)
		close(fd);
	free(path);
	return rc;
}

/* ---- requests to the registry ---------------------------------------------------------- */

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

	on_header(s->a, name, nlen, value, vlen);
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
static enum net_class perform(struct fetch *f, const char *url, int authz, const char *accept, size_t max_body,
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
static enum net_class registry_get(struct fetch *f, const char *path, const char *accept, size_t max_body,
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
		c = perform(f, url, 1, accept, max_body, timeout_ms, on_body, ud, a);
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
		pthread_mutex_lock(&f->lock);
		*rc = authenticate(f, a->www_auth, what);
		pthread_mutex_unlock(&f->lock);
		if (*rc != 0)
			break;
		net_result_fini(&a->res);
	}
	free(url);
	return c;
}

/* ---- manifests ------------------------------------------------------------------------ */

struct hashed {
	crypto_hash_sha256_state st;
	struct hbuf *keep; /* or NULL */
	size_t max;
};

static int hash_into_buf(void *ud, const char *data, size_t len)
{
	struct hashed *h = ud;

	crypto_hash_sha256_update(&h->st, (const unsigned char *)data, len);
	return hbuf_put_bounded(h->keep, data, len, h->max) != 0;
}

static void digest_hex(crypto_hash_sha256_state *st, char out[DIGEST_LEN + 1])
{
	unsigned char d[crypto_hash_sha256_BYTES];
	static const char hex[] = "0123456789abcdef";

	crypto_hash_sha256_final(st, d);
	memcpy(out, "sha256:", 7);
	for (size_t i = 0; i < sizeof(d); i++) {
		out[7 + 2 * i] = hex[d[i] >> 4];
		out[8 + 2 * i] = hex[d[i] & 15];
	}
	out[DIGEST_LEN] = '\0';
}

static int is_manifest_type(const char *mt)
{
	return !strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST);
}

static int is_index_type(const char *mt)
{
	return !strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST);
}

/*
 * GETs the manifest ref (a tag or a digest) into body, checked: its digest
 * (sha256 of the exact bytes) matches want when given and the registry's
 * Docker-Content-Digest when sent. media_type: what it is.
 */
static int get_manifest(struct fetch *f, const char *ref, const char *want, struct hbuf *body, cJSON **json,
			char media_type[128], char digest[DIGEST_LEN + 1])
{
	static const char accept[] = MT_OCI_INDEX ", " MT_OCI_MANIFEST ", " MT_DOCKER_LIST ", " MT_DOCKER_MANIFEST;
	char *path = NULL, what[400], err[160];
	struct answer a;
	struct hashed h;
	enum net_class c;
	const cJSON *mt, *sv;
	int rc;

	*json = NULL;
	snprintf(what, sizeof(what), "the manifest %s%s%s", f->r.name, ref[0] == 's' && digest_ok(ref) ? "@" : ":", ref);
	if (asprintf(&path, "/v2/%s/manifests/%s", f->r.name, ref) < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	hbuf_clear(body);
	crypto_hash_sha256_init(&h.st);
	h.keep = body;
	h.max = REGISTRY_MANIFEST_MAX;
	c = registry_get(f, path, accept, REGISTRY_MANIFEST_MAX, f->timeout_ms, hash_into_buf, &h, what, &a, &rc);
	free(path);
	if (rc != 0)
		goto out;
	if (c == NET_HTTP_STATUS && a.res.http_status >= 300 && a.res.http_status <= 399) {
		char ls[8], la[300];

		if (url_split(a.location, ls, sizeof(ls), la, sizeof(la)) != 0)
			snprintf(la, sizeof(la), "%s", a.location[0] == '/' ? f->r.api_host : "an unknown place");
		rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, a.res.http_status, NULL,
			       "registry %s: %s is redirected (HTTP %d) to %s%s; manifests are only read from the registry itself",
			       f->r.registry, what, a.res.http_status, la,
			       strcasecmp(la, f->r.api_host) ? ", another host" : "");
		goto out;
	}
	if (c == NET_ABORTED) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	if (c != NET_OK) {
		rc = net_fail(f, &a, f->r.api_host, what, HANGAR_EPROTOCOL);
		goto out;
	}
	digest_hex(&h.st, digest);
	if (want && strcmp(want, digest) != 0) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			  "registry %s: %s has digest %s, not the %s asked for", f->r.registry, what, digest, want);
		goto out;
	}
	if (!strncmp(a.docker_digest, "sha256:", 7) && strcmp(a.docker_digest, digest) != 0) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			  "registry %s: %s has digest %s, but the registry says %s (Docker-Content-Digest)", f->r.registry,
			  what, digest, a.docker_digest);
		goto out;
	}
	*json = sjson_parse(body->data ? body->data : "", body->len, 0, err, sizeof(err));
	if (!*json || !cJSON_IsObject(*json)) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is not a strict JSON object%s%s",
			  f->r.registry, what, *json ? "" : ": ", *json ? "" : err);
		goto out;
	}
	mt = cJSON_GetObjectItemCaseSensitive(*json, "mediaType");
	sv = cJSON_GetObjectItemCaseSensitive(*json, "schemaVersion");
	if (cJSON_IsString(mt))
		snprintf(media_type, 128, "%s", mt->valuestring);
	else
		snprintf(media_type, 128, "%.*s", (int)strcspn(a.content_type, "; "), a.content_type);
	if ((cJSON_IsNumber(sv) && sv->valuedouble == 1) || !strncmp(media_type, MT_DOCKER_V1, strlen(MT_DOCKER_V1))) {
		rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
			  "registry %s: %s is a Docker schema 1 manifest, which is not supported", f->r.registry, what);
		goto out;
	}
	if (!cJSON_IsNumber(sv) || sv->valuedouble != 2) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s has no schemaVersion 2", f->r.registry,
			  what);
		goto out;
	}
	if (!is_manifest_type(media_type) && !is_index_type(media_type)) {
		/* OCI allows mediaType to be left out: tell by shape. */
		if (!media_type[0] || !strcmp(media_type, "application/json"))
			snprintf(media_type, 128, "%s",
				 cJSON_GetObjectItemCaseSensitive(*json, "manifests") ? MT_OCI_INDEX : MT_OCI_MANIFEST);
		else {
			char q[128];

			quote(q, sizeof(q), media_type, strlen(media_type));
			rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: %s is of media type \"%s\", neither an image manifest nor an index",
				  f->r.registry, what, q);
			goto out;
		}
	}
	rc = 0;
out:
	if (rc != 0) {
		cJSON_Delete(*json);
		*json = NULL;
	}
	net_result_fini(&a.res);
	return rc;
}

/* The platform this host runs: GOARCH names, as images label them. */
static void host_platform(char arch[16], char variant[8])
{
	struct utsname u;
	const char *m;

	variant[0] = '\0';
	if (uname(&u) != 0)
		snprintf(u.machine, sizeof(u.machine), "unknown");
	m = u.machine;
	if (!strcmp(m, "x86_64"))
		snprintf(arch, 16, "amd64");
	else if (!strcmp(m, "aarch64") || !strcmp(m, "arm64")) {
		snprintf(arch, 16, "arm64");
		snprintf(variant, 8, "v8");
	} else if (!strncmp(m, "armv7", 5) || !strncmp(m, "armv8l", 6)) {
		snprintf(arch, 16, "arm");
		snprintf(variant, 8, "v7");
	} else if (!strncmp(m, "armv6", 5)) {
		snprintf(arch, 16, "arm");
		snprintf(variant, 8, "v6");
	} else if (m[0] == 'i' && !strcmp(m + 2, "86"))
		snprintf(arch, 16, "386");
	else
		snprintf(arch, 16, "%.15s", m); /* ppc64le, s390x, riscv64, mips64le: the same in both */
}

/* Picks this host's platform in an index: its manifest digest into out. */
static int pick_platform(struct fetch *f, const cJSON *index, char out[DIGEST_LEN + 1])
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(index, "manifests"), *m;
	char arch[16], variant[8];
	struct hbuf seen = HBUF_INIT;
	int best = 0, rc;

	host_platform(arch, variant);
	if (!cJSON_IsArray(list))
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: the index of %s has no manifests list",
			    f->r.registry, f->r.normal);
	cJSON_ArrayForEach(m, list)
	{
		const cJSON *plat = cJSON_GetObjectItemCaseSensitive(m, "platform");
		const cJSON *mt = cJSON_GetObjectItemCaseSensitive(m, "mediaType");
		const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "digest");
		const cJSON *os = cJSON_GetObjectItemCaseSensitive(plat, "os");
		const cJSON *ar = cJSON_GetObjectItemCaseSensitive(plat, "architecture");
		const cJSON *va = cJSON_GetObjectItemCaseSensitive(plat, "variant");
		const char *v = cJSON_IsString(va) ? va->valuestring : "";
		int score;

		if (!cJSON_IsString(os) || !cJSON_IsString(ar) || !cJSON_IsString(d) ||
		    (cJSON_IsString(mt) && !is_manifest_type(mt->valuestring)))
			continue;
		if (seen.len < 1024) {
			char q[64];

			quote(q, sizeof(q), os->valuestring, strlen(os->valuestring));
			hbuf_printf(&seen, "%s%s", seen.len ? ", " : "", q);
			quote(q, sizeof(q), ar->valuestring, strlen(ar->valuestring));
			hbuf_printf(&seen, "/%s", q);
			if (v[0]) {
				quote(q, sizeof(q), v, strlen(v));
				hbuf_printf(&seen, "/%s", q);
			}
		}
		if (strcmp(os->valuestring, "linux") || strcmp(ar->valuestring, arch))
			continue;
		/* An exact variant beats none; a different one does not fit (arm v6 cannot run v7). */
		if (!strcmp(v, variant))
			score = 2;
		else if (!v[0])
			score = 1;
		else
			continue;
		if (score > best) {
			if (!digest_ok(d->valuestring)) {
				hbuf_free(&seen);
				return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
					    "registry %s: the index of %s names a manifest by an invalid digest", f->r.registry,
					    f->r.normal);
			}
			best = score;
			snprintf(out, DIGEST_LEN + 1, "%s", d->valuestring);
		}
	}
	if (best)
		rc = 0;
	else
		rc = herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_PROVIDER, "registry %s: %s has no image for linux/%s%s%s; it has: %s",
			  f->r.registry, f->r.normal, arch, variant[0] ? "/" : "", variant, seen.len ? seen.data : "none");
	hbuf_free(&seen);
	return rc;
}

/* ---- descriptors ------------------------------------------------------------------------ */

struct desc {
	char digest[DIGEST_LEN + 1];
	uint64_t size;
	char what[48]; /* "the config", "layer 2 of 5" */
};

static int layer_type_ok(const char *mt)
{
	static const char *const ok[] = {
		"application/vnd.oci.image.layer.v1.tar",
		"application/vnd.oci.image.layer.v1.tar+gzip",
		"application/vnd.oci.image.layer.v1.tar+zstd",
		"application/vnd.docker.image.rootfs.diff.tar.gzip",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(mt, ok[i]))
			return 1;
	return 0;
}

static int parse_desc(struct fetch *f, const cJSON *d, struct desc *out, uint64_t max_size)
{
	const cJSON *dg = cJSON_GetObjectItemCaseSensitive(d, "digest");
	const cJSON *sz = cJSON_GetObjectItemCaseSensitive(d, "size");

	if (!cJSON_IsString(dg) || !digest_ok(dg->valuestring))
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: the manifest of %s names %s by a digest that is not sha256:<64 hex>", f->r.registry,
			    f->r.normal, out->what);
	if (!cJSON_IsNumber(sz) || sz->valuedouble < 0 || sz->valuedouble > 9007199254740992.0 ||
	    sz->valuedouble != (double)(uint64_t)sz->valuedouble)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: the manifest of %s gives %s no valid size",
			    f->r.registry, f->r.normal, out->what);
	snprintf(out->digest, sizeof(out->digest), "%s", dg->valuestring);
	out->size = (uint64_t)sz->valuedouble;
	if (max_size && out->size > max_size)
		return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: %s of %s (%s) is %llu bytes, over the %llu allowed", f->r.registry, out->what,
			    f->r.normal, out->digest, (unsigned long long)out->size, (unsigned long long)max_size);
	return 0;
}

/* The config and layers of an image manifest; *out has n + 1 entries, config first. */
static int parse_manifest(struct fetch *f, const cJSON *m, struct desc **out, size_t *n)
{
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(m, "config");
	const cJSON *layers = cJSON_GetObjectItemCaseSensitive(m, "layers"), *l;
	const cJSON *cmt = cJSON_GetObjectItemCaseSensitive(cfg, "mediaType");
	struct desc *d;
	size_t i = 1, count;
	int rc;

	*out = NULL;
	if (!cJSON_IsObject(cfg) || !cJSON_IsArray(layers))
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: the manifest of %s has no config or layers",
			    f->r.registry, f->r.normal);
	if (cJSON_IsString(cmt) && strcmp(cmt->valuestring, "application/vnd.oci.image.config.v1+json") &&
	    strcmp(cmt->valuestring, "application/vnd.docker.container.image.v1+json")) {
		char q[128];

		quote(q, sizeof(q), cmt->valuestring, strlen(cmt->valuestring));
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
			    "registry %s: %s is not a container image (its config is \"%s\")", f->r.registry, f->r.normal, q);
	}
	count = (size_t)cJSON_GetArraySize(layers);
	if (count > LAYERS_MAX)
		return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER, "registry %s: %s has %zu layers, over %d",
			    f->r.registry, f->r.normal, count, LAYERS_MAX);
	d = calloc(count + 1, sizeof(*d));
	if (!d)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	snprintf(d[0].what, sizeof(d[0].what), "the config");
	if ((rc = parse_desc(f, cfg, &d[0], REGISTRY_CONFIG_MAX)) != 0)
		goto fail;
	cJSON_ArrayForEach(l, layers)
	{
		const cJSON *mt = cJSON_GetObjectItemCaseSensitive(l, "mediaType");
		const cJSON *urls = cJSON_GetObjectItemCaseSensitive(l, "urls");

		snprintf(d[i].what, sizeof(d[i].what), "layer %zu of %zu", i, count);
		if (!cJSON_IsString(mt)) {
			rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s of %s has no media type",
				  f->r.registry, d[i].what, f->r.normal);
			goto fail;
		}
		if (urls || strstr(mt->valuestring, "foreign") || strstr(mt->valuestring, "nondistributable")) {
			rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: %s of %s is a foreign (non-distributable) layer to be fetched from elsewhere; "
				  "refused", f->r.registry, d[i].what, f->r.normal);
			goto fail;
		}
		if (!layer_type_ok(mt->valuestring)) {
			char q[128];

			quote(q, sizeof(q), mt->valuestring, strlen(mt->valuestring));
			rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: %s of %s is of media type \"%s\" (tar, gzip or zstd layers only)",
				  f->r.registry, d[i].what, f->r.normal, q);
			goto fail;
		}
		if ((rc = parse_desc(f, l, &d[i], 0)) != 0)
			goto fail;
		i++;
	}
	*out = d;
	*n = count + 1;
	return 0;
fail:
	free(d);
	return rc;
}

/* ---- blobs ------------------------------------------------------------------------------- */

struct blob_sink {
	struct fetch *f;
	struct job *job;
	const struct desc *d;
	int fd;
	crypto_hash_sha256_state st;
	uint64_t got;
	int rc;           /* why a callback stopped the transfer */
};

static int blob_body(void *ud, const char *data, size_t len)
{
	struct blob_sink *b = ud;
	size_t off = 0;

	if (b->got + len > b->d->size) {
		b->rc = herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_PROVIDER,
			     "registry %s: blob %s (%s) goes on past its %llu bytes", b->f->r.registry, b->d->digest,
			     b->d->what, (unsigned long long)b->d->size);
		return 1;
	}
	crypto_hash_sha256_update(&b->st, (const unsigned char *)data, len);
	while (off < len) {
		ssize_t w = write(b->fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			b->rc = herr_os(HANGAR_EFILE, w < 0 ? errno : EIO, "registry %s: writing blob %s (%s) under %s",
					b->f->r.registry, b->d->digest, b->d->what, b->f->dir);
			return 1;
		}
		off += (size_t)w;
	}
	b->got += len;
	__atomic_store_n(&b->job->got, b->got, __ATOMIC_RELAXED);
	return 0;
}

/* Resolves a Location against the URL it answered; the target's scheme and authority too. -1 when unusable. */
static int resolve_location(const char *base, const char *loc, char **out, char *scheme, char *authority)
{
	char bs[8], ba[300];

	*out = NULL;
	if (url_split(loc, scheme, 8, authority, 300) == 0)
		return (*out = strdup(loc)) ? 0 : -1;
	if (loc[0] != '/' || loc[1] == '/' || url_split(base, bs, sizeof(bs), ba, sizeof(ba)) != 0)
		return -1;
	snprintf(scheme, 8, "%s", bs);
	snprintf(authority, 300, "%s", ba);
	if (asprintf(out, "%s://%s%s", bs, ba, loc) < 0) {
		*out = NULL;
		return -1;
	}
	return 0;
}

static int blob_path(struct fetch *f, const char *digest, const char *suffix, char *out, size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s/blobs/sha256/%s%s", f->dir, digest + 7, suffix) >= cap)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "the layout directory's path is too long: %s", f->dir);
	return 0;
}

/* 1 when path holds exactly the blob, 0 when it does not exist or is wrong (then it is deleted), < 0 on error. */
static int blob_present(struct fetch *f, const struct desc *d, const char *path)
{
	crypto_hash_sha256_state st;
	char got[DIGEST_LEN + 1], buf[1 << 16];
	struct stat sb;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ELOOP) {
			unlink(path);
			return 0;
		}
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot read %s", f->r.registry, path);
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != d->size) {
		close(fd);
		goto wrong;
	}
	crypto_hash_sha256_init(&st);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_hash_sha256_update(&st, (unsigned char *)buf, (size_t)n);
	close(fd);
	if (n < 0)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot read %s", f->r.registry, path);
	digest_hex(&st, got);
	if (!strcmp(got, d->digest))
		return 1;
wrong:
	if (unlink(path) != 0 && errno != ENOENT)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot remove the wrong blob %s", f->r.registry, path);
	return 0;
}

static int get_blob(struct fetch *f, struct job *job)
{
	const struct desc *d = job->d;
	char final[PATH_MAX], partial[PATH_MAX], what[200], got[DIGEST_LEN + 1];
	char *path = NULL, *target = NULL, scheme[8], authority[300], thost[256];
	struct blob_sink b;
	struct answer a;
	enum net_class c;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = blob_path(f, d->digest, "", final, sizeof(final))) != 0 ||
	    (rc = blob_path(f, d->digest, ".partial", partial, sizeof(partial))) != 0)
		return rc;
	if ((rc = blob_present(f, d, final)) != 0) {
		if (rc == 1) {
			pthread_mutex_lock(&f->lock);
			job->state = JOB_CACHED;
			pthread_mutex_unlock(&f->lock);
			return 0;
		}
		return rc;
	}
	memset(&b, 0, sizeof(b));
	b.f = f;
	b.job = job;
	b.d = d;
	b.fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (b.fd < 0)
		return herr_os(HANGAR_EFILE, errno, "registry %s: cannot create %s", f->r.registry, partial);
	crypto_hash_sha256_init(&b.st);
	snprintf(what, sizeof(what), "blob %s (%s)", d->digest, d->what);
	if (asprintf(&path, "/v2/%s/blobs/%s", f->r.name, d->digest) < 0) {
		path = NULL;
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	c = registry_get(f, path, NULL, d->size ? d->size : 1, 0, blob_body, &b, what, &a, &rc);
	if (rc != 0)
		goto out;
	if (c == NET_HTTP_STATUS && (a.res.http_status == 301 || a.res.http_status == 302 || a.res.http_status == 303 ||
				     a.res.http_status == 307 || a.res.http_status == 308)) {
		char base[600];

		snprintf(base, sizeof(base), "%s://%s%s", f->scheme, f->r.api_host, path);
		if (resolve_location(base, a.location, &target, scheme, authority) != 0) {
			char q[200];

			quote(q, sizeof(q), a.location, strlen(a.location));
			rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is redirected to \"%s\", not an http(s) URL",
				  f->r.registry, what, q);
			goto out;
		}
		host_only(authority, thost, sizeof(thost));
		/* Plain http only to loopback, and only from a registry reached over http itself. */
		if (strcmp(scheme, "https") && !(strcmp(f->scheme, "http") == 0 && host_is_loopback(thost))) {
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: %s is redirected to plain http at %s; a redirect is followed to https only",
				  f->r.registry, what, authority);
			goto out;
		}
		net_result_fini(&a.res);
		c = perform(f, target, 0, NULL, d->size ? d->size : 1, 0, blob_body, &b, &a);
		if (c == NET_HTTP_STATUS && a.res.http_status >= 300 && a.res.http_status <= 399) {
			rc = herr_http(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, a.res.http_status, NULL,
				       "registry %s: %s is redirected again by %s; one redirect is followed", f->r.registry,
				       what, authority);
			goto out;
		}
		if (c != NET_OK) {
			rc = net_fail(f, &a, authority, what, b.rc ? b.rc : HANGAR_EPROTOCOL);
			goto out;
		}
	} else if (c != NET_OK) {
		rc = net_fail(f, &a, f->r.api_host, what, b.rc ? b.rc : HANGAR_EPROTOCOL);
		goto out;
	}
	if (b.got != d->size) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s is %llu bytes, not the %llu its manifest says",
			  f->r.registry, what, (unsigned long long)b.got, (unsigned long long)d->size);
		goto out;
	}
	digest_hex(&b.st, got);
	if (strcmp(got, d->digest) != 0) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "registry %s: %s does not match its digest: its bytes are %s",
			  f->r.registry, what, got);
		goto out;
	}
	if (close(b.fd) != 0) {
		b.fd = -1;
		rc = herr_os(HANGAR_EFILE, errno, "registry %s: writing %s", f->r.registry, partial);
		goto out;
	}
	b.fd = -1;
	if (rename(partial, final) != 0) {
		rc = herr_os(HANGAR_EFILE, errno, "registry %s: cannot rename %s", f->r.registry, partial);
		goto out;
	}
	pthread_mutex_lock(&f->lock);
	job->state = JOB_FETCHED;
	pthread_mutex_unlock(&f->lock);
	rc = 0;
out:
	if (b.fd >= 0)
		close(b.fd);
	if (rc != 0)
		unlink(partial);
	net_result_fini(&a.res);
	free(target);
	free(path);
	return rc;
}

/* ---- fetching the blobs, several at once ----------------------------------------------- */

static void *blob_worker(void *arg)
{
	struct fetch *f = arg;

	for (;;) {
		struct job *j;
		int rc;

		pthread_mutex_lock(&f->lock);
		if (f->next_job >= f->njobs || __atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
			f->workers--;
			pthread_cond_signal(&f->cond);
			pthread_mutex_unlock(&f->lock);
			return NULL;
		}
		j = &f->jobs[f->next_job++];
		j->state = JOB_RUNNING;
		pthread_mutex_unlock(&f->lock);
		herr_clear();
		rc = get_blob(f, j);
		pthread_mutex_lock(&f->lock);
		if (rc != 0) {
			hangar_sys_error_save(&j->err);
			j->state = JOB_FAILED;
			/* The first failure is the one reported; the others only follow from the stop. */
			if (!f->failed)
				f->failed = j;
			__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		} else {
			f->blobs_done++;
		}
		pthread_cond_signal(&f->cond);
		pthread_mutex_unlock(&f->lock);
	}
}

/* Progress since the last report, on the calling thread; non-zero when the caller cancels. */
static int report(struct fetch *f)
{
	const struct registry_progress *p = f->p;
	uint32_t done;

	pthread_mutex_lock(&f->lock);
	done = f->blobs_done;
	pthread_mutex_unlock(&f->lock);
	for (size_t i = 0; i < f->njobs && p && p->fn; i++) {
		struct job *j = &f->jobs[i];
		uint64_t got = __atomic_load_n(&j->got, __ATOMIC_RELAXED);
		enum job_state st;

		pthread_mutex_lock(&f->lock);
		st = j->state;
		pthread_mutex_unlock(&f->lock);
		if (st == JOB_CACHED && !j->announced) {
			j->announced = 1;
			if (p->fn(p->ud, "cached", j->d->digest, j->d->size, j->d->size, done, f->blobs_total))
				return 1;
		} else if (got != j->reported) {
			j->reported = got;
			if (p->fn(p->ud, "blob", j->d->digest, got, j->d->size, done, f->blobs_total))
				return 1;
		}
	}
	return p && p->cancel && p->cancel(p->ud);
}

/*
 * Fetches every blob with up to BLOB_WORKERS threads while the calling
 * thread reports progress and asks its cancel, so callbacks only ever run
 * where the caller is. The first failure is the one returned.
 */
static int fetch_blobs(struct fetch *f, const struct desc *d, size_t n)
{
	pthread_t tid[BLOB_WORKERS];
	size_t started = 0, want = n < BLOB_WORKERS ? n : BLOB_WORKERS;
	int cancelled = 0, rc = 0;

	f->jobs = calloc(n, sizeof(*f->jobs));
	if (!f->jobs)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	for (size_t i = 0; i < n; i++)
		f->jobs[i].d = &d[i];
	f->njobs = n;
	pthread_mutex_lock(&f->lock);
	for (; started < want; started++) {
		if (pthread_create(&tid[started], NULL, blob_worker, f) != 0)
			break;
		f->workers++;
	}
	if (started == 0) {
		pthread_mutex_unlock(&f->lock);
		return herr(HANGAR_EOS, HANGAR_ERRCAT_OS, "registry %s: cannot start a thread to fetch blobs", f->r.registry);
	}
	while (f->workers > 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PROGRESS_TICK_MS * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&f->cond, &f->lock, &until);
		pthread_mutex_unlock(&f->lock);
		if (!cancelled && report(f)) {
			cancelled = 1;
			__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
		}
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	for (size_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (!cancelled && report(f))
		cancelled = 1;
	if (cancelled)
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "registry %s: the pull was cancelled", f->r.registry);
	else if (f->failed)
		rc = hangar_sys_error_restore(&f->failed->err);
	return rc;
}

/* ---- the layout ------------------------------------------------------------------------- */

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

	if ((rc = blob_path(f, d->digest, "", path, sizeof(path))) != 0)
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
	if ((rc = get_manifest(f, f->r.digest ? f->r.digest : f->r.tag, f->r.digest, &body, &json, mt, digest)) != 0)
		goto out;
	if (is_index_type(mt)) {
		if ((rc = pick_platform(f, json, picked)) != 0)
			goto out;
		cJSON_Delete(json);
		json = NULL;
		if ((rc = get_manifest(f, picked, picked, &body, &json, mt, digest)) != 0)
			goto out;
		if (!is_manifest_type(mt)) {
			rc = herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
				  "registry %s: the index of %s names another index for this platform (%s)", f->r.registry,
				  f->r.normal, picked);
			goto out;
		}
	}
	if ((rc = parse_manifest(f, json, &d, &n)) != 0)
		goto out;
	f->blobs_total = (uint32_t)n;
	if (f->p && f->p->fn && f->p->fn(f->p->ud, "manifest", digest, 0, 0, 0, f->blobs_total)) {
		rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_NONE, "registry %s: the pull was cancelled", f->r.registry);
		goto out;
	}
	if ((rc = fetch_blobs(f, d, n)) != 0)
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

int registry_fetch(hangar_ctx *ctx, const char *reference, const char *dir, const struct registry_progress *p,
		   char **out_digest)
{
	struct fetch f;
	const char *ca;
	int rc;

	HCHECK_ARG(out_digest, "out_digest");
	*out_digest = NULL;
	HCHECK_ARG(ctx, "ctx");
	HCHECK_ARG(dir && dir[0], "dir");
	HCHECK_TEXT(dir, "dir");
	memset(&f, 0, sizeof(f));
	if ((rc = ref_parse(reference, &f.r)) != 0)
		return rc;
	f.caller = pthread_self();
	pthread_mutex_init(&f.lock, NULL);
	pthread_cond_init(&f.cond, NULL);
	f.ctx = ctx;
	f.dir = dir;
	f.p = p;
	host_only(f.r.api_host, f.host, sizeof(f.host));
	f.http_ok = http_allowed(ctx, f.r.registry);
	snprintf(f.scheme, sizeof(f.scheme), "https");
	ca = hctx_str(ctx, HS_REGISTRY_CA_FILE);
	f.ca_file = ca && ca[0] ? ca : NULL;
	f.stall_ms = hctx_int(ctx, HS_REGISTRY_STALL) * 1000;
	f.timeout_ms = hctx_int(ctx, HS_REQUEST_TIMEOUT) * 1000;
	if (f.ca_file && access(f.ca_file, R_OK) != 0)
		rc = herr_os(HANGAR_ECONFIG, errno, "registry %s: cannot read the CA file %s (HANGAR_REGISTRY_CA_FILE)",
			     f.r.registry, f.ca_file);
	else if ((rc = load_credentials(&f)) == 0 && (rc = net_pool_new(&f.pool, 4)) == 0)
		rc = fetch_run(&f, out_digest);
	net_pool_free(f.pool);
	drop_authz(&f);
	if (f.user) {
		sodium_memzero(f.user, strlen(f.user));
		free(f.user);
	}
	if (f.pass) {
		sodium_memzero(f.pass, strlen(f.pass));
		free(f.pass);
	}
	ref_free(&f.r);
	free(f.jobs);
	pthread_cond_destroy(&f.cond);
	pthread_mutex_destroy(&f.lock);
	return rc;
}
