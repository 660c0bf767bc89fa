/*
 * hangar-envd internals shared by the daemon's modules.
 *
 * Threading: libmicrohttpd runs one thread per connection. RPC handlers run on
 * that thread and may block; server streams block inside their content
 * reader. Each started process has one supervisor thread (process.c), each
 * directory watch one inotify thread (watch.c).
 */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "connect.h"

struct MHD_Connection;
struct envd_req; /* request.h */

#define ENVD_VERSION "0.6.4"
#define ENVD_DEFAULT_PORT 49983
#define ENVD_RPC_BODY_MAX (16u << 20)       /* unary and stream request bodies */
#define ENVD_KEEPALIVE_DEFAULT 90           /* seconds, as upstream */
#define ENVD_KEEPALIVE_MIN 1
#define ENVD_KEEPALIVE_MAX 600
#define ENVD_EXIT_RETENTION_SEC 30
#define ENVD_IDLE_TIMEOUT_SEC 640
#define ENVD_TOKEN_MAX 1024
#define ENVD_VAR_MAX 32768                  /* one KEY=VALUE a claim sends, as a local create allows */
#define ENVD_VARS_BODY_MAX (2u << 20)       /* a claim's variables, as JSON (vars.c) */

/* Daemon-wide settings, fixed after start-up. */
struct envd_config {
	char *token;                /* NULL: open daemon */
	char *default_user;         /* user for requests without Basic auth */
	char *default_workdir;      /* NULL: the user's home */
	char **default_env;         /* "K=V" strings, NULL-terminated; read with envd_default_env() */
	int is_root;                /* may switch users */
	int verbose;
	/*
	 * -userns-fd, -root-id: the user namespace every process started for a
	 * user enters (see creds.h), -1 when none; root of it is root_id in
	 * the daemon's own namespace (0: no such namespace). caps: the
	 * daemon's own capabilities, the bounding set of those processes.
	 */
	int inner_userns;
	uid_t root_id;
	uint64_t caps;
	int cap_last;
	int single_uid;             /* -single-uid: commands as any uid but the daemon's are refused */
	const char *loader;         /* -loader: the dynamic loader the daemon was started with, or NULL */
};
extern struct envd_config envd_cfg;

/* One line on stderr with -v; nothing otherwise. */
void envd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- its own runtime (runtime.c) ------------------------------------ */

/*
 * Users, groups, hosts and every other Name Service Switch database from
 * /etc files alone, whatever /etc/nsswitch.conf says: no NSS module is ever
 * loaded (in an image sandbox it would come from the image). First thing in
 * main, in the daemon and in its workers.
 */
void envd_runtime_lock_nss(void);
/*
 * -loader PATH: the daemon runs under that dynamic loader, its libraries in
 * PATH's directory. Opens the loader and the directory, and finds the
 * daemon's own program, for checkpoint workers (found beside it) started
 * the same way. NULL: nothing to do. 0, or -1
 * said.
 */
int envd_runtime_init(const char *loader);
/* The descriptors envd_runtime_init opened (O_PATH); 1 when there is a loader, else 0. */
int envd_runtime_fds(int *loader, int *libdir);
/* Under -loader, the path of hangar-envd's own program; else NULL. */
const char *envd_runtime_program(void);

/* ---- what a Start request runs (plan.c) ------------------------------ */

struct envd_user; /* below */

/*
 * The program, its arguments, and hangar-envd's own timeout when it stands
 * in for timeout(1): the rules are plan.c's opening comment.
 */
struct envd_exec_plan {
	char *path;                 /* the executable; NULL: none (why says so when not just "not found") */
	char **argv;                /* malloc'd vector; its strings are the request's, or static */
	int timeout;                /* 1: hangar-envd is the timeout */
	int term_sig;               /* timeout: what is sent at term_ns (SIGTERM unless -s) */
	int64_t term_ns, kill_ns;   /* timeout: after the start, then after the signal; 0: never */
	char why[192];              /* "": the command is just not found */
};
/* Plans argv (argv[0] as asked, NULL-terminated) for u with envp's PATH. 0, or -1 out of memory. */
int envd_exec_plan(struct envd_exec_plan *p, char *const *argv, char *const *envp, const struct envd_user *u);
void envd_exec_plan_free(struct envd_exec_plan *p);
/* cmd itself when it has a slash, else the first executable file cmd on envp's PATH; malloc'd, or NULL. */
char *envd_resolve_command(const char *cmd, char *const *envp);

/* ---- errors ---------------------------------------------------------- */

struct rpc_error {
	enum connect_code code;
	char message[512];
};

/* Fills err and returns its code, so handlers can `return rpc_fail(...)`. */
int rpc_fail(struct rpc_error *err, enum connect_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The code for a failed file operation: permission_denied for EACCES and
 * EPERM (the request user may not do it), resource_exhausted for a full
 * file system, failed_precondition where the file system's state stands in
 * the way (read-only, another device, not empty, a link loop, ...), else
 * internal. */
enum connect_code envd_fs_code(int e);

/* ---- users and paths (user.c) ---------------------------------------- */

struct envd_user {
	char name[64];
	uid_t uid;
	gid_t gid;
	char home[256];
	char shell[128];
};

/* Looks a user up by name. 0 on success, -1 when unknown. */
int envd_user_lookup(const char *name, struct envd_user *out);

/*
 * Resolves a request path for a user, as envd does: empty → default
 * workdir or home; "~" and "~/x" → home; "~name" is refused; absolute paths
 * are used as given; relative ones join the home and are cleaned.
 * Returns 0, or -1 with err set to invalid_argument.
 */
int envd_resolve_path(const struct envd_user *u, const char *in, char *out, size_t outsz,
		      struct rpc_error *err);

/* The last element of path into out, as Go's filepath.Base: trailing slashes
 * ignored, "/" for the root, "." for "". */
void envd_base_name(const char *path, char *out, size_t outsz);

/* Lexically cleans an absolute path in place, as Go's filepath.Clean:
 * "//", "/./" and "/x/.." go; ".." never climbs above "/". */
void envd_clean_path(char *p);

/*
 * Creates every missing directory of path, mode 0755 (less the umask). They
 * belong to whoever the calling thread's file credentials say: run it in an
 * envd_creds_enter() scope (creds.h) for a request user, never chown after,
 * which would follow a link swapped in. 0 or -errno (-ENOTDIR when a
 * component is not a directory).
 */
int envd_ensure_dirs(const char *path);

/*
 * The child environment, later entries winning: PATH of the daemon, HOME,
 * USER and LOGNAME of the user, the daemon's default env, then extra
 * ("K=V" list, may be NULL). Returns a malloc'd NULL-terminated array whose
 * strings live in the same allocation; free() it once.
 */
char **envd_build_env(const struct envd_user *u, char *const *extra);

/* ---- server streams (stream.c) -------------------------------------- */

/*
 * A server stream: the producer (a process supervisor, a watcher, or the
 * handler itself) sends messages; the connection thread writes them out as
 * Connect envelopes, adds keepalives when the line is quiet, and notices a
 * client that went away. Reference-counted: one reference for the connection,
 * one per producer.
 */
struct envd_stream;

/* Sends one message (takes ownership of msg). Blocks while the client is more
 * than a few MiB behind. Returns 0, or -1 once the stream is closed or the
 * client is gone. */
int envd_stream_send(struct envd_stream *s, cJSON *msg);
/* Sends the end-of-stream envelope: {} for CONNECT_OK, else the error. The
 * first call wins; later ones are ignored. */
void envd_stream_end(struct envd_stream *s, enum connect_code code, const char *message);
void envd_stream_ref(struct envd_stream *s);
void envd_stream_unref(struct envd_stream *s);

/*
 * Called on the connection thread when the client disconnects or the stream
 * is otherwise finished, so the producer can drop its subscription. It runs
 * once, after which the stream's reference held by the connection is gone.
 */
typedef void (*envd_stream_detach_fn)(struct envd_stream *s, void *ctx);

/* Handler helpers: set how the stream behaves (before returning). */
void envd_stream_set_keepalive(struct envd_stream *s, const char *keepalive_json);
void envd_stream_set_deadline_ms(struct envd_stream *s, int64_t ms); /* ends with deadline_exceeded */
void envd_stream_set_detach(struct envd_stream *s, envd_stream_detach_fn fn, void *ctx);

/* ---- RPC tables ------------------------------------------------------ */

/* A unary method: fill *out (a new object) or return a code with err set. */
typedef int (*rpc_unary_fn)(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err);
/*
 * A server-streaming method: send messages on s (now or from another thread)
 * and end it; or return a non-zero code with err set, which ends the stream
 * with that error. The handler's own reference to s is released by the
 * caller after it returns: take one with envd_stream_ref() to keep it.
 */
typedef int (*rpc_stream_fn)(struct envd_req *r, const cJSON *in, struct envd_stream *s,
			     struct rpc_error *err);

struct rpc_method {
	const char *path;            /* "/process.Process/Start" */
	rpc_unary_fn unary;
	rpc_stream_fn stream;
};

extern const struct rpc_method process_methods[];
extern const struct rpc_method filesystem_methods[];

/* Daemon-wide start-up and shutdown of each service's state. */
int process_service_init(void);
void process_service_shutdown(void);
int filesystem_service_init(void);
void filesystem_service_shutdown(void);

struct MHD_Response;

/* ---- auth (auth.c) ---------------------------------------------------- */

/* Constant-time check of X-Access-Token. 1 when it matches (or no token is set). */
int envd_token_ok(const char *presented);
/*
 * Replaces the token, once in the daemon's life: 0, -EALREADY (it was
 * replaced before), -EPERM (an open daemon), -EINVAL (empty, too long, or
 * with spaces or control characters) or -ENOMEM.
 */
int envd_token_rotate(const char *fresh);
/* ---- the default variables (vars.c) ----------------------------------- */

/* The "K=V" list every command starts from, NULL-terminated: safe from any thread. */
char **envd_default_env(void);
/*
 * A claim's variables: body (len bytes, strict JSON {"env": ["K=V", ...]},
 * each entry KEY=VALUE of at most ENVD_VAR_MAX bytes) checked, and the list
 * that would be in force with them after the defaults, into *out (NULL
 * when there are none: an empty body or list). 0, -EINVAL with why set, or
 * -ENOMEM. Nothing changes until envd_vars_publish(*out).
 */
int envd_vars_prepare(const char *body, size_t len, char ***out, char *why, size_t whylen);
/* Puts list (from envd_vars_prepare) in force, once; NULL does nothing. */
void envd_vars_publish(char **list);

/*
 * The /files signature: "v1_" + unpadded standard base64 of
 * SHA-256("<path>:<op>:<user>:<token>[:<expiration>]"). expiration < 0 means none.
 * out must hold 48 bytes.
 */
void envd_files_signature(const char *path, const char *op, const char *user, const char *token,
			  int64_t expiration, char out[48]);
/*
 * Authorises a /files request (op "read" or "write"). Returns 0, or the HTTP
 * status to refuse with (401 or 400) and a message in msg.
 */
int envd_files_authorize(const struct envd_req *r, const char *op, char *msg, size_t msgsz);

/* GET /metrics and GET /envs bodies (misc.c); NULL on failure. */
struct MHD_Response *envd_metrics_response(void);
struct MHD_Response *envd_envs_response(void);

/* ---- user.e2b.* metadata (xattr.c) ---------------------------------- */

/* The user.e2b.* xattrs of path as a new JSON object with the prefix
 * stripped (non-printable entries skipped), or NULL when there are none. */
cJSON *envd_metadata_read(const char *path);
/*
 * Replaces the whole user.e2b.* set of path with keys[i]=values[i]. Returns 0;
 * -EINVAL when a key or value breaks the rules (printable ASCII, key ≤ 246
 * bytes, total ≤ 4096); -ENOSPC or -EDQUOT when the disk is full. A
 * filesystem without xattr support is not an error.
 */
int envd_metadata_write(const char *path, const char *const *keys, const char *const *values, size_t n);
/* The rules envd_metadata_write() holds keys and values to: 0, or -EINVAL with
 * the reason in msg (unless msg is NULL). */
int envd_metadata_check(const char *const *keys, const char *const *values, size_t n, char *msg, size_t msgsz);
