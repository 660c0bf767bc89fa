/*
 * The fast tier on real providers: the e2b provider against the fake E2B
 * control plane (tests/fakes, every sandbox a real hangar-envd), falling back
 * to the local provider (bubblewrap jails) when e2b is full or unreachable,
 * and not when it rejects the key.
 *
 * FAKE_E2B names the fake; without it (the fakes are not built) the test is
 * skipped. HANGAR_ENVD_PATH and HANGAR_JAIL_PATH are the local provider's.
 */
#define _GNU_SOURCE
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <hangar/hangar.h>
#include "clock.h"

#define API_KEY "e2b_tiers_test_key"

static pid_t fake_pid;
static int api_port, edge_port;
static char state_dir[64];

static void fake_start(void)
{
	const char *fake = getenv("FAKE_E2B"), *envd = getenv("HANGAR_ENVD_PATH");
	int64_t deadline = clock_mono_ms() + 20000;
	char line[128];
	size_t n = 0;
	int pfd[2];

	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fake_pid = fork();
	ck_assert_int_ge(fake_pid, 0);
	if (fake_pid == 0) {
		dup2(pfd[1], 3);
		execl(fake, fake, "--flavour", "cloud", "--envd", envd, "--ready-fd", "3", "--api-key", API_KEY,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	line[0] = '\0';
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd p = { pfd[0], POLLIN, 0 };
		ssize_t r;

		ck_assert_msg(clock_mono_ms() < deadline, "the fake did not get ready");
		if (poll(&p, 1, (int)(deadline - clock_mono_ms())) <= 0)
			continue;
		r = read(pfd[0], line + n, sizeof(line) - 1 - n);
		ck_assert_msg(r > 0, "the fake exited before it was ready");
		n += (size_t)r;
		line[n] = '\0';
	}
	close(pfd[0]);
	ck_assert_int_eq(sscanf(line, "ready %d %d", &api_port, &edge_port), 2);
}

struct sink {
	char data[1 << 16];
	size_t len;
};

static size_t body_cb(char *d, size_t s, size_t n, void *ud)
{
	struct sink *b = ud;
	size_t len = s * n;

	if (b->len + len >= sizeof(b->data))
		return 0;
	memcpy(b->data + b->len, d, len);
	b->len += len;
	b->data[b->len] = '\0';
	return len;
}

/* Queues a fault on the fake's control API. */
static void fault(const char *json)
{
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	CURL *c = curl_easy_init();
	char url[128];
	long status = 0;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_fake/faults", api_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	ck_assert_msg(status / 100 == 2, "the fake refused the fault %s: %ld", json, status);
}

/* ---- events ------------------------------------------------------------------------- */

static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static cJSON *fallbacks;    /* the data of every sandbox.tier_fallback */

static void on_event(const char *name, const char *json, void *payload)
{
	(void)payload;
	if (strcmp(name, "sandbox.tier_fallback"))
		return;
	pthread_mutex_lock(&ev_mu);
	cJSON_AddItemToArray(fallbacks, cJSON_Parse(json));
	pthread_mutex_unlock(&ev_mu);
}

/* ---- fixture ---------------------------------------------------------------------------- */

static hangar_ctx *ctx;

static void set(const char *name, const char *value)
{
	ck_assert_msg(hangar_ctx_set(ctx, name, value) == 0, "%s: %s", name, hangar_error_last()->message);
}

static void setup(void)
{
	char url[64];

	if (!getenv("FAKE_E2B") || access(getenv("FAKE_E2B"), X_OK) != 0)
		return;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(state_dir, sizeof(state_dir), "/tmp/hangar-tiers-e2b-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(state_dir));
	fake_start();
	fallbacks = cJSON_CreateArray();
	/* The environment gives the local provider its binaries. */
	ck_assert_int_eq(hangar_ctx_new(&ctx, 0), 0);
	set("HANGAR_STATE_DIR", state_dir);
	set("HANGAR_DEFAULT_PROVIDER", "local");
	set("HANGAR_TIERS", NULL);   /* the default: {"fast":["e2b"]} */
	set("HANGAR_E2B_FLAVOR", "cloud");
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", api_port);
	set("HANGAR_E2B_API_URL", url);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", edge_port);
	set("HANGAR_E2B_SANDBOX_URL", url);
	set("HANGAR_E2B_API_KEY", API_KEY);
	set("HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", "10");
	hangar_ctx_set_event(ctx, on_event, NULL);
}

static void teardown(void)
{
	char cmd[128];

	if (!fake_pid)
		return;
	ctx = hangar_ctx_unref(ctx);
	kill(fake_pid, SIGTERM);
	waitpid(fake_pid, NULL, 0);
	fake_pid = 0;
	cJSON_Delete(fallbacks);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Creates a fast sandbox, runs a command in it to show it is real, kills it,
 * and returns the provider's name (static). */
static const char *fast_create(void)
{
	static char who[32];
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	hangar_sandbox *sb = NULL;

	o.tier = "fast";
	ck_assert_msg(hangar_sandbox_create(&sb, ctx, &o) == 0, "create: %s", hangar_error_last()->message);
	snprintf(who, sizeof(who), "%s", hangar_provider_name(hangar_sandbox_provider(sb)));
	ck_assert_msg(hangar_sandbox_exec(&r, sb, "echo alive", NULL) == 0, "exec: %s", hangar_error_last()->message);
	ck_assert_str_eq(r.out.ptr, "alive\n");
	hangar_exec_result_dispose(&r);
	ck_assert_int_eq(hangar_sandbox_kill(sb), 0);
	hangar_sandbox_unref(sb);
	return who;
}

static int64_t cooling_until(const char *tier, const char *provider);

struct q {
	const char *tier, *provider;
	int64_t until;
};

static int tier_cb(const hangar_tier_info *info, void *payload)
{
	struct q *q = payload;

	if (!strcmp(info->name, q->tier))
		for (uint32_t i = 0; i < info->n_providers; i++)
			if (!strcmp(info->providers[i], q->provider))
				q->until = info->cooling_until_us[i];
	return 0;
}

static int64_t cooling_until(const char *tier, const char *provider)
{
	struct q q = { tier, provider, -1 };

	ck_assert_int_eq(hangar_tier_foreach(ctx, tier_cb, &q), 0);
	return q.until;
}

#define SKIP_WITHOUT_FAKE()                                                     \
	do {                                                                    \
		if (!fake_pid) {                                                \
			fprintf(stderr, "FAKE_E2B is not built: skipped\n");    \
			return;                                                 \
		}                                                               \
	} while (0)

START_TEST(fast_e2b_full_falls_back_to_local)
{
	const cJSON *e;
	struct timespec now;

	SKIP_WITHOUT_FAKE();
	ck_assert_str_eq(fast_create(), "e2b");
	fault("{\"route\":\"create\",\"status\":429,\"retry_after\":90,\"count\":1}");
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	e = cJSON_GetArrayItem(fallbacks, 0);
	ck_assert_str_eq(cJSON_GetObjectItem(e, "from")->valuestring, "e2b");
	ck_assert_str_eq(cJSON_GetObjectItem(e, "to")->valuestring, "local");
	ck_assert_str_eq(cJSON_GetObjectItem(e, "reason")->valuestring, "capacity");
	ck_assert_int_eq(cJSON_GetObjectItem(e, "http_status")->valueint, 429);
	/* Retry-After: 90 is longer than the 60 s cooldown. */
	ck_assert_int_eq(cJSON_GetObjectItem(e, "cooldown_seconds")->valueint, 90);
	clock_gettime(CLOCK_REALTIME, &now);
	ck_assert_int_gt(cooling_until("fast", "e2b"), (int64_t)now.tv_sec * 1000000 + 80 * 1000000LL);
	/* Cooling down: e2b would answer now, but is not asked. */
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
}
END_TEST

/* A control plane's body asking for 30 s sets no cooldown: the configured one applies. */
START_TEST(fast_e2b_body_text_sets_no_cooldown)
{
	struct timespec now;

	SKIP_WITHOUT_FAKE();
	set("HANGAR_TIER_COOLDOWN_SECONDS", "2");
	fault("{\"route\":\"create\",\"status\":429,\"count\":1,\"message\":\"Retry after 30 s please\"}");
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "cooldown_seconds")->valueint, 2);
	clock_gettime(CLOCK_REALTIME, &now);
	ck_assert_int_le(cooling_until("fast", "e2b"), (int64_t)now.tv_sec * 1000000 + 3 * 1000000LL);
}
END_TEST

START_TEST(fast_e2b_unavailable_falls_back)
{
	SKIP_WITHOUT_FAKE();
	set("HANGAR_TIER_COOLDOWN_SECONDS", "0");
	fault("{\"route\":\"create\",\"status\":503,\"count\":1}");
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "reason")->valuestring, "unavailable");
	ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "http_status")->valueint, 503);
	/* No cooldown: e2b serves again at once. */
	ck_assert_str_eq(fast_create(), "e2b");
}
END_TEST

START_TEST(fast_e2b_unreachable_falls_back)
{
	SKIP_WITHOUT_FAKE();
	/* Nothing listens on port 1: the connection is refused. */
	set("HANGAR_E2B_API_URL", "http://127.0.0.1:1");
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "reason")->valuestring, "unreachable");
	ck_assert_int_gt(cooling_until("fast", "e2b"), 0);
}
END_TEST

/*
 * A loopback listener that never accepts, its accept queue filled: the
 * kernel drops every further SYN, so a connection to it is never made and a
 * client's connect times out. *fill receives the connections filling it.
 */
static int blackhole(int *port, int fill[4], int *nfill)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 0), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	*nfill = 0;
	for (;;) {
		struct tcp_info ti;
		socklen_t tl = sizeof(ti);
		struct pollfd p;
		int c;

		/* On a listener, unacked is the accept queue's length and sacked its limit. */
		ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl), 0);
		if (ti.tcpi_unacked > ti.tcpi_sacked)
			break;
		ck_assert_msg(*nfill < 4, "the accept queue does not fill");
		c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		ck_assert_int_ge(c, 0);
		fill[(*nfill)++] = c;
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) != 0) {
			/* The handshake completes on loopback; wait for it, on the socket. */
			p.fd = c;
			p.events = POLLOUT;
			ck_assert_int_eq(poll(&p, 1, 10000), 1);
		}
	}
	return fd;
}

START_TEST(fast_e2b_connect_timeout_is_unreachable)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;
	int port, fill[4], nfill, fd;
	char url[64];

	SKIP_WITHOUT_FAKE();
	fd = blackhole(&port, fill, &nfill);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	set("HANGAR_E2B_API_URL", url);
	set("HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", "1");
	set("HANGAR_TIER_COOLDOWN_SECONDS", "0");

	/* No connection within the deadline: nothing was sent, so the API is unreachable, not slow. */
	o.provider = "e2b";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(hangar_error_last()->category, HANGAR_ERRCAT_NET);
	ck_assert_int_eq(hangar_error_last()->http_status, 0);
	ck_assert_ptr_null(sb);

	/* So the fast tier falls back, as for a refused connection. */
	ck_assert_str_eq(fast_create(), "local");
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "from")->valuestring, "e2b");
	ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(fallbacks, 0), "reason")->valuestring, "unreachable");
	for (int i = 0; i < nfill; i++)
		close(fill[i]);
	close(fd);
}
END_TEST

START_TEST(fast_e2b_answer_timeout_does_not_fall_back)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	SKIP_WITHOUT_FAKE();
	/* The create reached the platform and went unanswered: it may exist, so no other provider is tried. */
	set("HANGAR_E2B_REQUEST_TIMEOUT_SECONDS", "1");
	fault("{\"route\":\"create\",\"delay_ms\":2500,\"count\":1}");
	o.tier = "fast";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_ETIMEOUT);
	ck_assert_ptr_null(sb);
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 0);
}
END_TEST

/* How many live sandboxes the fake holds. */
static int fake_count(void)
{
	struct sink *b = calloc(1, sizeof(*b));
	CURL *c = curl_easy_init();
	char url[128];
	cJSON *all;
	int n;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_fake/sandboxes", api_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
	all = cJSON_Parse(b->data);
	ck_assert_ptr_nonnull(all);
	n = cJSON_GetArraySize(all);
	cJSON_Delete(all);
	free(b);
	return n;
}

START_TEST(fast_e2b_unanswered_create_is_killed_before_fallback)
{
	const cJSON *e;

	SKIP_WITHOUT_FAKE();
	set("HANGAR_TIER_COOLDOWN_SECONDS", "0");
	/* The platform makes the sandbox, then the connection closes unanswered. */
	fault("{\"route\":\"create\",\"drop\":true,\"after\":true,\"count\":1}");
	ck_assert_str_eq(fast_create(), "local");
	/* What e2b made was found by its create id and killed: nothing leaks there. */
	ck_assert_int_eq(fake_count(), 0);
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 1);
	e = cJSON_GetArrayItem(fallbacks, 0);
	ck_assert_str_eq(cJSON_GetObjectItem(e, "from")->valuestring, "e2b");
	ck_assert_str_eq(cJSON_GetObjectItem(e, "provider_code")->valuestring, "create_orphan_killed");
	ck_assert_ptr_nonnull(strstr(cJSON_GetObjectItem(e, "message")->valuestring, "killed"));
}
END_TEST

START_TEST(fast_e2b_rejected_key_does_not_fall_back)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb = NULL;

	SKIP_WITHOUT_FAKE();
	set("HANGAR_E2B_API_KEY", "e2b_wrong_key");
	o.tier = "fast";
	ck_assert_int_eq(hangar_sandbox_create(&sb, ctx, &o), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(hangar_error_last()->http_status, 401);
	ck_assert_ptr_null(strstr(hangar_error_last()->message, "e2b_wrong_key"));
	ck_assert_int_eq(cJSON_GetArraySize(fallbacks), 0);
	ck_assert_int_eq(cooling_until("fast", "e2b"), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tiers-e2b");
	TCase *t = tcase_create("fast");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, fast_e2b_full_falls_back_to_local);
	tcase_add_test(t, fast_e2b_body_text_sets_no_cooldown);
	tcase_add_test(t, fast_e2b_unavailable_falls_back);
	tcase_add_test(t, fast_e2b_unreachable_falls_back);
	tcase_add_test(t, fast_e2b_connect_timeout_is_unreachable);
	tcase_add_test(t, fast_e2b_answer_timeout_does_not_fall_back);
	tcase_add_test(t, fast_e2b_rejected_key_does_not_fall_back);
	tcase_add_test(t, fast_e2b_unanswered_create_is_killed_before_fallback);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r;
	int failed;

	if (!getenv("FAKE_E2B") || access(getenv("FAKE_E2B"), X_OK) != 0) {
		printf("FAKE_E2B is not built (tests/fakes): skipped\n");
		return 77;
	}
	r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
