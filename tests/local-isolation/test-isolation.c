/*
 * Local sandboxes as a hostile program inside one sees them: each test is an
 * attack that worked before the jail had a user namespace of its own, a
 * seccomp filter, its own /etc and limits, and must fail now.
 *
 * Every test runs twice: _i == 0 with the caller as root (as the README's
 * quick start does), _i == 1 with the caller as the unprivileged test user
 * `user` (skipped when not started as root). Commands run as root inside the
 * sandbox unless said otherwise: the E2B SDK can ask for that.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hangar/hangar.h>

#include "jail-test.h"
#include "leftovers.h"

/* A Python probe that prints "errno N" for a raw system call (numbers per architecture). */
#define PY_SYSCALL                                                                                        \
	"import ctypes, platform, sys\n"                                                                  \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                                      \
	"nr = {'x86_64': {'keyctl': 250, 'add_key': 248, 'open_by_handle_at': 304},\n"                   \
	"      'aarch64': {'keyctl': 219, 'add_key': 217, 'open_by_handle_at': 265}}[platform.machine()]\n"

/*
 * The shocker attack: a file handle for inode 2 (the root of an ext4 file
 * system) opened through a descriptor on a directory bound from the host's
 * file system. With CAP_DAC_READ_SEARCH on the host it opens the host's /.
 */
START_TEST(open_by_handle_at_fails)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "root",
	       "python3 -c \"" PY_SYSCALL
	       "import os, struct\n"
	       "fd = os.open('/usr', os.O_RDONLY)\n"
	       "h = ctypes.create_string_buffer(struct.pack('=II', 8, 1) + struct.pack('=II', 2, 0))\n"
	       "r = libc.syscall(nr['open_by_handle_at'], fd, h, os.O_RDONLY | os.O_DIRECTORY)\n"
	       "print('opened' if r >= 0 else 'errno %d' % ctypes.get_errno())\n\"",
	       "errno 1");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * The sandbox's pid 1 is hangar-envd-init, not a second bwrap: it reaps what
 * a command leaves orphaned, and nothing inside can end it (it has no
 * signal handler, and pid 1 takes no such signal from its own namespace;
 * commands run in a namespace below it anyway).
 */
START_TEST(pid_one_reaps_and_holds)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "user", "cat /proc/1/comm", "hangar-envd-ini"); /* comm keeps 15 bytes */
	/* An orphan: the shell is gone before its child ends, which pid 1 then reaps. */
	sh(sb, "user", "sh -c 'sleep 0.3 & exit 0'", &o);
	ck_assert_int_eq(o.exit_code, 0);
	expect(sb, "user",
	       "for i in $(seq 200); do"
	       "  z=$(grep -l '^State:.Z' /proc/[0-9]*/status 2>/dev/null | wc -l);"
	       "  [ \"$z\" = 0 ] && ! pgrep -x sleep >/dev/null && { echo reaped; exit 0; };"
	       "  sleep 0.05; done; echo \"left: $z zombies\"; ps -eo pid,ppid,stat,comm",
	       "reaped");
	/* Root in the sandbox signals pid 1 and envd's parent: the sandbox goes on. */
	sh(sb, "root", "kill -KILL 1; kill -TERM 1; kill -STOP 1; true", &o);
	expect(sb, "user", "echo alive", "alive");
	expect(sb, "user", "cat /proc/1/comm", "hangar-envd-ini");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(proc_is_read_only)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_ON);
	/* Per network namespace, so root of the sandbox's own namespace could write it were /proc writable. */
	sh(sb, "root", "echo 1 > /proc/sys/net/ipv4/ip_forward", &o);
	ck_assert_msg(o.exit_code != 0 && strstr(o.text, "Read-only"), "ip_forward: %d %s", o.exit_code, o.text);
	sh(sb, "root", "echo evil > /proc/sys/kernel/hostname", &o);
	ck_assert_msg(o.exit_code != 0, "kernel.hostname was writable");
	sh(sb, "root", "echo 1 > /proc/sys/user/max_user_namespaces", &o);
	ck_assert_msg(o.exit_code != 0, "user.max_user_namespaces was writable");
	/*
	 * A process may make itself the OOM killer's first choice, and commands
	 * start so (envd, at 0, stays the last); none goes below envd, nor
	 * makes itself unkillable.
	 */
	expect(sb, "user", "cat /proc/self/oom_score_adj", "100");
	expect(sb, "root", "cat /proc/self/oom_score_adj", "100");
	sh(sb, "root", "echo -1 > /proc/self/oom_score_adj", &o);
	ck_assert_msg(o.exit_code != 0, "root went below envd's oom_score_adj");
	sh(sb, "root", "echo -1000 > /proc/self/oom_score_adj", &o);
	ck_assert_msg(o.exit_code != 0, "root made itself unkillable");
	expect(sb, "user", "echo 1000 > /proc/self/oom_score_adj && cat /proc/self/oom_score_adj", "1000");
	/* Nor can it make envd the first choice. */
	expect(sb, "root", "P=$(pgrep -x hangar-envd); echo 1000 > /proc/$P/oom_score_adj || cat /proc/$P/oom_score_adj",
	       "0");
	sh(sb, "root", "echo 1 > /proc/sysrq-trigger", &o);
	ck_assert_msg(o.exit_code != 0, "/proc/sysrq-trigger was writable");
	expect(sb, "root", "test -s /proc/keys && echo visible || echo masked", "masked");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(no_nested_user_namespaces)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	/* The attack: a namespace of one's own where a tmpfs can be mounted. */
	sh(sb, "root", "unshare -Urm sh -c 'mount -t tmpfs none /mnt && echo mounted'", &o);
	ck_assert_msg(o.exit_code != 0 && !strstr(o.text, "mounted"), "unshare -Urm: %s", o.text);
	sh(sb, "user", "unshare -Urm sh -c 'mount -t tmpfs none /mnt && echo mounted'", &o);
	ck_assert_msg(o.exit_code != 0 && !strstr(o.text, "mounted"), "unshare -Urm as user: %s", o.text);
	sh(sb, "root", "mount -t tmpfs none /mnt && echo mounted", &o);
	ck_assert_msg(o.exit_code != 0 && !strstr(o.text, "mounted"), "mount: %s", o.text);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(keyring_not_shared)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	/* KEYCTL_GET_KEYRING_ID of KEY_SPEC_USER_KEYRING, and add_key to the session keyring. */
	expect(sb, "root",
	       "python3 -c \"" PY_SYSCALL
	       "r = libc.syscall(nr['keyctl'], 0, -4, 1)\n"
	       "print('keyring %d' % r if r >= 0 else 'errno %d' % ctypes.get_errno())\n\"",
	       "errno 1");
	expect(sb, "user",
	       "python3 -c \"" PY_SYSCALL
	       "r = libc.syscall(nr['add_key'], b'user', b'probe', b'x', 1, -3)\n"
	       "print('key %d' % r if r >= 0 else 'errno %d' % ctypes.get_errno())\n\"",
	       "errno 1");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(host_paths_unreachable)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char secret[PATH_MAX], cmd[PATH_MAX * 2];
	struct out o;
	FILE *f;

	if (!become_caller(_i))
		return;
	snprintf(secret, sizeof(secret), "%s/host-secret", state_dir);
	f = fopen(secret, "w");
	ck_assert_ptr_nonnull(f);
	fputs("hostsecret\n", f);
	fclose(f);
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	snprintf(cmd, sizeof(cmd), "cat %s", secret);
	sh(sb, "root", cmd, &o);
	ck_assert_msg(o.exit_code != 0 && !strstr(o.text, "hostsecret"), "host file read: %s", o.text);
	if (test_image()) {
		/* The image's own shadow files and users (its root's files are the sandbox's root's), never the host's. */
		static const char *const own[] = { "/etc/shadow", "/etc/gshadow", "/etc/subuid", "/etc/subgid", "/etc/sudoers" };

		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			expect_image_file(sb, own[i]);
		expect(sb, "root", "cut -d: -f1 /etc/passwd | grep -c -x -e root -e user -e nobody", "3");
		expect(sb, "root", "stat -c %U /usr/bin/env", "root");
	} else {
		/* No shadow file of any kind, and only the sandbox's own users. */
		expect(sb, "root", "ls /etc | grep -c -e shadow -e gshadow -e subuid -e subgid -e sudoers || true", "0");
		expect(sb, "root", "cut -d: -f1 /etc/passwd | tr '\\n' ' '", "root user nobody ");
		/* Its own files (made in the stage's memory) are not the sandbox's root's to change or uncover. */
		expect(sb, "root",
		       "for f in passwd group hosts hostname; do { echo x >> /etc/$f; } 2>/dev/null && echo wrote $f;"
		       " rm -f /etc/$f 2>/dev/null && echo removed $f; umount /etc/$f 2>/dev/null && echo unmounted $f;"
		       " done; cut -d: -f1 /etc/passwd | tr '\\n' ' '",
		       "root user nobody ");
		/* Nor is /etc itself (one overlay, or the binds): not remounted, unmounted or written. */
		expect(sb, "root",
		       "mount -o remount,rw /etc 2>/dev/null && echo remounted; umount -l /etc 2>/dev/null && echo unmounted;"
		       " touch /etc/planted 2>/dev/null && echo planted; mknod /etc/passwd- c 0 0 2>/dev/null && echo made;"
		       " ls -A /etc | grep -c -x -e planted -e passwd- -e .pwd.lock -e shadow || true",
		       "0");
		/* Sandbox root is no host uid that owns anything: the host's root-only files stay closed. */
		expect(sb, "root", "stat -c %U /usr/bin/env", "nobody");
	}
	sh(sb, "root", "awk '$1 == 0 && $2 == 0' /proc/self/uid_map | grep -q . && echo host-root", &o);
	ck_assert_msg(!strstr(o.text, "host-root"), "root inside is host root: %s", o.text);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * The host ids behind sb's user namespace, as the host sees them: its
 * bwrap's uid_map (the jail's child named bwrap).
 */
static int sandbox_bwrap(hangar_sandbox *sb)
{
	char path[PATH_MAX];
	int jail = 0, bwrap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), hangar_sandbox_id(sb));
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	bwrap = proc_child_named(jail, "bwrap");
	ck_assert_int_gt(bwrap, 0);
	return bwrap;
}

static void sandbox_uid_map(hangar_sandbox *sb, char *map, size_t size)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/uid_map", sandbox_bwrap(sb));
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(map, (int)size, f));
	fclose(f);
}

/*
 * The root laid out around the sandbox's mounts is envd's, as bwrap's own
 * was when bwrap made it: /, /home, /run, /var, /var/tmp and the links
 * beside /usr belong, seen from the host, to the id the sandbox's user
 * namespace maps 0 to (an image's root is laid out by its layers instead).
 */
START_TEST(root_laid_out_for_envd)
{
	static const char *const names[] = { "", "home", "run", "var", "var/tmp", "bin", "lib" };
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char map[256], path[PATH_MAX];
	unsigned inside, host;
	int init, checked = 0;

	if (!become_caller(_i) || test_image())
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sandbox_uid_map(sb, map, sizeof(map));
	ck_assert_int_eq(sscanf(map, "%u %u", &inside, &host), 2);
	ck_assert_uint_eq(inside, 0);
	ck_assert_uint_ne(host, 0);
	init = proc_child_named(sandbox_bwrap(sb), "hangar-envd-ini");
	ck_assert_int_gt(init, 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct stat st;

		snprintf(path, sizeof(path), "/proc/%d/root/%s", init, names[i]);
		if (lstat(path, &st) < 0 && errno == ENOENT && i >= 5)
			continue; /* no /bin or /lib on this host */
		ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
		ck_assert_msg(st.st_uid == host && st.st_gid == host, "/%s is %u:%u, not envd's %u", names[i],
			      (unsigned)st.st_uid, (unsigned)st.st_gid, host);
		checked++;
	}
	ck_assert_int_ge(checked, 5);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* How many of pid's mounts have a mount point equal to path, or below it with below set. */
static int mounts_at(int pid, const char *path, int below)
{
	char file[64], line[4096], point[PATH_MAX];
	size_t n = strlen(path);
	int count = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/mountinfo", pid);
	f = fopen(file, "re");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", point) == 1 && !strncmp(point, path, n) &&
		    (point[n] == '\0' || (below && point[n] == '/')))
			count++;
	fclose(f);
	return count;
}

/*
 * bwrap reads the whole mount table again for each mount it makes, and
 * copies it into the sandbox's namespace: the child hands it a table
 * without the host's /sys, /dev/shm and /dev/pts (a root caller's: an
 * unprivileged one's namespace gets them locked) and without the stage's
 * parts the root was laid out from, only the root itself.
 */
START_TEST(bwrap_reads_a_trimmed_table)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	int bwrap;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	bwrap = sandbox_bwrap(sb);
	ck_assert_int_gt(bwrap, 0);
	if (_i == 0) {
		ck_assert_int_eq(mounts_at(bwrap, "/sys", 1), 0);
		ck_assert_int_eq(mounts_at(bwrap, "/dev/shm", 0), 0);
		ck_assert_int_eq(mounts_at(bwrap, "/dev/pts", 0), 0);
	}
	if (!test_image()) {
		static const char *const parts[] = { "/run/etc", "/run/hangar", "/run/rw", "/run/dev" };

		for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
			ck_assert_msg(mounts_at(bwrap, parts[i], 1) == 0, "bwrap still has %s", parts[i]);
		ck_assert_int_eq(mounts_at(bwrap, "/run/root", 0), 1);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* Another sandbox's envd socket, jail socket and /workspace, by every path root inside could try. */
START_TEST(other_sandbox_unreachable)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	char cmd[PATH_MAX * 3];
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	a = create(ctx, HANGAR_NETWORK_ON);
	b = create(ctx, HANGAR_NETWORK_ON);
	expect(b, "user", "echo private > /workspace/mine && echo ok", "ok");
	snprintf(cmd, sizeof(cmd),
		 "for p in %s/%s/envd.sock %s/%s/jail.sock; do "
		 "python3 -c \"import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
		 "print('connected', s.recv(100))\" $p 2>/dev/null; done; "
		 "cat %s/%s/rootfs/workspace/mine 2>/dev/null; "
		 "grep -l private /proc/*/root/workspace/mine 2>/dev/null; true",
		 run_of(state_dir), hangar_sandbox_id(b), run_of(state_dir), hangar_sandbox_id(b), run_of(state_dir),
		 hangar_sandbox_id(b));
	sh(a, "root", cmd, &o);
	ck_assert_msg(o.exit_code == 0 && !strstr(o.text, "connected") && !strstr(o.text, "private") &&
			      !strstr(o.text, hangar_sandbox_id(b)),
		      "sandbox a reached b: %s", o.text);
	/* Each sandbox is its own range of host ids. */
	if (geteuid() == 0) {
		char ma[256], mb[256];

		sandbox_uid_map(a, ma, sizeof(ma));
		sandbox_uid_map(b, mb, sizeof(mb));
		ck_assert_msg(strcmp(ma, mb) != 0, "both sandboxes map to %s", ma);
	}
	hangar_sandbox_kill(a);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A directory of the host's /etc that the host keeps closed (here root's,
 * 0700) stays closed in the sandbox, to its root and its user, and a
 * world-readable file in it out of their reach: through the overlay, the
 * sandbox sees the template's directory over the host's contents, so that
 * one has the host's owner and mode. Needs root on the host; the caller may
 * be either.
 */
START_TEST(closed_etc_dir_stays_closed)
{
	static const char *const users[] = { "user", "root" };
	char dir[64], file[96], cmd[320];
	struct out got[2];
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	FILE *f;

	if (geteuid() != 0 || test_image())
		return;
	snprintf(dir, sizeof(dir), "/etc/hangar-closed-%d", (int)getpid());
	snprintf(file, sizeof(file), "%s/open", dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	f = fopen(file, "we");
	ck_assert_ptr_nonnull(f);
	fputs("kept-closed\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(file, 0644), 0);
	if (_i == 1) {
		/* The unprivileged caller's sandbox, with root kept here to clean up. */
		struct passwd *pw = getpwnam("user");

		ck_assert_ptr_nonnull(pw);
		ck_assert_int_eq(chown(state_dir, pw->pw_uid, pw->pw_gid), 0);
		ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, 0), 0);
		ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, 0), 0);
	}
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	snprintf(cmd, sizeof(cmd), "ls %s >/dev/null 2>&1 && echo listed; cat %s 2>/dev/null; true", dir, file);
	for (size_t i = 0; i < 2; i++)
		sh(sb, users[i], cmd, &got[i]);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	/* Cleaned up before asserting: a failed assertion ends the test here. */
	if (_i == 1)
		ck_assert_int_eq(setresuid(0, 0, 0), 0);
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(rmdir(dir), 0);
	for (size_t i = 0; i < 2; i++)
		ck_assert_msg(!strstr(got[i].text, "listed") && !strstr(got[i].text, "kept-closed"),
			      "%s in the sandbox reached %s: %s", users[i], dir, got[i].text);
}
END_TEST

/*
 * The host replaces /etc/passwd (as useradd does, by rename) while a sandbox
 * runs: the sandbox keeps its own users and its /workspace. Needs root on the
 * host; the caller may be either.
 */
START_TEST(host_useradd_changes_nothing)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char name[32], cmd[128];
	struct out before, after;
	int rc;

	if (geteuid() != 0 || access("/usr/sbin/useradd", X_OK) != 0)
		return;
	snprintf(name, sizeof(name), "hgisol%d", (int)getpid() % 100000);
	if (_i == 1) {
		/* The unprivileged caller's sandbox, with root kept here for useradd. */
		struct passwd *pw = getpwnam("user");

		if (!pw || test_image())
			return;
		ck_assert_int_eq(chown(state_dir, pw->pw_uid, pw->pw_gid), 0);
		ck_assert_int_eq(setresgid(pw->pw_gid, pw->pw_gid, 0), 0);
		ck_assert_int_eq(setresuid(pw->pw_uid, pw->pw_uid, 0), 0);
	}
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sh(sb, "user", "cat /etc/passwd /etc/group; ls -ld /workspace", &before);
	ck_assert_int_eq(before.exit_code, 0);
	if (_i == 1)
		ck_assert_int_eq(setresuid(0, 0, 0), 0);
	snprintf(cmd, sizeof(cmd), "/usr/sbin/useradd --no-create-home %s", name);
	rc = system(cmd);
	ck_assert_int_eq(rc, 0);
	sh(sb, "user", "cat /etc/passwd /etc/group; ls -ld /workspace", &after);
	snprintf(cmd, sizeof(cmd), "/usr/sbin/userdel %s", name);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(after.exit_code, 0);
	ck_assert_str_eq(after.text, before.text);
	expect(sb, "user", "touch /workspace/still-mine && echo ok", "ok");
	if (test_image())
		expect_image_file(sb, "/etc/shadow");
	else
		expect(sb, "root", "ls /etc/shadow 2>/dev/null || echo none", "none");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(dev_shm_for_every_user)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "user", "echo x > /dev/shm/probe && cat /dev/shm/probe", "x");
	expect(sb, "user", "python3 -c 'import multiprocessing; l = multiprocessing.Lock(); print(\"lock\")'",
	       "lock");
	/* Size-limited: a quarter of the sandbox's memory (2048 MiB by default), not the host's. */
	expect(sb, "user", "echo $(( $(stat -f -c '%b * %S' /dev/shm) >> 20 ))", "512");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * /dev: the devices bwrap's --dev gives and nothing else of the host's (with
 * a stage, /dev and the whole root are made there and bwrap binds them),
 * each the host's own device; no device works anywhere else (every other
 * mount is nodev) and no mount is suid; /usr, /etc and /run/hangar are
 * read-only; a terminal of its own from its own devpts. For root and the
 * user, root and unprivileged callers.
 */
START_TEST(dev_as_bwrap_makes_it)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char cmd[256], want[64];
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	for (int u = 0; u < 2; u++) {
		const char *user = u ? "user" : "root";

		expect(sb, user, "ls -A /dev | tr '\\n' ' '",
		       "core fd full null ptmx pts random shm stderr stdin stdout tty urandom zero ");
		for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
			struct stat st;

			snprintf(cmd, sizeof(cmd), "/dev/%s", nodes[i]);
			ck_assert_int_eq(stat(cmd, &st), 0);
			snprintf(want, sizeof(want), "c %x:%x", major(st.st_rdev), minor(st.st_rdev));
			snprintf(cmd, sizeof(cmd), "stat -c '%%F %%t:%%T' /dev/%s | sed 's/character special file/c/'",
				 nodes[i]);
			expect(sb, user, cmd, want);
		}
		expect(sb, user, "head -c 16 /dev/urandom | wc -c", "16");
		sh(sb, user, "echo x > /dev/full", &o);
		ck_assert_msg(o.exit_code != 0 && strstr(o.text, "No space left"), "/dev/full: %d %s", o.exit_code,
			      o.text);
		expect(sb, user, "python3 -c 'import os, pty; m, s = pty.openpty(); print(os.ttyname(s)[:9])'",
		       "/dev/pts/");
		expect(sb, user, "readlink /dev/ptmx /dev/fd | tr '\\n' ' '", "pts/ptmx /proc/self/fd ");
	}
	/* Mount flags, from the sandbox's own mount table: fields 5 (mount point) and 6 (its options). */
	expect(sb, "user", "awk '$5 == \"/dev\" || $5 == \"/dev/shm\" { print $5, ($6 ~ /nodev/ && $6 ~ /nosuid/) }' "
			   "/proc/self/mountinfo | tr '\\n' ' '",
	       "/dev 1 /dev/shm 1 ");
	/* No mount is suid; only the devices and devpts are not nodev; what the sandbox runs from is read-only. */
	expect(sb, "user", "awk '$6 !~ /nosuid/' /proc/self/mountinfo | wc -l", "0");
	expect(sb, "user", "awk '$6 !~ /nodev/ { print $5 }' /proc/self/mountinfo | sort | tr '\\n' ' '",
	       "/dev/full /dev/null /dev/pts /dev/random /dev/tty /dev/urandom /dev/zero ");
	expect(sb, "user",
	       "awk '$5 ~ \"^/(usr|etc|run/hangar)$\" { print $5, ($6 ~ /^ro,/) }' /proc/self/mountinfo | sort | "
	       "tr '\\n' ' '",
	       test_image() ? "/run/hangar 1 " : "/etc 1 /run/hangar 1 /usr 1 ");
	expect(sb, "user", "awk '$5 == \"/dev/pts\" { print ($6 ~ /noexec/) }' /proc/self/mountinfo", "1");
	/* Root may make a node in /dev, and it opens nothing (nodev; the user namespace refuses mknod anyway). */
	sh(sb, "root", "mknod /dev/sda b 8 0 2>/dev/null; head -c1 /dev/sda >/dev/null 2>&1 && echo opened", &o);
	ck_assert_msg(!strstr(o.text, "opened"), "a device made in /dev opened: %s", o.text);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * Network on: a host service on 0.0.0.0 (so on loopback and every address of
 * the host) is out of reach, by every address; so is another sandbox's
 * server; the sandbox's own loopback works and its routes cannot be changed.
 */
START_TEST(network_private)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct ifaddrs *ifs = NULL;
	char cmd[4096], targets[2048] = "127.0.0.1 10.0.2.2 169.254.169.254";
	struct out o;
	int srv, one = 1;

	if (!become_caller(_i))
		return;
	srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv, 0);
	setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(srv, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(srv, 16), 0);
	ck_assert_int_eq(getsockname(srv, (struct sockaddr *)&sa, &len), 0);
	ck_assert_int_eq(getifaddrs(&ifs), 0);
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
			char addr[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, addr, sizeof(addr));
			snprintf(targets + strlen(targets), sizeof(targets) - strlen(targets), " %s", addr);
		}
	freeifaddrs(ifs);
	ctx = new_ctx();
	a = create(ctx, HANGAR_NETWORK_ON);
	b = create(ctx, HANGAR_NETWORK_ON);
	/* b serves on every address of its own; a looks for it and for the host's service. */
	expect(b, "user", "(python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &) ; echo started", "started");
	snprintf(cmd, sizeof(cmd),
		 "for h in %s; do python3 -c \"import socket, sys\n"
		 "try:\n"
		 "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print('reached', sys.argv[1])\n"
		 "except OSError:\n"
		 "    pass\n\" $h %d; done; "
		 "grep -c %s /proc/net/unix; true",
		 targets, ntohs(sa.sin_port), hangar_sandbox_id(b));
	sh(a, "root", cmd, &o);
	ck_assert_msg(!strstr(o.text, "reached") && o.text[0] == '0', "sandbox a reached out: %s", o.text);
	snprintf(cmd, sizeof(cmd),
		 "for h in %s 10.0.2.100 10.0.2.15; do python3 -c \"import socket, sys\n"
		 "try:\n"
		 "    socket.create_connection((sys.argv[1], 8000), timeout=2); print('reached', sys.argv[1])\n"
		 "except OSError:\n"
		 "    pass\n\" $h; done; true",
		 targets);
	sh(a, "root", cmd, &o);
	ck_assert_msg(!strstr(o.text, "reached"), "sandbox a reached b's server: %s", o.text);
	/* A way out it has, whoever the caller: slirp4netns's tap device, not loopback alone. */
	expect(a, "user", "grep -c tap0: /proc/net/dev", "1");
	/* Its own loopback works; its routes are not its root's to change. */
	expect(a, "user",
	       "python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
	       "socket.create_connection(s.getsockname()); print('loopback')\"",
	       "loopback");
	if (geteuid() == 0 || access("/dev/net/tun", R_OK | W_OK) == 0) {
		const char *count;

		sh(a, "root", "ip route del blackhole 10.0.0.0/8 2>&1; ip route | grep -c blackhole", &o);
		count = strstr(o.text, "Operation not permitted\n");

		ck_assert_msg(count && atoi(count + 24) >= 14, "routes: %s", o.text);
	}
	close(srv);
	hangar_sandbox_kill(a);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * HANGAR_LOCAL_NET_ALLOW opens the listed ranges again, and only them: a
 * service on the host's own address (listed, as a /32) is reached from a
 * sandbox with network on, through slirp4netns, while the host's loopback
 * stays out of reach. Skipped on a host with no IPv4 address but loopback.
 */
START_TEST(network_allow_listed)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct ifaddrs *ifs = NULL;
	char host[INET_ADDRSTRLEN] = "", allow[64], cmd[2048];
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;
	int srv, one = 1;

	if (!become_caller(_i))
		return;
	ck_assert_int_eq(getifaddrs(&ifs), 0);
	for (struct ifaddrs *i = ifs; i && !host[0]; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK))
			inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, host, sizeof(host));
	freeifaddrs(ifs);
	if (!host[0])
		return;
	srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv, 0);
	setsockopt(srv, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(srv, (struct sockaddr *)&sa, sizeof(sa)), 0); /* 0.0.0.0: loopback too */
	ck_assert_int_eq(listen(srv, 16), 0);
	ck_assert_int_eq(getsockname(srv, (struct sockaddr *)&sa, &len), 0);
	snprintf(allow, sizeof(allow), "%s/32", host);
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_NET_ALLOW", allow), 0);
	sb = create(ctx, HANGAR_NETWORK_ON);
	snprintf(cmd, sizeof(cmd),
		 "for h in %s 127.0.0.1; do python3 -c \"import socket, sys\n"
		 "try:\n"
		 "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5); print('reached', sys.argv[1])\n"
		 "except OSError as e:\n"
		 "    print('not', sys.argv[1], e.errno)\n\" $h %d; done",
		 host, ntohs(sa.sin_port));
	sh(sb, "user", cmd, &o);
	{
		char want[64];

		snprintf(want, sizeof(want), "reached %s\n", host);
		ck_assert_msg(strstr(o.text, want) && !strstr(o.text, "reached 127.0.0.1"), "allow %s: %s", allow,
			      o.text);
	}
	close(srv);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * What a hostile program tries on envd (its pid in $P): "environ:E mem:E
 * ptrace:E vm:E kill:E uid:same|other", E the errno of opening envd's
 * /proc environ and mem, PTRACE_ATTACH, process_vm_readv and kill(P, 0)
 * (0: it worked), and whether envd runs as the probe's own uid.
 */
#define ENVD_PROBE                                                                                        \
	"P=$(pgrep -x hangar-envd); test -n \"$P\" || echo no-envd; python3 -c \""                         \
	"import ctypes, os, sys\n"                                                                        \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                                      \
	"libc.ptrace.restype = ctypes.c_long\n"                                                           \
	"p = int(sys.argv[1])\n"                                                                          \
	"def opens(name):\n"                                                                              \
	"    try:\n"                                                                                      \
	"        os.close(os.open('/proc/%d/%s' % (p, name), os.O_RDONLY)); return 0\n"                   \
	"    except OSError as e:\n"                                                                      \
	"        return e.errno\n"                                                                        \
	"def call(r):\n"                                                                                  \
	"    return 0 if r >= 0 else ctypes.get_errno()\n"                                                \
	"class iov(ctypes.Structure):\n"                                                                  \
	"    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"                          \
	"buf = ctypes.create_string_buffer(8)\n"                                                          \
	"local, remote = iov(ctypes.cast(buf, ctypes.c_void_p), 8), iov(0x10000, 8)\n"                    \
	"vm = call(libc.process_vm_readv(p, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))\n"       \
	"pt = call(libc.ptrace(16, p, None, None))\n"                                                     \
	"if pt == 0: libc.ptrace(17, p, None, None)\n"                                                    \
	"uid = [l.split()[1] for l in open('/proc/%d/status' % p) if l.startswith('Uid:')][0]\n"         \
	"print('environ:%d mem:%d ptrace:%d vm:%d kill:%d uid:%s' % (opens('environ'), opens('mem'), pt, vm,\n" \
	"      call(libc.kill(p, 0)), 'same' if int(uid) == os.getuid() else 'other'))\n"                 \
	"\" $P"

/* envd's token, as the jail gives it to the library's own uid on jail.sock. */
static void envd_token(hangar_sandbox *sb, char *tok, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/jail.sock", run_of(state_dir), hangar_sandbox_id(sb));
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (;;) {
		ssize_t r = read(fd, tok + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		ck_assert_int_ge(r, 0);
		if (r == 0 || (n += (size_t)r) >= size - 1)
			break;
	}
	close(fd);
	tok[n] = '\0';
	ck_assert_msg(n >= 16, "jail.sock gave a %zu-byte token", n);
}

/*
 * Searches the sandbox for envd's token as user would: every process's
 * environment and command line, and every file it can read under the
 * writable and run-time trees. The token is passed in two halves, so the
 * probe's own command line never holds it whole.
 */
static void token_nowhere(hangar_sandbox *sb, const char *user, const char *tok)
{
	char cmd[4096];
	size_t half = strlen(tok) / 2;
	struct out o;

	snprintf(cmd, sizeof(cmd),
		 "python3 -c \""
		 "import glob, os, sys\n"
		 "t = (sys.argv[1] + sys.argv[2]).encode()\n"
		 "paths = glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline')\n"
		 "for top in ('/run', '/tmp', '/workspace', '/home', '/root', '/etc', '/dev/shm', '/var'):\n"
		 "    for d, _, files in os.walk(top):\n"
		 "        paths += [os.path.join(d, f) for f in files]\n"
		 "seen = 0\n"
		 "for path in paths:\n"
		 "    try:\n"
		 "        with open(path, 'rb') as f: data = f.read(1 << 20)\n"
		 "    except OSError:\n"
		 "        continue\n"
		 "    seen += 1\n"
		 "    if t in data: print('FOUND', path)\n"
		 "print('read', seen)\n"
		 "\" '%.*s' '%s'",
		 (int)half, tok, tok + half);
	sh(sb, user, cmd, &o);
	ck_assert_msg(o.exit_code == 0 && !strstr(o.text, "FOUND") && strstr(o.text, "read "), "as %s: %s", user,
		      o.text);
}

/*
 * envd holds the token: no program in the sandbox reads it from envd's
 * memory or /proc files, traces it, signals it, or finds it anywhere.
 * Neither the sandbox's user nor its root is envd's uid, with a root caller
 * (the sandbox's range) and with an unprivileged one (its /etc/subuid
 * range): commands run in a user namespace below envd's, whose root is
 * another uid and has capabilities over that namespace only. Being not
 * dumpable is what holds with the same uid and no capabilities: see
 * envd_same_uid_not_dumpable.
 */
START_TEST(envd_out_of_reach)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char tok[1100];

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "user", ENVD_PROBE, "environ:13 mem:13 ptrace:1 vm:1 kill:1 uid:other");
	expect(sb, "root", ENVD_PROBE, "environ:13 mem:13 ptrace:1 vm:1 kill:1 uid:other");
	envd_token(sb, tok, sizeof(tok));
	token_nowhere(sb, "user", tok);
	token_nowhere(sb, "root", tok);
	explicit_bzero(tok, sizeof(tok));
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * An unprivileged caller without subordinate ids (HANGAR_LOCAL_SUBIDS=off
 * stands in for a host without them): the sandbox's user is envd's uid, and
 * envd being not dumpable is what keeps its memory and /proc files closed.
 * One uid cannot be made two: a command as root, which would be envd itself
 * with root's name, is refused, saying why.
 */
START_TEST(envd_same_uid_not_dumpable)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char tok[1100];

	if (!become_caller(1))
		return;
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_SUBIDS", "off"), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "user", ENVD_PROBE " | cut -d' ' -f1-4,6", "environ:13 mem:13 ptrace:1 vm:1 uid:same");
	{
		hangar_exec_opts eo = HANGAR_EXEC_OPTS_INIT;
		hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
		int rc;

		eo.user = "root";
		eo.timeout_sec = 60;
		rc = hangar_sandbox_exec(&r, sb, "echo ran", &eo);
		ck_assert_msg(rc < 0 && strstr(hangar_error_last()->message, "hangar-envd's own uid"), "root: %d %s", rc,
			      hangar_error_last()->message);
		ck_assert_uint_eq(r.out.size, 0);
		hangar_exec_result_dispose(&r);
	}
	envd_token(sb, tok, sizeof(tok));
	token_nowhere(sb, "user", tok);
	explicit_bzero(tok, sizeof(tok));
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * One HTTP request to the sandbox's envd on its socket (outside the
 * sandbox, where the library reaches it), with the access token: the
 * status line's code, or -1.
 */
static int envd_request(hangar_sandbox *sb, const char *tok, const char *method, const char *target,
			const char *body)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[4096], buf[512];
	size_t have = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/envd.sock", run_of(state_dir), hangar_sandbox_id(sb));
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", sa.sun_path,
		      strerror(errno));
	snprintf(req, sizeof(req),
		 "%s %s HTTP/1.1\r\nHost: localhost\r\nX-Access-Token: %s\r\nConnection: close\r\n"
		 "Content-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n%s",
		 method, target, tok, strlen(body), body);
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (have < sizeof(buf) - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		ck_assert_msg(poll(&p, 1, 30000) == 1, "envd did not answer %s %s", method, target);
		n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		if (strstr(buf, "\r\n"))
			break;
	}
	buf[have] = '\0';
	sscanf(buf, "HTTP/1.%*d %d", &status);
	close(fd);
	return status;
}

/*
 * envd's socket is out of the sandbox's reach: the jail binds it on the
 * host's side of the sandbox (its directory, which no path inside leads
 * to) and hands envd the listening descriptor. No process inside, root
 * or user, finds a socket that answers as envd; nothing can be planted
 * in /run/hangar, where envd's binary is, not even by a file operation
 * envd makes for root through a link the sandbox planted. Run with a root
 * caller, an unprivileged caller with subordinate ids and one without
 * (HANGAR_LOCAL_SUBIDS=off: every process is envd's uid, so root is
 * refused and only `user` tries).
 */
START_TEST(envd_socket_out_of_reach)
{
	static const char *const attempts =
		"python3 -c \""
		"import os, socket, stat\n"
		"for d, dirs, files in os.walk('/'):\n"
		"    if d == '/' : dirs[:] = [x for x in dirs if x not in ('proc', 'sys', 'usr')]\n"
		"    for f in files:\n"
		"        p = os.path.join(d, f)\n"
		"        try:\n"
		"            if not stat.S_ISSOCK(os.lstat(p).st_mode): continue\n"
		"            s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(p)\n"
		"            s.sendall(b'GET /health HTTP/1.1\\\\r\\\\nHost: x\\\\r\\\\n\\\\r\\\\n')\n"
		"            print('ANSWERED', p, s.recv(64))\n"
		"        except OSError: pass\n"
		"    if 'envd.sock' in files: print('FOUND', d)\n"
		"print('walked')\n"
		"\"; touch /run/hangar/planted 2>/dev/null && echo PLANTED; "
		"ln -s /tmp /run/hangar/link 2>/dev/null && echo LINKED; "
		"mv /run/hangar/hangar-envd /run/hangar/moved 2>/dev/null && echo MOVED; true";
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char tok[1100];
	struct out o;

	if (!become_caller(_i != 0))
		return;
	ctx = new_ctx();
	if (_i == 2)
		ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_SUBIDS", "off"), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF);
	for (int u = _i == 2 ? 1 : 0; u < 2; u++) {
		const char *who = u ? "user" : "root";

		sh(sb, who, attempts, &o);
		ck_assert_msg(strstr(o.text, "walked") && !strstr(o.text, "ANSWERED") && !strstr(o.text, "FOUND") &&
				      !strstr(o.text, "PLANTED") && !strstr(o.text, "LINKED") && !strstr(o.text, "MOVED"),
			      "sandbox %s reached envd's socket or directory: %s", who, o.text);
	}
	/* A file operation for root (or, with one uid, refused as root) through a planted link. */
	envd_token(sb, tok, sizeof(tok));
	expect(sb, "user", "ln -s /run/hangar /workspace/door && echo ok", "ok");
	for (int u = 0; u < 2; u++) {
		const char *user = u ? "user" : "root";
		char target[256];
		int st;

		snprintf(target, sizeof(target), "/files?path=/workspace/door/planted&username=%s", user);
		st = envd_request(sb, tok, "POST", target, "x");
		ck_assert_msg(st >= 400, "an upload as %s through a link into /run/hangar answered %d", user, st);
		snprintf(target, sizeof(target), "/files?path=/run/hangar/planted&username=%s", user);
		st = envd_request(sb, tok, "POST", target, "x");
		ck_assert_msg(st >= 400, "an upload as %s into /run/hangar answered %d", user, st);
	}
	/* The control: an upload envd may make is made, as the caller asked. */
	ck_assert_int_eq(envd_request(sb, tok, "POST", "/files?path=/workspace/fine&username=user", "x"), 200);
	if (_i == 2)
		ck_assert_int_eq(envd_request(sb, tok, "POST", "/files?path=/workspace/as-root&username=root", "x"),
				 403);
	expect(sb, "user", "ls /run/hangar 2>&1 | grep -c planted; cat /workspace/fine", "0");
	explicit_bzero(tok, sizeof(tok));
	/* The library still reaches envd, from this context and a fresh one. */
	expect(sb, "user", "echo alive", "alive");
	{
		hangar_ctx *again = new_ctx();
		hangar_sandbox *same = NULL;

		if (_i == 2)
			ck_assert_int_eq(hangar_ctx_set(again, "HANGAR_LOCAL_SUBIDS", "off"), 0);
		ck_assert_int_eq(hangar_sandbox_attach(&same, again, "local", hangar_sandbox_id(sb)), 0);
		expect(same, "user", "echo reached", "reached");
		hangar_sandbox_unref(same);
		hangar_ctx_unref(again);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * What a peer of uid `as` gets from one of the jail's sockets after sending
 * req: the answer (possibly empty), or "(refused)" when it could not even
 * connect. In a child, so the test keeps its own uid.
 */
static void ask_as(uid_t as, const char *path, const char *req, char *buf, size_t size)
{
	int p[2];
	pid_t pid;
	ssize_t n;
	size_t have = 0;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		char got[256];
		int fd;

		close(p[0]);
		if (setgroups(0, NULL) < 0 || setresgid(as, as, as) < 0 || setresuid(as, as, as) < 0)
			_exit(2);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			n = write(p[1], "(refused)", 9);
			_exit(0);
		}
		if (*req)
			n = write(fd, req, strlen(req));
		while ((n = read(fd, got, sizeof(got))) > 0)
			if (write(p[1], got, (size_t)n) != n)
				break;
		_exit(0);
	}
	close(p[1]);
	while (have < size - 1 && (n = read(p[0], buf + have, size - 1 - have)) > 0)
		have += (size_t)n;
	buf[have] = '\0';
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

/*
 * The jail's sockets answer the library's own uid alone. Their directory
 * and mode already keep other uids out; opened up here to them, the jail's
 * own check (SO_PEERCRED) still refuses: no token on jail.sock, no port on
 * ports.sock. The library's uid is answered on both.
 */
START_TEST(jail_sockets_answer_their_uid_only)
{
	struct passwd *pw = getpwnam("user");
	char dir[PATH_MAX], jail[PATH_MAX + 16], ports[PATH_MAX + 16], got[1200], run[PATH_MAX], above[PATH_MAX];
	hangar_ctx *ctx;
	hangar_sandbox *sb;

	if (geteuid() != 0 || !pw)
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	snprintf(dir, sizeof(dir), "%s/%s", run_of(state_dir), hangar_sandbox_id(sb));
	snprintf(jail, sizeof(jail), "%s/jail.sock", dir);
	snprintf(ports, sizeof(ports), "%s/ports.sock", dir);
	/* As they are: closed to user. */
	ask_as(pw->pw_uid, jail, "", got, sizeof(got));
	ck_assert_str_eq(got, "(refused)");
	/* Every directory on the way open to user: the state's, the runtime directory's and the one above it. */
	snprintf(run, sizeof(run), "%s", run_of(state_dir));
	snprintf(above, sizeof(above), "%s", run);
	*strrchr(above, '/') = '\0';
	ck_assert_int_eq(chmod(state_dir, 0755), 0);
	ck_assert_int_eq(chmod(above, 0755), 0);
	ck_assert_int_eq(chmod(run, 0755), 0);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(chmod(jail, 0666), 0);
	ck_assert_int_eq(chmod(ports, 0666), 0);
	ask_as(pw->pw_uid, jail, "", got, sizeof(got));
	ck_assert_msg(got[0] == '\0', "jail.sock answered uid %u: %zu bytes", (unsigned)pw->pw_uid, strlen(got));
	ask_as(pw->pw_uid, ports, "expose 8000\n", got, sizeof(got));
	ck_assert_msg(strncmp(got, "ok", 2) != 0 && !strstr(got, "127.0.0.1"), "ports.sock answered: %s", got);
	/* The library's own uid is answered. */
	ask_as(0, jail, "", got, sizeof(got));
	ck_assert_msg(strlen(got) >= 16, "jail.sock gave root %zu bytes", strlen(got));
	explicit_bzero(got, sizeof(got));
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	/* Private again: the library takes no runtime directory another uid could enter. */
	ck_assert_int_eq(chmod(run, 0700), 0);
	ck_assert_int_eq(chmod(above, 0700), 0);
}
END_TEST

static int owner_cb(const hangar_file_info *info, void *payload)
{
	snprintf(payload, 64, "%s", info->owner ? info->owner : "(none)");
	return 0;
}

/*
 * The sandbox's root is no less root for being another uid than envd: it
 * owns /root and its files there, gives files to other users, signals
 * their processes, serves on port 80, and what it makes is root's as envd
 * reports it, checkpoints included. It keeps the capabilities it had, and
 * no more.
 */
START_TEST(root_still_root)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	char owner[64];

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	expect(sb, "root", "echo x > /root/f && touch /workspace/mine && chown user /workspace/mine && "
			   "stat -c '%U %U' /root/f /workspace/mine | tr '\\n' ' '",
	       "root root user user ");
	expect(sb, "root", "id -u; cd && pwd", "0");
	expect(sb, "root", "python3 -c \"import socket; socket.socket().bind(('127.0.0.1', 80)); print('bound')\"",
	       "bound");
	expect(sb, "root", "touch /tmp/by-root && stat -c %U /tmp/by-root", "root");
	expect(sb, "user", "(sleep 60 >/dev/null 2>&1 &) ; echo started", "started");
	expect(sb, "root", "pkill -u user -x sleep && echo signalled", "signalled");
	/* CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, KILL, SETGID, SETUID, NET_BIND_SERVICE: bounded too. */
	expect(sb, "root", "grep -e CapEff -e CapBnd /proc/self/status | awk '{ print $2 }' | sort -u",
	       "00000000000004ff");
	ck_assert_int_eq(hangar_sandbox_stat(sb, "/tmp/by-root", owner_cb, owner), 0);
	ck_assert_str_eq(owner, "root");
	/* Its checkpoints are made and restored by a worker that is root where its commands are. */
	{
		hangar_checkpoint_opts co = HANGAR_CHECKPOINT_OPTS_INIT;
		hangar_restore_opts ro = HANGAR_RESTORE_OPTS_INIT;
		hangar_checkpoint *cp = NULL;

		expect(sb, "root", "mkdir /root/ws && echo kept > /root/ws/f && chmod 600 /root/ws/f && echo ok", "ok");
		co.workspace = "/root/ws";
		co.user = "root";
		ck_assert_msg(hangar_checkpoint_create(&cp, sb, &co) == 0, "capture: %s", hangar_error_last()->message);
		ro.workspace = "/root/ws2";
		ro.user = "root";
		ck_assert_msg(hangar_checkpoint_restore(sb, cp, &ro) == 0, "restore: %s", hangar_error_last()->message);
		expect(sb, "root", "stat -c '%U %a' /root/ws2/f && echo more >> /root/ws2/f", "root 600");
		hangar_checkpoint_unref(cp);
	}
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * The way back up is shut: the sandbox's root (whose seccomp filter lets
 * setns into a user namespace through, for envd's sake) can enter neither
 * envd's namespace nor bwrap's, by their /proc entries or by asking the
 * kernel for its own namespace's parent; nor signal bwrap, pid 1. The
 * output names each attempt with the errno it met (0: it worked).
 */
START_TEST(root_cannot_climb)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct out o;

	if (!become_caller(_i))
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sh(sb, "root",
	   "P=$(pgrep -x hangar-envd); python3 -c \""
	   "import ctypes, fcntl, os, sys\n"
	   "libc = ctypes.CDLL(None, use_errno=True)\n"
	   "out = []\n"
	   "def enter(name, fd):\n"
	   "    r = libc.setns(fd, 0x10000000)\n"
	   "    out.append('%s:%d' % (name, 0 if r == 0 else ctypes.get_errno()))\n"
	   "for name, path in (('bwrap', '/proc/1/ns/user'), ('envd', '/proc/%s/ns/user' % sys.argv[1])):\n"
	   "    try:\n"
	   "        enter(name, os.open(path, os.O_RDONLY))\n"
	   "    except OSError as e:\n"
	   "        out.append('%s-open:%d' % (name, e.errno))\n"
	   "try:\n"
	   "    enter('parent', fcntl.ioctl(os.open('/proc/self/ns/user', os.O_RDONLY), 0xb702))\n"
	   "except OSError as e:\n"
	   "    out.append('parent-ioctl:%d' % e.errno)\n"
	   "out.append('kill1:%d' % (0 if libc.kill(1, 0) == 0 else ctypes.get_errno()))\n"
	   "print(' '.join(out))\n"
	   "\" $P",
	   &o);
	ck_assert_msg(o.exit_code == 0 && strstr(o.text, "kill1:1") && !strstr(o.text, ":0"), "root climbed: %s",
		      o.text);
	expect(sb, "user", "echo alive", "alive");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- exposed ports ------------------------------------------------------------------------ */

/* Socket inodes listening on TCP in the host's namespace (/proc/net/tcp, state 0A). */
static size_t host_listeners(unsigned long *inodes, size_t max)
{
	FILE *f = fopen("/proc/net/tcp", "re");
	char line[512];
	size_t n = 0;

	ck_assert_ptr_nonnull(f);
	while (n < max && fgets(line, sizeof(line), f)) {
		unsigned st;
		unsigned long ino;

		if (sscanf(line, " %*d: %*x:%*x %*x:%*x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", &st, &ino) == 2 &&
		    st == 0x0a)
			inodes[n++] = ino;
	}
	fclose(f);
	return n;
}

/* How many TCP listeners on the host the sandbox's supervisor and its children hold. */
static int jail_listeners(hangar_sandbox *sb)
{
	static unsigned long inodes[4096];
	size_t ninodes = host_listeners(inodes, 4096);
	char path[PATH_MAX], pids[4096] = "";
	FILE *f;
	int jail = 0, count = 0;

	snprintf(path, sizeof(path), "%s/%s/jail.pid", run_of(state_dir), hangar_sandbox_id(sb));
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &jail), 1);
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", jail, jail);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	snprintf(pids, sizeof(pids), "%d ", jail);
	if (!fgets(pids + strlen(pids), (int)(sizeof(pids) - strlen(pids)), f))
		pids[strlen(pids)] = '\0';
	fclose(f);
	for (char *save = NULL, *tok = strtok_r(pids, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
		DIR *d;
		struct dirent *de;

		snprintf(path, sizeof(path), "/proc/%s/fd", tok);
		d = opendir(path);
		while (d && (de = readdir(d))) {
			char link[PATH_MAX], target[128];
			unsigned long ino;
			ssize_t n;

			snprintf(link, sizeof(link), "/proc/%s/fd/%s", tok, de->d_name);
			n = readlink(link, target, sizeof(target) - 1);
			if (n <= 0)
				continue;
			target[n] = '\0';
			if (sscanf(target, "socket:[%lu]", &ino) == 1)
				for (size_t i = 0; i < ninodes; i++)
					count += inodes[i] == ino;
		}
		if (d)
			closedir(d);
	}
	return count;
}

/* Connects to "127.0.0.1:N", sends req, and reads the answer until EOF (10 s at most) into buf. -1: no connection. */
static int tcp_ask(const char *addr, const char *req, char *buf, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	unsigned port;
	size_t have = 0;
	int fd;

	ck_assert_int_eq(sscanf(addr, "127.0.0.1:%u", &port), 1);
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (have + 1 < size) {
		struct pollfd p = { fd, POLLIN, 0 };
		ssize_t n;

		ck_assert_msg(poll(&p, 1, 10000) == 1, "no answer from %s", addr);
		n = read(fd, buf + have, size - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = '\0';
	close(fd);
	return 0;
}

/*
 * A server on the sandbox's own loopback is reached from the host once its
 * port is exposed, at the address returned, and by no other sandbox; the
 * supervisor listens on nothing before; the exposure ends with the sandbox.
 * _i: caller (root, user) x the sandbox's network (off, on).
 */
START_TEST(port_exposed)
{
	hangar_ctx *ctx;
	hangar_sandbox *a, *b;
	hangar_buf addr = HANGAR_BUF_INIT, again = HANGAR_BUF_INIT, idle = HANGAR_BUF_INIT;
	char marker[64], cmd[2048], answer[8192];
	struct out o;

	if (!become_caller(_i / 2))
		return;
	ctx = new_ctx();
	a = create(ctx, _i % 2 ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF);
	b = create(ctx, HANGAR_NETWORK_ON);
	snprintf(marker, sizeof(marker), "served-by-%s", hangar_sandbox_id(a));
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p /tmp/www && echo %s > /tmp/www/marker && "
		 "(python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp/www >/dev/null 2>&1 &) && "
		 "python3 -c \"import socket, time\n"
		 "deadline = time.monotonic() + 20\n"
		 "while True:\n"
		 "    try:\n"
		 "        socket.create_connection(('127.0.0.1', 8000), timeout=1); print('listening'); break\n"
		 "    except OSError:\n"
		 "        if time.monotonic() > deadline: print('not listening'); break\n"
		 "        time.sleep(0.05)\n\"",
		 marker);
	expect(a, "user", cmd, "listening");
	if (geteuid() == 0)
		ck_assert_int_eq(jail_listeners(a), 0);
	ck_assert_int_eq(hangar_sandbox_expose_port(&addr, a, 8000), 0);
	ck_assert_msg(!strncmp(addr.ptr, "127.0.0.1:", 10), "address %s", addr.ptr);
	if (geteuid() == 0)
		ck_assert_int_eq(jail_listeners(a), 1);
	ck_assert_int_eq(tcp_ask(addr.ptr, "GET /marker HTTP/1.0\r\n\r\n", answer, sizeof(answer)), 0);
	ck_assert_msg(strstr(answer, " 200 ") && strstr(answer, marker), "answer: %s", answer);
	/* The same port again: the same address. */
	ck_assert_int_eq(hangar_sandbox_expose_port(&again, a, 8000), 0);
	ck_assert_str_eq(again.ptr, addr.ptr);
	/* A port nothing listens on inside: the connection is closed at once. */
	ck_assert_int_eq(hangar_sandbox_expose_port(&idle, a, 8001), 0);
	ck_assert_str_ne(idle.ptr, addr.ptr);
	ck_assert_int_eq(tcp_ask(idle.ptr, "GET / HTTP/1.0\r\n\r\n", answer, sizeof(answer)), 0);
	ck_assert_str_eq(answer, "");
	/* Another sandbox reaches it neither on its loopback nor through its gateway. */
	snprintf(cmd, sizeof(cmd),
		 "for h in 127.0.0.1 10.0.2.2 10.0.2.100; do python3 -c \"import socket, sys\n"
		 "try:\n"
		 "    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print('reached', sys.argv[1])\n"
		 "except OSError:\n"
		 "    pass\n\" $h %s; done; true",
		 strchr(addr.ptr, ':') + 1);
	sh(b, "root", cmd, &o);
	ck_assert_msg(!strstr(o.text, "reached"), "sandbox b reached a's exposed port: %s", o.text);
	/* Arguments. */
	ck_assert_int_eq(hangar_sandbox_expose_port(&again, a, 0), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_expose_port(&again, a, 65536), HANGAR_EINVAL);
	ck_assert_int_eq(hangar_sandbox_expose_port(NULL, a, 80), HANGAR_EINVAL);
	/* Gone with the sandbox. */
	ck_assert_int_eq(hangar_sandbox_kill(a), 0);
	ck_assert_int_eq(hangar_sandbox_expose_port(&again, a, 8000), HANGAR_EGONE);
	ck_assert_msg(tcp_ask(addr.ptr, "GET /marker HTTP/1.0\r\n\r\n", answer, sizeof(answer)) < 0 ||
			      !strstr(answer, marker),
		      "still served after the kill");
	hangar_buf_dispose(&addr);
	hangar_buf_dispose(&again);
	hangar_buf_dispose(&idle);
	hangar_sandbox_kill(b);
	hangar_sandbox_unref(a);
	hangar_sandbox_unref(b);
	hangar_ctx_unref(ctx);
}
END_TEST

/* ---- limits (root callers: cgroups and the sandbox's tmpfs) ------------------------------ */

static hangar_sandbox *create_limited(hangar_ctx **ctx, const char *name, const char *value)
{
	*ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(*ctx, name, value), 0);
	return create(*ctx, HANGAR_NETWORK_OFF);
}

struct logs {
	char text[4096];
};

static int log_cb(const hangar_sandbox_log_entry *e, void *payload)
{
	struct logs *l = payload;
	size_t n = strlen(l->text);

	snprintf(l->text + n, sizeof(l->text) - n, "%s: %s\n", e->level, e->message);
	return 0;
}

static int metric_cb(const hangar_sandbox_metric *m, void *payload)
{
	*(hangar_sandbox_metric *)payload = *m;
	return 0;
}

static void read_logs(hangar_sandbox *sb, struct logs *l)
{
	l->text[0] = '\0';
	ck_assert_int_eq(hangar_sandbox_logs(sb, log_cb, l), 0);
}

START_TEST(process_limit)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_sandbox_metric m;
	struct logs l;

	if (geteuid() != 0)
		return; /* cgroups need root (or a delegated cgroup v2) */
	sb = create_limited(&ctx, "HANGAR_LOCAL_PIDS", "32");
	ck_assert_int_eq(hangar_sandbox_metrics(sb, metric_cb, &m), 0);
	ck_assert_uint_eq(m.pids_max, 32);
	ck_assert_msg(m.pids_used >= 1 && m.pids_used < 32, "pids used %u", (unsigned)m.pids_used);
	read_logs(sb, &l);
	ck_assert_msg(!strstr(l.text, "process limit"), "logs before: %s", l.text);
	/* A fork bomb in miniature: 64 children that wait. */
	expect(sb, "user",
	       "python3 -c \"\n"
	       "import os, signal, time\n"
	       "kids = []\n"
	       "refused = 0\n"
	       "for i in range(64):\n"
	       "    try:\n"
	       "        pid = os.fork()\n"
	       "    except OSError:\n"
	       "        refused += 1\n"
	       "        continue\n"
	       "    if pid == 0:\n"
	       "        time.sleep(30); os._exit(0)\n"
	       "    kids.append(pid)\n"
	       "for pid in kids:\n"
	       "    os.kill(pid, signal.SIGKILL); os.waitpid(pid, 0)\n"
	       "print('refused' if refused and len(kids) < 32 else 'made %d' % len(kids))\n\"",
	       "refused");
	read_logs(sb, &l);
	ck_assert_msg(strstr(l.text, "process limit of 32 reached"), "logs: %s", l.text);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(memory_limit)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_sandbox_metric m;
	struct logs l;
	struct out o;

	if (geteuid() != 0)
		return;
	sb = create_limited(&ctx, "HANGAR_LOCAL_MEMORY_MB", "64");
	/*
	 * 4 MiB written to the sandbox's tmpfs is charged to it and stays: the
	 * usage counts it. (What bwrap and envd took before they were moved
	 * into the limits may be counted in the jail's cgroup instead.)
	 */
	expect(sb, "user", "head -c 4194304 /dev/zero > /tmp/held && echo written", "written");
	ck_assert_int_eq(hangar_sandbox_metrics(sb, metric_cb, &m), 0);
	ck_assert_uint_eq(m.mem_total_bytes, 64u << 20);
	ck_assert_msg(m.mem_used_bytes >= 4u << 20 && m.mem_used_bytes < m.mem_total_bytes, "used %llu",
		      (unsigned long long)m.mem_used_bytes);
	/* Within the limit, nothing is reported. */
	sh(sb, "user", "python3 -c 'a = bytearray(8 << 20); print(\"allocated\")'", &o);
	ck_assert_msg(o.exit_code == 0 && !o.oom_killed, "exit %d, oom_killed %d: %s", o.exit_code, o.oom_killed,
		      o.text);
	sh(sb, "user", "python3 -c 'a = bytearray(256 << 20); print(\"allocated\")'", &o);
	/* Killed (SIGKILL: 137 from the shell, or -1 when the command itself was the one envd ran). */
	ck_assert_msg((o.exit_code == 137 || o.exit_code == -1) && !strstr(o.text, "allocated"), "exit %d: %s",
		      o.exit_code, o.text);
	ck_assert_msg(o.oom_killed == 1, "the OOM kill is not reported in the result");
	/* A command killed otherwise is not reported as OOM-killed. */
	sh(sb, "user", "kill -9 $$", &o);
	ck_assert_msg((o.exit_code == 137 || o.exit_code == -1) && !o.oom_killed, "exit %d, oom_killed %d",
		      o.exit_code, o.oom_killed);
	read_logs(sb, &l);
	ck_assert_msg(strstr(l.text, "error: memory limit of 64 MB reached: the OOM killer killed"), "logs: %s",
		      l.text);
	/* The sandbox lives on. */
	expect(sb, "user", "echo alive", "alive");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * oom_killed is the command's own: a command running while the OOM killer
 * kills another command's process beside it, and ending normally, is not
 * flagged; the command killed is. (The sandbox's kill count goes up during
 * both.)
 */
START_TEST(oom_kill_is_the_commands)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	struct bg_exec a = { 0 }, b = { 0 };

	if (geteuid() != 0)
		return;
	sb = create_limited(&ctx, "HANGAR_LOCAL_MEMORY_MB", "64");
	/* a waits, holding little memory, until b's victim is dead. */
	a.sb = b.sb = sb;
	a.cmd = "touch /tmp/a-runs; until [ -e /tmp/b-done ]; do sleep 0.05; done; echo survived";
	b.cmd = "until [ -e /tmp/a-runs ]; do sleep 0.05; done; python3 -c 'a = bytearray(256 << 20)'";
	ck_assert_int_eq(pthread_create(&a.thread, NULL, bg_exec_run, &a), 0);
	bg_exec_run(&b);
	expect(sb, "user", "touch /tmp/b-done && echo released", "released");
	pthread_join(a.thread, NULL);
	ck_assert_msg((b.o.exit_code == 137 || b.o.exit_code == -1) && b.o.oom_killed == 1,
		      "the OOM-killed command: exit %d, oom_killed %d", b.o.exit_code, b.o.oom_killed);
	ck_assert_msg(a.o.exit_code == 0 && !strcmp(a.o.text, "survived\n") && a.o.oom_killed == 0,
		      "the command beside it: exit %d, oom_killed %d: %s", a.o.exit_code, a.o.oom_killed, a.o.text);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * HANGAR_LOCAL_CPUS is a CFS quota on the sandbox's cpu cgroup, as the
 * jail records it in the sandbox's `limits` file: one CPU is one period's
 * worth of run time per period.
 */
START_TEST(cpu_quota)
{
	char path[PATH_MAX + 32], line[PATH_MAX + 32], kind[8], cg[PATH_MAX];
	long long quota = 0, period = 0;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	FILE *f;
	int found = 0;

	if (geteuid() != 0)
		return;
	sb = create_limited(&ctx, "HANGAR_LOCAL_CPUS", "1");
	snprintf(path, sizeof(path), "%s/%s/limits", run_of(state_dir), hangar_sandbox_id(sb));
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, "cpu ", 4) && sscanf(line + 4, "%7s %4095s", kind, cg) == 2;
	fclose(f);
	ck_assert_msg(found, "no cpu cgroup in %s", path);
	if (!strcmp(kind, "v2")) {
		snprintf(path, sizeof(path), "%s/cpu.max", cg);
		f = fopen(path, "re");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fscanf(f, "%lld %lld", &quota, &period), 2);
		fclose(f);
	} else {
		snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", cg);
		f = fopen(path, "re");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fscanf(f, "%lld", &quota), 1);
		fclose(f);
		snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", cg);
		f = fopen(path, "re");
		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(fscanf(f, "%lld", &period), 1);
		fclose(f);
	}
	ck_assert_msg(period > 0 && quota == period, "quota %lld per period %lld", quota, period);
	/* And the sandbox's processes are in it. */
	expect(sb, "user", "echo in", "in");
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(fgets(line, sizeof(line), f) != NULL, "no process in %s", cg);
	fclose(f);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

START_TEST(disk_limit)
{
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	hangar_sandbox_metric m;
	struct logs l;
	struct out o;
	char cmd[PATH_MAX + 64];

	if (!become_caller(_i != 0))
		return;
	ctx = new_ctx();
	ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_DISK_MB", "16"), 0);
	if (_i == 2)
		ck_assert_int_eq(hangar_ctx_set(ctx, "HANGAR_LOCAL_SUBIDS", "off"), 0);
	sb = create(ctx, HANGAR_NETWORK_OFF);
	sh(sb, "user", "dd if=/dev/zero of=/workspace/big bs=1M count=64", &o);
	ck_assert_msg(o.exit_code != 0 && strstr(o.text, "No space left on device"), "dd: %d %s", o.exit_code,
		      o.text);
	if (_i < 2) {
		sh(sb, "user", "dd if=/dev/zero of=/tmp/big bs=1M count=8", &o);
		ck_assert_msg(o.exit_code != 0 && strstr(o.text, "No space left on device"),
			      "/tmp is the same 16 MB: %s", o.text);
	} else {
		/* One uid, no stage: each writable path is a file system of 16 MB of its own. */
		sh(sb, "user", "dd if=/dev/zero of=/tmp/big bs=1M count=64", &o);
		ck_assert_msg(o.exit_code != 0 && strstr(o.text, "No space left on device"), "/tmp: %s", o.text);
		sh(sb, "user", "dd if=/dev/zero of=/home/user/big bs=1M count=64", &o);
		ck_assert_msg(o.exit_code != 0 && strstr(o.text, "No space left on device"), "home: %s", o.text);
	}
	ck_assert_int_eq(hangar_sandbox_metrics(sb, metric_cb, &m), 0);
	ck_assert_uint_eq(m.disk_total_bytes, 16u << 20);
	ck_assert_uint_ge(m.disk_used_bytes, 15u << 20);
	read_logs(sb, &l);
	ck_assert_msg(strstr(l.text, "disk limit of 16 MB reached"), "logs: %s", l.text);
	/*
	 * Nothing of it reached the host's disk: the writable paths are one
	 * file system in memory, and no large file appeared in the sandbox's
	 * state on the host. (The host's free space is no measure: other work
	 * shares that file system.)
	 */
	expect(sb, "user", "echo $(stat -f -c %T /workspace /tmp /home/user | sort -u)", "tmpfs");
	snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -xdev -type f -size +1M)\"", state_dir);
	ck_assert_msg(system(cmd) == 0, "a large file under %s on the host", state_dir);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

/*
 * A pause freezes the sandbox's cgroup (the v2 or v1 freezer the jail
 * records in the sandbox's `cgroup` file), and a resume thaws it: the
 * kernel's own word on it, from the host.
 */
START_TEST(pause_freezes_the_cgroup)
{
	char path[PATH_MAX + 32], kind[8] = "", cg[PATH_MAX] = "", *text;
	hangar_ctx *ctx;
	hangar_sandbox *sb;
	FILE *f;

	if (geteuid() != 0)
		return;
	ctx = new_ctx();
	sb = create(ctx, HANGAR_NETWORK_OFF);
	snprintf(path, sizeof(path), "%s/%s/cgroup", run_of(state_dir), hangar_sandbox_id(sb));
	f = fopen(path, "re");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%7s %4095s", kind, cg), 2);
	fclose(f);
	ck_assert_msg(!strcmp(kind, "v2") || !strcmp(kind, "v1"), "freezer: %s", kind);
	snprintf(path, sizeof(path), "%s/%s", cg, !strcmp(kind, "v2") ? "cgroup.events" : "freezer.state");
	ck_assert_int_eq(hangar_sandbox_pause(sb), 0);
	{
		char buf[512] = "";

		f = fopen(path, "re");
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_gt(fread(buf, 1, sizeof(buf) - 1, f), 0);
		fclose(f);
		text = buf;
		ck_assert_msg(strstr(text, !strcmp(kind, "v2") ? "frozen 1" : "FROZEN"), "%s: %s", path, text);
	}
	ck_assert_int_eq(hangar_sandbox_resume(sb), 0);
	expect(sb, "user", "echo thawed", "thawed");
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
}
END_TEST

static Suite *isolation_suite(void)
{
	Suite *s = suite_create("local-isolation");
	TCase *tc = tcase_create("probes");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, open_by_handle_at_fails, 0, 2);
	tcase_add_loop_test(tc, pid_one_reaps_and_holds, 0, 2);
	tcase_add_loop_test(tc, proc_is_read_only, 0, 2);
	tcase_add_loop_test(tc, no_nested_user_namespaces, 0, 2);
	tcase_add_loop_test(tc, keyring_not_shared, 0, 2);
	tcase_add_loop_test(tc, host_paths_unreachable, 0, 2);
	tcase_add_loop_test(tc, other_sandbox_unreachable, 0, 2);
	tcase_add_loop_test(tc, host_useradd_changes_nothing, 0, 2);
	tcase_add_loop_test(tc, closed_etc_dir_stays_closed, 0, 2);
	tcase_add_loop_test(tc, dev_shm_for_every_user, 0, 2);
	tcase_add_loop_test(tc, dev_as_bwrap_makes_it, 0, 2);
	tcase_add_loop_test(tc, root_laid_out_for_envd, 0, 2);
	tcase_add_loop_test(tc, bwrap_reads_a_trimmed_table, 0, 2);
	tcase_add_loop_test(tc, network_private, 0, 2);
	tcase_add_loop_test(tc, network_allow_listed, 0, 2);
	tcase_add_loop_test(tc, envd_out_of_reach, 0, 2);
	tcase_add_test(tc, envd_same_uid_not_dumpable);
	tcase_add_loop_test(tc, port_exposed, 0, 4);
	tcase_add_loop_test(tc, envd_socket_out_of_reach, 0, 3);
	tcase_add_loop_test(tc, root_still_root, 0, 2);
	tcase_add_test(tc, jail_sockets_answer_their_uid_only);
	tcase_add_loop_test(tc, root_cannot_climb, 0, 2);
	suite_add_tcase(s, tc);
	/* Run alone (CK_RUN_CASE=limits) in the cgroup v2 guest: tests/vm. */
	tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, process_limit);
	tcase_add_test(tc, memory_limit);
	tcase_add_loop_test(tc, disk_limit, 0, 3);
	tcase_add_test(tc, cpu_quota);
	tcase_add_test(tc, pause_freezes_the_cgroup);
	suite_add_tcase(s, tc);
	/*
	 * Not in the guest: it needs the OOM killer to stop at one victim, which
	 * the kernel does not promise. Under emulation the first victim frees
	 * its memory so slowly that a second one is taken, the command beside it.
	 */
	tc = tcase_create("oom");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, oom_kill_is_the_commands);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(isolation_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
