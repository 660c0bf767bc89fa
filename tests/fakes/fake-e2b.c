/*
 * fake-e2b: fake control planes for the e2b provider's tests.
 *
 *   fake-e2b --flavour cloud|selfhosted|cube --envd PATH [--port N] [--edge-port N]
 *            [--ready-fd FD] [--api-key KEY] [--domain D] [--state-dir DIR]
 *            [--build-steps N] [--page-size N] [--sandbox-user NAME] [--v]
 *
 * One process serves a control API (E2B's, or CubeSandbox's CubeAPI) and an
 * edge proxy (E2B's client proxy, or CubeProxy) on 127.0.0.1. Every sandbox is
 * a real hangar-envd process. Reference documents, cited below as
 *   [API §n]   shared/reference/e2b/CONTROL-API.md
 *   [OAS]      shared/reference/e2b/openapi.yml (E2B schemas)
 *   [CUBE §n]  shared/reference/cube/NOTES.md
 *   [COAS]     shared/reference/cube/openapi.yml (Cube schemas)
 *   [S3 §n]    seed 003 (E2B and CubeSandbox as references)
 *
 * Control API, E2B flavours (cloud, selfhosted) [API §1-3, OAS]
 *   auth: X-API-Key on every route but /health and the /_fake/ routes; with --api-key it
 *     must match, without one any non-empty key passes. 401 {"code","message"}.
 *   GET  /health                                  204
 *   POST /v2/sandboxes, POST /sandboxes           201 Sandbox. templateID required
 *     (400); an unknown template is 400 too, the only client error [OAS] lists for
 *     create. timeout defaults to 300 s on v2 [S3 §4.2] and 15 s on v1 [OAS
 *     NewSandbox]. envdAccessToken (64 hex): always on v2 (NewSandboxV2 has no
 *     "secure"; SDK 2.51 does not send it) [S3 §4.2], on v1 only with
 *     "secure":true [API §2.1], an explicit "secure" wins; trafficAccessToken
 *     only when network.allowPublicTraffic is false, else null; domain = --domain
 *     or null (E2B sets it only for BYOC clusters) [S3 §4.3]. envdVersion 0.6.4.
 *   POST /v2/sandboxes/{id}/connect, POST /sandboxes/{id}/connect
 *     {timeout} required. 200 when running (TTL only extended); 201 when it
 *     resumed a paused sandbox, with a NEW envdAccessToken [API §2, S3 §4.2].
 *   POST /sandboxes/{id}/resume (deprecated)      201; 409 when running
 *   GET  /sandboxes/{id}                          SandboxDetail (+pauseMode when paused)
 *   GET  /v2/sandboxes   state csv, metadata, template, order, limit 1..100,
 *     nextToken; X-Next-Token when more, X-Total-Running when running requested.
 *   GET  /sandboxes      (deprecated) running only
 *   DELETE /sandboxes/{id}                        204; 404
 *   POST /sandboxes/{id}/timeout {timeout}        204; TTL = now + timeout (can shorten)
 *   POST /sandboxes/{id}/refreshes {duration?}    204; extends only (0..3600)
 *   POST /sandboxes/{id}/pause {memory?}          204; 409 already paused.
 *     memory=false is a filesystem-only pause: every process is killed and the
 *     next connect cold-boots a fresh envd (pauseMode "filesystem") [OAS].
 *   POST /sandboxes/{id}/snapshots {name?}        201 SnapshotInfo; usable as templateID
 *   GET  /snapshots      sandboxID, name, limit, nextToken; X-Next-Token
 *   POST /sandboxes/{id}/fork {timeout,count}     cloud only: 201 [{sandbox}|{error}]
 *   PUT  /sandboxes/{id}/network                  204; 409 when not running
 *   GET  /sandboxes/{id}/metrics, GET /sandboxes/metrics?sandbox_ids=
 *   GET  /sandboxes/{id}/logs, GET /v2/sandboxes/{id}/logs   lifecycle lines
 *   POST /v3/templates (202), GET /templates/{id}/files/{hash} (201 present:true),
 *   POST /v2/templates/{id}/builds/{buildID} (202), GET …/status (waiting →
 *   building for --build-steps polls → ready), GET …/logs, GET /v2/templates,
 *   DELETE /templates/{id}, GET /templates/aliases/{alias}.
 *   Unknown routes: 404 "404 page not found" (text).
 *   Expired sandboxes are killed, or paused when created with autoPause.
 *
 * Control API, cube flavour (CubeAPI at 23c69d6) [CUBE §2-§6, §9, COAS]
 *   auth off unless --api-key; then "Authorization: Bearer" first, X-API-Key
 *     second; missing → 401 "Missing authentication…", wrong → 401 "Invalid API
 *     key or token" [CUBE §2]. /health and unknown paths are never authenticated;
 *     405 comes after auth.
 *   GET /health → 200 {"status":"ok","sandboxes":N} [CUBE §4.1]
 *   POST /v2/sandboxes → 405, empty body, Allow: GET,HEAD [CUBE §4.4, §9.1]
 *   POST /v2/sandboxes/{id}/connect → 404, empty body: only …/logs exists under
 *     /v2/sandboxes/{id} [CUBE §4.4, §9.1]
 *   unknown path → 404 empty; wrong method → 405 empty + Allow [CUBE §3]
 *   JSON-body routes (create, resume, connect, snapshots, rollback, timeout,
 *     refreshes, POST /templates[/{id}], PUT …/alias): no application/json →
 *     415, bad JSON → 400, missing/mistyped field → 422, all plain text [CUBE §3]
 *   POST /sandboxes: unknown template → 500 "CubeMaster returned error code
 *     130404…" [CUBE §3]; envVars deny-list → 400; timeout omitted = never (-1),
 *     and it is an idle window reset by proxied traffic [CUBE §4.1, §9.5].
 *     envdAccessToken never present; trafficAccessToken only in this response
 *     and only with allowPublicTraffic:false [CUBE §5]; domain always present
 *     (--domain, default cube.app).
 *   POST /sandboxes/{id}/connect → 200 always (resumes a paused one); timeout
 *     ignored when running [CUBE §6, §9.4]. POST …/resume → 201, 409 running.
 *   POST …/pause → 204; 409 already paused; a body with memory:false → 400 (what
 *     open PR #1800 adds; at 23c69d6 the body is ignored) [CUBE §6].
 *   GET /v2/sandboxes: state must be exactly running|paused, nextToken ignored, no
 *     X-Next-Token; GET /sandboxes caps at 200; endAt omitted for never-expiring
 *     sandboxes, diskSizeMB 0 [CUBE §4.1, §9.8].
 *   POST …/timeout {timeout ≥0 | -1}, POST …/refreshes, POST …/snapshots
 *     (snap-<24 hex>), GET /snapshots (x-next-token), POST …/rollback (restarts
 *     envd in place), DELETE …, GET …/logs (v1, v2).
 *   Templates [CUBE §4.2, §9.9]: POST /templates {image, name|alias, cpu, memory,
 *     exposedPorts (≤3 besides 49983), probePort, probePath, writableLayerSize,
 *     env[…]} → 202 TemplateBuildJob; GET /templates/{id}/builds/{job}/status
 *     (building → ready after --build-steps polls; {id} only echoed; unknown job
 *     → 500); POST /templates/{id}/builds/{bid} and POST /templates/{id} start a
 *     full rebuild; GET/DELETE /templates/{id}, PATCH → 501, PUT …/alias,
 *     GET /templates/aliases/{alias} (^[a-z0-9][a-z0-9-]{0,63}$, not tpl-/snap-),
 *     GET /templates. Path IDs outside [A-Za-z0-9-] → 400 [CUBE §3].
 *   /v3/templates, /v2/templates*, fork, metrics, network → 404 [CUBE §4.4].
 *
 * Test hooks (API port, never authenticated, never faulted)
 *   POST /_fake/faults {"route","status","count","retry_after","delay_ms","drop",
 *     "repeat_token","public","fork_errors"} queues a fault; route is create|
 *     connect|list|get|kill|pause|resume|timeout|refresh|snapshot|snapshots|fork|
 *     template|health|other|any. DELETE clears. Without status or drop a fault
 *     changes the answer instead: repeat_token makes a page's X-Next-Token the
 *     request's own nextToken ("fake.0" on a first page), so a client that
 *     follows it blindly loops; public makes a create public, with no traffic
 *     token (as when CubeMaster mints none); fork_errors N turns the first N
 *     results of a fork into {"error"} entries.
 *   --page-size N caps every paged answer (E2B's /v2/sandboxes, /snapshots,
 *     /v2/templates; Cube's /snapshots) at N entries whatever limit is asked.
 *   GET /_fake/sandboxes → [{id,state,envd_pid,envd_port,token,traffic_token,
 *     expires_at,public,template_id}] (expires_at: unix seconds or null).
 *
 * Edge (E2B client proxy / CubeProxy) on --edge-port
 *   Routing: a Host that is localhost, an IP literal or "sandbox.<domain>" is
 *   routed by E2b-Sandbox-Id + E2b-Sandbox-Port; any other Host by its first
 *   DNS label "<port>-<sandboxID>" [API §6, S3 §4.3, CUBE §5]. Real CubeProxy
 *   has no header routing; the fake offers it on every flavour so single-host
 *   tests work. Only port 49983 reaches the sandbox (its envd).
 *   E2B: unknown sandbox → 502 {"error":"Sandbox not found","sandboxId"};
 *     paused → 502 (E2B can auto-resume through the proxy; not modelled);
 *     other ports → 502 "The sandbox is running but port is not open";
 *     traffic token (e2b-traffic-access-token) checked on every port but envd's,
 *     which E2B exempts [CUBE §5] → 403.
 *   The EDGE enforces envd tokens: sandboxes run hangar-envd WITHOUT a token,
 *     and the edge checks X-Access-Token against the sandbox's current token
 *     (it rotates on resume) on every route but GET /health, GET|POST /files,
 *     POST /init and OPTIONS, answering 401 with envd's own body. /files is
 *     forwarded without checking signatures (a simplification: real envd
 *     accepts a token or a valid signature there).
 *   cube: no X-Access-Token check; traffic token (e2b- or cube-traffic-access-
 *     token) on EVERY port including 49983 → 403 {"error":"forbidden"}; bad
 *     Host → 400 {"error":"bad request"}; unknown sandbox or port → 404
 *     {"error":"not found"}; killed autoPause sandbox → 410 {"error":"gone"};
 *     paused with autoResume → resumed synchronously then forwarded; paused
 *     otherwise → 502; each forwarded request resets the idle TTL [CUBE §5, §6].
 *   Forwarding: the request head (≤64 KiB) is read and checked, the upstream
 *   request gets "Connection: close", and bytes are spliced both ways unbuffered
 *   until the upstream closes; so every request on a connection is checked.
 *
 * Sandboxes: hangar-envd -port 0 -addr 127.0.0.1 -ready-fd 3 -user <fake's user>
 *   -env E2B_SANDBOX=true -env E2B_SANDBOX_ID=<id> -env E2B_TEMPLATE_ID=<tpl>,
 *   plus -env for each envVar and -workdir <state-dir>/<id> with --state-dir.
 *   Pause SIGSTOPs envd and every process of the sandbox: descendants of envd
 *   found by walking /proc, plus any process whose environment carries
 *   E2B_SANDBOX_ID=<id> (envd starts commands in their own sessions, and a
 *   double-forked daemon leaves the tree). Resume SIGCONTs them, deepest first;
 *   kill SIGKILLs them all and reaps envd. Forks and snapshots start a fresh
 *   envd: memory is not copied.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ENVD_PORT 49983
#define ENVD_VERSION "0.6.4"
#define E2B_CLIENT_ID "6532622b"
#define MAX_BODY (4u << 20)
#define EDGE_HEAD_MAX 65536
#define READY_TIMEOUT_MS 10000
#define NEVER INT64_MAX
#define ENVD_AUTH_FAILED \
	"unauthorized access, please provide a valid access token or method signing if supported"

enum flavour { FL_CLOUD, FL_SELFHOSTED, FL_CUBE };
enum sb_state { SB_RUNNING, SB_PAUSED, SB_DEAD };
enum tpl_status { T_WAITING, T_BUILDING, T_READY, T_ERROR };

struct sandbox {
	struct sandbox *next;
	pthread_mutex_t op;          /* serialises lifecycle operations */
	char id[40];
	char template_id[80];
	char *alias;
	enum sb_state state;
	int pause_full;              /* pauseMode full (1) or filesystem (0) */
	pid_t envd_pid;              /* 0 when no envd runs */
	int envd_port;
	int secure;
	char envd_token[65];
	char traffic_token[65];
	int public_traffic;
	int allow_internet;          /* -1 unset */
	int auto_pause, auto_pause_memory, auto_resume;
	int64_t started_ms;          /* wall clock */
	int64_t expires;             /* monotonic ms, NEVER */
	int64_t timeout_s;           /* creation timeout (cube: idle window, -1 never) */
	cJSON *metadata, *env_vars, *network, *logs;
	int cpu, mem_mb, disk_mb;
};

struct template {
	struct template *next;
	char id[64];
	char *alias;
	char *tag;
	char build_id[64];           /* E2B build, or Cube job */
	enum tpl_status status;
	int steps_left;
	int phase;
	int deleted;
	int is_snapshot;
	int is_public;
	char snap_id[160];
	char origin[40];
	char source_tpl[80];
	cJSON *names;
	cJSON *build_logs;
	cJSON *create_request;
	int64_t created_ms;
	int cpu, mem_mb;
};

struct fault {
	struct fault *next;
	char route[32];
	int status, count, retry_after, delay_ms, drop;
	int repeat_token, make_public, fork_errors; /* change the answer instead of failing it */
};

struct spawn_req {
	struct spawn_req *next;
	char **argv;
	int log_fd;
	int done;
	pid_t pid;
	int ready_fd;
};

static struct {
	enum flavour flavour;
	const char *envd_path, *api_key, *domain, *state_dir;
	int verbose, build_steps;
	long page_size;              /* --page-size: every paged answer holds at most this many; 0 no cap */
	char user[64];
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* reaper wake-up; CLOCK_MONOTONIC */
	struct sandbox *sandboxes;
	struct template *templates;
	struct fault *faults;
	int stopping;
	pthread_mutex_t sp_lock;
	pthread_cond_t sp_cond;
	struct spawn_req *sp_queue;
	int sp_stop;
	int edge_fd;
} g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sp_lock = PTHREAD_MUTEX_INITIALIZER,
	.sp_cond = PTHREAD_COND_INITIALIZER,
	.build_steps = 2,
	.edge_fd = -1,
};

/* ---------------------------------------------------------------- utilities */

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!g.verbose)
		return;
	va_start(ap, fmt);
	fputs("fake-e2b: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ms_to_timespec(int64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000L;
}

static void rfc3339(int64_t ms, char *out, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

static void add_time(cJSON *o, const char *key, int64_t ms)
{
	char buf[64];

	rfc3339(ms, buf, sizeof(buf));
	cJSON_AddStringToObject(o, key, buf);
}

static void random_bytes(unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			perror("fake-e2b: getrandom");
			abort();
		}
		p += r;
		n -= (size_t)r;
	}
}

static void random_from(char *out, size_t n, const char *alphabet)
{
	unsigned char b[128];
	size_t k = strlen(alphabet);

	if (n > sizeof(b))
		n = sizeof(b);
	random_bytes(b, n);
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[b[i] % k];
	out[n] = '\0';
}

static void random_hex(char *out, size_t n)
{
	random_from(out, n, "0123456789abcdef");
}

static void random_uuid(char *out)
{
	char h[33];

	random_hex(h, 32);
	h[12] = '4';
	h[16] = "89ab"[h[16] % 4];
	snprintf(out, 37, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

static int is_cube(void)
{
	return g.flavour == FL_CUBE;
}

static int valid_path_id(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-')
			return 0;
	return 1;
}

static int valid_cube_alias(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return 0;
	return strncmp(s, "tpl-", 4) != 0 && strncmp(s, "snap-", 5) != 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Waits on a private condition variable: an answer held back on purpose. */
static void wait_ms(int ms)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c;
	pthread_condattr_t a;
	struct timespec ts;
	int64_t deadline = mono_ms() + ms;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&c, &a);
	pthread_condattr_destroy(&a);
	pthread_mutex_lock(&m);
	ms_to_timespec(deadline, &ts);
	while (mono_ms() < deadline)
		if (pthread_cond_timedwait(&c, &m, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&m);
	pthread_cond_destroy(&c);
	pthread_mutex_destroy(&m);
}

/* ------------------------------------------------------ processes and trees */

static void *spawner_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.sp_lock);
	for (;;) {
		struct spawn_req *r;
		int p[2], devnull;
		pid_t parent = getpid(), pid;

		while (!g.sp_queue && !g.sp_stop)
			pthread_cond_wait(&g.sp_cond, &g.sp_lock);
		if (!g.sp_queue)
			break;
		r = g.sp_queue;
		g.sp_queue = r->next;
		pthread_mutex_unlock(&g.sp_lock);

		r->pid = -1;
		r->ready_fd = -1;
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull >= 0 && pipe2(p, O_CLOEXEC) == 0) {
			pid = fork();
			if (pid == 0) {
				struct sigaction sa;
				sigset_t none;

				memset(&sa, 0, sizeof(sa));
				sa.sa_handler = SIG_DFL;
				sigaction(SIGPIPE, &sa, NULL);
				sigemptyset(&none);
				sigprocmask(SIG_SETMASK, &none, NULL);
				setpgid(0, 0);
				/* The spawner thread lives as long as the fake: its death means ours. */
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != parent)
					_exit(1);
				dup2(devnull, 0);
				dup2(r->log_fd >= 0 ? r->log_fd : devnull, 1);
				if (r->log_fd >= 0)
					dup2(r->log_fd, 2);
				if (p[1] == 3)
					fcntl(3, F_SETFD, 0);
				else
					dup2(p[1], 3);
				execv(r->argv[0], r->argv);
				_exit(127);
			}
			close(p[1]);
			if (pid < 0)
				close(p[0]);
			else {
				r->pid = pid;
				r->ready_fd = p[0];
			}
		}
		if (devnull >= 0)
			close(devnull);
		pthread_mutex_lock(&g.sp_lock);
		r->done = 1;
		pthread_cond_broadcast(&g.sp_cond);
	}
	pthread_mutex_unlock(&g.sp_lock);
	return NULL;
}

static void spawn_wait(struct spawn_req *r)
{
	pthread_mutex_lock(&g.sp_lock);
	r->next = NULL;
	{
		struct spawn_req **pp = &g.sp_queue;

		while (*pp)
			pp = &(*pp)->next;
		*pp = r;
	}
	pthread_cond_broadcast(&g.sp_cond);
	while (!r->done)
		pthread_cond_wait(&g.sp_cond, &g.sp_lock);
	pthread_mutex_unlock(&g.sp_lock);
}

/* Reads "ready <port>\n" from envd within the deadline. */
static int read_ready(int fd, int *port)
{
	char buf[64];
	size_t n = 0;
	int64_t deadline = mono_ms() + READY_TIMEOUT_MS;

	while (n < sizeof(buf) - 1) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - mono_ms();
		ssize_t r;
		int pr;

		if (left <= 0)
			return -1;
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return -1;
		r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		buf[n] = '\0';
		if (strchr(buf, '\n'))
			return sscanf(buf, "ready %d", port) == 1 ? 0 : -1;
	}
	return -1;
}

struct pidset {
	pid_t *v;
	size_t n, cap;
};

static int pidset_has(const struct pidset *s, pid_t p)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == p)
			return 1;
	return 0;
}

static void pidset_push(struct pidset *s, pid_t p)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		pid_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			abort();
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = p;
}

static void pidset_add(struct pidset *s, pid_t p)
{
	if (!pidset_has(s, p))
		pidset_push(s, p);
}

static int environ_has(pid_t pid, const char *needle)
{
	char path[64], buf[65536];
	ssize_t n;
	int fd, found = 0;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (char *p = buf; p < buf + n; p += strlen(p) + 1)
		if (strcmp(p, needle) == 0) {
			found = 1;
			break;
		}
	return found;
}

/*
 * Every process of a sandbox: envd, its descendants, and processes carrying
 * the sandbox's marker variable, with their descendants. Parents come before
 * their children.
 */
static void sandbox_tree(pid_t root, const char *marker, struct pidset *out)
{
	struct pidset all = { 0 }, parents = { 0 };
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();
	int changed;

	out->n = 0;
	if (root > 0)
		pidset_add(out, root);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], buf[512], *rp;
		long pid = strtol(de->d_name, &rp, 10);
		int ppid = 0, fd;
		ssize_t n;

		if (*rp || pid <= 1 || pid == self)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = '\0';
		rp = strrchr(buf, ')');
		if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1)
			continue;
		pidset_push(&all, (pid_t)pid);
		pidset_push(&parents, (pid_t)ppid);
		if (marker && environ_has((pid_t)pid, marker))
			pidset_add(out, (pid_t)pid);
	}
	closedir(d);
	do {
		changed = 0;
		for (size_t i = 0; i < all.n; i++)
			if (!pidset_has(out, all.v[i]) && pidset_has(out, parents.v[i])) {
				pidset_add(out, all.v[i]);
				changed = 1;
			}
	} while (changed);
	free(all.v);
	free(parents.v);
}

static void marker_for(const struct sandbox *sb, char *out, size_t n)
{
	snprintf(out, n, "E2B_SANDBOX_ID=%s", sb->id);
}

/* SIGSTOP envd first, then everything it spawned, until no new process shows up. */
static void stop_tree(struct sandbox *sb)
{
	struct pidset stopped = { 0 }, tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	if (sb->envd_pid > 0) {
		kill(sb->envd_pid, SIGSTOP);
		pidset_add(&stopped, sb->envd_pid);
	}
	for (int round = 0; round < 32; round++) {
		int added = 0;

		sandbox_tree(sb->envd_pid, marker, &tree);
		for (size_t i = 0; i < tree.n; i++)
			if (!pidset_has(&stopped, tree.v[i])) {
				kill(tree.v[i], SIGSTOP);
				pidset_add(&stopped, tree.v[i]);
				added = 1;
			}
		if (!added)
			break;
	}
	vlog("sandbox %s: stopped %zu processes", sb->id, stopped.n);
	free(stopped.v);
	free(tree.v);
}

/* SIGCONT deepest first, so no parent ever sees a stopped child. */
static void cont_tree(struct sandbox *sb)
{
	struct pidset tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	sandbox_tree(sb->envd_pid, marker, &tree);
	for (size_t i = tree.n; i-- > 0;)
		kill(tree.v[i], SIGCONT);
	vlog("sandbox %s: continued %zu processes", sb->id, tree.n);
	free(tree.v);
}

static void kill_tree(struct sandbox *sb)
{
	struct pidset tree = { 0 };
	char marker[80];

	marker_for(sb, marker, sizeof(marker));
	stop_tree(sb);
	sandbox_tree(sb->envd_pid, marker, &tree);
	for (size_t i = tree.n; i-- > 0;)
		kill(tree.v[i], SIGKILL);
	free(tree.v);
	if (sb->envd_pid > 0) {
		while (waitpid(sb->envd_pid, NULL, 0) < 0 && errno == EINTR)
			;
		vlog("sandbox %s: envd %d reaped", sb->id, (int)sb->envd_pid);
	}
}

static void sb_log(struct sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_log(struct sandbox *sb, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *e = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(e, "ms", (double)wall_ms());
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddItemToArray(sb->logs, e);
	vlog("sandbox %s: %s", sb->id, msg);
}

/* Starts a fresh envd for the sandbox. Called without g.lock. */
static int start_envd(struct sandbox *sb)
{
	char *argv[64 + 256];
	char *owned[256];
	int na = 0, no = 0, port = 0, log_fd = -1, rc = -1;
	struct spawn_req req = { 0 };
	char dir[PATH_MAX];

#define OWN(s) (owned[no++] = (s))
	argv[na++] = (char *)g.envd_path;
	argv[na++] = "-port";
	argv[na++] = "0";
	argv[na++] = "-addr";
	argv[na++] = "127.0.0.1";
	argv[na++] = "-ready-fd";
	argv[na++] = "3";
	argv[na++] = "-user";
	argv[na++] = g.user;
	argv[na++] = "-env";
	argv[na++] = "E2B_SANDBOX=true";
	argv[na++] = "-env";
	if (asprintf(&argv[na], "E2B_SANDBOX_ID=%s", sb->id) < 0)
		return -1;
	OWN(argv[na++]);
	argv[na++] = "-env";
	if (asprintf(&argv[na], "E2B_TEMPLATE_ID=%s", sb->template_id) < 0)
		goto out;
	OWN(argv[na++]);
	if (sb->env_vars) {
		cJSON *e;

		cJSON_ArrayForEach(e, sb->env_vars) {
			if (!cJSON_IsString(e) || no >= 250)
				continue;
			argv[na++] = "-env";
			if (asprintf(&argv[na], "%s=%s", e->string, e->valuestring) < 0)
				goto out;
			OWN(argv[na++]);
		}
	}
	if (g.state_dir) {
		char logp[PATH_MAX + 16];

		snprintf(dir, sizeof(dir), "%s/%s", g.state_dir, sb->id);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			goto out;
		argv[na++] = "-workdir";
		argv[na++] = dir;
		snprintf(logp, sizeof(logp), "%s/envd.log", dir);
		log_fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	}
	if (g.verbose)
		argv[na++] = "-v";
	argv[na] = NULL;
#undef OWN

	req.argv = argv;
	req.log_fd = log_fd;
	spawn_wait(&req);
	if (req.pid < 0)
		goto out;
	if (read_ready(req.ready_fd, &port) < 0) {
		fprintf(stderr, "fake-e2b: envd for %s did not become ready\n", sb->id);
		kill(req.pid, SIGKILL);
		while (waitpid(req.pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(req.ready_fd);
		goto out;
	}
	close(req.ready_fd);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = req.pid;
	sb->envd_port = port;
	sb_log(sb, "envd %d listening on 127.0.0.1:%d", (int)req.pid, port);
	pthread_mutex_unlock(&g.lock);
	rc = 0;
out:
	if (log_fd >= 0)
		close(log_fd);
	for (int i = 0; i < no; i++)
		free(owned[i]);
	return rc;
}

/* ------------------------------------------------------ sandboxes and state */

static struct sandbox *find_sandbox_locked(const char *id)
{
	for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next)
		if (strcmp(sb->id, id) == 0)
			return sb;
	return NULL;
}

static struct sandbox *find_live(const char *id)
{
	struct sandbox *sb;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (sb && sb->state == SB_DEAD)
		sb = NULL;
	pthread_mutex_unlock(&g.lock);
	return sb;
}

static void set_expiry_locked(struct sandbox *sb, int64_t expires)
{
	sb->expires = expires;
	pthread_cond_broadcast(&g.cond);
}

static int64_t expiry_after(int64_t seconds)
{
	if (seconds < 0)
		return NEVER;
	return mono_ms() + seconds * 1000;
}

static int64_t expires_wall_ms(const struct sandbox *sb)
{
	if (sb->expires == NEVER)
		return NEVER;
	return wall_ms() + (sb->expires - mono_ms());
}

static void new_token(char *out)
{
	random_hex(out, 64);
}

/* With sb->op held. */
static void sb_pause(struct sandbox *sb, int memory)
{
	if (memory)
		stop_tree(sb);
	else
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	if (!memory)
		sb->envd_pid = 0;
	sb->state = SB_PAUSED;
	sb->pause_full = memory;
	sb_log(sb, "sandbox paused (%s)", memory ? "full" : "filesystem");
	pthread_mutex_unlock(&g.lock);
}

/* With sb->op held. E2B mints a new envd token on every resume. */
static int sb_resume(struct sandbox *sb)
{
	if (sb->envd_pid > 0)
		cont_tree(sb);
	else if (start_envd(sb) < 0)
		return -1;
	pthread_mutex_lock(&g.lock);
	sb->state = SB_RUNNING;
	if (!is_cube() && sb->secure)
		new_token(sb->envd_token);
	sb_log(sb, "sandbox resumed");
	pthread_mutex_unlock(&g.lock);
	return 0;
}

/* With sb->op held. */
static void sb_kill(struct sandbox *sb)
{
	if (sb->envd_pid > 0)
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = 0;
	sb->envd_port = 0;
	sb->state = SB_DEAD;
	sb_log(sb, "sandbox killed");
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

static void free_sandbox(struct sandbox *sb)
{
	free(sb->alias);
	cJSON_Delete(sb->metadata);
	cJSON_Delete(sb->env_vars);
	cJSON_Delete(sb->network);
	cJSON_Delete(sb->logs);
	pthread_mutex_destroy(&sb->op);
	free(sb);
}

static void *reaper_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.lock);
	while (!g.stopping) {
		int64_t now = mono_ms(), next = NEVER;
		struct sandbox *due = NULL;

		for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
			if (sb->state != SB_RUNNING)
				continue;
			if (sb->expires <= now) {
				due = sb;
				break;
			}
			if (sb->expires < next)
				next = sb->expires;
		}
		if (due) {
			pthread_mutex_unlock(&g.lock);
			pthread_mutex_lock(&due->op);
			pthread_mutex_lock(&g.lock);
			if (due->state == SB_RUNNING && due->expires <= mono_ms()) {
				int pause = due->auto_pause;

				sb_log(due, "sandbox timed out");
				pthread_mutex_unlock(&g.lock);
				if (pause)
					sb_pause(due, due->auto_pause_memory);
				else
					sb_kill(due);
				pthread_mutex_lock(&g.lock);
			}
			pthread_mutex_unlock(&g.lock);
			pthread_mutex_unlock(&due->op);
			pthread_mutex_lock(&g.lock);
			continue;
		}
		if (next == NEVER) {
			pthread_cond_wait(&g.cond, &g.lock);
		} else {
			struct timespec ts;

			ms_to_timespec(next, &ts);
			pthread_cond_timedwait(&g.cond, &g.lock, &ts);
		}
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

/* ---------------------------------------------------------------- templates */

static struct template *add_template(const char *id, const char *alias)
{
	struct template *t = calloc(1, sizeof(*t));

	if (!t)
		abort();
	snprintf(t->id, sizeof(t->id), "%s", id);
	t->alias = alias ? strdup(alias) : NULL;
	t->names = cJSON_CreateArray();
	t->build_logs = cJSON_CreateArray();
	t->created_ms = wall_ms();
	t->cpu = 2;
	t->mem_mb = 512;
	t->next = g.templates;
	g.templates = t;
	return t;
}

static void new_template_id(char *out, size_t n)
{
	char r[40];

	if (is_cube()) {
		random_hex(r, 32);
		snprintf(out, n, "tpl-%s", r);
	} else {
		random_from(r, 20, "abcdefghijklmnopqrstuvwxyz0123456789");
		snprintf(out, n, "%s", r);
	}
}

/* "team/name:tag" → "name". */
static void strip_ref(const char *ref, char *out, size_t n)
{
	const char *slash = strrchr(ref, '/');
	const char *s = slash ? slash + 1 : ref;
	const char *colon = strchr(s, ':');
	size_t len = colon ? (size_t)(colon - s) : strlen(s);

	if (len >= n)
		len = n - 1;
	memcpy(out, s, len);
	out[len] = '\0';
}

static struct template *resolve_template_locked(const char *ref)
{
	char bare[160];

	strip_ref(ref, bare, sizeof(bare));
	for (struct template *t = g.templates; t; t = t->next) {
		if (t->deleted)
			continue;
		if (strcmp(t->id, ref) == 0 || strcmp(t->id, bare) == 0 ||
		    (t->snap_id[0] && strcmp(t->snap_id, ref) == 0) ||
		    (t->alias && (strcmp(t->alias, ref) == 0 || strcmp(t->alias, bare) == 0)))
			return t;
	}
	return NULL;
}

static struct template *find_template_by_build_locked(const char *build)
{
	for (struct template *t = g.templates; t; t = t->next)
		if (!t->deleted && strcmp(t->build_id, build) == 0)
			return t;
	return NULL;
}

static void free_template(struct template *t)
{
	free(t->alias);
	free(t->tag);
	cJSON_Delete(t->names);
	cJSON_Delete(t->build_logs);
	cJSON_Delete(t->create_request);
	free(t);
}

static const char *const cube_phases[] = { "PULLING", "UNPACKING", "BUILDING_EXT4", "GENERATING_JSON",
					   "DISTRIBUTING", "CREATING_TEMPLATE", "SNAPSHOTTING",
					   "REGISTERING", "READY" };

static void start_build_locked(struct template *t, int new_id)
{
	if (new_id)
		random_uuid(t->build_id);
	t->status = T_BUILDING;
	t->steps_left = g.build_steps;
	t->phase = 0;
	cJSON_Delete(t->build_logs);
	t->build_logs = cJSON_CreateArray();
}

/* One status poll: a build advances by one step per poll. */
static void advance_build_locked(struct template *t)
{
	cJSON *e;
	char msg[128];

	if (t->status != T_BUILDING)
		return;
	if (t->steps_left > 0)
		t->steps_left--;
	snprintf(msg, sizeof(msg), "build step %d of %d", g.build_steps - t->steps_left, g.build_steps);
	if (t->steps_left == 0) {
		t->status = T_READY;
		snprintf(msg, sizeof(msg), "build finished");
	}
	e = cJSON_CreateObject();
	add_time(e, "timestamp", wall_ms());
	cJSON_AddStringToObject(e, "message", msg);
	cJSON_AddStringToObject(e, "level", "info");
	cJSON_AddItemToArray(t->build_logs, e);
}

/* ------------------------------------------------------------------- faults */

static int take_fault(const char *route, struct fault *out)
{
	int found = 0;

	pthread_mutex_lock(&g.lock);
	for (struct fault **pp = &g.faults; *pp; pp = &(*pp)->next) {
		struct fault *f = *pp;

		if (strcmp(f->route, "any") != 0 && strcmp(f->route, route) != 0)
			continue;
		*out = *f;
		found = 1;
		if (--f->count <= 0) {
			*pp = f->next;
			free(f);
		}
		break;
	}
	pthread_mutex_unlock(&g.lock);
	return found;
}

static void clear_faults_locked(void)
{
	while (g.faults) {
		struct fault *f = g.faults;

		g.faults = f->next;
		free(f);
	}
}

/* ---------------------------------------------------------- HTTP: responses */

struct reply {
	unsigned status;
	char *body;
	size_t len;
	const char *ctype;
	int nhdr;
	char hdr[8][2][160];
};

struct req {
	struct MHD_Connection *conn;
	const char *method;
	char *url;
	char *pathbuf;               /* url, cut into segs */
	char *body;
	size_t len, cap;
	int too_big;
	char *segs[12];
	int nseg;
	char route[32];
	int repeat_token;            /* a fault: X-Next-Token repeats the request's nextToken */
	int make_public;             /* a fault: the create is public, no traffic token */
	int fork_errors;             /* a fault: this many forks fail with an error entry */
};

static void reply_header(struct reply *r, const char *k, const char *v)
{
	if (r->nhdr >= 8)
		return;
	snprintf(r->hdr[r->nhdr][0], sizeof(r->hdr[0][0]), "%s", k);
	snprintf(r->hdr[r->nhdr][1], sizeof(r->hdr[0][1]), "%s", v);
	r->nhdr++;
}

static void reply_set(struct reply *r, unsigned status, char *body, const char *ctype)
{
	free(r->body);
	r->status = status;
	r->body = body;
	r->len = body ? strlen(body) : 0;
	r->ctype = ctype;
}

static void reply_json(struct reply *r, unsigned status, cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	reply_set(r, status, s, "application/json; charset=utf-8");
}

static void reply_empty(struct reply *r, unsigned status)
{
	reply_set(r, status, NULL, NULL);
}

static void reply_text(struct reply *r, unsigned status, const char *text)
{
	reply_set(r, status, strdup(text), "text/plain; charset=utf-8");
}

static void reply_error(struct reply *r, unsigned status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reply_error(struct reply *r, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	cJSON *o = cJSON_CreateObject();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(o, "code", status);
	cJSON_AddStringToObject(o, "message", msg);
	reply_json(r, status, o);
}

/* An unmatched route: gin's text on E2B, an empty body on axum [CUBE §3]. */
static void reply_no_route(struct reply *r)
{
	if (is_cube())
		reply_empty(r, 404);
	else
		reply_text(r, 404, "404 page not found");
}

static void reply_405(struct reply *r, const char *allow)
{
	reply_empty(r, 405);
	reply_header(r, "Allow", allow);
}

/* -------------------------------------------------------- HTTP: request I/O */

static const char *hdr(const struct req *q, const char *name)
{
	return MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, name);
}

static const char *arg(const struct req *q, const char *name)
{
	return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

static int content_type_json(const struct req *q)
{
	const char *ct = hdr(q, "Content-Type");
	size_t n = strlen("application/json");

	if (!ct || strncasecmp(ct, "application/json", n) != 0)
		return 0;
	return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

/*
 * The body as a JSON object. E2B: a missing body is {} when allow_empty, other
 * problems are 400 {"code","message"}. Cube (axum's Json extractor): 415, 400
 * as plain text [CUBE §3].
 */
static cJSON *body_object(struct req *q, struct reply *r, int allow_empty)
{
	cJSON *o;

	if (is_cube()) {
		if (!content_type_json(q)) {
			reply_text(r, 415, "Expected request with `Content-Type: application/json`");
			return NULL;
		}
		o = cJSON_ParseWithLength(q->body ? q->body : "", q->len);
		if (!o) {
			reply_text(r, 400, q->len ? "Failed to parse the request body as JSON: syntax error"
						  : "Failed to parse the request body as JSON: EOF while parsing a value at line 1 column 0");
			return NULL;
		}
		if (!cJSON_IsObject(o)) {
			cJSON_Delete(o);
			reply_text(r, 422, "Failed to deserialize the JSON body into the target type: invalid type: expected struct");
			return NULL;
		}
		return o;
	}
	if (q->len == 0 && allow_empty)
		return cJSON_CreateObject();
	o = cJSON_ParseWithLength(q->body ? q->body : "", q->len);
	if (!o || !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		reply_error(r, 400, "Error when parsing request: request body has an error: failed to decode request body");
		return NULL;
	}
	return o;
}

/* A field of the wrong type: 422 text on Cube, 400 JSON on E2B. */
static void reply_bad_field(struct reply *r, const char *field, const char *want)
{
	char msg[256];

	if (is_cube()) {
		snprintf(msg, sizeof(msg),
			 "Failed to deserialize the JSON body into the target type: %s: invalid type, expected %s",
			 field, want);
		reply_text(r, 422, msg);
	} else {
		reply_error(r, 400, "Error when parsing request: field \"%s\" must be %s", field, want);
	}
}

static void reply_missing_field(struct reply *r, const char *field)
{
	char msg[256];

	if (is_cube()) {
		snprintf(msg, sizeof(msg),
			 "Failed to deserialize the JSON body into the target type: missing field `%s`", field);
		reply_text(r, 422, msg);
	} else {
		reply_error(r, 400, "Error when parsing request: property \"%s\" is missing", field);
	}
}

/* Reads an optional integer field; -2 means wrong type (reply set). */
static int int_field(cJSON *o, const char *name, int64_t *out, int *present, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	*present = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble) {
		reply_bad_field(r, name, "an integer");
		return -2;
	}
	*out = (int64_t)v->valuedouble;
	*present = 1;
	return 0;
}

static int bool_field(cJSON *o, const char *name, int *out, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsBool(v)) {
		reply_bad_field(r, name, "a boolean");
		return -2;
	}
	*out = cJSON_IsTrue(v);
	return 1;
}

/* A {string:string} map or absent; -2 on a bad shape (reply set). */
static int string_map(cJSON *o, const char *name, cJSON **out, struct reply *r)
{
	cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name), *e;

	*out = NULL;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (!cJSON_IsObject(v)) {
		reply_bad_field(r, name, "an object of strings");
		return -2;
	}
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e)) {
			reply_bad_field(r, name, "an object of strings");
			return -2;
		}
	}
	*out = cJSON_Duplicate(v, 1);
	return 0;
}

/* ---------------------------------------------------------- JSON renderings */

enum view { V_CREATE, V_CONNECT, V_DETAIL, V_LISTED };

static cJSON *sandbox_json_locked(const struct sandbox *sb, enum view v)
{
	cJSON *o = cJSON_CreateObject();
	int64_t end = expires_wall_ms(sb);

	cJSON_AddStringToObject(o, "templateID", sb->template_id);
	cJSON_AddStringToObject(o, "sandboxID", sb->id);
	if (!is_cube() && sb->alias)
		cJSON_AddStringToObject(o, "alias", sb->alias);
	if (is_cube()) {
		char id[40];

		if (v == V_CONNECT) {
			snprintf(id, sizeof(id), "node-%.8s", sb->id);
		} else if (v == V_CREATE) {
			random_uuid(id);
		} else {
			snprintf(id, sizeof(id), "node-%.8s", sb->id);
		}
		cJSON_AddStringToObject(o, "clientID", id);
	} else {
		cJSON_AddStringToObject(o, "clientID", E2B_CLIENT_ID);
	}
	cJSON_AddStringToObject(o, "envdVersion", ENVD_VERSION);
	if (v == V_CREATE || v == V_CONNECT) {
		if (is_cube()) {
			/* envdAccessToken is never present; the traffic token only on create [CUBE §5]. */
			if (v == V_CREATE && sb->traffic_token[0])
				cJSON_AddStringToObject(o, "trafficAccessToken", sb->traffic_token);
			cJSON_AddStringToObject(o, "domain", g.domain ? g.domain : "cube.app");
		} else {
			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "envdAccessToken", sb->envd_token);
			if (sb->traffic_token[0])
				cJSON_AddStringToObject(o, "trafficAccessToken", sb->traffic_token);
			else
				cJSON_AddNullToObject(o, "trafficAccessToken");
			if (g.domain)
				cJSON_AddStringToObject(o, "domain", g.domain);
			else
				cJSON_AddNullToObject(o, "domain");
		}
		return o;
	}
	add_time(o, "startedAt", sb->started_ms);
	if (end != NEVER)
		add_time(o, "endAt", end);
	else if (!is_cube())
		add_time(o, "endAt", sb->started_ms);
	cJSON_AddNumberToObject(o, "cpuCount", sb->cpu);
	cJSON_AddNumberToObject(o, "memoryMB", sb->mem_mb);
	cJSON_AddNumberToObject(o, "diskSizeMB", is_cube() ? 0 : sb->disk_mb);
	cJSON_AddItemToObject(o, "metadata", sb->metadata ? cJSON_Duplicate(sb->metadata, 1) : cJSON_CreateObject());
	cJSON_AddStringToObject(o, "state", sb->state == SB_PAUSED ? "paused" : "running");
	cJSON_AddItemToObject(o, "volumeMounts", cJSON_CreateArray());
	if (v == V_DETAIL) {
		if (is_cube()) {
			cJSON_AddStringToObject(o, "domain", g.domain ? g.domain : "cube.app");
		} else {
			cJSON *lc = cJSON_CreateObject();

			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "envdAccessToken", sb->envd_token);
			if (sb->allow_internet < 0)
				cJSON_AddNullToObject(o, "allowInternetAccess");
			else
				cJSON_AddBoolToObject(o, "allowInternetAccess", sb->allow_internet);
			if (g.domain)
				cJSON_AddStringToObject(o, "domain", g.domain);
			else
				cJSON_AddNullToObject(o, "domain");
			if (sb->network)
				cJSON_AddItemToObject(o, "network", cJSON_Duplicate(sb->network, 1));
			cJSON_AddBoolToObject(lc, "autoResume", sb->auto_resume);
			cJSON_AddStringToObject(lc, "onTimeout", sb->auto_pause ? "pause" : "kill");
			cJSON_AddItemToObject(o, "lifecycle", lc);
			if (sb->state == SB_PAUSED)
				cJSON_AddStringToObject(o, "pauseMode", sb->pause_full ? "full" : "filesystem");
		}
	}
	return o;
}

/* ------------------------------------------------------------- create logic */

static const char *const cube_env_deny[] = { "PATH", "PYTHONPATH", "NODE_PATH", "CLASSPATH", "IFS",
					     "BASH_ENV", "ENV", "PERL5LIB", "RUBYLIB", NULL };

static int cube_env_ok(cJSON *env, struct reply *r)
{
	cJSON *e;

	if (!env)
		return 1;
	cJSON_ArrayForEach(e, env) {
		const char *k = e->string;

		if (!(isalpha((unsigned char)k[0]) || k[0] == '_'))
			goto bad;
		for (const char *p = k; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '_'))
				goto bad;
		if (strncasecmp(k, "LD_", 3) == 0)
			goto deny;
		for (int i = 0; cube_env_deny[i]; i++)
			if (strcasecmp(k, cube_env_deny[i]) == 0)
				goto deny;
		if (strlen(e->valuestring) > 4096)
			goto bad;
		for (const char *p = e->valuestring; *p; p++)
			if ((unsigned char)*p < 0x20 && *p != '\t')
				goto bad;
	}
	return 1;
deny:
	reply_error(r, 400, "environment variable %s is not allowed", e->string);
	return 0;
bad:
	reply_error(r, 400, "invalid environment variable %s", e->string);
	return 0;
}

struct create_opts {
	const struct template *tpl;
	char template_id[80];
	char *alias;
	int64_t timeout_s;
	int secure, public_traffic, allow_internet;
	int auto_pause, auto_pause_memory, auto_resume;
	cJSON *metadata, *env_vars, *network;
};

/* Creates and starts a sandbox; returns it RUNNING or NULL. Takes ownership of the cJSON fields. */
static struct sandbox *create_sandbox(struct create_opts *o)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));

	if (!sb)
		abort();
	pthread_mutex_init(&sb->op, NULL);
	if (is_cube())
		random_hex(sb->id, 32);
	else
		random_from(sb->id, 20, "abcdefghijklmnopqrstuvwxyz0123456789");
	snprintf(sb->template_id, sizeof(sb->template_id), "%s", o->template_id);
	sb->alias = o->alias;
	sb->secure = o->secure;
	sb->public_traffic = o->public_traffic;
	sb->allow_internet = o->allow_internet;
	sb->auto_pause = o->auto_pause;
	sb->auto_pause_memory = o->auto_pause_memory;
	sb->auto_resume = o->auto_resume;
	sb->metadata = o->metadata;
	sb->env_vars = o->env_vars;
	sb->network = o->network;
	sb->logs = cJSON_CreateArray();
	sb->timeout_s = o->timeout_s;
	sb->cpu = o->tpl ? o->tpl->cpu : 2;
	sb->mem_mb = o->tpl ? o->tpl->mem_mb : 512;
	sb->disk_mb = 1024;
	sb->started_ms = wall_ms();
	sb->expires = NEVER;
	sb->state = SB_RUNNING;
	if (!is_cube() && sb->secure)
		new_token(sb->envd_token);
	if (!sb->public_traffic) {
		if (is_cube())
			random_uuid(sb->traffic_token);
		else
			random_hex(sb->traffic_token, 32);
	}
	o->alias = NULL;
	o->metadata = o->env_vars = o->network = NULL;
	sb_log(sb, "sandbox created from template %s", sb->template_id);
	if (start_envd(sb) < 0) {
		free_sandbox(sb);
		return NULL;
	}
	pthread_mutex_lock(&g.lock);
	sb->started_ms = wall_ms();
	sb->expires = expiry_after(sb->timeout_s);
	sb->next = g.sandboxes;
	g.sandboxes = sb;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	return sb;
}

static void create_opts_free(struct create_opts *o)
{
	free(o->alias);
	cJSON_Delete(o->metadata);
	cJSON_Delete(o->env_vars);
	cJSON_Delete(o->network);
}

static void handle_create(struct req *q, struct reply *r, int v2)
{
	cJSON *b = body_object(q, r, 0), *tid, *net, *ar, *lc;
	struct create_opts o = { .secure = 0, .public_traffic = 1, .allow_internet = -1,
				 .auto_pause_memory = 1 };
	struct sandbox *sb;
	struct template *t;
	int present;

	if (!b)
		return;
	tid = cJSON_GetObjectItemCaseSensitive(b, "templateID");
	if (!tid || cJSON_IsNull(tid)) {
		reply_missing_field(r, "templateID");
		goto out;
	}
	if (!cJSON_IsString(tid) || !tid->valuestring[0]) {
		reply_bad_field(r, "templateID", "a non-empty string");
		goto out;
	}
	o.timeout_s = is_cube() ? -1 : (v2 ? 300 : 15);
	/* NewSandboxV2 has no "secure": v2 sandboxes always get a token [S3 §4.2]. */
	o.secure = v2;
	if (int_field(b, "timeout", &o.timeout_s, &present, r) < 0)
		goto out;
	if (present && o.timeout_s < 0 && !(is_cube() && o.timeout_s == -1)) {
		reply_error(r, 400, "timeout must be %s", is_cube() ? ">= 0 or -1" : ">= 0");
		goto out;
	}
	if (bool_field(b, "secure", &o.secure, r) == -2 || bool_field(b, "autoPause", &o.auto_pause, r) == -2 ||
	    bool_field(b, "allow_internet_access", &o.allow_internet, r) == -2)
		goto out;
	if (!is_cube() && bool_field(b, "autoPauseMemory", &o.auto_pause_memory, r) == -2)
		goto out;
	ar = cJSON_GetObjectItemCaseSensitive(b, "autoResume");
	if (cJSON_IsBool(ar))
		o.auto_resume = cJSON_IsTrue(ar);
	else if (cJSON_IsObject(ar))
		o.auto_resume = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ar, "enabled"));
	lc = cJSON_GetObjectItemCaseSensitive(b, "lifecycle");
	if (is_cube() && cJSON_IsObject(lc)) {
		cJSON *ot = cJSON_GetObjectItemCaseSensitive(lc, "onTimeout");
		cJSON *lr = cJSON_GetObjectItemCaseSensitive(lc, "autoResume");

		if (!ot)
			ot = cJSON_GetObjectItemCaseSensitive(lc, "on_timeout");
		if (!lr)
			lr = cJSON_GetObjectItemCaseSensitive(lc, "auto_resume");
		if (cJSON_IsString(ot))
			o.auto_pause = strcmp(ot->valuestring, "pause") == 0;
		if (cJSON_IsBool(lr))
			o.auto_resume = cJSON_IsTrue(lr);
	}
	if (!is_cube() && o.auto_resume && o.auto_pause && !o.auto_pause_memory) {
		reply_error(r, 400, "autoPauseMemory=false cannot be combined with autoResume");
		goto out;
	}
	net = cJSON_GetObjectItemCaseSensitive(b, "network");
	if (net && !cJSON_IsNull(net)) {
		cJSON *apt;

		if (!cJSON_IsObject(net)) {
			reply_bad_field(r, "network", "an object");
			goto out;
		}
		if (is_cube()) {
			cJSON *rules = cJSON_GetObjectItemCaseSensitive(net, "rules");

			if (rules && !cJSON_IsArray(rules) && !cJSON_IsNull(rules)) {
				/* E2B's rules are an object keyed by domain; Cube wants an array [CUBE §4.1]. */
				reply_bad_field(r, "network.rules", "a sequence");
				goto out;
			}
		}
		apt = cJSON_GetObjectItemCaseSensitive(net, "allowPublicTraffic");
		if (cJSON_IsBool(apt))
			o.public_traffic = cJSON_IsTrue(apt);
		o.network = cJSON_Duplicate(net, 1);
	}
	/* A fault: the platform made it public whatever was asked (CubeMaster minting no token). */
	if (q->make_public)
		o.public_traffic = 1;
	if (string_map(b, "metadata", &o.metadata, r) < 0)
		goto out;
	if (string_map(b, "envVars", &o.env_vars, r) < 0)
		goto out;
	if (is_cube() && !o.env_vars && string_map(b, "envs", &o.env_vars, r) < 0)
		goto out;
	if (is_cube() && !cube_env_ok(o.env_vars, r))
		goto out;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid->valuestring);
	if (t && t->status == T_READY) {
		o.tpl = t;
		snprintf(o.template_id, sizeof(o.template_id), "%s", t->id);
		if (t->alias && !t->is_snapshot)
			o.alias = strdup(t->alias);
	} else {
		t = NULL;
	}
	pthread_mutex_unlock(&g.lock);
	if (!t) {
		if (is_cube())
			reply_error(r, 500, "CubeMaster returned error code 130404: template %s not found",
				    tid->valuestring);
		else
			reply_error(r, 400, "template '%s' not found", tid->valuestring);
		goto out;
	}
	sb = create_sandbox(&o);
	if (!sb) {
		reply_error(r, 500, "failed to create sandbox: envd did not start");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	reply_json(r, 201, sandbox_json_locked(sb, V_CREATE));
	pthread_mutex_unlock(&g.lock);
out:
	create_opts_free(&o);
	cJSON_Delete(b);
}

/* --------------------------------------------------------- lifecycle routes */

static void not_found_sandbox(struct reply *r, const char *id)
{
	reply_error(r, 404, "sandbox \"%s\" doesn't exist or you don't have access to it", id);
}

static void handle_get(struct req *q, struct reply *r, const char *id)
{
	struct sandbox *sb;

	(void)q;
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD)
		not_found_sandbox(r, id);
	else
		reply_json(r, 200, sandbox_json_locked(sb, V_DETAIL));
	pthread_mutex_unlock(&g.lock);
}

static void handle_kill(struct reply *r, const char *id)
{
	struct sandbox *sb = find_live(id);

	if (!sb) {
		not_found_sandbox(r, id);
		return;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		sb_kill(sb);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&sb->op);
}

/* connect (resume_only=0) or the deprecated resume (resume_only=1). */
static void handle_connect(struct req *q, struct reply *r, const char *id, int resume_only)
{
	cJSON *b = body_object(q, r, !is_cube() && resume_only);
	struct sandbox *sb;
	int64_t timeout = resume_only && !is_cube() ? 15 : -1;
	int present, resumed = 0, memory = 1;

	if (!b)
		return;
	if (int_field(b, "timeout", &timeout, &present, r) < 0)
		goto out;
	if (!is_cube() && !resume_only && !present) {
		reply_missing_field(r, "timeout");
		goto out;
	}
	if (present && timeout < 0) {
		reply_error(r, 400, "timeout must be >= 0");
		goto out;
	}
	if (!is_cube() && bool_field(b, "memory", &memory, r) == -2)
		goto out;
	sb = find_live(id);
	if (!sb) {
		not_found_sandbox(r, id);
		goto out;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
		goto unlock;
	}
	if (sb->state == SB_RUNNING) {
		if (resume_only) {
			reply_error(r, 409, "sandbox %s is already running", id);
			goto unlock;
		}
		if (!is_cube()) {
			/* A running sandbox's TTL is only ever extended [API §2]. */
			int64_t e = expiry_after(timeout);

			pthread_mutex_lock(&g.lock);
			if (e > sb->expires)
				set_expiry_locked(sb, e);
			pthread_mutex_unlock(&g.lock);
		}
	} else {
		if (!memory && sb->pause_full) {
			/* memory=false means a cold boot; envd is restarted fresh. */
			kill_tree(sb);
			pthread_mutex_lock(&g.lock);
			sb->envd_pid = 0;
			pthread_mutex_unlock(&g.lock);
		}
		if (sb_resume(sb) < 0) {
			reply_error(r, 500, "failed to resume sandbox %s", id);
			goto unlock;
		}
		resumed = 1;
		pthread_mutex_lock(&g.lock);
		set_expiry_locked(sb, expiry_after(present ? timeout : (is_cube() ? sb->timeout_s : timeout)));
		pthread_mutex_unlock(&g.lock);
	}
	pthread_mutex_lock(&g.lock);
	/* Cube's connect is always 200 [CUBE §9.4]; resume is 201 everywhere. */
	reply_json(r, resume_only ? 201 : (resumed && !is_cube() ? 201 : 200),
		   sandbox_json_locked(sb, V_CONNECT));
	pthread_mutex_unlock(&g.lock);
unlock:
	pthread_mutex_unlock(&sb->op);
out:
	cJSON_Delete(b);
}

static void handle_pause(struct req *q, struct reply *r, const char *id)
{
	struct sandbox *sb;
	int memory = 1;

	if (q->len > 0) {
		cJSON *b = cJSON_ParseWithLength(q->body, q->len);

		if (!is_cube() && (!b || !cJSON_IsObject(b))) {
			cJSON_Delete(b);
			reply_error(r, 400, "Error when parsing request: request body has an error");
			return;
		}
		if (cJSON_IsObject(b) && bool_field(b, "memory", &memory, r) == -2) {
			cJSON_Delete(b);
			return;
		}
		cJSON_Delete(b);
	}
	if (is_cube() && !memory) {
		/* Cube always keeps memory; PR #1800 refuses memory=false [CUBE §6]. */
		reply_error(r, 400, "memory=false is not supported: CubeSandbox pause always keeps memory");
		return;
	}
	sb = find_live(id);
	if (!sb) {
		not_found_sandbox(r, id);
		return;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else if (sb->state == SB_PAUSED) {
		if (is_cube())
			reply_error(r, 409, "sandbox %s cannot be paused: it is already paused", id);
		else
			reply_error(r, 409, "Sandbox %s is already paused", id);
	} else {
		sb_pause(sb, memory);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&sb->op);
}

static void handle_timeout(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0);
	int64_t t = 0;
	int present;
	struct sandbox *sb;

	if (!b)
		return;
	if (int_field(b, "timeout", &t, &present, r) < 0)
		goto out;
	if (!present) {
		reply_missing_field(r, "timeout");
		goto out;
	}
	if (t < 0 && !(is_cube() && t == -1)) {
		reply_error(r, 400, "timeout must be %s", is_cube() ? ">= 0 or -1" : ">= 0");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		set_expiry_locked(sb, expiry_after(t));
		if (is_cube())
			sb->timeout_s = t;
		sb_log(sb, "timeout set to %" PRId64 " s", t);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

static void handle_refresh(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 1);
	int64_t d = 0;
	int present;
	struct sandbox *sb;

	if (!b)
		return;
	if (int_field(b, "duration", &d, &present, r) < 0)
		goto out;
	if (present && !is_cube() && (d < 0 || d > 3600)) {
		reply_error(r, 400, "duration must be between 0 and 3600");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		int64_t e = expiry_after(present ? d : sb->timeout_s);

		if (e > sb->expires || is_cube())
			set_expiry_locked(sb, e);
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

static void handle_network(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0);
	struct sandbox *sb;

	if (!b)
		return;
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else if (sb->state != SB_RUNNING) {
		reply_error(r, 409, "sandbox %s is not running", id);
	} else {
		cJSON_Delete(sb->network);
		sb->network = b;
		b = NULL;
		reply_empty(r, 204);
	}
	pthread_mutex_unlock(&g.lock);
	cJSON_Delete(b);
}

/* POST /sandboxes/{id}/snapshots. The source keeps running [S3 §4.2]. */
static void handle_snapshot(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0), *name, *o;
	struct sandbox *sb;
	struct template *t;
	char tid[64];

	if (!b)
		return;
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (name && !cJSON_IsNull(name) && !cJSON_IsString(name)) {
		reply_bad_field(r, "name", "a string");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
		pthread_mutex_unlock(&g.lock);
		goto out;
	}
	if (is_cube()) {
		char h[25];

		random_hex(h, 24);
		snprintf(tid, sizeof(tid), "snap-%s", h);
	} else {
		new_template_id(tid, sizeof(tid));
	}
	t = add_template(tid, cJSON_IsString(name) ? name->valuestring : NULL);
	t->is_snapshot = 1;
	t->status = T_READY;
	t->cpu = sb->cpu;
	t->mem_mb = sb->mem_mb;
	snprintf(t->origin, sizeof(t->origin), "%s", sb->id);
	snprintf(t->source_tpl, sizeof(t->source_tpl), "%s", sb->template_id);
	if (is_cube()) {
		snprintf(t->snap_id, sizeof(t->snap_id), "%s", tid);
		if (t->alias)
			cJSON_AddItemToArray(t->names, cJSON_CreateString(t->alias));
	} else {
		char full[200];

		snprintf(t->snap_id, sizeof(t->snap_id), "%s:default", t->alias ? t->alias : tid);
		snprintf(full, sizeof(full), "%s%s:default", t->alias ? "fake-team/" : "",
			 t->alias ? t->alias : tid);
		cJSON_AddItemToArray(t->names, cJSON_CreateString(full));
	}
	sb_log(sb, "snapshot %s taken", t->snap_id);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "snapshotID", t->snap_id);
	cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
	reply_json(r, 201, o);
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

/* Cube: POST /sandboxes/{id}/rollback restarts the sandbox in place [CUBE §6]. */
static void handle_rollback(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 0), *snap, *o;
	struct sandbox *sb;
	struct template *t;
	int ok;
	char op[40];

	if (!b)
		return;
	snap = cJSON_GetObjectItemCaseSensitive(b, "snapshotID");
	if (!cJSON_IsString(snap)) {
		reply_missing_field(r, "snapshotID");
		goto out;
	}
	sb = find_live(id);
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(snap->valuestring);
	ok = sb && t && t->is_snapshot && strcmp(t->origin, id) == 0;
	pthread_mutex_unlock(&g.lock);
	if (!ok) {
		reply_error(r, 404, "sandbox %s or snapshot %s not found", id, snap->valuestring);
		goto out;
	}
	pthread_mutex_lock(&sb->op);
	if (sb->state == SB_DEAD) {
		pthread_mutex_unlock(&sb->op);
		not_found_sandbox(r, id);
		goto out;
	}
	if (sb->envd_pid > 0)
		kill_tree(sb);
	pthread_mutex_lock(&g.lock);
	sb->envd_pid = 0;
	pthread_mutex_unlock(&g.lock);
	if (start_envd(sb) < 0) {
		pthread_mutex_unlock(&sb->op);
		reply_error(r, 500, "rollback failed");
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	sb->state = SB_RUNNING;
	sb_log(sb, "rolled back to %s", snap->valuestring);
	pthread_mutex_unlock(&g.lock);
	pthread_mutex_unlock(&sb->op);
	random_uuid(op);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sandboxID", id);
	cJSON_AddStringToObject(o, "snapshotID", snap->valuestring);
	cJSON_AddStringToObject(o, "operationID", op);
	cJSON_AddStringToObject(o, "status", "READY");
	reply_json(r, 200, o);
out:
	cJSON_Delete(b);
}

/* E2B cloud: POST /sandboxes/{id}/fork. Each fork gets a fresh envd. */
static void handle_fork(struct req *q, struct reply *r, const char *id)
{
	cJSON *b = body_object(q, r, 1), *arr;
	int64_t timeout = 15, count = 1;
	int present;
	struct sandbox *src;
	struct create_opts base = { 0 };

	if (!b)
		return;
	if (int_field(b, "timeout", &timeout, &present, r) < 0 || int_field(b, "count", &count, &present, r) < 0)
		goto out;
	if (count < 1 || count > 100 || timeout < 0) {
		reply_error(r, 400, "count must be between 1 and 100 and timeout >= 0");
		goto out;
	}
	src = find_live(id);
	if (!src) {
		not_found_sandbox(r, id);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	if (src->state != SB_RUNNING) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 409, "sandbox %s is not running", id);
		goto out;
	}
	base.tpl = resolve_template_locked(src->template_id);
	snprintf(base.template_id, sizeof(base.template_id), "%s", src->template_id);
	base.secure = src->secure;
	base.public_traffic = src->public_traffic;
	base.allow_internet = src->allow_internet;
	base.auto_pause = src->auto_pause;
	base.auto_pause_memory = src->auto_pause_memory;
	base.auto_resume = src->auto_resume;
	base.timeout_s = timeout;
	pthread_mutex_unlock(&g.lock);
	arr = cJSON_CreateArray();
	for (int64_t i = 0; i < count; i++) {
		struct create_opts o = base;
		struct sandbox *sb;
		cJSON *e = cJSON_CreateObject();

		if (i < q->fork_errors) {
			cJSON *err = cJSON_AddObjectToObject(e, "error");

			cJSON_AddNumberToObject(err, "code", 500);
			cJSON_AddStringToObject(err, "message", "injected fault: this fork failed");
			cJSON_AddItemToArray(arr, e);
			continue;
		}
		pthread_mutex_lock(&g.lock);
		o.alias = src->alias ? strdup(src->alias) : NULL;
		o.metadata = src->metadata ? cJSON_Duplicate(src->metadata, 1) : NULL;
		o.env_vars = src->env_vars ? cJSON_Duplicate(src->env_vars, 1) : NULL;
		o.network = src->network ? cJSON_Duplicate(src->network, 1) : NULL;
		pthread_mutex_unlock(&g.lock);
		sb = create_sandbox(&o);
		create_opts_free(&o);
		if (sb) {
			pthread_mutex_lock(&g.lock);
			sb_log(sb, "forked from %s", id);
			cJSON_AddItemToObject(e, "sandbox", sandbox_json_locked(sb, V_CREATE));
			pthread_mutex_unlock(&g.lock);
		} else {
			cJSON *err = cJSON_CreateObject();

			cJSON_AddNumberToObject(err, "code", 500);
			cJSON_AddStringToObject(err, "message", "failed to start the fork");
			cJSON_AddItemToObject(e, "error", err);
		}
		cJSON_AddItemToArray(arr, e);
	}
	reply_json(r, 201, arr);
out:
	cJSON_Delete(b);
}

static cJSON *metric_json(const struct sandbox *sb)
{
	cJSON *m = cJSON_CreateObject();
	int64_t now = wall_ms();
	long rss = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)sb->envd_pid);
	if (sb->envd_pid > 0 && (f = fopen(path, "re"))) {
		if (fscanf(f, "%*s %ld", &rss) != 1)
			rss = 0;
		fclose(f);
	}
	add_time(m, "timestamp", now);
	cJSON_AddNumberToObject(m, "timestampUnix", (double)(now / 1000));
	cJSON_AddNumberToObject(m, "cpuCount", sb->cpu);
	cJSON_AddNumberToObject(m, "cpuUsedPct", 0);
	cJSON_AddNumberToObject(m, "memUsed", (double)rss * 4096);
	cJSON_AddNumberToObject(m, "memTotal", (double)sb->mem_mb * 1048576);
	cJSON_AddNumberToObject(m, "memCache", 0);
	cJSON_AddNumberToObject(m, "diskUsed", 0);
	cJSON_AddNumberToObject(m, "diskTotal", (double)sb->disk_mb * 1048576);
	return m;
}

static void handle_metrics(struct reply *r, const char *id)
{
	struct sandbox *sb;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || sb->state == SB_DEAD) {
		not_found_sandbox(r, id);
	} else {
		cJSON *a = cJSON_CreateArray();

		cJSON_AddItemToArray(a, metric_json(sb));
		reply_json(r, 200, a);
	}
	pthread_mutex_unlock(&g.lock);
}

static void handle_metrics_many(struct req *q, struct reply *r)
{
	const char *ids = arg(q, "sandbox_ids");
	char *copy, *save = NULL;
	cJSON *o, *m;

	if (!ids || !*ids) {
		reply_error(r, 400, "sandbox_ids is required");
		return;
	}
	copy = strdup(ids);
	o = cJSON_CreateObject();
	m = cJSON_AddObjectToObject(o, "sandboxes");
	pthread_mutex_lock(&g.lock);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		struct sandbox *sb = find_sandbox_locked(t);

		if (sb && sb->state == SB_RUNNING && !cJSON_GetObjectItemCaseSensitive(m, t))
			cJSON_AddItemToObject(m, t, metric_json(sb));
	}
	pthread_mutex_unlock(&g.lock);
	free(copy);
	reply_json(r, 200, o);
}

static void handle_logs(struct reply *r, const char *id, int v2)
{
	struct sandbox *sb;
	cJSON *o, *lines, *entries, *e;

	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb) {
		pthread_mutex_unlock(&g.lock);
		not_found_sandbox(r, id);
		return;
	}
	o = cJSON_CreateObject();
	lines = v2 ? NULL : cJSON_AddArrayToObject(o, "logs");
	entries = cJSON_AddArrayToObject(o, v2 ? "logs" : "logEntries");
	cJSON_ArrayForEach(e, sb->logs) {
		int64_t ms = (int64_t)cJSON_GetObjectItemCaseSensitive(e, "ms")->valuedouble;
		const char *msg = cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring;
		cJSON *x = cJSON_CreateObject();

		add_time(x, "timestamp", ms);
		cJSON_AddStringToObject(x, "message", msg);
		cJSON_AddStringToObject(x, "level", "info");
		cJSON_AddItemToObject(x, "fields", cJSON_CreateObject());
		cJSON_AddItemToArray(entries, x);
		if (lines) {
			cJSON *l = cJSON_CreateObject();

			add_time(l, "timestamp", ms);
			cJSON_AddStringToObject(l, "line", msg);
			cJSON_AddItemToArray(lines, l);
		}
	}
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

/* ---------------------------------------------------------------- listings */

static int url_decode(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
			char h[3] = { p[1], p[2], 0 };

			*w++ = (char)strtol(h, NULL, 16);
			p += 2;
		} else if (*p == '+') {
			*w++ = ' ';
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
	return 0;
}

/* metadata "k=v&k2=v2" (each part URL-encoded) → object. */
static cJSON *parse_metadata_query(const char *s)
{
	cJSON *o = cJSON_CreateObject();
	char *copy, *save = NULL;

	if (!s || !*s)
		return o;
	copy = strdup(s);
	for (char *t = strtok_r(copy, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(t, '=');

		if (!eq)
			continue;
		*eq = '\0';
		url_decode(t);
		url_decode(eq + 1);
		cJSON_DeleteItemFromObjectCaseSensitive(o, t);
		cJSON_AddStringToObject(o, t, eq + 1);
	}
	free(copy);
	return o;
}

static int metadata_matches(const struct sandbox *sb, cJSON *want)
{
	cJSON *e;

	cJSON_ArrayForEach(e, want) {
		cJSON *have = sb->metadata ? cJSON_GetObjectItemCaseSensitive(sb->metadata, e->string) : NULL;

		if (!cJSON_IsString(have) || strcmp(have->valuestring, e->valuestring) != 0)
			return 0;
	}
	return 1;
}

static int sort_desc;

static int cmp_started(const void *a, const void *b)
{
	const struct sandbox *x = *(struct sandbox *const *)a, *y = *(struct sandbox *const *)b;
	int c = (x->started_ms > y->started_ms) - (x->started_ms < y->started_ms);

	if (!c)
		c = strcmp(x->id, y->id);
	return sort_desc ? -c : c;
}

/* limit 1..100 (default 100) and nextToken (an offset); -1 after a 400. */
static int page_args(struct req *q, struct reply *r, long *limit, long *offset)
{
	const char *l = arg(q, "limit"), *t = arg(q, "nextToken");
	char *end;

	*limit = 100;
	*offset = 0;
	if (l) {
		*limit = strtol(l, &end, 10);
		if (*end || *limit < 1 || *limit > 100) {
			reply_error(r, 400, "limit must be between 1 and 100");
			return -1;
		}
	}
	if (t && *t) {
		if (strncmp(t, "fake.", 5) != 0 || (*offset = strtol(t + 5, &end, 10)) < 0 || *end) {
			reply_error(r, 400, "invalid nextToken");
			return -1;
		}
	}
	/* --page-size: a server may send fewer than asked for; clients must follow the token. */
	if (g.page_size > 0 && *limit > g.page_size)
		*limit = g.page_size;
	return 0;
}


static void next_token_header(struct reply *r, long next, const char *name)
{
	char v[32];

	snprintf(v, sizeof(v), "fake.%ld", next);
	reply_header(r, name, v);
}

/* The X-Next-Token of a page: more after next, or (a fault) the request's own token again. */
static void page_token(struct req *q, struct reply *r, int more, long next, const char *name)
{
	const char *t = arg(q, "nextToken");

	if (q->repeat_token)
		reply_header(r, name, t && *t ? t : "fake.0");
	else if (more)
		next_token_header(r, next, name);
}

/* GET /v2/sandboxes (v2=1) or GET /sandboxes. */
static void handle_list(struct req *q, struct reply *r, int v2)
{
	int want_running = 1, want_paused = !v2 ? is_cube() : 1;
	long limit = 100, offset = 0;
	const char *st = arg(q, "state"), *order = arg(q, "order"), *tpl = arg(q, "template");
	cJSON *meta = parse_metadata_query(arg(q, "metadata")), *out;
	struct sandbox **v = NULL;
	size_t n = 0, cap = 0, running = 0;

	if (v2 && st && *st) {
		if (is_cube()) {
			/* Only the single literals filter; anything else means no filter [CUBE §4.1]. */
			if (strcmp(st, "running") == 0)
				want_paused = 0;
			else if (strcmp(st, "paused") == 0)
				want_running = 0;
		} else {
			char *copy = strdup(st), *save = NULL;

			want_running = want_paused = 0;
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				if (strcmp(t, "running") == 0)
					want_running = 1;
				else if (strcmp(t, "paused") == 0)
					want_paused = 1;
				else {
					free(copy);
					cJSON_Delete(meta);
					reply_error(r, 400, "invalid state '%s'", t);
					return;
				}
			}
			free(copy);
		}
	}
	if (v2 && !is_cube()) {
		if (page_args(q, r, &limit, &offset) < 0) {
			cJSON_Delete(meta);
			return;
		}
		if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) {
			cJSON_Delete(meta);
			reply_error(r, 400, "invalid order");
			return;
		}
	} else if (v2) {
		const char *l = arg(q, "limit");

		limit = l ? atol(l) : 100;
		if (limit < 0)
			limit = 100;
	} else {
		limit = is_cube() ? 200 : LONG_MAX;
	}
	pthread_mutex_lock(&g.lock);
	for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
		if (sb->state == SB_DEAD)
			continue;
		if (sb->state == SB_RUNNING ? !want_running : !want_paused)
			continue;
		if (!metadata_matches(sb, meta))
			continue;
		if (tpl && *tpl && strcmp(sb->template_id, tpl) != 0 && !(sb->alias && strcmp(sb->alias, tpl) == 0))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				abort();
		}
		v[n++] = sb;
		if (sb->state == SB_RUNNING)
			running++;
	}
	sort_desc = !(order && strcmp(order, "asc") == 0);
	if (n)
		qsort(v, n, sizeof(*v), cmp_started);
	out = cJSON_CreateArray();
	for (size_t i = (size_t)offset; i < n && (long)(i - (size_t)offset) < limit; i++)
		cJSON_AddItemToArray(out, sandbox_json_locked(v[i], V_LISTED));
	pthread_mutex_unlock(&g.lock);
	if (v2 && !is_cube()) {
		char num[32];

		page_token(q, r, (size_t)offset + (size_t)limit < n, offset + limit, "X-Next-Token");
		if (want_running) {
			snprintf(num, sizeof(num), "%zu", running);
			reply_header(r, "X-Total-Running", num);
		}
	}
	free(v);
	cJSON_Delete(meta);
	reply_json(r, 200, out);
}

static void handle_list_snapshots(struct req *q, struct reply *r)
{
	long limit, offset;
	const char *sid = arg(q, "sandboxID"), *name = arg(q, "name");
	cJSON *out;
	long i = 0;
	int more = 0;

	if (page_args(q, r, &limit, &offset) < 0)
		return;
	out = cJSON_CreateArray();
	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next) {
		cJSON *o;

		if (!t->is_snapshot || t->deleted)
			continue;
		if (sid && *sid && strcmp(t->origin, sid) != 0)
			continue;
		if (name && *name && !(t->alias && strcmp(t->alias, name) == 0))
			continue;
		if (i++ < offset)
			continue;
		if (i > offset + limit) {
			more = 1;
			break;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "snapshotID", t->snap_id);
		cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
		if (is_cube()) {
			cJSON_AddStringToObject(o, "status", "READY");
			cJSON_AddStringToObject(o, "originSandboxID", t->origin);
			add_time(o, "createdAt", t->created_ms);
			add_time(o, "updatedAt", t->created_ms);
		}
		cJSON_AddItemToArray(out, o);
	}
	pthread_mutex_unlock(&g.lock);
	page_token(q, r, more, offset + limit, is_cube() ? "x-next-token" : "X-Next-Token");
	reply_json(r, 200, out);
}

/* ------------------------------------------------------- E2B template routes */

static void handle_v3_template(struct req *q, struct reply *r)
{
	cJSON *b = body_object(q, r, 0), *name, *tags, *o, *names, *tarr;
	char alias[160] = "", tag[64] = "default", tid[64];
	struct template *t;

	if (!b)
		return;
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (!cJSON_IsString(name))
		name = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (cJSON_IsString(name)) {
		const char *c = strchr(name->valuestring, ':');

		if (strlen(name->valuestring) > 128) {
			reply_error(r, 400, "name is longer than 128 characters");
			goto out;
		}
		snprintf(alias, sizeof(alias), "%.*s", c ? (int)(c - name->valuestring) : 128, name->valuestring);
		if (c)
			snprintf(tag, sizeof(tag), "%s", c + 1);
	}
	tags = cJSON_GetObjectItemCaseSensitive(b, "tags");
	pthread_mutex_lock(&g.lock);
	t = alias[0] ? resolve_template_locked(alias) : NULL;
	if (t && (t->is_snapshot || !t->alias || strcmp(t->alias, alias) != 0))
		t = NULL;
	if (!t) {
		new_template_id(tid, sizeof(tid));
		t = add_template(tid, alias[0] ? alias : NULL);
		if (alias[0])
			cJSON_AddItemToArray(t->names, cJSON_CreateString(alias));
	}
	{
		int64_t v;
		int present;

		if (int_field(b, "cpuCount", &v, &present, r) == 0 && present)
			t->cpu = (int)v;
		if (int_field(b, "memoryMB", &v, &present, r) == 0 && present)
			t->mem_mb = (int)v;
	}
	random_uuid(t->build_id);
	t->status = T_WAITING;
	free(t->tag);
	t->tag = strdup(tag);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "buildID", t->build_id);
	cJSON_AddBoolToObject(o, "public", t->is_public);
	names = cJSON_AddArrayToObject(o, "names");
	if (alias[0])
		cJSON_AddItemToArray(names, cJSON_CreateString(alias));
	tarr = cJSON_IsArray(tags) ? cJSON_Duplicate(tags, 1) : cJSON_CreateArray();
	if (cJSON_GetArraySize(tarr) == 0)
		cJSON_AddItemToArray(tarr, cJSON_CreateString(tag));
	cJSON_AddItemToObject(o, "tags", tarr);
	cJSON_AddItemToObject(o, "aliases", cJSON_Duplicate(names, 1));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 202, o);
out:
	cJSON_Delete(b);
}

static void handle_build_start(struct req *q, struct reply *r, const char *tid, const char *bid)
{
	cJSON *b = body_object(q, r, 1);
	struct template *t;

	if (!b)
		return;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
	} else {
		start_build_locked(t, 0);
		reply_empty(r, 202);
	}
	pthread_mutex_unlock(&g.lock);
	cJSON_Delete(b);
}

static const char *e2b_build_status(enum tpl_status s)
{
	switch (s) {
	case T_WAITING: return "waiting";
	case T_BUILDING: return "building";
	case T_READY: return "ready";
	default: return "error";
	}
}

static void handle_build_status(struct req *q, struct reply *r, const char *tid, const char *bid)
{
	struct template *t;
	cJSON *o, *entries, *e;
	const char *off_s = arg(q, "logsOffset");
	long off = off_s ? atol(off_s) : 0, i = 0;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
		return;
	}
	advance_build_locked(t);
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "buildID", t->build_id);
	cJSON_AddStringToObject(o, "status", e2b_build_status(t->status));
	entries = cJSON_CreateArray();
	{
		cJSON *logs = cJSON_AddArrayToObject(o, "logs");

		cJSON_ArrayForEach(e, t->build_logs) {
			if (i++ < off)
				continue;
			cJSON_AddItemToArray(entries, cJSON_Duplicate(e, 1));
			cJSON_AddItemToArray(logs, cJSON_CreateString(
				cJSON_GetObjectItemCaseSensitive(e, "message")->valuestring));
		}
	}
	cJSON_AddItemToObject(o, "logEntries", entries);
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

static void handle_build_logs(struct reply *r, const char *tid, const char *bid)
{
	struct template *t;
	cJSON *o;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || strcmp(t->build_id, bid) != 0) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 404, "build %s of template %s not found", bid, tid);
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "logs", cJSON_Duplicate(t->build_logs, 1));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

static void handle_e2b_templates_list(struct req *q, struct reply *r)
{
	long limit, offset, i = 0;
	int more = 0;
	cJSON *out;

	if (page_args(q, r, &limit, &offset) < 0)
		return;
	out = cJSON_CreateArray();
	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next) {
		cJSON *o;

		if (t->is_snapshot || t->deleted)
			continue;
		if (i++ < offset)
			continue;
		if (i > offset + limit) {
			more = 1;
			break;
		}
		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "templateID", t->id);
		cJSON_AddStringToObject(o, "buildID", t->build_id);
		cJSON_AddNumberToObject(o, "cpuCount", t->cpu);
		cJSON_AddNumberToObject(o, "memoryMB", t->mem_mb);
		cJSON_AddNumberToObject(o, "diskSizeMB", 1024);
		cJSON_AddBoolToObject(o, "public", t->is_public);
		cJSON_AddItemToObject(o, "aliases", cJSON_Duplicate(t->names, 1));
		cJSON_AddItemToObject(o, "names", cJSON_Duplicate(t->names, 1));
		add_time(o, "createdAt", t->created_ms);
		add_time(o, "updatedAt", t->created_ms);
		cJSON_AddNullToObject(o, "createdBy");
		cJSON_AddNullToObject(o, "lastSpawnedAt");
		cJSON_AddNumberToObject(o, "spawnCount", 0);
		cJSON_AddNumberToObject(o, "buildCount", 1);
		cJSON_AddStringToObject(o, "envdVersion", ENVD_VERSION);
		cJSON_AddStringToObject(o, "buildStatus", e2b_build_status(t->status));
		cJSON_AddItemToArray(out, o);
	}
	pthread_mutex_unlock(&g.lock);
	if (more)
		next_token_header(r, offset + limit, "X-Next-Token");
	reply_json(r, 200, out);
}

static void handle_alias(struct reply *r, const char *alias)
{
	struct template *t = NULL;

	if (is_cube() && !valid_cube_alias(alias)) {
		reply_error(r, 400, "invalid alias %s", alias);
		return;
	}
	pthread_mutex_lock(&g.lock);
	for (struct template *x = g.templates; x; x = x->next)
		if (!x->deleted && !x->is_snapshot && x->alias && strcmp(x->alias, alias) == 0)
			t = x;
	if (!t) {
		reply_error(r, 404, "template with alias '%s' not found", alias);
	} else {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "templateID", t->id);
		cJSON_AddBoolToObject(o, "public", is_cube() ? 1 : t->is_public);
		reply_json(r, 200, o);
	}
	pthread_mutex_unlock(&g.lock);
}

static void handle_template_delete(struct req *q, struct reply *r, const char *tid)
{
	struct template *t;

	(void)q;
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t) {
		reply_error(r, 404, "template %s not found", tid);
	} else {
		t->deleted = 1;
		reply_empty(r, 204);
		if (is_cube() && t->is_snapshot) {
			char op[40];

			random_uuid(op);
			reply_header(r, "x-operation-id", op);
		}
	}
	pthread_mutex_unlock(&g.lock);
}

/* ------------------------------------------------------ Cube template routes */

static const char *cube_tpl_status(const struct template *t)
{
	switch (t->status) {
	case T_READY: return "READY";
	case T_ERROR: return "FAILED";
	case T_WAITING: return "PENDING";
	default: return "CREATING";
	}
}

static cJSON *cube_job_json_locked(const struct template *t)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "jobID", t->build_id);
	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddStringToObject(o, "status", t->status == T_READY ? "READY" : "PENDING");
	cJSON_AddStringToObject(o, "phase", t->status == T_READY ? "READY" : "PULLING");
	cJSON_AddNumberToObject(o, "progress", t->status == T_READY ? 100 : 0);
	return o;
}

static cJSON *cube_template_json_locked(const struct template *t, int detail)
{
	cJSON *o = cJSON_CreateObject(), *aliases = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "templateID", t->id);
	cJSON_AddBoolToObject(o, "public", 1);
	cJSON_AddStringToObject(o, "status", cube_tpl_status(t));
	if (t->alias)
		cJSON_AddItemToArray(aliases, cJSON_CreateString(t->alias));
	cJSON_AddItemToObject(o, "aliases", aliases);
	add_time(o, "createdAt", t->created_ms);
	if (t->build_id[0])
		cJSON_AddStringToObject(o, "jobID", t->build_id);
	if (detail) {
		cJSON_AddItemToObject(o, "replicas", cJSON_CreateArray());
		cJSON_AddItemToObject(o, "createRequest",
				      t->create_request ? cJSON_Duplicate(t->create_request, 1) : cJSON_CreateNull());
	}
	return o;
}

static void handle_cube_template_create(struct req *q, struct reply *r)
{
	cJSON *b = body_object(q, r, 0), *image, *name, *ports, *e;
	char alias[80] = "", tid[64];
	struct template *t;
	int custom = 0;
	int64_t v;
	int present;

	if (!b)
		return;
	image = cJSON_GetObjectItemCaseSensitive(b, "image");
	if (!image || cJSON_IsNull(image)) {
		reply_missing_field(r, "image");
		goto out;
	}
	if (!cJSON_IsString(image)) {
		reply_bad_field(r, "image", "a string");
		goto out;
	}
	if (!*image->valuestring) {
		reply_error(r, 400, "image must not be empty");
		goto out;
	}
	ports = cJSON_GetObjectItemCaseSensitive(b, "exposedPorts");
	if (ports && !cJSON_IsNull(ports)) {
		if (!cJSON_IsArray(ports)) {
			reply_bad_field(r, "exposedPorts", "a sequence");
			goto out;
		}
		cJSON_ArrayForEach(e, ports) {
			if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 65535) {
				reply_bad_field(r, "exposedPorts", "a sequence of u16");
				goto out;
			}
			if ((int)e->valuedouble != ENVD_PORT)
				custom++;
		}
		if (custom > 3) {
			reply_error(r, 400, "at most 3 exposed ports besides %d are allowed", ENVD_PORT);
			goto out;
		}
	}
	name = cJSON_GetObjectItemCaseSensitive(b, "name");
	if (!cJSON_IsString(name) || !*name->valuestring)
		name = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (cJSON_IsString(name)) {
		const char *c = strchr(name->valuestring, ':');

		snprintf(alias, sizeof(alias), "%.*s", c ? (int)(c - name->valuestring) : 79, name->valuestring);
		if (!valid_cube_alias(alias))
			alias[0] = '\0'; /* dropped silently [CUBE §4.2] */
	}
	pthread_mutex_lock(&g.lock);
	new_template_id(tid, sizeof(tid));
	t = add_template(tid, alias[0] ? alias : NULL);
	if (alias[0]) {
		/* A stable alias moves to the newest template. */
		for (struct template *x = t->next; x; x = x->next)
			if (x->alias && strcmp(x->alias, alias) == 0) {
				free(x->alias);
				x->alias = NULL;
			}
	}
	if (int_field(b, "cpu", &v, &present, r) == 0 && present)
		t->cpu = (int)(v / 1000 > 0 ? v / 1000 : 1);
	if (int_field(b, "memory", &v, &present, r) == 0 && present)
		t->mem_mb = (int)v;
	t->create_request = cJSON_Duplicate(b, 1);
	cJSON_DeleteItemFromObjectCaseSensitive(t->create_request, "registryPassword");
	start_build_locked(t, 1);
	reply_json(r, 202, cube_job_json_locked(t));
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

static void handle_cube_rebuild(struct req *q, struct reply *r, const char *tid, int need_body)
{
	struct template *t;

	if (need_body) {
		cJSON *b = body_object(q, r, 0);

		if (!b)
			return;
		cJSON_Delete(b);
	}
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || t->is_snapshot) {
		reply_error(r, 404, "template %s not found", tid);
	} else {
		start_build_locked(t, 1);
		reply_json(r, 202, cube_job_json_locked(t));
	}
	pthread_mutex_unlock(&g.lock);
}

static void handle_cube_build_status(struct reply *r, const char *tid, const char *job, int logs)
{
	struct template *t;
	cJSON *o;
	int progress;
	const char *status, *msg;

	if (!valid_path_id(tid) || !valid_path_id(job)) {
		reply_error(r, 400, "invalid path parameter");
		return;
	}
	pthread_mutex_lock(&g.lock);
	t = find_template_by_build_locked(job);
	if (!t) {
		pthread_mutex_unlock(&g.lock);
		reply_error(r, 500, "CubeMaster returned error code 130500: job %s not found", job);
		return;
	}
	if (!logs)
		advance_build_locked(t);
	progress = g.build_steps ? 100 * (g.build_steps - t->steps_left) / g.build_steps : 100;
	if (t->status == T_READY)
		progress = 100;
	status = t->status == T_READY ? "ready" : t->status == T_ERROR ? "error" : "building";
	msg = t->status == T_READY ? "READY" : cube_phases[(progress * 7) / 100];
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "buildID", job);
	if (!logs)
		cJSON_AddStringToObject(o, "templateID", tid); /* echoed, not checked [CUBE §4.2] */
	cJSON_AddStringToObject(o, "status", status);
	cJSON_AddNumberToObject(o, "progress", progress);
	if (logs) {
		char line[128];
		cJSON *lines = cJSON_AddArrayToObject(o, "lines");

		snprintf(line, sizeof(line), "[%s] %s", status, msg);
		cJSON_AddItemToArray(lines, cJSON_CreateString(line));
	} else {
		cJSON_AddStringToObject(o, "message", msg);
	}
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, o);
}

static void handle_cube_template_get(struct reply *r, const char *tid)
{
	struct template *t;

	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t || t->is_snapshot)
		reply_error(r, 404, "template %s not found", tid);
	else
		reply_json(r, 200, cube_template_json_locked(t, 1));
	pthread_mutex_unlock(&g.lock);
}

static void handle_cube_templates_list(struct reply *r)
{
	cJSON *out = cJSON_CreateArray();

	pthread_mutex_lock(&g.lock);
	for (struct template *t = g.templates; t; t = t->next)
		if (!t->deleted && !t->is_snapshot)
			cJSON_AddItemToArray(out, cube_template_json_locked(t, 0));
	pthread_mutex_unlock(&g.lock);
	reply_json(r, 200, out);
}

static void handle_cube_set_alias(struct req *q, struct reply *r, const char *tid)
{
	cJSON *b = body_object(q, r, 0), *a;
	struct template *t;

	if (!b)
		return;
	a = cJSON_GetObjectItemCaseSensitive(b, "alias");
	if (a && !cJSON_IsNull(a) && !cJSON_IsString(a)) {
		reply_bad_field(r, "alias", "a string or null");
		goto out;
	}
	if (cJSON_IsString(a) && *a->valuestring && !valid_cube_alias(a->valuestring)) {
		reply_error(r, 400, "invalid alias %s", a->valuestring);
		goto out;
	}
	pthread_mutex_lock(&g.lock);
	t = resolve_template_locked(tid);
	if (!t) {
		reply_error(r, 404, "template %s not found", tid);
	} else if (t->is_snapshot) {
		reply_error(r, 400, "cannot alias a snapshot");
	} else if (t->status != T_READY) {
		reply_error(r, 409, "template %s is not READY", tid);
	} else {
		free(t->alias);
		t->alias = cJSON_IsString(a) && *a->valuestring ? strdup(a->valuestring) : NULL;
		reply_json(r, 200, cube_template_json_locked(t, 1));
	}
	pthread_mutex_unlock(&g.lock);
out:
	cJSON_Delete(b);
}

/* ------------------------------------------------------------ test hooks */

static void handle_fake(struct req *q, struct reply *r)
{
	if (strcmp(q->url, "/_fake/faults") == 0 && strcmp(q->method, "POST") == 0) {
		cJSON *b = cJSON_ParseWithLength(q->body ? q->body : "", q->len), *x;
		struct fault *f;

		if (!cJSON_IsObject(b)) {
			cJSON_Delete(b);
			reply_error(r, 400, "fault must be a JSON object");
			return;
		}
		f = calloc(1, sizeof(*f));
		x = cJSON_GetObjectItemCaseSensitive(b, "route");
		snprintf(f->route, sizeof(f->route), "%s", cJSON_IsString(x) ? x->valuestring : "any");
		x = cJSON_GetObjectItemCaseSensitive(b, "status");
		f->status = cJSON_IsNumber(x) ? x->valueint : 0;
		x = cJSON_GetObjectItemCaseSensitive(b, "count");
		f->count = cJSON_IsNumber(x) && x->valueint > 0 ? x->valueint : 1;
		x = cJSON_GetObjectItemCaseSensitive(b, "retry_after");
		f->retry_after = cJSON_IsNumber(x) ? x->valueint : -1;
		x = cJSON_GetObjectItemCaseSensitive(b, "delay_ms");
		f->delay_ms = cJSON_IsNumber(x) ? x->valueint : 0;
		f->drop = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "drop"));
		f->repeat_token = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "repeat_token"));
		f->make_public = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "public"));
		x = cJSON_GetObjectItemCaseSensitive(b, "fork_errors");
		f->fork_errors = cJSON_IsNumber(x) && x->valueint > 0 ? x->valueint : 0;
		cJSON_Delete(b);
		pthread_mutex_lock(&g.lock);
		{
			struct fault **pp = &g.faults;

			while (*pp)
				pp = &(*pp)->next;
			*pp = f;
		}
		pthread_mutex_unlock(&g.lock);
		reply_empty(r, 204);
	} else if (strcmp(q->url, "/_fake/faults") == 0 && strcmp(q->method, "DELETE") == 0) {
		pthread_mutex_lock(&g.lock);
		clear_faults_locked();
		pthread_mutex_unlock(&g.lock);
		reply_empty(r, 204);
	} else if (strcmp(q->url, "/_fake/sandboxes") == 0 && strcmp(q->method, "GET") == 0) {
		cJSON *a = cJSON_CreateArray();

		pthread_mutex_lock(&g.lock);
		for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
			cJSON *o;
			int64_t end;

			if (sb->state == SB_DEAD)
				continue;
			o = cJSON_CreateObject();
			end = expires_wall_ms(sb);
			cJSON_AddStringToObject(o, "id", sb->id);
			cJSON_AddStringToObject(o, "state", sb->state == SB_PAUSED ? "paused" : "running");
			cJSON_AddNumberToObject(o, "envd_pid", sb->envd_pid);
			cJSON_AddNumberToObject(o, "envd_port", sb->envd_port);
			if (sb->envd_token[0])
				cJSON_AddStringToObject(o, "token", sb->envd_token);
			else
				cJSON_AddNullToObject(o, "token");
			if (sb->traffic_token[0])
				cJSON_AddStringToObject(o, "traffic_token", sb->traffic_token);
			else
				cJSON_AddNullToObject(o, "traffic_token");
			if (end == NEVER)
				cJSON_AddNullToObject(o, "expires_at");
			else
				cJSON_AddNumberToObject(o, "expires_at", (double)end / 1000.0);
			cJSON_AddBoolToObject(o, "public", sb->public_traffic);
			cJSON_AddStringToObject(o, "template_id", sb->template_id);
			cJSON_AddItemToArray(a, o);
		}
		pthread_mutex_unlock(&g.lock);
		reply_json(r, 200, a);
	} else {
		reply_text(r, 404, "404 page not found");
	}
}

/* ----------------------------------------------------------------- routing */

static int seg_is(const struct req *q, int i, const char *s)
{
	return i < q->nseg && strcmp(q->segs[i], s) == 0;
}

static int is_method(const struct req *q, const char *m)
{
	return strcmp(q->method, m) == 0;
}

/* The route name faults match on. */
static void classify(struct req *q)
{
	const char *n = "other";
	int v2 = seg_is(q, 0, "v2");
	int b = v2 ? 1 : 0;

	if (seg_is(q, 0, "health") && q->nseg == 1)
		n = "health";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 1)
		n = is_method(q, "POST") ? "create" : "list";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 2)
		n = is_method(q, "DELETE") ? "kill" : "get";
	else if (seg_is(q, b, "sandboxes") && q->nseg == b + 3) {
		const char *a = q->segs[b + 2];

		if (!strcmp(a, "connect") || !strcmp(a, "pause") || !strcmp(a, "resume") ||
		    !strcmp(a, "timeout") || !strcmp(a, "fork"))
			n = a;
		else if (!strcmp(a, "refreshes"))
			n = "refresh";
		else if (!strcmp(a, "snapshots"))
			n = "snapshot";
	} else if (seg_is(q, 0, "snapshots"))
		n = "snapshots";
	else if (seg_is(q, b, "templates") || seg_is(q, 0, "v3"))
		n = "template";
	snprintf(q->route, sizeof(q->route), "%s", n);
}

/* Auth; 0 to go on, else the reply is set. */
static int check_auth(struct req *q, struct reply *r)
{
	const char *key = hdr(q, "X-API-Key");

	if (is_cube()) {
		const char *auth = hdr(q, "Authorization");
		char cred[512] = "";

		if (!g.api_key)
			return 0;
		if (auth && strncmp(auth, "Bearer ", 7) == 0) {
			const char *s = auth + 7;
			size_t n;

			while (*s == ' ' || *s == '\t')
				s++;
			n = strlen(s);
			while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
				n--;
			if (n >= sizeof(cred))
				n = sizeof(cred) - 1;
			memcpy(cred, s, n);
			cred[n] = '\0';
		}
		if (!cred[0] && key)
			snprintf(cred, sizeof(cred), "%s", key);
		if (!cred[0]) {
			reply_error(r, 401,
				    "Missing authentication: provide 'Authorization: Bearer <token>' or 'X-API-Key: <key>'");
			return -1;
		}
		if (strcmp(cred, g.api_key) != 0) {
			reply_error(r, 401, "Invalid API key or token");
			return -1;
		}
		return 0;
	}
	if (!key || !*key) {
		reply_error(r, 401, "Missing X-API-Key header");
		return -1;
	}
	if (g.api_key && strcmp(key, g.api_key) != 0) {
		reply_error(r, 401, "Invalid API key");
		return -1;
	}
	return 0;
}

static void route_e2b(struct req *q, struct reply *r)
{
	int n = q->nseg;
	const char *m = q->method;

	if (n == 1 && seg_is(q, 0, "health")) {
		if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
			reply_empty(r, 204);
		else
			reply_no_route(r);
		return;
	}
	if (check_auth(q, r) < 0)
		return;
	if (seg_is(q, 0, "sandboxes")) {
		if (n == 1 && !strcmp(m, "POST"))
			return handle_create(q, r, 0);
		if (n == 1 && !strcmp(m, "GET"))
			return handle_list(q, r, 0);
		if (n == 2 && seg_is(q, 1, "metrics") && !strcmp(m, "GET"))
			return handle_metrics_many(q, r);
		if (n == 2 && !strcmp(m, "GET"))
			return handle_get(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_kill(r, q->segs[1]);
		if (n == 3) {
			const char *id = q->segs[1], *a = q->segs[2];

			if (!strcmp(m, "POST")) {
				if (!strcmp(a, "connect"))
					return handle_connect(q, r, id, 0);
				if (!strcmp(a, "resume"))
					return handle_connect(q, r, id, 1);
				if (!strcmp(a, "pause"))
					return handle_pause(q, r, id);
				if (!strcmp(a, "timeout"))
					return handle_timeout(q, r, id);
				if (!strcmp(a, "refreshes"))
					return handle_refresh(q, r, id);
				if (!strcmp(a, "snapshots"))
					return handle_snapshot(q, r, id);
				if (!strcmp(a, "fork") && g.flavour == FL_CLOUD)
					return handle_fork(q, r, id);
			}
			if (!strcmp(m, "PUT") && !strcmp(a, "network"))
				return handle_network(q, r, id);
			if (!strcmp(m, "GET") && !strcmp(a, "metrics"))
				return handle_metrics(r, id);
			if (!strcmp(m, "GET") && !strcmp(a, "logs"))
				return handle_logs(r, id, 0);
		}
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes")) {
		if (n == 2 && !strcmp(m, "POST"))
			return handle_create(q, r, 1);
		if (n == 2 && !strcmp(m, "GET"))
			return handle_list(q, r, 1);
		if (n == 4 && seg_is(q, 3, "connect") && !strcmp(m, "POST"))
			return handle_connect(q, r, q->segs[2], 0);
		if (n == 4 && seg_is(q, 3, "logs") && !strcmp(m, "GET"))
			return handle_logs(r, q->segs[2], 1);
	} else if (n == 1 && seg_is(q, 0, "snapshots") && !strcmp(m, "GET")) {
		return handle_list_snapshots(q, r);
	} else if (n == 2 && seg_is(q, 0, "v3") && seg_is(q, 1, "templates") && !strcmp(m, "POST")) {
		return handle_v3_template(q, r);
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "templates")) {
		if (n == 2 && !strcmp(m, "GET"))
			return handle_e2b_templates_list(q, r);
		if (n == 5 && seg_is(q, 3, "builds") && !strcmp(m, "POST"))
			return handle_build_start(q, r, q->segs[2], q->segs[4]);
	} else if (seg_is(q, 0, "templates")) {
		if (n == 1 && !strcmp(m, "GET"))
			return handle_e2b_templates_list(q, r);
		if (n == 3 && seg_is(q, 1, "aliases") && !strcmp(m, "GET"))
			return handle_alias(r, q->segs[2]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_template_delete(q, r, q->segs[1]);
		if (n == 4 && seg_is(q, 2, "files") && !strcmp(m, "GET")) {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddBoolToObject(o, "present", 1);
			return reply_json(r, 201, o);
		}
		if (n == 5 && seg_is(q, 2, "builds") && seg_is(q, 4, "status") && !strcmp(m, "GET"))
			return handle_build_status(q, r, q->segs[1], q->segs[3]);
		if (n == 5 && seg_is(q, 2, "builds") && seg_is(q, 4, "logs") && !strcmp(m, "GET"))
			return handle_build_logs(r, q->segs[1], q->segs[3]);
	}
	reply_no_route(r);
}

/*
 * Cube: axum answers unknown paths 404 before auth, and a known path with the
 * wrong method 405 after auth [CUBE §2, §3].
 */
static void route_cube(struct req *q, struct reply *r)
{
	int n = q->nseg;
	const char *m = q->method, *allow = NULL;
	int get = !strcmp(m, "GET") || !strcmp(m, "HEAD"), post = !strcmp(m, "POST");

	if (n == 1 && seg_is(q, 0, "health")) {
		if (get) {
			cJSON *o = cJSON_CreateObject();
			int live = 0;

			pthread_mutex_lock(&g.lock);
			for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next)
				live += sb->state != SB_DEAD;
			pthread_mutex_unlock(&g.lock);
			cJSON_AddStringToObject(o, "status", "ok");
			cJSON_AddNumberToObject(o, "sandboxes", live);
			reply_json(r, 200, o);
		} else {
			reply_405(r, "GET,HEAD");
		}
		return;
	}
	/* Find the route and its allowed methods first. */
	if (seg_is(q, 0, "sandboxes") && n == 1)
		allow = "GET,HEAD,POST";
	else if (seg_is(q, 0, "sandboxes") && n == 2)
		allow = "GET,HEAD,DELETE";
	else if (seg_is(q, 0, "sandboxes") && n == 3) {
		const char *a = q->segs[2];

		if (!strcmp(a, "logs"))
			allow = "GET,HEAD";
		else if (!strcmp(a, "pause") || !strcmp(a, "resume") || !strcmp(a, "connect") ||
			 !strcmp(a, "timeout") || !strcmp(a, "refreshes") || !strcmp(a, "snapshots") ||
			 !strcmp(a, "rollback"))
			allow = "POST";
	} else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes") && n == 2)
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "v2") && seg_is(q, 1, "sandboxes") && n == 4 && seg_is(q, 3, "logs"))
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "snapshots") && n == 1)
		allow = "GET,HEAD";
	else if (seg_is(q, 0, "templates")) {
		if (n == 1)
			allow = "GET,HEAD,POST";
		else if (n == 2 && seg_is(q, 1, "compat"))
			allow = "GET,HEAD";
		else if (n == 2)
			allow = "GET,HEAD,POST,DELETE,PATCH";
		else if (n == 3 && seg_is(q, 1, "aliases"))
			allow = "GET,HEAD";
		else if (n == 3 && seg_is(q, 2, "alias"))
			allow = "PUT";
		else if (n == 4 && seg_is(q, 2, "builds"))
			allow = "POST";
		else if (n == 5 && seg_is(q, 2, "builds") && (seg_is(q, 4, "status") || seg_is(q, 4, "logs")))
			allow = "GET,HEAD";
	}
	if (!allow) {
		reply_empty(r, 404);
		return;
	}
	if (check_auth(q, r) < 0)
		return;
	if (seg_is(q, 0, "sandboxes")) {
		if (n == 1 && post)
			return handle_create(q, r, 0);
		if (n == 1 && get)
			return handle_list(q, r, 0);
		if (n == 2 && get)
			return handle_get(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_kill(r, q->segs[1]);
		if (n == 3 && get && seg_is(q, 2, "logs"))
			return handle_logs(r, q->segs[1], 0);
		if (n == 3 && post) {
			const char *id = q->segs[1], *a = q->segs[2];

			if (!strcmp(a, "connect"))
				return handle_connect(q, r, id, 0);
			if (!strcmp(a, "resume"))
				return handle_connect(q, r, id, 1);
			if (!strcmp(a, "pause"))
				return handle_pause(q, r, id);
			if (!strcmp(a, "timeout"))
				return handle_timeout(q, r, id);
			if (!strcmp(a, "refreshes"))
				return handle_refresh(q, r, id);
			if (!strcmp(a, "snapshots")) {
				if (!valid_path_id(id))
					return reply_error(r, 400, "invalid path parameter sandboxID");
				return handle_snapshot(q, r, id);
			}
			if (!strcmp(a, "rollback")) {
				if (!valid_path_id(id))
					return reply_error(r, 400, "invalid path parameter sandboxID");
				return handle_rollback(q, r, id);
			}
		}
	} else if (seg_is(q, 0, "v2")) {
		if (n == 2 && get)
			return handle_list(q, r, 1);
		if (n == 4 && get)
			return handle_logs(r, q->segs[2], 1);
	} else if (seg_is(q, 0, "snapshots") && get) {
		return handle_list_snapshots(q, r);
	} else if (seg_is(q, 0, "templates")) {
		if (n == 1 && get)
			return handle_cube_templates_list(r);
		if (n == 1 && post)
			return handle_cube_template_create(q, r);
		if (n == 2 && seg_is(q, 1, "compat") && get)
			return reply_json(r, 200, cJSON_CreateArray());
		if (n == 2 && get)
			return handle_cube_template_get(r, q->segs[1]);
		if (n == 2 && post)
			return handle_cube_rebuild(q, r, q->segs[1], 1);
		if (n == 2 && !strcmp(m, "DELETE"))
			return handle_template_delete(q, r, q->segs[1]);
		if (n == 2 && !strcmp(m, "PATCH"))
			return reply_error(r, 501, "updating a template is not implemented");
		if (n == 3 && seg_is(q, 1, "aliases") && get) {
			if (!valid_path_id(q->segs[2]))
				return reply_error(r, 400, "invalid path parameter alias");
			return handle_alias(r, q->segs[2]);
		}
		if (n == 3 && !strcmp(m, "PUT"))
			return handle_cube_set_alias(q, r, q->segs[1]);
		if (n == 4 && post)
			return handle_cube_rebuild(q, r, q->segs[1], 0);
		if (n == 5 && get)
			return handle_cube_build_status(r, q->segs[1], q->segs[3], seg_is(q, 4, "logs"));
	}
	reply_405(r, allow);
}

static void dispatch(struct req *q, struct reply *r)
{
	if (strncmp(q->url, "/_fake/", 7) == 0)
		return handle_fake(q, r);
	if (q->too_big) {
		if (is_cube())
			reply_text(r, 413, "Failed to buffer the request body: length limit exceeded");
		else
			reply_error(r, 413, "request body too large");
		return;
	}
	if (is_cube())
		route_cube(q, r);
	else
		route_e2b(q, r);
}

/* ------------------------------------------------------- HTTP: MHD plumbing */

static void split_path(struct req *q)
{
	char *save = NULL;

	free(q->pathbuf);
	q->pathbuf = strdup(q->url);
	q->nseg = 0;
	if (!q->pathbuf)
		return;
	for (char *t = strtok_r(q->pathbuf, "/", &save); t && q->nseg < 12;
	     t = strtok_r(NULL, "/", &save))
		q->segs[q->nseg++] = t;
}

static enum MHD_Result queue_reply(struct MHD_Connection *conn, struct reply *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"",
					       r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!resp) {
		free(r->body);
		return MHD_NO;
	}
	r->body = NULL;
	if (r->ctype)
		MHD_add_response_header(resp, "Content-Type", r->ctype);
	for (int i = 0; i < r->nhdr; i++)
		MHD_add_response_header(resp, r->hdr[i][0], r->hdr[i][1]);
	ret = MHD_queue_response(conn, r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct req *q = *con_cls;
	struct reply r = { 0 };
	struct fault f;

	(void)cls;
	(void)version;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		q->conn = conn;
		q->method = method;
		q->url = strdup(url);
		*con_cls = q;
		if (!q->url)
			return MHD_NO;
		split_path(q);
		classify(q);
		if (strncmp(url, "/_fake/", 7) != 0) {
			struct fault *peek = NULL;

			/* A dropping fault closes before anything is answered. */
			pthread_mutex_lock(&g.lock);
			for (struct fault *x = g.faults; x; x = x->next)
				if (!strcmp(x->route, "any") || !strcmp(x->route, q->route)) {
					peek = x;
					break;
				}
			if (peek && peek->drop) {
				int delay = peek->delay_ms;

				pthread_mutex_unlock(&g.lock);
				if (take_fault(q->route, &f)) {
					vlog("%s %s: fault: dropping the connection", method, url);
					if (delay > 0)
						wait_ms(delay);
					return MHD_NO;
				}
			} else {
				pthread_mutex_unlock(&g.lock);
			}
		}
		return MHD_YES;
	}
	if (*upload_size) {
		if (!q->too_big) {
			if (q->len + *upload_size > MAX_BODY) {
				q->too_big = 1;
			} else {
				if (q->len + *upload_size + 1 > q->cap) {
					size_t cap = (q->len + *upload_size + 1) * 2;
					char *b = realloc(q->body, cap);

					if (!b)
						return MHD_NO;
					q->body = b;
					q->cap = cap;
				}
				memcpy(q->body + q->len, upload, *upload_size);
				q->len += *upload_size;
				q->body[q->len] = '\0';
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (strncmp(url, "/_fake/", 7) != 0 && take_fault(q->route, &f)) {
		if (f.delay_ms > 0)
			wait_ms(f.delay_ms);
		if (f.drop)
			return MHD_NO;
		if (f.status > 0) {
			char ra[16];

			vlog("%s %s: fault: %d", method, url, f.status);
			reply_error(&r, (unsigned)f.status, "injected fault (%s)", q->route);
			if (f.retry_after >= 0) {
				snprintf(ra, sizeof(ra), "%d", f.retry_after);
				reply_header(&r, "Retry-After", ra);
			}
			return queue_reply(conn, &r);
		}
		q->repeat_token = f.repeat_token;
		q->make_public = f.make_public;
		q->fork_errors = f.fork_errors;
	}
	dispatch(q, &r);
	vlog("%s %s → %u", method, url, r.status);
	return queue_reply(conn, &r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *q = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (!q)
		return;
	free(q->url);
	free(q->pathbuf);
	free(q->body);
	free(q);
	*con_cls = NULL;
}

/* -------------------------------------------------------------------- edge */

struct edge_head {
	char method[16];
	char path[2048];
	char host[256];
	char sbx_id[80];
	char sbx_port[16];
	char access_token[256];
	char traffic_token[256];
	int has_access_token;
};

static void edge_reply(int fd, int status, const char *reason, const char *body)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 status, reason, strlen(body));

	if (write_all(fd, head, (size_t)n) == 0)
		write_all(fd, body, strlen(body));
}

static void edge_json(int fd, int status, const char *reason, cJSON *o)
{
	char *s = cJSON_PrintUnformatted(o);

	cJSON_Delete(o);
	edge_reply(fd, status, reason, s ? s : "{}");
	free(s);
}

static void edge_simple(int fd, int status, const char *reason, const char *err)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "error", err);
	edge_json(fd, status, reason, o);
}

static void copy_value(char *dst, size_t n, const char *v, size_t len)
{
	while (len > 0 && (*v == ' ' || *v == '\t'))
		v++, len--;
	while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
		len--;
	if (len >= n)
		len = n - 1;
	memcpy(dst, v, len);
	dst[len] = '\0';
}

/* Parses the head; builds the upstream head into *up (with Connection: close). */
static int parse_edge_head(const char *buf, size_t head_len, struct edge_head *h, char **up, size_t *up_len)
{
	const char *p = buf, *end = buf + head_len, *eol;
	char version[16];
	size_t cap = head_len + 64, n = 0;
	char *out = malloc(cap);

	memset(h, 0, sizeof(*h));
	if (!out)
		return -1;
	eol = memmem(p, (size_t)(end - p), "\r\n", 2);
	if (!eol || sscanf(p, "%15s %2047s %15s", h->method, h->path, version) != 3) {
		free(out);
		return -1;
	}
	memcpy(out, p, (size_t)(eol - p) + 2);
	n = (size_t)(eol - p) + 2;
	for (p = eol + 2; p < end; p = eol + 2) {
		const char *colon;
		size_t nlen, llen;

		eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (!eol || eol == p)
			break;
		llen = (size_t)(eol - p);
		colon = memchr(p, ':', llen);
		if (!colon)
			continue;
		nlen = (size_t)(colon - p);
#define IS(name) (nlen == strlen(name) && strncasecmp(p, name, nlen) == 0)
		if (IS("Connection") || IS("Keep-Alive") || IS("Proxy-Connection"))
			continue;
		if (IS("Host"))
			copy_value(h->host, sizeof(h->host), colon + 1, (size_t)(eol - colon - 1));
		else if (IS("E2b-Sandbox-Id"))
			copy_value(h->sbx_id, sizeof(h->sbx_id), colon + 1, (size_t)(eol - colon - 1));
		else if (IS("E2b-Sandbox-Port"))
			copy_value(h->sbx_port, sizeof(h->sbx_port), colon + 1, (size_t)(eol - colon - 1));
		else if (IS("X-Access-Token")) {
			copy_value(h->access_token, sizeof(h->access_token), colon + 1, (size_t)(eol - colon - 1));
			h->has_access_token = 1;
		} else if (IS("e2b-traffic-access-token") ||
			   (IS("cube-traffic-access-token") && !h->traffic_token[0]))
			copy_value(h->traffic_token, sizeof(h->traffic_token), colon + 1, (size_t)(eol - colon - 1));
#undef IS
		memcpy(out + n, p, llen + 2);
		n += llen + 2;
	}
	memcpy(out + n, "Connection: close\r\n\r\n", 21);
	n += 21;
	*up = out;
	*up_len = n;
	return 0;
}

static int host_is_ip_or_local(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	char h[256];

	snprintf(h, sizeof(h), "%s", host);
	if (h[0] == '[') {
		char *e = strchr(h, ']');

		if (e)
			*e = '\0';
		return inet_pton(AF_INET6, h + 1, &a6) == 1;
	}
	{
		char *c = strchr(h, ':');

		if (c)
			*c = '\0';
	}
	return strcasecmp(h, "localhost") == 0 || inet_pton(AF_INET, h, &a4) == 1 ||
	       (!is_cube() && strncasecmp(h, "sandbox.", 8) == 0);
}

/* envd routes that need no X-Access-Token (envd's own exemptions). */
static int envd_auth_exempt(const char *method, const char *path)
{
	char p[2048];
	char *qm;

	snprintf(p, sizeof(p), "%s", path);
	qm = strchr(p, '?');
	if (qm)
		*qm = '\0';
	if (!strcmp(method, "OPTIONS"))
		return 1;
	if (!strcmp(method, "GET") || !strcmp(method, "HEAD"))
		return !strcmp(p, "/health") || !strcmp(p, "/files");
	if (!strcmp(method, "POST"))
		return !strcmp(p, "/files") || !strcmp(p, "/init");
	return 0;
}

static int connect_local(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Bytes both ways, unbuffered, until either side closes. */
static void splice_fds(int cfd, int ufd)
{
	char buf[65536];
	struct pollfd p[2] = { { .fd = cfd, .events = POLLIN }, { .fd = ufd, .events = POLLIN } };

	for (;;) {
		int pr = poll(p, 2, -1);

		if (pr < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(p[i].fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return;
			if (write_all(p[1 - i].fd, buf, (size_t)n) < 0)
				return;
		}
	}
}

static void *edge_conn(void *arg)
{
	int cfd = (int)(intptr_t)arg, ufd = -1, port = 0, envd_port = 0;
	char *buf = malloc(EDGE_HEAD_MAX + 1), *up = NULL, *hend = NULL, id[80] = "";
	size_t n = 0, up_len = 0, head_len;
	struct edge_head h;
	struct sandbox *sb;
	int64_t deadline = mono_ms() + 60000;

	if (!buf)
		goto out;
	while (!hend) {
		struct pollfd pfd = { .fd = cfd, .events = POLLIN };
		int64_t left = deadline - mono_ms();
		ssize_t r;

		if (n >= EDGE_HEAD_MAX) {
			edge_simple(cfd, 431, "Request Header Fields Too Large", "request head too large");
			goto out;
		}
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			goto out;
		r = read(cfd, buf + n, EDGE_HEAD_MAX - n);
		if (r <= 0)
			goto out;
		n += (size_t)r;
		buf[n] = '\0';
		hend = memmem(buf, n, "\r\n\r\n", 4);
	}
	head_len = (size_t)(hend - buf) + 4;
	if (parse_edge_head(buf, head_len - 2, &h, &up, &up_len) < 0) {
		edge_simple(cfd, 400, "Bad Request", "bad request");
		goto out;
	}
	/* Routing [API §6, CUBE §5]. */
	if (host_is_ip_or_local(h.host) && h.sbx_id[0]) {
		snprintf(id, sizeof(id), "%s", h.sbx_id);
		port = atoi(h.sbx_port[0] ? h.sbx_port : "0");
	} else {
		char label[256], *dash, *dot;

		snprintf(label, sizeof(label), "%s", h.host);
		dot = strchr(label, '.');
		if (dot)
			*dot = '\0';
		dot = strchr(label, ':');
		if (dot)
			*dot = '\0';
		dash = strchr(label, '-');
		if (!dash || dash == label || !dash[1]) {
			if (is_cube())
				edge_simple(cfd, 400, "Bad Request", "bad request");
			else
				edge_simple(cfd, 400, "Bad Request", "invalid host");
			goto out;
		}
		*dash = '\0';
		for (char *c = label; *c; c++)
			if (!isdigit((unsigned char)*c)) {
				edge_simple(cfd, 400, "Bad Request", is_cube() ? "bad request" : "invalid host");
				goto out;
			}
		port = atoi(label);
		snprintf(id, sizeof(id), "%s", dash + 1);
	}
	pthread_mutex_lock(&g.lock);
	sb = find_sandbox_locked(id);
	if (!sb || (sb->state == SB_DEAD && !(is_cube() && sb->auto_pause))) {
		pthread_mutex_unlock(&g.lock);
		if (is_cube()) {
			edge_simple(cfd, 404, "Not Found", "not found");
		} else {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddStringToObject(o, "error", "Sandbox not found");
			cJSON_AddStringToObject(o, "sandboxId", id);
			edge_json(cfd, 502, "Bad Gateway", o);
		}
		goto out;
	}
	if (sb->state == SB_DEAD) {
		pthread_mutex_unlock(&g.lock);
		edge_simple(cfd, 410, "Gone", "gone");
		goto out;
	}
	/* Traffic token: every port on Cube, all but envd's on E2B [CUBE §5]. */
	if (!sb->public_traffic && (is_cube() || port != ENVD_PORT) &&
	    strcmp(h.traffic_token, sb->traffic_token) != 0) {
		pthread_mutex_unlock(&g.lock);
		if (is_cube()) {
			edge_simple(cfd, 403, "Forbidden", "forbidden");
		} else {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddNumberToObject(o, "code", 403);
			cJSON_AddStringToObject(o, "message", "missing or invalid traffic access token");
			cJSON_AddStringToObject(o, "sandboxId", id);
			edge_json(cfd, 403, "Forbidden", o);
		}
		goto out;
	}
	if (port != ENVD_PORT) {
		pthread_mutex_unlock(&g.lock);
		if (is_cube()) {
			edge_simple(cfd, 404, "Not Found", "not found");
		} else {
			cJSON *o = cJSON_CreateObject();

			cJSON_AddStringToObject(o, "sandboxId", id);
			cJSON_AddStringToObject(o, "message", "The sandbox is running but port is not open");
			cJSON_AddNumberToObject(o, "port", port);
			cJSON_AddNumberToObject(o, "code", 502);
			edge_json(cfd, 502, "Bad Gateway", o);
		}
		goto out;
	}
	if (!is_cube() && sb->envd_token[0] && !envd_auth_exempt(h.method, h.path) &&
	    (!h.has_access_token || strcmp(h.access_token, sb->envd_token) != 0)) {
		cJSON *o = cJSON_CreateObject();

		pthread_mutex_unlock(&g.lock);
		cJSON_AddNumberToObject(o, "code", 401);
		cJSON_AddStringToObject(o, "message", ENVD_AUTH_FAILED);
		edge_json(cfd, 401, "Unauthorized", o);
		goto out;
	}
	if (sb->state == SB_PAUSED) {
		int auto_resume = is_cube() && sb->auto_resume;

		pthread_mutex_unlock(&g.lock);
		if (!auto_resume) {
			cJSON *o = cJSON_CreateObject();

			if (is_cube()) {
				cJSON_AddStringToObject(o, "error", "bad gateway");
			} else {
				cJSON_AddStringToObject(o, "error", "Sandbox is paused");
				cJSON_AddStringToObject(o, "sandboxId", id);
			}
			edge_json(cfd, 502, "Bad Gateway", o);
			goto out;
		}
		pthread_mutex_lock(&sb->op);
		if (sb->state == SB_PAUSED && sb_resume(sb) < 0) {
			pthread_mutex_unlock(&sb->op);
			edge_simple(cfd, 503, "Service Unavailable", "resume failed");
			goto out;
		}
		pthread_mutex_unlock(&sb->op);
		pthread_mutex_lock(&g.lock);
		if (sb->state != SB_RUNNING) {
			pthread_mutex_unlock(&g.lock);
			edge_simple(cfd, 410, "Gone", "gone");
			goto out;
		}
	}
	envd_port = sb->envd_port;
	if (is_cube() && sb->timeout_s >= 0)
		set_expiry_locked(sb, expiry_after(sb->timeout_s)); /* idle window [CUBE §4.1] */
	pthread_mutex_unlock(&g.lock);

	ufd = connect_local(envd_port);
	if (ufd < 0) {
		edge_simple(cfd, 502, "Bad Gateway", "upstream unreachable");
		goto out;
	}
	vlog("edge: %s %s → sandbox %s (envd :%d)", h.method, h.path, id, envd_port);
	if (write_all(ufd, up, up_len) < 0 || (n > head_len && write_all(ufd, buf + head_len, n - head_len) < 0))
		goto out;
	free(buf);
	buf = NULL;
	splice_fds(cfd, ufd);
out:
	free(buf);
	free(up);
	if (ufd >= 0)
		close(ufd);
	close(cfd);
	return NULL;
}

static void *edge_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_t t;
		pthread_attr_t a;
		int one = 1, cfd = accept4(g.edge_fd, NULL, NULL, SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE)
				continue;
			break;
		}
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&a, 256 * 1024);
		if (pthread_create(&t, &a, edge_conn, (void *)(intptr_t)cfd) != 0)
			close(cfd);
		pthread_attr_destroy(&a);
	}
	return NULL;
}

/* -------------------------------------------------------------------- main */

static const char usage_text[] =
	"NAME\n"
	"    fake-e2b - fake E2B and CubeSandbox control planes backed by hangar-envd\n"
	"\n"
	"SYNOPSIS\n"
	"    fake-e2b --flavour cloud|selfhosted|cube --envd PATH [--port N] [--edge-port N]\n"
	"             [--ready-fd FD] [--api-key KEY] [--domain D] [--state-dir DIR]\n"
	"             [--build-steps N] [--page-size N] [--sandbox-user NAME] [--v]\n"
	"\n"
	"DESCRIPTION\n"
	"    Serves a control API on 127.0.0.1:--port and an edge proxy on\n"
	"    127.0.0.1:--edge-port (0 = any free port). Every sandbox is a real\n"
	"    hangar-envd process reached through the edge. cloud and selfhosted speak\n"
	"    E2B's control API (selfhosted has no fork); cube speaks CubeAPI at\n"
	"    23c69d6, quirks included (405 on POST /v2/sandboxes, no envd token,\n"
	"    traffic token only from create, plain-text framework errors).\n"
	"\n"
	"OPTIONS\n"
	"    --flavour F        cloud, selfhosted or cube (required)\n"
	"    --envd PATH        the hangar-envd binary (required)\n"
	"    --port N           control API port (default 0)\n"
	"    --edge-port N      edge proxy port (default 0)\n"
	"    --ready-fd FD      write \"ready <api_port> <edge_port>\\n\" to FD once both listen\n"
	"    --api-key KEY      cloud/selfhosted: X-API-Key must equal KEY (without it any\n"
	"                       non-empty key passes); cube: enables Bearer/X-API-Key auth\n"
	"    --domain D         the domain returned in Sandbox.domain (cube default cube.app)\n"
	"    --state-dir DIR    per-sandbox working directory DIR/<id> and DIR/<id>/envd.log\n"
	"    --build-steps N    status polls before a template build is ready (default 2)\n"
	"    --page-size N      every paged answer (E2B's sandbox, snapshot and template\n"
	"                       lists; Cube's snapshots) holds at most N (1-100) entries,\n"
	"                       whatever limit the client asks for\n"
	"    --sandbox-user U   the -user given to envd (default: the user running fake-e2b)\n"
	"    --v                log requests and lifecycle events to stderr\n"
	"\n"
	"TEST HOOKS (API port)\n"
	"    POST   /_fake/faults     {\"route\",\"status\",\"count\",\"retry_after\",\"delay_ms\",\"drop\",\n"
	"                              \"repeat_token\",\"public\",\"fork_errors\"}\n"
	"                             repeat_token: a page's X-Next-Token is the request's own\n"
	"                             nextToken (fake.0 on a first page); public: the create is\n"
	"                             public, without a traffic token; fork_errors: N: the\n"
	"                             first N forks are error entries\n"
	"    DELETE /_fake/faults     clear queued faults\n"
	"    GET    /_fake/sandboxes  [{id,state,envd_pid,envd_port,token,traffic_token,\n"
	"                               expires_at,public,template_id}]\n"
	"\n"
	"EDGE\n"
	"    Host localhost/IP: routed by E2b-Sandbox-Id and E2b-Sandbox-Port; otherwise\n"
	"    by the Host's first label <port>-<sandboxID>. Only 49983 (envd) is served.\n"
	"    E2B flavours check X-Access-Token there (envd itself runs without one).\n"
	"\n"
	"    SIGTERM or SIGINT kills every sandbox and exits.\n";

static int listen_local(int port, int *bound)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 256) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		close(fd);
		return -1;
	}
	*bound = ntohs(a.sin_port);
	return fd;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static void seed_templates(void)
{
	char tid[64];
	struct template *t;

	/* "base" is the SDK's default template [API §2.2]. */
	new_template_id(tid, sizeof(tid));
	t = add_template(tid, "base");
	t->status = T_READY;
	t->is_public = 1;
	random_uuid(t->build_id);
	cJSON_AddItemToArray(t->names, cJSON_CreateString("base"));
}

int main(int argc, char **argv)
{
	const char *flavour = NULL;
	int port = 0, edge_port = 0, ready_fd = -1, api_fd, api_port = 0, edge_bound = 0, sig;
	struct MHD_Daemon *d;
	pthread_t reaper, edge, spawner;
	pthread_condattr_t ca;
	sigset_t set;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] == '-' && a[1] == '-')
			a++;
#define NEED()                                                                  \
	do {                                                                    \
		if (!v) {                                                       \
			fprintf(stderr, "fake-e2b: %s needs a value\n", argv[i]); \
			return 2;                                               \
		}                                                               \
		i++;                                                            \
	} while (0)
		if (!strcmp(a, "-flavour") || !strcmp(a, "-flavor")) {
			NEED();
			flavour = v;
		} else if (!strcmp(a, "-envd")) {
			NEED();
			g.envd_path = v;
		} else if (!strcmp(a, "-port")) {
			NEED();
			if (parse_int(v, 0, 65535, &port) < 0)
				goto bad;
		} else if (!strcmp(a, "-edge-port")) {
			NEED();
			if (parse_int(v, 0, 65535, &edge_port) < 0)
				goto bad;
		} else if (!strcmp(a, "-ready-fd")) {
			NEED();
			if (parse_int(v, 0, INT_MAX, &ready_fd) < 0)
				goto bad;
		} else if (!strcmp(a, "-api-key")) {
			NEED();
			g.api_key = v;
		} else if (!strcmp(a, "-domain")) {
			NEED();
			g.domain = v;
		} else if (!strcmp(a, "-state-dir")) {
			NEED();
			g.state_dir = v;
		} else if (!strcmp(a, "-build-steps")) {
			NEED();
			if (parse_int(v, 0, 1000, &g.build_steps) < 0)
				goto bad;
		} else if (!strcmp(a, "-page-size")) {
			int ps;

			NEED();
			if (parse_int(v, 1, 100, &ps) < 0)
				goto bad;
			g.page_size = ps;
		} else if (!strcmp(a, "-sandbox-user")) {
			NEED();
			snprintf(g.user, sizeof(g.user), "%s", v);
		} else if (!strcmp(a, "-v")) {
			g.verbose = 1;
		} else if (!strcmp(a, "-help") || !strcmp(a, "-h")) {
			fputs(usage_text, stdout);
			return 0;
		} else {
			fprintf(stderr, "fake-e2b: unknown option %s (see --help)\n", argv[i]);
			return 2;
		}
		continue;
bad:
		fprintf(stderr, "fake-e2b: invalid value for %s: %s\n", argv[i - 1], v);
		return 2;
#undef NEED
	}
	if (!flavour || !g.envd_path) {
		fputs("fake-e2b: --flavour and --envd are required (see --help)\n", stderr);
		return 2;
	}
	if (!strcmp(flavour, "cloud"))
		g.flavour = FL_CLOUD;
	else if (!strcmp(flavour, "selfhosted"))
		g.flavour = FL_SELFHOSTED;
	else if (!strcmp(flavour, "cube"))
		g.flavour = FL_CUBE;
	else {
		fprintf(stderr, "fake-e2b: unknown flavour %s\n", flavour);
		return 2;
	}
	if (access(g.envd_path, X_OK) < 0) {
		fprintf(stderr, "fake-e2b: %s is not executable\n", g.envd_path);
		return 2;
	}
	if (!g.user[0]) {
		struct passwd *pw = getpwuid(geteuid());

		snprintf(g.user, sizeof(g.user), "%s", pw ? pw->pw_name : "root");
	}
	if (g.state_dir && mkdir(g.state_dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "fake-e2b: cannot create %s: %s\n", g.state_dir, strerror(errno));
		return 1;
	}

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.cond, &ca);
	pthread_condattr_destroy(&ca);
	seed_templates();

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	api_fd = listen_local(port, &api_port);
	g.edge_fd = listen_local(edge_port, &edge_bound);
	if (api_fd < 0 || g.edge_fd < 0) {
		fprintf(stderr, "fake-e2b: cannot listen: %s\n", strerror(errno));
		return 1;
	}
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
				     MHD_USE_ERROR_LOG,
			     0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, api_fd,
			     MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024), MHD_OPTION_END);
	if (!d) {
		fputs("fake-e2b: cannot start the HTTP server\n", stderr);
		return 1;
	}
	pthread_create(&spawner, NULL, spawner_main, NULL);
	pthread_create(&reaper, NULL, reaper_main, NULL);
	pthread_create(&edge, NULL, edge_main, NULL);
	vlog("%s control API on 127.0.0.1:%d, edge on 127.0.0.1:%d", flavour, api_port, edge_bound);
	if (ready_fd >= 0) {
		char line[64];
		int len = snprintf(line, sizeof(line), "ready %d %d\n", api_port, edge_bound);

		if (write_all(ready_fd, line, (size_t)len) < 0)
			perror("fake-e2b: ready-fd");
		close(ready_fd);
	}
	do {
		if (sigwait(&set, &sig) != 0)
			break;
	} while (sig == SIGHUP);
	vlog("shutting down");

	MHD_stop_daemon(d);
	shutdown(g.edge_fd, SHUT_RDWR);
	pthread_join(edge, NULL);
	close(g.edge_fd);
	pthread_mutex_lock(&g.lock);
	g.stopping = 1;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	pthread_join(reaper, NULL);
	for (struct sandbox *sb = g.sandboxes; sb; sb = sb->next) {
		pthread_mutex_lock(&sb->op);
		if (sb->state != SB_DEAD)
			sb_kill(sb);
		pthread_mutex_unlock(&sb->op);
	}
	pthread_mutex_lock(&g.sp_lock);
	g.sp_stop = 1;
	pthread_cond_broadcast(&g.sp_cond);
	pthread_mutex_unlock(&g.sp_lock);
	pthread_join(spawner, NULL);
	while (g.sandboxes) {
		struct sandbox *sb = g.sandboxes;

		g.sandboxes = sb->next;
		free_sandbox(sb);
	}
	while (g.templates) {
		struct template *t = g.templates;

		g.templates = t->next;
		free_template(t);
	}
	clear_faults_locked();
	return 0;
}
