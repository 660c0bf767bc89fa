/*
 * Filesystem-only pauses, snapshots, metrics and logs (provider table
 * version 2; snapshot deletion, 5; snapshot release and listing, 6; held
 * snapshots, 7).
 */
#define _GNU_SOURCE
#include <string.h>

#include "sandbox.h"

int hangar_sandbox_pause_filesystem(hangar_sandbox *sb)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	p = sb->provider;
	if (!(provider_caps(p) & HANGAR_CAP_FS_PAUSE) || !p->ops.pause_filesystem)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER,
			    "provider %s cannot pause keeping only the filesystem", p->ops.name);
	rc = PROVIDER_CALL(p, "pause_filesystem", pause_filesystem, sb->id);
	if (rc)
		return rc;
	rc = sandbox_refresh(sb);
	if (rc == 0)
		herr_clear();
	return rc;
}

/* A snapshot of sb named name into out_id: held by this process (snapshot_held) when held and the provider can. */
static int take_snapshot(hangar_buf *out_id, hangar_sandbox *sb, const char *name, int held)
{
	hangar_buf id = HANGAR_BUF_INIT;
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(out_id, "out_id is NULL");
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(!name || (*name && strlen(name) <= 128 && !strpbrk(name, "\r\n\"")), "name");
	HCHECK_TEXT(name, "name");
	p = sb->provider;
	if (!(provider_caps(p) & HANGAR_CAP_SNAPSHOT) || !p->ops.snapshot)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot take snapshots",
			    p->ops.name);
	if (held && p->ops.snapshot_held)
		rc = PROVIDER_CALL(p, "snapshot_held", snapshot_held, sb->id, name, &id);
	else
		rc = PROVIDER_CALL(p, "snapshot", snapshot, sb->id, name, &id);
	if (rc) {
		hangar_buf_dispose(&id);
		return rc;
	}
	if (!id.ptr || !id.size) {
		hangar_buf_dispose(&id);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s: a snapshot without an id",
			    p->ops.name);
	}
	hangar_buf_dispose(out_id);
	*out_id = id;
	herr_clear();
	return 0;
}

int hangar_sandbox_snapshot(hangar_buf *out_id, hangar_sandbox *sb, const char *name)
{
	return take_snapshot(out_id, sb, name, 0);
}

int sandbox_snapshot_held(hangar_buf *out_id, hangar_sandbox *sb, const char *name)
{
	return take_snapshot(out_id, sb, name, 1);
}

/*
 * The provider for a call naming snapshot_id (delete, release) into *out,
 * with the arguments checked and the provider's slot there (has_slot):
 * 0, or the error set and returned. verb says what a provider cannot do.
 */
static int snapshot_provider(struct hangar_provider **out, hangar_ctx *ctx, const char *provider,
			     const char *snapshot_id, int has_slot(const struct hangar_provider *), const char *verb)
{
	struct hangar_provider *p;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(snapshot_id && *snapshot_id && strlen(snapshot_id) <= 256, "snapshot_id");
	HCHECK_TEXT(snapshot_id, "snapshot_id");
	p = provider_get(ctx, provider);
	if (!p)
		return hangar_error_last()->code;
	if (!(provider_caps(p) & HANGAR_CAP_SNAPSHOT) || !has_slot(p))
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s cannot %s snapshots", p->ops.name,
			    verb);
	*out = p;
	return 0;
}

static int has_delete(const struct hangar_provider *p)
{
	return p->ops.snapshot_delete != NULL;
}

static int has_release(const struct hangar_provider *p)
{
	return p->ops.snapshot_release != NULL;
}

int hangar_snapshot_delete(hangar_ctx *ctx, const char *provider, const char *snapshot_id)
{
	struct hangar_provider *p = NULL;
	int rc = snapshot_provider(&p, ctx, provider, snapshot_id, has_delete, "delete");

	if (rc == 0 && (rc = PROVIDER_CALL(p, "snapshot delete", snapshot_delete, snapshot_id)) == 0)
		herr_clear();
	return rc;
}

int hangar_snapshot_release(hangar_ctx *ctx, const char *provider, const char *snapshot_id)
{
	struct hangar_provider *p = NULL;
	int rc = snapshot_provider(&p, ctx, provider, snapshot_id, has_release, "release");

	if (rc == 0 && (rc = PROVIDER_CALL(p, "snapshot release", snapshot_release, snapshot_id)) == 0)
		herr_clear();
	return rc;
}

int hangar_snapshot_list(hangar_ctx *ctx, const char *provider, hangar_snapshot_fn fn, void *payload)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	p = provider_get(ctx, provider);
	if (!p)
		return hangar_error_last()->code;
	if (!(provider_caps(p) & HANGAR_CAP_SNAPSHOT) || !p->ops.snapshot_list)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s lists no snapshots", p->ops.name);
	rc = PROVIDER_WALK(p, "snapshot list", snapshot_list, fn, payload);
	if (rc < 0)
		return rc;
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_sandbox_metrics(hangar_sandbox *sb, hangar_sandbox_metric_fn fn, void *payload)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	p = sb->provider;
	if (!p->ops.metrics)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s keeps no metrics", p->ops.name);
	rc = PROVIDER_WALK(p, "metrics", metrics, sb->id, fn, payload);
	if (rc < 0)
		return rc;
	if (rc == 0)
		herr_clear();
	return rc;
}

int hangar_sandbox_logs(hangar_sandbox *sb, hangar_sandbox_log_fn fn, void *payload)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	p = sb->provider;
	if (!p->ops.logs)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s keeps no logs", p->ops.name);
	rc = PROVIDER_WALK(p, "logs", logs, sb->id, fn, payload);
	if (rc < 0)
		return rc;
	if (rc == 0)
		herr_clear();
	return rc;
}
