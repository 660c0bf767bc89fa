/*
 * bubblewrap's command line for one sandbox: its namespaces, its file
 * systems and hangar-envd's own arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/* /bin, /lib, ... as the host has them: symlinks into /usr (merged /usr) or directories. */
static void add_usr_links(struct argv *a)
{
	for (const char *const *name = usr_tops; *name; name++) {
		char target[PATH_MAX];

		switch (host_top(*name, target, sizeof(target))) {
		case 'l':
			add(a, "--symlink");
			add(a, target);
			addf(a, "/%s", *name);
			break;
		case 'd':
			add(a, "--ro-bind");
			addf(a, "/%s", *name);
			addf(a, "/%s", *name);
			break;
		}
	}
}

/* /proc entries that change the kernel rather than one process: bound read-only. */
static const char *const proc_read_only[] = { "/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs",
					      "/proc/sysrq-trigger" };
/* /proc entries container runtimes hide: kernel memory, keys, timers, scheduler internals. */
static const char *const proc_masked[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
					   "/proc/sysrq-trigger" };

/* bwrap itself, the namespaces, the ids and capabilities, the seccomp filter. */
static void add_namespaces(struct argv *a, const struct jail_spec *s)
{
	static const char *const caps[] = {
		/*
		 * What envd needs as root to run commands and write files as
		 * other users; capabilities in the sandbox's own user namespace
		 * only, which give nothing over the host's files.
		 */
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
		"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_NET_BIND_SERVICE",
	};

	add(a, s->bwrap);
	add(a, "--unshare-pid");
	/* pid 1 is hangar-envd-init (init_main.c), not a second bwrap. */
	if (s->init[0])
		add(a, "--as-pid-1");
	add(a, "--unshare-ipc");
	add(a, "--unshare-uts");
	add(a, "--unshare-cgroup-try");
	/* "on": slirp4netns gives it a way out (net.c). With userns, the child made it (own_netns). */
	if (!s->userns)
		add(a, "--unshare-net");
	if (s->info_fd >= 0) {
		add(a, "--info-fd");
		addf(a, "%d", s->info_fd);
	}
	if (!s->userns) {
		/* Unprivileged: a user namespace mapping the caller to itself, and none below it. */
		add(a, "--unshare-user");
		add(a, "--disable-userns");
		add(a, "--uid");
		addf(a, "%u", s->uid);
		add(a, "--gid");
		addf(a, "%u", s->gid);
	} else {
		/* bwrap runs as root of the namespace the child made (see spawn.c). */
		add(a, "--cap-drop");
		add(a, "ALL");
		for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
			add(a, "--cap-add");
			add(a, caps[i]);
		}
	}
	add(a, "--die-with-parent");
	add(a, "--new-session");
	add(a, "--seccomp");
	addf(a, "%d", s->seccomp_fd);
}

/* The host's /usr, and the sandbox's /etc into etc (bound last: see add_etc). 0 or -errno. */
static int add_host_usr(struct argv *a, const struct jail_spec *s, struct argv *etc)
{
	add(a, "--ro-bind");
	add(a, "/usr");
	add(a, "/usr");
	add_usr_links(a);
	return etc_build(s->dir, s->state, s->meta->id, s->uid, s->gid, s->meta->network, s->userns, etc);
}

/*
 * The sandbox's /etc, after every other mount: bwrap reads the whole mount
 * table for each bind it makes, and /etc brings its tens of directories
 * into that table. Bound last, they are read once.
 */
static void add_etc(struct argv *a, struct argv *etc)
{
	for (size_t i = 0; i < etc->n; i++)
		add(a, etc->v[i]);
	argv_free(etc);
}

/*
 * Whether the stage made the whole root, /proc aside (stage.c): the host's
 * /usr with a stage (an image's root has its /dev and writable places
 * bound by bwrap).
 */
static int root_staged(const struct jail_spec *s)
{
	return s->userns && !s->image;
}

/* The root (the host's /usr, or the image's layers and the sandbox's writable layer), /proc and /dev. 0 or -errno. */
static int add_system(struct argv *a, const struct jail_spec *s, struct argv *etc)
{
	int r = 0;

	if (s->image) {
		/* Built by the child in the stage (image.c), its /etc included. */
		add(a, "--bind");
		addf(a, "%s/root", stage_dir());
		add(a, "/");
	} else if (root_staged(s)) {
		/* Its /etc's template and own files, for the stage; the stage's root binds it. */
		r = etc_build(s->dir, s->state, s->meta->id, s->uid, s->gid, s->meta->network, s->userns, etc);
		argv_free(etc);
		/* Devices: only where the stage put them (/dev's nodes, devpts); every mount there is nosuid. */
		add(a, "--dev-bind");
		addf(a, "%s/root", stage_dir());
		add(a, "/");
	} else {
		r = add_host_usr(a, s, etc);
	}
	if (r < 0)
		return r;
	add(a, "--proc");
	add(a, "/proc");
	for (size_t i = 0; i < sizeof(proc_masked) / sizeof(proc_masked[0]); i++)
		if (exists(proc_masked[i])) {
			add(a, "--ro-bind");
			add(a, "/dev/null");
			add(a, proc_masked[i]);
		}
	/*
	 * Read-only where the kernel's settings are, as container runtimes have
	 * it; the rest stays writable, so that a process can still make itself
	 * the OOM killer's first choice (envd's commands do, so that envd is
	 * the last). The sandbox's own view of each: sysctls answer for the
	 * namespaces of whoever reads them.
	 */
	for (size_t i = 0; i < sizeof(proc_read_only) / sizeof(proc_read_only[0]); i++)
		if (exists(proc_read_only[i])) {
			add(a, "--ro-bind");
			add(a, proc_read_only[i]);
			add(a, proc_read_only[i]);
		}
	if (root_staged(s))
		return 0; /* in the stage's root */
	if (s->userns) {
		/* Made in the stage (stage.c): one bind, where --dev makes nine mounts. */
		add(a, "--dev-bind");
		addf(a, "%s/dev", stage_dir());
		add(a, "/dev");
		return 0;
	}
	add(a, "--dev");
	add(a, "/dev");
	/* bwrap's own /dev/shm is root's alone: a size-limited one for every user. */
	add(a, "--perms");
	add(a, "01777");
	add(a, "--size");
	addf(a, "%llu", (unsigned long long)s->shm_mb << 20);
	add(a, "--tmpfs");
	add(a, "/dev/shm");
	return 0;
}

/* Where the sandbox writes: /root, /workspace, /home/user, /tmp, each of disk_mb; /var/tmp into /tmp. */
static void add_writable(struct argv *a, const struct jail_spec *s)
{
	if (root_staged(s))
		return; /* in the stage's root, /var/tmp too */
	/* Made explicitly: bwrap would make parents of mount points 0700. */
	add(a, "--dir");
	add(a, "/home");
	add(a, "--dir");
	add(a, "/run");
	if (s->userns) {
		/* The stage's size-limited file system: the sandbox's root's home, and its user's. */
		static const char *const at[][2] = { { "root", "/root" }, { "workspace", "/workspace" },
						     { "home", "/home/user" }, { "tmp", "/tmp" } };

		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			add(a, "--bind");
			addf(a, "%s/rw/%s", stage_dir(), at[i][0]);
			add(a, at[i][1]);
		}
	} else {
		/*
		 * One uid, no stage: bubblewrap mounts them, each a file system of
		 * disk_mb (it cannot bind from one it made), so nothing the
		 * sandbox writes reaches the host's disk.
		 */
		static const char *const at[][2] = { { "/workspace", "0755" }, { "/home/user", "0755" },
						     { "/tmp", "01777" } };

		add(a, "--perms");
		add(a, "0700");
		add(a, "--dir");
		add(a, "/root");
		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			add(a, "--perms");
			add(a, at[i][1]);
			add(a, "--size");
			addf(a, "%llu", (unsigned long long)s->disk_mb << 20);
			add(a, "--tmpfs");
			add(a, at[i][0]);
		}
	}
	if (s->image)
		return; /* the image's /var/tmp, in the sandbox's writable layer */
	add(a, "--dir");
	add(a, "/var");
	add(a, "--symlink");
	add(a, "../tmp");
	add(a, "/var/tmp");
}

/*
 * Image sandboxes: hangar-envd's loader and libraries (envdrt.c) under
 * ENVD_RUNTIME_DIR, read-only, from the host (the stage has them in its
 * /run/hangar already), and the
 * image's /etc/ld.so.preload hidden: the host's loader would load what it
 * lists into hangar-envd before main(). -errno said, or 0.
 */
static int add_envd_runtime(struct argv *a, const struct jail_spec *s, const struct envd_runtime **rt)
{
	*rt = envd_runtime_find(s->envd);
	if (!*rt)
		return -ENOEXEC;
	if (!s->userns) { /* with one, in the stage's /run/hangar already */
		/* Searchable by whichever user a worker runs as (ckpt.c opens it by descriptor, not by name). */
		add(a, "--perms");
		add(a, "0755");
		add(a, "--dir");
		add(a, ENVD_RUNTIME_DIR);
		add(a, "--ro-bind");
		add(a, (*rt)->loader);
		addf(a, ENVD_RUNTIME_DIR "/%s", (*rt)->loader_name);
		for (size_t i = 0; i < (*rt)->n; i++) {
			add(a, "--ro-bind");
			add(a, (*rt)->libs[i].path);
			addf(a, ENVD_RUNTIME_DIR "/%s", (*rt)->libs[i].name);
		}
	}
	add(a, "--ro-bind");
	add(a, "/dev/null");
	add(a, "/etc/ld.so.preload");
	return 0;
}

/*
 * How hangar-envd is started: its program (the local template, whose /usr
 * is the host's, may run it directly), or, in an image, the loader of its
 * own with its library directory alone (never the image's /etc/ld.so.cache),
 * told what it runs as and where the loader is, for the workers it starts.
 */
static void add_envd_program(struct argv *a, const struct envd_runtime *rt, const char *envd_inside)
{
	if (!rt) {
		add(a, envd_inside);
		return;
	}
	addf(a, ENVD_RUNTIME_DIR "/%s", rt->loader_name);
	add(a, "--library-path");
	add(a, ENVD_RUNTIME_DIR);
	add(a, "--inhibit-cache");
	add(a, "--argv0");
	add(a, "hangar-envd");
	add(a, envd_inside);
	add(a, "-loader");
	addf(a, ENVD_RUNTIME_DIR "/%s", rt->loader_name);
}

/*
 * envd's binary, in a small read-only file system for envd alone, where
 * nothing can be planted, not even by a file operation envd makes for
 * root: /run/hangar, made in the stage (stage.c) when there is one, with
 * its checkpoint worker, its init and (images) its runtime. Its socket is
 * not in the sandbox at all: the jail binds it on the host's side
 * (envd.sock in the sandbox's directory, see open_channels in
 * hangar-jail.c). Where envd is seen from inside, into *envd_inside; an
 * image's runtime into *rt. 0 or -errno.
 */
static int add_envd_files(struct argv *a, const struct jail_spec *s, const char **envd_inside,
			  const struct envd_runtime **rt)
{
	if (s->userns) {
		*envd_inside = "/run/hangar/hangar-envd";
		if (root_staged(s))
			return 0; /* in the stage's root */
		add(a, "--ro-bind");
		addf(a, "%s/hangar", stage_dir());
		add(a, "/run/hangar");
		return s->image && add_envd_runtime(a, s, rt) < 0 ? -ENOEXEC : 0;
	}
	add(a, "--perms");
	add(a, "0700");
	add(a, "--size");
	add(a, "65536");
	add(a, "--tmpfs");
	add(a, "/run/hangar");
	if (s->image || strncmp(s->envd, "/usr/", 5) != 0) {
		char worker[PATH_MAX];

		*envd_inside = "/run/hangar/hangar-envd";
		add(a, "--ro-bind");
		add(a, s->envd);
		add(a, *envd_inside);
		/*
		 * Its checkpoint worker beside it, where hangar-envd looks for it
		 * (a hangar-envd under /usr/ seen in place finds its own beside
		 * it). Without one the sandbox starts anyway and has no
		 * checkpoints: --ro-bind-try, since it may be gone by the time
		 * bwrap binds it.
		 */
		if (envd_beside_path(s->envd, ENVD_WORKER_NAME, worker, sizeof(worker)) == 0) {
			add(a, "--ro-bind-try");
			add(a, worker);
			add(a, "/run/hangar/" ENVD_WORKER_NAME);
		}
	}
	if (s->image && add_envd_runtime(a, s, rt) < 0)
		return -ENOEXEC;
	if (s->init[0]) {
		/* Static: it needs nothing of the image or the host's /usr. */
		add(a, "--ro-bind");
		add(a, s->init);
		add(a, "/run/hangar/" ENVD_INIT_NAME);
	}
	add(a, "--remount-ro");
	add(a, "/run/hangar");
	return 0;
}

/* envd's files, its environment and its own command line, last. 0 or -errno. */
static int add_envd(struct argv *a, const struct jail_spec *s, struct argv *etc)
{
	const struct envd_runtime *rt = NULL;
	const char *envd_inside = s->envd;

	if (add_envd_files(a, s, &envd_inside, &rt) < 0) {
		errno = ENOEXEC;
		return -ENOEXEC;
	}
	add_etc(a, etc);
	add(a, "--hostname");
	add(a, s->meta->id);
	add(a, "--chdir");
	add(a, "/workspace");
	add(a, "--clearenv");
	add(a, "--setenv");
	add(a, "PATH");
	add(a, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	if (s->init[0])
		add(a, "/run/hangar/" ENVD_INIT_NAME);
	add_envd_program(a, rt, envd_inside);
	add(a, "-listen-fd");
	addf(a, "%d", s->listen_fd);
	add(a, "-token-fd");
	addf(a, "%d", s->token_fd);
	add(a, "-user");
	add(a, s->user ? s->user : "user");
	add(a, "-workdir");
	add(a, s->workdir ? s->workdir : "/workspace");
	add(a, "-env");
	add(a, "CI=true");
	for (char *const *e = s->image_env; e && *e; e++) {
		add(a, "-env");
		add(a, *e);
	}
	for (char **e = s->meta->env; e && *e; e++) {
		add(a, "-env");
		add(a, *e);
	}
	add(a, "-ready-fd");
	addf(a, "%d", s->ready_fd);
	if (s->userns) {
		/* Commands run in the namespace below envd's, as another uid (userns.c). */
		add(a, "-userns-fd");
		addf(a, "%d", s->inner_fd);
		add(a, "-root-id");
		addf(a, "%u", s->top);
	} else {
		/* One uid for everything: root would be envd itself (userns.c). */
		add(a, "-single-uid");
	}
	return 0;
}

int bwrap_argv(struct argv *a, const struct jail_spec *s)
{
	struct argv etc = { 0 };
	int r;

	add_namespaces(a, s);
	r = add_system(a, s, &etc);
	if (r == 0) {
		add_writable(a, s);
		r = add_envd(a, s, &etc);
	}
	argv_free(&etc);
	return r;
}
