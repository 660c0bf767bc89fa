/*
 * hangar-jail: supervises one local sandbox.
 *
 *   hangar-jail -dir STATE_DIR/local/<id> -bwrap PATH -envd PATH -ready-fd FD
 *               -token-fd FD [-daemon]
 *
 * libhangar's local provider starts it with the sandbox's directory already
 * laid out (see libhangar/providers/local/lstate.h). It reads envd's access
 * token from the -token-fd pipe, detaches (-daemon), records its pid in
 * jail.pid, sets up a freezer cgroup for the sandbox, runs hangar-envd inside
 * bubblewrap (passing the ready fd on, so envd tells the library itself when
 * it listens, and handing the token over another pipe), and then waits for
 * one of: bwrap
 * exiting, SIGTERM (kill), or the expiry time in meta.json passing (re-read
 * on SIGHUP, which the library sends after changing it). On any of them it
 * thaws and kills every process of the sandbox, removes its cgroup and
 * removes the sandbox's directory.
 *
 * The token lives only in memory, never on disk: while it waits, the jail
 * serves it on jail.sock to whoever connects with its own uid (or root),
 * which is how the library learns it again after a restart. On ports.sock it
 * exposes the sandbox's TCP ports on the host's loopback when the library
 * asks (ports.c).
 *
 * The jail itself stays outside the freezer cgroup, so it can still tear
 * down a paused sandbox (and answer on jail.sock while it is paused).
 *
 * HANGAR_JAIL_FREEZER=auto|v2|v1|none (environment, default auto) picks the
 * freezer; "none" leaves pausing to SIGSTOP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <net/if.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

#define NET_DEADLINE_MS 5000

const char *jail_dir, *jail_id;
char jail_root[PATH_MAX];                            /* the directory holding every sandbox's */
struct uid_range jail_ids = { 0, 0, -1, 0, 0 }; /* the host ids behind the sandbox's (userns.c) */
struct limit_cgroups jail_lcg;                       /* memory, pids, cpu */
pid_t jail_slirp = -1;                               /* network "on": slirp4netns, the sandbox's way out */

/* 1 when the jail makes and maps the sandbox's user namespace itself (else bwrap makes one of the caller alone). */
int own_userns(void)
{
	return jail_ids.slot >= 0 || jail_ids.sub;
}

/*
 * As root: claims the sandbox's uid range. Unprivileged: the caller's
 * subordinate ids when it has them (the caller is root inside). Then makes
 * the seccomp filter. *uid and *gid: `user`'s ids as the sandbox sees them.
 */
static int prepare_sandbox(struct sbfds *f, struct uid_range *r, unsigned *uid, unsigned *gid, const char *envd)
{
	int rc;

	if (geteuid() == 0) {
		rc = uid_range_claim(jail_root, jail_id, r);
		if (rc < 0) {
			errno = -rc;
			return -1;
		}
		*uid = *gid = 1000;
	} else if (uid_range_subids(r) == 0) {
		if (!r->count) {
			errno = ENOSPC; /* every slot of the caller's subordinate ids is another sandbox's (said) */
			return -1;
		}
		*uid = *gid = 1000;
	} else {
		/* Said, so `hangar sandbox logs` tells why root is refused here. */
		say("sandbox %s has one uid, %u, for envd and every user (no subordinate ids for it: see "
		    "HANGAR_LOCAL_SUBIDS in hangar(1)): commands and file operations as root are refused",
		    jail_id, (unsigned)geteuid());
		*uid = (unsigned)geteuid();
		*gid = (unsigned)getegid();
	}
	f->seccomp = seccomp_filter_fd();
	return f->seccomp < 0 ? -1 : 0;
}

static void usage(void)
{
	fputs("usage: hangar-jail -dir DIR -bwrap PATH -envd PATH -ready-fd FD -token-fd FD [-daemon]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	const char *bwrap = NULL, *envd = NULL;
	int ready_fd = -1, token_fd = -1, envd_token = -1, daemon_ = 0, sfd, tfd, lfd, pfd, efd, status = 0, done = 0;
	int inner_fd;
	struct argv av = { 0 };
	struct sbfds fds = { -1, -1, -1 };
	int net_info[2] = { -1, -1 }, net_block[2] = { -1, -1 };
	const char *slirp_path = getenv("HANGAR_JAIL_SLIRP4NETNS");
	unsigned uid, gid;
	struct limits lim;
	char pidtext[32], path[PATH_MAX];
	struct lmeta m;
	sigset_t set;
	pid_t child;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-daemon"))
			daemon_ = 1;
		else if (i + 1 >= argc)
			usage();
		else if (!strcmp(argv[i], "-dir"))
			jail_dir = argv[++i];
		else if (!strcmp(argv[i], "-bwrap"))
			bwrap = argv[++i];
		else if (!strcmp(argv[i], "-envd"))
			envd = argv[++i];
		else if (!strcmp(argv[i], "-ready-fd"))
			ready_fd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-token-fd"))
			token_fd = atoi(argv[++i]);
		else
			usage();
	}
	if (!jail_dir || !bwrap || !envd || ready_fd < 0 || fcntl(ready_fd, F_GETFD) < 0 || token_fd < 0 ||
	    token_fd == ready_fd || fcntl(token_fd, F_GETFD) < 0)
		usage();
	jail_id = strrchr(jail_dir, '/');
	jail_id = jail_id ? jail_id + 1 : jail_dir;
	if (!lstate_valid_id(jail_id) || (size_t)(jail_id - jail_dir) >= sizeof(jail_root) || jail_id - jail_dir < 2) {
		say("%s does not end in a sandbox id", jail_dir);
		return 2;
	}
	memcpy(jail_root, jail_dir, (size_t)(jail_id - jail_dir - 1));

	if (daemon_) {
		/* Detach: the caller reaps this process at once; the sandbox lives on. */
		pid_t p = fork();

		if (p < 0) {
			say("fork: %s", strerror(errno));
			return 1;
		}
		if (p > 0)
			_exit(0);
		setsid();
	}
	/*
	 * Read here, after the fork: memory locks are not inherited. Not
	 * dumpable: no core file (nor same-uid ptrace) can carry the token off.
	 */
	prctl(PR_SET_DUMPABLE, 0);
	if (read_token(token_fd) < 0)
		return 2;
	/* Processes orphaned inside the sandbox come to us, to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
	if (sfd < 0 || tfd < 0) {
		say("signalfd/timerfd: %s", strerror(errno));
		return 1;
	}

	snprintf(pidtext, sizeof(pidtext), "%d\n", (int)getpid());
	snprintf(path, sizeof(path), "%s/jail.pid", jail_dir);
	if (lstate_write_atomic(path, pidtext, strlen(pidtext), 0600) < 0) {
		say("cannot write %s: %s", path, strerror(errno));
		return 1;
	}
	if (lstate_meta_read(jail_dir, &m) < 0) {
		say("cannot read %s/meta.json", jail_dir);
		lstate_rmtree_at(AT_FDCWD, jail_dir);
		return 1;
	}
	lfd = listen_unix(jail_dir, "jail.sock", 64);   /* where the library asks for the token again */
	if (lfd < 0) {
		say("cannot listen on %s/jail.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	pfd = ports_listen(jail_dir);
	if (pfd < 0) {
		say("cannot listen on %s/ports.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	/*
	 * envd's socket, bound here on the host's side of the sandbox: no path
	 * inside leads to it, so nothing in the sandbox (root, or a file
	 * operation made for root) can move it, replace it or put a link in
	 * its place. envd gets the listening descriptor.
	 */
	efd = listen_unix(jail_dir, "envd.sock", 512);
	if (efd < 0) {
		say("cannot listen on %s/envd.sock: %s", jail_dir, strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	envd_token = token_pipe();
	if (envd_token < 0) {
		say("cannot make the token pipe: %s", strerror(errno));
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	setup_cgroup();
	{
		char text[PATH_MAX + 16];

		if (!strcmp(cg_kind, "none"))
			snprintf(text, sizeof(text), "none\n");
		else
			snprintf(text, sizeof(text), "%s %s\n", cg_kind, cg_path);
		snprintf(path, sizeof(path), "%s/cgroup", jail_dir);
		lstate_write_atomic(path, text, strlen(text), 0600);
	}
	read_limits(&lim);
	if (m.network && geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0) {
		/*
		 * Refused, as the library refuses it before starting a jail: never
		 * loopback alone in place of what was asked for (nor the host's
		 * network).
		 */
		say("network on needs /dev/net/tun, which uid %u cannot open: sandbox %s not started",
		    (unsigned)geteuid(), jail_id);
		lstate_meta_clear(&m);
		jail_teardown(-1, 1);
		return 1;
	}
	if (m.network) {
		if (!slirp_path || !*slirp_path)
			slirp_path = "/usr/bin/slirp4netns";
		if (access(slirp_path, X_OK) < 0) {
			say("network on needs slirp4netns: %s: %s", slirp_path, strerror(errno));
			lstate_meta_clear(&m);
			jail_teardown(-1, 1);
			return 1;
		}
		if (pipe2(net_info, O_CLOEXEC) < 0 || pipe2(net_block, O_CLOEXEC) < 0) {
			say("pipe: %s", strerror(errno));
			lstate_meta_clear(&m);
			jail_teardown(-1, 1);
			return 1;
		}
	}
	limits_setup(&jail_lcg, &lim, jail_id, !strcmp(cg_kind, "v2") ? cg_path : NULL);
	snprintf(path, sizeof(path), "%s/limits", jail_dir);
	if (limits_record(jail_dir, &jail_lcg, &lim) < 0)
		say("cannot write %s: %s", path, strerror(errno));
	/* A descriptor number for the commands' namespace, which the child puts there. */
	inner_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (inner_fd < 0 || prepare_sandbox(&fds, &jail_ids, &uid, &gid, envd) < 0 || single_uid_network(&m) < 0 ||
	    build_bwrap_argv(&av, bwrap, envd, &m, ready_fd, envd_token, efd, &fds, own_userns(), uid, gid,
			     lim.shm_mb, lim.disk_mb, net_info[1], net_block[0], inner_fd,
			     own_userns() ? uid_range_top(&jail_ids) : 0) < 0) {
		say("cannot prepare sandbox %s: %s", jail_id, strerror(errno));
		lstate_meta_clear(&m);
		argv_free(&av);
		close_fds(&fds);
		jail_teardown(-1, 1);
		return 1;
	}
	{
		int keep[6] = { envd_token, fds.seccomp, efd };
		size_t nkeep = 3;

		if (m.network) {
			keep[nkeep++] = net_info[1];
			keep[nkeep++] = net_block[0];
		}
		keep[nkeep++] = ready_fd;
		child = spawn_bwrap(av.v, keep, nkeep, own_userns() ? &jail_ids : NULL, envd, lim.disk_mb, inner_fd);
	}
	close(inner_fd);
	close(efd); /* envd's now */
	lstate_meta_clear(&m);
	argv_free(&av);
	close_fds(&fds);
	if (net_info[1] >= 0) {
		close(net_info[1]);
		close(net_block[0]);
		if (child > 0)
			jail_slirp = net_setup(net_info[0], slirp_path, mono_ms() + NET_DEADLINE_MS);
		/*
		 * net_info[0] stays open for the jail's life: bubblewrap writes its
		 * --info-fd in several writes, the last ones after the child's pid
		 * that net_setup waited for, and a closed pipe there would kill it
		 * with SIGPIPE. A few hundred bytes: the pipe holds them unread.
		 */
		if (child > 0 && jail_slirp < 0) {
			close(net_block[1]);
			close(ready_fd);
			close(envd_token);
			jail_teardown(child, 0);
			return 1;
		}
		/* The network is ready: bwrap may start envd. */
		if (child > 0 && write(net_block[1], "n", 1) != 1)
			say("cannot release bwrap: %s", strerror(errno));
		close(net_block[1]);
	}
	/* Only envd keeps the ready pipe: the library sees EOF if it dies first. */
	close(ready_fd);
	close(envd_token);
	if (child < 0) {
		say("fork: %s", strerror(errno));
		jail_teardown(-1, 1);
		return 1;
	}
	if (!arm_timer(tfd)) {
		jail_teardown(child, 0);
		return 0;
	}

	while (!done) {
		struct pollfd p[4] = { { sfd, POLLIN, 0 }, { tfd, POLLIN, 0 }, { lfd, POLLIN, 0 }, { pfd, POLLIN, 0 } };

		if (poll(p, 4, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
				continue;
			switch (si.ssi_signo) {
			case SIGCHLD:
				if (reap(child, &status)) {
					if (WIFEXITED(status))
						say("sandbox %s ended: bwrap exited with %d", jail_id, WEXITSTATUS(status));
					else if (WIFSIGNALED(status))
						say("sandbox %s ended: bwrap killed by signal %d", jail_id, WTERMSIG(status));
					jail_teardown(child, 1);
					return 0;
				}
				break;
			case SIGHUP:
				if (!arm_timer(tfd))
					done = 1;
				break;
			default:
				say("sandbox %s killed", jail_id);
				done = 1;
				break;
			}
		}
		if (!done && (p[2].revents & POLLIN))
			serve_token(lfd);
		if (!done && (p[3].revents & POLLIN))
			ports_serve(pfd, child);
		if (!done && (p[1].revents & POLLIN)) {
			uint64_t ticks;

			if (read(tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
				continue;
			/* The library may have moved the expiry since: ask meta.json again. */
			if (!arm_timer(tfd)) {
				say("sandbox %s expired", jail_id);
				done = 1;
			}
		}
	}
	jail_teardown(child, 0);
	return 0;
}
