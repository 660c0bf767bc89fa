/*
 * Restoring a checkpoint. Both ends of the pipeline push (the store hands
 * over what it reads, libcurl asks for what it sends), so they meet in a
 * bounded ring: a thread reads the object, opens the seal, decompresses and
 * checks every member (tarcheck), and puts the checked tar into the ring;
 * the calling thread sends it to the sandbox. The end-of-archive marker goes
 * in only after the seal's final tag, the content hash and the last member
 * checked out; on any failure the upload is aborted (never ended cleanly),
 * so hangar-envd commits nothing, and the fallback runs its extract-and-
 * commit command only after an upload that ended cleanly.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "blobstore.h"
#include "ckpt.h"
#include "seal.h"

#define RING (1u << 20)

struct restore {
	hangar_checkpoint *cp;
	struct ckpt_run run;
	struct blobstore *bs;
	struct seal_reader *sr;
	struct ckpt_zdec *zd;
	struct tarcheck *tc;
	crypto_generichash_state hash;
	uint64_t archive_bytes;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *buf;
	size_t head, len;
	int closed;                 /* the producer ended: 1 whole, -1 failed */
	int abandoned;              /* the consumer stopped taking bytes */
	hangar_sys_saved_error err;      /* the producer's failure */
};

/* ---- the producer: store -> seal -> zstd -> tarcheck -> ring ------------------------------ */

static int ring_put(void *payload, const void *data, size_t len)
{
	struct restore *r = payload;
	const unsigned char *p = data;

	pthread_mutex_lock(&r->mu);
	while (len) {
		size_t n, tail;

		while (r->len == RING && !r->abandoned)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->abandoned) {
			pthread_mutex_unlock(&r->mu);
			return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_SANDBOX, "the sandbox stopped taking the archive");
		}
		tail = (r->head + r->len) % RING;
		n = RING - r->len;
		if (n > RING - tail)
			n = RING - tail;
		if (n > len)
			n = len;
		memcpy(r->buf + tail, p, n);
		r->len += n;
		p += n;
		len -= n;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->mu);
	return 0;
}

static int opened(void *payload, const void *data, size_t len)
{
	struct restore *r = payload;

	crypto_generichash_update(&r->hash, data, len);
	r->archive_bytes += len;
	return ckpt_zdec_feed(r->zd, data, len);
}

static int unzstd(void *payload, const void *data, size_t len)
{
	struct restore *r = payload;

	return tarcheck_feed(r->tc, data, len);
}

static int sealed(void *payload, const void *data, size_t len)
{
	struct restore *r = payload;
	int rc = ckpt_run_step(&r->run, len);

	if (rc == 0) {
		pthread_mutex_lock(&r->mu);
		if (r->abandoned)
			rc = herr(HANGAR_ECANCELED, HANGAR_ERRCAT_SANDBOX, "the sandbox stopped taking the archive");
		pthread_mutex_unlock(&r->mu);
	}
	return rc ? rc : seal_reader_feed(r->sr, data, len);
}

static void *produce(void *arg)
{
	struct restore *r = arg;
	hangar_checkpoint *cp = r->cp;
	char name[CKPT_NAME_MAX], hash[80];
	unsigned char digest[32];
	int rc;

	ckpt_archive_name(name, cp->row.id);
	rc = blob_read(r->bs, name, sealed, r);
	if (rc == HANGAR_ENOTFOUND)
		herr_prefix("checkpoint %s", cp->row.id);
	if (rc == 0)
		rc = seal_reader_finish(r->sr);
	if (rc == 0)
		rc = ckpt_zdec_finish(r->zd);
	if (rc == 0) {
		crypto_generichash_final(&r->hash, digest, sizeof(digest));
		ckpt_hash_text(hash, digest);
		if (strcmp(hash, cp->row.content_hash) != 0 || r->archive_bytes != cp->row.archive_bytes)
			rc = herr(HANGAR_EREFUSED, HANGAR_ERRCAT_OS,
				  "checkpoint %s refused: its archive does not match the index", cp->row.id);
	}
	/* Only now, with everything checked, does the marker go out. */
	if (rc == 0)
		rc = tarcheck_finish(r->tc);
	pthread_mutex_lock(&r->mu);
	if (rc == 0) {
		r->closed = 1;
	} else {
		r->closed = -1;
		hangar_sys_error_save(&r->err);
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* ---- the consumer: the upload's body ------------------------------------------------------ */

static ssize_t ring_take(void *payload, char *buf, size_t want)
{
	struct restore *r = payload;
	ssize_t n = 0;

	pthread_mutex_lock(&r->mu);
	while (!r->len && !r->closed) {
		struct timespec ts;

		/* The producer checks the deadline as it reads; this wait only guards against it hanging. */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
		if (!r->len && !r->closed && clock_mono_ms() > r->run.deadline_ms + 5000) {
			pthread_mutex_unlock(&r->mu);
			herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_SANDBOX,
			     "the checkpoint restore did not finish within %lld s (HANGAR_CHECKPOINT_TIMEOUT_SECONDS)",
			     (long long)r->run.timeout_sec);
			return -1;
		}
	}
	if (r->len) {
		size_t first = RING - r->head;

		n = (ssize_t)(want < r->len ? want : r->len);
		if ((size_t)n <= first) {
			memcpy(buf, r->buf + r->head, (size_t)n);
		} else {
			memcpy(buf, r->buf + r->head, first);
			memcpy(buf + first, r->buf, (size_t)n - first);
		}
		r->head = (r->head + (size_t)n) % RING;
		r->len -= (size_t)n;
		pthread_cond_broadcast(&r->cv);
	} else if (r->closed < 0) {
		hangar_sys_error_restore(&r->err);
		n = -1;
	}
	pthread_mutex_unlock(&r->mu);
	return n;
}

static void abandon(struct restore *r)
{
	pthread_mutex_lock(&r->mu);
	r->abandoned = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* The producer's failure, when it failed for its own reasons (not because we stopped taking). */
static int producer_failure(struct restore *r)
{
	if (r->closed < 0 && r->err.error.code != HANGAR_ECANCELED)
		return hangar_sys_error_restore(&r->err);
	if (r->closed < 0 && r->run.cancel && r->run.cancel(r->run.cancel_payload))
		return hangar_sys_error_restore(&r->err);
	return 0;
}

static int call_cancelled(void *arg)
{
	const struct ckpt_run *run = arg;

	return run->cancel && run->cancel(run->cancel_payload);
}

/* ---- the two paths ------------------------------------------------------------------------ */

/* mkdir -p of the workspace, as the user, with envd's MakeDir. */
static int make_workspace(hangar_sandbox *sb, const char *ws, const char *user)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *cl = envd_client_of(sb->ctx);
	struct sbview *v;
	cJSON *req, *resp = NULL;
	int rc;

	if (!cl)
		return hangar_error_last()->code;
	if (!(req = cJSON_CreateObject()) || !cJSON_AddStringToObject(req, "path", ws)) {
		cJSON_Delete(req);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	v = sandbox_begin(sb, &call, user);
	if (!v) {
		cJSON_Delete(req);
		return hangar_error_last()->code;
	}
	rc = envd_unary(cl, &call, "filesystem.Filesystem/MakeDir", req, &resp, &st);
	sbview_put(v);
	cJSON_Delete(req);
	cJSON_Delete(resp);
	if (rc == HANGAR_EEXISTS)
		return 0;
	if (rc != 0) {
		rc = sandbox_classify_failure(sb, rc, &st);
		herr_prefix("creating the workspace %s", ws);
	}
	return rc;
}

static int upload(struct restore *r, hangar_sandbox *sb, const char *ws, const char *mode, const char *tmp,
		  const char *user)
{
	struct envd_archive_counts counts;
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *cl = envd_client_of(sb->ctx);
	struct sbview *v;
	pthread_t th;
	int rc, prc;

	if (!cl)
		return hangar_error_last()->code;
	v = sandbox_begin(sb, &call, user);
	if (!v)
		return hangar_error_last()->code;
	call.stall_ms = call.deadline_ms;
	call.deadline_ms = ckpt_run_left_ms(&r->run);
	call.cancel = call_cancelled;
	call.cancel_arg = &r->run;
	if ((rc = pthread_create(&th, NULL, produce, r)) != 0) {
		sbview_put(v);
		return herr_os(HANGAR_EOS, rc, "cannot start a thread");
	}
	if (tmp)
		rc = envd_file_upload_from(cl, &call, tmp, ring_take, r, &st);
	else
		rc = envd_archive_put(cl, &call, ws, mode, ring_take, r, &counts, &st);
	sbview_put(v);
	abandon(r);
	pthread_join(th, NULL);
	if (rc != 0) {
		/* The root cause: a refused checkpoint rather than the aborted upload it caused. */
		if ((prc = producer_failure(r)) != 0)
			return prc;
		if (rc == HANGAR_EUNAVAILABLE || rc == HANGAR_EPROTOCOL || rc == HANGAR_ETIMEOUT)
			rc = sandbox_classify_failure(sb, rc, &st);
		return rc;
	}
	if (r->closed != 1)
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "the upload ended before the archive did");
	if (!tmp)
		hangar_sys_log(sb->ctx, HANGAR_LOG_DEBUG, "restored %llu files, %llu dirs, %llu symlinks into %s",
		     (unsigned long long)counts.files, (unsigned long long)counts.dirs,
		     (unsigned long long)counts.symlinks, ws);
	return 0;
}

/*
 * The fallback's extract-and-commit command, as the user (CKPT.md): into a
 * fresh staging directory in the workspace, then replace or merge. The
 * umask is cleared for tar so the archive's modes come back as they were
 * (they are permission bits only: the checker refused anything else).
 */
static const char restore_script[] =
	"ws=$HANGAR_CKPT_WS; t=$HANGAR_CKPT_TAR\n"
	"trap 'rm -f -- \"$t\"' EXIT\n"
	"mkdir -p -- \"$ws\" && cd -- \"$ws\" || { echo \"cannot use the workspace $ws\" >&2; exit 3; }\n"
	/* read-only directories (a checkpoint may hold them) must be made writable to be removed */
	"rmtree() { chmod -R u+w -- \"$@\" 2>/dev/null; rm -rf -- \"$@\"; }\n"
	"for old in .hangar-restore-*; do if [ -d \"$old\" ]; then rmtree \"$old\"; fi; done\n"
	"st=$(mktemp -d .hangar-restore-XXXXXX) || exit 4\n"
	"trap 'rmtree \"$ws/$st\"; rm -f -- \"$t\"' EXIT\n"
	"(umask 000 && tar -x --no-same-owner --no-same-permissions --delay-directory-restore -C \"$st\" -f \"$t\") ||\n"
	"	{ echo \"extracting the checkpoint failed\" >&2; exit 5; }\n"
	"if [ \"$HANGAR_CKPT_MODE\" = replace ]; then\n"
	"	for e in * .[!.]* ..?*; do\n"
	"		if [ \"$e\" != \"$st\" ] && { [ -e \"$e\" ] || [ -L \"$e\" ]; }; then rmtree \"$e\" || exit 6; fi\n"
	"	done\n"
	/* moving a directory needs write permission on it (its \"..\" changes) */
	"	for e in \"$st\"/* \"$st\"/.[!.]* \"$st\"/..?*; do\n"
	"		[ -e \"$e\" ] || [ -L \"$e\" ] || continue\n"
	"		n=${e##*/}\n"
	"		if [ -d \"$e\" ] && [ ! -L \"$e\" ] && [ ! -w \"$e\" ]; then\n"
	"			m=$(stat -c %a -- \"$e\") && chmod u+w -- \"$e\" && mv -- \"$e\" \"./$n\" && chmod \"$m\" -- \"./$n\" || exit 6\n"
	"		else\n"
	"			mv -- \"$e\" \"./$n\" || exit 6\n"
	"		fi\n"
	"	done\n"
	"else\n"
	"	cp -a --remove-destination -- \"$st\"/. . || exit 6\n"
	"fi\n";

static int restore_fallback(struct restore *r, hangar_sandbox *sb, const char *ws, const char *mode,
			    const char *user)
{
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	char suffix[17], tmp[64], why[320];
	char *env[4] = { NULL, NULL, NULL, NULL };
	int rc;

	ckpt_random_suffix(suffix);
	snprintf(tmp, sizeof(tmp), "/tmp/.hangar-restore-%s.tar", suffix);
	rc = upload(r, sb, ws, mode, tmp, user);
	if (rc != 0) {
		if (rc != HANGAR_EGONE)
			ckpt_remove_temp(sb, tmp, user, &r->run);
		return rc;
	}
	if (asprintf(&env[0], "HANGAR_CKPT_WS=%s", ws) < 0 || asprintf(&env[1], "HANGAR_CKPT_TAR=%s", tmp) < 0 ||
	    asprintf(&env[2], "HANGAR_CKPT_MODE=%s", mode) < 0) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	} else {
		rc = ckpt_run_script(&res, sb, restore_script, (const char *const *)env, user, &r->run);
		if (rc == 0 && res.exit_code != 0) {
			ckpt_stderr_tail(why, sizeof(why), &res);
			rc = herr(HANGAR_EFILE, HANGAR_ERRCAT_SANDBOX, "restoring into %s with tar failed (exit %d): %s", ws,
				  res.exit_code, why);
		}
	}
	if (rc != 0 && rc != HANGAR_EGONE)
		ckpt_remove_temp(sb, tmp, user, &r->run);
	hangar_exec_result_dispose(&res);
	for (int i = 0; i < 3; i++)
		free(env[i]);
	return rc;
}

int hangar_checkpoint_restore(hangar_sandbox *sb, hangar_checkpoint *cp, const hangar_restore_opts *opts)
{
	hangar_restore_opts o;
	struct restore r;
	struct seal_keyring kr;
	struct tarcheck_limits lim;
	const char *ws, *mode;
	int rc, native = 0;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(cp, "cp is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_restore_opts, "opts")) != 0)
		return rc;
	ws = o.workspace ? o.workspace : cp->row.workspace;
	HCHECK_TEXT(ws, "the workspace");
	HCHECK_TEXT(o.user, "opts->user");
	HCHECK_ARG(ckpt_valid_workspace(ws), "the workspace must be an absolute path of printable characters");
	HCHECK_ARG(!(o.flags & ~(HANGAR_RESTORE_MERGE | HANGAR_RESTORE_NO_NATIVE)), "opts->flags has unknown bits");
	HCHECK_ARG(o.timeout_sec >= 0 && o.timeout_sec <= 86400, "opts->timeout_sec must be from 0 to 86400");
	mode = o.flags & HANGAR_RESTORE_MERGE ? "merge" : "replace";

	memset(&r, 0, sizeof(r));
	r.cp = cp;
	/* The checkpoint's context has its keys and its store; the sandbox's only reaches the sandbox. */
	ckpt_run_init(&r.run, cp->ctx, "restore", o.timeout_sec, o.cancel, o.cancel_payload, o.progress,
		      o.progress_payload, cp->row.stored_bytes);
	crypto_generichash_init(&r.hash, NULL, 0, 32);
	ckpt_tar_limits(cp->ctx, &lim);
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	if (!(r.buf = malloc(RING)))
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (rc == 0 && (rc = seal_keyring_load(&kr, cp->ctx)) == 0) {
		rc = seal_reader_new(&r.sr, &kr, cp->row.id, cp->row.session_id, opened, &r);
		seal_keyring_wipe(&kr);
	}
	if (rc == 0)
		rc = ckpt_zdec_new(&r.zd, unzstd, &r);
	if (rc == 0)
		rc = tarcheck_new(&r.tc, &lim, ring_put, &r);
	if (rc == 0)
		rc = blobstore_open(&r.bs, cp->ctx, cp->row.store_url);
	if (rc == 0 && !(o.flags & HANGAR_RESTORE_NO_NATIVE)) {
		native = ckpt_native(sb, o.user);
		if (native < 0)
			rc = native;
	}
	if (rc == 0 && native) {
		rc = make_workspace(sb, ws, o.user);
		if (rc == 0)
			rc = upload(&r, sb, ws, mode, NULL, o.user);
	} else if (rc == 0) {
		rc = restore_fallback(&r, sb, ws, mode, o.user);
	}
	if (rc == 0) {
		const struct tarcheck_stats *s = tarcheck_stats(r.tc);

		hangar_sys_log(sb->ctx, HANGAR_LOG_INFO, "checkpoint %s restored into sandbox %s:%s: %llu files (%s path)",
		     cp->row.id, sb->id, ws, (unsigned long long)(s->files + s->symlinks), native ? "native" : "tar");
		herr_clear();
	} else if (rc == HANGAR_EREFUSED) {
		hangar_sys_log(sb->ctx, HANGAR_LOG_WARNING, "checkpoint %s refused: %s", cp->row.id, hangar_error_last()->message);
	}
	seal_reader_free(r.sr);
	ckpt_zdec_free(r.zd);
	tarcheck_free(r.tc);
	blobstore_free(r.bs);
	free(r.buf);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	return rc;
}
