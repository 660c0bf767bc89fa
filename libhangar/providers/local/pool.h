/*
 * The local provider's warm pool (pool.c): sandboxes started ahead of time
 * for one set of create options (a create's variables are not among them),
 * handed out by local_create() instead of a cold start, and made again in
 * the background.
 *
 * In the directory of running sandboxes (l->run: rundir.c):
 *
 *   .pool/<key hash>/key       the options the pool is for (compared in full)
 *   .pool/<key hash>/fill.lock held by the one process filling it
 *   .pool/<key hash>/<id>      an empty file: sandbox <id> is waiting
 *   <id>/pooled                the sandbox is in the pool: list() hides it
 *
 * A claim is the unlink of .pool/<key hash>/<id>: one process wins it, on
 * this machine and across processes sharing the state directory. The winner
 * gives envd and the jail a new token (the one the pool was started with is
 * refused from then on), envd the caller's variables with it (the pool's
 * have none), writes the caller's variables and lifetime, and removes
 * pooled.
 */
#pragma once

#include "hangar/hangar.h"
#include "hangar/sys/provider.h"

struct local;

/* A sandbox waiting in the pool lives this long unless claimed, so a forgotten pool goes away. */
#define POOL_IDLE_SEC 3600

/*
 * Hands out a pooled sandbox for opts when one matches: 1 with out filled, 0
 * when the caller must create cold (nothing matched, or the pool is off),
 * never an error: a pooled sandbox that fails to be handed over is killed
 * and the next is tried, unless its envd refused the caller's variables. At HANGAR_MAX_SANDBOXES, a cold create first stops
 * one pooled sandbox of any options so the pool never keeps callers out.
 */
int local_pool_claim(struct local *l, const struct hangar_create_opts *opts, hangar_sys_sandbox *out);
/* Fills the pool for opts's options in a thread of the library, off the caller's path. */
void local_pool_refill(struct local *l, const struct hangar_create_opts *opts);
/* Marks sandbox directory dir as the pool's (hidden) as soon as it is laid out: 0, or -1 with errno. */
int local_pool_mark(const char *dir);
/* 1 when dir is a sandbox waiting in the pool (not to be listed). */
int local_pool_hidden(const char *dir);
/*
 * Puts sandbox id, just made and alive, into the pool open at dfd: its
 * maker calls it holding the sandbox's lock. 0, or -1 with errno.
 */
int local_pool_put(struct local *l, int dfd, const char *id);
/*
 * Runs one login shell (`bash -l -c true`, as the commands' default user)
 * in the new pooled sandbox in dir, whose envd takes token, and waits for
 * its end: the claimer's first command then finds the sandbox's /etc, its
 * libraries and the loader's lookups warm. The shell writes nothing, and
 * leaves nothing running. 0, or -1 (the sandbox is pooled all the same).
 */
int local_pool_warm(const char *dir, const char *token);
/*
 * Stops sandbox id (in dir, hidden as the pool's) when nobody works on it
 * and no pool holds it: what a pool create killed before it put its marker
 * leaves. 1 when it was stopped, else 0.
 */
int local_pool_orphan(struct local *l, const char *dir, const char *id);
/* Makes l->pool: 0, or -1 (out of memory). */
int local_pool_init(struct local *l);
/* Stops filling (the sandbox being made is finished) and frees l->pool. */
void local_pool_fini(struct local *l);
