/*
 * hangar-envd-archive: the checkpoint worker (ckpt.h), a program of its own
 * so that only it loads libarchive, libzstd and what they pull in. The
 * daemon (ckpt.c) starts one per request, as the request user, from the
 * file beside its own program; this side checks it was started that way,
 * then runs the capture (ckpt_capture.c) or the restore (ckpt_restore.c).
 */
#define _GNU_SOURCE
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "envd.h"

/* ---- notes --------------------------------------------------------------- */

void ckpt_note_send(int fd, const struct ckpt_note *n)
{
	ssize_t w;

	do
		w = write(fd, n, sizeof(*n));
	while (w < 0 && errno == EINTR);
}

int ckpt_fail(struct ckpt_note *n, int status, const char *fmt, ...)
{
	va_list ap;

	if (n->status && n->status != 200)
		return -1;
	n->status = status;
	va_start(ap, fmt);
	vsnprintf(n->message, sizeof(n->message), fmt, ap);
	va_end(ap);
	return -1;
}

void ckpt_quote_name(const char *name, char *out, size_t max)
{
	size_t n = 0;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		if (n + 8 >= max) {
			memcpy(out + n, "...", 4);
			return;
		}
		if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
			n += (size_t)snprintf(out + n, max - n, *s == '"' || *s == '\\' ? "\\%c" : "\\x%02x", *s);
		else
			out[n++] = (char)*s;
	}
	out[n] = '\0';
}

/* ---- the worker's side ------------------------------------------------------ */

static int worker_refuse(const char *why)
{
	fprintf(stderr, CKPT_WORKER_NAME ": internal to hangar-envd, which starts it for a checkpoint request: %s\n", why);
	return 2;
}

static int parse_id(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end || s[0] == '-' || v > 0xfffffffeUL)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* Whether the process holds any capability (effective or permitted). */
static int has_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return 1;
	return (d[0].effective | d[1].effective | d[0].permitted | d[1].permitted) != 0;
}

int ckpt_is_worker(int argc, char **argv)
{
	return argc > 1 && strcmp(argv[1], CKPT_WORKER_FLAG) == 0;
}

int ckpt_worker_main(int argc, char **argv)
{
	struct envd_user user = { 0 };
	unsigned uid, gid;
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	int restore, nfds;
	sigset_t none;
	size_t nenv = 0;
	char **env;

	/* --archive-worker capture UID GID USER PATH auto|all;
	 * --archive-worker restore UID GID USER PATH replace|merge zstd|tar */
	if (!ckpt_is_worker(argc, argv))
		return worker_refuse("started without " CKPT_WORKER_FLAG);
	if (argc < 3 || (strcmp(argv[2], "capture") != 0 && strcmp(argv[2], "restore") != 0))
		return worker_refuse("unknown mode");
	restore = strcmp(argv[2], "restore") == 0;
	if (argc != (restore ? 9 : 8) || parse_id(argv[3], &uid) < 0 || parse_id(argv[4], &gid) < 0 ||
	    strlen(argv[5]) >= sizeof(user.name) || argv[6][0] != '/' || strlen(argv[6]) >= PATH_MAX)
		return worker_refuse("bad arguments");
	if (restore ? (strcmp(argv[7], "replace") != 0 && strcmp(argv[7], "merge") != 0) ||
			      (strcmp(argv[8], "zstd") != 0 && strcmp(argv[8], "tar") != 0)
		    : strcmp(argv[7], "auto") != 0 && strcmp(argv[7], "all") != 0)
		return worker_refuse("bad arguments");
	/* It only ever runs as whom it was started as, and does no more than
	 * they could: the daemon switched users before the exec. */
	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid || eu != uid || su != uid ||
	    rg != gid || eg != gid || sg != gid)
		return worker_refuse("not started as the user it names");
	if (uid != 0 && has_caps())
		return worker_refuse("holds capabilities");
	/* The daemon's pipes, and only pipes. */
	nfds = restore ? 3 : 2;
	for (int fd = 3; fd < 3 + nfds; fd++) {
		struct stat st;

		if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
			return worker_refuse("not started by hangar-envd");
	}
	/* Under a loader, the descriptors it was given (ckpt_init): nothing of the worker's. */
	if (syscall(SYS_close_range, (unsigned)(3 + nfds), ~0U, 0) < 0)
		for (int fd = 3 + nfds; fd < 65536; fd++)
			close(fd);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	umask(022);
	snprintf(user.name, sizeof(user.name), "%s", argv[5]);
	user.uid = uid;
	user.gid = gid;

	/* git's environment, as the daemon prepared it. */
	for (char **e = environ; *e; e++)
		nenv += strncmp(*e, CKPT_WORKER_ENV_PREFIX, sizeof(CKPT_WORKER_ENV_PREFIX) - 1) == 0;
	env = calloc(nenv + 1, sizeof(char *));
	if (!env)
		return 1;
	nenv = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, CKPT_WORKER_ENV_PREFIX, sizeof(CKPT_WORKER_ENV_PREFIX) - 1) == 0)
			env[nenv++] = *e + sizeof(CKPT_WORKER_ENV_PREFIX) - 1;

	/* _exit: the kernel frees the rest, and no exit handler of a
	 * library runs in a process that is the user's. */
	if (restore) {
		struct ckpt_restore_args a = { .user = &user, .path = argv[6], .merge = strcmp(argv[7], "merge") == 0,
					       .zstd = strcmp(argv[8], "zstd") == 0, .data_fd = 3, .go_fd = 4,
					       .note_fd = 5 };

		_exit(ckpt_restore_child(&a));
	} else {
		struct ckpt_capture_args a = { .user = &user, .path = argv[6], .select_all = strcmp(argv[7], "all") == 0,
					       .data_fd = 3, .note_fd = 4, .envp = env };

		_exit(ckpt_capture_child(&a));
	}
}

