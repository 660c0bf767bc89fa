/*
 * The checkpoint endpoints under /hangar/v1/: capture of a workspace as a
 * zstd-compressed tar stream, and restore of such a stream into a workspace.
 *
 * Each request is served by a worker process started for it: the program
 * hangar-envd-archive, installed beside hangar-envd, executed as the request
 * user entirely (uid, gid, groups, no capabilities unless the user is root),
 * so everything it reads, writes, follows or removes is what that user could
 * from a shell. The daemon only moves bytes between the connection and the
 * worker's pipes, and answers with what the worker reports. Only the worker
 * links libarchive and libzstd: the daemon, one per sandbox, does not carry
 * their relocations.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "request.h"

struct MHD_Response;

/* Caps of a restore (the checkpoint contract). */
#define CKPT_MAX_MEMBERS 1000000
#define CKPT_MAX_NAME 4096

/* The worker's program, in the directory of hangar-envd's own. */
#define CKPT_WORKER_NAME "hangar-envd-archive"
/* Its first argument, then capture|restore and the request's (ckpt_worker_main). */
#define CKPT_WORKER_FLAG "--archive-worker"
/* The user's environment (for git) reaches the worker under this prefix. */
#define CKPT_WORKER_ENV_PREFIX "HANGAR_ARCHIVE_ENV_"

/*
 * At start-up, before any thread: opens the worker's program (CKPT_WORKER_NAME
 * beside the daemon's own, or under -loader beside the program runtime.c
 * found). -1 with errno when it cannot be opened; the endpoints are then not
 * served (ckpt_available() is 0) and clients use their fallback.
 */
int ckpt_init(const char *argv0);
/* 1 when ckpt_init() found the worker, so the archive endpoints are served. */
int ckpt_available(void);

/*
 * The worker (ckpt_worker.c, hangar-envd-archive's main): ckpt_is_worker()
 * says whether argv asks for it, ckpt_worker_main() runs it and does not
 * return when the arguments and the process are what hangar-envd starts a
 * worker with; it returns 2 (with a message on stderr) otherwise. It never
 * changes credentials itself: it does what the user running it could anyway.
 */
int ckpt_is_worker(int argc, char **argv);
int ckpt_worker_main(int argc, char **argv);

/* GET /hangar/v1/info: {"archive":1}. NULL when out of memory. */
struct MHD_Response *ckpt_info_response(void);

/* GET /hangar/v1/archive. Returns the HTTP status and sets *resp. */
unsigned ckpt_capture(struct envd_req *r, struct MHD_Response **resp);

/*
 * PUT /hangar/v1/archive, as the body arrives: begin once the headers are
 * in, data per body chunk, finish after the last chunk. Only finish lets the
 * restore commit; freeing a restore that was not finished (the client went
 * away mid-body) makes it remove what it extracted and leave the workspace
 * as it was. begin returns NULL only when out of memory.
 */
struct ckpt_restore;
struct ckpt_restore *ckpt_restore_begin(struct envd_req *r);
void ckpt_restore_data(struct ckpt_restore *c, const char *data, size_t len);
unsigned ckpt_restore_finish(struct ckpt_restore *c, struct MHD_Response **resp);
void ckpt_restore_free(struct ckpt_restore *c);

/* ---- between the daemon and its children -------------------------------- */

/*
 * What a child reports on its note pipe: for a capture, once before the body
 * (status 200 and the selection, or the error) and once more if it fails
 * after; for a restore, once at the end. One write of less than PIPE_BUF
 * bytes, so it arrives whole.
 */
struct ckpt_note {
	int32_t status;
	char selection[8];            /* "git" or "all" */
	int64_t files, dirs, symlinks, bytes;
	char message[1536];
};

/* Sends a note (the child side); never fails loudly: the reader notices. */
void ckpt_note_send(int fd, const struct ckpt_note *n);

/* Formats n->message and sets n->status, once: later calls are ignored.
 * Returns -1 so a caller can `return ckpt_fail(...)`. */
int ckpt_fail(struct ckpt_note *n, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A member or path name made safe for a message: control bytes and bytes
 * above 0x7e as \xHH, cut to about max bytes. */
void ckpt_quote_name(const char *name, char *out, size_t max);

struct ckpt_capture_args {
	const struct envd_user *user;
	const char *path;             /* the workspace, absolute */
	int select_all;               /* select=all; else auto */
	int data_fd;                  /* the tar.zst stream goes here */
	int note_fd;
	char **envp;                  /* for git */
};

/* The capture child's body: its exit status (0 when the stream is complete). */
int ckpt_capture_child(const struct ckpt_capture_args *a);

struct ckpt_restore_args {
	const struct envd_user *user;
	const char *path;
	int merge;                    /* mode=merge; else replace */
	int zstd;                     /* body is tar.zst; else plain tar */
	int data_fd;                  /* the body */
	int go_fd;                    /* one byte when the body ended cleanly */
	int note_fd;
};

/* The restore child's body: its exit status (0 when the workspace was committed); the
 * outcome goes to note_fd. */
int ckpt_restore_child(const struct ckpt_restore_args *a);

/*
 * Why a member name is refused, or NULL when it is acceptable. *norm is set
 * to the name without leading "./" (NULL: the member is the workspace itself,
 * to be skipped).
 */
const char *ckpt_name_refusal(const char *name, const char **norm);
