/*
 * Capturing a checkpoint: the workspace comes out of the sandbox as a tar
 * stream (hangar-envd's archive endpoint: tar.zst; the fallback: GNU tar in
 * the sandbox, its plain tar downloaded through /files and compressed here),
 * is counted by the tar checker and hashed as it passes, and is sealed
 * straight into the store. Nothing is kept whole in memory, and nothing is
 * stored unless every step succeeded: the blob writer is aborted otherwise.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/versioned.h"
#include "sandbox/sandbox.h"
#include "blobstore.h"
#include "ckpt.h"
#include "seal.h"

#define ZSTD_LEVEL 1

struct capture {
	hangar_ctx *ctx;
	struct ckpt_run run;
	uint64_t max_bytes;
	struct blob_writer *bw;
	struct seal_writer *sw;
	uint64_t stored;                /* sealed bytes */
	crypto_generichash_state hash;  /* of the tar.zst */
	uint64_t archive_bytes;
	struct tarcheck *tc;
	struct ckpt_zdec *zd;           /* native: decompressed only to be counted */
	struct ckpt_zenc *ze;           /* fallback: compressed here */
};

/* Sealed bytes: into the store, under HANGAR_CHECKPOINT_MAX_BYTES. */
static int sealed_out(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;
	int rc;

	c->stored += len;
	if (c->stored > c->max_bytes)
		return herr(HANGAR_ETOOLARGE, HANGAR_ERRCAT_SANDBOX,
			    "the checkpoint is larger than HANGAR_CHECKPOINT_MAX_BYTES (%llu bytes); nothing was stored",
			    (unsigned long long)c->max_bytes);
	if ((rc = blob_write(c->bw, data, len)) != 0)
		return rc;
	return ckpt_run_step(&c->run, len);
}

/* The tar.zst as it will be restored: hashed, counted, sealed. */
static int archive_out(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;

	crypto_generichash_update(&c->hash, data, len);
	c->archive_bytes += len;
	return seal_writer_write(c->sw, data, len);
}

static int to_tarcheck(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;

	return tarcheck_feed(c->tc, data, len);
}

static int to_zenc(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;

	return ckpt_zenc_write(c->ze, data, len);
}

/* Native: envd's tar.zst is stored as it is, and decompressed only to be checked and counted. */
static int native_in(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;
	int rc = archive_out(c, data, len);

	return rc ? rc : ckpt_zdec_feed(c->zd, data, len);
}

static int call_cancelled(void *arg)
{
	const struct ckpt_run *run = arg;

	return (run->cancel && run->cancel(run->cancel_payload)) || clock_mono_ms() > run->deadline_ms;
}

static int capture_native(struct capture *c, hangar_sandbox *sb, const char *ws, int select, const char *user,
			  char selection[8])
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *cl = envd_client_of(sb->ctx);
	struct sbview *v;
	int rc;

	if (!cl)
		return hangar_error_last()->code;
	if ((rc = ckpt_zdec_new(&c->zd, to_tarcheck, c)) != 0)
		return rc;
	v = sandbox_begin(sb, &call, user);
	if (!v)
		return hangar_error_last()->code;
	/* A big workspace takes as long as it takes: silence is bounded by the
	 * request timeout, the whole capture by its own deadline. */
	call.stall_ms = call.deadline_ms;
	call.deadline_ms = ckpt_run_left_ms(&c->run);
	call.cancel = call_cancelled;
	call.cancel_arg = &c->run;
	rc = envd_archive_get(cl, &call, ws, select == HANGAR_CHECKPOINT_SELECT_ALL ? "all" : "auto", native_in, c,
			      selection, &st);
	sbview_put(v);
	if (rc == HANGAR_ECANCELED)
		rc = ckpt_run_step(&c->run, 0) ? hangar_error_last()->code : rc;
	if (rc == HANGAR_EFILE && st.http_status == 404)
		rc = herr_recode(HANGAR_ENOTFOUND);
	if (rc != 0)
		return sandbox_classify_failure(sb, rc, &st);
	if ((rc = ckpt_zdec_finish(c->zd)) != 0)
		return rc;
	return tarcheck_finish(c->tc);
}

/*
 * The fallback's command, run as the user with bash: the selection of
 * CKPT.md fed to GNU tar, which writes a plain tar to HANGAR_CKPT_OUT. Only
 * directories, files and symlinks are listed (no devices, fifos, sockets);
 * hard links are stored as files, setuid, setgid and sticky bits dropped.
 * tar's status 1 (a file changed while read) is not a failure.
 */
static const char capture_script[] =
	"ws=$HANGAR_CKPT_WS\n"
	"cd -- \"$ws\" 2>/dev/null || { echo \"no workspace directory $ws\" >&2; exit 3; }\n"
	"umask 077\n"
	"sel=all\n"
	"if [ \"$HANGAR_CKPT_SELECT\" = auto ] && [ -e .git ] && command -v git >/dev/null 2>&1; then sel=git; fi\n"
	"echo \"selection=$sel\"\n"
	"list() {\n"
	"	if [ \"$sel\" = git ]; then\n"
	"		find .git \\( -type f -o -type d -o -type l \\) -print0 || return 1\n"
	"		set -o pipefail\n"
	"		git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do\n"
	"			d=$f\n"
	"			while [ \"${d%/*}\" != \"$d\" ]; do d=${d%/*}; printf '%s\\0' \"$d\"; done\n"
	"			printf '%s\\0' \"$f\"\n"
	"		done\n"
	"	else\n"
	"		find . -mindepth 1 \\( -type f -o -type d -o -type l \\) -print0 | sed -z 's|^\\./||'\n"
	"	fi\n"
	"}\n"
	"list | sed -z '/^\\.hangar-restore-/d' | LC_ALL=C sort -zu |\n"
	"	tar --format=pax --no-recursion --null -T - --ignore-failed-read --no-xattrs --no-acls \\\n"
	"		--hard-dereference --mode=ug-s,a-t -cf \"$HANGAR_CKPT_OUT\"\n"
	"st=(\"${PIPESTATUS[@]}\")\n"
	"[ \"${st[0]}\" = 0 ] && [ \"${st[1]}\" = 0 ] && [ \"${st[2]}\" = 0 ] || { echo \"listing the workspace failed\" >&2; exit 4; }\n"
	"[ \"${st[3]}\" -le 1 ] || exit 5\n";

/* Runs a bash script as user with env; *res is the caller's to dispose. */
int ckpt_run_script(hangar_exec_result *res, hangar_sandbox *sb, const char *script, const char *const *env,
		    const char *user, struct ckpt_run *run)
{
	hangar_exec_opts eo;
	int64_t left = ckpt_run_left_ms(run) / 1000;
	int rc;

	hangar_exec_opts_init(&eo, HANGAR_EXEC_OPTS_VERSION);
	eo.env = env;
	eo.user = user;
	eo.timeout_sec = left > 0 ? left : 1;
	eo.cancel = run->cancel;
	eo.payload = run->cancel_payload;
	rc = hangar_sandbox_exec(res, sb, script, &eo);
	if (rc == 0 && res->timed_out)
		rc = herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_SANDBOX,
			  "the checkpoint %s did not finish within %lld s (HANGAR_CHECKPOINT_TIMEOUT_SECONDS)", run->what,
			  (long long)run->timeout_sec);
	return rc;
}

/* The last line of a command's stderr, for a message. */
void ckpt_stderr_tail(char *out, size_t cap, const hangar_exec_result *res)
{
	const char *e = res->err.ptr ? res->err.ptr : "";
	size_t n = res->err.size;

	size_t start;

	while (n && (e[n - 1] == '\n' || e[n - 1] == '\r'))
		n--;
	start = n;
	while (start && e[start - 1] != '\n')
		start--;
	snprintf(out, cap, "%.*s", (int)(n - start > 300 ? 300 : n - start), e + start);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
}

void ckpt_remove_temp(hangar_sandbox *sb, const char *path, const char *user, struct ckpt_run *run)
{
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_sys_saved_error saved;
	char env0[256];
	const char *env[] = { env0, NULL };
	struct ckpt_run quick = *run;

	hangar_sys_error_save(&saved);
	/* The clean-up gets its own short deadline: it runs after failures too. */
	quick.deadline_ms = clock_mono_ms() + 30000;
	quick.cancel = NULL;
	snprintf(env0, sizeof(env0), "HANGAR_CKPT_TMP=%s", path);
	if (ckpt_run_script(&res, sb, "rm -f -- \"$HANGAR_CKPT_TMP\"", env, user, &quick) != 0 || res.exit_code != 0)
		hangar_sys_log(sb->ctx, HANGAR_LOG_WARNING, "sandbox %s: cannot remove %s", sb->id, path);
	hangar_exec_result_dispose(&res);
	hangar_sys_error_restore(&saved);
}

static int fallback_in(void *payload, const void *data, size_t len)
{
	struct capture *c = payload;

	return tarcheck_feed(c->tc, data, len);
}

static int capture_fallback(struct capture *c, hangar_sandbox *sb, const char *ws, int select, const char *user,
			    char selection[8])
{
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *cl;
	struct sbview *v;
	char suffix[17], out[64], why[320];
	char *env[4] = { NULL, NULL, NULL, NULL };
	const char *sel;
	int rc;

	ckpt_random_suffix(suffix);
	snprintf(out, sizeof(out), "/tmp/.hangar-ckpt-%s.tar", suffix);
	if (asprintf(&env[0], "HANGAR_CKPT_WS=%s", ws) < 0 ||
	    asprintf(&env[1], "HANGAR_CKPT_SELECT=%s", select == HANGAR_CHECKPOINT_SELECT_ALL ? "all" : "auto") < 0 ||
	    asprintf(&env[2], "HANGAR_CKPT_OUT=%s", out) < 0) {
		rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		goto out;
	}
	if ((rc = ckpt_zenc_new(&c->ze, ZSTD_LEVEL, archive_out, c)) != 0)
		goto out;
	rc = ckpt_run_script(&res, sb, capture_script, (const char *const *)env, user, &c->run);
	if (rc != 0)
		goto cleanup;
	if (res.exit_code != 0) {
		ckpt_stderr_tail(why, sizeof(why), &res);
		rc = herr(res.exit_code == 3 ? HANGAR_ENOTFOUND : HANGAR_EFILE, HANGAR_ERRCAT_SANDBOX,
			  "capturing %s with tar in the sandbox failed (exit %d): %s", ws, res.exit_code, why);
		goto cleanup;
	}
	sel = res.out.ptr ? strstr(res.out.ptr, "selection=") : NULL;
	if (!sel || (strncmp(sel + 10, "git", 3) && strncmp(sel + 10, "all", 3))) {
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "capturing %s: the command did not say what it kept", ws);
		goto cleanup;
	}
	memcpy(selection, sel + 10, 3);
	selection[3] = '\0';
	if (!(cl = envd_client_of(sb->ctx)) || !(v = sandbox_begin(sb, &call, user))) {
		rc = hangar_error_last()->code;
		goto cleanup;
	}
	call.stall_ms = call.deadline_ms;
	call.deadline_ms = ckpt_run_left_ms(&c->run);
	call.cancel = call_cancelled;
	call.cancel_arg = &c->run;
	rc = envd_file_fetch(cl, &call, out, 0, fallback_in, c, &st);
	sbview_put(v);
	if (rc == HANGAR_ECANCELED)
		rc = ckpt_run_step(&c->run, 0) ? hangar_error_last()->code : rc;
	if (rc != 0)
		rc = sandbox_classify_failure(sb, rc, &st);
	if (rc == 0)
		rc = tarcheck_finish(c->tc);
	if (rc == 0)
		rc = ckpt_zenc_finish(c->ze);
cleanup:
	if (rc != HANGAR_EGONE)
		ckpt_remove_temp(sb, out, user, &c->run);
out:
	hangar_exec_result_dispose(&res);
	for (int i = 0; i < 3; i++)
		free(env[i]);
	return rc;
}

/* ---- options ------------------------------------------------------------------------ */

static int valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	return n > 0 && n <= max && s[0] != '.' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

int ckpt_valid_workspace(const char *ws)
{
	size_t n = strlen(ws);

	if (ws[0] != '/' || n >= 4096)
		return 0;
	for (const char *p = ws; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

int ckpt_labels_json(char **out, const char *const *labels)
{
	cJSON *o = cJSON_CreateObject();

	*out = NULL;
	if (!o)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	if (hcheck_texts(labels, "opts->labels")) {
		cJSON_Delete(o);
		return HANGAR_EINVAL;
	}
	for (const char *const *l = labels; l && *l; l++) {
		const char *eq = strchr(*l, '=');
		char key[65];
		size_t klen = eq ? (size_t)(eq - *l) : 0;
		int ok = eq && klen >= 1 && klen <= 64 && strlen(eq + 1) < 1024;

		if (ok) {
			memcpy(key, *l, klen);
			key[klen] = '\0';
			ok = valid_name(key, 64);
			for (const char *p = eq + 1; ok && *p; p++)
				if ((unsigned char)*p < 0x20 || *p == 0x7f)
					ok = 0;
		}
		if (!ok) {
			cJSON_Delete(o);
			return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
				    "invalid argument: a label must be \"key=value\" with a key of 1 to 64 of "
				    "[A-Za-z0-9._-] and a printable value under 1024 bytes");
		}
		cJSON_DeleteItemFromObjectCaseSensitive(o, key);
		if (!cJSON_AddStringToObject(o, key, eq + 1)) {
			cJSON_Delete(o);
			return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		}
	}
	*out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return *out ? 0 : herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
}

/* "ckpt-" and 26 lowercase base32 characters (130 random bits). */
static void new_id(char out[32])
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char raw[26];

	randombytes_buf(raw, sizeof(raw));
	memcpy(out, "ckpt-", 5);
	for (int i = 0; i < 26; i++)
		out[5 + i] = b32[raw[i] & 31];
	out[31] = '\0';
}

static int to_blob(void *payload, const void *data, size_t len)
{
	return blob_write(payload, data, len);
}

/* Seals the caller's blob as its own object, bound to "<id>/blob". */
static int store_blob(struct blobstore *bs, const struct seal_keyring *kr, const char *id, const char *session,
		      const void *blob, size_t len)
{
	char name[CKPT_NAME_MAX], seal_id[CKPT_NAME_MAX];
	struct blob_writer *bw;
	struct seal_writer *sw;
	int rc;

	ckpt_blob_name(name, id);
	ckpt_blob_seal_id(seal_id, id);
	if ((rc = blob_write_begin(&bw, bs, name)) != 0)
		return rc;
	rc = seal_writer_new(&sw, kr, seal_id, session, to_blob, bw);
	if (rc == 0)
		rc = seal_writer_write(sw, blob, len);
	if (rc == 0)
		rc = seal_writer_finish(sw);
	seal_writer_free(sw);
	if (rc != 0) {
		blob_write_abort(bw);
		return rc;
	}
	return blob_write_commit(bw);
}

int hangar_checkpoint_create(hangar_checkpoint **out, hangar_sandbox *sb, const hangar_checkpoint_opts *opts)
{
	hangar_checkpoint_opts o;
	struct capture c;
	struct seal_keyring kr;
	struct tarcheck_limits lim;
	struct blobstore *bs = NULL;
	struct store_ckpt row = { 0 }, parent;
	char id[32], name[CKPT_NAME_MAX], selection[8] = "", hash[80];
	unsigned char digest[32];
	const char *ws;
	char *labels = NULL;
	int rc, native, committed = 0;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(sb, "sb is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_checkpoint_opts, "opts")) != 0)
		return rc;
	ws = o.workspace ? o.workspace : hctx_str(sb->ctx, HS_WORKSPACE);
	HCHECK_TEXT(ws, "the workspace");
	HCHECK_TEXT(o.user, "opts->user");
	HCHECK_ARG(ckpt_valid_workspace(ws), "the workspace must be an absolute path of printable characters");
	HCHECK_ARG(o.select == HANGAR_CHECKPOINT_SELECT_AUTO || o.select == HANGAR_CHECKPOINT_SELECT_ALL,
		   "opts->select must be HANGAR_CHECKPOINT_SELECT_AUTO or _ALL");
	HCHECK_ARG(!o.session_id || valid_name(o.session_id, 128), "opts->session_id must be 1 to 128 of [A-Za-z0-9._-]");
	HCHECK_ARG(!o.parent_id || valid_name(o.parent_id, 128), "opts->parent_id is not a checkpoint id");
	HCHECK_ARG(o.blob || !o.blob_len, "opts->blob is NULL");
	HCHECK_ARG(o.timeout_sec >= 0 && o.timeout_sec <= 86400, "opts->timeout_sec must be from 0 to 86400");
	if (o.parent_id) {
		if ((rc = store_ckpt_get(sb->ctx, o.parent_id, &parent)) != 0) {
			if (rc == HANGAR_ENOTFOUND)
				herr_prefix("the parent");
			return rc;
		}
		store_ckpt_free(&parent);
	}
	if ((rc = ckpt_labels_json(&labels, o.labels)) != 0)
		return rc;

	memset(&c, 0, sizeof(c));
	c.ctx = sb->ctx;
	c.max_bytes = (uint64_t)hctx_int(sb->ctx, HS_CHECKPOINT_MAX_BYTES);
	ckpt_run_init(&c.run, sb->ctx, "capture", o.timeout_sec, o.cancel, o.cancel_payload, o.progress,
		      o.progress_payload, 0);
	crypto_generichash_init(&c.hash, NULL, 0, sizeof(digest));
	new_id(id);
	ckpt_tar_limits(sb->ctx, &lim);
	if ((rc = seal_keyring_load(&kr, sb->ctx)) != 0) {
		free(labels);
		return rc;
	}
	rc = blobstore_open(&bs, sb->ctx, NULL);
	ckpt_archive_name(name, id);
	if (rc == 0)
		rc = tarcheck_new(&c.tc, &lim, NULL, NULL);
	if (rc == 0)
		rc = blob_write_begin(&c.bw, bs, name);
	if (rc == 0)
		rc = seal_writer_new(&c.sw, &kr, id, o.session_id ? o.session_id : "", sealed_out, &c);
	native = 0;
	if (rc == 0 && !(o.flags & HANGAR_CHECKPOINT_NO_NATIVE)) {
		native = ckpt_native(sb, o.user);
		if (native < 0)
			rc = native;
	}
	if (rc == 0) {
		if (native) {
			rc = capture_native(&c, sb, ws, o.select, o.user, selection);
		} else {
			/* The fallback's tar goes through the checker, and what it hands on is compressed. */
			tarcheck_free(c.tc);
			c.tc = NULL;
			rc = tarcheck_new(&c.tc, &lim, to_zenc, &c);
			if (rc == 0)
				rc = capture_fallback(&c, sb, ws, o.select, o.user, selection);
		}
	}
	if (rc == 0)
		rc = seal_writer_finish(c.sw);
	if (rc == 0) {
		rc = blob_write_commit(c.bw);
		c.bw = NULL;
		committed = rc == 0;
	}
	if (rc == 0 && o.blob_len)
		rc = store_blob(bs, &kr, id, o.session_id ? o.session_id : "", o.blob, o.blob_len);
	if (rc == 0) {
		crypto_generichash_final(&c.hash, digest, sizeof(digest));
		ckpt_hash_text(hash, digest);
		row.id = id;
		row.session_id = (char *)(o.session_id ? o.session_id : "");
		row.parent_id = (char *)(o.parent_id ? o.parent_id : "");
		row.workspace = (char *)ws;
		row.selection = selection;
		row.store_url = (char *)blobstore_url(bs);
		row.content_hash = hash;
		row.labels_json = labels;
		row.created_us = clock_wall_us();
		row.stored_bytes = c.stored;
		row.archive_bytes = c.archive_bytes;
		row.files = tarcheck_stats(c.tc)->files + tarcheck_stats(c.tc)->symlinks;
		row.blob_bytes = o.blob_len;
		rc = store_ckpt_put(sb->ctx, &row);
	}
	if (rc != 0) {
		hangar_sys_saved_error saved;

		hangar_sys_error_save(&saved);
		blob_write_abort(c.bw);
		if (committed) {
			/* Stored but not indexed: removed, so nothing is left that looks like a checkpoint. */
			char bname[CKPT_NAME_MAX];

			blob_delete(bs, name);
			ckpt_blob_name(bname, id);
			blob_delete(bs, bname);
		}
		hangar_sys_error_restore(&saved);
	}
	seal_writer_free(c.sw);
	tarcheck_free(c.tc);
	ckpt_zdec_free(c.zd);
	ckpt_zenc_free(c.ze);
	seal_keyring_wipe(&kr);
	if (rc == 0) {
		struct store_ckpt copy;

		/* The handle owns copies of the row's strings. */
		rc = store_ckpt_get(sb->ctx, id, &copy);
		if (rc == 0)
			rc = ckpt_handle_new(out, sb->ctx, &copy);
		if (rc == 0) {
			hangar_sys_log(sb->ctx, HANGAR_LOG_INFO,
			     "checkpoint %s of sandbox %s: %s, %llu files, %llu bytes stored (%s path)", id, sb->id,
			     selection, (unsigned long long)row.files, (unsigned long long)row.stored_bytes,
			     native ? "native" : "tar");
			herr_clear();
		}
	}
	blobstore_free(bs);
	free(labels);
	return rc;
}
