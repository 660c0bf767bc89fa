/*
 * The HTTP layer (libhangar/net/net.c) against real servers on loopback: a
 * small HTTP server run by a thread of the test (TCP or a unix socket) that
 * answers each request with raw bytes chosen by the test and records what
 * it was sent. Each case checks the class and details net_perform settles on.
 * Hostile answers never end by themselves, so a layer that kept reading
 * would run into the request's deadline and report NET_TIMEOUT instead.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "net/net.h"
#include "rawhttp.h"

/* ---- the server ------------------------------------------------------------------ */

typedef void (*serve_fn)(int fd);

static struct {
	int lfd;
	int stop[2];
	pthread_t thread;
	serve_fn serve;
	int requests;           /* requests read */
	char request[8192];     /* the last request's head, NUL-terminated */
	pthread_mutex_t mu;
	char url[128];
	char sock[108];
	char dir[64];
} srv;

/* Reads one request and keeps its head for the test; -1 when the client hung up. */
static int read_request(int fd)
{
	char head[sizeof(srv.request)];

	if (rawhttp_read_request(fd, head, sizeof(head)) < 0)
		return -1;
	pthread_mutex_lock(&srv.mu);
	memcpy(srv.request, head, sizeof(head));
	srv.requests++;
	pthread_mutex_unlock(&srv.mu);
	return 0;
}

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
		serve = __atomic_load_n(&srv.serve, __ATOMIC_ACQUIRE);
		if (read_request(fd) == 0 && serve)
			serve(fd);
		shutdown(fd, SHUT_WR);
		rawhttp_wait_for_close(fd, srv.stop[0]);
		close(fd);
	}
	return NULL;
}

static void start_thread(void)
{
	ck_assert_int_eq(pipe(srv.stop), 0);
	srv.serve = NULL;
	srv.requests = 0;
	srv.request[0] = '\0';
	pthread_mutex_init(&srv.mu, NULL);
	ck_assert_int_eq(pthread_create(&srv.thread, NULL, server_main, NULL), 0);
}

static void tcp_setup(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);

	srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv.lfd, 0);
	ck_assert_int_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(srv.lfd, 16), 0);
	ck_assert_int_eq(getsockname(srv.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(srv.url, sizeof(srv.url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	srv.sock[0] = '\0';
	start_thread();
}

static void unix_setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(srv.dir, sizeof(srv.dir), "/tmp/hangar-net-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(srv.dir));
	snprintf(srv.sock, sizeof(srv.sock), "%s/s", srv.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", srv.sock);
	srv.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(srv.lfd, 0);
	ck_assert_int_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(srv.lfd, 16), 0);
	snprintf(srv.url, sizeof(srv.url), "http://localhost");
	start_thread();
}

static void server_teardown(void)
{
	ck_assert_int_eq(write(srv.stop[1], "x", 1), 1);
	pthread_join(srv.thread, NULL);
	close(srv.stop[0]);
	close(srv.stop[1]);
	close(srv.lfd);
	pthread_mutex_destroy(&srv.mu);
	if (srv.sock[0]) {
		unlink(srv.sock);
		rmdir(srv.dir);
	}
}

static void answer_with(serve_fn fn)
{
	__atomic_store_n(&srv.serve, fn, __ATOMIC_RELEASE);
}

static int requests_seen(void)
{
	int n;

	pthread_mutex_lock(&srv.mu);
	n = srv.requests;
	pthread_mutex_unlock(&srv.mu);
	return n;
}

static int request_has(const char *needle)
{
	int r;

	pthread_mutex_lock(&srv.mu);
	r = strcasestr(srv.request, needle) != NULL;
	pthread_mutex_unlock(&srv.mu);
	return r;
}

/* A request with a generous deadline: reaching it means the layer missed the problem. */
static void request_to(struct net_request *rq, const char *path)
{
	static char url[256];

	snprintf(url, sizeof(url), "%s%s", srv.url, path);
	net_request_init(rq);
	rq->url = url;
	rq->unix_socket = srv.sock[0] ? srv.sock : NULL;
	rq->timeout_ms = 10000;
}

/* ---- answers ---------------------------------------------------------------------- */

static void serve_ok(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
}

static void serve_redirect(int fd)
{
	char a[512];

	snprintf(a, sizeof(a),
		 "HTTP/1.1 302 Found\r\nLocation: %s/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		 srv.url);
	rawhttp_send_str(fd, a);
}

static void serve_gzip(int fd)
{
	/* The bytes need not be real gzip: they must never reach an inflater of ours. */
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd");
}

static void serve_transfer_gzip(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n"
		     "4\r\nabcd\r\n");
}

static void serve_br(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd");
}

/* Announces a large body and sends the start of it, then waits. */
static void serve_declared_large(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789");
}

/* Sends a body that never ends, without announcing a length. */
static void serve_endless(int fd)
{
	char chunk[4096 + 16];

	memset(chunk, 'x', sizeof(chunk));
	memcpy(chunk, "1000\r\n", 6);
	memcpy(chunk + 6 + 4096, "\r\n", 2);
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") < 0)
		return;
	while (rawhttp_send_all(fd, chunk, 6 + 4096 + 2) == 0)
		;
}

static void serve_endless_error(int fd)
{
	char chunk[4096 + 16];

	memset(chunk, 'e', sizeof(chunk));
	memcpy(chunk, "1000\r\n", 6);
	memcpy(chunk + 6 + 4096, "\r\n", 2);
	if (rawhttp_send_str(fd, "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n") < 0)
		return;
	while (rawhttp_send_all(fd, chunk, 6 + 4096 + 2) == 0)
		;
}

/* Accepts, reads the request, and keeps the connection open without a word until the client hangs up. */
static void serve_nothing(int fd)
{
	rawhttp_wait_for_close(fd, srv.stop[0]);
}

static void serve_head_then_nothing(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

static void serve_hang_up(int fd)
{
	shutdown(fd, SHUT_RDWR);
}

static void serve_truncated(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789") == 0)
		shutdown(fd, SHUT_RDWR);
}

static void serve_garbage(int fd)
{
	rawhttp_send_str(fd, "SSH-2.0-OpenSSH_9.2\r\nnot http at all\r\n\r\n");
}

static void serve_404(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 23\r\n"
		     "Connection: close\r\n\r\n{\"message\":\"no route\"}\n");
}

static void serve_503_retry(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\nX-Next-Token: abc\r\n"
		     "Content-Length: 4\r\nConnection: close\r\n\r\nbusy");
}

static void serve_429_date(int fd)
{
	char a[256], date[64];
	time_t t = time(NULL) + 120;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	snprintf(a, sizeof(a),
		 "HTTP/1.1 429 Too Many Requests\r\nRetry-After: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		 date);
	rawhttp_send_str(fd, a);
}

static void serve_429_huge_retry(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 99999999\r\nContent-Length: 0\r\n"
		     "Connection: close\r\n\r\n");
}

/* A HEAD answer: it announces a length, and no body follows; the connection stays open. */
static void serve_head_answer(int fd)
{
	if (rawhttp_send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nETag: \"abc\"\r\n\r\n") == 0)
		rawhttp_wait_for_close(fd, srv.stop[0]);
}

static void serve_204(int fd)
{
	rawhttp_send_str(fd, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
}

/* ---- cases ---------------------------------------------------------------------------- */

START_TEST(plain_answer)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_ok);
	request_to(&rq, "/x");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_OK);
	ck_assert_int_eq(res.http_status, 200);
	ck_assert_int_eq(res.connected, 1);
	ck_assert_uint_eq(res.body.len, 5);
	ck_assert_str_eq(res.body.data, "hello");
	ck_assert_int_eq(res.retry_after_s, -1);
	/* Nothing that invites compression goes out. */
	ck_assert(!request_has("Accept-Encoding"));
	ck_assert(!request_has("TE:"));
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(redirect_not_followed)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_redirect);
	request_to(&rq, "/start");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.http_status, 302);
	ck_assert_int_eq(requests_seen(), 1);
	ck_assert(request_has("GET /start "));
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(compressed_answer_refused)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_gzip);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_ENCODED);
	ck_assert_int_eq(res.encoding, NET_ENC_GZIP);
	ck_assert_str_eq(res.encoding_name, "gzip");
	ck_assert_uint_eq(res.body.len, 0);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(transfer_compression_refused)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_transfer_gzip);
	request_to(&rq, "/");
	rq.allow_gzip = 1; /* gzip as a transfer coding is never taken, even then */
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_ENCODED);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(gzip_passed_raw_when_allowed)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_gzip);
	request_to(&rq, "/");
	rq.allow_gzip = 1;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_OK);
	ck_assert_int_eq(res.encoding, NET_ENC_GZIP);
	/* Not inflated by curl: the caller gets the bytes as sent. */
	ck_assert_str_eq(res.body.data, "abcd");
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(unknown_encoding_refused_even_with_gzip_allowed)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_br);
	request_to(&rq, "/");
	rq.allow_gzip = 1;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_ENCODED);
	ck_assert_str_eq(res.encoding_name, "br");
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(declared_oversized_refused)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_declared_large);
	request_to(&rq, "/");
	rq.max_body = 1000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_OVERSIZED);
	ck_assert_int_eq(res.content_length, 100000);
	ck_assert_uint_eq(res.body.len, 0);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(counted_oversized_refused)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_endless);
	request_to(&rq, "/");
	rq.max_body = 100000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_OVERSIZED);
	ck_assert_uint_le(res.body.len, 100000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

static size_t streamed;

static int count_body(void *ud, const char *data, size_t len)
{
	(void)ud;
	(void)data;
	streamed += len;
	return 0;
}

START_TEST(counted_oversized_refused_when_streamed)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_endless);
	request_to(&rq, "/");
	rq.max_body = 100000;
	rq.on_body = count_body;
	streamed = 0;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_OVERSIZED);
	ck_assert_uint_le(streamed, 100000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(endless_error_body_cut)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_endless_error);
	request_to(&rq, "/");
	rq.max_error_body = 10000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.http_status, 500);
	ck_assert_uint_gt(res.body.len, 0);
	ck_assert_uint_le(res.body.len, 10000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(connect_refused_is_unreachable)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	struct net_request rq;
	struct net_result res;
	char url[64];
	int fd;

	/* A port that was just free: bound, then closed without listening. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", ntohs(sa.sin_port));
	close(fd);
	net_request_init(&rq);
	rq.url = url;
	rq.timeout_ms = 10000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_UNREACHABLE);
	ck_assert_int_eq(res.http_status, 0);
	ck_assert_int_eq(res.connected, 0);
	ck_assert_str_ne(res.detail, "");
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(missing_unix_socket_is_unreachable)
{
	struct net_request rq;
	struct net_result res;

	net_request_init(&rq);
	rq.url = "http://localhost/health";
	rq.unix_socket = "/nonexistent/hangar-net-test.sock";
	rq.timeout_ms = 10000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_UNREACHABLE);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(silent_server_times_out)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_nothing);
	request_to(&rq, "/");
	rq.timeout_ms = 300;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_TIMEOUT);
	ck_assert_int_eq(res.timeout, NET_TIMEOUT_TOTAL);
	ck_assert_int_eq(res.connected, 1);
	ck_assert_int_eq(res.http_status, 0);
	/* Ended by the deadline, not by anything later (generous bound for loaded machines). */
	ck_assert_int_ge(res.elapsed_ms, 300);
	ck_assert_int_lt(res.elapsed_ms, 10000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(stalled_body_times_out)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_head_then_nothing);
	request_to(&rq, "/");
	rq.timeout_ms = 0; /* no whole deadline: only the stall timer ends it */
	rq.stall_ms = 1000;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_TIMEOUT);
	ck_assert_int_eq(res.timeout, NET_TIMEOUT_STALL);
	ck_assert_int_eq(res.http_status, 200);
	ck_assert_int_lt(res.elapsed_ms, 30000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(hang_up_after_request_is_dropped)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_hang_up);
	request_to(&rq, "/");
	rq.method = "POST";
	rq.body = "{}";
	rq.body_len = 2;
	rq.has_body = 1;
	rq.fresh_connect = 1;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_DROPPED);
	ck_assert_int_eq(res.connected, 1);
	ck_assert_int_eq(requests_seen(), 1);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(truncated_body_is_protocol)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_truncated);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_TRUNCATED);
	ck_assert_int_eq(res.http_status, 200);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(garbage_is_not_http)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_garbage);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_PROTOCOL);
	ck_assert_int_eq(res.protocol, NET_PROTO_NOT_HTTP);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(status_passed_through)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_404);
	request_to(&rq, "/nope");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.http_status, 404);
	ck_assert_ptr_nonnull(strstr(res.body.data, "no route"));
	ck_assert_int_eq(res.retry_after_s, -1);
	net_result_fini(&res);
	net_request_fini(&rq);

	answer_with(serve_204);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_OK);
	ck_assert_int_eq(res.http_status, 204);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

static char next_token[64];

static void note_token(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
	(void)ud;
	if (!name) {
		next_token[0] = '\0';
		return;
	}
	if (nlen == 12 && strncasecmp(name, "X-Next-Token", 12) == 0 && vlen < sizeof(next_token)) {
		memcpy(next_token, value, vlen);
		next_token[vlen] = '\0';
	}
}

START_TEST(retry_after_seconds)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_503_retry);
	request_to(&rq, "/");
	rq.on_header = note_token;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.http_status, 503);
	ck_assert_int_eq(res.retry_after_s, 7);
	ck_assert_str_eq(next_token, "abc");
	ck_assert_str_eq(res.body.data, "busy");
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(retry_after_date_and_bounds)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_429_date);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.http_status, 429);
	/* Two minutes from when the server wrote it, give or take the clock's second. */
	ck_assert_int_ge(res.retry_after_s, 60);
	ck_assert_int_le(res.retry_after_s, 121);
	net_result_fini(&res);
	net_request_fini(&rq);

	answer_with(serve_429_huge_retry);
	request_to(&rq, "/");
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_HTTP_STATUS);
	ck_assert_int_eq(res.retry_after_s, -1);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

static int cancel_now(void *ud)
{
	(void)ud;
	return 1;
}

START_TEST(cancel_hook_stops)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_nothing);
	request_to(&rq, "/");
	rq.cancel = cancel_now;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_CANCELLED);
	ck_assert_int_lt(res.elapsed_ms, 10000);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(only_http_and_https)
{
	static const char *const urls[] = { "file:///etc/passwd", "ftp://127.0.0.1/", "gopher://127.0.0.1/",
					    "dict://127.0.0.1/" };

	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		struct net_request rq;
		struct net_result res;

		net_request_init(&rq);
		rq.url = urls[i];
		rq.timeout_ms = 5000;
		ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_LOCAL);
		ck_assert_uint_eq(res.body.len, 0);
		net_result_fini(&res);
		net_request_fini(&rq);
	}
}
END_TEST

START_TEST(header_injection_refused)
{
	struct net_request rq;

	net_request_init(&rq);
	ck_assert_int_eq(net_header_add(&rq, "X-Token: %s", "a\r\nX-Evil: 1"), HANGAR_EINVAL);
	ck_assert_int_eq(net_header_add(&rq, "X-Token: %s", "fine"), 0);
	net_request_fini(&rq);
}
END_TEST

START_TEST(pool_serves_repeated_requests)
{
	struct net_pool *pool;

	ck_assert_int_eq(net_pool_new(&pool, 2), 0);
	for (int i = 0; i < 3; i++) {
		struct net_request rq;
		struct net_result res;

		answer_with(serve_ok);
		request_to(&rq, "/");
		ck_assert_int_eq(net_perform(pool, &rq, &res), NET_OK);
		ck_assert_str_eq(res.body.data, "hello");
		net_result_fini(&res);
		net_request_fini(&rq);
	}
	ck_assert_int_eq(requests_seen(), 3);
	net_pool_free(pool);
}
END_TEST

/* A HEAD is answered by headers alone: neither waited on for a body nor refused for its announced length. */
START_TEST(head_reads_no_body)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_head_answer);
	request_to(&rq, "/object");
	rq.method = "HEAD";
	rq.max_body = 10;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_OK);
	ck_assert_int_eq(res.http_status, 200);
	ck_assert_int_eq(res.content_length, 100000);
	ck_assert_uint_eq(res.body.len, 0);
	ck_assert(request_has("HEAD /object "));
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

#define SIGV4_USER "AKIDHANGARTEST01"
#define SIGV4_SECRET "hangar/secret+key/never-on-the-wire"

/*
 * A request signed with SigV4 carries the signature, never the secret; and
 * the handle it ran on, back in the pool, signs nothing after it.
 */
START_TEST(sigv4_signed_then_taken_off)
{
	struct net_request rq;
	struct net_result res;
	struct net_pool *pool;

	ck_assert_int_eq(net_pool_new(&pool, 1), 0);
	answer_with(serve_ok);
	request_to(&rq, "/bucket/key");
	rq.aws_sigv4 = "aws:amz:eu-west-1:s3";
	rq.auth_user = SIGV4_USER;
	rq.auth_secret = SIGV4_SECRET;
	ck_assert_int_eq(net_header_add(&rq, "x-amz-content-sha256: UNSIGNED-PAYLOAD"), 0);
	ck_assert_int_eq(net_perform(pool, &rq, &res), NET_OK);
	ck_assert(request_has("Authorization: AWS4-HMAC-SHA256 Credential=" SIGV4_USER "/"));
	ck_assert(request_has("/eu-west-1/s3/aws4_request"));
	ck_assert(request_has("x-amz-date:"));
	ck_assert(!request_has(SIGV4_SECRET));
	ck_assert(!request_has("hangar/secret"));
	net_result_fini(&res);
	net_request_fini(&rq);

	request_to(&rq, "/bucket/key");
	ck_assert_int_eq(net_perform(pool, &rq, &res), NET_OK);
	ck_assert_int_eq(requests_seen(), 2);
	ck_assert(!request_has("Authorization"));
	ck_assert(!request_has(SIGV4_USER));
	net_result_fini(&res);
	net_request_fini(&rq);
	net_pool_free(pool);
}
END_TEST

/* A signature asked for without its key pair is not sent unsigned. */
START_TEST(sigv4_without_keys_refused)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_ok);
	request_to(&rq, "/bucket/key");
	rq.aws_sigv4 = "aws:amz:eu-west-1:s3";
	rq.auth_user = SIGV4_USER;
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_LOCAL);
	ck_assert_int_eq(requests_seen(), 0);
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

START_TEST(unix_socket_answer)
{
	struct net_request rq;
	struct net_result res;

	answer_with(serve_ok);
	request_to(&rq, "/health");
	ck_assert_ptr_nonnull(rq.unix_socket);
	ck_assert_int_eq(net_perform(NULL, &rq, &res), NET_OK);
	ck_assert_str_eq(res.body.data, "hello");
	ck_assert(request_has("GET /health "));
	net_result_fini(&res);
	net_request_fini(&rq);
}
END_TEST

static Suite *net_suite(void)
{
	Suite *s = suite_create("net");
	TCase *tc = tcase_create("tcp");
	TCase *tu = tcase_create("unix");
	TCase *tn = tcase_create("no-server");

	tcase_add_checked_fixture(tc, tcp_setup, server_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, plain_answer);
	tcase_add_test(tc, redirect_not_followed);
	tcase_add_test(tc, compressed_answer_refused);
	tcase_add_test(tc, transfer_compression_refused);
	tcase_add_test(tc, gzip_passed_raw_when_allowed);
	tcase_add_test(tc, unknown_encoding_refused_even_with_gzip_allowed);
	tcase_add_test(tc, declared_oversized_refused);
	tcase_add_test(tc, counted_oversized_refused);
	tcase_add_test(tc, counted_oversized_refused_when_streamed);
	tcase_add_test(tc, endless_error_body_cut);
	tcase_add_test(tc, silent_server_times_out);
	tcase_add_test(tc, stalled_body_times_out);
	tcase_add_test(tc, hang_up_after_request_is_dropped);
	tcase_add_test(tc, truncated_body_is_protocol);
	tcase_add_test(tc, garbage_is_not_http);
	tcase_add_test(tc, status_passed_through);
	tcase_add_test(tc, retry_after_seconds);
	tcase_add_test(tc, retry_after_date_and_bounds);
	tcase_add_test(tc, cancel_hook_stops);
	tcase_add_test(tc, pool_serves_repeated_requests);
	tcase_add_test(tc, head_reads_no_body);
	tcase_add_test(tc, sigv4_signed_then_taken_off);
	tcase_add_test(tc, sigv4_without_keys_refused);
	suite_add_tcase(s, tc);

	tcase_add_checked_fixture(tu, unix_setup, server_teardown);
	tcase_set_timeout(tu, 60);
	tcase_add_test(tu, unix_socket_answer);
	suite_add_tcase(s, tu);

	tcase_set_timeout(tn, 60);
	tcase_add_test(tn, connect_refused_is_unreachable);
	tcase_add_test(tn, missing_unix_socket_is_unreachable);
	tcase_add_test(tn, only_http_and_https);
	tcase_add_test(tn, header_injection_refused);
	suite_add_tcase(s, tn);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(net_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
