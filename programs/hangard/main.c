/*
 * hangard(8): the HTTP control API over libhangar.
 *
 *   hangard [-config FILE] [-ready-fd FD] [-addr A] [-port N] [-tokens PATH]
 *           [-SETTING VALUE]...          (any HANGARD_* setting, e.g. -max-body-bytes)
 *   hangard hash-token [NAME [SCOPES]] < token
 *   hangard routes [e2b] | errors | version
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "hangard.h"
#include "e2b.h"

void errors_print(void);

static void usage(void)
{
	fprintf(stderr, "usage: hangard [-config FILE] [-ready-fd FD] [-addr ADDR] [-port PORT] [-tokens PATH]\n"
			"               [-SETTING VALUE]...   (any HANGARD_* setting: -max-body-bytes 65536)\n"
			"       hangard hash-token [NAME [SCOPES]] < token\n"
			"       hangard routes [e2b] | errors | version\n");
}

/* "-max-body-bytes" -> "HANGARD_MAX_BODY_BYTES"; "-tokens" -> HANGARD_TOKENS_FILE. */
static char *flag_setting(const char *flag)
{
	size_t n = strlen(flag);
	char *s;
	if (strcmp(flag, "tokens") == 0)
		return strdup("HANGARD_TOKENS_FILE");
	s = malloc(n + 9);
	if (!s)
		return NULL;
	memcpy(s, "HANGARD_", 8);
	for (size_t i = 0; i <= n; i++) {
		char c = flag[i];
		s[8 + i] = c == '-' ? '_' : (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
	}
	return s;
}

static void on_log(int level, const char *message, void *payload)
{
	cJSON *line = cJSON_CreateObject();
	(void)payload;
	cJSON_AddStringToObject(line, "msg", "library");
	cJSON_AddStringToObject(line, "level", level <= HANGAR_LOG_ERROR     ? "error"
					       : level <= HANGAR_LOG_WARNING ? "warning"
					       : level <= HANGAR_LOG_INFO    ? "info"
									     : "debug");
	cJSON_AddStringToObject(line, "detail", message);
	log_line(line);
}

static int make_dirs(const char *path)
{
	char *p = strdup(path);
	int rc = 0;
	if (!p)
		return -1;
	for (char *s = p + 1; *s && rc == 0; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				rc = -1;
			*s = '/';
		}
	if (rc == 0 && mkdir(p, 0700) < 0 && errno != EEXIST)
		rc = -1;
	free(p);
	return rc;
}

/*
 * Room for every connection HANGARD_MAX_CONNECTIONS allows, and the files
 * and sockets the library opens besides: the soft file limit (often 1024)
 * goes up to the hard one when it is short.
 */
static void raise_file_limit(const struct hangard_config *cfg)
{
	rlim_t want = (rlim_t)cfg->max_connections + 256;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < want) {
		cJSON *line = cJSON_CreateObject();

		cJSON_AddStringToObject(line, "msg", "the file limit is below HANGARD_MAX_CONNECTIONS");
		sjson_add_int64(line, "limit", (int64_t)rl.rlim_cur);
		sjson_add_int64(line, "max_connections", cfg->max_connections);
		log_line(line);
	}
}

static int run(struct hangard_config *cfg, struct hangard_setting *lib, size_t n_lib, int ready_fd)
{
	struct server srv = { .cfg = cfg };
	hangar_buf v = HANGAR_BUF_INIT;
	sigset_t set;
	unsigned port = 0;
	int sig, rc = 1;
	char *tmp = NULL;

	/*
	 * Every worker thread that mallocs would otherwise get an arena of its
	 * own and keep its pages: two arenas serve a pool of short handlers as
	 * well, and keep the resident set down after a burst of requests.
	 * The mmap threshold is fixed too: glibc otherwise raises it to the size
	 * of every large block freed, after which such blocks (a command's
	 * output, a file in transit) come from the heap and their pages stay
	 * resident; 8 MiB more after a burst of status requests was seen.
	 */
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, 2);
#endif
#ifdef M_MMAP_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
	raise_file_limit(cfg);
	if (!cfg->tokens_file) {
		fprintf(stderr, "hangard: HANGARD_TOKENS_FILE (or -tokens) is required: no token, no access\n");
		return 1;
	}
	srv.tokens = tokens_load(cfg->tokens_file);
	if (!srv.tokens)
		return 1;
	if (hangar_ctx_new(&srv.ctx, 0) < 0) {
		fprintf(stderr, "hangard: %s\n", hangar_error_last()->message);
		goto out;
	}
	/* A client is told at once that a session is busy (409, Retry-After): it
	 * holds the timeout, not hangard. Set the variable to wait instead. */
	if (!getenv("HANGAR_SESSION_BUSY_WAIT_SECONDS"))
		hangar_ctx_set(srv.ctx, "HANGAR_SESSION_BUSY_WAIT_SECONDS", "0");
	for (size_t i = 0; i < n_lib; i++)
		if (hangar_ctx_set(srv.ctx, lib[i].name, lib[i].value) < 0) {
			fprintf(stderr, "hangard: %s: %s\n", lib[i].name, hangar_error_last()->message);
			goto out;
		}
	hangar_ctx_set_log(srv.ctx, HANGAR_LOG_INFO, on_log, NULL);
	hangar_ctx_set_event(srv.ctx, events_on_event, NULL);
	if (hangar_ctx_get(&v, srv.ctx, "HANGAR_OUTPUT_LIMIT_BYTES") == 0)
		srv.output_limit = strtoull(v.ptr, NULL, 10);
	hangar_buf_dispose(&v);
	if (hangar_ctx_get(&v, srv.ctx, "HANGAR_STATE_DIR") == 0 && v.ptr[0] && make_dirs(v.ptr) < 0) {
		fprintf(stderr, "hangard: cannot make the state directory %s: %s\n", v.ptr, strerror(errno));
		hangar_buf_dispose(&v);
		goto out;
	}
	hangar_buf_dispose(&v);
	if (e2b_init(srv.ctx) < 0)
		goto out;
	if (cfg->sandbox_domain && (strspn(cfg->sandbox_domain, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
					strlen(cfg->sandbox_domain) ||
				cfg->sandbox_domain[0] == '.' || cfg->sandbox_domain[0] == '-' || strlen(cfg->sandbox_domain) > 200)) {
		fprintf(stderr, "hangard: HANGARD_SANDBOX_DOMAIN %s is not a DNS name\n", cfg->sandbox_domain);
		goto out;
	}
	edge_set_domain(cfg->sandbox_domain);

	/* Uploads and downloads pass through files only this process can read. */
	size_t tl = strlen(cfg->tmpdir) + 20;
	tmp = malloc(tl);
	if (!tmp)
		goto out;
	snprintf(tmp, tl, "%s/hangard-XXXXXX", cfg->tmpdir);
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "hangard: cannot make a directory in %s: %s\n", cfg->tmpdir, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	free(cfg->tmpdir);
	cfg->tmpdir = strdup(tmp);
	if (!cfg->tmpdir)
		goto out;

	/* Signals are taken by sigwait() here, never by a worker. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	events_init(&srv);
	if (server_start(&srv, &port) < 0 || reaper_start(&srv) < 0 || e2b_autopause_start() < 0) {
		reaper_stop(&srv);
		server_stop(&srv);
		goto out;
	}
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "msg", "listening");
	cJSON_AddStringToObject(line, "addr", cfg->addr);
	sjson_add_int64(line, "port", port);
	cJSON_AddBoolToObject(line, "tls", cfg->tls_cert != NULL);
	log_line(line);
	if (ready_fd >= 0) {
		char msg[32];
		int len = snprintf(msg, sizeof(msg), "ready %u\n", port);
		if (write(ready_fd, msg, (size_t)len) != len)
			perror("hangard: -ready-fd");
		close(ready_fd);
	}
	while (sigwait(&set, &sig) != 0)
		;
	line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "msg", "stopping");
	cJSON_AddStringToObject(line, "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	log_line(line);
	/* The lease first: another replica can reap while requests here drain. */
	reaper_stop(&srv);
	e2b_autopause_stop();
	server_stop(&srv);
	rc = 0;
out:
	if (tmp) {
		rmdir(tmp);
		free(tmp);
	}
	srv.ctx = hangar_ctx_unref(srv.ctx);
	tokens_free(srv.tokens);
	return rc;
}

int main(int argc, char **argv)
{
	struct hangard_config cfg;
	struct hangard_setting *flags = NULL, *lib = NULL;
	size_t n_flags = 0, n_lib = 0;
	const char *file = NULL;
	int ready_fd = -1, rc;

	if (sodium_init() < 0) {
		fprintf(stderr, "hangard: libsodium cannot start\n");
		return 1;
	}
	if (argc > 1 && strcmp(argv[1], "hash-token") == 0)
		return tokens_hash_main(argc, argv);
	if ((argc == 2 || (argc == 3 && strcmp(argv[2], "e2b") == 0)) && strcmp(argv[1], "routes") == 0) {
		/* The /v1 API's routes (openapi.json's), or with "e2b" those of /e2b. */
		unsigned want = argc == 3 ? ROUTE_E2B : 0;
		for (size_t i = 0; i < hangard_n_routes; i++)
			if ((hangard_routes[i].flags & ROUTE_E2B) == want)
				printf("%s %s\n", hangard_routes[i].method, hangard_routes[i].path);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "errors") == 0) {
		errors_print();
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "-version") == 0)) {
		printf("hangard %s\n", HANGAR_VERSION_STRING);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !a[1] || i + 1 >= argc) {
			usage();
			free(flags);
			return 2;
		}
		const char *val = argv[++i];
		if (a[1] == '-')
			a++;
		if (strcmp(a, "-config") == 0) {
			file = val;
		} else if (strcmp(a, "-ready-fd") == 0) {
			char *end;
			ready_fd = (int)strtol(val, &end, 10);
			if (*end || ready_fd < 0) {
				fprintf(stderr, "hangard: invalid -ready-fd %s\n", val);
				return 2;
			}
		} else {
			struct hangard_setting *nv = realloc(flags, (n_flags + 1) * sizeof(*flags));
			if (!nv)
				return 1;
			flags = nv;
			flags[n_flags].name = flag_setting(a + 1);
			flags[n_flags].value = (char *)val;
			if (!flags[n_flags].name)
				return 1;
			n_flags++;
		}
	}
	rc = config_load(&cfg, &lib, &n_lib, file, flags, n_flags);
	for (size_t i = 0; i < n_flags; i++)
		free(flags[i].name);
	free(flags);
	if (rc < 0) {
		config_free(&cfg, lib, n_lib);
		return 1;
	}
	rc = run(&cfg, lib, n_lib, ready_fd);
	config_free(&cfg, lib, n_lib);
	return rc;
}
