/*
 * Image records (images/<hex>.json): reading them strictly, writing them
 * atomically, walking them, finding one by a reference, and whether a
 * sandbox uses one (its use/ lock). hangar-images(7) describes them.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "image/img.h"
#include "util/sjson.h"

void img_record_free(struct img_record *r)
{
	char **lists[] = { r->names, r->layers, r->env };

	for (size_t i = 0; i < 3; i++) {
		if (!lists[i])
			continue;
		for (size_t j = 0; lists[i][j]; j++)
			free(lists[i][j]);
		free(lists[i]);
	}
	free(r->os);
	free(r->architecture);
	free(r->workdir);
	free(r->user);
	cJSON_Delete(r->config);
	memset(r, 0, sizeof(*r));
}

static char **string_list(const cJSON *arr, size_t *n)
{
	const cJSON *e;
	char **v;
	size_t i = 0;

	if (!cJSON_IsArray(arr))
		return NULL;
	*n = (size_t)cJSON_GetArraySize(arr);
	if (!(v = calloc(*n + 1, sizeof(char *))))
		return NULL;
	cJSON_ArrayForEach(e, arr) {
		if (!cJSON_IsString(e) || !(v[i++] = strdup(e->valuestring))) {
			for (size_t j = 0; j < i; j++)
				free(v[j]);
			free(v);
			return NULL;
		}
	}
	return v;
}

static char *str_or_empty(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return strdup(cJSON_IsString(v) ? v->valuestring : "");
}

int img_record_parse(const char *text, size_t len, struct img_record *r, char *err, size_t errlen)
{
	const cJSON *v;
	cJSON *root;
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	root = sjson_parse(text, len, 0, err, errlen);
	if (!root)
		return -1;
	v = cJSON_GetObjectItemCaseSensitive(root, "digest");
	if (!cJSON_IsString(v) || !img_digest_ok(v->valuestring))
		goto bad;
	strcpy(r->digest, v->valuestring);
	v = cJSON_GetObjectItemCaseSensitive(root, "config_digest");
	if (!cJSON_IsString(v) || !img_digest_ok(v->valuestring))
		goto bad;
	strcpy(r->config_digest, v->valuestring);
	r->os = str_or_empty(root, "os");
	r->architecture = str_or_empty(root, "architecture");
	r->names = string_list(cJSON_GetObjectItemCaseSensitive(root, "names"), &r->n_names);
	r->layers = string_list(cJSON_GetObjectItemCaseSensitive(root, "layers"), &r->n_layers);
	if (!r->os || !r->architecture || !r->names || !r->layers)
		goto bad;
	for (size_t i = 0; i < r->n_layers; i++)
		if (!img_digest_ok(r->layers[i]))
			goto bad;
	v = cJSON_GetObjectItemCaseSensitive(root, "size");
	if (!cJSON_IsNumber(v) || v->valuedouble < 0)
		goto bad;
	r->size = (uint64_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(root, "created_us");
	if (!cJSON_IsNumber(v))
		goto bad;
	r->created_us = (int64_t)v->valuedouble;
	v = cJSON_GetObjectItemCaseSensitive(root, "config");
	r->config = cJSON_IsObject(v) ? cJSON_Duplicate(v, 1) : cJSON_CreateObject();
	if (!r->config)
		goto bad;
	r->env = string_list(cJSON_GetObjectItemCaseSensitive(r->config, "Env"), &n);
	if (!r->env)
		r->env = calloc(1, sizeof(char *));
	r->workdir = str_or_empty(r->config, "WorkingDir");
	r->user = str_or_empty(r->config, "User");
	if (!r->env || !r->workdir || !r->user)
		goto bad;
	cJSON_Delete(root);
	return 0;
bad:
	cJSON_Delete(root);
	img_record_free(r);
	snprintf(err, errlen, "a member is missing or malformed");
	return -1;
}

int img_record_read(struct img_store *s, const char *hex, struct img_record *r)
{
	char path[128], err[256];
	char *text;
	size_t len;
	int rc;

	snprintf(path, sizeof(path), "images/%s.json", hex);
	rc = img_read_file(s->dirfd, path, IMG_JSON_MAX, &text, &len);
	if (rc == -ENOENT)
		return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no image sha256:%s", hex);
	if (rc < 0)
		return herr_os(HANGAR_EOS, -rc, "cannot read %s/%s", s->dir, path);
	rc = img_record_parse(text, len, r, err, sizeof(err));
	free(text);
	if (rc < 0)
		return herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS, "%s/%s is damaged: %s", s->dir, path, err);
	return 0;
}

static cJSON *str_array(char *const *v)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && v && v[i]; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i]))) {
			cJSON_Delete(a);
			return NULL;
		}
	return a;
}

int img_record_write(struct img_store *s, const struct img_record *r)
{
	cJSON *root = cJSON_CreateObject();
	char path[128], *text = NULL;
	int rc = -ENOMEM;

	if (root && cJSON_AddStringToObject(root, "digest", r->digest) &&
	    cJSON_AddStringToObject(root, "config_digest", r->config_digest) &&
	    cJSON_AddItemToObject(root, "names", str_array(r->names)) &&
	    cJSON_AddStringToObject(root, "os", r->os) &&
	    cJSON_AddStringToObject(root, "architecture", r->architecture) &&
	    cJSON_AddItemToObject(root, "layers", str_array(r->layers)) &&
	    sjson_add_int64(root, "size", (int64_t)r->size) && sjson_add_int64(root, "created_us", r->created_us) &&
	    cJSON_AddItemToObject(root, "config", r->config ? cJSON_Duplicate(r->config, 1) : cJSON_CreateObject()))
		text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (text) {
		snprintf(path, sizeof(path), "images/%s.json", r->digest + 7);
		rc = img_write_atomic(s->dirfd, path, text, strlen(text), 0600);
		free(text);
	}
	if (rc < 0)
		return herr_os(HANGAR_EOS, -rc, "cannot write the record of image %s", r->digest);
	return 0;
}

int img_dated_oldest_first(const void *a, const void *b)
{
	const struct img_dated *x = a, *y = b;

	if (x->created_us != y->created_us)
		return x->created_us < y->created_us ? -1 : 1;
	return strcmp(x->hex, y->hex);
}

int img_record_each(struct img_store *s, int (*fn)(const char *hex, void *payload), void *payload)
{
	int fd = openat(s->dirfd, "images", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	struct dirent *e;
	DIR *d;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return herr_os(HANGAR_EOS, errno, "cannot read %s/images", s->dir);
	}
	while (!rc && (e = readdir(d)) != NULL) {
		char hex[IMG_HEX_LEN + 1];
		size_t n = strlen(e->d_name);

		if (n != IMG_HEX_LEN + 5 || strcmp(e->d_name + IMG_HEX_LEN, ".json") != 0)
			continue;
		memcpy(hex, e->d_name, IMG_HEX_LEN);
		hex[IMG_HEX_LEN] = '\0';
		if (img_hex_ok(hex, IMG_HEX_LEN))
			rc = fn(hex, payload);
	}
	closedir(d);
	return rc;
}

struct find {
	struct img_store *s;
	const char *prefix;       /* hex prefix, or NULL */
	const char *name;         /* normalised name, or NULL */
	char hex[IMG_HEX_LEN + 1];
	int matches;
};

static int find_one(const char *hex, void *payload)
{
	struct find *f = payload;
	struct img_record r;
	char path[128], err[64], *text;
	size_t len;

	if (f->prefix) {
		if (!strncmp(hex, f->prefix, strlen(f->prefix))) {
			if (!f->matches++)
				strcpy(f->hex, hex);
		}
		return 0;
	}
	snprintf(path, sizeof(path), "images/%s.json", hex);
	if (img_read_file(f->s->dirfd, path, IMG_JSON_MAX, &text, &len) < 0)
		return 0;
	if (img_record_parse(text, len, &r, err, sizeof(err)) == 0) {
		for (size_t i = 0; r.names[i]; i++)
			if (!strcmp(r.names[i], f->name)) {
				if (!f->matches++)
					strcpy(f->hex, hex);
				break;
			}
		img_record_free(&r);
	}
	free(text);
	return 0;
}

int img_find(struct img_store *s, const char *ref, char *hex)
{
	struct find f = { s, NULL, NULL, "", 0 };
	char name[1100], err[160];
	size_t n = strlen(ref);
	struct stat st;
	int rc;

	if (!strncmp(ref, "sha256:", 7)) {
		if (!img_digest_ok(ref))
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: %s is not sha256:<64 hex digits>",
				    ref);
		snprintf(name, sizeof(name), "images/%s.json", ref + 7);
		if (fstatat(s->dirfd, name, &st, 0) < 0)
			return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no image %s", ref);
		strcpy(hex, ref + 7);
		return 0;
	}
	if (n >= 12 && n <= IMG_HEX_LEN && img_hex_ok(ref, n)) {
		f.prefix = ref;
	} else {
		if (img_ref_normalise(ref, name, sizeof(name), err, sizeof(err)) < 0)
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "invalid argument: image %s: %s", ref, err);
		f.name = name;
	}
	if ((rc = img_record_each(s, find_one, &f)) < 0)
		return rc;
	if (f.matches == 0)
		return herr(HANGAR_ENOTFOUND, HANGAR_ERRCAT_ARGUMENT, "no image %s", f.name ? f.name : ref);
	if (f.matches > 1)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: %s names %d images; give more digits", ref, f.matches);
	strcpy(hex, f.hex);
	return 0;
}

int img_in_use(struct img_store *s, const char *hex, int *keep_fd)
{
	char path[128];
	int fd;

	if (keep_fd)
		*keep_fd = -1;
	snprintf(path, sizeof(path), "use/%s.lock", hex);
	fd = openat(s->dirfd, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return errno == EWOULDBLOCK;
	}
	if (keep_fd)
		*keep_fd = fd;
	else
		close(fd);
	return 0;
}
