/*
 * A local sandbox's lifecycle after create: kill, list, and the changes
 * made to meta.json under its lock (pause, resume, timeouts), which the jail
 * rereads on SIGHUP.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"
#include "snapshot.h"

int local_kill(void *state, const char *id)
{
	struct local *l = state;
	char dir[DIR_MAX], *snapshot = NULL;
	int pid = 0, fd = -1, r = local_find_alive(l, id, dir, sizeof(dir), &pid);
	struct lmeta m;

	if (r)
		return r;
	/* Made from a snapshot: this may be the last use of one released (snapshot.h). */
	if (lstate_meta_read(dir, &m) == 0) {
		snapshot = m.snapshot;
		m.snapshot = NULL;
		lstate_meta_clear(&m);
	}
	fd = local_pidfd_open(pid);
	if (fd < 0 || !lstate_is_jail(pid, id)) {
		if (fd >= 0)
			close(fd);
		local_clean_stale(l, id);
		free(snapshot);
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is already gone", id);
	}
	ltokens_forget(&l->tokens, id);
	if (local_pidfd_stop(fd))
		hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: sandbox %s did not stop in time; its supervisor was killed",
			       id);
	close(fd);
	if (access(dir, F_OK) == 0)
		local_clean_stale(l, id);
	/* The jail reaped it already if it could; an unprivileged one leaves the removal to us. */
	if (snapshot)
		local_snapshot_reap(l, snapshot);
	free(snapshot);
	return 0;
}

int local_list(void *state, hangar_sys_list *out)
{
	struct local *l = state;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	local_reap_jails();
	d = opendir(l->run);
	if (!d)
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, errno, "cannot read %s", l->run);
	while (rc == 0 && (de = readdir(d))) {
		char dir[DIR_MAX];
		struct lmeta m;
		hangar_sys_sandbox *sb;
		int pid;

		if (!lstate_valid_id(de->d_name))
			continue;
		local_sandbox_dir(dir, sizeof(dir), l, de->d_name);
		switch (local_liveness(dir, de->d_name, &pid)) {
		case LOCAL_CREATING:
			continue;
		case LOCAL_DEAD:
			local_clean_stale(l, de->d_name);
			continue;
		case LOCAL_ALIVE:
			break;
		}
		if (local_pool_hidden(dir)) {
			/* Waiting in the warm pool, nobody's sandbox yet; or left by a dead maker. */
			local_pool_orphan(l, dir, de->d_name);
			continue;
		}
		if (lstate_meta_read(dir, &m) < 0)
			continue; /* it went away meanwhile */
		sb = hangar_sys_list_add(out);
		if (!sb)
			rc = hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
		else if (local_describe(l, dir, &m, LOCAL_NO_TOKEN, pid, sb) != 0 && hangar_error_last()->code != HANGAR_EGONE)
			rc = hangar_error_last()->code;
		lstate_meta_clear(&m);
	}
	closedir(d);
	/* The clean-up of what dead jails left: snapshots released to go with their last sandbox. */
	local_snapshot_sweep(l);
	return rc;
}

/* Runs fn on the sandbox's meta.json under its lock, writes it back and tells the jail. */
static int locked_update(struct local *l, const char *id, int (*fn)(const char *id, const char *dir, int pid,
								   struct lmeta *m, void *arg),
			 void *arg, hangar_sys_sandbox *out)
{
	char dir[DIR_MAX];
	struct lmeta m;
	int pid = 0, lock, r = local_find_alive(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	lock = local_lock(dir, LOCK_EX);
	if (lock < 0)
		return errno == ENOENT ? hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id)
				       : hangar_sys_error(HANGAR_EOS, 0, errno, "local sandbox %s: cannot lock it", id);
	r = lstate_meta_read(dir, &m);
	if (r < 0) {
		local_unlock(lock);
		return local_meta_failed(id, r);
	}
	r = fn(id, dir, pid, &m, arg);
	if (r == 0) {
		int w = lstate_meta_write(dir, &m);

		if (w < 0)
			r = local_meta_failed(id, w);
		else if (!lstate_is_jail(pid, id))
			r = hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone", id);
		else
			kill(pid, SIGHUP);
	}
	if (r == 0 && out)
		r = local_describe(l, dir, &m, NULL, pid, out);
	local_unlock(lock);
	lstate_meta_clear(&m);
	return r;
}

static int do_pause(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int r;

	(void)arg;
	if (m->paused)
		return 0;
	r = local_set_frozen(id, dir, pid, 1);
	if (r)
		return r;
	m->paused = 1;
	m->expires_at_us = 0; /* the clock stops while paused */
	return 0;
}

static int do_resume(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int r;

	(void)arg;
	r = local_set_frozen(id, dir, pid, 0);
	if (r)
		return r;
	m->paused = 0;
	m->expires_at_us = m->timeout_sec > 0 ? clock_wall_us() + m->timeout_sec * 1000000 : 0;
	return 0;
}

static int do_set_timeout(const char *id, const char *dir, int pid, struct lmeta *m, void *arg)
{
	int64_t seconds = *(const int64_t *)arg;

	(void)id;
	(void)dir;
	(void)pid;
	/* The new lifetime also applies from each later resume. */
	m->timeout_sec = seconds > 0 ? seconds : 0;
	if (!m->paused)
		m->expires_at_us = seconds > 0 ? clock_wall_us() + seconds * 1000000 : 0;
	return 0;
}

int local_pause(void *state, const char *id)
{
	return locked_update(state, id, do_pause, NULL, NULL);
}

int local_resume(void *state, const char *id, hangar_sys_sandbox *out)
{
	return locked_update(state, id, do_resume, NULL, out);
}

int local_set_timeout(void *state, const char *id, int64_t seconds)
{
	if (seconds < 0 || seconds > 366LL * 86400)
		return hangar_sys_error(HANGAR_EINVAL, 0, 0, "timeout must be 0 to 366 days, not %lld s",
					(long long)seconds);
	return locked_update(state, id, do_set_timeout, &seconds, NULL);
}
