/*
 * Imports an image through the library, for the images suite:
 *   import-helper PATH [NAME [KILL_LAYER KILL_BYTES]]
 * With KILL_LAYER, the progress callback SIGKILLs this process once
 * layers_done reaches KILL_LAYER and bytes_done KILL_BYTES, so the suite
 * can check what a killed import leaves. Prints the digest, or the error's
 * name and message.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <hangar/hangar.h>

struct kill_at {
	long layer;
	unsigned long long bytes;
};

static int progress(const hangar_image_progress *p, void *payload)
{
	const struct kill_at *k = payload;

	if (k->layer >= 0 && (long)p->layers_done >= k->layer && p->bytes_done >= k->bytes)
		raise(SIGKILL);
	return 0;
}

int main(int argc, char **argv)
{
	hangar_image_opts opts = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	struct kill_at k = { -1, 0 };
	hangar_ctx *ctx;
	int rc;

	if (argc < 2)
		return 2;
	if (argc > 2 && argv[2][0])
		opts.name = argv[2];
	if (argc > 4) {
		k.layer = strtol(argv[3], NULL, 10);
		k.bytes = strtoull(argv[4], NULL, 10);
	}
	opts.progress = progress;
	opts.progress_payload = &k;
	if (hangar_ctx_new(&ctx, 0) != 0) {
		fprintf(stderr, "%s\n", hangar_error_last()->message);
		return 1;
	}
	rc = hangar_image_import(&digest, ctx, argv[1], &opts);
	if (rc == 0)
		printf("%s\n", digest.ptr);
	else
		fprintf(stderr, "%s: %s\n", hangar_error_name(rc), hangar_error_last()->message);
	hangar_buf_dispose(&digest);
	hangar_ctx_unref(ctx);
	return rc == 0 ? 0 : 1;
}
