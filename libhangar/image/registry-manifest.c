/*
 * Manifests: an index or list resolved to this host's platform, and an
 * image manifest read into its config and layers, each checked before a
 * byte of a blob is asked for. A manifest's digest is the sha256 of the
 * bytes that came, whatever the registry says.
 */
#define _GNU_SOURCE
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/utsname.h>

#include <cjson/cJSON.h>

#include "registry-int.h"
#include "util/buf.h"
#include "util/sjson.h"

#define LAYERS_MAX 1000

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

void reg_digest_hex(crypto_hash_sha256_state *st, char out[DIGEST_LEN + 1])
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

int reg_is_manifest_type(const char *mt)
{
	return !strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST);
}

int reg_is_index_type(const char *mt)
{
	return !strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST);
}

/*
 * GETs the manifest ref (a tag or a digest) into body, checked: its digest
 * (sha256 of the exact bytes) matches want when given and the registry's
 * Docker-Content-Digest when sent. media_type: what it is.
 */
int reg_get_manifest(struct fetch *f, const char *ref, const char *want, struct hbuf *body, cJSON **json,
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
	snprintf(what, sizeof(what), "the manifest %s%s%s", f->r.name, ref[0] == 's' && img_digest_ok(ref) ? "@" : ":", ref);
	if (asprintf(&path, "/v2/%s/manifests/%s", f->r.name, ref) < 0)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	hbuf_clear(body);
	crypto_hash_sha256_init(&h.st);
	h.keep = body;
	h.max = REGISTRY_MANIFEST_MAX;
	c = reg_get(f, path, accept, REGISTRY_MANIFEST_MAX, f->timeout_ms, hash_into_buf, &h, what, &a, &rc);
	free(path);
	if (rc != 0)
		goto out;
	if (c == NET_HTTP_STATUS && a.res.http_status >= 300 && a.res.http_status <= 399) {
		char ls[8], la[300];

		if (reg_url_split(a.location, ls, sizeof(ls), la, sizeof(la)) != 0)
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
		rc = reg_net_fail(f, &a, f->r.api_host, what, HANGAR_EPROTOCOL);
		goto out;
	}
	reg_digest_hex(&h.st, digest);
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
	if (!reg_is_manifest_type(media_type) && !reg_is_index_type(media_type)) {
		/* OCI allows mediaType to be left out: tell by shape. */
		if (!media_type[0] || !strcmp(media_type, "application/json"))
			snprintf(media_type, 128, "%s",
				 cJSON_GetObjectItemCaseSensitive(*json, "manifests") ? MT_OCI_INDEX : MT_OCI_MANIFEST);
		else {
			char q[128];

			reg_quote(q, sizeof(q), media_type, strlen(media_type));
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
int reg_pick_platform(struct fetch *f, const cJSON *index, char out[DIGEST_LEN + 1])
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
		    (cJSON_IsString(mt) && !reg_is_manifest_type(mt->valuestring)))
			continue;
		if (seen.len < 1024) {
			char q[64];

			reg_quote(q, sizeof(q), os->valuestring, strlen(os->valuestring));
			hbuf_printf(&seen, "%s%s", seen.len ? ", " : "", q);
			reg_quote(q, sizeof(q), ar->valuestring, strlen(ar->valuestring));
			hbuf_printf(&seen, "/%s", q);
			if (v[0]) {
				reg_quote(q, sizeof(q), v, strlen(v));
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
			if (!img_digest_ok(d->valuestring)) {
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

	if (!cJSON_IsString(dg) || !img_digest_ok(dg->valuestring))
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
int reg_parse_manifest(struct fetch *f, const cJSON *m, struct desc **out, size_t *n)
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

		reg_quote(q, sizeof(q), cmt->valuestring, strlen(cmt->valuestring));
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

			reg_quote(q, sizeof(q), mt->valuestring, strlen(mt->valuestring));
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
