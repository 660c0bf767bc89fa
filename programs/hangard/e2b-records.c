/*
 * What the E2B-compatible API keeps beside the library's own sandbox
 * records: per sandbox the templateID its creator asked for, its metadata
 * and how it was paused, one small JSON file each in HANGAR_STATE_DIR/e2b
 * (the library's sandboxes carry no labels). Nothing secret is kept: the
 * per-sandbox tokens are derived from a key and the record's generation, so
 * connect can answer them again, a restore rotates them by counting one up,
 * and no token is ever written to disk. The create's envVars, which a
 * restore into a new sandbox needs again, are kept sealed.
 *
 * A record is keyed by the sandboxID E2B's SDK got at create, which stays
 * the SDK's for good; it names the hangar sandbox that serves it now, which
 * a restore replaces (e2b_resolve() is the one way from one to the other).
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
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "e2b.h"
#include "sjson.h"

/* The most a record file may hold: metadata is bounded well under it. */
#define RECORD_MAX (256 * 1024)

static char *records_dir;
static unsigned char token_key[crypto_generichash_KEYBYTES];
static unsigned char env_key[crypto_secretbox_KEYBYTES];
static pthread_mutex_t records_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast on every change of a record made here (under records_lock). */
static pthread_cond_t records_changed = PTHREAD_COND_INITIALIZER;

int e2b_init(hangar_ctx *ctx)
{
	hangar_buf v = HANGAR_BUF_INIT;
	static const char label[] = "hangard e2b tokens v1", env_label[] = "hangard e2b env v1";

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
		crypto_generichash(env_key, sizeof(env_key), (const unsigned char *)env_label, sizeof(env_label) - 1,
				   seed, sizeof(seed));
		sodium_memzero(seed, sizeof(seed));
	} else {
		randombytes_buf(token_key, sizeof(token_key));
		randombytes_buf(env_key, sizeof(env_key));
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

void e2b_record_wake(void)
{
	pthread_mutex_lock(&records_lock);
	pthread_cond_broadcast(&records_changed);
	pthread_mutex_unlock(&records_lock);
}

void e2b_record_wait(int ms)
{
	struct timespec at;

	clock_gettime(CLOCK_REALTIME, &at);
	at.tv_nsec += (long)ms * 1000000L;
	at.tv_sec += at.tv_nsec / 1000000000L;
	at.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&records_lock);
	pthread_cond_timedwait(&records_changed, &records_lock, &at);
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
	free(rec->sandbox_id);
	free(rec->session_id);
	free(rec->provider);
	free(rec->env_sealed);
	memset(rec, 0, sizeof(*rec));
	rec->network = -1;
}

const char *e2b_record_sandbox(const struct e2b_record *rec, const char *e2b_id)
{
	return rec->sandbox_id && rec->sandbox_id[0] ? rec->sandbox_id : e2b_id;
}

/* A string member of at most max bytes of text, or absent: 0; -1 otherwise.
 * *out a copy, or NULL when absent. */
static int opt_string(cJSON *doc, const char *key, size_t max, char **out)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) > max || !sjson_text_ok(v->valuestring, strlen(v->valuestring)))
		return -1;
	return (*out = strdup(v->valuestring)) ? 0 : -1;
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
	if (strcmp(p->valuestring, "session") == 0)
		rec->paused = E2B_PAUSED_SESSION;
	/* Written since sessions: absent from older records. */
	cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "network"), *c = cJSON_GetObjectItemCaseSensitive(doc, "createdUs");
	rec->network = cJSON_IsNumber(n) && (n->valueint == 0 || n->valueint == 1) ? n->valueint : -1;
	rec->created_us = cJSON_IsNumber(c) && c->valuedouble > 0 && c->valuedouble < 1e18 ? (int64_t)c->valuedouble : 0;
	if (opt_string(doc, "sandbox", E2B_SANDBOX_ID_MAX, &rec->sandbox_id) < 0 ||
	    opt_string(doc, "session", 128, &rec->session_id) < 0 || opt_string(doc, "provider", 128, &rec->provider) < 0 ||
	    opt_string(doc, "envSealed", RECORD_MAX / 2, &rec->env_sealed) < 0)
		goto bad;
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
	out->network = -1;
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
					       : rec->paused == E2B_PAUSED_SESSION    ? "session"
										      : "");
	if (rec->sandbox_id)
		cJSON_AddStringToObject(doc, "sandbox", rec->sandbox_id);
	if (rec->session_id)
		cJSON_AddStringToObject(doc, "session", rec->session_id);
	if (rec->provider)
		cJSON_AddStringToObject(doc, "provider", rec->provider);
	if (rec->env_sealed)
		cJSON_AddStringToObject(doc, "envSealed", rec->env_sealed);
	if (rec->network >= 0)
		sjson_add_int64(doc, "network", rec->network);
	if (rec->created_us > 0)
		sjson_add_int64(doc, "createdUs", rec->created_us);
	if (rec->auto_pause) {
		cJSON_AddStringToObject(doc, "autoPause", rec->auto_pause_memory ? "memory" : "filesystem");
		sjson_add_int64(doc, "pauseAtUs", rec->pause_at_us);
	}
	rc = write_doc(doc, tmp, path);
	pthread_cond_broadcast(&records_changed);
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
	pthread_cond_broadcast(&records_changed);
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
	char **sessions = NULL;
	size_t nsessions = 0;

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
		/* Its session goes with it: nothing else would ever delete it. */
		struct e2b_record rec;
		if (e2b_record_get(id, &rec) == 0 && rec.session_id) {
			char **grown = realloc(sessions, (nsessions + 1) * sizeof(*grown));
			if (grown) {
				sessions = grown;
				sessions[nsessions++] = rec.session_id;
				rec.session_id = NULL;
			}
		}
		e2b_record_dispose(&rec);
		unlinkat(dirfd(d), de->d_name, 0);
	}
	e2b_unlock();
	closedir(d);
	for (size_t i = 0; i < nsessions; i++) {
		int rc = e2b_session_delete(sessions[i]);
		if (rc < 0)
			fprintf(stderr, "hangard: cannot delete the session %s of a gone E2B sandbox: %s\n", sessions[i],
				hangar_error_last()->message);
		free(sessions[i]);
	}
	free(sessions);
}

/* ---- from an E2B id to its sandbox ---- */

int e2b_resolve_record(const char *e2b_id, const struct e2b_record *rec, hangar_sandbox **sb)
{
	int rc;

	*sb = NULL;
	if (rec->paused == E2B_PAUSED_SESSION && rec->session_id)
		return 1; /* suspended: a parked sandbox is the session's to take back, none is ours */
	rc = hangar_sandbox_attach(sb, hangard->ctx, NULL, e2b_record_sandbox(rec, e2b_id));
	/* Its id is the SDK's, whichever sandbox serves it now. */
	if (rc == HANGAR_ENOTFOUND && rec->sandbox_id)
		rc = HANGAR_EGONE;
	return rc;
}

/* How long e2b_resolve() waits for a suspend's record to catch up with its session, and how often it looks. */
#define SUSPEND_RECORD_WAIT_MS 10000
#define SUSPEND_RECORD_TICK_MS 20

int e2b_session_put_away(const char *session_id, char *provider, size_t size)
{
	hangar_session_info info = HANGAR_SESSION_INFO_INIT;
	hangar_session *s = NULL;
	int yes = 0;

	if (hangar_session_open(&s, hangard->ctx, session_id) == 0 && hangar_session_get_info(&info, s) == 0)
		yes = info.state == HANGAR_SESSION_SUSPENDED || info.state == HANGAR_SESSION_PARKED;
	if (yes && provider)
		snprintf(provider, size, "%s", info.provider ? info.provider : "");
	hangar_session_unref(s);
	return yes;
}

/*
 * A suspend (autoPause, or a pause without memory) records the sandbox
 * paused after the library's suspend returns. Between the two its sandbox
 * is gone and its session suspended while its record still says running:
 * a caller is then never told the sandbox is gone (and a connect would
 * resume a session the suspend has yet to record). While this process
 * suspends it, the caller waits the moment for the record; once the
 * session is put away (another replica's suspend, or one a killed hangard
 * left there), the caller writes the record as the suspend would have.
 * 0: the sandbox is what rc says; SUSPEND_WAIT; SUSPEND_SETTLED (read the
 * record again).
 */
enum { SUSPEND_WAIT = 1, SUSPEND_SETTLED };

static int suspend_unrecorded(const char *e2b_id, int rc, const struct e2b_record *rec)
{
	if ((rc != HANGAR_EGONE && rc != HANGAR_ENOTFOUND) || !rec->session_id || rec->paused != E2B_NOT_PAUSED)
		return 0;
	if (e2b_suspending(e2b_id))
		return SUSPEND_WAIT;
	return e2b_session_settle(e2b_id, rec->session_id) == 1 ? SUSPEND_SETTLED : 0;
}

int e2b_resolve(const char *e2b_id, struct e2b_record *rec, hangar_sandbox **sb)
{
	struct e2b_record own;
	int64_t deadline_ms = clock_mono_ms() + SUSPEND_RECORD_WAIT_MS;
	int rc;

	*sb = NULL;
	if (!rec)
		rec = &own;
	for (;;) {
		int unrecorded;

		e2b_lock();
		rc = e2b_record_get(e2b_id, rec);
		e2b_unlock();
		rc = rc < 0 ? HANGAR_EOS : e2b_resolve_record(e2b_id, rec, sb);
		unrecorded = suspend_unrecorded(e2b_id, rc, rec);
		if (!unrecorded || clock_mono_ms() >= deadline_ms)
			break;
		e2b_record_dispose(rec);
		if (unrecorded == SUSPEND_WAIT)
			e2b_record_wait(SUSPEND_RECORD_TICK_MS);
	}
	if (rec == &own)
		e2b_record_dispose(&own);
	return rc;
}

struct ids_walk {
	struct e2b_ids *t;
	size_t cap;
	int failed;
};

static int ids_add(const char *id, void *payload)
{
	struct ids_walk *w = payload;
	struct e2b_id_entry *e;

	if (w->t->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 32;
		struct e2b_id_entry *nv = realloc(w->t->v, cap * sizeof(*nv));
		if (!nv) {
			w->failed = 1;
			return 1;
		}
		w->t->v = nv;
		w->cap = cap;
	}
	e = &w->t->v[w->t->n];
	if (e2b_record_get(id, &e->rec) < 0)
		return 0;    /* being rewritten, or broken: as a sandbox without one */
	if (!(e->e2b_id = strdup(id))) {
		e2b_record_dispose(&e->rec);
		w->failed = 1;
		return 1;
	}
	w->t->n++;
	return 0;
}

int e2b_ids_load(struct e2b_ids *t)
{
	struct ids_walk w = { t, 0, 0 };

	memset(t, 0, sizeof(*t));
	e2b_lock();
	e2b_records_walk(ids_add, &w);
	e2b_unlock();
	if (w.failed) {
		e2b_ids_free(t);
		return -1;
	}
	return 0;
}

struct e2b_id_entry *e2b_ids_find(struct e2b_ids *t, const char *sandbox_id)
{
	/* A record that names another sandbox now does not own its own id's. */
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(e2b_record_sandbox(&t->v[i].rec, t->v[i].e2b_id), sandbox_id) == 0)
			return &t->v[i];
	return NULL;
}

void e2b_ids_free(struct e2b_ids *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].e2b_id);
		e2b_record_dispose(&t->v[i].rec);
	}
	free(t->v);
	memset(t, 0, sizeof(*t));
}

/* ---- sealed envVars ---- */

char *e2b_env_seal(const cJSON *vars)
{
	char *text = cJSON_PrintUnformatted(vars), *out = NULL;
	size_t n = text ? strlen(text) : 0, blen;
	unsigned char *box;

	if (!text)
		return NULL;
	blen = crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + n;
	if ((box = malloc(blen)) != NULL) {
		randombytes_buf(box, crypto_secretbox_NONCEBYTES);
		crypto_secretbox_easy(box + crypto_secretbox_NONCEBYTES, (const unsigned char *)text, n, box, env_key);
		size_t olen = sodium_base64_ENCODED_LEN(blen, sodium_base64_VARIANT_ORIGINAL);
		if ((out = malloc(olen)) != NULL)
			sodium_bin2base64(out, olen, box, blen, sodium_base64_VARIANT_ORIGINAL);
		free(box);
	}
	sodium_memzero(text, n);
	free(text);
	return out;
}

int e2b_env_open(const char *sealed, char ***env)
{
	size_t slen = strlen(sealed), blen = 0, plen = 0, k = 0;
	unsigned char *box = malloc(slen + 1), *plain = NULL;
	cJSON *vars = NULL, *it;
	char why[160], **v = NULL;
	int rc = -1;

	*env = NULL;
	if (!box || sodium_base642bin(box, slen + 1, sealed, slen, NULL, &blen, NULL, sodium_base64_VARIANT_ORIGINAL) < 0 ||
	    blen < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
		goto out;
	plen = blen - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES;
	if (!(plain = malloc(plen + 1)) ||
	    crypto_secretbox_open_easy(plain, box + crypto_secretbox_NONCEBYTES, blen - crypto_secretbox_NONCEBYTES, box,
				       env_key) < 0)
		goto out;
	if (!(vars = sjson_parse((const char *)plain, plen, 2, why, sizeof(why))) || !cJSON_IsObject(vars) ||
	    !(v = calloc((size_t)cJSON_GetArraySize(vars) + 1, sizeof(*v))))
		goto out;
	cJSON_ArrayForEach(it, vars) {
		if (!cJSON_IsString(it) || asprintf(&v[k], "%s=%s", it->string, it->valuestring) < 0) {
			v[k] = NULL;
			goto out;
		}
		k++;
	}
	*env = v;
	v = NULL;
	rc = 0;
out:
	env_free(v);
	if (plain) {
		sodium_memzero(plain, plen);
		free(plain);
	}
	free(box);
	cJSON_Delete(vars);
	return rc;
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
