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
	static const char *const names[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char host[64], target[PATH_MAX];
		struct stat st;
		ssize_t n;

		snprintf(host, sizeof(host), "/%s", names[i]);
		if (lstat(host, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			n = readlink(host, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			add(a, "--symlink");
			add(a, target);
			add(a, host);
		} else if (S_ISDIR(st.st_mode)) {
			add(a, "--ro-bind");
			add(a, host);
			add(a, host);
		}
	}
}

/* /proc entries container runtimes hide: kernel memory, keys, timers, scheduler internals. */
/* /proc entries that change the kernel rather than one process: bound read-only. */
static const char *const proc_read_only[] = { "/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs",
					      "/proc/sysrq-trigger" };
static const char *const proc_masked[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
					   "/proc/sysrq-trigger" };

int build_bwrap_argv(struct argv *a, const char *bwrap, const char *envd, const struct lmeta *m,
			    int ready_fd, int envd_token_fd, int envd_listen_fd, const struct sbfds *f, int userns, unsigned uid,
			    unsigned gid, unsigned shm_mb, unsigned disk_mb, int info_fd, int block_fd, int inner_fd,
			    unsigned top)
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
	const char *envd_inside = envd;
	char src[PATH_MAX], rw[PATH_MAX];
	int r;

	/* Where bwrap finds the sandbox's own files: the stage, or its directory. */
	if (userns) {
		snprintf(src, sizeof(src), "%s", stage());
		snprintf(rw, sizeof(rw), "%s/rw", stage());
	} else {
		snprintf(src, sizeof(src), "%s", jail_dir);
		rw[0] = '\0';
	}

	add(a, bwrap);
	add(a, "--unshare-pid");
	add(a, "--unshare-ipc");
	add(a, "--unshare-uts");
	add(a, "--unshare-cgroup-try");
	/* "on": slirp4netns gives it a way out (net.c). With userns, the child made it (own_netns). */
	if (!userns)
		add(a, "--unshare-net");
	if (info_fd >= 0) {
		add(a, "--info-fd");
		addf(a, "%d", info_fd);
		add(a, "--block-fd");
		addf(a, "%d", block_fd);
	}
	if (!userns) {
		/* Unprivileged: a user namespace mapping the caller to itself, and none below it. */
		add(a, "--unshare-user");
		add(a, "--disable-userns");
		add(a, "--uid");
		addf(a, "%u", uid);
		add(a, "--gid");
		addf(a, "%u", gid);
	} else {
		/* bwrap runs as root of the namespace the child made (see spawn_bwrap). */
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
	addf(a, "%d", f->seccomp);
	add(a, "--ro-bind");
	add(a, "/usr");
	add(a, "/usr");
	add_usr_links(a);
	add(a, "--ro-bind");
	addf(a, userns ? "%s/etc" : "%s/rootfs/etc", src);
	add(a, "/etc");
	r = etc_build(jail_dir, m->id, uid, gid, m->network, a);
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
	add(a, "--dev");
	add(a, "/dev");
	/* bwrap's own /dev/shm is root's alone: a size-limited one for every user. */
	add(a, "--perms");
	add(a, "01777");
	add(a, "--size");
	addf(a, "%llu", (unsigned long long)shm_mb << 20);
	add(a, "--tmpfs");
	add(a, "/dev/shm");
	/* Made explicitly: bwrap would make parents of mount points 0700. */
	add(a, "--dir");
	add(a, "/home");
	add(a, "--dir");
	add(a, "/run");
	if (userns) {
		/* The sandbox's root's, on the size-limited file system. */
		add(a, "--bind");
		addf(a, "%s/root", rw);
		add(a, "/root");
	} else {
		add(a, "--perms");
		add(a, "0700");
		add(a, "--dir");
		add(a, "/root");
	}
	if (userns) {
		add(a, "--bind");
		addf(a, "%s/workspace", rw);
		add(a, "/workspace");
		add(a, "--bind");
		addf(a, "%s/home", rw);
		add(a, "/home/user");
		add(a, "--bind");
		addf(a, "%s/tmp", rw);
		add(a, "/tmp");
	} else {
		/*
		 * One uid, no stage: bubblewrap mounts them, each a file system of
		 * disk_mb (it cannot bind from one it made), so nothing the
		 * sandbox writes reaches the host's disk.
		 */
		static const char *const at[][2] = { { "/workspace", "0755" }, { "/home/user", "0755" },
						     { "/tmp", "01777" } };

		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			add(a, "--perms");
			add(a, at[i][1]);
			add(a, "--size");
			addf(a, "%llu", (unsigned long long)disk_mb << 20);
			add(a, "--tmpfs");
			add(a, at[i][0]);
		}
	}
	add(a, "--dir");
	add(a, "/var");
	add(a, "--symlink");
	add(a, "../tmp");
	add(a, "/var/tmp");
	/*
	 * envd's binary, in a small read-only file system for envd alone, where
	 * nothing can be planted, not even by a file operation envd makes for
	 * root. Its socket is not in the sandbox at all: the jail binds it on
	 * the host's side (envd.sock in the sandbox's directory, see main).
	 */
	add(a, "--perms");
	add(a, "0700");
	add(a, "--size");
	add(a, "65536");
	add(a, "--tmpfs");
	add(a, "/run/hangar");
	if (userns || strncmp(envd, "/usr/", 5) != 0) {
		envd_inside = "/run/hangar/hangar-envd";
		add(a, "--ro-bind");
		if (userns)
			addf(a, "%s/envd", src);
		else
			add(a, envd);
		add(a, envd_inside);
	}
	add(a, "--remount-ro");
	add(a, "/run/hangar");
	add(a, "--hostname");
	add(a, m->id);
	add(a, "--chdir");
	add(a, "/workspace");
	add(a, "--clearenv");
	add(a, "--setenv");
	add(a, "PATH");
	add(a, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	add(a, envd_inside);
	add(a, "-listen-fd");
	addf(a, "%d", envd_listen_fd);
	add(a, "-token-fd");
	addf(a, "%d", envd_token_fd);
	add(a, "-user");
	add(a, "user");
	add(a, "-workdir");
	add(a, "/workspace");
	add(a, "-env");
	add(a, "CI=true");
	for (char **e = m->env; e && *e; e++) {
		add(a, "-env");
		add(a, *e);
	}
	add(a, "-ready-fd");
	addf(a, "%d", ready_fd);
	if (userns) {
		/* Commands run in the namespace below envd's, as another uid (userns.c). */
		add(a, "-userns-fd");
		addf(a, "%d", inner_fd);
		add(a, "-root-id");
		addf(a, "%u", top);
	} else {
		/* One uid for everything: root would be envd itself (userns.c). */
		add(a, "-single-uid");
	}
	return 0;
}
