/*
 * What the files of a registry fetch share, private to them: registry.c
 * (requests and the layout), registry-ref.c (references and hosts),
 * registry-auth.c (credentials and challenges), registry-manifest.c and
 * registry-blob.c. Internal names start with reg_.
 */
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <sodium.h>

#include "registry.h"
#include "image/img.h"
#include "core/internal.h"
#include "net/net.h"

#define DIGEST_LEN 71 /* "sha256:" + 64 */
#define HEADER_VALUE_MAX 8192

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_V1 "application/vnd.docker.distribution.manifest.v1"

struct ref {
	char *registry; /* host[:port] as in the reference, host in lower case; "docker.io" by default */
	char *api_host; /* where its API is: docker.io's is registry-1.docker.io */
	char *name;     /* "library/debian" */
	char *tag;      /* or NULL */
	char *digest;   /* "sha256:<hex>" or NULL */
	char *normal;   /* registry/name[:tag][@digest] */
};

/* Parses and normalises reference into r (reg_ref_free releases it); 0 or HANGAR_EINVAL reported. */
int reg_ref_parse(const char *reference, struct ref *r);
void reg_ref_free(struct ref *r);

/* The host of host[:port] or [v6][:port], lower-cased and without brackets. */
void reg_host_only(const char *authority, char *out, size_t cap);
int reg_host_is_loopback(const char *host);
/* Whether authority may be reached over plain http: loopback, or named in HANGAR_REGISTRY_INSECURE. */
int reg_http_allowed(hangar_ctx *ctx, const char *authority);
/* Whether a token service at realm_host may see the credentials of the registry at registry_host. */
int reg_same_site(const char *registry_host, const char *realm_host);
/* Splits an http(s) URL into scheme and authority; -1 when it is not one. */
int reg_url_split(const char *url, char *scheme, size_t scap, char *authority, size_t acap);
/* Untrusted text for a message: printable ASCII, bounded. */
void reg_quote(char *dst, size_t cap, const char *src, size_t n);

struct desc {
	char digest[DIGEST_LEN + 1];
	uint64_t size;
	char what[48]; /* "the config", "layer 2 of 5" */
};

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
	uint32_t authz_gen;      /* counts the changes of authz */
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
	uint32_t authz_gen;     /* the fetch's authz_gen when the request went out */
	char content_type[256];
	char docker_digest[128];
	char location[HEADER_VALUE_MAX];
	char www_auth[HEADER_VALUE_MAX];
};

/* net_request.on_header for a struct answer. */
void reg_on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen);
/* Reports a request that ended without a usable answer: peer is who was asked, what for what. */
int reg_net_fail(struct fetch *f, const struct answer *a, const char *peer, const char *what, int aborted_rc);

/* Answers a 401's challenge: f->authz becomes a bearer token or basic credentials. Under f->lock. */
int reg_authenticate(struct fetch *f, const char *challenge, const char *what);
/* Forgets (and wipes) the Authorization earned. */
void reg_drop_authz(struct fetch *f);
/* f->user and f->pass from the docker config.json for the registry, when it has them. */
int reg_load_credentials(struct fetch *f);

/* One request to url (with the Authorization earned when authz), filling a; returns its class. */
enum net_class reg_perform(struct fetch *f, const char *url, int authz, const char *accept, size_t max_body,
			   int64_t timeout_ms, int (*on_body)(void *, const char *, size_t), void *ud,
			   struct answer *a);
/* GET path from the registry itself, answering one 401 challenge; *rc set when that failed. */
enum net_class reg_get(struct fetch *f, const char *path, const char *accept, size_t max_body, int64_t timeout_ms,
		       int (*on_body)(void *, const char *, size_t), void *ud, const char *what, struct answer *a,
		       int *rc);

/* "sha256:<hex>" of what st hashed. */
void reg_digest_hex(crypto_hash_sha256_state *st, char out[DIGEST_LEN + 1]);
int reg_is_manifest_type(const char *mt);
int reg_is_index_type(const char *mt);
/* GETs manifest ref (a tag or digest) into body and *json, checked against want and Docker-Content-Digest. */
int reg_get_manifest(struct fetch *f, const char *ref, const char *want, struct hbuf *body, cJSON **json,
		     char media_type[128], char digest[DIGEST_LEN + 1]);
/* The digest of this host's platform's manifest in an index. */
int reg_pick_platform(struct fetch *f, const cJSON *index, char out[DIGEST_LEN + 1]);
/* The config (first) and layers of an image manifest; *out is the caller's to free. */
int reg_parse_manifest(struct fetch *f, const cJSON *m, struct desc **out, size_t *n);

/* dir/blobs/sha256/<hex><suffix> into out. */
int reg_blob_path(struct fetch *f, const char *digest, const char *suffix, char *out, size_t cap);
/* Fetches the n blobs of d into the layout (or verifies them there). */
int reg_fetch_blobs(struct fetch *f, const struct desc *d, size_t n);
