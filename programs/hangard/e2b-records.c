/*
 * What the E2B-compatible API keeps beside the library's own sandbox
 * records: per sandbox the templateID its creator asked for, its metadata
 * and how it was paused, one small JSON file each in HANGAR_STATE_DIR/e2b
 * (the library's sandboxes carry no labels). Nothing secret is kept: the
 * per-sandbox tokens are derived from a key and the record's generation, so
 * connect can answer them again, a restore rotates them by counting one up,
 * and no token is ever written to disk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "e2b.h"
#include "sjson.h"

/* The most a record file may hold: metadata is bounded well under it. */
#define RECORD_MAX (256 * 1024)

static char *records_dir;
static unsigned char token_key[crypto_generichash_KEYBYTES];
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;

int e2b_init(hangar_ctx *ctx)
{
	hangar_buf v = HANGAR_BUF_INIT;
	static const char label[] = "hangard e2b tokens v1";

	if (hangar_ctx_get(&v, ctx, "HANGAR_STATE_DIR") < 0 || !v.ptr[0]) {
		fprintf(stderr, "hangard: the E2B API needs HANGAR_STATE_DIR\n");
		hangar_buf_dispose(&v);
		return -1;
	}
	if (asprintf(&records_dir, "%s/e2b", v.ptr) < 0) {
		records_dir = NULL;
		hangar_buf_dispose(&v);
		return -1;
	}
	hangar_buf_dispose(&v);
	if (mkdir(records_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "hangard: cannot make %s: %s\n", records_dir, strerror(errno));
		return -1;
	}
	/*
	 * The tokens' key: from HANGAR_SECRET_KEY, so that every replica and
	 * every restart derives the same tokens; without it a key of this
	 * process, and tokens handed out before a restart stop matching.
	 */
	if (hangar_ctx_get(&v, ctx, "HANGAR_SECRET_KEY") == 0 && v.ptr[0]) {
		unsigned char seed[crypto_generichash_BYTES];
		crypto_generichash(seed, sizeof(seed), (const unsigned char *)v.ptr, strlen(v.ptr), NULL, 0);
		crypto_generichash(token_key, sizeof(token_key), (const unsigned char *)label, sizeof(label) - 1, seed,
				   sizeof(seed));
		sodium_memzero(seed, sizeof(seed));
	} else {
		randombytes_buf(token_key, sizeof(token_key));
	}
	if (v.ptr)
		sodium_memzero(v.ptr, strlen(v.ptr));
	hangar_buf_dispose(&v);
	return 0;
}

int e2b_id_ok(const char *id)
{
	size_t n = 0;
	for (; id[n]; n++)
		if (!((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z') ||
		      (id[n] >= '0' && id[n] <= '9') || id[n] == '-' || id[n] == '_') ||
		    n >= 64)
			return 0;
	return n > 0;
}

static void derive(char out[E2B_TOKEN_LEN + 1], const char *kind, const char *id, int64_t generation)
{
	unsigned char h[E2B_TOKEN_LEN / 2];
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s\n%s\n%" PRId64, kind, id, generation);

	crypto_generichash(h, sizeof(h), (const unsigned char *)msg, (size_t)n, token_key, sizeof(token_key));
	sodium_bin2hex(out, E2B_TOKEN_LEN + 1, h, sizeof(h));
	sodium_memzero(h, sizeof(h));
}

void e2b_tokens(const char *id, int64_t generation, char envd[E2B_TOKEN_LEN + 1], char traffic[E2B_TOKEN_LEN + 1])
{
	derive(envd, "envd", id, generation);
	derive(traffic, "traffic", id, generation);
}

void e2b_lock(void)
{
	pthread_mutex_lock(&records_lock);
}

void e2b_unlock(void)
{
	pthread_mutex_unlock(&records_lock);
}

static char *record_path(const char *id, const char *suffix)
{
	char *p;
	if (!e2b_id_ok(id) || asprintf(&p, "%s/%s.json%s", records_dir, id, suffix) < 0)
		return NULL;
	return p;
}

void e2b_record_dispose(struct e2b_record *rec)
{
	free(rec->template_id);
	cJSON_Delete(rec->metadata);
	memset(rec, 0, sizeof(*rec));
}

/* A record as read back: strict JSON of the shape e2b_record_put writes. */
static int record_decode(struct e2b_record *rec, const char *text, size_t len)
{
	char why[160];
	cJSON *doc = sjson_parse(text, len, 4, why, sizeof(why)), *t, *m, *g, *p, *it;

	if (!doc)
		return -1;
	t = cJSON_GetObjectItemCaseSensitive(doc, "templateID");
	m = cJSON_GetObjectItemCaseSensitive(doc, "metadata");
	g = cJSON_GetObjectItemCaseSensitive(doc, "generation");
	p = cJSON_GetObjectItemCaseSensitive(doc, "paused");
	if (!cJSON_IsString(t) || !cJSON_IsObject(m) || !cJSON_IsNumber(g) || !cJSON_IsString(p) || g->valuedouble < 0 ||
	    g->valuedouble > 1e15)
		goto bad;
	cJSON_ArrayForEach(it, m) if (!cJSON_IsString(it)) goto bad;
	rec->template_id = strdup(t->valuestring);
	rec->metadata = cJSON_DetachItemViaPointer(doc, m);
	rec->generation = (int64_t)g->valuedouble;
	rec->paused = strcmp(p->valuestring, "memory") == 0       ? E2B_PAUSED_MEMORY
		      : strcmp(p->valuestring, "filesystem") == 0 ? E2B_PAUSED_FILESYSTEM
								   : E2B_NOT_PAUSED;
	/* Written since autoPause: absent from older records. */
	cJSON *ap = cJSON_GetObjectItemCaseSensitive(doc, "autoPause"), *am;
	if (cJSON_IsString(ap)) {
		am = cJSON_GetObjectItemCaseSensitive(doc, "pauseAtUs");
		rec->auto_pause = 1;
		rec->auto_pause_memory = strcmp(ap->valuestring, "memory") == 0;
		rec->pause_at_us =
			cJSON_IsNumber(am) && am->valuedouble > 0 && am->valuedouble < 1e18 ? (int64_t)am->valuedouble : 0;
	}
	cJSON_Delete(doc);
	return rec->template_id ? 0 : -1;
bad:
	cJSON_Delete(doc);
	return -1;
}

int e2b_record_get(const char *id, struct e2b_record *out)
{
	char *path = record_path(id, ""), *buf = NULL;
	int fd, rc = -1;
	struct stat st;

	memset(out, 0, sizeof(*out));
	if (!path)
		return -1;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? 1 : -1;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= RECORD_MAX &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL &&
	    read(fd, buf, (size_t)st.st_size) == (ssize_t)st.st_size) {
		buf[st.st_size] = '\0';
		rc = record_decode(out, buf, (size_t)st.st_size);
	}
	free(buf);
	close(fd);
	if (rc < 0)
		e2b_record_dispose(out);
	return rc;
}

/* doc written whole to tmp, synced, then renamed to path: 0, or -1 with tmp gone. */
static int write_doc(const cJSON *doc, const char *tmp, const char *path)
{
	char *text = cJSON_PrintUnformatted(doc);
	size_t n = text ? strlen(text) : 0;
	int fd = -1, rc = -1;

	if (!text)
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0) {
		rc = close(fd);
		fd = -1;
		if (rc == 0)
			rc = rename(tmp, path);
	}
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		unlink(tmp);
	free(text);
	return rc < 0 ? -1 : 0;
}

int e2b_record_put(const char *id, const struct e2b_record *rec)
{
	char *path = record_path(id, ""), *tmp = record_path(id, ".new");
	cJSON *doc = cJSON_CreateObject();
	int rc = -1;

	if (!path || !tmp || !doc)
		goto out;
	cJSON_AddStringToObject(doc, "templateID", rec->template_id ? rec->template_id : "");
	cJSON_AddItemToObject(doc, "metadata", rec->metadata ? cJSON_Duplicate(rec->metadata, 1) : cJSON_CreateObject());
	sjson_add_int64(doc, "generation", rec->generation);
	cJSON_AddStringToObject(doc, "paused", rec->paused == E2B_PAUSED_MEMORY       ? "memory"
					       : rec->paused == E2B_PAUSED_FILESYSTEM ? "filesystem"
										      : "");
	if (rec->auto_pause) {
		cJSON_AddStringToObject(doc, "autoPause", rec->auto_pause_memory ? "memory" : "filesystem");
		sjson_add_int64(doc, "pauseAtUs", rec->pause_at_us);
	}
	rc = write_doc(doc, tmp, path);
out:
	cJSON_Delete(doc);
	free(path);
	free(tmp);
	return rc;
}

void e2b_record_delete(const char *id)
{
	char *path = record_path(id, "");
	if (path)
		unlink(path);
	free(path);
}

int e2b_records_walk(int (*fn)(const char *id, void *payload), void *payload)
{
	DIR *d = opendir(records_dir);
	struct dirent *de;
	int rc = 0;

	if (!d)
		return 0;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char id[80];
		size_t n = strlen(de->d_name);
		if (n < 6 || n - 5 >= sizeof(id) || strcmp(de->d_name + n - 5, ".json") != 0)
			continue;
		memcpy(id, de->d_name, n - 5);
		id[n - 5] = '\0';
		if (e2b_id_ok(id))
			rc = fn(id, payload);
	}
	closedir(d);
	return rc;
}

void e2b_records_sweep(int64_t before_s, int (*alive)(const char *id, void *payload), void *payload)
{
	DIR *d = opendir(records_dir);
	struct dirent *de;

	if (!d)
		return;
	e2b_lock();
	while ((de = readdir(d)) != NULL) {
		char id[80];
		size_t n = strlen(de->d_name);
		struct stat st;
		if (n < 6 || n - 5 >= sizeof(id) || strcmp(de->d_name + n - 5, ".json") != 0)
			continue;
		memcpy(id, de->d_name, n - 5);
		id[n - 5] = '\0';
		if (!e2b_id_ok(id) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    st.st_mtime >= before_s || alive(id, payload))
			continue;
		unlinkat(dirfd(d), de->d_name, 0);
	}
	e2b_unlock();
	closedir(d);
}

/*
 * The snapshots taken through /e2b, one file each in e2b/snapshots (a
 * directory, so the sweep of sandbox records never sees them), named by a
 * hash of the snapshot's id: a platform's ids may hold '/' and ':'. The
 * library keeps no list of them, and E2B's GET /snapshots answers the
 * caller's own: who took each is recorded beside it.
 */
static char *snapshot_path(const char *snapshot_id, const char *suffix)
{
	unsigned char h[16];
	char hex[33], *p;

	crypto_generichash(h, sizeof(h), (const unsigned char *)snapshot_id, strlen(snapshot_id), NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	if (asprintf(&p, "%s/snapshots/%s.json%s", records_dir, hex, suffix) < 0)
		return NULL;
	return p;
}

int e2b_snapshot_note(const char *caller, const char *sandbox_id, const char *snapshot_id, const char *name,
		      int64_t created_us)
{
	char *dir = NULL, *path = snapshot_path(snapshot_id, ""), *tmp = snapshot_path(snapshot_id, ".new");
	cJSON *doc = cJSON_CreateObject(), *names;
	int rc = -1;

	if (!path || !tmp || !doc || asprintf(&dir, "%s/snapshots", records_dir) < 0) {
		dir = NULL;
		goto out;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		goto out;
	cJSON_AddStringToObject(doc, "snapshotID", snapshot_id);
	names = cJSON_AddArrayToObject(doc, "names");
	if (name && name[0])
		cJSON_AddItemToArray(names, cJSON_CreateString(name));
	cJSON_AddStringToObject(doc, "sandboxID", sandbox_id);
	cJSON_AddStringToObject(doc, "caller", caller);
	sjson_add_int64(doc, "createdUs", created_us);
	rc = write_doc(doc, tmp, path);
out:
	cJSON_Delete(doc);
	free(dir);
	free(path);
	free(tmp);
	return rc;
}

/* A snapshot file as e2b_snapshot_note() writes it, or NULL. */
static cJSON *snapshot_decode(int dirfd_, const char *file)
{
	char buf[RECORD_MAX / 16], why[160];
	int fd = openat(dirfd_, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	cJSON *doc = NULL, *it;
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n <= 0 || (size_t)n == sizeof(buf))
		return NULL;
	doc = sjson_parse(buf, (size_t)n, 4, why, sizeof(why));
	if (!doc || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "snapshotID")) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "sandboxID")) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "caller")) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "createdUs")) ||
	    !cJSON_IsArray(it = cJSON_GetObjectItemCaseSensitive(doc, "names")))
		goto bad;
	cJSON *name;
	cJSON_ArrayForEach(name, it) if (!cJSON_IsString(name)) goto bad;
	return doc;
bad:
	cJSON_Delete(doc);
	return NULL;
}

int e2b_snapshot_walk(int (*fn)(cJSON *snap, void *payload), void *payload)
{
	char *dir;
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (asprintf(&dir, "%s/snapshots", records_dir) < 0)
		return -1;
	d = opendir(dir);
	free(dir);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	while (rc == 0 && (de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);
		cJSON *doc;
		if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0 || !(doc = snapshot_decode(dirfd(d), de->d_name)))
			continue;
		rc = fn(doc, payload);
		cJSON_Delete(doc);
	}
	closedir(d);
	return rc;
}
