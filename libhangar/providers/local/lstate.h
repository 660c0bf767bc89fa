/*
 * The on-disk state of one local sandbox, shared by the local provider (in
 * libhangar) and hangar-jail (the per-sandbox supervisor). Nothing here is
 * exported from the library. envd's access token is never written here: it
 * lives in the library's and the jail's memory and reaches envd through a pipe.
 *
 * RUN/<id>/   mode 0700, where RUN is the directory of running sandboxes: the
 * target of $HANGAR_STATE_DIR/local/run (a private directory on a tmpfs:
 * rundir.c), or $HANGAR_STATE_DIR/local itself (HANGAR_LOCAL_RUN_DIR=state,
 * or no tmpfs to be had); RUN/.uids holds a root jail's claim on its uid
 * range only where root's home cannot hold the host's (hangar-jail's userns.c)
 *   lock          flock()ed by whoever changes meta.json (and by create, throughout)
 *   meta.json     written whole, atomically (temp file + rename)
 *   jail.pid      hangar-jail's pid, written by the jail before it starts bwrap
 *   jail.sock     the jail's unix socket, 0600: it answers a connection from its own
 *                 uid (root is refused too) with envd's access token, then closes it
 *   ports.sock    the jail's unix socket, 0600, for its own uid: "expose PORT\n" is
 *                 answered "ok 127.0.0.1:N\n" (the port forwarded to the host's
 *                 loopback) or "error WHY\n"
 *   cgroup        "v2 PATH", "v1 PATH" or "none": the sandbox's freezer, from the jail
 *   envd.log      stdout and stderr of the jail, bwrap and hangar-envd
 *   envd.sock     hangar-envd's socket, 0600, bound by the jail here, outside every
 *                 path the sandbox sees, and handed to envd as a listening descriptor
 *   rootfs/etc/   the sandbox's own passwd, group, hostname, hosts and resolv.conf,
 *                 written by the jail (the host's /usr) and bound over the shared
 *                 template of the host's /etc, $HANGAR_STATE_DIR/local/.etc/<print>
 *                 (hangar-jail's etc.c); an image sandbox's /etc is the image's own
 *                 (meta.json's "image" names the image: its layers, config and use lock)
 *   meta.json's "snapshot" names the snapshot directory a sandbox was made from
 *                 (snapshot.h); the jail holds its use lock while it lives
 *   timeline      how its creation went: one "PHASE MONO_US" line per step, appended
 *                 by the library and the jail as each ends (CLOCK_MONOTONIC, in
 *                 microseconds: one clock for both), read by the library's debug log
 *                 and by local-bench
 */
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LSTATE_ID_LEN 19 /* "sb-" + 16 lowercase hex digits */

#define LMETA_LAYERS_MAX 128 /* the most layers an image sandbox may have */

/* The image a sandbox's root is made of (template other than "local"). */
struct lmeta_image {
	char digest[72];         /* "sha256:<hex>"; "": no image, the host's /usr */
	char **layers;           /* absolute paths of the layers' roots, bottom -> top, NULL-terminated */
	char **env;              /* the image's Env, NULL-terminated (before the caller's) */
	char *workdir;           /* the image's WorkingDir, "" when unset */
	char *user;              /* the commands' default user: the image's User as a name, "" when unset */
	char *use_lock;          /* the image's use lock, which the jail holds shared while it lives */
};

struct lmeta {
	char id[LSTATE_ID_LEN + 1];
	int64_t created_at_us;
	int64_t timeout_sec;     /* lifetime granted on create and on each resume; 0: none */
	int64_t expires_at_us;   /* 0: none (or paused) */
	char *template_id;       /* as the caller named it, in full ("local" when NULL) */
	int network;             /* 1: the host's network; 0: loopback only */
	int paused;
	int unprivileged;        /* created by a non-root caller (user namespace) */
	int jail_pid;
	char **env;              /* NULL-terminated "KEY=VALUE", or NULL */
	struct lmeta_image image;
	char *snapshot;          /* a sandbox made from a snapshot: its directory (snapshot.h); NULL: none */
};

/* 1 when id is "sb-" followed by 16 lowercase hex digits. */
int lstate_valid_id(const char *id);

/* n random bytes from the kernel as 2n lowercase hex digits and a NUL in out. 0 or -errno. */
int lstate_random_hex(char *out, size_t n);

/* Reads dir/meta.json into m (zeroed first). 0 or -errno (-EINVAL: malformed). */
int lstate_meta_read(const char *dir, struct lmeta *m);
/* Writes m to dir/meta.json atomically. 0 or -errno. */
int lstate_meta_write(const char *dir, const struct lmeta *m);
/* Sets m->env to a copy of env (NULL or empty: none). 0 or -ENOMEM. */
int lstate_meta_set_env(struct lmeta *m, const char *const *env);
/* Frees m's strings (env, template, image). */
void lstate_meta_clear(struct lmeta *m);

/* Writes path via a temporary file and rename(2), with mode. 0 or -errno. */
int lstate_write_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* Writes s to an existing file (a cgroup control file) in one write. 0 or -errno. */
int lstate_write_str(const char *path, const char *s);
/* Reads a file of at most max bytes into a NUL-terminated malloc'd buffer; NULL with errno set. */
char *lstate_read_file(const char *path, size_t max, size_t *len);

/*
 * Removes name (relative to dirfd, or a path with AT_FDCWD) and everything
 * under it, never following symbolic links and never crossing into another
 * file system. A missing name is not an error. 0 or -errno (the first failure).
 */
int lstate_rmtree_at(int dirfd, const char *name);

/*
 * Opens directory name under dirfd ("." for dirfd's own, read afresh) to
 * read, never following a symbolic link: NULL with errno set, nothing left
 * open. closedir() closes it.
 */
DIR *lstate_opendir_at(int dirfd, const char *name);

/*
 * Appends "phase MONO_US\n" (now) to the timeline open on fd (-1: nothing
 * is recorded). One write, so marks from several processes do not mix.
 */
void lstate_timeline_mark(int fd, const char *phase);
/* The same, for a step that ended at at_us (CLOCK_MONOTONIC microseconds). */
void lstate_timeline_mark_at(int fd, const char *phase, int64_t at_us);
/* Opens dir/timeline for appending (close-on-exec), or -1. */
int lstate_timeline_open(const char *dir);
/*
 * Reads dir/timeline as one line of text, "phase +MS phase +MS ..." with
 * each step's milliseconds since the one before, into out. 0, or -1 (none).
 */
int lstate_timeline_text(const char *dir, char *out, size_t size);

/* The jail's pid from dir/jail.pid; 0 when there is none. */
int lstate_jail_pid(const char *dir);

/* 1 when pid is a live hangar-jail supervising sandbox id (guards against pid reuse). */
int lstate_is_jail(int pid, const char *id);
/* The first child of pid's main thread (/proc/PID/task/PID/children), or 0. */
int lstate_first_child(int pid);
/*
 * The jail's child that runs the sandbox (bwrap): its first child that is
 * not a fork of the jail itself. The jail's first child may be its cgroup
 * warm-up (a fork that never execs), still running or not yet reaped for a
 * moment after the create. 0 when there is none.
 */
int lstate_jail_child(int jail_pid);
