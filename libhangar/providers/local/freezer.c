/*
 * A local sandbox's cgroup from the library's side: frozen and thawed for
 * pause and resume (cgroup v2, v1, or SIGSTOP where it has no freezer), and
 * emptied and removed once its jail is dead.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"

struct freezer {
	char kind[4];        /* "v2", "v1" or "" (none: SIGSTOP) */
	char path[PATH_MAX];
};

static void read_freezer(const char *dir, const char *id, struct freezer *f)
{
	char path[PATH_MAX], *text;

	memset(f, 0, sizeof(*f));
	snprintf(path, sizeof(path), "%s/cgroup", dir);
	text = lstate_read_file(path, PATH_MAX + 8, NULL);
	if (!text)
		return;
	text[strcspn(text, "\n")] = '\0';
	if ((!strncmp(text, "v2 /", 4) || !strncmp(text, "v1 /", 4)) && strstr(text, id) && !strstr(text, "..") &&
	    strlen(text + 3) < sizeof(f->path)) {
		memcpy(f->kind, text, 2);
		strcpy(f->path, text + 3);
	}
	free(text);
}

/* cgroup v2: waits for "<key><want>" in cgroup.events, which notifies changes with POLLPRI. */
static int v2_wait_events(const char *cg, const char *key, int want, int64_t deadline)
{
	char path[PATH_MAX + 32], buf[512];
	int fd, r = -ETIMEDOUT;

	snprintf(path, sizeof(path), "%s/cgroup.events", cg);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		const char *v;
		struct pollfd p = { fd, POLLPRI, 0 };
		int64_t left;

		if (n < 0) {
			r = -errno;
			break;
		}
		buf[n] = '\0';
		v = strstr(buf, key);
		if (v && (v[strlen(key)] == '1') == (want == 1)) {
			r = 0;
			break;
		}
		left = deadline - clock_mono_ms();
		if (left <= 0)
			break;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
			r = -errno;
			break;
		}
	}
	close(fd);
	return r;
}

/*
 * cgroup v1 gives no notification: freezer.state reads FREEZING until every
 * task has stopped. Re-read it (each read also retries the freeze), pausing
 * on an empty poll() between reads, until FROZEN or the deadline.
 */
static int v1_wait_frozen(const char *cg, int64_t deadline)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/freezer.state", cg);
	for (int wait_ms = 1;; wait_ms = wait_ms < 50 ? wait_ms * 2 : 50) {
		char *s = lstate_read_file(path, 64, NULL);
		int frozen;

		if (!s)
			return -errno;
		frozen = !strncmp(s, "FROZEN", 6);
		free(s);
		if (frozen)
			return 0;
		if (clock_mono_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, wait_ms);
	}
}

/* The sandbox's processes on the host: those in bwrap's pid namespace, below the jail. */
static int signal_sandbox(int jail_pid, int sig)
{
	char path[128], link[64], ns[64] = "";
	struct dirent *de;
	DIR *d;
	int bwrap, inner, count = 0;

	bwrap = lstate_jail_child(jail_pid);
	if (bwrap <= 0)
		return -ESRCH;
	inner = lstate_first_child(bwrap);
	if (inner <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", inner);
	if (readlink(path, ns, sizeof(ns) - 1) <= 0)
		return -ESRCH;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		ssize_t n;

		if (*end || pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/ns/pid", pid);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, ns) == 0 && kill((pid_t)pid, sig) == 0)
			count++;
	}
	closedir(d);
	return count > 0 ? 0 : -ESRCH;
}

int local_set_frozen(const char *id, const char *dir, int jail_pid, int frozen)
{
	struct freezer f;
	char path[PATH_MAX + 32];
	int64_t deadline = clock_mono_ms() + FREEZE_DEADLINE_MS;
	int r;

	read_freezer(dir, id, &f);
	if (!strcmp(f.kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", f.path);
		r = lstate_write_str(path, frozen ? "1" : "0");
		if (r == 0)
			r = v2_wait_events(f.path, "frozen ", frozen, deadline);
	} else if (!strcmp(f.kind, "v1")) {
		snprintf(path, sizeof(path), "%s/freezer.state", f.path);
		r = lstate_write_str(path, frozen ? "FROZEN" : "THAWED");
		if (r == 0 && frozen)
			r = v1_wait_frozen(f.path, deadline);
	} else {
		r = signal_sandbox(jail_pid, frozen ? SIGSTOP : SIGCONT);
	}
	if (r == -ETIMEDOUT)
		return hangar_sys_error(HANGAR_ETIMEOUT, 0, 0, "local sandbox %s: %s did not finish within %d s", id,
					frozen ? "freezing" : "thawing", FREEZE_DEADLINE_MS / 1000);
	if (r < 0)
		return hangar_sys_error(HANGAR_EOS, 0, -r, "local sandbox %s: cannot %s it", id,
					frozen ? "freeze" : "thaw");
	return 0;
}

/*
 * Empties and removes a dead sandbox's cgroup: whatever is left in it
 * (processes of a sandbox whose supervisor was SIGKILLed die with it, but
 * not instantly) is thawed, killed and waited for first.
 */
int local_remove_cgroup(int v2, const char *cg)
{
	char path[PATH_MAX + 32];
	int64_t deadline = clock_mono_ms() + KILL_DEADLINE_MS;

	if (v2) {
		snprintf(path, sizeof(path), "%s/cgroup.freeze", cg);
		lstate_write_str(path, "0");
		snprintf(path, sizeof(path), "%s/cgroup.kill", cg);
		lstate_write_str(path, "1");
		v2_wait_events(cg, "populated ", 0, deadline);
	} else {
		snprintf(path, sizeof(path), "%s/freezer.state", cg);
		lstate_write_str(path, "THAWED");
		snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
		for (int again = 1; again && clock_mono_ms() < deadline;) {
			FILE *f = fopen(path, "re");
			int pid;

			again = 0;
			while (f && fscanf(f, "%d", &pid) == 1) {
				int fd = local_pidfd_open(pid);

				again = 1;
				if (fd < 0)
					continue;
				local_pidfd_signal(fd, SIGKILL);
				local_pidfd_wait(fd, deadline);
				close(fd);
			}
			if (f)
				fclose(f);
		}
	}
	if (rmdir(cg) < 0 && errno != ENOENT)
		return -1;
	return 0;
}
