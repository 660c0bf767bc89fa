/* The edge proxy: E2B's client proxy and CubeProxy in front of each sandbox's envd. */
#define _GNU_SOURCE
#include "fake-e2b.h"

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

/* Nothing listens on a user port of a running sandbox [E2B, Cube]. */
static void edge_port_closed(int fd, const char *id, int port)
{
	cJSON *o;

	if (is_cube()) {
		edge_simple(fd, 404, "Not Found", "not found");
		return;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "sandboxId", id);
	cJSON_AddStringToObject(o, "message", "The sandbox is running but port is not open");
	cJSON_AddNumberToObject(o, "port", port);
	cJSON_AddNumberToObject(o, "code", 502);
	edge_json(fd, 502, "Bad Gateway", o);
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
	int cfd = (int)(intptr_t)arg, ufd = -1, port = 0, up_port = 0;
	char *buf = malloc(EDGE_HEAD_MAX + 1), *up = NULL, *hend = NULL, id[80] = "";
	size_t n = 0, up_len = 0, head_len;
	struct edge_head h;
	struct sandbox *sb;
	int64_t deadline = clock_mono_ms() + 60000;

	if (!buf)
		goto out;
	while (!hend) {
		struct pollfd pfd = { .fd = cfd, .events = POLLIN };
		int64_t left = deadline - clock_mono_ms();
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
	/* Routing [E2B, Cube]. */
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
	/* Traffic token: every port on Cube, all but envd's on E2B [Cube]. */
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
	if (port == ENVD_PORT && !is_cube() && sb->envd_token[0] && !envd_auth_exempt(h.method, h.path) &&
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
	/* The fake's sandboxes run on the host: a user port is the host's own. */
	up_port = port == ENVD_PORT ? sb->envd_port : port;
	if (is_cube() && sb->timeout_s >= 0)
		set_expiry_locked(sb, expiry_after(sb->timeout_s)); /* idle window [Cube] */
	pthread_mutex_unlock(&g.lock);

	{
		const char *route = !strcmp(h.method, "POST") && !strcmp(h.path, "/process.Process/Start") ? "exec"
				    : !strcmp(h.method, "GET") && !strncmp(h.path, "/files", 6)          ? "files"
													: NULL;
		struct fault f;

		if (port == ENVD_PORT && route && take_edge_fault(route, &f)) {
			if (edge_envd_fault(cfd, f.envd, buf, head_len, n) < 0)
				edge_simple(cfd, 500, "Internal Server Error", "unknown envd fault");
			goto out;
		}
	}
	ufd = connect_local(up_port);
	if (ufd < 0) {
		if (port == ENVD_PORT)
			edge_simple(cfd, 502, "Bad Gateway", "upstream unreachable");
		else
			edge_port_closed(cfd, id, port);
		goto out;
	}
	vlog("edge: %s %s → sandbox %s (port %d at :%d)", h.method, h.path, id, port, up_port);
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

void *edge_main(void *arg)
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
