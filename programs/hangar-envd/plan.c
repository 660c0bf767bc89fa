/*
 * What a Start request runs: its program found on the child's PATH, or,
 * when an image lacks it, what hangar-envd puts in its place so that the
 * library's uniform commands (`timeout -k 5s Ns bash -lc CMD`, and
 * `/bin/bash` for terminals) behave the same in any image:
 *
 *  - `timeout` with only the options it knows (-k, -s), or not on PATH:
 *    hangar-envd is the timeout, whether the root has one or not (one
 *    program fewer per command; and an image's own timeout, busybox's,
 *    would run a bash that may not be there). It runs the command
 *    itself and, N after the start, sends it and its process group SIGTERM
 *    (or -s SIGNAL) and SIGCONT; -k G later, SIGKILL. The command's end is
 *    what coreutils' timeout would end with: exit status 124 when the
 *    command ended after the signal, "signal: killed" once SIGKILL was sent
 *    (timeout kills itself with its group: 137 to a shell), else the
 *    command's own status. Only -k/--kill-after and -s/--signal are taken,
 *    as coreutils spells them; with any other option the root's timeout
 *    runs, and without one the command fails as a missing program does
 *    (127), saying so.
 *  - `bash` not on PATH: `sh` from PATH, with the same arguments (-lc, -i
 *    and -l mean the same to dash and busybox ash).
 *  - an absolute path to bash (`/bin/bash`, as terminals ask) that does not
 *    exist: the user's login shell from /etc/passwd when it is an
 *    executable file whose name ends in "sh", else /bin/sh.
 * argv[0] is then the stand-in's name (`echo $0` says `sh`). Any other
 * program that exists is run as asked.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envd.h"

/* An executable regular file: 1, else 0. */
static int runnable(const char *path)
{
	struct stat st;

	return access(path, X_OK) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *envd_resolve_command(const char *cmd, char *const *envp)
{
	const char *path = NULL, *p;
	char buf[4096];

	if (strchr(cmd, '/'))
		return strdup(cmd);
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	for (p = path; p && *p;) {
		size_t n = strcspn(p, ":");
		int len = snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, n ? p : ".", cmd);

		if (len > 0 && (size_t)len < sizeof(buf) && runnable(buf))
			return strdup(buf);
		p += n + (p[n] == ':');
	}
	return NULL;
}

/* coreutils' DURATION: a non-negative number, with s, m, h or d. Nanoseconds, or -1. */
static int64_t parse_duration(const char *s)
{
	char *end;
	double v, unit = 1;

	if (!*s || *s == '-' || *s == '+' || strchr(s, ' '))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	if (*end) {
		if (end[1])
			return -1;
		switch (*end) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		default: return -1;
		}
	}
	v *= unit * 1e9;
	/* coreutils waits "forever" past its timer's range: so does a very long timeout here. */
	return v >= 4e18 ? INT64_C(4000000000000000000) : (int64_t)ceil(v);
}

/* coreutils' SIGNAL: a name with or without SIG, or a number. The number, or -1. */
static int parse_signal(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = { { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		      { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
		      { "CONT", SIGCONT }, { "STOP", SIGSTOP } };
	char *end;
	long n;

	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].sig;
	n = strtol(s, &end, 10);
	return *s && !*end && n > 0 && n < 65 ? (int)n : -1;
}

/*
 * timeout's options and DURATION in argv[1..]: sets p's timer and returns
 * the index of the command, or -1 with p->why set.
 */
static int parse_timeout(struct envd_exec_plan *p, char *const *argv)
{
	int i = 1;

	p->term_sig = SIGTERM;
	for (; argv[i] && argv[i][0] == '-' && argv[i][1]; i++) {
		const char *a = argv[i], *v = NULL;
		int kill_after;

		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-k") || !strcmp(a, "-s") || !strcmp(a, "--kill-after") || !strcmp(a, "--signal")) {
			kill_after = a[1] == 'k' || a[2] == 'k';
			v = argv[++i];
		} else if (!strncmp(a, "-k", 2) || !strncmp(a, "-s", 2)) {
			kill_after = a[1] == 'k';
			v = a + 2;
		} else if (!strncmp(a, "--kill-after=", 13) || !strncmp(a, "--signal=", 9)) {
			kill_after = a[2] == 'k';
			v = strchr(a, '=') + 1;
		} else {
			snprintf(p->why, sizeof(p->why),
				 "timeout: command not found (hangar-envd stands in for it with -k and -s only, not %.40s)",
				 a);
			return -1;
		}
		if (!v || (kill_after ? (p->kill_ns = parse_duration(v)) < 0 : (p->term_sig = parse_signal(v)) < 0)) {
			snprintf(p->why, sizeof(p->why), "timeout: invalid %s '%.40s'",
				 kill_after ? "kill-after duration" : "signal", v ? v : "");
			return -1;
		}
	}
	if (!argv[i] || (p->term_ns = parse_duration(argv[i])) < 0 || !argv[i + 1]) {
		snprintf(p->why, sizeof(p->why), "timeout: %s", argv[i] && argv[i + 1] ? "invalid duration" :
			 "missing operand");
		return -1;
	}
	p->timeout = 1;
	return i + 1;
}

/* Whether path names bash: its last component is "bash". */
static int is_bash(const char *path)
{
	const char *slash = strrchr(path, '/');

	return !strcmp(slash ? slash + 1 : path, "bash");
}

/* A login shell of u's fit to stand in for bash, or /bin/sh. */
static const char *shell_for(const struct envd_user *u)
{
	size_t n = strlen(u->shell);

	if (u->shell[0] == '/' && n >= 2 && !strcmp(u->shell + n - 2, "sh") && runnable(u->shell))
		return u->shell;
	return "/bin/sh";
}

/* The program for argv[0]: as asked, or bash's stand-in. 0, or -1 (out of memory). */
static int plan_program(struct envd_exec_plan *p, char **argv, char *const *envp, const struct envd_user *u)
{
	const char *cmd = argv[0];

	p->path = envd_resolve_command(cmd, envp);
	if (p->path && (!strchr(cmd, '/') || runnable(p->path)))
		return 0;
	if (!is_bash(cmd))
		return 0;
	free(p->path);
	if (strchr(cmd, '/')) {
		p->path = strdup(shell_for(u));
		if (p->path)
			argv[0] = strrchr(p->path, '/') + 1;
	} else {
		p->path = envd_resolve_command("sh", envp);
		argv[0] = "sh";
		if (!p->path)
			return 0;
	}
	return p->path ? 0 : -1;
}

int envd_exec_plan(struct envd_exec_plan *p, char *const *argv, char *const *envp, const struct envd_user *u)
{
	size_t n = 0;
	int from = 0;

	memset(p, 0, sizeof(*p));
	while (argv[n])
		n++;
	p->argv = calloc(n + 1, sizeof(char *));
	if (!p->argv)
		return -1;
	p->path = envd_resolve_command(argv[0], envp);
	if (!strcmp(argv[0], "timeout")) {
		/*
		 * The daemon is the timeout whenever it takes the options: one
		 * program fewer to start for every command the library runs (about
		 * a millisecond), and bash's stand-in applies where an image's own
		 * timeout (busybox's) would run a bash that is not there. Options
		 * only coreutils knows go to the image's timeout, if it has one;
		 * without one, the command fails with why.
		 */
		from = parse_timeout(p, argv);
		if (from < 0 && !p->path)
			return 0;
		if (from < 0) {
			p->term_sig = 0;
			p->term_ns = p->kill_ns = 0;
			p->why[0] = '\0';
			from = 0;
		}
	}
	free(p->path);
	p->path = NULL;
	for (size_t i = 0; from + (int)i < (int)n; i++)
		p->argv[i] = argv[from + (int)i];
	return plan_program(p, p->argv, envp, u);
}

void envd_exec_plan_free(struct envd_exec_plan *p)
{
	free(p->path);
	free(p->argv);
	memset(p, 0, sizeof(*p));
}
