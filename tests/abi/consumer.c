/*
 * A program built the way users build against libhangar: outside the source
 * tree, with only what `meson install` put in place and what
 * `pkg-config --cflags --libs libhangar` says.
 */
#include <hangar/hangar.h>
#include <hangar/sys/provider.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
	hangar_ctx *ctx = NULL;
	int r;

	printf("%s\n", hangar_version());
	if (strcmp(hangar_version(), HANGAR_VERSION_STRING) != 0) {
		fprintf(stderr, "library is %s, headers are %s\n", hangar_version(), HANGAR_VERSION_STRING);
		return 1;
	}
	if (hangar_version_number() != HANGAR_VERSION_NUMBER) {
		fprintf(stderr, "hangar_version_number() disagrees with HANGAR_VERSION_NUMBER\n");
		return 1;
	}
	r = hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV);
	if (r < 0) {
		fprintf(stderr, "hangar_ctx_new: %s: %s\n", hangar_strerror(r), hangar_error_last()->message);
		return 1;
	}
	ctx = hangar_ctx_unref(ctx);
	return 0;
}
