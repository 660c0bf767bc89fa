/*
 * hangar-jail: supervises one local sandbox.
 *
 *   hangar-jail -dir RUN_DIR/<id> [-state STATE_DIR/local] -bwrap PATH -envd PATH
 *               -ready-fd FD -token-fd FD [-daemon]
 *
 * libhangar's local provider starts it with the sandbox's directory already
 * laid out (see libhangar/providers/local/lstate.h) in the directory of
 * running sandboxes (rundir.c there), and names the state directory's
 * local/, where the templates of /etc are kept (by default the directory
 * above the sandbox's). It reads envd's access
 * token from the -token-fd pipe, detaches (-daemon), records its pid in
 * jail.pid, sets up a freezer cgroup for the sandbox, runs hangar-envd inside
 * bubblewrap (passing the ready fd on, so envd tells the library itself when
 * it listens, and handing the token over another pipe), and then waits for
 * one of: bwrap exiting, SIGTERM (kill), or the expiry time in meta.json
 * passing (re-read on SIGHUP, which the library sends after changing it). On
 * any of them it thaws and kills every process of the sandbox, removes its
 * cgroup and removes the sandbox's directory.
 *
 * The token lives only in memory, never on disk: while it waits, the jail
 * serves it on jail.sock to whoever connects with its own uid (root too is refused),
 * which is how the library learns it again after a restart. On ports.sock it
 * exposes the sandbox's TCP ports on the host's loopback when the library
 * asks (ports.c).
 *
 * The jail itself stays outside the freezer cgroup, so it can still tear
 * down a paused sandbox (and answer on jail.sock while it is paused).
 *
 * HANGAR_JAIL_FREEZER=auto|v2|v1|none (environment, default auto) picks the
 * freezer; "none" leaves pausing to SIGSTOP.
 *
 * main, here, fills one struct jail (jail.h) in named steps; the modules:
 *   token.c      envd's token: read, piped to envd, served on jail.sock
 *   cgroup.c     the freezer cgroup          limits.c   memory, pids, cpu
 *   userns.c     the sandbox's host ids and user namespaces
 *   net.c        network on (slirp4netns)    ports.c    exposed ports
 *   etc.c        the sandbox's /etc          seccomp.c  its seccomp filter
 *   image.c      an image sandbox's root: idmapped layers under a writable layer
 *   stage.c      its files, staged for bwrap bwrap.c    bwrap's command line
 *   spawn.c      the child that becomes bwrap
 *   supervise.c  the wait for the end, and the teardown
 *   util.c       messages, clocks, argument vectors, unix sockets
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

static void usage(void)
{
	fputs("usage: hangar-jail -dir DIR [-state DIR] -bwrap PATH -envd PATH -ready-fd FD -token-fd FD [-daemon]\n",
	      stderr);
	exit(2);
}

/* The command line into j; usage (exit 2) when it is not right. */
static void parse_args(struct jail *j, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-daemon"))
			j->daemon = 1;
		else if (i + 1 >= argc)
			usage();
		else if (!strcmp(argv[i], "-dir"))
			j->dir = argv[++i];
		else if (!strcmp(argv[i], "-state"))
			j->state = argv[++i];
		else if (!strcmp(argv[i], "-bwrap"))
			j->bwrap = argv[++i];
		else if (!strcmp(argv[i], "-envd"))
			j->envd = argv[++i];
		else if (!strcmp(argv[i], "-ready-fd"))
			j->ready_fd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-token-fd"))
			j->token_fd = atoi(argv[++i]);
		else
			usage();
	}
	if (!j->dir || !j->bwrap || !j->envd || j->ready_fd < 0 || fcntl(j->ready_fd, F_GETFD) < 0 ||
	    j->token_fd < 0 || j->token_fd == j->ready_fd || fcntl(j->token_fd, F_GETFD) < 0)
		usage();
}

/*
 * The sandbox's id (the directory's last component) and the directory above
 * it, which is also the state directory's local/ unless -state names that.
 * 0, or -1 said.
 */
static int name_sandbox(struct jail *j)
{
	const char *slash = strrchr(j->dir, '/');

	j->id = slash ? slash + 1 : j->dir;
	if (!lstate_valid_id(j->id) || (size_t)(j->id - j->dir) >= sizeof(j->root) || j->id - j->dir < 2) {
		say("%s does not end in a sandbox id", j->dir);
		return -1;
	}
	memcpy(j->root, j->dir, (size_t)(j->id - j->dir - 1));
	if (!j->state)
		j->state = j->root;
	return 0;
}

/* Detaches: the caller reaps this process at once; the sandbox lives on. 0, or -1 said. */
static int detach(void)
{
	pid_t p = fork();

	if (p < 0) {
		say("fork: %s", strerror(errno));
		return -1;
	}
	if (p > 0)
		_exit(0);
	setsid();
	return 0;
}

/* The token from the library's pipe, kept where nothing else can read it. 0, or -1 said. */
static int take_token(struct jail *j)
{
	/*
	 * Read here, after the fork: memory locks are not inherited. Not
	 * dumpable: no core file (nor same-uid ptrace) can carry the token off.
	 */
	prctl(PR_SET_DUMPABLE, 0);
	return token_read(j->token_fd);
}

/*
 * A signal its caller ignored stays ignored across every exec below it, and
 * one it blocked stays blocked: a daemon that ignores SIGCHLD left the jail
 * unable to wait for its network helper, and one that ignores SIGUSR1 or
 * SIGTERM handed that to every command. Back to the defaults, first thing.
 */
static void default_signals(void)
{
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			signal(sig, SIG_DFL);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Becomes the sandbox's subreaper; its signals and expiry timer become descriptors. 0, or -1 said. */
static int watch_signals(struct jail *j)
{
	sigset_t set;

	/* Processes orphaned inside the sandbox come to us, to be reaped. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	j->sfd = signalfd(-1, &set, SFD_CLOEXEC);
	j->tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC);
	if (j->sfd < 0 || j->tfd < 0) {
		say("signalfd/timerfd: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Writes jail.pid, by which the library knows the sandbox's jail. 0, or -1 said. */
static int record_pid(const struct jail *j)
{
	char pidtext[32], path[PATH_MAX];

	snprintf(pidtext, sizeof(pidtext), "%d\n", (int)getpid());
	snprintf(path, sizeof(path), "%s/jail.pid", j->dir);
	if (lstate_write_atomic(path, pidtext, strlen(pidtext), 0600) < 0) {
		say("cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * An image sandbox's use lock, taken while the library still holds its own
 * (it lets go once the sandbox is ready), so that no removal of the image
 * finds it unused in between. Held until the jail exits, however it exits.
 * 0, or -1 said.
 */
static int hold_image(struct jail *j)
{
	const char *path = j->meta.image.use_lock;

	if (!j->meta.image.digest[0])
		return 0;
	j->image_lock = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (j->image_lock < 0 || flock(j->image_lock, LOCK_SH | LOCK_NB) < 0) {
		say("cannot hold image %s's use lock %s: %s", j->meta.image.digest, path, strerror(errno));
		return -1;
	}
	return 0;
}

/* meta.json; without it there is no sandbox, and its directory goes. 0, or -1 said. */
static int read_meta(struct jail *j)
{
	if (lstate_meta_read(j->dir, &j->meta) < 0) {
		say("cannot read %s/meta.json", j->dir);
		lstate_rmtree_at(AT_FDCWD, j->dir);
		return -1;
	}
	if (hold_image(j) < 0 || snaplayer_hold(&j->meta) < 0) {
		lstate_meta_clear(&j->meta);
		lstate_rmtree_at(AT_FDCWD, j->dir);
		return -1;
	}
	return 0;
}

/* jail.sock, ports.sock, envd.sock and envd's token pipe. 0, or -1 said. */
static int open_channels(struct jail *j)
{
	j->lfd = listen_unix(j->dir, "jail.sock", 64); /* where the library asks for the token again */
	if (j->lfd < 0) {
		say("cannot listen on %s/jail.sock: %s", j->dir, strerror(errno));
		return -1;
	}
	j->pfd = ports_listen(j->dir);
	if (j->pfd < 0) {
		say("cannot listen on %s/ports.sock: %s", j->dir, strerror(errno));
		return -1;
	}
	/*
	 * envd's socket, bound here on the host's side of the sandbox: no path
	 * inside leads to it, so nothing in the sandbox (root, or a file
	 * operation made for root) can move it, replace it or put a link in
	 * its place. envd gets the listening descriptor.
	 */
	j->envd_listen = listen_unix(j->dir, "envd.sock", 512);
	if (j->envd_listen < 0) {
		say("cannot listen on %s/envd.sock: %s", j->dir, strerror(errno));
		return -1;
	}
	j->envd_token = token_pipe();
	if (j->envd_token < 0) {
		say("cannot make the token pipe: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* The freezer cgroup and the limits, recorded for the library, and the network's own checks. 0, or -1 said. */
static int confine(struct jail *j)
{
	freezer_setup(&j->freezer, j->id);
	freezer_record(&j->freezer, j->dir);
	mark("freezer");
	read_limits(&j->lim);
	if (net_prepare(j) < 0)
		return -1;
	mark("network-prepared");
	limits_setup(&j->lcg, &j->lim, j->id, freezer_v2(&j->freezer));
	if (limits_record(j->dir, &j->lcg, &j->lim) < 0)
		say("cannot write %s/limits: %s", j->dir, strerror(errno));
	return 0;
}

/* The sandbox's ids and seccomp filter, then bwrap's command line (j->spec, j->argv). 0, or -1 said. */
static int describe_sandbox(struct jail *j)
{
	/* A descriptor number for the commands' namespace, which the child puts there. */
	int inner_fd = open("/dev/null", O_RDONLY | O_CLOEXEC), seccomp_fd = -1, userns;
	unsigned uid = 0, gid = 0;

	mark("limits");
	if (inner_fd < 0)
		goto fail;
	/*
	 * An image sandbox of an unprivileged caller has its image range, not a
	 * slot of its own; so has a sandbox from its snapshot, whose files are
	 * owned there (snaplayer.c).
	 */
	if ((j->meta.image.digest[0] || j->meta.snapshot ? uid_range_pick_image(j->root, j->id, &j->ids, &uid, &gid)
							 : uid_range_pick(j->root, j->id, &j->ids, &uid, &gid)) < 0)
		goto fail;
	mark("ids");
	if ((seccomp_fd = seccomp_filter_fd()) < 0 || single_uid_network(&j->meta, uid_range_owned(&j->ids)) < 0)
		goto fail;
	mark("seccomp");
	userns = uid_range_owned(&j->ids);
	if ((j->meta.image.digest[0] || j->meta.snapshot) && (!userns || (j->ids.sub && !j->ids.image))) {
		/* uid_range_pick_image said why; an image's root needs ids its files can be owned by. */
		say("sandbox %s: an image's root needs a root caller or subordinate ids", j->id);
		errno = EPERM;
		goto fail;
	}
	j->spec = (struct jail_spec){
		.bwrap = j->bwrap, .envd = j->envd, .dir = j->dir, .state = j->state, .meta = &j->meta,
		.userns = userns, .uid = uid, .gid = gid, .top = userns ? uid_range_top(&j->ids) : 0,
		.shm_mb = j->lim.shm_mb, .disk_mb = j->lim.disk_mb,
		.ready_fd = j->ready_fd, .token_fd = j->envd_token, .listen_fd = j->envd_listen,
		/* With a user namespace of our own, the child makes the network namespace: no info needed. */
		.seccomp_fd = seccomp_fd, .info_fd = userns ? -1 : j->net_info[1],
		.inner_fd = inner_fd,
	};
	if (envd_beside_path(j->envd, ENVD_INIT_NAME, j->spec.init, sizeof(j->spec.init)) < 0)
		j->spec.init[0] = '\0';
	if (j->meta.image.digest[0]) {
		j->spec.image = &j->meta.image;
		j->spec.user = j->meta.image.user[0] ? j->meta.image.user : "user";
		j->spec.workdir = j->meta.image.workdir[0] ? j->meta.image.workdir : "/workspace";
		j->spec.image_env = j->meta.image.env;
	}
	if (bwrap_argv(&j->argv, &j->spec) < 0)
		goto fail;
	return 0;
fail:
	say("cannot prepare sandbox %s: %s", j->id, strerror(errno));
	argv_free(&j->argv);
	if (seccomp_fd >= 0)
		close(seccomp_fd);
	return -1;
}

/*
 * Starts bwrap, leaves envd what is its alone and (network on) gives the
 * sandbox its way out. 0, or -1 said, with the sandbox torn down.
 */
static int start_sandbox(struct jail *j)
{
	struct bwrap_pipes pipes;
	int rc;

	j->bwrap_pid = spawn_bwrap(j, &pipes);
	mark("spawned");
	j->ns_ready = spawn_bwrap_map(j, j->bwrap_pid, &pipes);
	mark("mapped");
	close(j->spec.inner_fd);
	close(j->envd_listen); /* envd's now */
	lstate_meta_clear(&j->meta);
	argv_free(&j->argv);
	close(j->spec.seccomp_fd);
	rc = net_start(j);
	if (j->ns_ready >= 0)
		close(j->ns_ready);
	j->ns_ready = -1;
	if (rc < 0) {
		close(j->ready_fd);
		close(j->envd_token);
		jail_teardown(j, 0);
		return -1;
	}
	/* Only envd keeps the ready pipe: the library sees EOF if it dies first. */
	close(j->ready_fd);
	close(j->envd_token);
	if (j->bwrap_pid < 0) {
		say("fork: %s", strerror(errno));
		jail_teardown(j, 1);
		return -1;
	}
	return 0;
}

/*
 * Static, not on main's stack: the jail's state is some 28 kB, mostly path
 * buffers of which the set-up writes the first bytes. Zeroed in .bss, only
 * the pages written cost memory; an initialised local would have every page
 * of it written (zeroed) for the jail's whole life.
 */
static struct jail j;

int main(int argc, char **argv)
{
	j.ready_fd = j.token_fd = j.sfd = j.tfd = j.lfd = j.pfd = -1;
	j.envd_listen = j.envd_token = j.image_lock = -1;
	j.freezer = (struct freezer)FREEZER_NONE;
	j.net_info[0] = j.net_info[1] = j.ns_ready = -1;
	j.ids = (struct uid_range)UID_RANGE_NONE;
	j.bwrap_pid = j.slirp = -1;
	j.born_us = clock_wall_us();

	parse_args(&j, argc, argv);
	if (name_sandbox(&j) < 0)
		return 2;
	timeline_open(j.dir);
	mark("jail");
	/*
	 * Before anything forks: every process of the sandbox inherits these.
	 * The modes the jail gives what it makes are its own (0644 for what
	 * the sandbox reads, 0600 for what is the caller's alone), not cut by
	 * a caller's umask 077 into files envd cannot read.
	 */
	umask(022);
	/*
	 * Nor its working directory, which the jail and bwrap would otherwise
	 * hold for the sandbox's whole life: a caller's directory on a file
	 * system to be unmounted would stay busy. Every path here is absolute.
	 */
	if (chdir("/") < 0)
		return 1;
	default_signals();
	if (limits_ordinary_priority() < 0 || limits_not_the_callers() < 0)
		return 1;
	if (j.daemon && detach() < 0)
		return 1;
	if (take_token(&j) < 0)
		return 2;
	if (watch_signals(&j) < 0)
		return 1;
	if (record_pid(&j) < 0 || read_meta(&j) < 0)
		return 1;
	mark("jail-ready");
	if (open_channels(&j) < 0 || confine(&j) < 0 || describe_sandbox(&j) < 0) {
		lstate_meta_clear(&j.meta);
		jail_teardown(&j, 1);
		return 1;
	}
	mark("described");
	if (start_sandbox(&j) < 0)
		return 1;
	mark("started");
	return supervise(&j);
}
