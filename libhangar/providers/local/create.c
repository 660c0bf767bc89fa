/*
 * Creating a local sandbox: its directory laid out under a temporary name
 * and renamed into place, hangar-jail started with envd's token on a pipe,
 * and the wait for envd to say it is ready.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image/rootfs.h"
#include "util/clock.h"
#include "local.h"
#include "snapshot.h"

/* The last bytes of envd.log, made printable, for error messages. */
static void log_tail(int fd, char *out, size_t size)
{
	struct stat st;
	off_t from;
	ssize_t n;
	size_t want = size - 1;

	out[0] = '\0';
	if (fd < 0 || fstat(fd, &st) < 0)
		return;
	if (want > LOG_TAIL_BYTES)
		want = LOG_TAIL_BYTES;
	from = st.st_size > (off_t)want ? st.st_size - (off_t)want : 0;
	n = pread(fd, out, want, from);
	if (n <= 0)
		return;
	out[n] = '\0';
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (out[i] == '\n')
			out[i] = ';';
		else if ((unsigned char)out[i] < 0x20)
			out[i] = ' ';
}

/*
 * Lays out the sandbox's directory (still under its temporary name): its
 * record. What the sandbox writes lives in file systems of its own (memory,
 * limited in size), never here, and the jail keeps the sandbox's /etc
 * files in memory too where it can (hangar-jail's etc.c).
 */
static int lay_out(const char *dir, const struct lmeta *m)
{
	return lstate_meta_write(dir, m);
}

/* The sandbox's settings reach the jail as its environment: setting, then the jail's name for it. */
static const char *const jail_settings[][2] = {
	{ "HANGAR_LOCAL_FREEZER", "HANGAR_JAIL_FREEZER" },
	{ "HANGAR_LOCAL_MEMORY_MB", "HANGAR_JAIL_MEMORY_MB" },
	{ "HANGAR_LOCAL_PIDS", "HANGAR_JAIL_PIDS" },
	{ "HANGAR_LOCAL_CPUS", "HANGAR_JAIL_CPUS" },
	{ "HANGAR_LOCAL_DISK_MB", "HANGAR_JAIL_DISK_MB" },
	{ "HANGAR_LOCAL_UID_RANGE", "HANGAR_JAIL_UID_RANGE" },
	{ "HANGAR_LOCAL_NET_ALLOW", "HANGAR_JAIL_NET_ALLOW" },
	{ "HANGAR_LOCAL_SUBIDS", "HANGAR_JAIL_SUBIDS" },
	{ "HANGAR_LOCAL_CGROUP", "HANGAR_JAIL_CGROUP" },
	{ "HANGAR_LOCAL_ETC", "HANGAR_JAIL_ETC" },
};
#define JAIL_SETTINGS (sizeof(jail_settings) / sizeof(jail_settings[0]))

/* The jail's environment into envp (JAIL_SETTINGS + 2 entries), its strings in envbuf. */
static void jail_env(const struct local *l, char envbuf[JAIL_SETTINGS][1100], char **envp)
{
	size_t ne = 0;

	envp[ne++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
	for (size_t i = 0; i < JAIL_SETTINGS; i++) {
		const char *v = hangar_sys_ctx_setting(l->ctx, jail_settings[i][0]);

		if (v && *v && strlen(v) < 1024) {
			snprintf(envbuf[i], sizeof(envbuf[i]), "%s=%s", jail_settings[i][1], v);
			envp[ne++] = envbuf[i];
		}
	}
	envp[ne] = NULL;
}

/*
 * A pipe holding token, its write end closed before the spawn: the jail
 * reads it to EOF. A pipe holds far more than a token, so the write cannot
 * block. The read end, or -errno.
 */
static int token_pipe(const char *token)
{
	size_t tlen = strlen(token);
	int tp[2];

	if (pipe2(tp, O_CLOEXEC) < 0)
		return -errno;
	errno = 0;
	if (write(tp[1], token, tlen) != (ssize_t)tlen) {
		int e = errno ? errno : EIO;

		close(tp[0]);
		close(tp[1]);
		return -e;
	}
	close(tp[1]);
	return tp[0];
}

/*
 * Runs argv with envp, fds[i] as its descriptor i (0 to 4) and no other,
 * and an empty signal mask, then reaps it: the first jail process forks the
 * supervisor and exits at once. 0 or -errno.
 *
 * posix_spawn, not fork: glibc's shares the caller's memory with the
 * child until it execs (clone with CLONE_VM and CLONE_VFORK), so the
 * caller's pages are never made copy-on-write. After a fork, a large
 * caller (a Python interpreter, a server) pays a page fault for every
 * page it next writes to, hundreds per create.
 */
static int spawn_reaped(char *const *argv, char *const *envp, const int fds[5])
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	pid_t pid;
	int status, rc = posix_spawn_file_actions_init(&fa);

	sigemptyset(&none);
	if (rc == 0 && (rc = posix_spawnattr_init(&at)) != 0)
		posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	for (int i = 0; rc == 0 && i < 5; i++)
		rc = posix_spawn_file_actions_adddup2(&fa, fds[i], i);
	if (rc == 0 && (rc = posix_spawn_file_actions_addclosefrom_np(&fa, 5)) == 0 &&
	    (rc = posix_spawnattr_setsigmask(&at, &none)) == 0 &&
	    (rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK)) == 0)
		rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return -rc;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/*
 * Starts hangar-jail, detached, with ready_w as its fd 3, a pipe holding the
 * token as its fd 4, and log as its stdout and stderr. Everything the child
 * needs is prepared before the spawn.
 */
static int spawn_jail(const struct local *l, const char *dir, int ready_w, int log, const char *token)
{
	char *argv[] = { l->jail, "-dir", (char *)dir, "-state", l->root, "-bwrap", l->bwrap, "-envd", l->envd,
			 "-ready-fd", "3", "-token-fd", "4", "-daemon", NULL };
	char envbuf[JAIL_SETTINGS][1100], *envp[JAIL_SETTINGS + 2];
	int devnull, hi_ready, hi_log, hi_token, tp, r;

	jail_env(l, envbuf, envp);
	tp = token_pipe(token);
	if (tp < 0)
		return tp;
	/* Keep the child's descriptors clear of 0..4 so the dup2()s cannot collide. */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	hi_ready = fcntl(ready_w, F_DUPFD_CLOEXEC, 10);
	hi_log = fcntl(log, F_DUPFD_CLOEXEC, 10);
	hi_token = fcntl(tp, F_DUPFD_CLOEXEC, 10);
	close(tp);
	if (devnull < 0 || hi_ready < 0 || hi_log < 0 || hi_token < 0)
		r = -errno;
	else
		r = spawn_reaped(argv, envp, (const int[5]){ devnull, hi_log, hi_log, hi_ready, hi_token });
	if (devnull >= 0)
		close(devnull);
	if (hi_ready >= 0)
		close(hi_ready);
	if (hi_log >= 0)
		close(hi_log);
	if (hi_token >= 0)
		close(hi_token);
	return r;
}

/*
 * The ready pipe is written by envd ("ready\n", once it serves) and, with
 * network on, by the jail ("network\n", once the sandbox's network is up and
 * its routes restricted): they start side by side, and the sandbox is
 * nobody's until both said so. Whether what the pipe sent before any NUL
 * byte says it.
 */
static int said(const char *buf, size_t have, const char *what)
{
	return memmem(buf, strnlen(buf, have), what, strlen(what)) != NULL;
}

static int said_ready(const char *buf, size_t have)
{
	return said(buf, have, "ready\n");
}

static int said_ready_network(const char *buf, size_t have)
{
	return said_ready(buf, have) && said(buf, have, "network\n");
}

/* Reads what fd must say (see said()) before the deadline: 0, -ETIMEDOUT or -EPIPE (EOF). */
static int wait_ready(int fd, int network, int64_t deadline_ms)
{
	int (*done)(const char *, size_t) = network ? said_ready_network : said_ready;
	char buf[64];
	size_t have;
	int r = local_read_until(fd, buf, sizeof(buf) - 1, deadline_ms, done, &have);

	if (r < 0)
		return r;
	return done(buf, have) ? 0 : -EPIPE;
}

/* Stops a jail that started but whose sandbox never became ready. */
static void stop_jail(const char *dir, const char *id)
{
	int pid = lstate_jail_pid(dir), fd;

	if (pid <= 0)
		return;
	fd = local_pidfd_open(pid);
	if (fd < 0)
		return;
	if (lstate_is_jail(pid, id))
		local_pidfd_stop(fd);
	close(fd);
}

static int new_id(char *id)
{
	memcpy(id, "sb-", 3);
	return lstate_random_hex(id + 3, 8);
}

static int new_token(char *hex /* 65 */)
{
	return lstate_random_hex(hex, 32);
}

static char **strv_dup(char *const *v)
{
	size_t n = 0;
	char **out;

	while (v && v[n])
		n++;
	out = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			while (i-- > 0)
				free(out[i]);
			free(out);
			return NULL;
		}
	return out;
}

/*
 * The sandbox's template: "local" (the default), the host's /usr, or an
 * image of the store, found and locked in *img (the caller's to release
 * once the jail holds the lock itself) and recorded in m->image. 0, or an
 * error set.
 */
int local_find_template(const struct local *l, const char *name, struct lmeta *m, struct image_rootfs *img)
{
	struct lmeta_image *im = &m->image;
	char user[256];
	int r;

	if (!name || !*name || !strcmp(name, "local"))
		return 0;
	if (geteuid() != 0) {
		/*
		 * The image's files must be owned as its tars say, by ids the
		 * sandbox's users are: an unprivileged caller has such ids only
		 * as subordinate ids, whose last slot holds its layers
		 * (libhangar/image/subids.c). With one uid the sandbox's root
		 * could install nothing, and envd would own the image.
		 */
		const char *sub = hangar_sys_ctx_setting(l->ctx, "HANGAR_LOCAL_SUBIDS");
		unsigned need;

		if (!image_rootfs_subids(&need) ||
		    (sub && (!strcmp(sub, "off") || !strcmp(sub, "0") || !strcmp(sub, "false"))))
			return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0,
						"template \"%s\": local sandboxes from images need a root caller or, "
						"for uid %u, subordinate ids: at least %u uids in /etc/subuid and gids "
						"in /etc/subgid, newuidmap and newgidmap, and HANGAR_LOCAL_SUBIDS on "
						"(see hangar-images(7)); the \"local\" template works for every caller",
						name, (unsigned)geteuid(), need);
	}
	r = image_rootfs_get(l->ctx, name, img);
	if (r == HANGAR_ENOTFOUND)
		return hangar_sys_error(HANGAR_ENOTFOUND, 0, 0,
					"the local provider has no template or image \"%s\" (templates: local; images: "
					"see `hangar image list`)",
					name);
	/* Layers an unprivileged caller stored without its image range would show the sandbox nobody's files. */
	if (r == 0 && geteuid() != 0)
		r = image_rootfs_check_owners(img);
	if (r == 0)
		r = image_rootfs_user_name(img, user, sizeof(user));
	if (r < 0)
		return r;
	snprintf(im->digest, sizeof(im->digest), "%s", img->digest);
	im->layers = strv_dup(img->layers);
	im->env = strv_dup(img->env);
	im->workdir = strdup(img->workdir);
	im->user = strdup(user);
	im->use_lock = strdup(img->use_path);
	if (!im->layers || !im->env || !im->workdir || !im->user || !im->use_lock)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	return 0;
}

/*
 * A new sandbox's meta.json from opts, all but its id, jail and expiry: 0,
 * or an error set (the caller clears m and releases img either way).
 */
static int new_meta(const struct local *l, const struct hangar_create_opts *opts, struct lmeta *m,
		    struct image_rootfs *img, int *snap_fd)
{
	int r;

	if (opts->network == HANGAR_NETWORK_ON || opts->network == HANGAR_NETWORK_OFF) {
		m->network = opts->network == HANGAR_NETWORK_ON;
	} else {
		int32_t net = 1;

		hangar_sys_ctx_setting_bool(&net, l->ctx, "HANGAR_LOCAL_NETWORK");
		m->network = net != 0;
	}
	/*
	 * An unprivileged caller's way out (slirp4netns) needs the tun device:
	 * without it the sandbox would have loopback only, which is not what
	 * was asked for. Said now, rather than found out later.
	 */
	if (m->network && geteuid() != 0 && access("/dev/net/tun", R_OK | W_OK) < 0)
		return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, errno,
					"network on needs /dev/net/tun, which uid %u cannot open: ask for network "
					"off, set HANGAR_LOCAL_NETWORK=off, or make the device usable (mode 0666, "
					"as Debian has it)",
					(unsigned)geteuid());
	r = local_snapshot_valid_id(opts->template_id) ? local_snapshot_use(l, opts, m, img, snap_fd)
						       : local_find_template(l, opts->template_id, m, img);
	if (r < 0)
		return r;
	m->template_id = strdup(opts->template_id && *opts->template_id ? opts->template_id : "local");
	if (!m->template_id)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	m->created_at_us = clock_wall_us();
	m->timeout_sec = opts->timeout_sec > 0 ? opts->timeout_sec : 0;
	m->unprivileged = geteuid() != 0;
	if (lstate_meta_set_env(m, opts->env) < 0)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	return 0;
}

/*
 * Makes the sandbox's directory dir (DIR_MAX) with a new id in m->id. It is
 * laid out under a dot name, locked, then renamed into place: list() and
 * connect() never see a half-made sandbox as a dead one. 0 with the lock
 * held in *lock, or an error set and nothing left behind.
 */
static int make_dir(const struct local *l, struct lmeta *m, char *dir, int *lock)
{
	char tmpdir[DIR_MAX], path[PATH_MAX];
	int r;

	for (int tries = 0;; tries++) {
		if ((r = new_id(m->id)) < 0)
			return hangar_sys_error(HANGAR_EOS, 0, -r, "getrandom");
		snprintf(tmpdir, sizeof(tmpdir), "%s/.new-%s", l->run, m->id);
		local_sandbox_dir(dir, DIR_MAX, l, m->id);
		if (access(dir, F_OK) == 0 && tries < 8)
			continue;
		if (mkdir(tmpdir, 0700) == 0)
			break;
		if (errno != EEXIST || tries >= 8)
			return hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot create %s", tmpdir);
	}
	snprintf(path, sizeof(path), "%s/lock", tmpdir);
	*lock = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*lock < 0 || flock(*lock, LOCK_EX) < 0) {
		r = hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot lock %s", path);
		lstate_rmtree_at(AT_FDCWD, tmpdir);
		return r;
	}
	r = lay_out(tmpdir, m);
	if (r == 0 && rename(tmpdir, dir) < 0)
		r = -errno;
	if (r < 0) {
		r = hangar_sys_error(HANGAR_ECREATE, 0, -r, "cannot lay out sandbox directory %s", tmpdir);
		lstate_rmtree_at(AT_FDCWD, tmpdir);
		return r;
	}
	return 0;
}

/*
 * Starts the jail of sandbox id in dir and waits, until t0 +
 * READY_DEADLINE_MS, for envd to be ready. Hands the caller envd.log's
 * descriptor (*log) and the ready pipe's (*ready) to close. 0, or an error
 * set with the jail stopped and dir removed.
 */
static int start_jail(const struct local *l, const char *dir, const struct lmeta *m, const char *token, int64_t t0,
		      int timeline, int *log, int *ready)
{
	char path[PATH_MAX], tail[LOG_TAIL_BYTES + 1];
	const char *id = m->id;
	int pipefd[2], r;

	snprintf(path, sizeof(path), "%s/envd.log", dir);
	*log = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (*log < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		r = hangar_sys_error(HANGAR_ECREATE, 0, errno, "cannot create %s", path);
		lstate_rmtree_at(AT_FDCWD, dir);
		return r;
	}
	*ready = pipefd[0];
	r = spawn_jail(l, dir, pipefd[1], *log, token);
	lstate_timeline_mark(timeline, "jail-spawned");
	close(pipefd[1]);
	if (r < 0) {
		r = hangar_sys_error(HANGAR_ECREATE, 0, -r, "cannot start %s", l->jail);
		lstate_rmtree_at(AT_FDCWD, dir);
		return r;
	}
	r = wait_ready(*ready, m->network, t0 + READY_DEADLINE_MS);
	if (r < 0) {
		stop_jail(dir, id);
		/* The jail removes the directory; the log stays readable through our descriptor. */
		log_tail(*log, tail, sizeof(tail));
		lstate_rmtree_at(AT_FDCWD, dir);
		return hangar_sys_error(HANGAR_ECREATE, 0, 0, "local sandbox %s %s: %s", id,
					r == -ETIMEDOUT ? "did not become ready within 30 s" : "failed to start",
					*tail ? tail : "(envd.log is empty)");
	}
	return 0;
}

/* Running: records the jail and starts the clock. 0, or an error set with the sandbox stopped and removed. */
static int record_running(const char *dir, struct lmeta *m)
{
	int r;

	m->jail_pid = lstate_jail_pid(dir);
	m->expires_at_us = m->timeout_sec > 0 ? clock_wall_us() + m->timeout_sec * 1000000 : 0;
	r = lstate_meta_write(dir, m);
	if (r == 0 && m->jail_pid > 0)
		kill(m->jail_pid, SIGHUP); /* the expiry moved */
	if (r < 0) {
		stop_jail(dir, m->id);
		lstate_rmtree_at(AT_FDCWD, dir);
		return hangar_sys_error(HANGAR_ECREATE, 0, -r, "local sandbox %s: cannot write meta.json", m->id);
	}
	return 0;
}

/*
 * The warm pool's sandbox m, just started in dir: warmed (best effort: a
 * failed warm-up only leaves its first command slower) and put into the pool
 * open at pool_dfd, its id into id. 0, or an error with the sandbox gone.
 */
static int pool_put(struct local *l, int pool_dfd, const char *dir, const struct lmeta *m, const char *token,
		    char id[LSTATE_ID_LEN + 1])
{
	if (local_pool_warm(dir, token) < 0)
		hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: pooled sandbox %s could not be warmed", m->id);
	if (local_pool_put(l, pool_dfd, m->id) < 0) {
		int rc = hangar_sys_error(HANGAR_EOS, 0, errno, "cannot put sandbox %s into the pool", m->id);

		stop_jail(dir, m->id);
		lstate_rmtree_at(AT_FDCWD, dir);
		return rc;
	}
	memcpy(id, m->id, sizeof(m->id));
	return 0;
}

/* A sandbox started: described into out, or (out NULL, for the warm pool) its id into id. */
static int create_cold(struct local *l, const struct hangar_create_opts *opts, hangar_sys_sandbox *out,
		       char id[LSTATE_ID_LEN + 1], int pool_dfd)
{
	char dir[DIR_MAX], token[65];
	struct lmeta m = { 0 };
	struct image_rootfs img = { .use_fd = -1 };
	int lock = -1, log = -1, ready = -1, timeline = -1, snap_fd = -1, r, rc;
	int64_t t0_us = clock_mono_us(), t0 = t0_us / 1000;

	local_reap_jails();
	rc = new_meta(l, opts, &m, &img, &snap_fd);
	if (rc == 0 && (r = new_token(token)) < 0)
		rc = hangar_sys_error(HANGAR_EOS, 0, -r, "getrandom");
	if (rc == 0)
		rc = make_dir(l, &m, dir, &lock);
	/* The pool's: hidden from the first moment, so nobody lists a sandbox that is nobody's yet. */
	if (rc == 0 && !out && local_pool_mark(dir) < 0)
		rc = hangar_sys_error(HANGAR_EOS, 0, errno, "cannot mark sandbox %s as the pool's", m.id);
	if (rc == 0) {
		/* Where the time goes, step by step (lstate.h); the jail adds its own steps. */
		timeline = lstate_timeline_open(dir);
		lstate_timeline_mark_at(timeline, "create", t0_us);
		lstate_timeline_mark(timeline, "laid-out");
		rc = start_jail(l, dir, &m, token, t0, timeline, &log, &ready);
	}
	if (rc == 0) {
		lstate_timeline_mark(timeline, "envd-ready");
		rc = record_running(dir, &m);
	}
	if (rc == 0) {
		char steps[1024];

		lstate_timeline_mark(timeline, "recorded");
		if (lstate_timeline_text(dir, steps, sizeof(steps)) < 0)
			snprintf(steps, sizeof(steps), "no timeline");
		hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: sandbox %s ready in %.1f ms: %s", m.id,
			       (double)(clock_mono_us() - t0_us) / 1000.0, steps);
		if (out)
			rc = local_describe(l, dir, &m, token, m.jail_pid, out);
		else
			rc = pool_put(l, pool_dfd, dir, &m, token, id);
	}
	if (timeline >= 0)
		close(timeline);
	explicit_bzero(token, sizeof(token));
	if (ready >= 0)
		close(ready);
	if (log >= 0)
		close(log);
	local_unlock(lock);
	/* The jail holds the image's and the snapshot's use locks itself by now (or there is no sandbox). */
	image_rootfs_release(&img);
	if (snap_fd >= 0)
		close(snap_fd);
	/* A failed create's use of a released snapshot may have been the last (lsnapuse.h). */
	if (rc && m.snapshot)
		local_snapshot_reap(l, m.snapshot);
	lstate_meta_clear(&m);
	return rc;
}

/*
 * The caller's variables, checked before a pooled sandbox or a cold one is
 * given them (the core checked they are KEY=VALUE text): 0, or an error set.
 */
static int check_env(const char *const *env)
{
	for (const char *const *e = env; e && *e; e++)
		if (strlen(*e) > LOCAL_VAR_MAX)
			return hangar_sys_error(HANGAR_EINVAL, 0, 0, "opts->env: an entry is longer than 32 KiB");
	return 0;
}

int local_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	struct local *l = state;
	int rc = check_env(opts->env);

	if (rc == 0)
		rc = local_pool_claim(l, opts, out) == 1 ? 0 : create_cold(l, opts, out, NULL, -1);
	if (rc == 0)
		local_pool_refill(l, opts);
	return rc;
}

int local_create_pooled(struct local *l, const struct hangar_create_opts *opts, char id[LSTATE_ID_LEN + 1],
			int pool_dfd)
{
	return create_cold(l, opts, NULL, id, pool_dfd);
}
