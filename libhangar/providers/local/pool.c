/*
 * The warm pool of local sandboxes (pool.h says how it lies on disk): the
 * claim, the hand-over to a new token, variables and lifetime, and the
 * refill thread.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"
#include "pool.h"

#define KEY_MAX 8192
/*
 * The most a claim hands envd as variables, in all: hangar-envd takes up to
 * 2 MiB of them as JSON, which holds these however they are escaped. A
 * create with more is made cold.
 */
#define CLAIM_VARS_MAX (256 * 1024)
/*
 * How long the refill thread lets a claim's caller have the machine before
 * it starts a sandbox: a caller runs its first command at once, and a
 * create beside it (bwrap's mounts, envd's start) took about 1 ms of that
 * command's 5 on two CPUs (local-bench, e.). A pool of N then lags N
 * claims by this much more, far less than one create.
 */
#define REFILL_DELAY_MS 25

struct lpool {
	pthread_mutex_t mu;
	pthread_cond_t wake; /* stop was set */
	pthread_t thread;
	int has_thread;      /* started and not yet joined */
	pid_t owner;         /* the process that started it: a forked child has no such thread */
	int running;         /* the thread has not finished its loop */
	int stop;            /* local_pool_fini: finish the sandbox being made, then return */
	int pending;         /* options wait in template/network */
	char *template_id;
	int network;
};

/* Set in the refill thread: its own creates are cold and kick nothing. */
static __thread int filling;

/* The settings a sandbox is made with besides its options: what create.c's jail_settings hands the jail. */
static const char *const key_settings[] = {
	"HANGAR_LOCAL_FREEZER", "HANGAR_LOCAL_MEMORY_MB", "HANGAR_LOCAL_PIDS", "HANGAR_LOCAL_CPUS",
	"HANGAR_LOCAL_DISK_MB", "HANGAR_LOCAL_UID_RANGE", "HANGAR_LOCAL_NET_ALLOW", "HANGAR_LOCAL_SUBIDS",
	"HANGAR_LOCAL_CGROUP", "HANGAR_LOCAL_ETC",
};

static int64_t pool_size(const struct local *l)
{
	int64_t n = 0;

	if (hangar_sys_ctx_setting_int(&n, l->ctx, "HANGAR_LOCAL_POOL_SIZE") != 0)
		return 0;
	return n;
}

static int resolve_network(const struct local *l, int network)
{
	int32_t net = 1;

	if (network == HANGAR_NETWORK_ON || network == HANGAR_NETWORK_OFF)
		return network == HANGAR_NETWORK_ON;
	hangar_sys_ctx_setting_bool(&net, l->ctx, "HANGAR_LOCAL_NETWORK");
	return net != 0;
}

/*
 * The pool's key for a template and network: everything a sandbox is made
 * with, in text (compared in full at each claim, so a hash collision can
 * never hand out another caller's kind of sandbox), and its hash, the name
 * of the pool's directory. 0, or -1 when such a create cannot be pooled.
 */
static int make_key(const struct local *l, const char *template_id, int network, char *text, char hash[17])
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a: a directory name, not a secret */
	size_t len;
	int n;

	if (!template_id || !*template_id)
		template_id = "local";
	if (strlen(template_id) > 1024 || strchr(template_id, '\n'))
		return -1;
	n = snprintf(text, KEY_MAX, "template=%s\nnetwork=%d\neuid=%u\njail=%s\nenvd=%s\nbwrap=%s\n", template_id,
		     network, (unsigned)geteuid(), l->jail, l->envd, l->bwrap);
	for (size_t i = 0; n > 0 && n < KEY_MAX && i < sizeof(key_settings) / sizeof(key_settings[0]); i++) {
		const char *v = hangar_sys_ctx_setting(l->ctx, key_settings[i]);

		n += snprintf(text + n, KEY_MAX - (size_t)n, "%s=%.1024s\n", key_settings[i], v ? v : "");
	}
	if (n <= 0 || n >= KEY_MAX)
		return -1;
	len = (size_t)n;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3ULL;
	}
	snprintf(hash, 17, "%016llx", (unsigned long long)h);
	return 0;
}

/*
 * The key of a create's options, or -1 when it cannot be pooled. Its
 * variables are no part of it: pooled sandboxes have none, and a claim
 * hands envd the caller's (hand_over).
 */
static int opts_key(const struct local *l, const struct hangar_create_opts *opts, char *text, char hash[17])
{
	size_t vars = 0;

	for (const char *const *e = opts->env; e && *e; e++)
		vars += strlen(*e) + 1;
	if (vars > CLAIM_VARS_MAX)
		return -1;
	return make_key(l, opts->template_id, resolve_network(l, opts->network), text, hash);
}

/* Opens root/.pool/<hash> (made when create): a directory descriptor, or -1 with errno. */
static int open_pool_dir(const struct local *l, const char *hash, int create)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/.pool", l->run);
	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	snprintf(path, sizeof(path), "%s/.pool/%s", l->run, hash);
	if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -1;
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* 1 when the pool in dfd is for key text (its key file says so in full), else 0. */
static int key_matches(int dfd, const char *text)
{
	char buf[KEY_MAX + 1];
	size_t have = 0;
	ssize_t n;
	int fd = openat(dfd, "key", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return 0;
	while (have < KEY_MAX && (n = read(fd, buf + have, KEY_MAX - have)) > 0)
		have += (size_t)n;
	close(fd);
	buf[have] = '\0';
	return strcmp(buf, text) == 0;
}

/* The sandboxes of this state directory, pooled or not, alive or being made (their directories). */
static int64_t count_sandboxes(const struct local *l)
{
	DIR *d = opendir(l->run);
	struct dirent *de;
	int64_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (lstate_valid_id(de->d_name) || !strncmp(de->d_name, ".new-", 5))
			n++;
	closedir(d);
	return n;
}

/* Whether one more sandbox fits under HANGAR_MAX_SANDBOXES (0: no cap). */
static int under_cap(const struct local *l)
{
	int64_t max = 0;

	hangar_sys_ctx_setting_int(&max, l->ctx, "HANGAR_MAX_SANDBOXES");
	return max <= 0 || count_sandboxes(l) < max;
}

int local_pool_mark(const char *dir)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/pooled", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

int local_pool_hidden(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/pooled", dir);
	return access(path, F_OK) == 0;
}

/*
 * Takes marker id out of the pool in dfd: 1 when this caller won it (the
 * unlink is the claim, so exactly one process does), 0 when another did.
 */
static int take_marker(int dfd, const char *id)
{
	return unlinkat(dfd, id, 0) == 0;
}

/* The body of a claim's request to envd: {"env": [...]}, "" when there are none; NULL when out of memory. */
static char *vars_body(const char *const *env)
{
	cJSON *o, *arr;
	char *text = NULL;

	if (!env || !env[0])
		return strdup("");
	o = cJSON_CreateObject();
	arr = o ? cJSON_AddArrayToObject(o, "env") : NULL;
	for (const char *const *e = env; arr && *e; e++)
		if (!cJSON_AddItemToArray(arr, cJSON_CreateString(*e)))
			arr = NULL;
	if (arr)
		text = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return text;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Sends envd, over dir's envd.sock, the request head (n bytes, ending its
 * headers) and body (len bytes). The connection to read the answer from,
 * or -1 when it could not be sent.
 */
static int envd_send(const char *dir, const char *head, int n, const char *body, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = TOKEN_DEADLINE_MS / 1000 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.*s/envd.sock", (int)(sizeof(sa.sun_path) - 11), dir);
	/* envd reads what it is sent: the deadline only bounds a daemon that hangs. */
	if (fd >= 0 && n > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0 &&
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && send_all(fd, head, (size_t)n) == 0 &&
	    send_all(fd, body, len) == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/*
 * Sends envd the request that replaces its token old with fresh and gives
 * it the caller's variables, env, in one step (POST /hangar/v1/token; both
 * or neither take effect). The connection to read the answer from
 * (envd_answer), or -1 when it could not be sent.
 */
static int rotate_envd_send(const char *dir, const char *old, const char *fresh, const char *const *env)
{
	char req[3 * TOKEN_MAX], *body = vars_body(env);
	size_t len = body ? strlen(body) : 0;
	int fd = -1, n;

	n = snprintf(req, sizeof(req),
		     "POST /hangar/v1/token HTTP/1.1\r\nHost: localhost\r\nX-Access-Token: %s\r\n"
		     "X-Hangar-New-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n",
		     old, fresh, len);
	if (body && n < (int)sizeof(req))
		fd = envd_send(dir, req, n, body, len);
	explicit_bzero(req, sizeof(req));
	if (body) {
		explicit_bzero(body, len); /* the caller's variables may be secrets */
		free(body);
	}
	return fd;
}

int local_pool_warm(const char *dir, const char *token)
{
	/* A Connect envelope: no flags, the JSON's length (big-endian), the JSON. */
	static const char json[] = "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"true\"]}}";
	char req[TOKEN_MAX + 512], body[5 + sizeof(json)], buf[4096];
	size_t len = sizeof(json) - 1, have;
	int64_t deadline = clock_mono_ms() + TOKEN_DEADLINE_MS;
	int fd, n, r;

	body[0] = 0;
	body[1] = body[2] = 0;
	body[3] = (char)(len >> 8);
	body[4] = (char)(len & 0xff);
	memcpy(body + 5, json, len);
	/* As the commands' default user ("user:" in Basic auth), which the claimer's first command is most likely run as. */
	n = snprintf(req, sizeof(req),
		     "POST /process.Process/Start HTTP/1.1\r\nHost: localhost\r\nX-Access-Token: %s\r\n"
		     "Authorization: Basic dXNlcjo=\r\nContent-Type: application/connect+json\r\n"
		     "Connect-Protocol-Version: 1\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		     token, len + 5);
	fd = n < (int)sizeof(req) ? envd_send(dir, req, n, body, len + 5) : -1;
	explicit_bzero(req, sizeof(req));
	if (fd < 0)
		return -1;
	/* The stream ends, and envd closes the connection, once the shell has ended. */
	do
		r = local_read_until(fd, buf, sizeof(buf), deadline, NULL, &have);
	while (r == 0 && have == sizeof(buf));
	close(fd);
	return r == 0 ? 0 : -1;
}

/* Reads envd's answer to rotate_envd_send on fd (-1: none) and closes it: the status (204: done), or -1. */
static int envd_answer(int fd)
{
	char buf[256];
	size_t have = 0;
	int status = -1;

	if (fd < 0)
		return -1;
	local_read_until(fd, buf, sizeof(buf) - 1, clock_mono_ms() + TOKEN_DEADLINE_MS, NULL, &have);
	close(fd);
	buf[have] = '\0';
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	return status;
}

/* Whether the jail's answer line is in. */
static int answered(const char *buf, size_t have)
{
	return memchr(buf, '\n', have) != NULL;
}

/*
 * Tells the jail its token is fresh now (it serves it on jail.sock to the
 * library's other processes), on ports.sock, which reads a request line
 * before it answers. The connection to read its answer from (jail_answer),
 * or -1.
 */
static int rotate_jail_send(const char *dir, const char *id, int pid, const char *old, const char *fresh)
{
	char req[2 * TOKEN_MAX + 16];
	int n = snprintf(req, sizeof(req), "rotate %s %s\n", old, fresh), fd = -1;

	if (n > 0 && n < (int)sizeof(req) && local_jail_connect(dir, id, pid, "ports.sock", &fd) == 0 &&
	    send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		fd = -1;
	}
	explicit_bzero(req, sizeof(req));
	return fd;
}

/* Reads the jail's answer to rotate_jail_send on fd (-1: none) and closes it: 0 when it took the token, or -1. */
static int jail_answer(int fd)
{
	char buf[64];
	size_t have = 0;

	if (fd < 0)
		return -1;
	local_read_until(fd, buf, sizeof(buf) - 1, clock_mono_ms() + PORTS_DEADLINE_MS, answered, &have);
	close(fd);
	buf[have] = '\0';
	return strcmp(buf, "ok\n") == 0 ? 0 : -1;
}

/* The token a pooled sandbox was started with, asked of its jail: 0, or -1. */
static int pooled_token(const char *dir, const char *id, int pid, char *buf /* TOKEN_MAX + 1 */)
{
	size_t have = 0;
	int fd;

	if (local_jail_connect(dir, id, pid, "jail.sock", &fd) != 0)
		return -1;
	local_read_until(fd, buf, TOKEN_MAX, clock_mono_ms() + TOKEN_DEADLINE_MS, NULL, &have);
	close(fd);
	buf[have] = '\0';
	if (have == 0 || strpbrk(buf, " \r\n")) {
		explicit_bzero(buf, TOKEN_MAX + 1);
		return -1;
	}
	return 0;
}

static int random_token(char *hex /* 65 */)
{
	return lstate_random_hex(hex, 32) < 0 ? -1 : 0;
}

/* hand_over(): envd refused the caller's variables, as every pooled sandbox's would. */
#define VARS_REFUSED (-2)

/*
 * Makes sandbox id, just won from the pool (its lock held by the caller),
 * the caller's: a new token and the caller's variables for envd, the new
 * token for the jail, the caller's lifetime, out of hiding. 0 with out
 * filled, or -1 or VARS_REFUSED (the caller kills the sandbox).
 */
static int hand_over(struct local *l, const char *id, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	char dir[DIR_MAX], path[PATH_MAX], old[TOKEN_MAX + 1], fresh[65];
	struct lmeta m;
	int pid = 0, rc = -1, envd_status = -1, jail_ok = 0;

	if (local_find_alive(l, id, dir, sizeof(dir), &pid) != 0)
		return -1; /* dead or past its idle lifetime: never handed out */
	if (!local_pool_hidden(dir) || lstate_meta_read(dir, &m) < 0)
		return -1;
	if (m.env) {
		/* Pools are filled with no variables: one with some is not the pool's to hand out. */
		lstate_meta_clear(&m);
		return -1;
	}
	ltokens_forget(&l->tokens, id);
	if (pooled_token(dir, id, pid, old) == 0 && random_token(fresh) == 0) {
		/*
		 * envd and the jail are asked at once, and neither waits for the
		 * other's answer. Both must take the new token, or the sandbox is
		 * killed (claim_one) and the old one, which the other may still
		 * take, is never used again.
		 */
		int efd = rotate_envd_send(dir, old, fresh, opts->env);
		int jfd = efd >= 0 ? rotate_jail_send(dir, id, pid, old, fresh) : -1;

		envd_status = envd_answer(efd);
		jail_ok = jail_answer(jfd) == 0;
	}
	if (envd_status == 204 && jail_ok && lstate_meta_set_env(&m, opts->env) == 0) {
		/* The sandbox starts its life now, as the caller asked for it, with its variables. */
		m.created_at_us = clock_wall_us();
		m.timeout_sec = opts->timeout_sec > 0 ? opts->timeout_sec : 0;
		m.expires_at_us = m.timeout_sec > 0 ? clock_wall_us() + m.timeout_sec * 1000000 : 0;
		snprintf(path, sizeof(path), "%s/pooled", dir);
		if (lstate_meta_write(dir, &m) == 0 && unlink(path) == 0) {
			kill(pid, SIGHUP); /* the expiry moved */
			rc = local_describe(l, dir, &m, fresh, pid, out) == 0 ? 0 : -1;
		}
	}
	explicit_bzero(old, sizeof(old));
	explicit_bzero(fresh, sizeof(fresh));
	lstate_meta_clear(&m);
	return envd_status == 400 ? VARS_REFUSED : rc;
}

/*
 * Tries to win sandbox id from the pool in dfd and make it the caller's: 1
 * with out filled, 0 when another process won it or it was busy, -1 when
 * no pooled sandbox can take the caller's variables (a cold create can). The
 * sandbox's lock is taken before its marker, so a hidden sandbox without a
 * marker is always held by whoever works on it (local_pool_orphan).
 */
static int claim_one(struct local *l, int dfd, const char *id, const struct hangar_create_opts *opts,
		     hangar_sys_sandbox *out)
{
	char dir[DIR_MAX];
	int lock, rc;

	local_sandbox_dir(dir, sizeof(dir), l, id);
	lock = local_lock(dir, LOCK_EX | LOCK_NB);
	if (lock < 0)
		return 0; /* another claimer holds it, or it is gone (the refill removes its marker) */
	if (!take_marker(dfd, id)) {
		local_unlock(lock);
		return 0;
	}
	rc = hand_over(l, id, opts, out);
	local_unlock(lock);
	if (rc == 0)
		return 1;
	/* Killed, or died, while it waited, or refused the variables: stopped and never handed out. */
	if (rc == VARS_REFUSED)
		hangar_sys_log(l->ctx, HANGAR_LOG_WARNING,
			       "local: envd of pooled sandbox %s refused the create's variables; it is made cold", id);
	local_kill(l, id);
	return rc == VARS_REFUSED ? -1 : 0;
}

/*
 * Calls fn for each pool of root (each .pool/<hash>, as the directory fd of
 * .pool and the name) until one returns non-zero; returns that, or 0.
 */
static int each_pool(const struct local *l, int (*fn)(int top, const char *hash, void *payload), void *payload)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *top;
	int r = 0;

	snprintf(path, sizeof(path), "%s/.pool", l->run);
	top = opendir(path);
	if (!top)
		return 0;
	while (!r && (de = readdir(top)))
		if (de->d_name[0] != '.')
			r = fn(dirfd(top), de->d_name, payload);
	closedir(top);
	return r;
}

/* each_pool: stops the first sandbox of the pool it can take the marker of. 1 when it did. */
static int evict_from(int top, const char *hash, void *payload)
{
	struct local *l = payload;
	struct dirent *e;
	DIR *d;
	int dfd = openat(top, hash, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW), done = 0;

	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	while (!done && (e = readdir(d)))
		if (lstate_valid_id(e->d_name) && take_marker(dirfd(d), e->d_name)) {
			hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG,
				       "local: pooled sandbox %s stopped: a create needs its place under "
				       "HANGAR_MAX_SANDBOXES", e->d_name);
			local_kill(l, e->d_name);
			done = 1;
		}
	closedir(d);
	return done;
}

/* Stops one pooled sandbox of any options to make room for a cold create at the cap. */
static void evict_one(struct local *l)
{
	each_pool(l, evict_from, l);
}

int local_pool_claim(struct local *l, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	char *text, hash[17], path[PATH_MAX];
	struct dirent *de;
	DIR *d = NULL;
	int dfd = -1, got = 0;
	int64_t t0_us = clock_mono_us();

	if (filling)
		return 0;
	text = pool_size(l) > 0 ? malloc(KEY_MAX) : NULL;
	if (text && opts_key(l, opts, text, hash) == 0 && (dfd = open_pool_dir(l, hash, 0)) >= 0 &&
	    key_matches(dfd, text))
		d = fdopendir(dfd);
	if (!d && dfd >= 0)
		close(dfd);
	while (d && !got && (de = readdir(d))) {
		int r = lstate_valid_id(de->d_name) ? claim_one(l, dirfd(d), de->d_name, opts, out) : 0;

		if (r < 0)
			break; /* the next would refuse them too: this create is cold */
		if (r == 0)
			continue;
		got = 1;
		hangar_sys_log(l->ctx, HANGAR_LOG_DEBUG, "local: sandbox %s handed out from the pool in %.1f ms",
			       de->d_name, (double)(clock_mono_us() - t0_us) / 1000.0);
	}
	if (d)
		closedir(d);
	free(text);
	/*
	 * A cold create at the cap: pooled sandboxes count toward it, so one
	 * makes way rather than refuse it (whichever process, with whatever
	 * pool size, made them).
	 */
	snprintf(path, sizeof(path), "%s/.pool", l->run);
	while (!got && access(path, F_OK) == 0 && !under_cap(l)) {
		int64_t before = count_sandboxes(l);

		evict_one(l);
		if (count_sandboxes(l) >= before)
			break;
	}
	return got;
}

/* Markers in dfd whose sandboxes live; the others are removed, with what a dead jail left. */
static int64_t count_waiting(struct local *l, int dfd)
{
	int64_t n = 0;
	struct dirent *de;
	DIR *d;
	int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);

	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		return 0;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		char dir[DIR_MAX];
		int pid;

		if (!lstate_valid_id(de->d_name))
			continue;
		local_sandbox_dir(dir, sizeof(dir), l, de->d_name);
		if (access(dir, F_OK) == 0 && local_liveness(dir, de->d_name, &pid) == LOCAL_ALIVE) {
			n++;
		} else if (take_marker(dfd, de->d_name)) {
			/* Killed, or ended, while it waited. */
			local_clean_stale(l, de->d_name);
		}
	}
	closedir(d);
	return n;
}

int local_pool_put(struct local *l, int dfd, const char *id)
{
	char dir[DIR_MAX];
	int fd;

	local_sandbox_dir(dir, sizeof(dir), l, id);
	/* Should this process have learnt the pooled token, it is changed at the claim. */
	ltokens_forget(&l->tokens, id);
	/* Hidden since create_cold() laid it out (local_pool_mark); claimable from now. */
	if (!local_pool_hidden(dir)) {
		errno = ENOENT;
		return -1;
	}
	fd = openat(dfd, id, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* each_pool: 1 when the pool holds a marker for the sandbox id. */
static int marker_in(int top, const char *hash, void *payload)
{
	const char *id = payload;
	char rel[NAME_MAX + LSTATE_ID_LEN + 2];

	if (snprintf(rel, sizeof(rel), "%s/%s", hash, id) >= (int)sizeof(rel))
		return 0; /* not a pool's name and an id */
	return faccessat(top, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* 1 when some pool of root holds a marker for sandbox id. */
static int has_marker(const struct local *l, const char *id)
{
	return each_pool(l, marker_in, (void *)id);
}

int local_pool_orphan(struct local *l, const char *dir, const char *id)
{
	int lock, orphan;

	/*
	 * The maker holds the sandbox's lock from its layout until its marker
	 * is put, a claimer from before it takes the marker until the sandbox
	 * is out of hiding: hidden, unlocked and without a marker, it is
	 * nobody's and never will be.
	 */
	lock = local_lock(dir, LOCK_EX | LOCK_NB);
	if (lock < 0)
		return 0;
	orphan = local_pool_hidden(dir) && !has_marker(l, id);
	local_unlock(lock);
	if (!orphan)
		return 0;
	hangar_sys_log(l->ctx, HANGAR_LOG_WARNING,
		       "local: sandbox %s was being made for the pool by a process that died; stopping it", id);
	local_kill(l, id);
	return 1;
}

/* Stops every hidden sandbox of root that a dead pool create left (local_pool_orphan). */
static void sweep_orphans(struct local *l)
{
	struct dirent *de;
	DIR *d = opendir(l->run);

	if (!d)
		return;
	while ((de = readdir(d))) {
		char dir[DIR_MAX];

		if (!lstate_valid_id(de->d_name))
			continue;
		local_sandbox_dir(dir, sizeof(dir), l, de->d_name);
		if (local_pool_hidden(dir))
			local_pool_orphan(l, dir, de->d_name);
	}
	closedir(d);
}

/*
 * Fills the pool for one template and network up to HANGAR_LOCAL_POOL_SIZE,
 * and no further than HANGAR_MAX_SANDBOXES. One process fills a pool at a
 * time (fill.lock); others leave it to that one.
 */
static void fill(struct local *l, const char *template_id, int network)
{
	struct hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	char *text = malloc(KEY_MAX), hash[17];
	int dfd = -1, lock = -1;

	if (!text || make_key(l, template_id, network, text, hash) < 0 || (dfd = open_pool_dir(l, hash, 1)) < 0)
		goto out;
	if (!key_matches(dfd, text)) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/.pool/%s/key", l->run, hash);
		if (lstate_write_atomic(path, text, strlen(text), 0600) < 0 || !key_matches(dfd, text))
			goto out; /* another key of the same hash: that pool stays as it is */
	}
	lock = openat(dfd, "fill.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
		goto out;
	/* What a killed filler left counts toward the cap and hides from list: gone first. */
	sweep_orphans(l);
	o.template_id = template_id;
	o.network = network ? HANGAR_NETWORK_ON : HANGAR_NETWORK_OFF;
	o.timeout_sec = POOL_IDLE_SEC;
	for (;;) {
		char id[LSTATE_ID_LEN + 1];
		int stop;

		pthread_mutex_lock(&l->pool->mu);
		stop = l->pool->stop;
		pthread_mutex_unlock(&l->pool->mu);
		if (stop || count_waiting(l, dfd) >= pool_size(l) || !under_cap(l))
			break;
		if (local_create_pooled(l, &o, id, dfd) != 0) {
			hangar_sys_log(l->ctx, HANGAR_LOG_WARNING, "local: the pool could not start a sandbox: %s",
				       hangar_error_last()->message);
			break;
		}
	}
out:
	if (lock >= 0)
		close(lock);
	if (dfd >= 0)
		close(dfd);
	free(text);
}

static void *fill_thread(void *arg)
{
	struct local *l = arg;
	struct lpool *p = l->pool;

	filling = 1;
	pthread_mutex_lock(&p->mu);
	if (!p->stop) {
		struct timespec until;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += REFILL_DELAY_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		while (!p->stop && pthread_cond_timedwait(&p->wake, &p->mu, &until) == 0)
			;
	}
	while (p->pending && !p->stop) {
		char *template_id = p->template_id;
		int network = p->network;

		p->template_id = NULL;
		p->pending = 0;
		pthread_mutex_unlock(&p->mu);
		fill(l, template_id, network);
		free(template_id);
		pthread_mutex_lock(&p->mu);
	}
	p->running = 0;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

void local_pool_refill(struct local *l, const struct hangar_create_opts *opts)
{
	char *text, hash[17], *template_id;
	struct lpool *p;
	int key;

	if (filling || pool_size(l) <= 0)
		return;
	text = malloc(KEY_MAX);
	key = text ? make_key(l, opts->template_id, resolve_network(l, opts->network), text, hash) : -1;
	free(text);
	if (key < 0)
		return;
	template_id = strdup(opts->template_id && *opts->template_id ? opts->template_id : "local");
	if (!template_id)
		return;
	pthread_mutex_lock(&l->pool->mu);
	p = l->pool;
	free(p->template_id);
	p->template_id = template_id;
	p->network = resolve_network(l, opts->network);
	p->pending = 1;
	if (p->has_thread && p->owner != getpid())
		p->has_thread = p->running = 0; /* forked since: the thread stayed with the parent */
	if (!p->running && !p->stop) {
		if (p->has_thread) {
			pthread_join(p->thread, NULL); /* finished its loop: this is quick */
			p->has_thread = 0;
		}
		p->running = p->has_thread = pthread_create(&p->thread, NULL, fill_thread, l) == 0;
		p->owner = getpid();
	}
	pthread_mutex_unlock(&p->mu);
}

int local_pool_init(struct local *l)
{
	pthread_condattr_t attr;

	l->pool = calloc(1, sizeof(*l->pool));
	if (!l->pool)
		return -1;
	pthread_mutex_init(&l->pool->mu, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&l->pool->wake, &attr);
	pthread_condattr_destroy(&attr);
	return 0;
}

void local_pool_fini(struct local *l)
{
	struct lpool *p = l->pool;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	if (p->has_thread && p->owner == getpid())
		pthread_join(p->thread, NULL);
	free(p->template_id);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	free(p);
	l->pool = NULL;
}
