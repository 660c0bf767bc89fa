/*
 * The tar checker: a push parser that is fed a checkpoint's tar stream in
 * pieces of any size, checks every member before any of it goes further, and
 * hands on only members that passed, re-emitted as plain tar with headers of
 * its own (ustar, plus a pax `x` header where a path, link target, size or
 * mtime does not fit). The end-of-archive marker is handed on by
 * tarcheck_finish() only, so a consumer (hangar-envd's PUT, GNU tar) never
 * sees a complete archive unless the caller has seen the end of the input.
 *
 * Read: ustar, pax `x` (path, linkpath, size, mtime; other keys ignored,
 * GNU.sparse.* refused), GNU `L`/`K`. Refused: pax `g`, hard links,
 * devices, fifos, sparse and every other kind; absolute names, `..`
 * components, empty names, NUL in a name, setuid/setgid bits, a member whose
 * path is or goes through an earlier symlink member, and anything over the
 * caps. The first refusal is HANGAR_EREFUSED naming the member; after it, or
 * after any error, every call fails the same way and nothing more is handed on.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/internal.h"

#define TARCHECK_MAX_MEMBERS 1000000
#define TARCHECK_MAX_NAME 4096

struct tarcheck_limits {
	uint64_t max_members;     /* 0: TARCHECK_MAX_MEMBERS */
	uint64_t max_name;        /* bytes of a name or link target; 0: TARCHECK_MAX_NAME */
	uint64_t max_total;       /* data bytes of all members; 0: no cap */
	uint64_t max_member;      /* data bytes of one member; 0: no cap */
};

struct tarcheck_stats {
	uint64_t members;         /* dirs + files + symlinks handed on */
	uint64_t files;           /* regular files */
	uint64_t dirs;
	uint64_t symlinks;
	uint64_t bytes;           /* data bytes of the regular files */
};

/* Receives the checked tar. Returns 0 or a negative code (herr set). */
typedef int (*tarcheck_sink)(void *payload, const void *data, size_t len);

struct tarcheck;
/* sink may be NULL: the checker only checks and counts. */
int tarcheck_new(struct tarcheck **out, const struct tarcheck_limits *lim, tarcheck_sink sink, void *payload);
int tarcheck_feed(struct tarcheck *t, const void *data, size_t len);
/* The end of the input: 0 only when the archive's end-of-archive marker was
 * read and nothing but zero padding followed; then the marker is handed on. */
int tarcheck_finish(struct tarcheck *t);
const struct tarcheck_stats *tarcheck_stats(const struct tarcheck *t);
void tarcheck_free(struct tarcheck *t);
