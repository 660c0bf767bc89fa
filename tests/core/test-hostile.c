/*
 * The sandbox layer against a hostile envd: the fake provider's sandbox is a
 * URL served by a thread of this test, which answers process streams with
 * the events each case chooses. A stream that breaks the process protocol
 * (two end events, output after the end, events that do not decode) must be
 * HANGAR_EPROTOCOL, never a result; a stream that breaks off is
 * HANGAR_EGONE only when the provider says the sandbox is gone.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>

#include "fake-provider.h"
#include "rawhttp.h"

/* ---- the server ---------------------------------------------------------------- */

static struct {
	int lfd;
	int stop[2];
	pthread_t thread;
	const char *const *events;  /* JSON messages of the Start stream, NULL-terminated */
	int end_envelope;           /* send the {} end-of-stream envelope after them */
	int starts;                 /* Start requests served */
	int signals;                /* SendSignal requests served */
	int files;                  /* GET /files: 1 announce 64 GiB, 2 no length, 3 a byte every 100 ms */
	char url[64];
} srv;

static void send_envelope(int fd, uint8_t flags, const char *json)
{
	uint32_t len = (uint32_t)strlen(json);
	unsigned char head[5] = { flags, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
				  (unsigned char)(len >> 8), (unsigned char)len };

	rawhttp_send_all(fd, head, sizeof(head));
	rawhttp_send_all(fd, json, len);
}

/* Reads one request (headers and a Content-Length body); its path goes into path. */
static int read_request(int fd, char *path, size_t cap)
{
	char head[8192];

	if (rawhttp_read_request(fd, head, sizeof(head)) < 0 || cap < 256 || sscanf(head, "%*s %255s", path) != 1)
		return -1;
	return 0;
}

/* An endless file, sent until the client hangs up. */
static void serve_file(int fd)
{
	static char zeros[65536];
	const char *head = srv.files == 1 ? "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
					    "Content-Length: 68719476736\r\n\r\n"
					  : "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
					    "Connection: close\r\n\r\n";

	if (rawhttp_send_all(fd, head, strlen(head)) < 0)
		return;
	for (;;) {
		if (srv.files == 3) {
			struct timespec t = { 0, 100 * 1000 * 1000 };

			nanosleep(&t, NULL); /* the hostile pace itself, not a wait for a condition */
			if (rawhttp_send_all(fd, "x", 1) < 0)
				return;
		} else if (rawhttp_send_all(fd, zeros, sizeof(zeros)) < 0) {
			return;
		}
	}
}

static void serve(int fd)
{
	static const char stream_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\n"
					  "Connection: close\r\n\r\n";
	static const char unary[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				    "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
	char path[256];

	if (read_request(fd, path, sizeof(path)) < 0)
		return;
	if (strncmp(path, "/files", 6) == 0) {
		serve_file(fd);
		return;
	}
	if (strcmp(path, "/process.Process/Start") != 0) {
		if (strcmp(path, "/process.Process/SendSignal") == 0)
			__atomic_add_fetch(&srv.signals, 1, __ATOMIC_RELEASE);
		rawhttp_send_all(fd, unary, sizeof(unary) - 1);
		return;
	}
	__atomic_add_fetch(&srv.starts, 1, __ATOMIC_RELEASE);
	rawhttp_send_all(fd, stream_head, sizeof(stream_head) - 1);
	for (const char *const *e = srv.events; e && *e; e++)
		send_envelope(fd, 0, *e);
	if (srv.end_envelope)
		send_envelope(fd, 2, "{}");
	/* Closing ends the body: a stream without the end envelope broke off here. */
}

static void *server_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = srv.lfd, .events = POLLIN }, { .fd = srv.stop[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept(srv.lfd, NULL, NULL);
		if (fd < 0)
			continue;
		serve(fd);
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

/* ---- fixtures ------------------------------------------------------------------- */

static char tmpdir[] = "/tmp/hangar-hostile-XXXXXX";
static struct fake fake;
static hangar_ctx *ctx;
static hangar_sandbox *sb;

static void must(int rc, const char *what)
{
	ck_assert_msg(rc == 0, "%s: %s (%s)", what, hangar_error_name(rc), hangar_error_last()->message);
}

static void setup(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char state[200];

	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv.lfd, 0);
	ck_assert_int_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(srv.lfd, 16), 0);
	ck_assert_int_eq(getsockname(srv.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(srv.url, sizeof(srv.url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	ck_assert_int_eq(pipe(srv.stop), 0);
	srv.events = NULL;
	srv.end_envelope = 1;
	srv.starts = srv.signals = srv.files = 0;
	ck_assert_int_eq(pthread_create(&srv.thread, NULL, server_main, NULL), 0);

	ck_assert(mkdtemp(strcpy(tmpdir, "/tmp/hangar-hostile-XXXXXX")));
	memset(&fake, 0, sizeof(fake));
	snprintf(fake.dir, sizeof(fake.dir), "%s", tmpdir);
	fake.envd_url = srv.url;
	snprintf(state, sizeof(state), "%s/state", tmpdir);
	must(hangar_ctx_new(&ctx, HANGAR_CTX_NO_ENV), "ctx");
	must(fake_register(ctx, &fake), "register");
	must(hangar_ctx_set(ctx, "HANGAR_DEFAULT_PROVIDER", "fake"), "set provider");
	must(hangar_ctx_set(ctx, "HANGAR_STATE_DIR", state), "set state dir");
	must(hangar_ctx_set(ctx, "HANGAR_REQUEST_TIMEOUT_SECONDS", "10"), "set request timeout");
	must(hangar_sandbox_create(&sb, ctx, NULL), "create");
}

static void teardown(void)
{
	char cmd[300];

	sb = hangar_sandbox_unref(sb);
	ctx = hangar_ctx_unref(ctx);
	fake_cleanup(&fake);
	ck_assert_int_eq(write(srv.stop[1], "x", 1), 1);
	pthread_join(srv.thread, NULL);
	close(srv.stop[0]);
	close(srv.stop[1]);
	close(srv.lfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

#define START "{\"event\":{\"start\":{\"pid\":42}}}"
#define OUT(b64) "{\"event\":{\"data\":{\"stdout\":\"" b64 "\"}}}"
#define END(code) "{\"event\":{\"end\":{\"exitCode\":" #code ",\"exited\":true,\"status\":\"exit status " #code "\"}}}"

static int exec_with(const char *const *events, hangar_exec_result *r)
{
	srv.events = events;
	hangar_exec_result_dispose(r);
	return hangar_sandbox_exec(r, sb, "true", NULL);
}

static void expect_protocol_error(const char *const *events, const char *says)
{
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc = exec_with(events, &r);

	ck_assert_msg(rc == HANGAR_EPROTOCOL, "exec gave %s (%s), exit %d", hangar_error_name(rc),
		      hangar_error_last()->message, r.exit_code);
	ck_assert_msg(strstr(hangar_error_last()->message, says), "message: %s", hangar_error_last()->message);
	hangar_exec_result_dispose(&r);
}

/* ---- cases ------------------------------------------------------------------------ */

START_TEST(well_formed_stream_is_a_result)
{
	static const char *const ev[] = { START, OUT("aGk="), END(7), NULL };
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	must(exec_with(ev, &r), "exec");
	ck_assert_int_eq(r.exit_code, 7);
	ck_assert_str_eq(r.out.ptr, "hi");
	hangar_exec_result_dispose(&r);
}
END_TEST

START_TEST(two_end_events)
{
	static const char *const ev[] = { START, END(0), END(3), NULL };

	expect_protocol_error(ev, "second end event");
}
END_TEST

START_TEST(output_after_the_end)
{
	static const char *const ev[] = { START, OUT("aGk="), END(0), OUT("bGF0ZQ=="), NULL };

	expect_protocol_error(ev, "output after the end");
}
END_TEST

START_TEST(undecodable_output)
{
	static const char *const bad[][4] = {
		{ START, OUT("!!not base64!!"), END(0), NULL },
		{ START, "{\"event\":{\"data\":{\"stdout\":42}}}", END(0), NULL },
		{ START, "{\"event\":{\"data\":{\"video\":\"aGk=\"}}}", END(0), NULL },
		{ START, "{\"event\":{\"data\":\"aGk=\"}}", END(0), NULL },
		{ START, "{\"event\":{\"end\":{\"exitCode\":\"zero\",\"exited\":true}}}", NULL },
		{ "{\"event\":{\"start\":{\"pid\":-1}}}", END(0), NULL },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_protocol_error(bad[i], "does not decode");
}
END_TEST

START_TEST(protocol_error_stops_the_command)
{
	static const char *const ev[] = { START, OUT("!!"), NULL };

	srv.end_envelope = 0;
	expect_protocol_error(ev, "does not decode");
	/* The command was still running in the sandbox: it was told to stop. */
	ck_assert_int_eq(__atomic_load_n(&srv.signals, __ATOMIC_ACQUIRE), 1);
}
END_TEST

START_TEST(broken_stream_of_a_live_sandbox_is_protocol)
{
	static const char *const ev[] = { START, OUT("aGk="), NULL };
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc;

	srv.end_envelope = 0;
	rc = exec_with(ev, &r);
	ck_assert_msg(rc == HANGAR_EPROTOCOL, "exec gave %s", hangar_error_name(rc));
}
END_TEST

START_TEST(broken_stream_of_a_dead_sandbox_is_gone)
{
	static const char *const ev[] = { START, OUT("aGk="), NULL };
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;
	int rc;

	/* The stream breaks off and the provider says the sandbox is no more. */
	srv.end_envelope = 0;
	fake_find(&fake, hangar_sandbox_id(sb))->killed = 1;
	rc = exec_with(ev, &r);
	ck_assert_msg(rc == HANGAR_EGONE, "exec gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
}
END_TEST

START_TEST(process_two_end_events)
{
	static const char *const ev[] = { START, END(0), END(3), NULL };
	hangar_process *p = NULL;
	int32_t code = 99;
	int rc;

	srv.events = ev;
	must(hangar_process_start(&p, sb, "true", NULL), "start");
	rc = hangar_process_wait(&code, p, 10000);
	ck_assert_msg(rc == HANGAR_EPROTOCOL, "wait gave %s, exit %d", hangar_error_name(rc), code);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "second end event"));
	hangar_process_unref(p);
}
END_TEST

START_TEST(process_broken_stream_of_a_dead_sandbox_is_gone)
{
	static const char *const ev[] = { START, NULL };
	hangar_process *p = NULL;
	int rc;

	srv.events = ev;
	srv.end_envelope = 0;
	fake_find(&fake, hangar_sandbox_id(sb))->killed = 1;
	must(hangar_process_start(&p, sb, "true", NULL), "start");
	rc = hangar_process_wait(NULL, p, 10000);
	ck_assert_msg(rc == HANGAR_EGONE, "wait gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	hangar_process_unref(p);
}
END_TEST

/* Files in the test's directory whose name starts with prefix. */
static int files_named(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

static int copy_endless(int mode, const hangar_copy_opts *o)
{
	char local[300];

	srv.files = mode;
	snprintf(local, sizeof(local), "%s/copied", tmpdir);
	return hangar_sandbox_copy_out(sb, "/data/huge", local, o);
}

START_TEST(copy_out_refuses_an_announced_huge_file)
{
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	int rc;

	o.limit_bytes = 1 << 20;
	rc = copy_endless(1, &o);
	ck_assert_msg(rc == HANGAR_ETOOLARGE, "copy gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "68719476736"));
	ck_assert_int_eq(files_named("copied"), 0);
}
END_TEST

START_TEST(copy_out_stops_an_endless_file_at_the_limit)
{
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	int rc;

	/* No length announced: counted as it comes. The setting applies when the call sets none. */
	must(hangar_ctx_set(ctx, "HANGAR_COPY_LIMIT_BYTES", "3000000"), "limit");
	rc = copy_endless(2, NULL);
	ck_assert_msg(rc == HANGAR_ETOOLARGE, "copy gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	ck_assert_int_eq(files_named("copied"), 0);
	/* The call's own limit wins. */
	o.limit_bytes = 100000;
	ck_assert_int_eq(copy_endless(2, &o), HANGAR_ETOOLARGE);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "100000"));
	ck_assert_int_eq(files_named("copied"), 0);
}
END_TEST

START_TEST(copy_out_has_a_deadline)
{
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	int rc;

	/* A byte every 100 ms never stalls, and never ends. */
	o.timeout_sec = 1;
	rc = copy_endless(3, &o);
	ck_assert_msg(rc == HANGAR_ETIMEOUT, "copy gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "HANGAR_COPY_TIMEOUT_SECONDS"));
	ck_assert_int_eq(files_named("copied"), 0);
	/* Bounds. */
	o.timeout_sec = 86401;
	ck_assert_int_eq(copy_endless(3, &o), HANGAR_EINVAL);
	o.timeout_sec = 0;
	o.version = HANGAR_COPY_OPTS_VERSION + 1;
	ck_assert_int_eq(copy_endless(3, &o), HANGAR_EINVAL);
}
END_TEST

static int cancel_now(void *payload)
{
	return ++*(int *)payload > 3;
}

START_TEST(copy_out_can_be_cancelled)
{
	hangar_copy_opts o = HANGAR_COPY_OPTS_INIT;
	int asked = 0, rc;

	o.cancel = cancel_now;
	o.payload = &asked;
	rc = copy_endless(2, &o);
	ck_assert_msg(rc == HANGAR_ECANCELED, "copy gave %s (%s)", hangar_error_name(rc), hangar_error_last()->message);
	ck_assert_int_eq(files_named("copied"), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("hostile");
	TCase *t = tcase_create("process streams");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, well_formed_stream_is_a_result);
	tcase_add_test(t, two_end_events);
	tcase_add_test(t, output_after_the_end);
	tcase_add_test(t, undecodable_output);
	tcase_add_test(t, protocol_error_stops_the_command);
	tcase_add_test(t, broken_stream_of_a_live_sandbox_is_protocol);
	tcase_add_test(t, broken_stream_of_a_dead_sandbox_is_gone);
	tcase_add_test(t, process_two_end_events);
	tcase_add_test(t, process_broken_stream_of_a_dead_sandbox_is_gone);
	tcase_add_test(t, copy_out_refuses_an_announced_huge_file);
	tcase_add_test(t, copy_out_stops_an_endless_file_at_the_limit);
	tcase_add_test(t, copy_out_has_a_deadline);
	tcase_add_test(t, copy_out_can_be_cancelled);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
