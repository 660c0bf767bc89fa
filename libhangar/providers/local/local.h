/*
 * The local provider's own header: its instance, its deadlines, and what its
 * files share. local.c sets the provider up and holds its table; create.c
 * makes a sandbox, attach.c describes a live one, lifecycle.c kills, lists,
 * pauses and resumes, freezer.c freezes and empties cgroups, state.c finds a
 * sandbox's directory and tells a live jail from a dead one, limits.c and
 * ports.c answer for its limits and ports.
 */
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"
#include "lstate.h"
#include "pool.h"
#include "tokens.h"

/*
 * create: hangar-envd listening. A start is well under a second alone, but a
 * burst of creates on a small machine queues behind one another (user
 * namespace, cgroups, /etc, slirp4netns each): room for a hundred at once.
 */
#define READY_DEADLINE_MS 30000
#define KILL_DEADLINE_MS 15000    /* kill: the jail gone, its directory removed */
#define FREEZE_DEADLINE_MS 10000  /* pause and resume */
#define TOKEN_DEADLINE_MS 5000    /* the jail's answer on jail.sock */
#define PORTS_DEADLINE_MS 5000    /* and on ports.sock */
#define TOKEN_MAX 1024
#define LOCAL_VAR_MAX 32768       /* one of a create's variables, KEY=VALUE (hangar-envd's ENVD_VAR_MAX) */
#define LOG_TAIL_BYTES 2048
#define SOCKET_SUFFIX "/sb-0123456789abcdef/ports.sock" /* the longest of its sockets */
#define DIR_MAX 256               /* a sandbox directory: the socket rule keeps it under 108 */
/* HANGAR_LOCAL_RUN_DIR's longest base: BASE/hangar-<uid>/r-XXXXXX and SOCKET_SUFFIX fit a socket's path. */
#define RUN_BASE_MAX 48

struct local {
	hangar_ctx *ctx;
	char *root;    /* $HANGAR_STATE_DIR/local: snapshots, the /etc templates */
	char *run;     /* where running sandboxes' directories are: local/run's target, or root (rundir.c) */
	char *bwrap;   /* absolute */
	char *envd;    /* absolute, symlinks resolved */
	char *jail;    /* absolute */
	struct ltokens tokens;   /* envd's token of each jail met (tokens.h) */
	struct lpool *pool;      /* the warm pool's refill thread (pool.h) */
	/* The snapshots this context holds until it releases them (snapshot_held, snapshot.c). */
	pthread_mutex_t holds_lock;
	struct lhold *holds;
	size_t nholds;
};

/*
 * rundir.c: sets l->run, the directory of running sandboxes' directories, as
 * HANGAR_LOCAL_RUN_DIR says: on a tmpfs, named by root/run, or root itself.
 * 0, or an error set.
 */
int local_run_dir(struct local *l);

/* state.c: a sandbox's directory, its lock, its jail, and waiting on the jail */

/* The directory of sandbox id into buf; run's length was checked at init, so it always fits DIR_MAX. */
void local_sandbox_dir(char *buf, size_t size, const struct local *l, const char *id);
/* A pidfd of pid, or -1 with errno. */
int local_pidfd_open(int pid);
/*
 * reap.c: where this process is a child subreaper or its PID namespace's
 * init, and so the parent of the jails it starts, waits for those that
 * ended (and for nothing else).
 */
void local_reap_jails(void);
/* Sends sig to the process of pidfd: 0, or -1 with errno. */
int local_pidfd_signal(int pidfd, int sig);
/* 1 when pidfd's process was gone before deadline_ms (monotonic), else 0. */
int local_pidfd_wait(int pidfd, int64_t deadline_ms);
/*
 * Stops the jail of pidfd: SIGTERM, then SIGKILL if it is not gone within
 * KILL_DEADLINE_MS; waited for (local_reap_jails). 1 when it took SIGKILL.
 */
int local_pidfd_stop(int pidfd);
/*
 * Reads fd into buf until EOF (or a read error), until size bytes are in, or
 * until stop (NULL: never) says the *have bytes read are enough, but not
 * past deadline_ms (monotonic). 0, -ETIMEDOUT, or -errno when poll() fails;
 * *have counts what was read in every case.
 */
int local_read_until(int fd, char *buf, size_t size, int64_t deadline_ms, int (*stop)(const char *buf, size_t have),
		     size_t *have);
/* Opens and flocks dir/lock (how: LOCK_SH or LOCK_EX, maybe LOCK_NB); the fd, or -1 with errno. */
int local_lock(const char *dir, int how);
/* Releases a local_lock() lock; -1 is no lock. */
void local_unlock(int fd);

enum local_liveness { LOCAL_ALIVE, LOCAL_CREATING, LOCAL_DEAD };
/* Whether dir's jail lives (its pid in *jail_pid, 0 when none), is being made, or is dead. */
enum local_liveness local_liveness(const char *dir, const char *id, int *jail_pid);
/* Undoes what a dead jail left behind (cgroup, directory), unless someone holds its lock. */
void local_clean_stale(struct local *l, const char *id);
/*
 * Finds a running sandbox (its jail alive): 0 with its dir and jail pid, or
 * HANGAR_EGONE (cleaning up what a dead one left).
 */
int local_find_running(struct local *l, const char *id, char *dir, size_t size, int *jail_pid);
/* 0, or HANGAR_EGONE when m says the sandbox is past its lifetime (being torn down). */
int local_past_lifetime(const char *id, const struct lmeta *m);
/* local_find_running(), and HANGAR_EGONE too when it is past its lifetime. */
int local_find_alive(struct local *l, const char *id, char *dir, size_t size, int *jail_pid);
/* Sets the error of a failed meta.json read or write (-errno r) and returns its code. */
int local_meta_failed(const char *id, int r);

/* freezer.c: cgroups */

/* Thaws, kills, waits for and removes cgroup cg (v2: cgroup v2): 0, or -1 with errno. */
int local_remove_cgroup(int v2, const char *cg);
/* Freezes (frozen 1) or thaws the sandbox's processes, waiting until done: 0, or an error set. */
int local_set_frozen(const char *id, const char *dir, int jail_pid, int frozen);

/* attach.c: envd's token and the sandbox's description */

/* Connects to the jail's socket name in dir, whose peer must be jail_pid: 0 with *out, or an error set. */
int local_jail_connect(const char *dir, const char *id, int jail_pid, const char *name, int *out);
/* local_describe()'s token argument when the description is only listed, never used to connect. */
extern const char LOCAL_NO_TOKEN[];
/*
 * Describes sandbox m into out with known_token as envd's, or with the token
 * remembered or asked of the jail when it is NULL: 0, or an error set.
 */
int local_describe(struct local *l, const char *dir, const struct lmeta *m, const char *known_token, int jail_pid,
		   hangar_sys_sandbox *out);

/* The provider's slots; include/hangar/sys/provider.h says what each must do. */

int local_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out);       /* create.c */
/*
 * create.c: a sandbox for the warm pool, made cold and not described, put
 * into the pool open at pool_dfd before its lock is let go: its id into
 * id. 0, or an error set.
 */
int local_create_pooled(struct local *l, const struct hangar_create_opts *opts, char id[LSTATE_ID_LEN + 1],
			int pool_dfd);
int local_connect(void *state, const char *id, hangar_sys_sandbox *out);                            /* attach.c */
int local_kill(void *state, const char *id);                                                        /* lifecycle.c */
int local_list(void *state, hangar_sys_list *out);                                                  /* lifecycle.c */
int local_pause(void *state, const char *id);                                                       /* lifecycle.c */
int local_resume(void *state, const char *id, hangar_sys_sandbox *out);                             /* lifecycle.c */
int local_set_timeout(void *state, const char *id, int64_t seconds);                                /* lifecycle.c */
int local_expose_port(void *state, const char *id, uint32_t port, hangar_buf *out_addr);            /* ports.c */
int local_oom_kills(void *state, const char *id, uint64_t *out);                                    /* limits.c */
/* limits.c */
int local_metrics(void *state, const char *id, int (*fn)(const struct hangar_sandbox_metric *metric, void *payload),
		  void *payload);
int local_logs(void *state, const char *id, int (*fn)(const struct hangar_sandbox_log_entry *entry, void *payload),
	       void *payload);
