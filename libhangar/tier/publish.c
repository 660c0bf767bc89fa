/*
 * Publishing an environment's image: the templates its creates use on the
 * providers of its tier, built once per image and recorded in the state
 * store (store_image_template_*), which the tier reads at each create.
 */
#define _GNU_SOURCE
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangar/environment.h"
#include "hangar/image.h"
#include "hangar/provider.h"
#include "hangar/template.h"

#include "core/environment.h"
#include "core/versioned.h"
#include "image/registry.h"
#include "store/store.h"
#include "tier.h"

int hangar_publish_opts_init(hangar_publish_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_publish_opts);
}

/* The image's digest as its reference states it ("…@sha256:HEX"), else "". */
static const char *digest_in(const char *reference)
{
	const char *at = strstr(reference, "@sha256:");

	return at && strlen(at + 1) == 71 ? at + 1 : "";
}

/*
 * A template name for the image, the same for the same image: from its
 * digest when the reference states it, else from the reference. Lowercase
 * letters, digits and '-' only, as every platform takes.
 */
static void template_name(char out[32], const char *reference, const char *digest)
{
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof(h) + 1];
	const char *what = *digest ? digest : reference;

	crypto_hash_sha256(h, (const unsigned char *)what, strlen(what));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(out, 32, "hangar-%.16s", hex);
}

struct publish_one {
	hangar_ctx *ctx;
	const struct env_resolved *env;
	const hangar_publish_opts *o;
	hangar_publish_result r;
	char *owned;                       /* r.template_id when malloc'd */
	hangar_buf built;
	char digest[80];                   /* a stored image's */
};

static int found_image(const hangar_image_info *info, void *payload)
{
	struct publish_one *p = payload;

	snprintf(p->digest, sizeof(p->digest), "%s", info->digest);
	return 0;
}

static int pull_progress(const hangar_image_progress *pr, void *payload)
{
	struct publish_one *p = payload;
	char line[160];

	snprintf(line, sizeof(line), "%s: layer %u of %u", pr->phase, pr->layers_done, pr->layers_total);
	p->o->progress("pulling", line, p->o->progress_payload);
	return 0;
}

/* A provider that runs images: the image in the store, pulled when it is not there. */
static int publish_image(struct publish_one *p)
{
	hangar_image_opts io = HANGAR_IMAGE_OPTS_INIT;
	int rc = hangar_image_inspect(p->ctx, p->env->image, found_image, p);

	p->r.template_id = p->env->image;
	if (rc == 0) {
		p->r.action = "image";
		p->r.digest = p->digest;
		return 0;
	}
	if (rc != HANGAR_ENOTFOUND)
		return rc;
	if (p->o->progress) {
		io.progress = pull_progress;
		io.progress_payload = p;
	}
	if ((rc = hangar_image_pull(&p->built, p->ctx, p->env->image, &io)) != 0)
		return rc;
	snprintf(p->digest, sizeof(p->digest), "%s", p->built.ptr);
	p->r.action = "pulled";
	p->r.digest = p->digest;
	return 0;
}

/* One provider that builds templates: the recorded one, one of the same image, or a new build. */
static int publish_template(struct publish_one *p, const char *provider)
{
	const char *image = p->env->image, *digest = digest_in(image);
	hangar_template_build_opts bo = HANGAR_TEMPLATE_BUILD_OPTS_INIT;
	char name[32], *recorded_digest = NULL, *resolved = NULL;
	int rc;

	/*
	 * The image's digest, from its registry when the reference does not
	 * state it (only the manifest is asked for): a template is built once
	 * per image, whatever reference or tag names it. A registry this host
	 * cannot reach (the platform may) leaves the reference alone as key.
	 */
	if (!*digest) {
		if (registry_resolve(p->ctx, image, &resolved) == 0) {
			snprintf(p->digest, sizeof(p->digest), "%s", resolved);
			digest = p->digest;
		} else {
			hangar_sys_log(p->ctx, HANGAR_LOG_INFO, "publish: the digest of %s is not known here (%s); "
				       "its template is recorded by reference", image, hangar_error_last()->message);
		}
		free(resolved);
		herr_clear();
	}

	p->r.digest = digest;
	if (!p->o->rebuild) {
		rc = store_image_template_get(p->ctx, provider, image, &p->owned, &recorded_digest);
		if (rc == 0 && (!*digest || !strcmp(recorded_digest, digest))) {
			free(recorded_digest);
			p->r.action = "reused";
			p->r.template_id = p->owned;
			return 0;
		}
		free(recorded_digest);
		free(p->owned);
		p->owned = NULL;
		if (rc != 0 && rc != HANGAR_ENOTFOUND)
			return rc;
		if (*digest && store_image_template_by_digest(p->ctx, provider, digest, &p->owned) == 0) {
			if ((rc = store_image_template_put(p->ctx, provider, image, digest, p->owned)) != 0)
				return rc;
			p->r.action = "reused";
			p->r.template_id = p->owned;
			return 0;
		}
	}
	template_name(name, image, digest);
	bo.name = name;
	bo.image = image;
	bo.progress = p->o->progress;
	bo.payload = p->o->progress_payload;
	if ((rc = hangar_template_build(&p->built, p->ctx, provider, &bo)) != 0)
		return rc;
	if ((rc = store_image_template_put(p->ctx, provider, image, digest, p->built.ptr)) != 0)
		return rc;
	p->r.action = "built";
	p->r.template_id = p->built.ptr;
	return 0;
}

static int publish_on(struct publish_one *p, const char *provider)
{
	const char *named = env_exact_template_for(p->env->templates, provider);
	hangar_provider *prov = NULL;
	uint64_t caps;
	int rc;

	if (named) {
		p->r.action = "named";
		p->r.template_id = named;
		return 0;
	}
	if ((rc = hangar_provider_lookup(&prov, p->ctx, provider)) != 0)
		return rc;
	caps = hangar_provider_capabilities(prov);
	hangar_provider_unref(prov);
	if (caps & HANGAR_CAP_IMAGES)
		return publish_image(p);
	if (caps & HANGAR_CAP_TEMPLATES)
		return publish_template(p, provider);
	if ((named = env_template_for(p->env->templates, provider))) {
		p->r.action = "named";
		p->r.template_id = named;
		return 0;
	}
	return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_CONFIG,
		    "provider %s runs no images and builds no templates, and the environment names no template for it",
		    provider);
}

int hangar_environment_publish(hangar_ctx *ctx, const char *name, const hangar_publish_opts *opts,
			       hangar_publish_fn fn, void *payload)
{
	struct env_resolved *env = NULL;
	hangar_publish_opts o;
	char **names = NULL;
	size_t n = 0;
	int rc;

	HCHECK_ARG(ctx, "ctx is NULL");
	HCHECK_ARG(name && env_valid_name(name), "name is not an environment name");
	HCHECK_ARG(fn, "fn is NULL");
	if ((rc = HOPTS_COPY(o, opts, hv_publish_opts, "opts")) != 0)
		return rc;
	if ((rc = env_resolve(ctx, name, &env)) != 0)
		return rc;
	if (!env->image) {
		rc = herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT, "environment %s names no image: nothing to publish",
			  name);
		goto out;
	}
	if ((rc = tier_providers(ctx, env->tier, &names, &n)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct publish_one p = { ctx, env, &o, { HANGAR_PUBLISH_RESULT_VERSION, sizeof(p.r), names[i], "failed",
							 "", "", 0, 0, "" }, NULL, HANGAR_BUF_INIT, "" };
		int one = publish_on(&p, names[i]);

		if (one) {
			p.r.action = "failed";
			p.r.template_id = "";
			p.r.error = one;
			p.r.message = hangar_error_last()->message;
		}
		fn(&p.r, payload);
		free(p.owned);
		hangar_buf_dispose(&p.built);
	}
	herr_clear();
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	env_resolved_free(env);
	return rc;
}
