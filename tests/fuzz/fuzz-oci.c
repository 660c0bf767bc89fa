/*
 * The image store's parsers of untrusted documents (image manifests,
 * indexes, configs) and its reference normaliser, against any input. The
 * first byte picks the parser. Whatever a parser accepts must hold what the
 * store relies on: digests of the sha256:<64 hex> form, layer media types it
 * unpacks, diff_ids well formed, counts within their bounds; a refusal must
 * come with a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/img.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256] = "";
	const char *text;
	size_t len;

	if (size < 1)
		return 0;
	text = (const char *)data + 1;
	len = size - 1;
	switch (data[0] % 4) {
	case 0: {
		struct img_manifest m;

		if (img_parse_manifest(text, len, &m, err, sizeof(err)) == 0) {
			if (!img_digest_ok(m.config.digest) || m.n_layers > IMG_MAX_LAYERS)
				abort();
			for (size_t i = 0; i < m.n_layers; i++)
				if (!img_digest_ok(m.layers[i].digest) ||
				    img_layer_media_compression(m.layers[i].media_type) < 0)
					abort();
			img_manifest_free(&m);
		} else if (!err[0]) {
			abort();
		}
		break;
	}
	case 1: {
		struct img_config c;

		if (img_parse_config(text, len, &c, err, sizeof(err)) == 0) {
			if (!c.os[0] || !c.architecture[0] || c.n_diff_ids > IMG_MAX_LAYERS)
				abort();
			for (size_t i = 0; i < c.n_diff_ids; i++)
				if (!img_digest_ok(c.diff_ids[i]))
					abort();
			if (c.diff_ids[c.n_diff_ids])
				abort();
			img_config_free(&c);
		} else if (!err[0]) {
			abort();
		}
		break;
	}
	case 2: {
		struct img_index ix;

		if (img_parse_index(text, len, &ix, err, sizeof(err)) == 0) {
			for (size_t i = 0; i < ix.n; i++)
				if (!img_digest_ok(ix.entries[i].desc.digest))
					abort();
			img_index_free(&ix);
		} else if (!err[0]) {
			abort();
		}
		break;
	}
	default: {
		char in[1100], out[1200], again[1200];

		if (len >= sizeof(in))
			return 0;
		memcpy(in, text, len);
		in[len] = '\0';
		/* A normalised name is its own normal form. */
		if (img_ref_normalise(in, out, sizeof(out), err, sizeof(err)) == 0 &&
		    (img_ref_normalise(out, again, sizeof(again), err, sizeof(err)) != 0 || strcmp(out, again) != 0))
			abort();
		break;
	}
	}
	return 0;
}
