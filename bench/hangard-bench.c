/*
 * hangard-bench: what the HTTP layer costs. The same two calls, a sandbox's
 * state (GET /v1/sandboxes/{id} against hangar_sandbox_get_info()) and an
 * exec of `true` (POST .../exec against hangar_sandbox_exec()), through a
 * real hangard on loopback and straight through libhangar, with 1, 10 and
 * 100 concurrent clients; then hangard's resident memory idle and at its
 * peak under that load. The loader is here: one thread per client, each on
 * one keep-alive connection, timing every request. Last, a hold test: 1,000
 * connections (HANGARD_BENCH_HOLD) opened at once and kept, each asking for
 * the sandbox's state twice, every one of them counted, with hangard's RSS
 * while it holds them.
 *
 * usage: hangard-bench HANGARD [SECONDS_PER_RUN]
 *   needs HANGAR_ENVD_PATH and HANGAR_JAIL_PATH (meson sets them) and what
 *   the local provider needs (root, bubblewrap). Prints figures, asserts none.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hangar/hangar.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"

#define TOKEN "bench-token-0123456789abcdef0123456789abcdef"

static unsigned port;
static char sandbox_id[128];
static hangar_ctx *ctx;
static double run_seconds = 3;
static int quiet;   /* a warm-up: nothing printed */

enum call { CALL_STATUS, CALL_EXEC };

struct client {
	pthread_t tid;
	enum call call;
	int via_http;
	double *lat;
	size_t n, cap;
	int errors;
	double end_ms;
};

static int connect_hangard(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One request on a keep-alive connection; returns the status or -1. */
static int http_call(int fd, const char *req, size_t len)
{
	char buf[65536];
	size_t have = 0;
	long body = -1;
	char *hdr_end = NULL;
	int status;

	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -1;
	for (;;) {
		ssize_t r = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if (!hdr_end && (hdr_end = strstr(buf, "\r\n\r\n")) != NULL) {
			char *cl = strcasestr(buf, "\r\nContent-Length:");
			if (!cl || cl > hdr_end)
				return -1;
			body = strtol(cl + 17, NULL, 10);
		}
		if (hdr_end && (long)(have - (size_t)(hdr_end + 4 - buf)) >= body)
			break;
		if (have >= sizeof(buf) - 1)
			return -1;
	}
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		return -1;
	return status;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	char req[1024];
	size_t len = 0;
	int fd = -1;
	hangar_sandbox *sb = NULL;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;

	if (c->via_http) {
		static const char body[] = "{\"command\":\"true\"}";
		if (c->call == CALL_STATUS)
			len = (size_t)snprintf(req, sizeof(req),
					       "GET /v1/sandboxes/%s HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN
					       "\r\n\r\n", sandbox_id);
		else
			len = (size_t)snprintf(req, sizeof(req),
					       "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN
					       "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
					       sandbox_id, sizeof(body) - 1, body);
		fd = connect_hangard();
		if (fd < 0) {
			c->errors++;
			return NULL;
		}
	} else if (hangar_sandbox_attach(&sb, ctx, NULL, sandbox_id) < 0) {
		c->errors++;
		return NULL;
	}
	while (now_ms() < c->end_ms) {
		double t0 = now_ms();
		int ok;
		if (c->via_http)
			ok = http_call(fd, req, len) == 200;
		else if (c->call == CALL_STATUS)
			ok = hangar_sandbox_get_info(&info, sb) == 0;
		else {
			ok = hangar_sandbox_exec(&res, sb, "true", NULL) == 0 && res.exit_code == 0;
			hangar_exec_result_dispose(&res);
		}
		if (!ok) {
			c->errors++;
			if (c->via_http) {
				close(fd);
				fd = connect_hangard();
				if (fd < 0)
					break;
			}
			continue;
		}
		if (c->n == c->cap) {
			size_t cap = c->cap ? c->cap * 2 : 1024;
			double *nl = realloc(c->lat, cap * sizeof(*nl));
			if (!nl)
				break;
			c->lat = nl;
			c->cap = cap;
		}
		c->lat[c->n++] = now_ms() - t0;
	}
	if (fd >= 0)
		close(fd);
	hangar_sandbox_unref(sb);
	return NULL;
}

static pid_t hangard_pid;
static long rss_peak_load_kib;   /* the most VmRSS seen while the loader ran */

static long rss_kib(pid_t pid, const char *field);

static void *rss_sampler(void *arg)
{
	const double *end_ms = arg;

	while (now_ms() < *end_ms) {
		long v = rss_kib(hangard_pid, "VmRSS:");
		struct timespec pause = { 0, 20 * 1000000L };

		if (v > rss_peak_load_kib)
			rss_peak_load_kib = v;
		nanosleep(&pause, NULL);
	}
	return NULL;
}

static void run(const char *label, enum call call, int via_http, int clients)
{
	struct client *cs = calloc((size_t)clients, sizeof(*cs));
	double start = now_ms(), *all = NULL;
	size_t total = 0;
	int errors = 0;
	struct stats st;

	if (!cs)
		return;
	double end = start + run_seconds * 1000;
	pthread_t sampler;
	int sampling = via_http && pthread_create(&sampler, NULL, rss_sampler, &end) == 0;

	for (int i = 0; i < clients; i++) {
		cs[i].call = call;
		cs[i].via_http = via_http;
		cs[i].end_ms = end;
		pthread_create(&cs[i].tid, NULL, client_main, &cs[i]);
	}
	for (int i = 0; i < clients; i++) {
		pthread_join(cs[i].tid, NULL);
		total += cs[i].n;
		errors += cs[i].errors;
	}
	if (sampling)
		pthread_join(sampler, NULL);
	double secs = (now_ms() - start) / 1000;
	all = malloc((total ? total : 1) * sizeof(*all));
	size_t k = 0;
	for (int i = 0; i < clients; i++) {
		if (all)
			memcpy(all + k, cs[i].lat, cs[i].n * sizeof(*all));
		k += cs[i].n;
		free(cs[i].lat);
	}
	if (!quiet && all && total) {
		stats_of(all, total, &st);
		printf("%-28s c=%-3d %8.0f req/s  p50 %7.3f ms  p99 %7.3f ms  n=%zu errors=%d\n", label, clients,
		       (double)total / secs, st.p50, st.p99, total, errors);
	} else if (!quiet) {
		printf("%-28s c=%-3d no successful calls, errors=%d\n", label, clients, errors);
	}
	fflush(stdout);
	free(all);
	free(cs);
}

/*
 * What hangard adds to one call, measured in pairs: one client alternates
 * the call through hangard and straight through libhangar, so both see the
 * same machine at the same moment (a shared, busy host moves both alike),
 * and the median of the pairs' differences is the added cost.
 */
static void paired(const char *label, enum call call)
{
	static const char body[] = "{\"command\":\"true\"}";
	size_t cap = 1024, n = 0;
	double *via = malloc(cap * sizeof(*via)), *direct = malloc(cap * sizeof(*direct)),
	       *diff = malloc(cap * sizeof(*diff)), end = now_ms() + run_seconds * 1000;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox_info info = HANGAR_SANDBOX_INFO_INIT;
	hangar_sandbox *sb = NULL;
	char req[1024];
	size_t len;
	int fd = connect_hangard(), errors = 0;
	struct stats sv, sd, sx;

	if (call == CALL_STATUS)
		len = (size_t)snprintf(req, sizeof(req),
				       "GET /v1/sandboxes/%s HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN "\r\n\r\n",
				       sandbox_id);
	else
		len = (size_t)snprintf(req, sizeof(req),
				       "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN
				       "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
				       sandbox_id, sizeof(body) - 1, body);
	if (!via || !direct || !diff || fd < 0 || hangar_sandbox_attach(&sb, ctx, NULL, sandbox_id) < 0) {
		printf("%-28s paired: cannot start\n", label);
		goto out;
	}
	while (now_ms() < end) {
		double t0 = now_ms(), t1, t2;
		int ok = http_call(fd, req, len) == 200;

		t1 = now_ms();
		if (call == CALL_STATUS) {
			ok = ok && hangar_sandbox_get_info(&info, sb) == 0;
		} else {
			ok = ok && hangar_sandbox_exec(&res, sb, "true", NULL) == 0 && res.exit_code == 0;
			hangar_exec_result_dispose(&res);
		}
		t2 = now_ms();
		if (!ok) {
			errors++;
			continue;
		}
		if (n == cap) {
			double *a = realloc(via, 2 * cap * sizeof(*a)), *b = a ? realloc(direct, 2 * cap * sizeof(*b)) : NULL,
			       *c = b ? realloc(diff, 2 * cap * sizeof(*c)) : NULL;

			via = a ? a : via;
			direct = b ? b : direct;
			diff = c ? c : diff;
			if (!c)
				break;
			cap *= 2;
		}
		via[n] = t1 - t0;
		direct[n] = t2 - t1;
		diff[n] = via[n] - direct[n];
		n++;
	}
	if (n == 0) {
		printf("%-28s paired: no successful pairs, errors=%d\n", label, errors);
		goto out;
	}
	stats_of(via, n, &sv);
	stats_of(direct, n, &sd);
	stats_of(diff, n, &sx);
	printf("%-28s paired c=1: via hangard p50 %.3f ms, direct p50 %.3f ms, hangard adds p50 %.3f ms"
	       " (p99 %.3f) n=%zu errors=%d\n",
	       label, sv.p50, sd.p50, sx.p50, sx.p99, n, errors);
out:
	fflush(stdout);
	if (fd >= 0)
		close(fd);
	hangar_sandbox_unref(sb);
	free(via);
	free(direct);
	free(diff);
}

static long rss_kib_in(const char *file, pid_t pid, const char *field)
{
	char path[64], line[256];
	long v = -1;
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtol(line + strlen(field), NULL, 10);
	fclose(f);
	return v;
}

static long rss_kib(pid_t pid, const char *field)
{
	return rss_kib_in("status", pid, field);
}

/* How much of hangard's RSS is its own: anonymous memory, and Pss (shared pages split among their users). */
static void print_own(pid_t pid)
{
	printf(" (anonymous %ld KiB, Pss %ld KiB)", rss_kib_in("smaps_rollup", pid, "Anonymous:"),
	       rss_kib_in("smaps_rollup", pid, "Pss:"));
}

/*
 * Opens n connections to hangard and keeps every one open; on each, in two
 * rounds, sends a status request, then reads every answer. Prints how many
 * connections got both answers, how long each round took, and hangard's RSS
 * while it held them all.
 */
static void hold(int n)
{
	char req[512];
	int *fds = calloc((size_t)n, sizeof(*fds)), opened = 0, answered[2] = { 0, 0 };
	long rss_held = -1;
	double round_ms[2] = { 0, 0 };
	size_t len = (size_t)snprintf(req, sizeof(req),
				      "GET /v1/sandboxes/%s HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN "\r\n\r\n",
				      sandbox_id);

	if (!fds)
		return;
	for (int i = 0; i < n; i++) {
		fds[i] = connect_hangard();
		if (fds[i] >= 0)
			opened++;
	}
	for (int round = 0; round < 2; round++) {
		double t0 = now_ms();

		/* Every request goes out before any answer is read: all n are in flight together. */
		for (int i = 0; i < n; i++)
			if (fds[i] >= 0 && send(fds[i], req, len, MSG_NOSIGNAL) != (ssize_t)len) {
				close(fds[i]);
				fds[i] = -1;
			}
		for (int i = 0; i < n; i++) {
			struct pollfd p = { fds[i], POLLIN, 0 };

			if (fds[i] < 0)
				continue;
			/* An answer that has not come within 30 s counts as none. */
			if (poll(&p, 1, 30000) == 1 && http_call(fds[i], "", 0) == 200) {
				answered[round]++;
			} else {
				close(fds[i]);
				fds[i] = -1;
			}
		}
		round_ms[round] = now_ms() - t0;
		long v = rss_kib(hangard_pid, "VmRSS:");
		if (v > rss_held)
			rss_held = v;
	}
	printf("hold %d connections: %d opened, %d answered in round 1 (%.0f ms), %d again on the same"
	       " connections in round 2 (%.0f ms); hangard RSS holding them: %ld KiB",
	       n, opened, answered[0], round_ms[0], answered[1], round_ms[1], rss_held);
	print_own(hangard_pid);
	printf("\n");
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
}

/* Room for n sockets of our own: the soft limit up to the hard one. */
static void raise_nofile(int n)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)n + 64 ? (rlim_t)n + 64 : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			perror("hangard-bench: RLIMIT_NOFILE");
	}
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/hangard-bench-XXXXXX", path[512], line[256], rfd_s[16];
	int pipefd[2];
	pid_t pid;
	hangar_sandbox *sb = NULL;

	if (argc < 2) {
		fprintf(stderr, "usage: hangard-bench HANGARD [SECONDS_PER_RUN]\n");
		return 2;
	}
	if (argc > 2)
		run_seconds = atof(argv[2]);
	if (geteuid() != 0) {
		printf("hangard-bench: the local provider's jails need root here; skipped\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/state", dir);
	setenv("HANGAR_STATE_DIR", path, 1);
	setenv("HANGARD_TMPDIR", dir, 1);
	/* hangard's own default connection limit (1024) and file limit are what is measured. */
	const char *hold_env = getenv("HANGARD_BENCH_HOLD");
	int hold_n = hold_env ? atoi(hold_env) : 1000;
	struct rlimit nofile_before;

	getrlimit(RLIMIT_NOFILE, &nofile_before);
	raise_nofile(hold_n + 200);

	/* The tokens file, through hangard's own hash-token. */
	snprintf(path, sizeof(path), "printf %%s '%s' | '%s' hash-token bench read,write > '%s/tokens'", TOKEN,
		 argv[1], dir);
	if (system(path) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/tokens", dir);
	if (pipe2(pipefd, 0) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		close(pipefd[0]);
		dup2(devnull, 2); /* one log line per request: not what is measured here */
		/* hangard starts with the file limit it would get, not the loader's. */
		setrlimit(RLIMIT_NOFILE, &nofile_before);
		snprintf(rfd_s, sizeof(rfd_s), "%d", pipefd[1]);
		execl(argv[1], argv[1], "-tokens", path, "-port", "0", "-ready-fd", rfd_s, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	hangard_pid = pid;
	FILE *rf = fdopen(pipefd[0], "r");
	if (!rf || !fgets(line, sizeof(line), rf) || sscanf(line, "ready %u", &port) != 1) {
		fprintf(stderr, "hangard-bench: hangard did not start\n");
		return 1;
	}
	fclose(rf);

	if (hangar_ctx_new(&ctx, 0) < 0 || hangar_sandbox_create(&sb, ctx, NULL) < 0) {
		fprintf(stderr, "hangard-bench: %s\n", hangar_error_last()->message);
		kill(pid, SIGTERM);
		return 1;
	}
	snprintf(sandbox_id, sizeof(sandbox_id), "%s", hangar_sandbox_id(sb));
	printf("hangard-bench: %.1f s per run, sandbox %s (local provider)\n", run_seconds, sandbox_id);
	printf("hangard RSS idle: %ld KiB before any request", rss_kib(pid, "VmRSS:"));
	print_own(pid);
	/*
	 * A sandbox that has just been made is still settling (its jail, its
	 * network): the first runs would measure that. An unmeasured warm-up of
	 * both paths first.
	 */
	{
		hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
		double keep = run_seconds;

		if (hangar_sandbox_exec(&res, sb, "true", NULL) != 0) {
			fprintf(stderr, "hangard-bench: the sandbox does not answer: %s\n", hangar_error_last()->message);
			kill(pid, SIGTERM);
			return 1;
		}
		hangar_exec_result_dispose(&res);
		run_seconds = 0.5;
		quiet = 1;
		run("warm-up", CALL_STATUS, 1, 10);
		run("warm-up", CALL_EXEC, 1, 10);
		run("warm-up", CALL_EXEC, 0, 10);
		quiet = 0;
		run_seconds = keep;
		rss_peak_load_kib = 0;
		printf(", %ld KiB after a warm-up", rss_kib(pid, "VmRSS:"));
		print_own(pid);
		printf("\n");
	}

	static const int conc[] = { 1, 10, 100 };
	for (size_t i = 0; i < sizeof(conc) / sizeof(conc[0]); i++) {
		run("status via hangard", CALL_STATUS, 1, conc[i]);
		run("status via libhangar", CALL_STATUS, 0, conc[i]);
	}
	for (size_t i = 0; i < sizeof(conc) / sizeof(conc[0]); i++) {
		run("exec true via hangard", CALL_EXEC, 1, conc[i]);
		run("exec true via libhangar", CALL_EXEC, 0, conc[i]);
	}
	paired("status", CALL_STATUS);
	paired("exec true", CALL_EXEC);
	printf("hangard RSS under load: %ld KiB at most (sampled every 20 ms); after: %ld KiB, peak %ld KiB",
	       rss_peak_load_kib, rss_kib(pid, "VmRSS:"), rss_kib(pid, "VmHWM:"));
	print_own(pid);
	printf("\n");
	if (hold_n > 0)
		hold(hold_n);

	/* hangard first (SIGTERM: a clean stop), then the sandbox, then the files. */
	kill(pid, SIGTERM);
	int status = 0;
	waitpid(pid, &status, 0);
	printf("hangard exited %d after SIGTERM\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	int killed = hangar_sandbox_kill(sb);
	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	return system(path) == 0 && killed == 0 ? 0 : 1;
}
