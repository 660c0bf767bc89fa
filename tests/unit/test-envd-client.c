/*
 * The envd client (libhangar/envd/client.c) against a real hangar-envd,
 * started from $HANGAR_ENVD on a loopback port and on a unix socket.
 *
 * One daemon of each kind serves the whole suite (an unchecked fixture in
 * the runner); tests that need a differently configured daemon start their
 * own. Every daemon dies with the process that started it (PDEATHSIG), so a
 * failing test never leaves one behind.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "envd/client.h"
#include "pjson.h"
#include "clock.h"

/* ---- a hangar-envd child ------------------------------------------------------- */

struct daemon {
	pid_t pid;
	int port;                       /* TCP, or 0 with a socket */
	char socket_path[PATH_MAX];
	char base_url[64];
	struct envd_endpoint ep;
};

/* Reads the daemon's "ready[ <port>]\n" line, waiting at most 10 s. */
static int read_ready_line(int fd, char *line, size_t cap)
{
	int64_t deadline = clock_mono_ms() + 10000;
	size_t have = 0;

	while (have + 1 < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - clock_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			return -1;
		n = read(fd, line + have, cap - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1; /* it exited before it was ready */
		have += (size_t)n;
		line[have] = '\0';
		if (strchr(line, '\n'))
			return 0;
	}
	return -1;
}

/* Starts hangar-envd on port 0 (or on socket_path), plus extra flags. */
static void daemon_start(struct daemon *d, const char *socket_path, const char *const *extra)
{
	const char *envd = getenv("HANGAR_ENVD");
	const char *argv[24];
	char fdarg[16], line[64];
	int pfd[2], n = 0;

	ck_assert_msg(envd && *envd, "HANGAR_ENVD must name the hangar-envd binary");
	memset(d, 0, sizeof(*d));
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	argv[n++] = envd;
	if (socket_path) {
		argv[n++] = "-socket";
		argv[n++] = socket_path;
	} else {
		argv[n++] = "-port";
		argv[n++] = "0";
		argv[n++] = "-addr";
		argv[n++] = "127.0.0.1";
	}
	argv[n++] = "-ready-fd";
	argv[n++] = fdarg;
	for (; extra && *extra && n < 23; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;

	d->pid = fork();
	ck_assert_int_ge(d->pid, 0);
	if (d->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fcntl(pfd[1], F_SETFD, 0); /* the ready fd is the one thing it inherits */
		execv(envd, (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	ck_assert_msg(read_ready_line(pfd[0], line, sizeof(line)) == 0, "hangar-envd did not get ready");
	close(pfd[0]);
	if (socket_path) {
		ck_assert_str_eq(line, "ready\n");
		ck_assert_uint_lt(strlen(socket_path), sizeof(d->socket_path));
		memcpy(d->socket_path, socket_path, strlen(socket_path) + 1);
		snprintf(d->base_url, sizeof(d->base_url), "http://localhost");
		d->ep.socket_path = d->socket_path;
	} else {
		ck_assert_int_eq(sscanf(line, "ready %d", &d->port), 1);
		snprintf(d->base_url, sizeof(d->base_url), "http://127.0.0.1:%d", d->port);
	}
	d->ep.base_url = d->base_url;
}

static void daemon_stop(struct daemon *d)
{
	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
}

/* ---- the suite's shared daemons and scratch directory ------------------------------ */

static struct daemon tcp_envd, unix_envd;
static char scratch[PATH_MAX];
static char sock_path[PATH_MAX + 16];
static char user_name[256];

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static void suite_setup(void)
{
	struct passwd *pw = getpwuid(geteuid());

	ck_assert_ptr_nonnull(pw);
	snprintf(user_name, sizeof(user_name), "%s", pw->pw_name);
	snprintf(scratch, sizeof(scratch), "/tmp/hangar-envd-client-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
	snprintf(sock_path, sizeof(sock_path), "%s/envd.sock", scratch);
	daemon_start(&tcp_envd, NULL, NULL);
	daemon_start(&unix_envd, sock_path, NULL);
}

static void suite_teardown(void)
{
	daemon_stop(&tcp_envd);
	daemon_stop(&unix_envd);
	nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- helpers ------------------------------------------------------------------------ */

static struct envd_client *client;

static void client_setup(void)
{
	ck_assert_int_eq(envd_client_new(&client), 0);
}

static void client_teardown(void)
{
	envd_client_free(client);
	client = NULL;
}

static struct envd_call call_for(const struct envd_endpoint *ep)
{
	struct envd_call call = { .ep = ep, .deadline_ms = 20000 };

	return call;
}

static void scratch_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", scratch, name);
}

static cJSON *start_request(const char *cmd, const char *arg)
{
	cJSON *req = cJSON_CreateObject();
	cJSON *proc = cJSON_AddObjectToObject(req, "process");
	cJSON *args = cJSON_AddArrayToObject(proc, "args");

	cJSON_AddStringToObject(proc, "cmd", cmd);
	if (arg)
		cJSON_AddItemToArray(args, cJSON_CreateString(arg));
	return req;
}

/* Records what a Start stream delivers, in order. */
struct events {
	char order[16];         /* 's'tart, 'd'ata, 'e'nd; keepalives left out */
	size_t n;
	int pid;
	char out[256];
	size_t out_len;
	int exited;
	int *cancel_on_start;
	int stop_on_start;
};

static int record_event(const cJSON *msg, void *ctx)
{
	struct events *ev = ctx;
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(msg, "event");
	const cJSON *x;

	ck_assert_ptr_nonnull(e);
	if ((x = cJSON_GetObjectItemCaseSensitive(e, "start"))) {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(x, "pid");

		ev->pid = cJSON_IsNumber(pid) ? pid->valueint : -1;
		if (ev->n < sizeof(ev->order) - 1)
			ev->order[ev->n++] = 's';
		if (ev->cancel_on_start)
			*ev->cancel_on_start = 1;
		return ev->stop_on_start;
	}
	if ((x = cJSON_GetObjectItemCaseSensitive(e, "data"))) {
		unsigned char *bytes = NULL;
		size_t len = 0;

		if (pjson_bytes(x, "stdout", NULL, &bytes, &len) == 1 && ev->out_len + len < sizeof(ev->out)) {
			memcpy(ev->out + ev->out_len, bytes, len);
			ev->out_len += len;
		}
		free(bytes);
		if (ev->n < sizeof(ev->order) - 1)
			ev->order[ev->n++] = 'd';
	} else if ((x = cJSON_GetObjectItemCaseSensitive(e, "end"))) {
		ev->exited = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "exited"));
		if (ev->n < sizeof(ev->order) - 1)
			ev->order[ev->n++] = 'e';
	}
	return 0;
}

/* ---- RPCs ------------------------------------------------------------------------------ */

static void check_list(const struct envd_endpoint *ep)
{
	struct envd_call call = call_for(ep);
	struct envd_status st;
	cJSON *req = cJSON_CreateObject(), *resp = NULL;
	int rc;

	rc = envd_unary(client, &call, "process.Process/List", req, &resp, &st);
	ck_assert_msg(rc == 0, "List: %d %s", rc, hangar_error_last()->message);
	ck_assert_ptr_nonnull(resp);
	ck_assert(cJSON_IsObject(resp));
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_int_eq(st.code, CONNECT_OK);
	ck_assert_int_eq(st.transport_failed, 0);
	cJSON_Delete(resp);
	cJSON_Delete(req);
}

START_TEST(unary_list_tcp)
{
	check_list(&tcp_envd.ep);
	/* Again on the same client: the pooled handle and its connection are reused. */
	check_list(&tcp_envd.ep);
}
END_TEST

START_TEST(unary_list_unix_socket)
{
	check_list(&unix_envd.ep);
	check_list(&unix_envd.ep);
}
END_TEST

START_TEST(unary_list_with_user_and_headers)
{
	const char *extra[] = { "E2b-Sandbox-Id: test", "E2b-Sandbox-Port: 49983", NULL };
	struct envd_endpoint ep = tcp_envd.ep;

	ep.user = user_name;
	ep.headers = extra;
	check_list(&ep);
}
END_TEST

START_TEST(unary_null_request_is_empty_message)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	cJSON *resp = NULL;

	ck_assert_int_eq(envd_unary(client, &call, "/process.Process/List", NULL, &resp, NULL), 0);
	ck_assert(cJSON_IsObject(resp));
	cJSON_Delete(resp);
}
END_TEST

START_TEST(start_echo_in_order)
{
	struct envd_call call = call_for(&unix_envd.ep);
	struct envd_status st;
	struct events ev = { 0 };
	cJSON *req = start_request("echo", "hi");
	int rc;

	call.keepalive_sec = 50;
	rc = envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st);
	ck_assert_msg(rc == 0, "Start: %d %s", rc, hangar_error_last()->message);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_int_ge(ev.n, 3);
	ck_assert_int_eq(ev.order[0], 's');
	ck_assert_int_eq(ev.order[ev.n - 1], 'e');
	for (size_t i = 1; i + 1 < ev.n; i++)
		ck_assert_int_eq(ev.order[i], 'd');
	ck_assert_int_gt(ev.pid, 0);
	ck_assert_uint_eq(ev.out_len, 3);
	ck_assert(memcmp(ev.out, "hi\n", 3) == 0);
	ck_assert(ev.exited);
	cJSON_Delete(req);
}
END_TEST

START_TEST(connect_error_is_mapped)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	cJSON *req = cJSON_CreateObject(), *resp = (cJSON *)1;
	const hangar_error *e;

	cJSON_AddNumberToObject(cJSON_AddObjectToObject(req, "process"), "pid", 4194000);
	cJSON_AddStringToObject(req, "signal", "SIGNAL_SIGKILL");
	ck_assert_int_eq(envd_unary(client, &call, "process.Process/SendSignal", req, &resp, &st), HANGAR_ENOTFOUND);
	ck_assert_ptr_null(resp);
	e = hangar_error_last();
	ck_assert_int_eq(e->code, HANGAR_ENOTFOUND);
	ck_assert_int_eq(e->category, HANGAR_ERRCAT_SANDBOX);
	ck_assert_str_eq(e->provider_code, "not_found");
	ck_assert_int_eq(e->http_status, 404);
	ck_assert_ptr_nonnull(strstr(e->message, "process.Process/SendSignal"));
	ck_assert_int_eq(st.code, CONNECT_NOT_FOUND);
	ck_assert_int_eq(st.http_status, 404);
	ck_assert_int_eq(st.transport_failed, 0);
	ck_assert_int_eq(st.timed_out, 0);
	cJSON_Delete(req);
}
END_TEST

static int count_msgs(const cJSON *msg, void *ctx)
{
	(void)msg;
	++*(int *)ctx;
	return 0;
}

START_TEST(stream_error_in_end_message)
{
	/* Connect to a pid envd does not know: HTTP 200 with only the error end envelope. */
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	cJSON *req = cJSON_CreateObject();
	int n = 0;

	cJSON_AddNumberToObject(cJSON_AddObjectToObject(req, "process"), "pid", 4194000);
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Connect", req, count_msgs, &n, &st),
			 HANGAR_ENOTFOUND);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_int_eq(st.code, CONNECT_NOT_FOUND);
	ck_assert_str_eq(hangar_error_last()->provider_code, "not_found");
	ck_assert_int_eq(n, 0);
	cJSON_Delete(req);
}
END_TEST

START_TEST(unknown_method_is_unsupported)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	cJSON *resp = NULL;

	ck_assert_int_eq(envd_unary(client, &call, "process.Process/NoSuchMethod", NULL, &resp, &st),
			 HANGAR_EUNSUPPORTED);
	ck_assert_int_eq(st.http_status, 404);
}
END_TEST

START_TEST(bad_arguments)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_endpoint noep = { 0 };
	struct envd_call nocall = { .ep = &noep };
	cJSON *resp = NULL;

	ck_assert_int_eq(envd_unary(client, &call, "a b", NULL, &resp, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_unary(client, &call, NULL, NULL, &resp, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_unary(client, NULL, "x/Y", NULL, &resp, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_unary(client, &nocall, "x/Y", NULL, &resp, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_stream(client, &call, "x/Y", NULL, NULL, NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_file_read(client, &call, "", 10, NULL, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_file_download(client, &call, "/x", -1, 0, NULL), HANGAR_EINVAL);
	ck_assert_int_eq(envd_client_new(NULL), HANGAR_EINVAL);
	envd_client_free(NULL);
}
END_TEST

START_TEST(health)
{
	struct envd_call call = call_for(&unix_envd.ep);
	struct envd_status st;

	ck_assert_int_eq(envd_health(client, &call, &st), 0);
	ck_assert_int_eq(st.http_status, 204);
}
END_TEST

/* ---- the access token ---------------------------------------------------------------------- */

START_TEST(token_required)
{
	static const char token[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char token_file[PATH_MAX + 16];
	const char *extra[] = { "-token-file", token_file, NULL };
	struct daemon d;
	struct envd_endpoint ep;
	struct envd_call call;
	struct envd_status st;
	struct events ev = { 0 };
	cJSON *resp = NULL, *req;
	const hangar_error *e;
	int fd;

	snprintf(token_file, sizeof(token_file), "%s/token-XXXXXX", scratch);
	fd = mkstemp(token_file); /* 0600, as hangar-envd insists */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, token, strlen(token)), (ssize_t)strlen(token));
	close(fd);
	daemon_start(&d, NULL, extra);
	ep = d.ep;
	call = call_for(&ep);

	ck_assert_int_eq(envd_unary(client, &call, "process.Process/List", NULL, &resp, &st), HANGAR_EREFUSED);
	e = hangar_error_last();
	ck_assert_int_eq(st.http_status, 401);
	ck_assert_int_eq(st.code, CONNECT_UNAUTHENTICATED);
	ck_assert_str_eq(e->provider_code, "unauthenticated");

	req = start_request("true", NULL);
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st),
			 HANGAR_EREFUSED);
	ck_assert_int_eq(st.http_status, 401);
	ck_assert_int_eq(ev.n, 0);

	ep.access_token = "not-the-token";
	ck_assert_int_eq(envd_unary(client, &call, "process.Process/List", NULL, &resp, &st), HANGAR_EREFUSED);
	ck_assert_ptr_null(strstr(hangar_error_last()->message, "not-the-token"));

	ep.access_token = token;
	ck_assert_int_eq(envd_unary(client, &call, "process.Process/List", NULL, &resp, &st), 0);
	cJSON_Delete(resp);
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st), 0);
	ck_assert_int_eq(ev.order[ev.n - 1], 'e');
	cJSON_Delete(req);
	daemon_stop(&d);
}
END_TEST

/* ---- /files ------------------------------------------------------------------------------------ */

START_TEST(file_round_trip_binary)
{
	struct envd_endpoint ep = tcp_envd.ep;
	struct envd_call call;
	struct envd_status st;
	struct hbuf out = HBUF_INIT;
	unsigned char data[4096];
	char path[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7 + (i >> 8)); /* every byte value, NULs included */
	ep.user = user_name;
	call = call_for(&ep);
	scratch_path(path, sizeof(path), "dir with space/bin ü.dat");
	ck_assert_int_eq(envd_file_write(client, &call, path, data, sizeof(data), &st), 0);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_int_eq(envd_file_read(client, &call, path, 1 << 20, &out, &st), 0);
	ck_assert_uint_eq(out.len, sizeof(data));
	ck_assert(memcmp(out.data, data, sizeof(data)) == 0);
	/* No limit at all is a limit too: nothing overflows computing room for it. */
	ck_assert_int_eq(envd_file_read(client, &call, path, SIZE_MAX, &out, &st), 0);
	ck_assert_uint_eq(out.len, sizeof(data));

	/* Overwrite with an empty file: read gives an empty, terminated buffer. */
	ck_assert_int_eq(envd_file_write(client, &call, path, NULL, 0, &st), 0);
	ck_assert_int_eq(envd_file_read(client, &call, path, 1 << 20, &out, &st), 0);
	ck_assert_uint_eq(out.len, 0);
	ck_assert_ptr_nonnull(out.data);
	hbuf_free(&out);
}
END_TEST

START_TEST(file_read_limit)
{
	struct envd_call call = call_for(&unix_envd.ep);
	struct hbuf out = HBUF_INIT;
	char data[1000], path[PATH_MAX + 32];

	memset(data, 'x', sizeof(data));
	scratch_path(path, sizeof(path), "limit.txt");
	ck_assert_int_eq(envd_file_write(client, &call, path, data, sizeof(data), NULL), 0);
	ck_assert_int_eq(envd_file_read(client, &call, path, sizeof(data) - 1, &out, NULL), HANGAR_ETOOLARGE);
	ck_assert_ptr_null(out.data); /* nothing kept */
	ck_assert_int_eq(hangar_error_last()->code, HANGAR_ETOOLARGE);
	ck_assert_int_eq(envd_file_read(client, &call, path, sizeof(data), &out, NULL), 0);
	ck_assert_uint_eq(out.len, sizeof(data));
	hbuf_free(&out);
}
END_TEST

START_TEST(file_errors)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	struct hbuf out = HBUF_INIT;
	char path[PATH_MAX + 32];

	scratch_path(path, sizeof(path), "no-such-file");
	ck_assert_int_eq(envd_file_read(client, &call, path, 1024, &out, &st), HANGAR_EFILE);
	ck_assert_int_eq(st.http_status, 404);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "does not exist"));
	ck_assert_int_eq(envd_file_read(client, &call, scratch, 1024, &out, &st), HANGAR_EFILE);
	ck_assert_int_eq(st.http_status, 400);

	/* Writing over a directory, and below a file. */
	ck_assert_int_eq(envd_file_write(client, &call, scratch, "x", 1, &st), HANGAR_EFILE);
	ck_assert_int_eq(st.http_status, 400);
	scratch_path(path, sizeof(path), "plain");
	ck_assert_int_eq(envd_file_write(client, &call, path, "x", 1, &st), 0);
	scratch_path(path, sizeof(path), "plain/below");
	ck_assert_int_eq(envd_file_write(client, &call, path, "x", 1, &st), HANGAR_EFILE);
	ck_assert_int_eq(st.http_status, 500);

	/* An unknown user is refused. */
	{
		struct envd_call as_nobody = call;

		as_nobody.user = "no-such-user-hangar";
		ck_assert_int_eq(envd_file_read(client, &as_nobody, path, 1024, &out, &st), HANGAR_EREFUSED);
		ck_assert_int_eq(st.http_status, 401);
	}
	ck_assert_ptr_null(out.data);
}
END_TEST

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A temp file of len pseudo-random bytes, positioned at its start. */
static int random_file(size_t len, uint64_t seed)
{
	char tmpl[PATH_MAX + 32];
	uint64_t buf[8192];
	int fd;

	scratch_path(tmpl, sizeof(tmpl), "rand-XXXXXX");
	fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	unlink(tmpl);
	while (len > 0) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
			buf[i] = xorshift(&seed);
		ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
		len -= n;
	}
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static int empty_file(void)
{
	char tmpl[PATH_MAX + 32];
	int fd;

	scratch_path(tmpl, sizeof(tmpl), "dl-XXXXXX");
	fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	unlink(tmpl);
	return fd;
}

static void assert_same_files(int a, int b)
{
	static char ba[1 << 16], bb[1 << 16];
	off_t sa = lseek(a, 0, SEEK_END), sb = lseek(b, 0, SEEK_END);

	ck_assert_int_eq(sa, sb);
	for (off_t off = 0; off < sa; off += (off_t)sizeof(ba)) {
		ssize_t na = pread(a, ba, sizeof(ba), off), nb = pread(b, bb, sizeof(bb), off);

		ck_assert_int_gt(na, 0);
		ck_assert_int_eq(na, nb);
		ck_assert_msg(memcmp(ba, bb, (size_t)na) == 0, "files differ near offset %lld", (long long)off);
	}
}

START_TEST(upload_download_20mib)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	int src = random_file(20u << 20, 0x9e3779b97f4a7c15ull), dst = empty_file();
	char path[PATH_MAX + 32];

	scratch_path(path, sizeof(path), "big/20mib.bin");
	ck_assert_msg(envd_file_upload(client, &call, path, src, &st) == 0, "upload: %s",
		      hangar_error_last()->message);
	ck_assert_int_eq(st.http_status, 200);
	ck_assert_msg(envd_file_download(client, &call, path, dst, 0, &st) == 0, "download: %s",
		      hangar_error_last()->message);
	assert_same_files(src, dst);
	close(src);
	close(dst);
}
END_TEST

struct pipe_feed {
	int fd;
	size_t len;
	uint64_t seed;
};

static void *feed_pipe(void *arg)
{
	struct pipe_feed *f = arg;
	uint64_t buf[1024];

	while (f->len > 0) {
		size_t n = f->len < sizeof(buf) ? f->len : sizeof(buf);

		for (size_t i = 0; i < sizeof(buf) / sizeof(buf[0]); i++)
			buf[i] = xorshift(&f->seed);
		if (write(f->fd, buf, n) != (ssize_t)n)
			break;
		f->len -= n;
	}
	close(f->fd);
	return NULL;
}

START_TEST(upload_from_pipe_is_chunked)
{
	struct envd_call call = call_for(&unix_envd.ep);
	struct pipe_feed feed;
	pthread_t t;
	int p[2], want = random_file(3u << 20, 42), got = empty_file();
	char path[PATH_MAX + 32];

	ck_assert_int_eq(pipe(p), 0);
	feed.fd = p[1];
	feed.len = 3u << 20;
	feed.seed = 42;
	ck_assert_int_eq(pthread_create(&t, NULL, feed_pipe, &feed), 0);
	scratch_path(path, sizeof(path), "piped.bin");
	ck_assert_msg(envd_file_upload(client, &call, path, p[0], NULL) == 0, "upload: %s",
		      hangar_error_last()->message);
	pthread_join(t, NULL);
	close(p[0]);
	ck_assert_int_eq(envd_file_download(client, &call, path, got, 0, NULL), 0);
	assert_same_files(want, got);
	close(want);
	close(got);
}
END_TEST

START_TEST(download_to_bad_fd_is_local_error)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	char path[PATH_MAX + 32];
	int p[2];

	scratch_path(path, sizeof(path), "for-bad-fd");
	ck_assert_int_eq(envd_file_write(client, &call, path, "abc", 3, NULL), 0);
	ck_assert_int_eq(pipe(p), 0);
	close(p[0]); /* writing to p[1] now fails with EPIPE */
	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(envd_file_download(client, &call, path, p[1], 0, NULL), HANGAR_EOS);
	ck_assert_int_eq(hangar_error_last()->os_errno, EPIPE);
	close(p[1]);
}
END_TEST

/* ---- deadlines, cancellation, dead endpoints ------------------------------------------------------ */

START_TEST(call_deadline)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	struct events ev = { 0 };
	cJSON *req = start_request("sleep", "5");

	call.deadline_ms = 300;
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st),
			 HANGAR_ETIMEOUT);
	ck_assert_int_eq(st.timed_out, 1);
	ck_assert_int_eq(st.transport_failed, 0);
	ck_assert_ptr_nonnull(strstr(hangar_error_last()->message, "deadline of 300 ms"));
	ck_assert_int_eq(ev.order[0], 's');
	cJSON_Delete(req);
}
END_TEST

START_TEST(connect_timeout_header)
{
	/* Connect-Timeout-Ms: envd ends Start itself with deadline_exceeded; our deadline did not pass. */
	struct envd_call call = call_for(&unix_envd.ep);
	struct envd_status st;
	struct events ev = { 0 };
	cJSON *req = start_request("sleep", "5");

	call.connect_timeout_ms = 300;
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st),
			 HANGAR_ETIMEOUT);
	ck_assert_int_eq(st.timed_out, 0);
	ck_assert_int_eq(st.code, CONNECT_DEADLINE_EXCEEDED);
	ck_assert_str_eq(hangar_error_last()->provider_code, "deadline_exceeded");
	cJSON_Delete(req);
}
END_TEST

static int flag_raised(void *arg)
{
	return __atomic_load_n((int *)arg, __ATOMIC_ACQUIRE);
}

START_TEST(cancel_flag_stops_stream)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct envd_status st;
	int cancel = 0;
	struct events ev = { 0 };
	cJSON *req = start_request("sleep", "5");

	/* The flag is raised from the callback; the transfer notices it on its own. */
	ev.cancel_on_start = &cancel;
	call.cancel = flag_raised;
	call.cancel_arg = &cancel;
	herr_clear();
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, &st),
			 ENVD_CANCELLED);
	ck_assert_int_eq(hangar_error_last()->code, HANGAR_OK);
	ck_assert_int_eq(st.timed_out, 0);
	ck_assert_int_eq(ev.n, 1);
	cJSON_Delete(req);
}
END_TEST

START_TEST(callback_stops_stream)
{
	struct envd_call call = call_for(&tcp_envd.ep);
	struct events ev = { .stop_on_start = 1 };
	cJSON *req = start_request("sleep", "5");

	herr_clear();
	ck_assert_int_eq(envd_stream(client, &call, "process.Process/Start", req, record_event, &ev, NULL),
			 ENVD_CANCELLED);
	ck_assert_int_eq(hangar_error_last()->code, HANGAR_OK);
	cJSON_Delete(req);
	/* The client is still good afterwards. */
	check_list(&tcp_envd.ep);
}
END_TEST

START_TEST(dead_socket_is_unavailable)
{
	struct envd_endpoint ep = { .base_url = "http://localhost" };
	struct envd_call call = call_for(&ep);
	struct envd_status st;
	cJSON *resp = NULL;
	char path[PATH_MAX + 32];
	const hangar_error *e;

	scratch_path(path, sizeof(path), "nobody-listens.sock");
	ep.socket_path = path;
	ck_assert_int_eq(envd_unary(client, &call, "process.Process/List", NULL, &resp, &st), HANGAR_EUNAVAILABLE);
	e = hangar_error_last();
	ck_assert_int_eq(e->category, HANGAR_ERRCAT_NET);
	ck_assert_int_eq(st.transport_failed, 1);
	ck_assert_int_eq(st.http_status, 0);
	ck_assert_int_eq(envd_health(client, &call, &st), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.transport_failed, 1);
}
END_TEST

START_TEST(dead_port_is_unavailable)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	struct envd_endpoint ep;
	struct envd_call call;
	struct envd_status st;
	char url[64];
	int s = socket(AF_INET, SOCK_STREAM, 0);

	/* A port that was just free: bound, never listened on. */
	ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&sa, &sl), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	memset(&ep, 0, sizeof(ep));
	ep.base_url = url;
	call = call_for(&ep);
	ck_assert_int_eq(envd_file_write(client, &call, "/tmp/x", "x", 1, &st), HANGAR_EUNAVAILABLE);
	ck_assert_int_eq(st.transport_failed, 1);
	close(s);
}
END_TEST

/* ---- many threads, one client ---------------------------------------------------------------------- */

struct worker {
	pthread_t t;
	int id;
	int failures;
	char last_error[256];
};

static void *work(void *arg)
{
	struct worker *w = arg;
	const struct envd_endpoint *ep = (w->id & 1) ? &unix_envd.ep : &tcp_envd.ep;
	struct envd_call call = call_for(ep);
	char path[PATH_MAX + 32], data[64];
	struct hbuf out = HBUF_INIT;

	for (int i = 0; i < 20; i++) {
		cJSON *resp = NULL;
		int len = snprintf(data, sizeof(data), "worker %d round %d", w->id, i);
		char name[32];

		snprintf(name, sizeof(name), "worker-%d", w->id);
		scratch_path(path, sizeof(path), name);
		if (envd_unary(client, &call, "process.Process/List", NULL, &resp, NULL) != 0 ||
		    envd_file_write(client, &call, path, data, (size_t)len, NULL) != 0 ||
		    envd_file_read(client, &call, path, 1024, &out, NULL) != 0 || out.len != (size_t)len ||
		    memcmp(out.data, data, (size_t)len) != 0) {
			w->failures++;
			snprintf(w->last_error, sizeof(w->last_error), "%s", hangar_error_last()->message);
		}
		cJSON_Delete(resp);
	}
	hbuf_free(&out);
	return NULL;
}

START_TEST(concurrent_calls)
{
	struct worker w[8];

	for (int i = 0; i < 8; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].id = i;
		ck_assert_int_eq(pthread_create(&w[i].t, NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(w[i].t, NULL);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(w[i].failures == 0, "worker %d: %d failures, last: %s", i, w[i].failures,
			      w[i].last_error);
}
END_TEST

static Suite *envd_client_suite(void)
{
	Suite *s = suite_create("envd-client");
	TCase *tc;

	tc = tcase_create("rpc");
	tcase_add_unchecked_fixture(tc, suite_setup, suite_teardown);
	tcase_add_checked_fixture(tc, client_setup, client_teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, unary_list_tcp);
	tcase_add_test(tc, unary_list_unix_socket);
	tcase_add_test(tc, unary_list_with_user_and_headers);
	tcase_add_test(tc, unary_null_request_is_empty_message);
	tcase_add_test(tc, start_echo_in_order);
	tcase_add_test(tc, connect_error_is_mapped);
	tcase_add_test(tc, stream_error_in_end_message);
	tcase_add_test(tc, unknown_method_is_unsupported);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, health);
	tcase_add_test(tc, token_required);
	tcase_add_test(tc, file_round_trip_binary);
	tcase_add_test(tc, file_read_limit);
	tcase_add_test(tc, file_errors);
	tcase_add_test(tc, upload_download_20mib);
	tcase_add_test(tc, upload_from_pipe_is_chunked);
	tcase_add_test(tc, download_to_bad_fd_is_local_error);
	tcase_add_test(tc, call_deadline);
	tcase_add_test(tc, connect_timeout_header);
	tcase_add_test(tc, cancel_flag_stops_stream);
	tcase_add_test(tc, callback_stops_stream);
	tcase_add_test(tc, dead_socket_is_unavailable);
	tcase_add_test(tc, dead_port_is_unavailable);
	tcase_add_test(tc, concurrent_calls);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(envd_client_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
