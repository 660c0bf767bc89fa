/* hangar-envd: an envd-compatible daemon (see hangar-envd(8)). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <pwd.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "envd.h"
#include "server.h"

#define TOKEN_ENV_DEFAULT "HANGAR_ENVD_ACCESS_TOKEN"

struct envd_config envd_cfg;

/* One line on stderr with -v; nothing otherwise. */
void envd_log(const char *fmt, ...)
{
	va_list ap;

	if (!envd_cfg.verbose)
		return;
	va_start(ap, fmt);
	fputs("hangar-envd: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* The synopsis, on f. */
static void usage(FILE *f)
{
	fputs("usage: hangar-envd [-port N] [-addr ADDR] [-socket PATH | -listen-fd FD]\n"
	      "                   [-token-file PATH | -token-fd FD]\n"
	      "                   [-token-env NAME] [-user NAME] [-workdir DIR] [-env KEY=VALUE]...\n"
	      "                   [-ready-fd FD] [-userns-fd FD -root-id ID] [-single-uid] [-loader PATH]\n"
	      "                   [-v] [-version]\n",
	      f);
}

/* The length of buf[0, n) without the line ends it finishes with. */
static size_t trim_line_ends(const char *buf, size_t n)
{
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	return n;
}

/* The token in path, a regular file of mode 0600, without its line end; NULL said. */
static char *read_token_file(const char *path)
{
	struct stat st;
	char buf[1024];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0) {
		fprintf(stderr, "hangar-envd: cannot open token file %s: %s\n", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		fprintf(stderr, "hangar-envd: token file %s must be a regular file with mode 0600\n", path);
		close(fd);
		return NULL;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "hangar-envd: cannot read token file %s: %s\n", path, strerror(errno));
		return NULL;
	}
	n = (ssize_t)trim_line_ends(buf, (size_t)n);
	buf[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "hangar-envd: token file %s is empty\n", path);
		return NULL;
	}
	return strdup(buf);
}

/*
 * Reads the token from an inherited descriptor (a pipe, typically) until EOF,
 * at most TOKEN_FD_MAX bytes, and closes it: the token never has to touch disk.
 */
#define TOKEN_FD_MAX 1024
static char *read_token_fd(int fd)
{
	char buf[TOKEN_FD_MAX + 1], *tok;
	size_t n = 0;

	if (fcntl(fd, F_GETFD) < 0) {
		fprintf(stderr, "hangar-envd: -token-fd %d is not an open descriptor\n", fd);
		return NULL;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fprintf(stderr, "hangar-envd: cannot read the token from descriptor %d: %s\n", fd,
				strerror(errno));
			close(fd);
			explicit_bzero(buf, sizeof(buf));
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > TOKEN_FD_MAX) {
			fprintf(stderr, "hangar-envd: the token on descriptor %d is longer than %d bytes\n", fd,
				TOKEN_FD_MAX);
			close(fd);
			explicit_bzero(buf, sizeof(buf));
			return NULL;
		}
	}
	close(fd);
	n = trim_line_ends(buf, n);
	buf[n] = '\0';
	if (n == 0) {
		fprintf(stderr, "hangar-envd: the token on descriptor %d is empty\n", fd);
		return NULL;
	}
	if (strlen(buf) != n) {
		fprintf(stderr, "hangar-envd: the token on descriptor %d contains a NUL byte\n", fd);
		explicit_bzero(buf, sizeof(buf));
		return NULL;
	}
	tok = strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	return tok;
}

/* Takes the token from the environment once and removes it, so no child inherits it. */
static char *take_token_env(const char *name)
{
	const char *v = getenv(name);
	char *tok;

	if (!v)
		return NULL;
	tok = *v ? strdup(v) : NULL;
	unsetenv(name);
	return tok;
}

/* The value after the flag at argv[*i] (*i moves to it); exits with 2 when there is none. */
static const char *arg_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "hangar-envd: %s needs a value\n", argv[*i]);
		exit(2);
	}
	return argv[++*i];
}

/* What main() does with the command line; the rest of it lands in envd_cfg. */
struct cmdline {
	struct server_opts so;
	const char *token_file;
	const char *token_env;
	const char *user;
	int token_fd;
	int ready_fd;
	int userns_fd;
	const char *loader;         /* -loader */
	size_t nenv;                /* -env strings so far in envd_cfg.default_env */
};

/* parse_flag() and parse_flags(): the command line is good so far. */
#define KEEP_GOING (-1)

/* -port: 0 to 65535. KEEP_GOING, or 2 said. */
static int flag_port(struct server_opts *so, const char *v)
{
	char *end;
	long p = strtol(v, &end, 10);

	if (*end || p < 0 || p > 65535) {
		fprintf(stderr, "hangar-envd: invalid -port %s\n", v);
		return 2;
	}
	so->port = (uint16_t)p;
	return KEEP_GOING;
}

/* -listen-fd: a listening socket its starter bound where the sandbox cannot reach it
 * (hangar-jail). KEEP_GOING, or 2 said. */
static int flag_listen_fd(struct server_opts *so, const char *v)
{
	char *end;
	int fd = (int)strtol(v, &end, 10);
	int listening = 0;
	socklen_t len = sizeof(listening);

	if (*end || !v[0] || fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 ||
	    !listening) {
		fprintf(stderr, "hangar-envd: -listen-fd %s is not a listening socket\n", v);
		return 2;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	so->listen_fd = fd;
	return KEEP_GOING;
}

/* -token-fd: a descriptor number. KEEP_GOING, or 2 said. */
static int flag_token_fd(struct cmdline *c, const char *v)
{
	char *end;

	c->token_fd = (int)strtol(v, &end, 10);
	if (*end || !v[0] || c->token_fd < 0) {
		fprintf(stderr, "hangar-envd: invalid -token-fd %s\n", v);
		return 2;
	}
	return KEEP_GOING;
}

/* -ready-fd: a descriptor number. KEEP_GOING, or 2 said. */
static int flag_ready_fd(struct cmdline *c, const char *v)
{
	char *end;

	c->ready_fd = (int)strtol(v, &end, 10);
	if (*end || c->ready_fd < 0) {
		fprintf(stderr, "hangar-envd: invalid -ready-fd %s\n", v);
		return 2;
	}
	return KEEP_GOING;
}

/* -env KEY=VALUE, kept in envd_cfg.default_env. KEEP_GOING, or 2 said. */
static int flag_env(struct cmdline *c, const char *kv)
{
	if (!strchr(kv, '=') || kv[0] == '=') {
		fprintf(stderr, "hangar-envd: -env wants KEY=VALUE, got %s\n", kv);
		return 2;
	}
	envd_cfg.default_env[c->nenv++] = (char *)kv;
	return KEEP_GOING;
}

/* -userns-fd (min 0) and -root-id (min 1): a number from min to 2^32 - 2 into *out. KEEP_GOING, or 2 said. */
static int flag_id(const char *flag, const char *v, long min, long *out)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (*end || !v[0] || n < min || n > 0xfffffffeL) {
		fprintf(stderr, "hangar-envd: invalid %s %s\n", flag, v);
		return 2;
	}
	*out = n;
	return KEEP_GOING;
}

/* The flag at argv[*i], and its value (*i moves past it). KEEP_GOING, or the status to exit with. */
static int parse_flag(struct cmdline *c, int argc, char **argv, int *i)
{
	const char *f = argv[*i];
	long id;

	if (f[0] == '-' && f[1] == '-')
		f++; /* accept --flag as well as -flag */
	if (strcmp(f, "-port") == 0)
		return flag_port(&c->so, arg_value(argc, argv, i));
	if (strcmp(f, "-addr") == 0)
		c->so.bind_addr = arg_value(argc, argv, i);
	else if (strcmp(f, "-socket") == 0)
		c->so.socket_path = arg_value(argc, argv, i);
	else if (strcmp(f, "-listen-fd") == 0)
		return flag_listen_fd(&c->so, arg_value(argc, argv, i));
	else if (strcmp(f, "-token-file") == 0)
		c->token_file = arg_value(argc, argv, i);
	else if (strcmp(f, "-token-fd") == 0)
		return flag_token_fd(c, arg_value(argc, argv, i));
	else if (strcmp(f, "-token-env") == 0)
		c->token_env = arg_value(argc, argv, i);
	else if (strcmp(f, "-user") == 0)
		c->user = arg_value(argc, argv, i);
	else if (strcmp(f, "-workdir") == 0)
		envd_cfg.default_workdir = strdup(arg_value(argc, argv, i));
	else if (strcmp(f, "-env") == 0)
		return flag_env(c, arg_value(argc, argv, i));
	else if (strcmp(f, "-ready-fd") == 0)
		return flag_ready_fd(c, arg_value(argc, argv, i));
	else if (strcmp(f, "-userns-fd") == 0) {
		if (flag_id(f, arg_value(argc, argv, i), 0, &id) != KEEP_GOING)
			return 2;
		c->userns_fd = (int)id;
	} else if (strcmp(f, "-root-id") == 0) {
		if (flag_id(f, arg_value(argc, argv, i), 1, &id) != KEEP_GOING)
			return 2;
		envd_cfg.root_id = (uid_t)id;
	} else if (strcmp(f, "-loader") == 0) {
		c->loader = arg_value(argc, argv, i);
	} else if (strcmp(f, "-single-uid") == 0) {
		envd_cfg.single_uid = 1;
	} else if (strcmp(f, "-isnotfc") == 0) {
		/* upstream compatibility: nothing to do */
	} else if (strcmp(f, "-v") == 0) {
		envd_cfg.verbose = 1;
	} else if (strcmp(f, "-version") == 0) {
		printf("%s\n", ENVD_VERSION);
		return 0;
	} else if (strcmp(f, "-h") == 0 || strcmp(f, "-help") == 0) {
		usage(stdout);
		return 0;
	} else {
		fprintf(stderr, "hangar-envd: unknown flag %s\n", argv[*i]);
		usage(stderr);
		return 2;
	}
	return KEEP_GOING;
}

/* The whole command line, into c and envd_cfg. KEEP_GOING, or the status to exit with. */
static int parse_flags(struct cmdline *c, int argc, char **argv)
{
	/* Owned by the configuration from the start, so early exits leave nothing unreachable. */
	envd_cfg.default_env = calloc((size_t)argc + 1, sizeof(char *));
	if (!envd_cfg.default_env)
		return 1;
	for (int i = 1; i < argc; i++) {
		int rc = parse_flag(c, argc, argv, &i);

		if (rc != KEEP_GOING)
			return rc;
	}
	if (c->so.socket_path && c->so.listen_fd >= 0) {
		fprintf(stderr, "hangar-envd: -socket and -listen-fd exclude each other\n");
		usage(stderr);
		return 2;
	}
	if (c->token_file && c->token_fd >= 0) {
		fprintf(stderr, "hangar-envd: -token-file and -token-fd exclude each other\n");
		usage(stderr);
		return 2;
	}
	return KEEP_GOING;
}

/*
 * Records what bwrap left the daemon, the bounding set of the processes
 * that enter the inner user namespace (permitted: bwrap leaves the
 * bounding set as it was), and the last capability the kernel knows. 0, or -1.
 */
static int record_caps(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3];

	memset(c, 0, sizeof(c));
	if (syscall(SYS_capget, &h, c) < 0)
		return -1;
	envd_cfg.caps = (uint64_t)c[1].permitted << 32 | c[0].permitted;
	for (int cap = 0; cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		envd_cfg.cap_last = cap;
	return 0;
}

/*
 * -userns-fd and -root-id (creds.h): a user namespace whose parent is the
 * daemon's own, and the daemon running as root, which owns it. 0, or -1
 * (said, unless the kernel refused a call on a namespace found good).
 */
static int inner_userns(int fd)
{
	struct stat ns, self;
	int parent;

	if (fd < 0 && !envd_cfg.root_id)
		return 0;
	if (fd < 0 || !envd_cfg.root_id) {
		fprintf(stderr, "hangar-envd: -userns-fd and -root-id go together\n");
		return -1;
	}
	parent = ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWUSER ? ioctl(fd, NS_GET_PARENT) : -1;
	if (parent < 0 || fstat(parent, &ns) < 0 || stat("/proc/self/ns/user", &self) < 0 ||
	    ns.st_ino != self.st_ino || ns.st_dev != self.st_dev || !envd_cfg.is_root) {
		fprintf(stderr, "hangar-envd: -userns-fd %d is not a user namespace below this one, "
			"or the daemon is not its root\n", fd);
		if (parent >= 0)
			close(parent);
		return -1;
	}
	close(parent);
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	envd_cfg.inner_userns = fd;
	return record_caps();
}

/* Whom the daemon is and what it keeps, settled before the token is read. 0, or -1. */
static int settle_privileges(const struct cmdline *c)
{
	envd_cfg.is_root = geteuid() == 0;
	envd_cfg.inner_userns = -1;
	if (inner_userns(c->userns_fd) < 0)
		return -1;
	/*
	 * Not dumpable, so no process in the sandbox (root there included,
	 * which keeps no CAP_SYS_PTRACE) can read this one's memory or /proc
	 * files, nor get a core of it. Commands it starts are dumpable again
	 * from their execve.
	 */
	prctl(PR_SET_DUMPABLE, 0);
	return 0;
}

/* envd_cfg.token from -token-file, -token-fd or the environment. 0, or -1 said. */
static int read_token(const struct cmdline *c)
{
	/* The environment variable is always consumed, even when a file or descriptor wins. */
	char *from_env = take_token_env(c->token_env);

	if (!c->token_file && c->token_fd < 0) {
		envd_cfg.token = from_env;
		return 0;
	}
	if (from_env)
		explicit_bzero(from_env, strlen(from_env));
	free(from_env);
	envd_cfg.token = c->token_file ? read_token_file(c->token_file) : read_token_fd(c->token_fd);
	return envd_cfg.token ? 0 : -1;
}

/* envd_cfg.default_user: -user, else the daemon's own user; it must exist. 0, or -1 said. */
static int set_default_user(const char *user)
{
	struct envd_user u;

	if (user) {
		envd_cfg.default_user = strdup(user);
	} else {
		struct passwd *pw = getpwuid(geteuid());

		envd_cfg.default_user = strdup(pw ? pw->pw_name : "root");
	}
	if (envd_user_lookup(envd_cfg.default_user, &u) < 0) {
		fprintf(stderr, "hangar-envd: unknown user %s\n", envd_cfg.default_user);
		return -1;
	}
	return 0;
}

/* Process-wide set-up for serving; *stop gets the signals wait_for_stop() takes, blocked in every thread. */
static void prepare_process(const char *argv0, sigset_t *stop)
{
	if (ckpt_init(argv0) < 0)
		fprintf(stderr,
			"hangar-envd: cannot open its checkpoint worker " CKPT_WORKER_NAME
			" beside its own program (%s): checkpoint endpoints off\n",
			strerror(errno));
	/* Connection threads come and go; one malloc arena keeps their memory from piling up. */
	mallopt(M_ARENA_MAX, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(stop);
	sigaddset(stop, SIGTERM);
	sigaddset(stop, SIGINT);
	sigaddset(stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, stop, NULL);
}

/* Says where the daemon listens (-v), and "ready[ PORT]" on -ready-fd, which it closes. */
static void announce_ready(const struct server_opts *so, int ready_fd)
{
	char line[32];
	int len;
	ssize_t n;

	if (so->socket_path)
		envd_log("listening on %s", so->socket_path);
	else if (so->listen_fd >= 0)
		envd_log("listening on descriptor %d", so->listen_fd);
	else
		envd_log("listening on port %u", so->bound_port);
	if (ready_fd < 0)
		return;
	len = so->socket_path || so->listen_fd >= 0 ? snprintf(line, sizeof(line), "ready\n")
						    : snprintf(line, sizeof(line), "ready %u\n", so->bound_port);
	n = write(ready_fd, line, (size_t)len);
	(void)n;
	close(ready_fd);
}

/* Blocks until SIGTERM or SIGINT; SIGHUP is taken and ignored. */
static void wait_for_stop(const sigset_t *stop)
{
	int sig;

	do {
		if (sigwait(stop, &sig) != 0)
			break;
	} while (sig == SIGHUP);
}

/* Stops serving and the services, and removes the -socket. */
static void shut_down(struct MHD_Daemon *d, const struct server_opts *so)
{
	MHD_stop_daemon(d);
	process_service_shutdown();
	filesystem_service_shutdown();
	if (so->socket_path)
		unlink(so->socket_path);
}

int main(int argc, char **argv)
{
	struct cmdline c = {
		.so = { .port = ENVD_DEFAULT_PORT, .listen_fd = -1 },
		.token_env = TOKEN_ENV_DEFAULT,
		.token_fd = -1,
		.ready_fd = -1,
		.userns_fd = -1,
	};
	struct MHD_Daemon *d;
	sigset_t stop;
	int rc;

	/* Before any name is looked up (the checkpoint worker's main does the same). */
	envd_runtime_lock_nss();
	if ((rc = parse_flags(&c, argc, argv)) != KEEP_GOING)
		return rc;
	if (envd_runtime_init(c.loader) < 0)
		return 2;
	if (settle_privileges(&c) < 0)
		return 2;
	if (read_token(&c) < 0 || set_default_user(c.user) < 0)
		return 1;
	prepare_process(argv[0], &stop);
	if (process_service_init() < 0 || filesystem_service_init() < 0) {
		fprintf(stderr, "hangar-envd: cannot initialise services\n");
		return 1;
	}
	d = server_start(&c.so);
	if (!d)
		return 1;
	announce_ready(&c.so, c.ready_fd);
	wait_for_stop(&stop);
	shut_down(d, &c.so);
	return 0;
}
