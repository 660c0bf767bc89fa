/*
 * hangar-jail's modules: what each offers the supervisor in hangar-jail.c.
 * Nothing here is shared with the library (the on-disk state is lstate.h).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* dir/name as a listening unix socket of this uid only (0600), non-blocking; -1 with errno. */
int listen_unix(const char *dir, const char *name, int backlog);

/* A growing NULL-terminated argument vector; out of memory ends the jail. */
struct argv {
	char **v;
	size_t n, cap;
};
void add(struct argv *a, const char *s);
void addf(struct argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void argv_free(struct argv *a);

/*
 * seccomp.c: the sandbox's seccomp filter, compiled to classic BPF in a
 * memfd positioned at its start (for bwrap --seccomp), or -1 with errno.
 */
int seccomp_filter_fd(void);

/*
 * userns.c: the host uid/gid range a sandbox's user namespace maps to (0..count-1
 * inside), one per sandbox, claimed under root/.uids/ (root: the directory
 * holding every sandbox's directory).
 */
struct uid_range {
	unsigned base, count;
	int slot;              /* the slot claimed (sub: of the caller's ranges); -1: none */
	/*
	 * 1: an unprivileged caller's own ids (uid_range_subids): 0 inside is
	 * the caller, 1..count inside are base.. (uids) and gid_base.. (gids)
	 * of its /etc/subuid and /etc/subgid ranges, mapped by newuidmap and
	 * newgidmap.
	 */
	int sub;
	unsigned gid_base;
};
/* Claims a free range for sandbox id. 0, or -errno with a message said. */
int uid_range_claim(const char *root, const char *id, struct uid_range *r);
/* Gives the range back (only when it is still id's; sub: lets go of the slot). */
void uid_range_release(const char *root, const char *id, const struct uid_range *r);
/*
 * Unprivileged: the caller's subordinate ids, when newuidmap and newgidmap
 * are installed and /etc/subuid and /etc/subgid give the caller ranges of at
 * least SUB_MIN ids: one slot of SUB_SLOT ids of each range per sandbox
 * (the whole range, if smaller, as the one slot), claimed for as long as the
 * jail lives (userns.c). 0, or -1 (the sandbox then runs as the caller
 * alone). 0 with count 0: every slot is in use, and uid_range_map refuses
 * (-ENOSPC), so the sandbox does not start.
 */
#define SUB_MIN 1001u  /* `user` is 1000 inside */
#define SUB_SLOT 1024u /* ids 1..1024 inside: `user`, system ids, the sandbox's root (1024) */
int uid_range_subids(struct uid_range *r);
/* 1 when the sandbox will have the jail's own user namespaces: a root caller, or subordinate ids. */
int uid_range_planned(void);
/*
 * RLIMIT_NPROC for the commands' namespace (uid_range_inner), 0: none.
 * limits_setup sets it when no pids cgroup holds the sandbox.
 */
extern unsigned uid_range_nproc;
/* Writes pid's uid_map and gid_map: 0..count-1 inside is base.. outside (sub: see
 * above). 0 or -errno. */
int uid_range_map(pid_t pid, const struct uid_range *r);
/* The highest id inside r's namespace: the sandbox's root in the commands' namespace below it. */
unsigned uid_range_top(const struct uid_range *r);
/*
 * From root of the sandbox's user namespace: the commands' namespace below
 * it (see userns.c), root inside being top, every other id 1..top-1 the
 * same as in the sandbox's. A descriptor for it (close-on-exec), or -1 with
 * errno.
 */
int uid_range_inner(unsigned top);

/*
 * etc.c: the sandbox's own /etc in dir/rootfs/etc: users and groups of its
 * own (uid and gid of `user`), no shadow files, the host's other regular
 * files copied; the host's subdirectories are added to a as read-only binds
 * over empty mount points. 0 or -errno.
 */
int etc_build(const char *dir, const char *id, unsigned user_uid, unsigned user_gid, int network, struct argv *a);

/* limits.c: memory, process and CPU limits in cgroups (v2 where the controller is there, else v1), or RLIMIT_NPROC. */
struct limits {
	unsigned memory_mb, pids, cpus, disk_mb, shm_mb;
};
#define LIMIT_CONTROLLERS 3 /* memory, pids, cpu */
struct limit_cgroups {
	char path[LIMIT_CONTROLLERS][4096]; /* "": no cgroup limits it */
	int v2[LIMIT_CONTROLLERS];
	char why[LIMIT_CONTROLLERS][1100];  /* path "": why not */
	unsigned nproc;                     /* no pids cgroup: RLIMIT_NPROC of the commands' namespace, or 0 */
};
/* What limits.c asks of the system; the unit test points it at a model of the kernel's files. */
struct limits_sys {
	const char *v1_root;                                /* the v1 hierarchies: /sys/fs/cgroup */
	const char *self_cgroup;                            /* the jail's cgroups: /proc/self/cgroup */
	int (*write)(const char *path, const char *value);  /* a cgroup file: 0 or -errno */
	int (*mkdir)(const char *path);                     /* a cgroup: 0 or -errno */
	int (*own_userns)(void);                            /* uid_range_planned */
	int (*ucounts)(void);                               /* 1: RLIMIT_NPROC counts per user namespace */
};
extern struct limits_sys limits_sys;
/*
 * HANGAR_JAIL_CGROUP (the library's HANGAR_LOCAL_CGROUP): a delegated cgroup
 * v2 directory holding no processes, for hangar-jail.c to make the
 * sandbox's cgroup in (BASE/hangar/ID), or NULL.
 */
const char *limits_v2_base(void);
/*
 * Makes and sets the cgroups; v2_cgroup: the sandbox's v2 cgroup, or NULL.
 * Says what it cannot limit, and why (c->why); sets uid_range_nproc.
 */
void limits_setup(struct limit_cgroups *c, const struct limits *l, const char *id, const char *v2_cgroup);
/* Moves pid into the v1 cgroups (before it leaves host root). 0 or -1 with errno. */
int limits_join(const struct limit_cgroups *c, pid_t pid);
/* Removes the v1 cgroups once empty. */
void limits_remove(const struct limit_cgroups *c);
/* Writes dir/limits for the library. 0 or -errno. */
int limits_record(const char *dir, const struct limit_cgroups *c, const struct limits *l);

/*
 * net.c: network "on". NET_DNS_ADDR is the sandbox's resolver (slirp4netns
 * forwards it to the host's). net_setup reads the sandbox's pid from bwrap's
 * info fd, starts slirp4netns on its network namespace and restricts its
 * routes; slirp4netns's pid (the caller's child, to kill at teardown), or -1
 * with a message said.
 */
#define NET_IF "tap0"
#define NET_GW "10.0.2.2"
#define NET_DNS_ADDR "10.0.2.3"
pid_t net_setup(int info_fd, const char *slirp, int64_t deadline_ms);

/* hangar-jail.c: wipes envd's token from this process's memory (children that need none call it). */
void forget_token(void);

/*
 * ports.c: exposing the sandbox's TCP ports on the host's 127.0.0.1.
 * ports_listen makes dir/ports.sock (non-blocking; -1 with errno);
 * ports_serve answers the requests pending on it (bwrap: the sandbox's
 * bwrap, whose child is in its namespaces); ports_stop kills every
 * forwarder.
 */
int ports_listen(const char *dir);
void ports_serve(int lfd, pid_t bwrap);
void ports_stop(void);

/* util.c */
int64_t now_us(void);
int64_t mono_ms(void);
int exists(const char *path);

/* hangar-jail.c: the sandbox the jail supervises */
extern const char *jail_dir, *jail_id;
extern char jail_root[];
extern struct uid_range jail_ids;
extern struct limit_cgroups jail_lcg;
extern pid_t jail_slirp;
int own_userns(void);

/* cgroup.c */
extern char cg_kind[8];
extern char cg_path[];
void setup_cgroup(void);
void thaw(void);
void kill_cgroup_members(int64_t deadline);

/* supervise.c */
int reap(pid_t watch, int *status);
void wait_gone(pid_t pid, int64_t deadline);
int arm_timer(int tfd);
void jail_teardown(pid_t bwrap, int bwrap_done);

/* token.c */
int read_token(int fd);
int token_pipe(void);
void serve_token(int lfd);

/* stage.c */
struct sbfds {
	int etc, envd, seccomp;
};
void close_fds(struct sbfds *f);
const char *stage(void);
int build_stage(const char *envd, const struct uid_range *r, unsigned disk_mb);

/* bwrap.c */
struct lmeta;
int build_bwrap_argv(struct argv *a, const char *bwrap, const char *envd, const struct lmeta *m,
		     int ready_fd, int envd_token_fd, int envd_listen_fd, const struct sbfds *f, int userns, unsigned uid,
		     unsigned gid, unsigned shm_mb, unsigned disk_mb, int info_fd, int block_fd, int inner_fd,
		     unsigned top);

/* spawn.c */
pid_t spawn_bwrap(char **argv, const int *keep, size_t nkeep, const struct uid_range *range,
		  const char *envd, unsigned disk_mb, int inner_at);

/* userns.c */
int wait_byte(int fd);
int enter_userns(int to_parent, int from_parent);
int inner_userns(const struct uid_range *r, int at);

/* net.c */
int own_netns(void);
int single_uid_network(const struct lmeta *m);

/* limits.c */
void read_limits(struct limits *l);
