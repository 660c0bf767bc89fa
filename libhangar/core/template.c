/* Template builds and listings (hangar/template.h), on providers that have them. */
#define _GNU_SOURCE
#include <string.h>

#include "context.h"
#include "hangar/template.h"
#include "versioned.h"

int hangar_template_build_opts_init(hangar_template_build_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_template_build_opts);
}

static struct hangar_provider *templating(hangar_ctx *ctx, const char *name, int build)
{
	struct hangar_provider *p = provider_get(ctx, name);

	if (!p)
		return NULL;
	if (!(provider_caps(p) & HANGAR_CAP_TEMPLATES) ||
	    !(build ? (void *)p->ops.template_build : (void *)p->ops.template_list)) {
		herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s does not %s templates", p->ops.name,
		     build ? "build" : "list");
		return NULL;
	}
	return p;
}

int hangar_template_build(hangar_buf *out_template_id, hangar_ctx *ctx, const char *provider,
			  const hangar_template_build_opts *opts)
{
	hangar_template_build_opts o;
	hangar_buf id = HANGAR_BUF_INIT;
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(out_template_id, "out_template_id is NULL");
	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(opts, "opts must be initialised");
	rc = HOPTS_COPY(o, opts, hv_template_build_opts, "opts");
	if (rc)
		return rc;
	HCHECK_ARG(o.name && *o.name, "opts->name is required");
	HCHECK_ARG(o.image && *o.image, "opts->image is required");
	HCHECK_TEXT(o.name, "opts->name");
	HCHECK_TEXT(o.image, "opts->image");
	p = templating(ctx, provider, 1);
	if (!p)
		return hangar_error_last()->code;
	rc = PROVIDER_CALL(p, "template build", template_build, &o, &id);
	if (rc) {
		hangar_buf_dispose(&id);
		return rc;
	}
	if (!id.ptr || !id.size) {
		hangar_buf_dispose(&id);
		return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_PROVIDER, "provider %s built a template without an id",
			    p->ops.name);
	}
	hangar_sys_log(ctx, HANGAR_LOG_INFO, "built template %s on %s", id.ptr, p->ops.name);
	hangar_buf_dispose(out_template_id);
	*out_template_id = id;
	herr_clear();
	return 0;
}

int hangar_template_list(hangar_ctx *ctx, const char *provider, hangar_template_fn fn, void *payload)
{
	struct hangar_provider *p;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(fn, "fn is NULL");
	p = templating(ctx, provider, 0);
	if (!p)
		return hangar_error_last()->code;
	rc = PROVIDER_WALK(p, "template list", template_list, fn, payload);
	if (rc < 0)
		return rc;
	if (rc == 0)
		herr_clear();
	return rc;
}
