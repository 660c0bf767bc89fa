/*
 * The envd client (libhangar/envd/client.c) against a hostile envd: a tiny
 * HTTP server on loopback, run by a thread of the test, that answers every
 * request with raw bytes chosen by the test. Each case checks the hangar code
 * the client settles on, and that it settles quickly: the server never ends
 * the hostile answers by itself, so a client that kept reading would run into
 * the call deadline and report HANGAR_ETIMEOUT instead.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "core/internal.h"
#include "envd/client.h"
#include "rawhttp.h"

/* ---- the server ------------------------------------------------------------------ */

typedef void (*serve_fn)(int fd);

static struct {
	int lfd;
	int stop[2];            /* written by the test to end the server thread */
	pthread_t thread;
	serve_fn serve;         /* the answer to give; set before each call */
	int keep_alive;         /* serve further requests on the same connection */
	int accepted;           /* connections accepted */
	char url[64];
} srv;

static void *server_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2] = { { .fd = srv.lfd, .events = POLLIN }, { .fd = srv.stop[0], .events = POLLIN } };
		serve_fn serve;
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
		__atomic_add_fetch(&srv.accepted, 1, __ATOMIC_RELEASE);
		do {
			if (rawhttp_read_request(fd, NULL, 0) < 0)
				break;
			serve = __atomic_load_n(&srv.serve, __ATOMIC_ACQUIRE);
			if (serve)
				serve(fd);
		} while (__atomic_load_n(&srv.keep_alive, __ATOMIC_ACQUIRE));
		/* Half-close, then let the client finish reading before the socket goes. */
		shutdown(fd, SHUT_WR);
		rawhttp_wait_for_close(fd, srv.stop[0]);
		close(fd);
	}
	return NULL;
}

static struct envd_client *client;
static struct envd_endpoint ep;

static void server_setup(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv.lfd, 0);
	ck_assert_int_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(srv.lfd, 16), 0);
	ck_assert_int_eq(getsockname(srv.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(srv.url, sizeof(srv.url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	ck_assert_int_eq(pipe(srv.stop), 0);
	srv.serve = NULL;
	srv.keep_alive = 0;
	srv.accepted = 0;
	ck_assert_int_eq(pthread_create(&srv.thread, NULL, server_main, NULL), 0);
	memset(&ep, 0, sizeof(ep));
	ep.base_url = srv.url;
	ck_assert_int_eq(envd_client_new(&client), 0);
}

static void server_teardown(void)
{
	envd_client_free(client);
	client = NULL;
	ck_assert_int_eq(write(srv.stop[1], "x", 1), 1);
	pthread_join(srv.thread, NULL);
	close(srv.stop[0]);
	close(srv.stop[1]);
	close(srv.lfd);
}

static void answer_with(serve_fn fn)
{
	__atomic_store_n(&srv.serve, fn, __ATOMIC_RELEASE);
}

/* A call with a generous deadline: hitting it means the client failed to notice the problem. */
static struct envd_call slow_call(void)
{
	struct envd_call call = { .ep = &ep, .deadline_ms = 10000 };

	return call;
}

/* ---- pieces of answers -------------------------------------------------------------- */

static const char stream_head[] = "HTTP/1.1 200 OK\r\n"
				  "Content-Type: application/connect+json\r\n"
				  "Connection: close\r\n\r\n";

static const char chunked_stream_head[] = "HTTP/1.1 200 OK\r\n"
					  "Content-Type: application/connect+json\r\n"
					  "Transfer-Encoding: chunked\r\n\r\n";

static int send_envelope(int fd, uint8_t flags, const char *json)
{
	uint8_t h[CONNECT_ENVELOPE_HEADER];

	connect_envelope_header(h, flags, (uint32_t)strlen(json));
	if (rawhttp_send_all(fd, h, sizeof(h)) < 0)
		return -1;
	return rawhttp_send_str(fd, json);
}

static int send_chunk(int fd, const void *data, size_t len)
{
	char head[32];

	snprintf(head, sizeof(head), "%zx\r\n", len);
	if (rawhttp_send_str(fd, head) < 0 || rawhttp_send_all(fd, data, len) < 0)
		return -1;
	return rawhttp_send_str(fd, "\r\n");
}

/* gzip of data, whole, for small canned answers. */
static size_t gzip_buf(const void *data, size_t len, unsigned char *out, size_t cap)
{
	z_stream z = { 0 };

	ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
	deflateEnd(&z);
	return cap - z.avail_out;
}

static cJSON *start_req(void)
{
	return cJSON_Parse("{\"process\":{\"cmd\":\"true\"}}");
}

static int count(const cJSON *msg, void *ctx)
{
	(void)msg;
	++*(long *)ctx;
	return 0;
}

static int run_stream(struct envd_call *call, struct envd_status *st, long *msgs)
{
	cJSON *req = start_req();
	int rc;

	*msgs = 0;
	rc = envd_stream(client, call, "process.Process/Start", req, count, msgs, st);
	cJSON_Delete(req);
	return rc;
}

static int run_unary(struct envd_call *call, struct envd_status *st)
{
	cJSON *resp = (cJSON *)1;
	int rc = envd_unary(client, call, "process.Process/List", NULL, &resp, st);

	ck_assert_ptr_null(resp);
	return rc;
}

#define ck_assert_code(rc, want)                                                                \
	ck_assert_msg((rc) == (want), "got %d (%s: %s), want %d", (rc), hangar_error_name(rc),  \
		      hangar_error_last()->message, (want))

/* ---- streams ------------------------------------------------------------------------------ */

static void serve_huge_frame(int fd)
{
	uint8_t h[CONNECT_ENVELOPE_HEADER];

	connect_envelope_header(h, 0, 100u << 20);
	if (rawhttp_send_str(fd, stream_head) == 0 && rawhttp_send_all(fd, h, sizeof(h)) == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]); /* the 100 MiB never come */
}

START_TEST(stream_frame_over_limit)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	answer_with(serve_huge_frame);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_EPROTOCOL);
	ck_assert_int_eq(st.timed_out, 0);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "limit"));
}
END_TEST

static void serve_compressed_flag(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 && send_envelope(fd, CONNECT_FLAG_COMPRESSED, "{}") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(stream_compressed_flag)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_compressed_flag);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
	ck_assert_int_eq(n, 0);
}
END_TEST

static void serve_connect_gzip_stream(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/connect+json\r\n"
			 "Connect-Content-Encoding: gzip\r\nConnection: close\r\n\r\n") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(stream_connect_content_encoding)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_connect_gzip_stream);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
}
END_TEST

static void serve_endless_keepalives(int fd)
{
	static const char ka[] = "{\"event\":{\"keepalive\":{}}}";
	char buf[64 * (CONNECT_ENVELOPE_HEADER + sizeof(ka) - 1)];
	size_t len = 0;

	/* A batch per send, so the client spends its time in the client, not in syscalls. */
	for (int i = 0; i < 64; i++) {
		connect_envelope_header((uint8_t *)buf + len, 0, (uint32_t)(sizeof(ka) - 1));
		memcpy(buf + len + CONNECT_ENVELOPE_HEADER, ka, sizeof(ka) - 1);
		len += CONNECT_ENVELOPE_HEADER + sizeof(ka) - 1;
	}
	if (rawhttp_send_str(fd, chunked_stream_head) < 0)
		return;
	while (send_chunk(fd, buf, len) == 0)
		;
}

START_TEST(stream_endless_keepalives)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	call.deadline_ms = 300;
	answer_with(serve_endless_keepalives);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_ETIMEOUT);
	ck_assert_int_eq(st.timed_out, 1);
	ck_assert_int_gt(n, 0); /* keepalives are handed to the caller */
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "deadline"));
}
END_TEST

static void serve_truncated_envelope(int fd)
{
	uint8_t h[CONNECT_ENVELOPE_HEADER];

	connect_envelope_header(h, 0, 100);
	if (rawhttp_send_str(fd, stream_head) == 0 && rawhttp_send_all(fd, h, sizeof(h)) == 0)
		rawhttp_send_str(fd, "{\"event\":");
	/* and the connection closes: a clean end of a close-delimited body */
}

START_TEST(stream_truncated_envelope)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_truncated_envelope);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "stream ended"));
}
END_TEST

static void serve_truncated_chunked(int fd)
{
	static const char msg[] = "{\"event\":{\"start\":{\"pid\":1}}}";
	uint8_t h[CONNECT_ENVELOPE_HEADER];
	char body[CONNECT_ENVELOPE_HEADER + sizeof(msg)];

	connect_envelope_header(h, 0, (uint32_t)(sizeof(msg) - 1));
	memcpy(body, h, sizeof(h));
	memcpy(body + sizeof(h), msg, sizeof(msg) - 1);
	if (rawhttp_send_str(fd, chunked_stream_head) == 0)
		send_chunk(fd, body, sizeof(body) - 1);
	/* no terminating chunk, no end envelope: the connection just closes */
}

START_TEST(stream_cut_mid_chunked_body)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	answer_with(serve_truncated_chunked);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_EPROTOCOL);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(st.transport_failed, 0);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "without an end message"));
}
END_TEST

static void serve_no_end_envelope(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0)
		send_envelope(fd, 0, "{\"event\":{\"start\":{\"pid\":1}}}");
}

START_TEST(stream_without_end_envelope)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_no_end_envelope);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
	ck_assert_int_eq(n, 1);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "stream ended without an end message"));
}
END_TEST

static void serve_invalid_json_message(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 && send_envelope(fd, 0, "{\"event\":{\"start\":") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(stream_invalid_json)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_invalid_json_message);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
	ck_assert_int_eq(n, 0);
}
END_TEST

/* A start event whose pid is said twice: which one ran? */
static void serve_duplicate_member_message(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 &&
	    send_envelope(fd, 0, "{\"event\":{\"start\":{\"pid\":7,\"pid\":8}}}") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

static void serve_trailing_data_message(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 &&
	    send_envelope(fd, 0, "{\"event\":{\"start\":{\"pid\":7}}} {\"x\":1}") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(stream_not_strict_json)
{
	serve_fn hostile[] = { serve_duplicate_member_message, serve_trailing_data_message };
	const char *why[] = { "duplicate member \"pid\"", "follows the value" };

	for (int i = 0; i < 2; i++) {
		struct envd_call call = slow_call();
		long n;

		answer_with(hostile[i]);
		ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
		ck_assert_int_eq(n, 0);
		ck_assert_msg(strstr(hangar_error_last()->message, why[i]), "%s", hangar_error_last()->message);
	}
}
END_TEST

/* A request whose text is not UTF-8 is refused before it is sent. */
START_TEST(stream_request_not_utf8)
{
	struct envd_call call = slow_call();
	cJSON *req = cJSON_Parse("{\"process\":{\"cmd\":\"true\"}}");
	long n = 0;

	answer_with(serve_duplicate_member_message);
	cJSON_SetValuestring(cJSON_GetObjectItem(cJSON_GetObjectItem(req, "process"), "cmd"), "tr\xc0\xafue");
	ck_assert_code(envd_stream(client, &call, "process.Process/Start", req, count, &n, NULL), HANGAR_EINVAL);
	cJSON_Delete(req);
	ck_assert_int_eq(srv.accepted, 0);
}
END_TEST

static void serve_end_with_error(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 && send_envelope(fd, 0, "{\"event\":{\"start\":{\"pid\":7}}}") == 0)
		send_envelope(fd, CONNECT_FLAG_END_STREAM,
			      "{\"error\":{\"code\":\"resource_exhausted\",\"message\":\"too\\nmany\"}}");
}

START_TEST(stream_end_with_error)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	answer_with(serve_end_with_error);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_ECAPACITY);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(st.code, CONNECT_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(hangar_error_last()->provider_code, "resource_exhausted");
	/* envd's message is quoted on one line */
	ck_assert_ptr_null(strchr(hangar_error_last()->message, '\n'));
}
END_TEST

static void serve_data_after_end(int fd)
{
	if (rawhttp_send_str(fd, stream_head) == 0 && send_envelope(fd, CONNECT_FLAG_END_STREAM, "{}") == 0 &&
	    send_envelope(fd, 0, "{}") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(stream_data_after_end)
{
	struct envd_call call = slow_call();
	long n;

	answer_with(serve_data_after_end);
	ck_assert_code(run_stream(&call, NULL, &n), HANGAR_EPROTOCOL);
}
END_TEST

static void serve_401_rest(int fd)
{
	static const char body[] = "{\"code\":401,\"message\":\"unauthorized access, please provide a valid "
				   "access token or method signing if supported\"}";
	char head[256];

	snprintf(head, sizeof(head),
		 "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json; charset=utf-8\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 sizeof(body) - 1);
	if (rawhttp_send_str(fd, head) == 0)
		rawhttp_send_str(fd, body);
}

START_TEST(stream_http_401)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	answer_with(serve_401_rest);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_EREFUSED);
	ck_assert_int_eq(st.http_status, 401);
	ck_assert_int_eq(st.code, CONNECT_UNAUTHENTICATED);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "unauthorized access"));
}
END_TEST

/* ---- unary -------------------------------------------------------------------------------- */

static void serve_gzip_unary(int fd)
{
	unsigned char gz[256];
	size_t n = gzip_buf("{}", 2, gz, sizeof(gz));
	char head[256];

	snprintf(head, sizeof(head),
		 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
		 "Content-Length: %zu\r\n\r\n",
		 n);
	if (rawhttp_send_str(fd, head) == 0)
		rawhttp_send_all(fd, gz, n);
}

START_TEST(unary_gzip_answer)
{
	struct envd_call call = slow_call();
	struct envd_status st;

	answer_with(serve_gzip_unary);
	ck_assert_code(run_unary(&call, &st), HANGAR_EPROTOCOL);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "compressed"));
}
END_TEST

static void serve_unary_declared_huge(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			 "Content-Length: 41943040\r\n\r\n{\"a\":\"") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(unary_declared_over_limit)
{
	struct envd_call call = slow_call();

	answer_with(serve_unary_declared_huge);
	ck_assert_code(run_unary(&call, NULL), HANGAR_EPROTOCOL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "limit"));
}
END_TEST

static void serve_unary_endless(int fd)
{
	static char junk[64 * 1024];
	size_t sent = 0;

	memset(junk, ' ', sizeof(junk));
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n") < 0)
		return;
	/* Bounded, so a client that kept everything would still finish (and be caught below). */
	while (sent < ENVD_MAX_UNARY + (4u << 20) && rawhttp_send_all(fd, junk, sizeof(junk)) == 0)
		sent += sizeof(junk);
}

START_TEST(unary_counted_over_limit)
{
	struct envd_call call = slow_call();

	answer_with(serve_unary_endless);
	ck_assert_code(run_unary(&call, NULL), HANGAR_EPROTOCOL);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "limit"));
}
END_TEST

static void serve_unary_invalid_json(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 8\r\n\r\n{\"a\":tru");
}

static void serve_unary_duplicate_member(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n"
			     "{\"processes\":[],\"processes\":1}");
}

static void serve_unary_trailing_data(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 18\r\n\r\n"
			     "{\"processes\":[]}{}");
}

START_TEST(unary_not_strict_json)
{
	serve_fn hostile[] = { serve_unary_duplicate_member, serve_unary_trailing_data };

	for (int i = 0; i < 2; i++) {
		struct envd_call call = slow_call();

		answer_with(hostile[i]);
		ck_assert_code(run_unary(&call, NULL), HANGAR_EPROTOCOL);
		ck_assert_msg(strstr(hangar_error_last()->message, "strict JSON"), "%s", hangar_error_last()->message);
	}
}
END_TEST

START_TEST(unary_invalid_json)
{
	struct envd_call call = slow_call();

	answer_with(serve_unary_invalid_json);
	ck_assert_code(run_unary(&call, NULL), HANGAR_EPROTOCOL);
}
END_TEST

static void serve_unary_endless_error(int fd)
{
	static char junk[64 * 1024];

	memset(junk, 'e', sizeof(junk));
	if (rawhttp_send_str(fd, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n") < 0)
		return;
	while (rawhttp_send_all(fd, junk, sizeof(junk)) == 0)
		;
}

START_TEST(unary_endless_error_body)
{
	struct envd_call call = slow_call();
	struct envd_status st;

	answer_with(serve_unary_endless_error);
	ck_assert_code(run_unary(&call, &st), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.http_status, 503);
	ck_assert_int_eq(st.code, CONNECT_UNAVAILABLE);
	ck_assert_int_eq(st.transport_failed, 0);
}
END_TEST

/* ---- not HTTP at all ---------------------------------------------------------------------------- */

static void serve_garbage(int fd)
{
	static const unsigned char junk[] = { 0x16, 0x03, 0x01, 0x00, 0xff, 'g', 'a', 'r', 'b', 'a', 'g', 'e',
					      '\r', '\n', 0x00, 0x7f, '\r', '\n', '\r', '\n' };

	rawhttp_send_all(fd, junk, sizeof(junk));
}

START_TEST(garbage_instead_of_http)
{
	struct envd_call call = slow_call();
	struct envd_status st;

	answer_with(serve_garbage);
	ck_assert_code(run_unary(&call, &st), HANGAR_EPROTOCOL);
	ck_assert_int_eq(st.http_status, 0);
	ck_assert_int_eq(st.transport_failed, 0);
}
END_TEST

static void serve_nothing(int fd)
{
	(void)fd; /* accept, read the request, hang up */
}

START_TEST(hang_up_without_answer)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	long n;

	answer_with(serve_nothing);
	ck_assert_code(run_unary(&call, &st), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.transport_failed, 1);
	ck_assert_int_eq(hangar_error_last()->category, HANGAR_ERRCAT_NET);
	ck_assert_code(run_stream(&call, &st, &n), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.transport_failed, 1);
}
END_TEST

/* ---- /files --------------------------------------------------------------------------------------- */

/* 1 GiB of zeros, deflated as it is sent: only what the client reads is ever produced. */
static void serve_gzip_bomb(int fd)
{
	static unsigned char zeros[64 * 1024], out[64 * 1024];
	z_stream z = { 0 };
	size_t fed = 0;
	int ok = 1;

	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			 "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n") < 0)
		return;
	if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return;
	while (ok && fed < (1ull << 30)) {
		z.next_in = zeros;
		z.avail_in = sizeof(zeros);
		fed += sizeof(zeros);
		do {
			z.next_out = out;
			z.avail_out = sizeof(out);
			deflate(&z, fed < (1ull << 30) ? Z_NO_FLUSH : Z_FINISH);
			if (sizeof(out) > z.avail_out && send_chunk(fd, out, sizeof(out) - z.avail_out) < 0)
				ok = 0;
		} while (ok && z.avail_out == 0);
	}
	deflateEnd(&z);
	if (ok)
		rawhttp_send_str(fd, "0\r\n\r\n");
}

START_TEST(files_gzip_bomb)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	struct hbuf out = HBUF_INIT;

	answer_with(serve_gzip_bomb);
	ck_assert_code(envd_file_read(client, &call, "/bomb", 1u << 20, &out, &st), HANGAR_ETOOLARGE);
	ck_assert_ptr_null(out.data);
	ck_assert_int_eq(st.timed_out, 0);
}
END_TEST

static void serve_declared_big_file(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			 "Content-Length: 1073741824\r\n\r\nfirst bytes") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(files_content_length_over_limit)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_declared_big_file);
	ck_assert_code(envd_file_read(client, &call, "/big", 1u << 20, &out, NULL), HANGAR_ETOOLARGE);
	ck_assert_ptr_null(out.data);
}
END_TEST

static void serve_counted_big_file(int fd)
{
	static char junk[16 * 1024];

	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n") < 0)
		return;
	while (send_chunk(fd, junk, sizeof(junk)) == 0)
		;
}

START_TEST(files_counted_over_limit)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_counted_big_file);
	ck_assert_code(envd_file_read(client, &call, "/big", 100000, &out, NULL), HANGAR_ETOOLARGE);
	ck_assert_ptr_null(out.data);
}
END_TEST

static void serve_brotli(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nConnection: close\r\n\r\n") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

START_TEST(files_unknown_encoding)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_brotli);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, NULL), HANGAR_EPROTOCOL);
}
END_TEST

static void serve_corrupt_gzip(int fd)
{
	/* A gzip header, then a deflate block of the reserved type 3. */
	static const unsigned char bad[] = { 0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03, 0x07, 0xff, 0xff };

	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 13\r\n\r\n") == 0)
		rawhttp_send_all(fd, bad, sizeof(bad));
}

START_TEST(files_corrupt_gzip)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_corrupt_gzip);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, NULL), HANGAR_EPROTOCOL);
	ck_assert_ptr_null(out.data);
}
END_TEST

static void serve_truncated_gzip(int fd)
{
	static const char text[] = "some file contents that will be cut short";
	unsigned char gz[256];
	size_t n = gzip_buf(text, sizeof(text) - 1, gz, sizeof(gz));
	char head[128];

	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n",
		 n - 6);
	if (rawhttp_send_str(fd, head) == 0)
		rawhttp_send_all(fd, gz, n - 6); /* without most of the trailer */
}

START_TEST(files_truncated_gzip)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_truncated_gzip);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, NULL), HANGAR_EPROTOCOL);
	ck_assert_ptr_null(out.data);
}
END_TEST

static void serve_gzip_file(int fd)
{
	static const char text[] = "hello from a gzip answer";
	unsigned char gz[256];
	size_t n = gzip_buf(text, sizeof(text) - 1, gz, sizeof(gz));
	char head[128];

	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %zu\r\n\r\n", n);
	if (rawhttp_send_str(fd, head) == 0)
		rawhttp_send_all(fd, gz, n);
}

START_TEST(files_gzip_is_inflated)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_gzip_file);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, NULL), 0);
	ck_assert_str_eq(out.data, "hello from a gzip answer");
	hbuf_free(&out);
}
END_TEST

static void serve_plain_file(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nplain");
}

START_TEST(files_identity_limits)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_plain_file);
	ck_assert_code(envd_file_read(client, &call, "/f", SIZE_MAX, &out, NULL), 0);
	ck_assert_str_eq(out.data, "plain");
	ck_assert_code(envd_file_read(client, &call, "/f", 5, &out, NULL), 0);
	ck_assert_str_eq(out.data, "plain");
	ck_assert_code(envd_file_read(client, &call, "/f", 4, &out, NULL), HANGAR_ETOOLARGE);
	ck_assert_str_eq(out.data, "plain"); /* a failed read leaves out alone */
	hbuf_free(&out);
}
END_TEST

static void serve_rest_error(int fd, int status, const char *reason)
{
	char head[256], body[128];

	snprintf(body, sizeof(body), "{\"code\":%d,\"message\":\"canned %d\"}", status, status);
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d %s\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n\r\n",
		 status, reason, strlen(body));
	if (rawhttp_send_str(fd, head) == 0)
		rawhttp_send_str(fd, body);
}

static void serve_406(int fd) { serve_rest_error(fd, 406, "Not Acceptable"); }
static void serve_507(int fd) { serve_rest_error(fd, 507, "Insufficient Storage"); }
static void serve_502(int fd) { serve_rest_error(fd, 502, "Bad Gateway"); }

START_TEST(files_rest_errors)
{
	struct envd_call call = slow_call();
	struct envd_status st;
	struct hbuf out = HBUF_INIT;

	answer_with(serve_406);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, &st), HANGAR_EPROTOCOL);
	ck_assert_int_eq(st.http_status, 406);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "canned 406"));
	answer_with(serve_507);
	ck_assert_code(envd_file_write(client, &call, "/f", "x", 1, &st), HANGAR_ECAPACITY);
	ck_assert_int_eq(st.http_status, 507);
	answer_with(serve_502);
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, &st), HANGAR_EUNAVAILABLE);
	ck_assert_code(envd_health(client, &call, &st), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.http_status, 502);
	ck_assert_ptr_null(out.data);
}
END_TEST

static void serve_write_not_array(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
}

START_TEST(files_write_answer_not_array)
{
	struct envd_call call = slow_call();

	answer_with(serve_write_not_array);
	ck_assert_code(envd_file_write(client, &call, "/f", "x", 1, NULL), HANGAR_EPROTOCOL);
}
END_TEST

static void serve_write_duplicate_member(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 36\r\n\r\n"
			     "[{\"path\":\"/etc/x\",\"path\":\"/f\"}]\n\n\n\n\n");
}

START_TEST(files_write_answer_not_strict)
{
	struct envd_call call = slow_call();

	answer_with(serve_write_duplicate_member);
	ck_assert_code(envd_file_write(client, &call, "/f", "x", 1, NULL), HANGAR_EPROTOCOL);
}
END_TEST

/* A path or user that is not UTF-8 never goes into a URL: refused before anything is sent. */
START_TEST(files_path_not_utf8)
{
	struct envd_call call = slow_call();
	struct hbuf out = HBUF_INIT;

	answer_with(serve_write_not_array);
	ck_assert_code(envd_file_write(client, &call, "/f\xc0\xaf", "x", 1, NULL), HANGAR_EINVAL);
	ck_assert_code(envd_file_read(client, &call, "/f\xff", 1024, &out, NULL), HANGAR_EINVAL);
	call.user = "us\xed\xa0\x80r";
	ck_assert_code(envd_file_read(client, &call, "/f", 1024, &out, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(srv.accepted, 0);
	ck_assert_ptr_null(out.data);
}
END_TEST

/* ---- connection reuse ------------------------------------------------------------------------ */

static void serve_unary_ok(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
}

static void serve_stream_ok(int fd)
{
	uint8_t h[CONNECT_ENVELOPE_HEADER];
	char body[64];

	connect_envelope_header(h, CONNECT_FLAG_END_STREAM, 2);
	memcpy(body, h, sizeof(h));
	memcpy(body + sizeof(h), "{}", 2);
	if (rawhttp_send_str(fd, chunked_stream_head) == 0 && send_chunk(fd, body, sizeof(h) + 2) == 0)
		rawhttp_send_str(fd, "0\r\n\r\n");
}

START_TEST(connection_is_reused)
{
	struct envd_call call = slow_call();
	cJSON *resp = NULL;
	long n;

	__atomic_store_n(&srv.keep_alive, 1, __ATOMIC_RELEASE);
	answer_with(serve_unary_ok);
	for (int i = 0; i < 5; i++) {
		ck_assert_code(envd_unary(client, &call, "process.Process/List", NULL, &resp, NULL), 0);
		cJSON_Delete(resp);
	}
	answer_with(serve_stream_ok);
	for (int i = 0; i < 3; i++)
		ck_assert_code(run_stream(&call, NULL, &n), 0);
	answer_with(serve_unary_ok);
	ck_assert_code(envd_unary(client, &call, "process.Process/List", NULL, &resp, NULL), 0);
	cJSON_Delete(resp);
	ck_assert_int_eq(__atomic_load_n(&srv.accepted, __ATOMIC_ACQUIRE), 1);
}
END_TEST

static Suite *hostile_suite(void)
{
	Suite *s = suite_create("envd-hostile");
	TCase *tc;

	tc = tcase_create("streams");
	tcase_add_checked_fixture(tc, server_setup, server_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, stream_frame_over_limit);
	tcase_add_test(tc, stream_compressed_flag);
	tcase_add_test(tc, stream_connect_content_encoding);
	tcase_add_test(tc, stream_endless_keepalives);
	tcase_add_test(tc, stream_truncated_envelope);
	tcase_add_test(tc, stream_cut_mid_chunked_body);
	tcase_add_test(tc, stream_without_end_envelope);
	tcase_add_test(tc, stream_invalid_json);
	tcase_add_test(tc, stream_not_strict_json);
	tcase_add_test(tc, stream_request_not_utf8);
	tcase_add_test(tc, stream_end_with_error);
	tcase_add_test(tc, stream_data_after_end);
	tcase_add_test(tc, stream_http_401);
	suite_add_tcase(s, tc);

	tc = tcase_create("unary");
	tcase_add_checked_fixture(tc, server_setup, server_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, unary_gzip_answer);
	tcase_add_test(tc, unary_declared_over_limit);
	tcase_add_test(tc, unary_counted_over_limit);
	tcase_add_test(tc, unary_invalid_json);
	tcase_add_test(tc, unary_not_strict_json);
	tcase_add_test(tc, unary_endless_error_body);
	tcase_add_test(tc, garbage_instead_of_http);
	tcase_add_test(tc, hang_up_without_answer);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	tcase_add_checked_fixture(tc, server_setup, server_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, files_gzip_bomb);
	tcase_add_test(tc, files_content_length_over_limit);
	tcase_add_test(tc, files_counted_over_limit);
	tcase_add_test(tc, files_unknown_encoding);
	tcase_add_test(tc, files_corrupt_gzip);
	tcase_add_test(tc, files_truncated_gzip);
	tcase_add_test(tc, files_gzip_is_inflated);
	tcase_add_test(tc, files_identity_limits);
	tcase_add_test(tc, files_rest_errors);
	tcase_add_test(tc, files_write_answer_not_array);
	tcase_add_test(tc, files_write_answer_not_strict);
	tcase_add_test(tc, files_path_not_utf8);
	suite_add_tcase(s, tc);

	tc = tcase_create("reuse");
	tcase_add_checked_fixture(tc, server_setup, server_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, connection_is_reused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(hostile_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
