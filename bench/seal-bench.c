/*
 * seal-bench: how fast checkpoint streams are sealed and opened, through
 * memory only (no store, no compression): 256 MiB by default, written and
 * fed in 1 MiB pieces, best and median of three runs.
 *   seal-bench [--mib N] [--runs N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/seal.h"
#include "stats.h"

struct mem {
	unsigned char *p;
	size_t n, cap;
};

static int to_mem(void *payload, const void *data, size_t len)
{
	struct mem *m = payload;

	if (m->n + len > m->cap)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "bench buffer too small");
	memcpy(m->p + m->n, data, len);
	m->n += len;
	return 0;
}

static int count(void *payload, const void *data, size_t len)
{
	(void)data;
	*(size_t *)payload += len;
	return 0;
}

int main(int argc, char **argv)
{
	size_t mib = 256, runs = 3, piece = 1 << 20;
	struct seal_keyring kr = { 0 };
	struct mem sealed = { 0 };
	unsigned char *src;
	double *seal_ms, *open_ms;
	struct stats ss, os;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mib"))
			mib = strtoul(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--runs"))
			runs = strtoul(argv[i + 1], NULL, 10);
	}
	if (!mib || !runs) {
		fprintf(stderr, "usage: seal-bench [--mib N] [--runs N]\n");
		return 2;
	}
	src = malloc(piece);
	seal_ms = calloc(runs, sizeof(double));
	open_ms = calloc(runs, sizeof(double));
	sealed.cap = mib * piece + mib * piece / SEAL_CHUNK * 64 + 4096;
	sealed.p = malloc(sealed.cap);
	if (!src || !seal_ms || !open_ms || !sealed.p || seal_keyring_add(&kr, "bench key", 9) < 0) {
		fprintf(stderr, "seal-bench: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < piece; i++)
		src[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t r = 0; r < runs; r++) {
		struct seal_writer *w;
		struct seal_reader *rd;
		size_t opened = 0;
		double t0 = now_ms();

		sealed.n = 0;
		if (seal_writer_new(&w, &kr, "bench-checkpoint", "bench-session", to_mem, &sealed) < 0)
			goto fail;
		for (size_t i = 0; i < mib; i++)
			if (seal_writer_write(w, src, piece) < 0)
				goto fail;
		if (seal_writer_finish(w) < 0)
			goto fail;
		seal_writer_free(w);
		seal_ms[r] = now_ms() - t0;
		t0 = now_ms();
		if (seal_reader_new(&rd, &kr, "bench-checkpoint", "bench-session", count, &opened) < 0)
			goto fail;
		for (size_t off = 0; off < sealed.n; off += piece)
			if (seal_reader_feed(rd, sealed.p + off, sealed.n - off < piece ? sealed.n - off : piece) < 0)
				goto fail;
		if (seal_reader_finish(rd) < 0 || opened != mib * piece)
			goto fail;
		seal_reader_free(rd);
		open_ms[r] = now_ms() - t0;
	}
	stats_of(seal_ms, runs, &ss);
	stats_of(open_ms, runs, &os);
	printf("checkpoint sealing, %zu MiB through memory, %zu runs (secretstream, %d KiB chunks)\n", mib, runs,
	       SEAL_CHUNK / 1024);
	printf("%-6s %12s %12s %14s\n", "", "best MB/s", "median MB/s", "median ms");
	printf("%-6s %12.0f %12.0f %14.1f\n", "seal", mib * 1.048576 * 1000 / seal_ms[0],
	       mib * 1.048576 * 1000 / ss.p50, ss.p50);
	printf("%-6s %12.0f %12.0f %14.1f\n", "open", mib * 1.048576 * 1000 / open_ms[0],
	       mib * 1.048576 * 1000 / os.p50, os.p50);
	printf("sealed size: %zu bytes for %zu (overhead %.4f%%)\n", sealed.n, mib * piece,
	       100.0 * (double)(sealed.n - mib * piece) / (double)(mib * piece));
	seal_keyring_wipe(&kr);
	free(sealed.p);
	free(src);
	free(seal_ms);
	free(open_ms);
	return 0;
fail:
	fprintf(stderr, "seal-bench: %s\n", hangar_error_last()->message);
	return 1;
}
