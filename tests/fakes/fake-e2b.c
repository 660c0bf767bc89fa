/*
 * fake-e2b: fake control planes for the e2b provider's tests.
 *
 *   fake-e2b --flavour cloud|selfhosted|cube --envd PATH [--port N] [--edge-port N]
 *            [--ready-fd FD] [--api-key KEY] [--domain D] [--state-dir DIR]
 *            [--build-steps N] [--page-size N] [--sandbox-user NAME] [--v]
 *
 * One process serves a control API (E2B's, or CubeSandbox's CubeAPI) and an
 * edge proxy (E2B's client proxy, or CubeProxy) on 127.0.0.1. Every sandbox is
 * a real hangar-envd process. Each behaviour below is what the platform does,
 * tagged with where that is seen:
 *   [E2B]          E2B's control API as its SDKs drive it
 *   [OpenAPI X]    E2B's published OpenAPI document, schema X
 *   [Cube]         CubeSandbox's CubeAPI and CubeProxy as they answer
 *   [Cube OpenAPI] CubeAPI's published OpenAPI document
 *
 * Control API, E2B flavours (cloud, selfhosted) [E2B]
 *   auth: X-API-Key on every route but /health and the /_fake/ routes; with --api-key it
 *     must match, without one any non-empty key passes. 401 {"code","message"}.
 *   GET  /health                                  204
 *   POST /v2/sandboxes, POST /sandboxes           201 Sandbox. templateID required
 *     (400); an unknown template is 400 too, the only client error [OpenAPI] lists for
 *     create. timeout defaults to 300 s on v2 [E2B] and 15 s on v1 [OpenAPI
 *     NewSandbox]. envdAccessToken (64 hex): always on v2 (NewSandboxV2 has no
 *     "secure"; SDK 2.51 does not send it) [E2B], on v1 only with
 *     "secure":true [E2B], an explicit "secure" wins; trafficAccessToken
 *     only when network.allowPublicTraffic is false, else null; domain = --domain
 *     or null (E2B sets it only for BYOC clusters) [E2B]. envdVersion 0.6.4.
 *   POST /v2/sandboxes/{id}/connect, POST /sandboxes/{id}/connect
 *     {timeout} required. 200 when running (TTL only extended); 201 when it
 *     resumed a paused sandbox, with a NEW envdAccessToken [E2B].
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
 *     next connect cold-boots a fresh envd (pauseMode "filesystem") [OpenAPI].
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
 * Control API, cube flavour (CubeAPI at 23c69d6) [Cube]
 *   auth off unless --api-key; then "Authorization: Bearer" first, X-API-Key
 *     second; missing → 401 "Missing authentication…", wrong → 401 "Invalid API
 *     key or token" [Cube]. /health and unknown paths are never authenticated;
 *     405 comes after auth.
 *   GET /health → 200 {"status":"ok","sandboxes":N} [Cube]
 *   POST /v2/sandboxes → 405, empty body, Allow: GET,HEAD [Cube]
 *   POST /v2/sandboxes/{id}/connect → 404, empty body: only …/logs exists under
 *     /v2/sandboxes/{id} [Cube]
 *   unknown path → 404 empty; wrong method → 405 empty + Allow [Cube]
 *   JSON-body routes (create, resume, connect, snapshots, rollback, timeout,
 *     refreshes, POST /templates[/{id}], PUT …/alias): no application/json →
 *     415, bad JSON → 400, missing/mistyped field → 422, all plain text [Cube]
 *   POST /sandboxes: unknown template → 500 "CubeMaster returned error code
 *     130404…" [Cube]; envVars deny-list → 400; timeout omitted = never (-1),
 *     and it is an idle window reset by proxied traffic [Cube].
 *     envdAccessToken never present; trafficAccessToken only in this response
 *     and only with allowPublicTraffic:false [Cube]; domain always present
 *     (--domain, default cube.app).
 *   POST /sandboxes/{id}/connect → 200 always (resumes a paused one); timeout
 *     ignored when running [Cube]. POST …/resume → 201, 409 running.
 *   POST …/pause → 204; 409 already paused; a body with memory:false → 400 (what
 *     open PR #1800 adds; at 23c69d6 the body is ignored) [Cube].
 *   GET /v2/sandboxes: state must be exactly running|paused, nextToken ignored, no
 *     X-Next-Token; GET /sandboxes caps at 200; endAt omitted for never-expiring
 *     sandboxes, diskSizeMB 0 [Cube].
 *   POST …/timeout {timeout ≥0 | -1}, POST …/refreshes, POST …/snapshots
 *     (snap-<24 hex>), GET /snapshots (x-next-token), POST …/rollback (restarts
 *     envd in place), DELETE …, GET …/logs (v1, v2).
 *   Templates [Cube]: POST /templates {image, name|alias, cpu, memory,
 *     exposedPorts (≤3 besides 49983), probePort, probePath, writableLayerSize,
 *     env[…]} → 202 TemplateBuildJob; GET /templates/{id}/builds/{job}/status
 *     (building → ready after --build-steps polls; {id} only echoed; unknown job
 *     → 500); POST /templates/{id}/builds/{bid} and POST /templates/{id} start a
 *     full rebuild; GET/DELETE /templates/{id}, PATCH → 501, PUT …/alias,
 *     GET /templates/aliases/{alias} (^[a-z0-9][a-z0-9-]{0,63}$, not tpl-/snap-),
 *     GET /templates. Path IDs outside [A-Za-z0-9-] → 400 [Cube].
 *   /v3/templates, /v2/templates*, fork, metrics, network → 404 [Cube].
 *
 * Test hooks (API port, never authenticated, never faulted)
 *   POST /_fake/faults {"route","status","count","retry_after","delay_ms","drop",
 *     "repeat_token","public","fork_errors","message"} queues a fault (message: the
 *     error body's text with status); route is create|
 *     connect|list|get|kill|pause|resume|timeout|refresh|snapshot|snapshots|fork|
 *     template|health|other|any. DELETE clears. Without status or drop a fault
 *     changes the answer instead: repeat_token makes a page's X-Next-Token the
 *     request's own nextToken ("fake.0" on a first page), so a client that
 *     follows it blindly loops; public makes a create public, with no traffic
 *     token (as when CubeMaster mints none); fork_errors N turns the first N
 *     results of a fork into {"error"} entries.
 *     "after":true applies delay_ms and drop AFTER the route has acted: a
 *     create makes its sandbox, then its answer is late, or the connection
 *     closes unanswered. "no_route":true answers as an unknown route (an
 *     empty 404 on cube, gin's text on E2B) and does nothing.
 *     "mangle":"duplicate" answers as the route would, with the first member
 *     of the answer's object said again with another value after it;
 *     "mangle":"trailing" adds a second value after the answer's.
 *     Edge faults: route "exec" (POST /process.Process/Start) or "files"
 *     (GET /files) with "envd":"two_ends"|"data_after_end"|"undecodable"|
 *     "endless_file" answers that request with a broken envd answer instead
 *     of forwarding it (fake-envd-faults.c).
 *   --page-size N caps every paged answer (E2B's /v2/sandboxes, /snapshots,
 *     /v2/templates; Cube's /snapshots) at N entries whatever limit is asked.
 *   GET /_fake/sandboxes → [{id,state,envd_pid,envd_port,token,traffic_token,
 *     expires_at,public,template_id}] (expires_at: unix seconds or null).
 *
 * Edge (E2B client proxy / CubeProxy) on --edge-port
 *   Routing: a Host that is localhost, an IP literal or "sandbox.<domain>" is
 *   routed by E2b-Sandbox-Id + E2b-Sandbox-Port; any other Host by its first
 *   DNS label "<port>-<sandboxID>" [E2B, Cube]. Real CubeProxy
 *   has no header routing; the fake offers it on every flavour so single-host
 *   tests work. Port 49983 reaches the sandbox's envd; any other port P
 *   (a user port) reaches 127.0.0.1:P, the sandboxes running on the host.
 *   E2B: unknown sandbox → 502 {"error":"Sandbox not found","sandboxId"};
 *     paused → 502 (E2B can auto-resume through the proxy; not modelled);
 *     a user port nothing listens on → 502 "The sandbox is running but port
 *     is not open";
 *     traffic token (e2b-traffic-access-token) checked on every port but envd's,
 *     which E2B exempts [Cube] → 403.
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
 *     otherwise → 502; each forwarded request resets the idle TTL [Cube].
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
#include "fake-e2b.h"

struct fake_globals g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sp_lock = PTHREAD_MUTEX_INITIALIZER,
	.sp_cond = PTHREAD_COND_INITIALIZER,
	.build_steps = 2,
	.edge_fd = -1,
};

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
	"                              \"repeat_token\",\"public\",\"fork_errors\",\"message\"}\n"
	"                             repeat_token: a page's X-Next-Token is the request's own\n"
	"                             nextToken (fake.0 on a first page); public: the create is\n"
	"                             public, without a traffic token; fork_errors: N: the\n"
	"                             first N forks are error entries; mangle: \"duplicate\"\n"
	"                             or \"trailing\": the answer is not strict JSON\n"
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

	/* "base" is the SDK's default template [E2B]. */
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
