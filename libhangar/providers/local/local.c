/*
 * The local provider: each sandbox is a bubblewrap jail on this machine with
 * hangar-envd as its first process, supervised by hangar-jail so that it
 * outlives the process that created it. Not a kernel boundary: the sandbox
 * shares the host's kernel (HANGAR_CAP_KERNEL_ISOLATION is never claimed).
 *
 * Layout and file formats: lstate.h. Every change to meta.json is made under
 * an exclusive flock() on the sandbox's lock file; the jail only reads it
 * (on SIGHUP, and when its expiry timer fires).
 *
 * envd's access token never touches disk: create hands it to the jail over a
 * pipe, the jail hands it to envd over another, and a later connect() asks
 * the jail for it on jail.sock.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "local.h"
#include "snapshot.h"

static int check_uid_range(const char *name, const char *value);

static int executable_file(const char *path)
{
	struct stat st;

	return path[0] == '/' && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* name as given when it has a slash, else the first executable of that name on PATH. */
static char *resolve_exe(const char *name)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (strchr(name, '/'))
		return executable_file(name) ? strdup(name) : NULL;
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n > 0 && snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, name) < (int)sizeof(buf) &&
		    executable_file(buf))
			return strdup(buf);
		path += n;
		if (*path == ':')
			path++;
	}
	return NULL;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void local_fini(void *state)
{
	struct local *l = state;

	if (!l)
		return;
	local_pool_fini(l);
	local_reap_jails();
	local_snapshot_holds_fini(l);
	free(l->root);
	free(l->run);
	free(l->bwrap);
	free(l->envd);
	free(l->jail);
	ltokens_fini(&l->tokens);
	free(l);
}

/*
 * HANGAR_LOCAL_CGROUP, as the jail needs it: a cgroup v2 directory this
 * uid may make cgroups in and hand controllers down from, which holds no
 * process (the kernel hands nothing down from a cgroup that does) and was
 * given at least one of memory, pids and cpu. 0, or an error naming it.
 */
static int check_cgroup_dir(const char *cg)
{
	static const char *const wanted[] = { "memory", "pids", "cpu" };
	char path[PATH_MAX], *text;
	struct statfs fs;
	int any = 0;

	if (statfs(cg, &fs) < 0)
		return hangar_sys_error(HANGAR_ECONFIG, 0, errno, "HANGAR_LOCAL_CGROUP: %s is not a cgroup v2 directory",
					cg);
	if (fs.f_type != CGROUP2_SUPER_MAGIC)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_LOCAL_CGROUP: %s is not a cgroup v2 directory", cg);
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", cg);
	if (access(cg, W_OK) < 0 || access(path, W_OK) < 0)
		return hangar_sys_error(HANGAR_ECONFIG, 0, errno,
					"HANGAR_LOCAL_CGROUP: %s is not delegated to uid %u (it cannot make cgroups there "
					"or write its cgroup.subtree_control)",
					cg, (unsigned)geteuid());
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	text = lstate_read_file(path, 1 << 20, NULL);
	if (!text || text[strspn(text, " \n")]) {
		free(text);
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_LOCAL_CGROUP: %s holds processes, and the kernel hands no controller down "
					"from a cgroup that does: move them to a cgroup of their own beside it",
					cg);
	}
	free(text);
	snprintf(path, sizeof(path), "%s/cgroup.controllers", cg);
	text = lstate_read_file(path, 4096, NULL);
	for (size_t i = 0; text && i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		char *tok, *save = NULL, *copy = strdup(text);

		for (tok = copy ? strtok_r(copy, " \n", &save) : NULL; tok; tok = strtok_r(NULL, " \n", &save))
			any |= !strcmp(tok, wanted[i]);
		free(copy);
	}
	free(text);
	if (!any)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_LOCAL_CGROUP: %s has none of the memory, pids and cpu controllers (its "
					"parent's cgroup.subtree_control must enable them)",
					cg);
	return 0;
}

/* Finds bwrap, hangar-envd and hangar-jail as the settings name them: 0, or an error naming the setting. */
static int find_programs(struct local *l)
{
	const char *bwrap = hangar_sys_ctx_setting(l->ctx, "HANGAR_BWRAP_PATH");
	const char *envd = hangar_sys_ctx_setting(l->ctx, "HANGAR_ENVD_PATH");
	const char *jail = hangar_sys_ctx_setting(l->ctx, "HANGAR_JAIL_PATH");
	char buf[PATH_MAX];

	l->bwrap = bwrap && *bwrap ? resolve_exe(bwrap) : NULL;
	if (!l->bwrap)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_BWRAP_PATH: \"%s\" is not an executable file or on PATH "
					"(install bubblewrap)", bwrap ? bwrap : "");
	if (!envd || !executable_file(envd) || !realpath(envd, buf) || !(l->envd = strdup(buf)))
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0, "HANGAR_ENVD_PATH: \"%s\" is not an executable file",
					envd ? envd : "");
	if (!jail || !executable_file(jail) || !(l->jail = strdup(jail)))
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_JAIL_PATH: \"%s\" is not an executable file", jail ? jail : "");
	return 0;
}

/*
 * $HANGAR_STATE_DIR/local into buf (PATH_MAX): 0, or an error when it is
 * too long, since every sandbox's unix sockets lie below it.
 */
static int root_path(struct local *l, char *buf)
{
	const char *sdir = hangar_sys_ctx_setting(l->ctx, "HANGAR_STATE_DIR");

	if (!sdir || sdir[0] != '/' ||
	    snprintf(buf, PATH_MAX, "%s/local", sdir) >= PATH_MAX ||
	    strlen(buf) + strlen(SOCKET_SUFFIX) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"HANGAR_STATE_DIR: \"%s\" is too long for the sandboxes' unix sockets "
					"(at most %zu characters)", sdir ? sdir : "",
					sizeof(((struct sockaddr_un *)0)->sun_path) - strlen(SOCKET_SUFFIX) - 7);
	return 0;
}

/* Makes the directory root_path() gave, mode 0700, and keeps it as l->root. */
static int make_root(struct local *l, const char *path)
{
	int r = mkdir_p(path, 0700);

	if (r < 0 || chmod(path, 0700) < 0)
		return hangar_sys_error(HANGAR_ECONFIG, 0, r < 0 ? -r : errno, "HANGAR_STATE_DIR: cannot create %s",
					path);
	l->root = strdup(path);
	if (!l->root)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	return 0;
}

static int local_init(void **state, hangar_ctx *ctx, void *data)
{
	const char *range = hangar_sys_ctx_setting(ctx, "HANGAR_LOCAL_UID_RANGE");
	const char *cg = hangar_sys_ctx_setting(ctx, "HANGAR_LOCAL_CGROUP");
	struct local *l;
	char root[PATH_MAX];
	int r;

	(void)data;
	*state = NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory");
	ltokens_init(&l->tokens);
	local_snapshot_holds_init(l);
	l->ctx = ctx;
	r = local_pool_init(l) < 0 ? hangar_sys_error(HANGAR_ENOMEM, 0, ENOMEM, "out of memory") : 0;
	if (!r)
		r = find_programs(l);
	if (!r)
		r = root_path(l, root);
	if (!r && range && *range)
		r = check_uid_range("HANGAR_LOCAL_UID_RANGE", range);
	if (!r && cg && *cg)
		r = check_cgroup_dir(cg);
	if (!r)
		r = make_root(l, root);
	if (!r)
		r = local_run_dir(l);
	if (r) {
		local_fini(l);
		return r;
	}
	*state = l;
	return 0;
}

/* HANGAR_LOCAL_UID_RANGE: START:COUNT host ids, START > 0, COUNT >= 65536. */
static int check_uid_range(const char *name, const char *value)
{
	unsigned long long start = 0, count = 0;
	char tail = 0;

	if (sscanf(value, "%llu:%llu%c", &start, &count, &tail) != 2 || start == 0 || count < 65536 ||
	    start + count > 0xffffffffULL || value[0] < '0' || value[0] > '9')
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"%s: \"%s\" is not START:COUNT (host ids, START > 0, COUNT >= 65536)", name,
					value);
	return 0;
}

/* HANGAR_LOCAL_CGROUP: a cgroup directory under /sys/fs/cgroup/ (where the library reads cgroups), no "..". */
static int check_cgroup_path(const char *name, const char *value)
{
	if (strncmp(value, "/sys/fs/cgroup/", 15) != 0 || strstr(value, "..") || strlen(value) >= 1024)
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"%s: \"%s\" is not a cgroup v2 directory under /sys/fs/cgroup/ (no \"..\")",
					name, value);
	return 0;
}

/* HANGAR_LOCAL_NET_ALLOW: "A.B.C.D/N,..." IPv4 ranges. */
static int check_net_allow(const char *name, const char *value)
{
	for (const char *p = value; *p;) {
		size_t n = strcspn(p, ",");
		unsigned a, b, c, d, bits;
		char tail = 0, cidr[64];

		snprintf(cidr, sizeof(cidr), "%.*s", (int)(n < 63 ? n : 63), p);
		if (n >= 63 || sscanf(cidr, "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &bits, &tail) != 5 || a > 255 ||
		    b > 255 || c > 255 || d > 255 || bits > 32 || strlen(value) >= 1024)
			return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
						"%s: \"%s\" is not a list of IPv4 CIDR ranges (A.B.C.D/N,...)", name,
						value);
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* HANGAR_LOCAL_RUN_DIR: "auto", "state", or an absolute path without "..", short enough for sockets below it. */
static int check_run_dir(const char *name, const char *value)
{
	if (!strcmp(value, "auto") || !strcmp(value, "state"))
		return 0;
	if (value[0] != '/' || strstr(value, "/..") || strlen(value) > RUN_BASE_MAX ||
	    value[strlen(value) - 1] == '/')
		return hangar_sys_error(HANGAR_ECONFIG, 0, 0,
					"%s: \"%s\" is not auto, state, or an absolute directory without \"..\" or a "
					"trailing /, of at most %d characters", name, value, RUN_BASE_MAX);
	return 0;
}

/* The local provider's settings, each with its one default. */
static const struct hangar_setting_def local_settings[] = {
	{ "HANGAR_ENVD_PATH", HANGAR_SETTING_TYPE_PATH, 0, HANGAR_ENVD_INSTALL_PATH, 0, 0, NULL,
	  "the hangar-envd binary local sandboxes run", NULL },
	{ "HANGAR_JAIL_PATH", HANGAR_SETTING_TYPE_PATH, 0, HANGAR_JAIL_INSTALL_PATH, 0, 0, NULL,
	  "the hangar-jail supervisor of local sandboxes", NULL },
	{ "HANGAR_BWRAP_PATH", HANGAR_SETTING_TYPE_STRING, 0, "bwrap", 0, 0, NULL,
	  "the bubblewrap binary (a name is looked up on PATH)", NULL },
	{ "HANGAR_LOCAL_NETWORK", HANGAR_SETTING_TYPE_BOOL, 0, "on", 0, 0, NULL,
	  "network inside local sandboxes", NULL },
	{ "HANGAR_LOCAL_FREEZER", HANGAR_SETTING_TYPE_CHOICE, 0, "auto", 0, 0, "auto|v2|v1|none",
	  "how local sandboxes pause: cgroup freezer v2 or v1, none (SIGSTOP), auto", NULL },
	{ "HANGAR_LOCAL_ETC", HANGAR_SETTING_TYPE_CHOICE, 0, "auto", 0, 0, "auto|binds",
	  "how a local sandbox's /etc is mounted: one overlay (auto, binds where it cannot be) or binds", NULL },
	{ "HANGAR_LOCAL_MEMORY_MB", HANGAR_SETTING_TYPE_INT, 0, "2048", 16, 1LL << 22, NULL,
	  "memory limit of each local sandbox, MiB", NULL },
	{ "HANGAR_LOCAL_PIDS", HANGAR_SETTING_TYPE_INT, 0, "512", 8, 1LL << 22, NULL,
	  "process limit of each local sandbox", NULL },
	{ "HANGAR_LOCAL_CPUS", HANGAR_SETTING_TYPE_INT, 0, "2", 1, 1024, NULL, "CPUs of each local sandbox", NULL },
	{ "HANGAR_LOCAL_DISK_MB", HANGAR_SETTING_TYPE_INT, 0, "1024", 1, 1LL << 24, NULL,
	  "disk limit of each local sandbox, MiB", NULL },
	{ "HANGAR_LOCAL_UID_RANGE", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "host ids for sandboxes' user namespaces, START:COUNT", check_uid_range },
	{ "HANGAR_LOCAL_NET_ALLOW", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "private IPv4 ranges local sandboxes may reach, A.B.C.D/N,...", check_net_allow },
	{ "HANGAR_LOCAL_SUBIDS", HANGAR_SETTING_TYPE_BOOL, 0, "on", 0, 0, NULL,
	  "non-root callers: sandbox users on the caller's /etc/subuid ids", NULL },
	{ "HANGAR_LOCAL_CGROUP", HANGAR_SETTING_TYPE_STRING, HANGAR_SETTING_OPTIONAL, "", 0, 0, NULL,
	  "a delegated cgroup v2 holding no processes, for local sandboxes' limits", check_cgroup_path },
	{ "HANGAR_LOCAL_POOL_SIZE", HANGAR_SETTING_TYPE_INT, 0, "0", 0, 10000, NULL,
	  "local sandboxes kept started ahead of time for each kind of create (0: no pool)", NULL },
	{ "HANGAR_LOCAL_RUN_DIR", HANGAR_SETTING_TYPE_STRING, 0, "auto", 0, 0, NULL,
	  "where running local sandboxes keep their files: auto (a tmpfs), state, or a directory", check_run_dir },
	{ NULL, 0, 0, NULL, 0, 0, NULL, NULL, NULL },
};

const struct hangar_provider_ops local_provider_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "local",
	/* Snapshots for root and callers with subordinate ids only: local_capabilities() (snapshot.c). */
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_HOT_RESUME | HANGAR_CAP_PTY | HANGAR_CAP_IMAGES |
			HANGAR_CAP_SNAPSHOT,
	.init = local_init,
	.fini = local_fini,
	.create = local_create,
	.connect = local_connect,
	.kill = local_kill,
	.pause = local_pause,
	.resume = local_resume,
	.set_timeout = local_set_timeout,
	.list = local_list,
	.metrics = local_metrics,
	.logs = local_logs,
	.snapshot = local_snapshot,
	.settings = local_settings,
	.get_capabilities = local_capabilities,
	.expose_port = local_expose_port,
	.oom_kills = local_oom_kills,
	.snapshot_delete = local_snapshot_delete_slot,
	.snapshot_release = local_snapshot_release_slot,
	.snapshot_list = local_snapshot_list,
	.snapshot_held = local_snapshot_held,
};
