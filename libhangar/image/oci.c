/*
 * The OCI documents an import reads: image manifests (OCI and Docker
 * schema 2), image indexes (OCI and Docker manifest lists) and image
 * configs. All are untrusted: strict JSON (one value, no duplicate
 * members, UTF-8) and every field used is checked for type and form, so a
 * malformed document is refused naming the field, never half-read.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include <cjson/cJSON.h>

#include "image/img.h"
#include "util/sjson.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static cJSON *parse(const char *text, size_t len, const char *what, char *err, size_t errlen)
{
	char why[256];
	cJSON *root;

	if (len > IMG_JSON_MAX) {
		fail(err, errlen, "the %s is larger than %u bytes", what, IMG_JSON_MAX);
		return NULL;
	}
	root = sjson_parse(text, len, 0, why, sizeof(why));
	if (!root) {
		fail(err, errlen, "the %s is not strict JSON: %s", what, why);
		return NULL;
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		fail(err, errlen, "the %s is not a JSON object", what);
		return NULL;
	}
	return root;
}

/* A string member: 1 present (copied when out), 0 absent, -1 wrong type or too long. */
static int str_field(const cJSON *obj, const char *name, char *out, size_t size)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= size)
		return -1;
	if (out)
		strcpy(out, v->valuestring);
	return 1;
}

int img_media_kind(const char *mt)
{
	if (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST))
		return 1;
	if (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST))
		return 2;
	return 0;
}

int img_layer_media_compression(const char *mt)
{
	static const struct {
		const char *type;
		int compression;
	} known[] = {
		{ "application/vnd.oci.image.layer.v1.tar", 0 },
		{ "application/vnd.oci.image.layer.v1.tar+gzip", 1 },
		{ "application/vnd.oci.image.layer.v1.tar+zstd", 2 },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar", 0 },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", 1 },
		{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", 2 },
		{ "application/vnd.docker.image.rootfs.diff.tar", 0 },
		{ "application/vnd.docker.image.rootfs.diff.tar.gzip", 1 },
		{ "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", 1 },
	};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(mt, known[i].type))
			return known[i].compression;
	return -1;
}

/* A descriptor at where: mediaType (required when need_type), digest, size. */
static int parse_desc(const cJSON *d, struct img_desc *out, int need_type, const char *where, char *err,
		      size_t errlen)
{
	const cJSON *size;
	int r;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(d))
		return fail(err, errlen, "%s is not an object", where);
	r = str_field(d, "mediaType", out->media_type, sizeof(out->media_type));
	if (r < 0 || (r == 0 && need_type))
		return fail(err, errlen, "%s.mediaType is %s", where, r < 0 ? "not a short string" : "missing");
	if (str_field(d, "digest", out->digest, sizeof(out->digest)) != 1 || !img_digest_ok(out->digest))
		return fail(err, errlen, "%s.digest is not sha256:<64 lower-case hex digits>", where);
	size = cJSON_GetObjectItemCaseSensitive(d, "size");
	if (!cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 9007199254740992.0 ||
	    size->valuedouble != (double)(uint64_t)size->valuedouble)
		return fail(err, errlen, "%s.size is not a whole number of bytes", where);
	out->size = (uint64_t)size->valuedouble;
	return 0;
}

static int schema2(const cJSON *root, const char *what, char *err, size_t errlen)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schemaVersion");

	if (!cJSON_IsNumber(v) || v->valuedouble != 2)
		return fail(err, errlen, "the %s's schemaVersion is not 2", what);
	return 0;
}

int img_parse_manifest(const char *text, size_t len, struct img_manifest *m, char *err, size_t errlen)
{
	char mt[128] = "", where[64];
	const cJSON *layers, *l;
	cJSON *root;
	size_t i = 0;
	int r;

	memset(m, 0, sizeof(*m));
	if (!(root = parse(text, len, "manifest", err, errlen)))
		return -1;
	if (schema2(root, "manifest", err, errlen) < 0)
		goto bad;
	r = str_field(root, "mediaType", mt, sizeof(mt));
	if (r < 0 || (r == 1 && img_media_kind(mt) != 1)) {
		fail(err, errlen, "the manifest's mediaType is not an image manifest's");
		goto bad;
	}
	if (parse_desc(cJSON_GetObjectItemCaseSensitive(root, "config"), &m->config, 1, "config", err, errlen) < 0)
		goto bad;
	layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
	if (!cJSON_IsArray(layers)) {
		fail(err, errlen, "the manifest's layers is not an array");
		goto bad;
	}
	m->n_layers = (size_t)cJSON_GetArraySize(layers);
	if (m->n_layers > IMG_MAX_LAYERS) {
		fail(err, errlen, "the manifest has more than %u layers", IMG_MAX_LAYERS);
		goto bad;
	}
	m->layers = calloc(m->n_layers ? m->n_layers : 1, sizeof(*m->layers));
	if (!m->layers) {
		fail(err, errlen, "out of memory");
		goto bad;
	}
	cJSON_ArrayForEach(l, layers) {
		snprintf(where, sizeof(where), "layers[%zu]", i);
		if (parse_desc(l, &m->layers[i], 1, where, err, errlen) < 0)
			goto bad;
		if (img_layer_media_compression(m->layers[i].media_type) < 0) {
			fail(err, errlen, "layers[%zu].mediaType is not a layer type this store unpacks", i);
			goto bad;
		}
		i++;
	}
	cJSON_Delete(root);
	return 0;
bad:
	cJSON_Delete(root);
	img_manifest_free(m);
	return -1;
}

void img_manifest_free(struct img_manifest *m)
{
	free(m->layers);
	m->layers = NULL;
	m->n_layers = 0;
}

/* A NULL-terminated copy of an array of strings at where; -1 when an element is not a string. */
static int strings(const cJSON *arr, char ***out, size_t *n, size_t max, const char *where, char *err,
		   size_t errlen)
{
	const cJSON *e;
	size_t i = 0;

	*out = NULL;
	*n = 0;
	if (!cJSON_IsArray(arr))
		return fail(err, errlen, "%s is not an array", where);
	*n = (size_t)cJSON_GetArraySize(arr);
	if (*n > max)
		return fail(err, errlen, "%s has more than %zu entries", where, max);
	if (!(*out = calloc(*n + 1, sizeof(char *))))
		return fail(err, errlen, "out of memory");
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e))
			return fail(err, errlen, "%s[%zu] is not a string", where, i);
		if (!((*out)[i++] = strdup(e->valuestring)))
			return fail(err, errlen, "out of memory");
	}
	return 0;
}

int img_parse_config(const char *text, size_t len, struct img_config *c, char *err, size_t errlen)
{
	const cJSON *rootfs, *cfg, *v;
	cJSON *root;
	size_t i;

	memset(c, 0, sizeof(*c));
	if (!(root = parse(text, len, "config", err, errlen)))
		return -1;
	if (str_field(root, "os", c->os, sizeof(c->os)) != 1 || !c->os[0]) {
		fail(err, errlen, "the config's os is missing or not a short string");
		goto bad;
	}
	if (str_field(root, "architecture", c->architecture, sizeof(c->architecture)) != 1 || !c->architecture[0]) {
		fail(err, errlen, "the config's architecture is missing or not a short string");
		goto bad;
	}
	rootfs = cJSON_GetObjectItemCaseSensitive(root, "rootfs");
	v = cJSON_IsObject(rootfs) ? cJSON_GetObjectItemCaseSensitive(rootfs, "type") : NULL;
	if (!cJSON_IsString(v) || strcmp(v->valuestring, "layers") != 0) {
		fail(err, errlen, "the config's rootfs.type is not \"layers\"");
		goto bad;
	}
	if (strings(cJSON_GetObjectItemCaseSensitive(rootfs, "diff_ids"), &c->diff_ids, &c->n_diff_ids,
		    IMG_MAX_LAYERS, "the config's rootfs.diff_ids", err, errlen) < 0)
		goto bad;
	for (i = 0; i < c->n_diff_ids; i++)
		if (!img_digest_ok(c->diff_ids[i])) {
			fail(err, errlen, "the config's rootfs.diff_ids[%zu] is not sha256:<64 lower-case hex digits>", i);
			goto bad;
		}
	cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
	if (cfg && !cJSON_IsNull(cfg)) {
		static const char *const str_members[] = { "WorkingDir", "User" };
		static const char *const list_members[] = { "Env", "Entrypoint", "Cmd" };

		if (!cJSON_IsObject(cfg)) {
			fail(err, errlen, "the config's config is not an object");
			goto bad;
		}
		for (i = 0; i < 2; i++) {
			v = cJSON_GetObjectItemCaseSensitive(cfg, str_members[i]);
			if (v && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
				fail(err, errlen, "the config's config.%s is not a string", str_members[i]);
				goto bad;
			}
		}
		for (i = 0; i < 3; i++) {
			const cJSON *e;

			v = cJSON_GetObjectItemCaseSensitive(cfg, list_members[i]);
			if (!v || cJSON_IsNull(v))
				continue;
			if (!cJSON_IsArray(v)) {
				fail(err, errlen, "the config's config.%s is not an array", list_members[i]);
				goto bad;
			}
			cJSON_ArrayForEach(e, v) if (!cJSON_IsString(e)) {
				fail(err, errlen, "the config's config.%s holds a non-string", list_members[i]);
				goto bad;
			}
		}
		v = cJSON_GetObjectItemCaseSensitive(cfg, "Env");
		if (cJSON_IsArray(v)) {
			const cJSON *e;

			cJSON_ArrayForEach(e, v) if (!strchr(e->valuestring, '=') || e->valuestring[0] == '=') {
				fail(err, errlen, "the config's config.Env holds an entry that is not K=V");
				goto bad;
			}
		}
		c->config = cJSON_Duplicate(cfg, 1);
		if (!c->config) {
			fail(err, errlen, "out of memory");
			goto bad;
		}
	}
	cJSON_Delete(root);
	return 0;
bad:
	cJSON_Delete(root);
	img_config_free(c);
	return -1;
}

void img_config_free(struct img_config *c)
{
	if (c->diff_ids)
		for (size_t i = 0; c->diff_ids[i]; i++)
			free(c->diff_ids[i]);
	free(c->diff_ids);
	cJSON_Delete(c->config);
	c->diff_ids = NULL;
	c->config = NULL;
	c->n_diff_ids = 0;
}

int img_parse_index(const char *text, size_t len, struct img_index *ix, char *err, size_t errlen)
{
	const cJSON *list, *e;
	char where[64], mt[128] = "";
	cJSON *root;
	size_t i = 0;
	int r;

	memset(ix, 0, sizeof(*ix));
	if (!(root = parse(text, len, "index", err, errlen)))
		return -1;
	if (schema2(root, "index", err, errlen) < 0)
		goto bad;
	r = str_field(root, "mediaType", mt, sizeof(mt));
	if (r < 0 || (r == 1 && img_media_kind(mt) != 2)) {
		fail(err, errlen, "the index's mediaType is not an image index's");
		goto bad;
	}
	list = cJSON_GetObjectItemCaseSensitive(root, "manifests");
	if (!cJSON_IsArray(list)) {
		fail(err, errlen, "the index's manifests is not an array");
		goto bad;
	}
	ix->n = (size_t)cJSON_GetArraySize(list);
	if (ix->n > IMG_MAX_LAYERS) {
		fail(err, errlen, "the index has more than %u manifests", IMG_MAX_LAYERS);
		goto bad;
	}
	if (!(ix->entries = calloc(ix->n ? ix->n : 1, sizeof(*ix->entries)))) {
		fail(err, errlen, "out of memory");
		goto bad;
	}
	cJSON_ArrayForEach(e, list) {
		struct img_index_entry *x = &ix->entries[i];
		const cJSON *plat, *ann;

		snprintf(where, sizeof(where), "manifests[%zu]", i);
		if (parse_desc(e, &x->desc, 1, where, err, errlen) < 0)
			goto bad;
		plat = cJSON_GetObjectItemCaseSensitive(e, "platform");
		if (plat && !cJSON_IsNull(plat)) {
			if (!cJSON_IsObject(plat) || str_field(plat, "os", x->os, sizeof(x->os)) < 0 ||
			    str_field(plat, "architecture", x->architecture, sizeof(x->architecture)) < 0 ||
			    str_field(plat, "variant", x->variant, sizeof(x->variant)) < 0) {
				fail(err, errlen, "%s.platform is malformed", where);
				goto bad;
			}
		}
		ann = cJSON_GetObjectItemCaseSensitive(e, "annotations");
		if (ann && !cJSON_IsNull(ann)) {
			if (!cJSON_IsObject(ann)) {
				fail(err, errlen, "%s.annotations is not an object", where);
				goto bad;
			}
			r = str_field(ann, "io.containerd.image.name", x->name, sizeof(x->name));
			if (r == 0)
				r = str_field(ann, "org.opencontainers.image.ref.name", x->name, sizeof(x->name));
			if (r < 0) {
				fail(err, errlen, "%s's name annotation is not a short string", where);
				goto bad;
			}
		}
		i++;
	}
	cJSON_Delete(root);
	return 0;
bad:
	cJSON_Delete(root);
	img_index_free(ix);
	return -1;
}

void img_index_free(struct img_index *ix)
{
	free(ix->entries);
	ix->entries = NULL;
	ix->n = 0;
}

const char *img_host_arch(void)
{
	static const struct {
		const char *machine, *oci;
	} arches[] = {
		{ "x86_64", "amd64" }, { "aarch64", "arm64" }, { "armv7l", "arm" }, { "i686", "386" },
		{ "i386", "386" }, { "ppc64le", "ppc64le" }, { "s390x", "s390x" }, { "riscv64", "riscv64" },
	};
	static char other[65];
	struct utsname u;

	if (uname(&u) < 0)
		return "unknown";
	for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++)
		if (!strcmp(u.machine, arches[i].machine))
			return arches[i].oci;
	snprintf(other, sizeof(other), "%s", u.machine);
	return other;
}
