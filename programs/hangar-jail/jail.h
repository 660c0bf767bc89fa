/*
 * hangar-jail's modules: what each offers the others. main (hangar-jail.c)
 * fills one struct jail step by step and hands it to supervise().
 * Nothing here is shared with the library (the on-disk state is lstate.h).
 */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"   /* clock_wall_us() (meta.json's expiry), clock_mono_ms() (deadlines) */
#include "lstate.h"
#include "subids.h"

/* ---- util.c: small helpers every module uses ---- */

/*
 * Marks the end of a step of the sandbox's start in its timeline (the
 * directory's timeline file, lstate.h), from the jail or its child. Does
 * nothing before timeline_open().
 */
void timeline_open(const char *dir);
/* The timeline's descriptor, or -1, for a child that closes the rest. */
int timeline_descriptor(void);
void mark(const char *phase);

/* Says "hangar-jail: <message>" on stderr, which the library keeps as the sandbox's log. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* 1 when path exists (even unreadable), else 0. */
int exists(const char *path);
/* The top directories a merged /usr makes links of: bin, sbin, lib, ..., NULL-terminated. */
extern const char *const usr_tops[];
/* What the host's /name is: 'l' a symlink (its target into target), 'd' a directory, 0 neither. */
int host_top(const char *name, char *target, size_t size);

/* dir/name as a listening unix socket of this uid only (0600), non-blocking; -1 with errno. */
int listen_unix(const char *dir, const char *name, int backlog);

/* A growing NULL-terminated argument vector; out of memory ends the jail. */
struct argv {
	char **v;
	size_t n, cap;
};
/* Appends a copy of s. */
void add(struct argv *a, const char *s);
/* Appends the formatted string (at most PATH_MAX + 63 bytes). */
void addf(struct argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees every string and the vector, and leaves a empty. */
void argv_free(struct argv *a);

/* ---- seccomp-fd.c ---- */

/*
 * The sandbox's seccomp filter (seccomp.c), compiled to classic BPF at
 * build time, in a memfd positioned at its start (for bwrap --seccomp), or
 * -1 with errno.
 */
int seccomp_filter_fd(void);

/* ---- userns.c: the host ids behind the sandbox's user namespaces ---- */

/*
 * The host uid/gid range a sandbox's user namespace maps to (0..count-1
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
	/*
	 * 1 (sub only): the caller's image range (uid_range_image), shared by
	 * its image sandboxes and never claimed: 1..count-1 inside are
	 * base + 1.., count inside (the commands' root) is base.
	 */
	int image;
};
#define UID_RANGE_NONE { 0, 0, -1, 0, 0 } /* nothing claimed yet */
/*
 * As root: claims a free range of the pool, for as long as this process
 * lives or until uid_range_release, among the claims of every jail of the
 * host (in fallback/.uids, among this state's, when root's home cannot
 * hold them). 0, or -errno with a message said.
 */
int uid_range_claim(const char *fallback, struct uid_range *r);
/* Lets go of the range's slot (root's, or an unprivileged caller's). */
void uid_range_release(const struct uid_range *r);
/*
 * Unprivileged: the caller's subordinate ids, when newuidmap and newgidmap
 * are installed and /etc/subuid and /etc/subgid give the caller ranges of at
 * least SUB_MIN ids: one slot of SUB_SLOT ids of each range per sandbox
 * (the whole range, if smaller, as the one slot), claimed for as long as the
 * jail lives (userns.c). 0, or -1 (the sandbox then runs as the caller
 * alone). 0 with count 0: every slot is in use, and uid_range_map refuses
 * (-ENOSPC), so the sandbox does not start.
 */
#define SUB_MIN SUBIDS_MIN   /* `user` is 1000 inside (subids.h) */
#define SUB_SLOT SUBIDS_SLOT /* ids 1..1024 inside: `user`, system ids, the sandbox's root (1024) */
int uid_range_subids(struct uid_range *r);
/* 1 when the sandbox will have the jail's own user namespaces: a root caller, or subordinate ids. */
int uid_range_planned(void);
/*
 * The sandbox's ids: a claimed range (root caller), the caller's
 * subordinate ids, or the caller alone (said). *uid and *gid: `user`'s ids
 * as the sandbox sees them. 0, or -1 with errno.
 */
int uid_range_pick(const char *root, const char *id, struct uid_range *r, unsigned *uid, unsigned *gid);
/* 1 when the jail makes and maps the sandbox's user namespace itself (else bwrap makes one of the caller alone). */
int uid_range_owned(const struct uid_range *r);
/*
 * An unprivileged caller's image range (see userns.c): 0, or -1 said (no
 * subordinate ids, or fewer than two slots of them).
 */
int uid_range_image(struct uid_range *r);
/* uid_range_pick for an image sandbox: a root caller's as for any; an unprivileged one's image range. */
int uid_range_pick_image(const char *root, const char *id, struct uid_range *r, unsigned *uid, unsigned *gid);
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
 * As host root (a root caller's range): a user namespace that maps ids as
 * the commands' namespace does, seen from the host: 0 to the sandbox's root
 * (host base + top), every other id n below top to host base + n. Given to
 * an idmapped mount, it shows files owned by n on disk as owned by n to the
 * commands. A descriptor (close-on-exec), or -1 with errno.
 */
int uid_range_idmap(const struct uid_range *r);
/* Reads one byte from fd: 0, or -1 on EOF or an error. */
int wait_byte(int fd);
/* In the child: a new user namespace, mapped by the parent (a byte each way on the pipes), then root in it. 0 or -1 said. */
int enter_userns(int to_parent, int from_parent);
/* As root of the sandbox's namespace: the commands' namespace below it, on descriptor at. 0 or -1 said. */
int inner_userns(const struct uid_range *r, int at);

/* ---- etc.c ---- */

/*
 * The sandbox's /etc (etc.c): the shared template for the host's /etc as it
 * is now (built under dir's parent when missing, and held for the jail's
 * life), with the sandbox's own users, groups, names and resolver bound
 * over it, and the host's subdirectories bound read-only. Appends those
 * binds to a, the own files written to dir/rootfs/etc; staged (stage.c),
 * the child writes the own files into the stage, lays STAGE/etc out (an
 * overlay of them over the template over the host's /etc, or binds), and
 * a binds that. 0 or -errno.
 */
int etc_build(const char *dir, const char *state, const char *id, unsigned user_uid, unsigned user_gid, int network,
	      int stage, struct argv *a);
/*
 * Staged (etc_build's stage): the names of the host's /etc subdirectories,
 * which the stage binds when it cannot lay /etc out as an overlay. How many.
 */
size_t etc_host_dirs(char *const **names);
/* Staged: the names of the host's /etc the overlay hides (whiteouts over them). How many. */
size_t etc_hidden(char *const **names);
/* The template etc_build chose (a directory), or NULL before. */
const char *etc_template(void);
/* Writes text to dirfd/name (made 0644, or emptied first). 0 or -errno. */
int write_text_at(int dirfd, const char *name, const char *text);
/* The names of the sandbox's own /etc files, in *names; how many there are. */
size_t etc_own(int network, const char *const **names);
/* The text of own file i (etc_own's order) once etc_build made them, or NULL. */
const char *etc_own_text(size_t i);

/* ---- limits.c: memory, process and CPU limits in cgroups (v2 where the controller is there, else v1), or RLIMIT_NPROC ---- */

/* What the library asked for: MB of memory, processes, CPUs, MB of each writable file system, MB of /dev/shm. */
struct limits {
	unsigned memory_mb, pids, cpus, disk_mb, shm_mb;
};
#define LIMIT_CONTROLLERS 3 /* memory, pids, cpu */
/* The cgroups that hold the sandbox to its limits, one a controller, and why not where none does. */
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
extern struct limits_sys limits_sys; /* the real system's, unless a test replaced it */
/* The limits the library asked for (HANGAR_JAIL_*), each out-of-range value said and replaced by its default. */
void read_limits(struct limits *l);
/*
 * HANGAR_JAIL_CGROUP (the library's HANGAR_LOCAL_CGROUP): a delegated cgroup
 * v2 directory holding no processes, for cgroup.c to make the sandbox's
 * cgroup in (BASE/hangar/ID), or NULL.
 */
const char *limits_v2_base(void);
/*
 * Makes and sets the cgroups; v2_cgroup: the sandbox's v2 cgroup, or NULL.
 * Says what it cannot limit, and why (c->why); sets uid_range_nproc.
 */
void limits_setup(struct limit_cgroups *c, const struct limits *l, const char *id, const char *v2_cgroup);
/*
 * The jail's own cgroup of v1 controller, or with controller NULL its cgroup
 * v2 (the "0::" line), from /proc/self/cgroup (limits_sys.self_cgroup), into
 * out ("/" for a hierarchy's root). 0, or -1 when there is no such line or
 * its path is not absolute, has "..", or does not fit.
 */
int own_cgroup(const char *controller, char *out, size_t size);
/* The same from file, a process's cgroup file in /proc. */
int proc_cgroup(const char *file, const char *controller, char *out, size_t size);
/*
 * In the child, single-threaded, before it leaves host root: moves the
 * calling process into the v1 cgroups. 0 or -1 with errno.
 */
int limits_join(const struct limit_cgroups *c);
/* Removes the v1 cgroups once empty. */
void limits_remove(const struct limit_cgroups *c);

/* The jail's own scheduling, I/O priority, oom_score_adj and priority
 * rlimits brought down to the host's ordinary, for the sandbox to inherit. 0 or -1 said. */
int limits_ordinary_priority(void);
/* The jail's CPU affinity and the soft rlimits its caller lowered back to the host's defaults. 0 or -1 said. */
int limits_not_the_callers(void);

/* Writes dir/limits for the library. 0 or -errno. */
int limits_record(const char *dir, const struct limit_cgroups *c, const struct limits *l);

/* ---- cgroup.c: the freezer cgroup, where pausing freezes the sandbox ---- */

struct freezer {
	char kind[8];        /* "v2", "v1" or "none" (pausing is SIGSTOP) */
	char path[PATH_MAX]; /* kind not "none": the sandbox's cgroup */
};
#define FREEZER_NONE { "none", "" } /* before freezer_setup */
/* Makes sandbox id's freezer cgroup as HANGAR_JAIL_FREEZER allows (kind "none" when it cannot, said). */
void freezer_setup(struct freezer *f, const char *id);
/* The cgroup v2 path, for the limits to share, or NULL. */
const char *freezer_v2(const struct freezer *f);
/* The same below its hierarchy's root, as /proc/PID/cgroup names it ("/hangar/sb-..."), or NULL. */
const char *freezer_v2_relative(const struct freezer *f);
/* Writes dir/cgroup ("KIND PATH" or "none"), where the library finds it to pause the sandbox. */
void freezer_record(const struct freezer *f, const char *dir);
/* In the child: moves the calling process into the cgroup. 0, or -1 said. */
int freezer_join(const struct freezer *f);
/* Thaws the cgroup (a frozen task cannot die). */
void freezer_thaw(const struct freezer *f);
/* SIGKILLs every process still in the cgroup and waits for each until deadline (mono_ms). */
void freezer_kill(const struct freezer *f, int64_t deadline);
/* Removes the cgroup, and its hangar/ parent once no other sandbox is in it. */
void freezer_remove(const struct freezer *f);

/* ---- token.c: envd's access token, in memory only ---- */

/* Reads the token from fd (a pipe from the library) until EOF, and closes fd. 0, or -1 said. */
int token_read(int fd);
/* A pipe already holding the token and closed for writing: its read end, for envd (close-on-exec), or -1 with errno. */
int token_pipe(void);
/*
 * The library hands a pooled sandbox to its caller: NEW replaces the token
 * when OLD is the token in force (envd took NEW already). 0, or -1.
 */
int token_rotate(const char *old, const char *fresh);
/* Answers pending connections on jail.sock: the token to the jail's own uid, nothing to anyone else. Never blocks. */
void token_serve(int lfd);
/* Wipes the token from this process's memory (children that need none call it). */
void forget_token(void);

/* ---- bwrap.c: bubblewrap's command line for one sandbox ---- */

/* Everything bwrap's command line says about one sandbox, filled once. */
struct jail_spec {
	const char *bwrap;        /* bubblewrap, as run */
	const char *envd;         /* hangar-envd, on the host */
	const char *dir;          /* the sandbox's directory */
	const char *state;        /* the state directory's local/, which keeps the /etc templates */
	const struct lmeta *meta; /* its id, network and environment */
	int userns;               /* 1: the jail's own user namespaces and the stage; 0: bwrap's, of one uid */
	unsigned uid, gid;        /* `user` as the sandbox sees it */
	unsigned top;             /* userns: root of the commands' namespace (uid_range_top) */
	unsigned shm_mb, disk_mb; /* /dev/shm's size; that of each writable file system */
	int ready_fd;             /* envd says it listens on it (the library's) */
	int token_fd;             /* envd reads its token from it (token_pipe) */
	int listen_fd;            /* envd.sock, listening (the jail binds it) */
	int seccomp_fd;           /* the filter (seccomp_filter_fd) */
	int info_fd;              /* network on: bwrap's --info-fd; -1: off */
	int inner_fd;             /* userns: where the child puts the commands' namespace */
	char init[PATH_MAX];      /* hangar-envd-init on the host, the sandbox's pid 1; "": bwrap's own */
	/*
	 * The image the root is made of (image.c); NULL: the host's /usr, the
	 * `local` template. With an image, hangar-envd runs through a loader
	 * and libraries of its own (envdrt.c) and the image's
	 * /etc/ld.so.preload is hidden; nothing else of add_envd changes.
	 */
	const struct lmeta_image *image;
	/* What envd gets as the commands' defaults: */
	const char *user;         /* default user: the image's User, else `user` */
	const char *workdir;      /* default cwd: the image's WorkingDir, else /workspace */
	char *const *image_env;   /* the image's Env (NULL: none), before the caller's variables */
};
/* Appends bwrap's whole command line for s to a (as etc_build, it builds dir/rootfs/etc). 0 or -errno. */
int bwrap_argv(struct argv *a, const struct jail_spec *s);

/* ---- envdrt.c: hangar-envd's own loader and libraries, for image sandboxes ---- */

#define ENVD_RUNTIME_MAX 64
#define ENVD_RUNTIME_DIR "/run/hangar/lib" /* where the sandbox sees them */
struct envd_runtime {
	char loader[PATH_MAX];    /* the host's loader, hangar-envd's program interpreter */
	char loader_name[64];     /* its name in ENVD_RUNTIME_DIR */
	struct {
		char name[128];       /* the name hangar-envd's objects ask for (DT_NEEDED) */
		char path[PATH_MAX];  /* the host's file */
	} libs[ENVD_RUNTIME_MAX];
	size_t n;
};
/*
 * The loader and libraries hangar-envd at envd (a host path) and its
 * checkpoint worker beside it need, found on the host the first time and
 * kept for the jail's life. NULL said.
 */
const struct envd_runtime *envd_runtime_find(const char *envd);
/* hangar-envd's checkpoint worker, in the directory of envd (ckpt.h in hangar-envd). */
#define ENVD_WORKER_NAME "hangar-envd-archive"
/* The sandbox's pid 1, in the directory of envd (init_main.c in hangar-envd). */
#define ENVD_INIT_NAME "hangar-envd-init"
/*
 * The path of the program name beside envd into out: 0 when it is a regular
 * file there, -1 when not. Without the worker the sandbox starts and has no
 * checkpoints; without the init, bwrap's own pid 1 takes its place.
 */
int envd_beside_path(const char *envd, const char *name, char *out, size_t outsz);

/* ---- stage.c: the sandbox's files, staged for bwrap ---- */

/* The directory the stage is mounted on, in the child's mount namespace. */
const char *stage_dir(void);
/* In the child, in a mount namespace of its own: the stage for s, its files owned by r's ids. 0, or -1 said. */
int stage_build(const struct jail_spec *s, const struct uid_range *r);

/* ---- snaplayer.c: a sandbox from a snapshot ---- */

/* In the jail: holds the use lock of m's snapshot, if any, for the jail's life. 0, or -1 said. */
int snaplayer_hold(const struct lmeta *m);
/*
 * In the jail, at its end: lets go of that use lock and removes the
 * snapshot if it was released and this was its last use (lsnapuse.h).
 */
void snaplayer_release(void);
/* In the child, before the stage hides anything: the snapshot's layer (O_PATH) in *layer, -1 when none. 0, or -1. */
int snaplayer_open(const struct jail_spec *s, int *layer);
/*
 * In the child, as host root (or root of the sandbox's user namespace, in
 * an unprivileged caller's image range), once stage/rw is made: rw's
 * workspace, home, tmp and root as overlays over the snapshot's (layer,
 * which it closes).
 * Nothing when layer is -1. 0, or -1 said.
 */
int snaplayer_mount(const struct jail_spec *s, const struct uid_range *r, const char *stage, int layer);

/* ---- image.c: an image sandbox's root ---- */

/*
 * In the child, as host root in its own mount namespace, after the stage's
 * rw file system is mounted at stage/rw: the image's layers, each an
 * idmapped read-only mount, under a writable layer in stage/rw, merged at
 * stage/root, with the sandbox's users, names and mount points written into
 * that writable layer. 0, or -1 said.
 */
int image_root_build(const struct jail_spec *s, const struct uid_range *r, const char *stage);

/* ---- net.c: network "on" ---- */

/*
 * NET_DNS_ADDR is the sandbox's resolver (slirp4netns forwards it to the
 * host's). net_setup finds the sandbox's network namespace, starts
 * slirp4netns on it and restricts its routes: from_child (the jail's own
 * user namespace), the namespace is the child's, pid, made when fd (the
 * ns_ready of spawn_bwrap, -1 when the child was not let go on) says so,
 * before bwrap runs; else bwrap makes it, and its child's pid comes on fd,
 * bwrap's info fd. slirp4netns's pid (the caller's child, to kill at
 * teardown), or -1 with a message said.
 */
#define NET_IF "tap0"
#define NET_GW "10.0.2.2"
#define NET_DNS_ADDR "10.0.2.3"
pid_t net_setup(int fd, int from_child, pid_t pid, const char *slirp, int64_t deadline_ms);
/* Enters netns (first its owner userns, when >= 0): raw system calls, for a child. 0 or -1. */
int net_enter(int userns, int netns);

/* ---- routes.c: the sandbox's routes, over rtnetlink ---- */

enum net_route_kind {
	NET_ROUTE_LINK,         /* dst on the link (NET_IF), no gateway */
	NET_ROUTE_BLACKHOLE,    /* dst unreachable */
	NET_ROUTE_VIA,          /* dst through gateway on NET_IF */
};
struct net_route {
	enum net_route_kind kind;
	int replace;            /* replace a route to dst, else add (and fail if there is one) */
	uint32_t dst, gateway;  /* network byte order */
	int prefix;
};
/* The host's addresses and HANGAR_JAIL_NET_ALLOW's ranges included. */
#define NET_ROUTES_MAX 512
/*
 * In a child in the sandbox's network namespace (net_enter): removes the
 * main table's routes the kernel made (`ip route flush proto kernel`), then
 * adds routes in order. 0, or -1 with the failure said.
 */
int net_routes_apply(const struct net_route *routes, size_t n, const char *ifname, int userns, int netns);

/* As root of the sandbox's user namespace: its network namespace, loopback up, every port free to bind. 0, or -1 said. */
int own_netns(void);
/* Refuses network on to a sandbox of one uid, which slirp4netns cannot configure. 0, or -1 said with errno. */
int single_uid_network(const struct lmeta *m, int userns);

/* ---- ports.c: the sandbox's TCP ports on the host's 127.0.0.1 ---- */

/* Makes dir/ports.sock, listening and non-blocking; -1 with errno. */
int ports_listen(const char *dir);
/* Answers the requests pending on lfd (bwrap: the sandbox's bwrap, whose child is in its namespaces). */
void ports_serve(int lfd, pid_t bwrap);
/* Kills every forwarder. */
void ports_stop(void);

/* ---- the jail: hangar-jail.c fills it, the modules below act on it ---- */

/* One sandbox's jail: what main learns and makes, in the order it does. */
struct jail {
	const char *dir, *id;        /* the sandbox's directory (-dir) and id (its last component) */
	char root[PATH_MAX];         /* the directory holding every running sandbox's, and .uids */
	const char *state;           /* -state: the state directory's local/ (/etc templates); root if not given */
	const char *bwrap, *envd;    /* -bwrap, -envd */
	int ready_fd;                /* -ready-fd: envd's, to say it listens */
	int token_fd;                /* -token-fd, until the token is read */
	int daemon;                  /* -daemon: detach */
	int sfd, tfd;                /* signals, the expiry timer */
	int lfd, pfd;                /* jail.sock, ports.sock */
	int envd_listen, envd_token; /* envd.sock, envd's token pipe: envd's once bwrap runs */
	struct lmeta meta;           /* meta.json as it was at the start */
	int image_lock;              /* an image sandbox: its image's use lock, held shared until the jail ends */
	struct freezer freezer;      /* cgroup.c */
	struct limits lim;           /* what the library asked for */
	struct limit_cgroups lcg;    /* memory, pids, cpu */
	const char *slirp_path;      /* network on: slirp4netns */
	int net_info[2];             /* network on, no user namespace of our own: bwrap's --info-fd, read by net_setup */
	int ns_ready;                /* with one: the child's word that the network namespace is made (spawn_bwrap) */
	struct uid_range ids;        /* the host ids behind the sandbox's (userns.c) */
	struct jail_spec spec;       /* bwrap's command line */
	struct argv argv;            /* bwrap's command line, built */
	pid_t bwrap_pid;             /* -1: not started */
	pid_t slirp;                 /* network on: slirp4netns, the sandbox's way out; -1: none */
	int64_t born_us;             /* wall clock at the jail's start: the lifetime's origin until one is recorded */
};

/* The pipes between the jail and bwrap's child while it enters its user namespace (spawn.c). */
struct bwrap_pipes {
	int up[2], down[2];
};

/*
 * spawn.c: forks the child that joins j's cgroups and namespaces and runs
 * bwrap (j->argv). Its pid, or -1 with errno. spawn_bwrap_map must follow,
 * whatever the pid.
 */
pid_t spawn_bwrap(const struct jail *j, struct bwrap_pipes *p);

/*
 * spawn.c: with a user namespace of the jail's own (j->ids), maps the
 * child's and lets it go on; returns a pipe where the child writes one
 * byte once it has made the sandbox's network namespace (the caller's to
 * close), or -1 (no such namespace, or the child was not let go on). What
 * is left of p is closed either way.
 */
int spawn_bwrap_map(const struct jail *j, pid_t pid, struct bwrap_pipes *p);

/* net.c: network on, before bwrap: refuses what cannot be given, makes bwrap's info pipe. 0, or -1 said. */
int net_prepare(struct jail *j);
/* net.c: network on, once bwrap runs: starts slirp4netns (j->slirp), then says "network" on the ready pipe. 0, or -1 said. */
int net_start(struct jail *j);

/* supervise.c: reaps every exited child; 1 when watch was among them (its status in *status). */
int reap(pid_t watch, int *status);
/* supervise.c: waits until pid (a child, or reparented to the jail) has exited, or deadline (mono_ms) passed. */
void wait_gone(pid_t pid, int64_t deadline);
/* supervise.c: serves jail.sock and ports.sock until bwrap exits, SIGTERM, SIGINT or expiry; tears down; the exit code. */
int supervise(struct jail *j);
/* supervise.c: kills every process of the sandbox (bwrap_done: bwrap was reaped) and removes all the jail made for it. */
void jail_teardown(struct jail *j, int bwrap_done);
