/*
 * The image store over HTTP: list and inspect the images local sandboxes
 * are created from, pull one from its registry (its progress as events on
 * /v1/events), remove one.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangard.h"

static cJSON *string_array(const char *const *v)
{
	cJSON *a = cJSON_CreateArray();

	for (; v && *v; v++)
		cJSON_AddItemToArray(a, cJSON_CreateString(*v));
	return a;
}

/* One image as every route writes it. */
static cJSON *image_json(const hangar_image_info *i)
{
	cJSON *o = add_strings(cJSON_CreateObject(), "digest", i->digest, "config_digest", i->config_digest, "os",
			       i->os, "architecture", i->architecture, "workdir", i->workdir, "user", i->user, NULL);

	cJSON_AddItemToObject(o, "names", string_array(i->names));
	sjson_add_int64(o, "size_bytes", (int64_t)i->size_bytes);
	cJSON_AddItemToObject(o, "layers", string_array(i->layers));
	cJSON_AddItemToObject(o, "env", string_array(i->env));
	sjson_add_int64(o, "created_us", i->created_us);
	cJSON_AddBoolToObject(o, "in_use", i->in_use != 0);
	return o;
}

static int add_image(const hangar_image_info *i, void *payload)
{
	cJSON_AddItemToArray(payload, image_json(i));
	return 0;
}

int fill_images(struct request *r, cJSON *arr)
{
	(void)r;
	return hangar_image_list(hangard->ctx, add_image, arr);
}

static int keep_image(const hangar_image_info *i, void *payload)
{
	*(cJSON **)payload = image_json(i);
	return 0;
}

/* The image {id} names (a digest, or 12 or more of its hex digits), or an answer. */
static cJSON *image_of(struct request *r, const char *ref)
{
	cJSON *o = NULL;
	int rc = hangar_image_inspect(hangard->ctx, ref, keep_image, &o);

	if (rc < 0) {
		reply_hangar_error(r, rc);
		return NULL;
	}
	return o;
}

void h_image_get(struct request *r)
{
	cJSON *o = image_of(r, request_param(r));

	if (o)
		reply_json(r, 200, o);
}

void h_image_delete(struct request *r)
{
	int rc = hangar_image_remove(hangard->ctx, request_param(r));

	if (rc == HANGAR_EBUSY)
		reply_error(r, 409, "in_use", rc, "%s", hangar_error_last()->message);
	else if (rc < 0)
		reply_hangar_error(r, rc);
	else
		reply_empty(r, 204);
}

/* ---- pull ---------------------------------------------------------------------------- */

struct pull {
	struct request *r;
	const char *reference;
	int64_t last_ms;
};

/* An image.pull event: at most every 250 ms, and at each phase's last step. */
static int on_pull_progress(const hangar_image_progress *p, void *payload)
{
	struct pull *pl = payload;
	int64_t now = clock_mono_ms();
	cJSON *ev;
	char *text;

	if (now - pl->last_ms < 250 && p->layers_done < p->layers_total)
		return 0;
	pl->last_ms = now;
	ev = add_strings(cJSON_CreateObject(), "reference", pl->reference, "phase", p->phase, "layer", p->layer, NULL);
	sjson_add_int64(ev, "layers_done", p->layers_done);
	sjson_add_int64(ev, "layers_total", p->layers_total);
	sjson_add_int64(ev, "bytes_done", (int64_t)p->bytes_done);
	sjson_add_int64(ev, "bytes_total", (int64_t)p->bytes_total);
	text = cJSON_PrintUnformatted(ev);
	cJSON_Delete(ev);
	if (text)
		events_on_event("image.pull", text, NULL);
	free(text);
	return 0;
}

/* {reference}: pulls it into the store and answers the image, 200. A client
 * that leaves before the answer cancels the pull (499 in the log). */
void h_image_pull(struct request *r)
{
	static const char *const fields[] = { "reference", NULL };
	hangar_image_opts o = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	cJSON *doc = request_json(r, fields), *img;
	struct pull pl = { r, NULL, 0 };
	int rc;

	if (!doc)
		return;
	if (want_string(r, doc, "reference", &pl.reference) < 0)
		goto out;
	if (!pl.reference || !*pl.reference) {
		reply_error(r, 400, "invalid", HANGAR_EINVAL, "\"reference\" is required");
		goto out;
	}
	o.progress = on_pull_progress;
	o.progress_payload = &pl;
	o.cancel = request_abandoned;
	o.cancel_payload = r;
	rc = hangar_image_pull(&digest, hangard->ctx, pl.reference, &o);
	if (rc < 0) {
		reply_hangar_error(r, rc);
		goto out;
	}
	if ((img = image_of(r, digest.ptr)) != NULL)
		reply_json(r, 200, img);
out:
	hangar_buf_dispose(&digest);
	cJSON_Delete(doc);
}
