/*
 * hangar-jail's limits (programs/hangar-jail/limits.c) against a model of
 * the kernel's cgroup files: what it writes to a cgroup v2 directory
 * (memory.max, memory.swap.max, pids.max, cpu.max), how it gets a controller
 * handed down to the sandbox, where it makes v1 cgroups, when a process
 * limit comes from RLIMIT_NPROC instead, and what it records for the library.
 *
 * The model (fake_write, fake_mkdir, through limits_sys) keeps the
 * kernel's rules that decide whether a sandbox gets limits at all
 * (Documentation/admin-guide/cgroup-v2.rst):
 *   - a new cgroup lists in cgroup.controllers what its parent's
 *     cgroup.subtree_control enables, and has those controllers' files;
 *   - "+c" in cgroup.subtree_control fails with ENOENT unless c is in the
 *     cgroup's cgroup.controllers, and with EBUSY while the cgroup holds
 *     processes (no internal processes), the root cgroup excepted;
 *   - a process cannot join a cgroup (cgroup.procs) whose
 *     cgroup.subtree_control enables anything (EBUSY), the root excepted;
 *   - writing an interface file that is not there fails with ENOENT.
 * v1 hierarchies are directories whose new cgroups get that controller's
 * files. So the logic is tested on any host, including this one, whose
 * controllers are all on v1.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail.h"
#include "lstate.h"

/* util.c's, which this test does not link: the messages said. */
static char said[8][1600];
static int nsaid;

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(said[nsaid % 8], sizeof(said[0]), fmt, ap);
	va_end(ap);
	nsaid++;
}

/* 1 when some message said contains s. */
static int was_said(const char *s)
{
	for (int i = 0; i < nsaid && i < 8; i++)
		if (strstr(said[i], s))
			return 1;
	return 0;
}

static char top[64], v1_root[96], cg2[96], self_cgroup[128];

/* ---- the model ------------------------------------------------------------------ */

static char writes[8192]; /* "path value rc\n" of every write under cg2, in order */
static const char *deny_mkdir; /* fake_mkdir: EACCES at and below this path */

static char *slurp(const char *dir, const char *name)
{
	char path[2 * PATH_MAX]; /* dir may be a cgroup below one of PATH_MAX + 256 */
	char *t;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	t = lstate_read_file(path, 65536, NULL);
	return t ? t : strdup("");
}

static void spit(const char *dir, const char *name, const char *text)
{
	char path[2 * PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(lstate_write_atomic(path, text, strlen(text), 0644), 0);
}

static int word_in(const char *text, const char *word)
{
	char *copy = strdup(text), *tok, *save = NULL;
	int found = 0;

	for (tok = strtok_r(copy, " \t\n", &save); tok && !found; tok = strtok_r(NULL, " \t\n", &save))
		found = !strcmp(tok, word);
	free(copy);
	return found;
}

/* The interface files a controller puts in a v2 cgroup below the root. */
static void v2_files(const char *dir, const char *controller)
{
	static const char *const mem[] = { "memory.max", "memory.swap.max", "memory.current", "memory.events", NULL };
	static const char *const pids[] = { "pids.max", "pids.current", "pids.events", NULL };
	static const char *const cpu[] = { "cpu.max", "cpu.stat", NULL };
	const char *const *files = !strcmp(controller, "memory") ? mem : !strcmp(controller, "pids") ? pids : cpu;

	for (; *files; files++)
		spit(dir, *files, "");
}

static void add_word(const char *dir, const char *name, const char *word)
{
	char *t = slurp(dir, name), text[1024];

	if (!word_in(t, word)) {
		t[strcspn(t, "\n")] = '\0';
		snprintf(text, sizeof(text), "%s%s%s\n", t, *t ? " " : "", word);
		spit(dir, name, text);
	}
	free(t);
}

static int in_cg2(const char *path)
{
	size_t n = strlen(cg2);

	return !strncmp(path, cg2, n) && (path[n] == '/' || !path[n]);
}

static int fake_mkdir(const char *path)
{
	char parent[PATH_MAX], *sub, *tok, *save = NULL;

	if (deny_mkdir && !strncmp(path, deny_mkdir, strlen(deny_mkdir)))
		return -EACCES;
	if (mkdir(path, 0755) < 0)
		return -errno;
	snprintf(parent, sizeof(parent), "%s", path);
	*strrchr(parent, '/') = '\0';
	if (in_cg2(path)) {
		sub = slurp(parent, "cgroup.subtree_control");
		spit(path, "cgroup.controllers", sub);
		spit(path, "cgroup.subtree_control", "");
		spit(path, "cgroup.type", "domain\n"); /* every cgroup but the root has one */
		spit(path, "cgroup.procs", "");
		spit(path, "cgroup.freeze", "");
		for (tok = strtok_r(sub, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
			v2_files(path, tok);
		free(sub);
	} else if (!strncmp(path, v1_root, strlen(v1_root))) {
		/* <v1>/<controller>/...: that controller's files. */
		const char *c = path + strlen(v1_root) + 1;

		spit(path, "cgroup.procs", "");
		spit(path, "tasks", "");
		if (!strncmp(c, "memory/", 7)) {
			spit(path, "memory.limit_in_bytes", "");
			spit(path, "memory.memsw.limit_in_bytes", "");
		} else if (!strncmp(c, "pids/", 5)) {
			spit(path, "pids.max", "");
		} else if (!strncmp(c, "cpu/", 4)) {
			spit(path, "cpu.cfs_period_us", "");
			spit(path, "cpu.cfs_quota_us", "");
		}
	}
	return 0;
}

/* Appends pid to dir/cgroup.procs, one a line as the kernel lists them. */
static void add_pid(const char *dir, const char *pid)
{
	char *t = slurp(dir, "cgroup.procs"), text[4096];

	snprintf(text, sizeof(text), "%s%s\n", t, pid);
	spit(dir, "cgroup.procs", text);
	free(t);
}

/* Removes pid from every cgroup.procs below dir. */
static void drop_pid(const char *dir, const char *pid)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *procs = slurp(dir, "cgroup.procs"), out[4096] = "", *tok, *save = NULL;

	for (tok = strtok_r(procs, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save))
		if (strcmp(tok, pid))
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s\n", tok);
	free(procs);
	spit(dir, "cgroup.procs", out);
	while (d && (de = readdir(d))) {
		char sub[PATH_MAX + 256];

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		drop_pid(sub, pid);
	}
	if (d)
		closedir(d);
}

static int model_write(const char *path, const char *value)
{
	char dir[PATH_MAX], *name, *t;
	int root;

	snprintf(dir, sizeof(dir), "%s", path);
	name = strrchr(dir, '/');
	*name++ = '\0';
	root = !strcmp(dir, cg2);
	if (!strcmp(name, "cgroup.subtree_control")) {
		const char *c = value + 1;
		DIR *d;
		struct dirent *de;

		ck_assert_msg(value[0] == '+', "only enabling is modelled: %s", value);
		t = slurp(dir, "cgroup.controllers");
		if (!word_in(t, c)) {
			free(t);
			return -ENOENT;
		}
		free(t);
		t = slurp(dir, "cgroup.procs");
		if (!root && *t) {
			free(t);
			/*
			 * A domain controller (memory) is refused in a cgroup that
			 * holds processes; a threaded one (pids, cpu) is taken, and
			 * makes the cgroup a threaded domain whose children no
			 * process can join ("domain invalid").
			 */
			if (strcmp(c, "pids") != 0 && strcmp(c, "cpu") != 0)
				return -EBUSY;
			spit(dir, "cgroup.type", "domain threaded\n");
		} else {
			free(t);
		}
		add_word(dir, "cgroup.subtree_control", c);
		d = opendir(dir);
		while (d && (de = readdir(d))) {
			char sub[PATH_MAX + 256];

			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			add_word(sub, "cgroup.controllers", c);
			v2_files(sub, c);
		}
		if (d)
			closedir(d);
		return 0;
	}
	if (!strcmp(name, "cgroup.procs")) {
		char parent_type[PATH_MAX];

		snprintf(parent_type, sizeof(parent_type), "%s", dir);
		*strrchr(parent_type, '/') = '\0';
		t = slurp(parent_type, "cgroup.type");
		if (!root && t && !strcmp(t, "domain threaded\n")) {
			free(t);
			return -EOPNOTSUPP; /* a child of a threaded domain: "domain invalid" */
		}
		free(t);
		t = slurp(dir, "cgroup.subtree_control");
		if (!root && *t) {
			free(t);
			return -EBUSY;
		}
		free(t);
		drop_pid(cg2, value);
		add_pid(dir, value);
		return 0;
	}
	return lstate_write_str(path, value); /* ENOENT when the controller's file is not there */
}

static int fake_write(const char *path, const char *value)
{
	int rc;

	if (!in_cg2(path))
		return lstate_write_str(path, value);
	rc = model_write(path, value);
	snprintf(writes + strlen(writes), sizeof(writes) - strlen(writes), "%s %s %d\n", path + strlen(cg2), value,
		 rc);
	return rc;
}

static int yes(void)
{
	return 1;
}

static int no(void)
{
	return 0;
}

/* ---- fixtures ------------------------------------------------------------------- */

static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/hangar-limits-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
	nsaid = 0;
	writes[0] = '\0';
	deny_mkdir = NULL;
	unsetenv("HANGAR_JAIL_CGROUP");
	/* Never the host's hierarchies: a missing v1 directory unless a test makes one. */
	snprintf(v1_root, sizeof(v1_root), "%s/v1", top);
	snprintf(cg2, sizeof(cg2), "%s/cg2", top);
	snprintf(self_cgroup, sizeof(self_cgroup), "%s/self-cgroup", top);
	spit(top, "self-cgroup", "0::/\n");
	limits_sys.v1_root = v1_root;
	limits_sys.self_cgroup = self_cgroup;
	limits_sys.write = fake_write;
	limits_sys.mkdir = fake_mkdir;
	limits_sys.own_userns = yes;
	limits_sys.ucounts = yes;
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	ck_assert_int_eq(system(cmd), 0);
}

/* top/rest as a directory (made, or there already). */
static void mkdirf(const char *rest)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", top, rest);
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* An empty writable file, as the kernel shows a cgroup's interface files. */
static void touch(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	close(fd);
}

/* dir/name's content ("" when empty), which must exist. */
static const char *content(const char *dir, const char *name)
{
	static char buf[4][8192];
	static int k;
	char path[PATH_MAX], *text;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = lstate_read_file(path, sizeof(buf[0]) - 1, NULL);
	ck_assert_msg(text != NULL, "%s: %s", path, strerror(errno));
	k = (k + 1) % 4;
	snprintf(buf[k], sizeof(buf[k]), "%s", text);
	free(text);
	return buf[k];
}

/* The cgroup2 root, with controllers, those its subtree_control enables, and processes. */
static void cg2_root(const char *controllers, const char *enabled, const char *procs)
{
	ck_assert_int_eq(mkdir(cg2, 0755), 0);
	spit(cg2, "cgroup.controllers", controllers);
	spit(cg2, "cgroup.subtree_control", enabled);
	spit(cg2, "cgroup.procs", procs);
}

/* cg2/rest, made as the kernel would, into out (when given). */
static void cg2_mkdir(const char *rest, char *out, size_t size)
{
	char path[400];

	ck_assert_int_lt(snprintf(path, sizeof(path), "%s/%s", cg2, rest), (int)sizeof(path));
	ck_assert_int_eq(fake_mkdir(path), 0);
	if (out)
		snprintf(out, size, "%s", path);
}

static int cg2_write(const char *rest, const char *file, const char *value)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s/%s", cg2, rest, file);
	return model_write(path, value);
}

static const struct limits lim = { .memory_mb = 256, .pids = 64, .cpus = 3, .disk_mb = 100, .shm_mb = 64 };

/* ---- cgroup v2 ------------------------------------------------------------------ */

/* A sandbox cgroup where every controller is there already: each limit lands in its v2 file. */
START_TEST(v2_files_written)
{
	char cg[256], rec[1024];
	struct limit_cgroups c;

	snprintf(cg, sizeof(cg), "%s/hangar-sb", top);
	mkdirf("hangar-sb");
	touch(cg, "memory.max");
	touch(cg, "memory.swap.max");
	touch(cg, "pids.max");
	touch(cg, "cpu.max");
	touch(cg, "cgroup.procs");
	limits_setup(&c, &lim, "sb", cg);
	ck_assert_str_eq(content(cg, "memory.max"), "268435456");
	ck_assert_str_eq(content(cg, "memory.swap.max"), "0");
	ck_assert_str_eq(content(cg, "pids.max"), "64");
	ck_assert_str_eq(content(cg, "cpu.max"), "300000 100000");
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		ck_assert_int_eq(c.v2[i], 1);
		ck_assert_str_eq(c.path[i], cg);
	}
	ck_assert_uint_eq(c.nproc, 0);
	ck_assert_uint_eq(uid_range_nproc, 0);
	ck_assert_int_eq(nsaid, 0);
	/* v2: the freezer's cgroup, which the child joined already; nothing to join or remove here. */
	ck_assert_int_eq(limits_join(&c), 0);
	ck_assert_str_eq(content(cg, "cgroup.procs"), "");
	snprintf(rec, sizeof(rec), "%s/tasks", cg);
	ck_assert_int_eq(access(rec, F_OK), -1);
	limits_remove(&c);
	ck_assert_int_eq(access(cg, F_OK), 0);
	/* What the library reads back (usage.c). */
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\nmemory v2 %s\npids v2 %s\ncpu v2 %s\n",
		 cg, cg, cg);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* Without swap accounting there is no memory.swap.max to set, and nothing is said about it. */
START_TEST(v2_without_swap_file)
{
	char cg[256];
	struct limit_cgroups c;

	snprintf(cg, sizeof(cg), "%s/hangar-sb", top);
	mkdirf("hangar-sb");
	touch(cg, "memory.max");
	touch(cg, "pids.max");
	touch(cg, "cpu.max");
	limits_setup(&c, &lim, "sb", cg);
	ck_assert_str_eq(content(cg, "memory.max"), "268435456");
	ck_assert_int_eq(access(strcat(cg, "/memory.swap.max"), F_OK), -1);
	ck_assert_int_eq(nsaid, 0);
}
END_TEST

/*
 * The jail's own cgroup, delegated (it lists every controller) but holding
 * the caller and the jail, as `systemd-run --user --scope -p Delegate=yes`
 * leaves it: the kernel refuses to hand anything down from it (EBUSY), so
 * the sandbox below it gets no v2 limit, whatever the jail tries; the
 * record says why, and the process count falls back to RLIMIT_NPROC.
 */
START_TEST(v2_own_cgroup_with_processes)
{
	char scope[512], cg[512], rec[8192];
	struct limit_cgroups c;

	cg2_root("cpu memory pids", "cpu memory pids", "1\n");
	cg2_mkdir("user.slice", NULL, 0);
	ck_assert_int_eq(cg2_write("user.slice", "cgroup.subtree_control", "+memory"), 0);
	ck_assert_int_eq(cg2_write("user.slice", "cgroup.subtree_control", "+pids"), 0);
	ck_assert_int_eq(cg2_write("user.slice", "cgroup.subtree_control", "+cpu"), 0);
	cg2_mkdir("user.slice/run-1.scope", scope, sizeof(scope));
	ck_assert_str_eq(content(scope, "cgroup.controllers"), "memory pids cpu\n");
	ck_assert_int_eq(cg2_write("user.slice/run-1.scope", "cgroup.procs", "100"), 0); /* the caller */
	ck_assert_int_eq(cg2_write("user.slice/run-1.scope", "cgroup.procs", "200"), 0); /* the jail */
	/* cgroup.c's freezer cgroup: <own>/hangar/<id>. */
	cg2_mkdir("user.slice/run-1.scope/hangar", NULL, 0);
	cg2_mkdir("user.slice/run-1.scope/hangar/sb", cg, sizeof(cg));
	writes[0] = '\0';

	limits_setup(&c, &lim, "sb", cg);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		ck_assert_str_eq(c.path[i], "");
		ck_assert_msg(strstr(c.why[i], "run-1.scope holds processes"), "why: %s", c.why[i]);
		ck_assert_msg(strstr(c.why[i], "HANGAR_LOCAL_CGROUP"), "why: %s", c.why[i]);
	}
	/*
	 * Nothing asked of the jail's own cgroup, which holds processes: the
	 * kernel would refuse memory there but take pids and cpu, making it a
	 * threaded domain that neither the sandbox nor anything else could
	 * join below (the model does so); nothing written above it either.
	 */
	ck_assert_str_eq(writes, "");
	ck_assert_str_eq(content(scope, "cgroup.subtree_control"), "");
	ck_assert_str_eq(content(scope, "cgroup.type"), "domain\n");
	ck_assert_int_eq(access(strcat(strcpy(rec, cg), "/memory.max"), F_OK), -1);
	/* Processes: RLIMIT_NPROC of the commands' namespace (userns.c). */
	ck_assert_uint_eq(c.nproc, 64);
	ck_assert_uint_eq(uid_range_nproc, 64);
	ck_assert_int_eq(nsaid, 1);
	ck_assert(was_said("not limited in this sandbox: memory, CPU time ("));
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec),
		 "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\n"
		 "memory none cgroup v2: %s holds processes, so the kernel hands no controller down from it (set "
		 "HANGAR_LOCAL_CGROUP to a delegated cgroup that holds none); cgroup v1: no memory hierarchy at %s/memory\n"
		 "pids rlimit 64\n"
		 "cpu none cgroup v2: %s holds processes, so the kernel hands no controller down from it (set "
		 "HANGAR_LOCAL_CGROUP to a delegated cgroup that holds none); cgroup v1: no cpu hierarchy at %s/cpu\n",
		 scope, v1_root, scope, v1_root);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/*
 * HANGAR_LOCAL_CGROUP done right: the delegated scope's processes moved to a
 * leaf of their own (main), the scope handing the controllers down, and an
 * empty child (sandboxes) named for the sandboxes. The jail enables each
 * controller in sandboxes and sandboxes/hangar, never above, and the
 * sandbox's cgroup has every limit; it can still take the sandbox's
 * processes, which sandboxes itself no longer can.
 */
START_TEST(v2_process_free_base)
{
	static const char *const enable[] = { "+memory", "+pids", "+cpu" };
	char base[512], cg[512], rec[4096];
	struct limit_cgroups c;
	const char *w;

	cg2_root("cpu memory pids", "cpu memory pids", "1\n");
	cg2_mkdir("app.scope", NULL, 0);
	ck_assert_int_eq(cg2_write("app.scope", "cgroup.procs", "100"), 0);
	cg2_mkdir("app.scope/main", NULL, 0);
	ck_assert_int_eq(cg2_write("app.scope", "cgroup.subtree_control", "+memory"), -EBUSY);
	ck_assert_int_eq(cg2_write("app.scope/main", "cgroup.procs", "100"), 0);
	ck_assert_str_eq(content(cg2, "app.scope/cgroup.procs"), "");
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(cg2_write("app.scope", "cgroup.subtree_control", enable[i]), 0);
	cg2_mkdir("app.scope/sandboxes", base, sizeof(base));
	ck_assert_int_eq(setenv("HANGAR_JAIL_CGROUP", base, 1), 0);
	ck_assert_str_eq(limits_v2_base(), base);
	cg2_mkdir("app.scope/sandboxes/hangar", NULL, 0);
	cg2_mkdir("app.scope/sandboxes/hangar/sb", cg, sizeof(cg));
	writes[0] = '\0';

	limits_setup(&c, &lim, "sb", cg);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		ck_assert_str_eq(c.path[i], cg);
		ck_assert_int_eq(c.v2[i], 1);
	}
	ck_assert_uint_eq(c.nproc, 0);
	ck_assert_int_eq(nsaid, 0);
	ck_assert_str_eq(content(cg, "memory.max"), "268435456");
	ck_assert_str_eq(content(cg, "memory.swap.max"), "0");
	ck_assert_str_eq(content(cg, "pids.max"), "64");
	ck_assert_str_eq(content(cg, "cpu.max"), "300000 100000");
	/* Every cgroup.subtree_control written is the base's or below it. */
	for (w = writes; *w; w = strchr(w, '\n') + 1)
		if (strstr(w, "cgroup.subtree_control"))
			ck_assert_msg(!strncmp(w, "/app.scope/sandboxes/", 21), "wrote above the base: %s", writes);
	ck_assert_str_eq(content(base, "cgroup.subtree_control"), "memory pids cpu\n");
	/* The jail's child joins it (spawn.c); the base itself can hold none now. */
	ck_assert_int_eq(cg2_write("app.scope/sandboxes/hangar/sb", "cgroup.procs", "4242"), 0);
	ck_assert_int_eq(cg2_write("app.scope/sandboxes", "cgroup.procs", "4243"), -EBUSY);
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\nmemory v2 %s\npids v2 %s\ncpu v2 %s\n",
		 cg, cg, cg);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* The root cgroup may hold processes and still hand controllers down: a sandbox at the root's hangar/ is limited. */
START_TEST(v2_root_holds_processes)
{
	char cg[512];
	struct limit_cgroups c;

	cg2_root("cpu memory pids", "", "1\n2\n");
	cg2_mkdir("hangar", NULL, 0);
	cg2_mkdir("hangar/sb", cg, sizeof(cg));
	limits_setup(&c, &lim, "sb", cg);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		ck_assert_int_eq(c.v2[i], 1);
	ck_assert_str_eq(content(cg2, "cgroup.subtree_control"), "memory pids cpu\n");
	ck_assert_str_eq(content(cg, "pids.max"), "64");
}
END_TEST

/* A controller the base was not given (not in its cgroup.controllers) cannot be asked for, and is not. */
START_TEST(v2_not_delegated)
{
	char cg[512];
	struct limit_cgroups c;

	cg2_root("cpu memory pids", "pids", "1\n");
	cg2_mkdir("mine", NULL, 0); /* gets pids only */
	cg2_mkdir("mine/hangar", NULL, 0);
	cg2_mkdir("mine/hangar/sb", cg, sizeof(cg));
	limits_sys.own_userns = no;
	limits_setup(&c, &lim, "sb", cg);
	ck_assert_str_eq(c.path[0], "");
	ck_assert_msg(strstr(c.why[0], "memory is not delegated to"), "why: %s", c.why[0]);
	ck_assert_str_eq(c.path[1], cg);
	ck_assert_str_eq(content(cg, "pids.max"), "64");
	ck_assert_str_eq(c.path[2], "");
	ck_assert_msg(!strstr(writes, "+memory") && !strstr(writes, "+cpu"), "asked anyway: %s", writes);
}
END_TEST

/* HANGAR_JAIL_CGROUP set, but the sandbox's cgroup made elsewhere: said, and tried where it is. */
START_TEST(v2_base_elsewhere)
{
	char cg[512], base[512];
	struct limit_cgroups c;

	cg2_root("cpu memory pids", "", "1\n");
	cg2_mkdir("sandboxes", base, sizeof(base));
	cg2_mkdir("hangar", NULL, 0);
	cg2_mkdir("hangar/sb", cg, sizeof(cg));
	setenv("HANGAR_JAIL_CGROUP", base, 1);
	limits_setup(&c, &lim, "sb", cg);
	ck_assert(was_said("HANGAR_JAIL_CGROUP is"));
	ck_assert_int_eq(c.v2[0], 1);
	setenv("HANGAR_JAIL_CGROUP", "relative/path", 1);
	ck_assert_ptr_null(limits_v2_base());
}
END_TEST

/* ---- cgroup v1 ------------------------------------------------------------------ */

/* The one reader of /proc/self/cgroup: a v1 controller's line, or cgroup v2's "0::" one. */
START_TEST(own_cgroup_of_each_hierarchy)
{
	char own[64];

	spit(top, "self-cgroup",
	     "9:name=systemd:/sys\n8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/batch\n"
	     "3:freezer:/../outside\n0::/user.slice/x\n");
	ck_assert_int_eq(own_cgroup("memory", own, sizeof(own)), 0);
	ck_assert_str_eq(own, "/process_api/abc");
	ck_assert_int_eq(own_cgroup("cpuacct", own, sizeof(own)), 0);
	ck_assert_str_eq(own, "/batch");
	ck_assert_int_eq(own_cgroup("pids", own, sizeof(own)), 0);
	ck_assert_str_eq(own, "/");
	ck_assert_int_eq(own_cgroup(NULL, own, sizeof(own)), 0);
	ck_assert_str_eq(own, "/user.slice/x");
	/* Neither a name= hierarchy's nor the v2 line's empty list names a controller. */
	ck_assert_int_eq(own_cgroup("systemd", own, sizeof(own)), -1);
	ck_assert_int_eq(own_cgroup("", own, sizeof(own)), -1);
	ck_assert_int_eq(own_cgroup("freezer", own, sizeof(own)), -1);
	ck_assert_int_eq(own_cgroup("memory", own, 8), -1);
	ck_assert_int_eq(own_cgroup("blkio", own, sizeof(own)), -1);
	spit(top, "self-cgroup", "4:memory:/a\n");
	ck_assert_int_eq(own_cgroup(NULL, own, sizeof(own)), -1);
}
END_TEST

/* Each v1 cgroup is nested under the jail's own one of that controller (its /proc/self/cgroup line). */
START_TEST(v1_nested_under_own)
{
	char own[1024], want[3][1200], rec[8192];
	struct limit_cgroups c;

	spit(top, "self-cgroup",
	     "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/batch\n0::/\n");
	mkdirf("v1");
	mkdirf("v1/memory");
	mkdirf("v1/memory/process_api");
	mkdirf("v1/memory/process_api/abc");
	mkdirf("v1/pids");
	mkdirf("v1/cpu");
	mkdirf("v1/cpu/batch");
	snprintf(own, sizeof(own), "%s/memory/process_api/abc", v1_root);
	snprintf(want[0], sizeof(want[0]), "%s/hangar/sb", own);
	snprintf(want[1], sizeof(want[1]), "%s/pids/hangar/sb", v1_root);
	snprintf(want[2], sizeof(want[2]), "%s/cpu/batch/hangar/sb", v1_root);

	limits_setup(&c, &lim, "sb", NULL);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++) {
		ck_assert_str_eq(c.path[i], want[i]);
		ck_assert_int_eq(c.v2[i], 0);
	}
	ck_assert_int_eq(nsaid, 0);
	ck_assert_str_eq(content(want[0], "memory.limit_in_bytes"), "268435456");
	ck_assert_str_eq(content(want[0], "memory.memsw.limit_in_bytes"), "268435456");
	ck_assert_str_eq(content(want[1], "pids.max"), "64");
	ck_assert_str_eq(content(want[2], "cpu.cfs_quota_us"), "300000");
	ck_assert_uint_eq(uid_range_nproc, 0);
	/* v1: the child joins each controller's cgroup itself, as a thread moving itself (no pid: no lock to wait for). */
	ck_assert_int_eq(limits_join(&c), 0);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		ck_assert_str_eq(content(want[i], "tasks"), "0");
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec), "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\nmemory v1 %s\npids v1 %s\ncpu v1 %s\n",
		 want[0], want[1], want[2]);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* The jail's own v1 cgroup not writable: at the hierarchy's root, and said. */
START_TEST(v1_own_not_writable)
{
	char deny[PATH_MAX], want[PATH_MAX];
	struct limit_cgroups c;

	spit(top, "self-cgroup", "4:memory:/process_api/abc\n");
	mkdirf("v1");
	mkdirf("v1/memory");
	mkdirf("v1/memory/process_api");
	mkdirf("v1/memory/process_api/abc");
	snprintf(deny, sizeof(deny), "%s/memory/process_api", v1_root);
	deny_mkdir = deny;
	snprintf(want, sizeof(want), "%s/memory/hangar/sb", v1_root);
	limits_setup(&c, &lim, "sb", NULL);
	ck_assert_str_eq(c.path[0], want);
	ck_assert(was_said("at the hierarchy's root instead"));
	ck_assert(was_said("Permission denied"));
	/* Neither nested nor at the root: not limited, and why. */
	deny_mkdir = v1_root;
	limits_setup(&c, &lim, "sb2", NULL);
	ck_assert_str_eq(c.path[0], "");
	ck_assert_msg(strstr(c.why[0], "cgroup v1: cannot make") && strstr(c.why[0], "process_api/abc/hangar/sb2"),
		      "why: %s", c.why[0]);
}
END_TEST

/* A real cgroup directory goes with its files; the model's must go first. */
static void strip(const char *dir)
{
	char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "find '%s' -type f -delete", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Removal takes the sandbox's cgroup, and hangar/ once no other sandbox's is in it. */
START_TEST(v1_removal)
{
	char hangar[PATH_MAX], other[PATH_MAX + 16];
	struct limit_cgroups c;

	spit(top, "self-cgroup", "4:memory:/own\n");
	mkdirf("v1");
	mkdirf("v1/memory");
	mkdirf("v1/memory/own");
	snprintf(hangar, sizeof(hangar), "%s/memory/own/hangar", v1_root);
	limits_setup(&c, &lim, "sb", NULL);
	snprintf(other, sizeof(other), "%s/other", hangar);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	strip(hangar);
	limits_remove(&c);
	ck_assert_int_eq(access(c.path[0], F_OK), -1);
	ck_assert_int_eq(access(hangar, F_OK), 0);
	ck_assert_int_eq(rmdir(other), 0);
	ck_assert_int_eq(fake_mkdir(c.path[0]), 0);
	strip(hangar);
	limits_remove(&c);
	ck_assert_int_eq(access(hangar, F_OK), -1);
}
END_TEST

/* ---- nothing there ---------------------------------------------------------------- */

/* No v2 cgroup, no v1 hierarchy, no user namespace of the jail's: nothing is limited, and the record says why. */
START_TEST(nothing_to_limit)
{
	struct limit_cgroups c;
	char rec[4096];

	limits_sys.own_userns = no;
	limits_setup(&c, &lim, "sb", NULL);
	for (int i = 0; i < LIMIT_CONTROLLERS; i++)
		ck_assert_str_eq(c.path[i], "");
	ck_assert_uint_eq(c.nproc, 0);
	ck_assert_uint_eq(uid_range_nproc, 0);
	ck_assert_int_eq(nsaid, 1);
	ck_assert(was_said("not limited in this sandbox: memory, process count, CPU time ("));
	ck_assert_int_eq(limits_join(&c), 0);
	ck_assert_int_eq(limits_record(top, &c, &lim), 0);
	snprintf(rec, sizeof(rec),
		 "memory_mb 256\npids 64\ncpus 3\ndisk_mb 100\n"
		 "memory none cgroup v2: the sandbox has no cgroup v2 of its own; cgroup v1: no memory hierarchy at %s/memory\n"
		 "pids none cgroup v2: the sandbox has no cgroup v2 of its own; cgroup v1: no pids hierarchy at %s/pids; "
		 "RLIMIT_NPROC: the sandbox has no user namespace of the jail's to hold it\n"
		 "cpu none cgroup v2: the sandbox has no cgroup v2 of its own; cgroup v1: no cpu hierarchy at %s/cpu\n",
		 v1_root, v1_root, v1_root);
	ck_assert_str_eq(content(top, "limits"), rec);
}
END_TEST

/* A kernel older than ucounts (5.14) counts RLIMIT_NPROC per uid: no per-sandbox limit from it. */
START_TEST(no_rlimit_before_ucounts)
{
	struct limit_cgroups c;

	limits_sys.ucounts = no;
	limits_setup(&c, &lim, "sb", NULL);
	ck_assert_uint_eq(c.nproc, 0);
	ck_assert_msg(strstr(c.why[1], "counts it per uid"), "why: %s", c.why[1]);
	limits_sys.ucounts = yes;
	limits_setup(&c, &lim, "sb", NULL);
	ck_assert_uint_eq(c.nproc, 64);
	ck_assert_uint_eq(uid_range_nproc, 64);
}
END_TEST

static Suite *limits_suite(void)
{
	Suite *s = suite_create("jail-limits");
	TCase *tc = tcase_create("cgroups");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, v2_files_written);
	tcase_add_test(tc, v2_without_swap_file);
	tcase_add_test(tc, v2_own_cgroup_with_processes);
	tcase_add_test(tc, v2_process_free_base);
	tcase_add_test(tc, v2_root_holds_processes);
	tcase_add_test(tc, v2_not_delegated);
	tcase_add_test(tc, v2_base_elsewhere);
	tcase_add_test(tc, v1_nested_under_own);
	tcase_add_test(tc, v1_own_not_writable);
	tcase_add_test(tc, own_cgroup_of_each_hierarchy);
	tcase_add_test(tc, v1_removal);
	tcase_add_test(tc, nothing_to_limit);
	tcase_add_test(tc, no_rlimit_before_ucounts);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(limits_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
