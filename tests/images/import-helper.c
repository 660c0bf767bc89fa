/*
 * Imports an image through the library, for the images suite:
 *   import-helper PATH [NAME [KILL_LAYER KILL_BYTES]]
 *   import-helper PATH NAME hold LAYER
 * With KILL_LAYER, the progress callback SIGKILLs this process once
 * layers_done reaches KILL_LAYER and bytes_done KILL_BYTES, so the suite
 * can check what a killed import leaves. With hold, the callback prints
 * "holding" once layers_done reaches LAYER and waits until its standard
 * input ends, so the suite can act in the middle of an import. Prints the
 * digest, or the error's name and message.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hangar/hangar.h>

struct kill_at {
	long layer;
	unsigned long long bytes;
	int hold, held;
};

static int progress(const hangar_image_progress *p, void *payload)
{
	struct kill_at *k = payload;

	if (k->layer < 0 || (long)p->layers_done < k->layer || p->bytes_done < k->bytes)
		return 0;
	if (!k->hold)
		raise(SIGKILL);
	if (!k->held) {
		char buf[64];

		k->held = 1;
		fprintf(stderr, "holding\n");
		while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
			;
	}
	return 0;
}

int main(int argc, char **argv)
{
	hangar_image_opts opts = HANGAR_IMAGE_OPTS_INIT;
	hangar_buf digest = HANGAR_BUF_INIT;
	struct kill_at k = { -1, 0, 0, 0 };
	hangar_ctx *ctx;
	int rc;

	if (argc < 2)
		return 2;
	if (argc > 2 && argv[2][0])
		opts.name = argv[2];
	if (argc > 4 && !strcmp(argv[3], "hold")) {
		k.hold = 1;
		k.layer = strtol(argv[4], NULL, 10);
	} else if (argc > 4) {
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
