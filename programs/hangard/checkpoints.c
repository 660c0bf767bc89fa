/*
 * Checkpoints: a session's list, one checkpoint's index entry, delete, and a
 * checkpoint of any sandbox, each one call of hangar/checkpoint.h.
 *
 * A delete is refused (409) while a session that can still resume names the
 * checkpoint as its latest: the library would delete it, and the session's
 * next cold resume would then have nothing to restore. Archived sessions
 * never resume, so their checkpoints can go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangard.h"

static cJSON *checkpoint_json(const hangar_checkpoint *cp)
{
	hangar_checkpoint_info i = HANGAR_CHECKPOINT_INFO_INIT;
	cJSON *o, *labels;

	if (hangar_checkpoint_get_info(&i, cp) < 0)
		return NULL;
	o = add_strings(cJSON_CreateObject(), "id", i.id, "session", i.session_id, "parent", i.parent_id,
			"workspace", i.workspace, "selection", i.selection, "store_url", i.store_url, "content_hash",
			i.content_hash, NULL);
	labels = cJSON_Parse(i.labels_json ? i.labels_json : "{}");
	cJSON_AddItemToObject(o, "labels", labels ? labels : cJSON_CreateObject());
	sjson_add_int64(o, "created_us", (int64_t)i.created_at_us);
	sjson_add_int64(o, "stored_bytes", (int64_t)i.stored_bytes);
	sjson_add_int64(o, "archive_bytes", (int64_t)i.archive_bytes);
	sjson_add_int64(o, "files", (int64_t)i.files);
	sjson_add_int64(o, "blob_bytes", (int64_t)i.blob_bytes);
	return o;
}

static int add_checkpoint(hangar_checkpoint *cp, void *payload)
{
	cJSON *o = checkpoint_json(cp);
	if (o)
		cJSON_AddItemToArray(payload, o);
	return 0;
}

/* The session must exist: an unknown one is 404, not an empty list. */
int fill_session_checkpoints(struct request *r, cJSON *arr)
{
	hangar_session *s = NULL;
	int rc = hangar_session_open(&s, hangard->ctx, request_param(r));
	if (rc < 0)
		return rc;
	rc = hangar_checkpoint_list(hangard->ctx, hangar_session_id(s), add_checkpoint, arr);
	hangar_session_unref(s);
	return rc;
}

static hangar_checkpoint *checkpoint_open(struct request *r)
{
	hangar_checkpoint *cp = NULL;
	int rc = hangar_checkpoint_lookup(&cp, hangard->ctx, request_param(r));
	if (rc < 0) {
		reply_hangar_error(r, rc);
		return NULL;
	}
	return cp;
}

void h_checkpoint_get(struct request *r)
{
	hangar_checkpoint *cp = checkpoint_open(r);
	cJSON *o;
	if (!cp)
		return;
	o = checkpoint_json(cp);
	if (o)
		reply_json(r, 200, o);
	else
		reply_hangar_error(r, hangar_error_last()->code);
	hangar_checkpoint_unref(cp);
}

struct holder {
	const char *checkpoint;
	char session[160];
};

static int find_holder(const hangar_session_info *info, void *payload)
{
	struct holder *h = payload;
	if (info->state == HANGAR_SESSION_ARCHIVED || !info->checkpoint_id || strcmp(info->checkpoint_id, h->checkpoint))
		return 0;
	snprintf(h->session, sizeof(h->session), "%s", info->id);
	return 1;
}

void h_checkpoint_delete(struct request *r)
{
	hangar_checkpoint *cp = checkpoint_open(r);
	struct holder h = { 0 };
	int rc;

	if (!cp)
		return;
	h.checkpoint = hangar_checkpoint_id(cp);
	rc = hangar_session_list(hangard->ctx, find_holder, &h);
	if (rc < 0) {
		reply_hangar_error(r, rc);
	} else if (rc > 0) {
		reply_error(r, 409, "in_use", HANGAR_EREFUSED,
			    "checkpoint %s is the latest of session %s, which would have nothing to resume from: "
			    "delete or archive the session first",
			    h.checkpoint, h.session);
	} else if ((rc = hangar_checkpoint_delete(cp)) < 0) {
		reply_hangar_error(r, rc);
	} else {
		reply_empty(r, 204);
	}
	hangar_checkpoint_unref(cp);
}

/* {workspace, select, session, parent, labels, blob, user, timeout}: 201
 * and the checkpoint. The blob is the string's bytes, as for a suspend. A
 * client that leaves before the answer cancels the capture: nothing is
 * stored for an answer nobody reads. */
void h_sandbox_checkpoint(struct request *r)
{
	static const char *const fields[] = { "workspace", "select", "session", "parent", "labels",
					      "blob",      "user",   "timeout", NULL };
	hangar_checkpoint_opts opts = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp = NULL;
	hangar_sandbox *sb = NULL;
	const char *select = NULL, *blob = NULL;
	char **labels = NULL;
	int failed, rc;
	cJSON *doc = request_json(r, fields), *o;

	if (!doc)
		return;
	if (want_string(r, doc, "workspace", &opts.workspace) < 0 || want_string(r, doc, "select", &select) < 0 ||
	    want_string(r, doc, "session", &opts.session_id) < 0 || want_string(r, doc, "parent", &opts.parent_id) < 0 ||
	    want_string(r, doc, "blob", &blob) < 0 || want_string(r, doc, "user", &opts.user) < 0 ||
	    want_int(r, doc, "timeout", 0, 86400, &opts.timeout_sec) < 0)
		goto out;
	if (select) {
		if (strcmp(select, "all") == 0)
			opts.select = HANGAR_CHECKPOINT_SELECT_ALL;
		else if (strcmp(select, "auto") != 0) {
			reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"select\" is \"auto\" or \"all\"");
			goto out;
		}
	}
	labels = env_array(r, doc, "labels", &failed);
	if (failed)
		goto out;
	opts.labels = (const char *const *)labels;
	opts.blob = blob;
	opts.blob_len = blob ? strlen(blob) : 0;
	opts.cancel = request_abandoned;
	opts.cancel_payload = r;
	sb = sandbox_open(r);
	if (!sb)
		goto out;
	rc = hangar_checkpoint_create(&cp, sb, &opts);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	o = checkpoint_json(cp);
	if (o)
		reply_json(r, 201, o);
	else
		reply_hangar_error(r, hangar_error_last()->code);
out:
	env_free(labels);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_unref(sb);
	cJSON_Delete(doc);
}
