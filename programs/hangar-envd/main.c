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

static void usage(FILE *f)
{
	fputs("usage: hangar-envd [-port N] [-addr ADDR] [-socket PATH | -listen-fd FD]\n"
	      "                   [-token-file PATH | -token-fd FD]\n"
	      "                   [-token-env NAME] [-user NAME] [-workdir DIR] [-env KEY=VALUE]...\n"
	      "                   [-ready-fd FD] [-userns-fd FD -root-id ID] [-single-uid] [-v] [-version]\n",
	      f);
}

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
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
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
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
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

static const char *arg_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "hangar-envd: %s needs a value\n", argv[*i]);
		exit(2);
	}
	return argv[++*i];
}

/*
 * -userns-fd and -root-id (creds.h): a user namespace whose parent is the
 * daemon's own, and the daemon running as root, which owns it. Records the
 * daemon's bounding set for the processes that enter it. 0, or -1 said.
 */
static int inner_userns(int fd)
{
	struct stat ns, self;

	if (fd < 0 && !envd_cfg.root_id)
		return 0;
	if (fd < 0 || !envd_cfg.root_id) {
		fprintf(stderr, "hangar-envd: -userns-fd and -root-id go together\n");
		return -1;
	}
	{
		int parent = ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWUSER ? ioctl(fd, NS_GET_PARENT) : -1;

		if (parent < 0 || fstat(parent, &ns) < 0 || stat("/proc/self/ns/user", &self) < 0 ||
		    ns.st_ino != self.st_ino || ns.st_dev != self.st_dev || !envd_cfg.is_root) {
			fprintf(stderr, "hangar-envd: -userns-fd %d is not a user namespace below this one, "
				"or the daemon is not its root\n", fd);
			if (parent >= 0)
				close(parent);
			return -1;
		}
		close(parent);
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	envd_cfg.inner_userns = fd;
	/* What bwrap left the daemon (permitted: bwrap leaves the bounding set as it was). */
	{
		struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
		struct __user_cap_data_struct c[_LINUX_CAPABILITY_U32S_3];

		memset(c, 0, sizeof(c));
		if (syscall(SYS_capget, &h, c) < 0)
			return -1;
		envd_cfg.caps = (uint64_t)c[1].permitted << 32 | c[0].permitted;
	}
	for (int cap = 0; cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		envd_cfg.cap_last = cap;
	return 0;
}

int main(int argc, char **argv)
{
	struct server_opts so = { .port = ENVD_DEFAULT_PORT, .listen_fd = -1 };
	const char *token_file = NULL, *token_env = TOKEN_ENV_DEFAULT, *user = NULL;
	char **envs;
	size_t nenv = 0;
	int ready_fd = -1, token_fd = -1, userns_fd = -1;
	struct MHD_Daemon *d;
	sigset_t set;
	int sig;

	/* A checkpoint request's worker (ckpt.h), started by the daemon. */
	if (ckpt_is_worker(argc, argv))
		return ckpt_worker_main(argc, argv);
	envs = calloc((size_t)argc + 1, sizeof(char *));
	if (!envs)
		return 1;
	/* Owned by the configuration from the start, so early exits leave nothing unreachable. */
	envd_cfg.default_env = envs;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (a[0] == '-' && a[1] == '-')
			a++; /* accept --flag as well as -flag */
		if (strcmp(a, "-port") == 0) {
			char *end;
			long p = strtol(arg_value(argc, argv, &i), &end, 10);

			if (*end || p < 0 || p > 65535) {
				fprintf(stderr, "hangar-envd: invalid -port %s\n", argv[i]);
				return 2;
			}
			so.port = (uint16_t)p;
		} else if (strcmp(a, "-addr") == 0) {
			so.bind_addr = arg_value(argc, argv, &i);
		} else if (strcmp(a, "-socket") == 0) {
			so.socket_path = arg_value(argc, argv, &i);
		} else if (strcmp(a, "-listen-fd") == 0) {
			char *end;
			int fd = (int)strtol(arg_value(argc, argv, &i), &end, 10);
			int listening = 0;
			socklen_t len = sizeof(listening);

			/* A socket its starter bound where the sandbox cannot reach it (hangar-jail). */
			if (*end || !argv[i][0] || fd < 0 ||
			    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0 || !listening) {
				fprintf(stderr, "hangar-envd: -listen-fd %s is not a listening socket\n", argv[i]);
				return 2;
			}
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			so.listen_fd = fd;
		} else if (strcmp(a, "-token-file") == 0) {
			token_file = arg_value(argc, argv, &i);
		} else if (strcmp(a, "-token-fd") == 0) {
			char *end;

			token_fd = (int)strtol(arg_value(argc, argv, &i), &end, 10);
			if (*end || !argv[i][0] || token_fd < 0) {
				fprintf(stderr, "hangar-envd: invalid -token-fd %s\n", argv[i]);
				return 2;
			}
		} else if (strcmp(a, "-token-env") == 0) {
			token_env = arg_value(argc, argv, &i);
		} else if (strcmp(a, "-user") == 0) {
			user = arg_value(argc, argv, &i);
		} else if (strcmp(a, "-workdir") == 0) {
			envd_cfg.default_workdir = strdup(arg_value(argc, argv, &i));
		} else if (strcmp(a, "-env") == 0) {
			const char *kv = arg_value(argc, argv, &i);

			if (!strchr(kv, '=') || kv[0] == '=') {
				fprintf(stderr, "hangar-envd: -env wants KEY=VALUE, got %s\n", kv);
				return 2;
			}
			envs[nenv++] = (char *)kv;
		} else if (strcmp(a, "-ready-fd") == 0) {
			char *end;

			ready_fd = (int)strtol(arg_value(argc, argv, &i), &end, 10);
			if (*end || ready_fd < 0) {
				fprintf(stderr, "hangar-envd: invalid -ready-fd %s\n", argv[i]);
				return 2;
			}
		} else if (strcmp(a, "-userns-fd") == 0 || strcmp(a, "-root-id") == 0) {
			char *end;
			long v = strtol(arg_value(argc, argv, &i), &end, 10);

			if (*end || !argv[i][0] || v < (a[1] == 'u' ? 0 : 1) || v > 0xfffffffeL) {
				fprintf(stderr, "hangar-envd: invalid %s %s\n", a, argv[i]);
				return 2;
			}
			if (a[1] == 'u')
				userns_fd = (int)v;
			else
				envd_cfg.root_id = (uid_t)v;
		} else if (strcmp(a, "-single-uid") == 0) {
			envd_cfg.single_uid = 1;
		} else if (strcmp(a, "-isnotfc") == 0) {
			/* upstream compatibility: nothing to do */
		} else if (strcmp(a, "-v") == 0) {
			envd_cfg.verbose = 1;
		} else if (strcmp(a, "-version") == 0) {
			printf("%s\n", ENVD_VERSION);
			return 0;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "-help") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "hangar-envd: unknown flag %s\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (so.socket_path && so.listen_fd >= 0) {
		fprintf(stderr, "hangar-envd: -socket and -listen-fd exclude each other\n");
		usage(stderr);
		return 2;
	}
	if (token_file && token_fd >= 0) {
		fprintf(stderr, "hangar-envd: -token-file and -token-fd exclude each other\n");
		usage(stderr);
		return 2;
	}
	envd_cfg.is_root = geteuid() == 0;
	envd_cfg.inner_userns = -1;
	if (inner_userns(userns_fd) < 0)
		return 2;
	/*
	 * Before the token is read: not dumpable, so no process in the sandbox
	 * (root there included, which keeps no CAP_SYS_PTRACE) can read this
	 * one's memory or /proc files, nor get a core of it. Commands it starts
	 * are dumpable again from their execve.
	 */
	prctl(PR_SET_DUMPABLE, 0);

	/* The environment variable is always consumed, even when a file or descriptor wins. */
	{
		char *from_env = take_token_env(token_env);

		if (token_file || token_fd >= 0) {
			if (from_env)
				explicit_bzero(from_env, strlen(from_env));
			free(from_env);
			envd_cfg.token = token_file ? read_token_file(token_file) : read_token_fd(token_fd);
			if (!envd_cfg.token)
				return 1;
		} else {
			envd_cfg.token = from_env;
		}
	}

	if (user) {
		envd_cfg.default_user = strdup(user);
	} else {
		struct passwd *pw = getpwuid(geteuid());

		envd_cfg.default_user = strdup(pw ? pw->pw_name : "root");
	}
	{
		struct envd_user u;

		if (envd_user_lookup(envd_cfg.default_user, &u) < 0) {
			fprintf(stderr, "hangar-envd: unknown user %s\n", envd_cfg.default_user);
			return 1;
		}
	}

	if (ckpt_init(argv[0]) < 0)
		fprintf(stderr, "hangar-envd: cannot open its own executable (%s): checkpoint endpoints off\n",
			strerror(errno));
	/* Connection threads come and go; one malloc arena keeps their memory from piling up. */
	mallopt(M_ARENA_MAX, 1);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	if (process_service_init() < 0 || filesystem_service_init() < 0) {
		fprintf(stderr, "hangar-envd: cannot initialise services\n");
		return 1;
	}
	d = server_start(&so);
	if (!d)
		return 1;
	if (so.socket_path)
		envd_log("listening on %s", so.socket_path);
	else if (so.listen_fd >= 0)
		envd_log("listening on descriptor %d", so.listen_fd);
	else
		envd_log("listening on port %u", so.bound_port);
	if (ready_fd >= 0) {
		char line[32];
		int len = so.socket_path || so.listen_fd >= 0 ? snprintf(line, sizeof(line), "ready\n")
					 : snprintf(line, sizeof(line), "ready %u\n", so.bound_port);
		ssize_t n = write(ready_fd, line, (size_t)len);

		(void)n;
		close(ready_fd);
	}
	do {
		if (sigwait(&set, &sig) != 0)
			break;
	} while (sig == SIGHUP);
	MHD_stop_daemon(d);
	process_service_shutdown();
	filesystem_service_shutdown();
	if (so.socket_path)
		unlink(so.socket_path);
	return 0;
}
