/* hangar(1): messages, option parsing, signals and small helpers the commands share. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "sjson.h"

/* ---- messages --------------------------------------------------------------- */

/*
 * Copies s into dst (cap bytes), control bytes and bytes that are not UTF-8
 * written as \xNN, cut at max input bytes with "...".
 */
static void escape_into(char *dst, size_t cap, const char *s, size_t max)
{
	size_t n = 0, i, k;

	for (i = 0; s[i] && i < max && n + 5 < cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f) {
			n += (size_t)snprintf(dst + n, cap - n, "\\x%02x", c);
		} else if (c < 0x80) {
			dst[n++] = (char)c;
		} else if ((k = sjson_char_len(s + i, strnlen(s + i, max - i < 4 ? max - i : 4))) != 0) {
			if (n + k + 5 >= cap)
				break;
			memcpy(dst + n, s + i, k);
			n += k;
			i += k - 1;
		} else {
			n += (size_t)snprintf(dst + n, cap - n, "\\x%02x", c);
		}
	}
	if (s[i] && n + 4 <= cap)
		n += (size_t)snprintf(dst + n, cap - n, "...");
	dst[n] = '\0';
}

const char *cli_text(const char *s)
{
	static __thread char bufs[4][CLI_TEXT_MAX * 4 + 8];
	static __thread unsigned next;
	char *b = bufs[next++ % 4];

	escape_into(b, sizeof(bufs[0]), s ? s : "(null)", CLI_TEXT_MAX);
	return b;
}

/* "hangar: <what>: <the library's last error>", one line whatever either holds. */
int cli_fail(const char *fmt, ...)
{
	const hangar_error *e = hangar_error_last();
	const char *msg = e->message && *e->message ? e->message : hangar_strerror(e->code);
	char what[512], line[4096], raw[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(raw, sizeof(raw), "%s: %s", what, msg);
	escape_into(line, sizeof(line), raw, sizeof(raw));
	fflush(stdout);
	fprintf(stderr, "hangar: %s\n", line);
	return EXIT_FAIL;
}

int cli_usage(const struct cli *cli, const char *fmt, ...)
{
	char raw[512], msg[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	escape_into(msg, sizeof(msg), raw, sizeof(raw));
	fflush(stdout);
	if (cli && cli->cmd)
		fprintf(stderr, "hangar: %s: %s (see 'hangar help %s')\n", cli->cmd, msg, cli->cmd);
	else
		fprintf(stderr, "hangar: %s (see 'hangar --help')\n", msg);
	return EXIT_USAGE;
}

/* A line of our own on stderr, e.g. a kept sandbox's id. */
void cli_say(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ---- options ---------------------------------------------------------------- */

void cli_getopt_reset(void)
{
	optind = 0;      /* glibc: start over on a new argv */
	opterr = 0;      /* we report errors ourselves, in one line */
}

/* The option text as typed ("--timeout" or "-t"), for messages. */
static void option_text(char *buf, size_t size, char **argv, int argc)
{
	const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : NULL;

	if (arg && strncmp(arg, "--", 2) == 0)
		snprintf(buf, size, "%.*s", (int)strcspn(arg, "="), arg);
	else if (optopt > 0 && optopt < 128)
		snprintf(buf, size, "-%c", optopt);
	else
		snprintf(buf, size, "%s", arg ? arg : "?");
}

int cli_getopt(const struct cli *cli, int argc, char **argv, const char *shortopts, const struct option *longopts,
	       int *dashdash)
{
	char spec[64], opt[128];
	int at = optind > 0 ? optind : 1;
	int c;

	/* "+": stop at the first operand (the command's own words follow);
	 * ":": tell a missing value from an unknown option. */
	snprintf(spec, sizeof(spec), "+:%s", shortopts);
	*dashdash = 0;
	c = getopt_long(argc, argv, spec, longopts, NULL);
	switch (c) {
	case -1:
		*dashdash = at < argc && optind == at + 1 && strcmp(argv[at], "--") == 0;
		return -1;
	case '?':
		option_text(opt, sizeof(opt), argv, argc);
		cli_usage(cli, "unknown option '%s'", opt);
		return '?';
	case ':':
		option_text(opt, sizeof(opt), argv, argc);
		cli_usage(cli, "option '%s' needs a value", opt);
		return '?';
	default:
		return c;
	}
}

/* A whole number of seconds from 0 to max, digits only. */
int cli_parse_seconds(const struct cli *cli, const char *opt, const char *s, int64_t max, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno || !isdigit((unsigned char)*s) || v < 0 || v > max)
		return cli_usage(cli, "%s wants a whole number of seconds from 0 to %lld, not '%s'", opt,
				 (long long)max, s);
	*out = v;
	return 0;
}

int strv_push(struct strv *s, const char *str)
{
	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		const char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = str;
	s->v[s->n] = NULL;
	return 0;
}

void strv_free(struct strv *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int cli_add_env(const struct cli *cli, struct strv *env, const char *kv)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv)
		return cli_usage(cli, "--env wants KEY=VALUE, not '%s'", kv);
	if (strv_push(env, kv) < 0) {
		fprintf(stderr, "hangar: out of memory\n");
		return EXIT_FAIL;
	}
	return 0;
}

/* ---- the library ------------------------------------------------------------ */

static void log_line(int level, const char *message, void *payload)
{
	const char *name = level <= HANGAR_LOG_ERROR ? "error"
			   : level == HANGAR_LOG_WARNING ? "warning"
			   : level <= HANGAR_LOG_INFO ? "info"
			   : "debug";
	char line[2048];
	int n;

	(void)payload;
	/* One write per line, so lines from several threads never interleave. */
	n = snprintf(line, sizeof(line), "hangar: %s: %s\n", name, message);
	if (n > 0)
		write_all(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

int cli_open(const struct cli *cli, hangar_ctx **out)
{
	if (hangar_ctx_new(out, 0) != 0)
		return cli_fail("cannot open the configuration");
	if (cli->verbose)
		hangar_ctx_set_log(*out, HANGAR_LOG_DEBUG, log_line, NULL);
	if (cli_events_install(cli, *out) != 0) {
		*out = hangar_ctx_unref(*out);
		return EXIT_FAIL;
	}
	return 0;
}

int cli_attach(hangar_ctx *ctx, const char *id, hangar_sandbox **out)
{
	int rc = hangar_sandbox_attach(out, ctx, NULL, id);

	if (rc == HANGAR_EGONE)
		return cli_fail("sandbox %s is gone", cli_text(id));
	if (rc)
		return cli_fail("cannot find sandbox %s", cli_text(id));
	return 0;
}

/* The status to exit with for a finished command. */
int cli_exit_status(const hangar_exec_result *res)
{
	if (res->timed_out)
		return EXIT_TIMED_OUT;
	if (res->exit_code < 0)
		return EXIT_KILLED;
	return res->exit_code > 255 ? 255 : res->exit_code;
}

/* ---- text ------------------------------------------------------------------- */

static int plain_word(const char *w)
{
	if (!*w)
		return 0;
	for (; *w; w++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", *w))
			return 0;
	return 1;
}

/*
 * One shell command line from words. A single word is taken as a command
 * line already ("ls | wc -l"); several are each quoted when they need it, so
 * `hangar run -- sh -c 'echo $HOME'` reaches the sandbox as typed.
 */
char *shell_join(int n, char *const *words)
{
	size_t len = 1;
	char *out, *p;

	if (n == 1)
		return strdup(words[0]);
	for (int i = 0; i < n; i++)
		len += 4 * strlen(words[i]) + 3;
	out = p = malloc(len);
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++) {
		const char *w = words[i];

		if (i)
			*p++ = ' ';
		if (plain_word(w)) {
			p = stpcpy(p, w);
			continue;
		}
		*p++ = '\'';
		for (; *w; w++) {
			if (*w == '\'')
				p = stpcpy(p, "'\\''");
			else
				*p++ = *w;
		}
		*p++ = '\'';
	}
	*p = '\0';
	return out;
}

int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* "2024-05-01T12:00:00Z", or "-" for 0. */
void format_time_us(char *buf, size_t size, int64_t us)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;

	if (us <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "-");
}

/*
 * Writes the character at p (left bytes remain) and returns its length, or
 * writes \ufffd for a byte that is not part of a valid UTF-8 character and
 * returns 1: what reaches stdout as JSON is always valid UTF-8, whatever a
 * sandbox's log or a record written by another program holds.
 */
static size_t put_char_or_fffd(const char *p, size_t left)
{
	size_t n = sjson_char_len(p, left);

	if (n) {
		fwrite(p, 1, n, stdout);
		return n;
	}
	fputs("\\ufffd", stdout);
	return 1;
}

/* A JSON string literal of s on stdout. */
void json_string(const char *s)
{
	const char *p = s ? s : "";
	size_t left = strlen(p);

	putchar('"');
	while (left) {
		unsigned char c = (unsigned char)*p;
		size_t n = 1;

		switch (c) {
		case '"': fputs("\\\"", stdout); break;
		case '\\': fputs("\\\\", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		default:
			if (c < 0x20 || c == 0x7f)
				printf("\\u%04x", c);
			else
				n = put_char_or_fffd(p, left);
		}
		p += n;
		left -= n;
	}
	putchar('"');
}

/*
 * Outside its strings JSON is ASCII, so a byte that is not part of a valid
 * character can only be inside a string, where \ufffd keeps the value valid.
 */
void json_value(const char *json)
{
	const char *p = json && *json ? json : "{}";
	size_t left = strlen(p), n;

	for (; left; p += n, left -= n)
		n = put_char_or_fffd(p, left);
}

const char *state_name(int32_t state)
{
	switch (state) {
	case HANGAR_SANDBOX_RUNNING: return "running";
	case HANGAR_SANDBOX_PAUSED: return "paused";
	default: return "unknown";
	}
}

/* ---- signals ---------------------------------------------------------------- */

static volatile sig_atomic_t caught;
static int sig_pipe[2] = { -1, -1 };

static void on_signal(int signo)
{
	int saved = errno;
	unsigned char b = (unsigned char)signo;

	caught = signo;
	if (write(sig_pipe[1], &b, 1) < 0) {
		/* the pipe is full: the flag still says it */
	}
	errno = saved;
}

int sig_setup(const int *signals, size_t n)
{
	struct sigaction sa;

	if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		fprintf(stderr, "hangar: cannot create a pipe: %s\n", strerror(errno));
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++)
		sigaction(signals[i], &sa, NULL);
	return 0;
}

int sig_fd(void)
{
	return sig_pipe[0];
}

int sig_caught(void)
{
	return caught;
}

int stop_signals_setup(void)
{
	static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

	return sig_setup(stop_signals, sizeof(stop_signals) / sizeof(stop_signals[0])) < 0 ? EXIT_FAIL : 0;
}

int stop_requested(void *payload)
{
	(void)payload;
	return sig_caught() != 0;
}

int stop_status(int rc, const char *what, const char *id)
{
	if (rc == HANGAR_ECANCELED && sig_caught())
		return EXIT_SIGNAL_BASE + sig_caught();
	return cli_fail("cannot %s %s", what, cli_text(id));
}

int sig_next(void)
{
	unsigned char b;

	if (sig_pipe[0] >= 0 && read(sig_pipe[0], &b, 1) == 1)
		return b;
	return 0;
}

int sig_block(const int *signals, size_t n, sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < n; i++)
		sigaddset(&set, signals[i]);
	return pthread_sigmask(SIG_BLOCK, &set, old);
}

/* ---- a command on a worker thread --------------------------------------------- */

/* How long a stop signal waits for the command in the sandbox to be stopped. */
#define CANCEL_WAIT_MS 5000

struct exec_job {
	hangar_sandbox *sb;
	char *command;
	hangar_exec_opts opts;       /* the caller's, with the job as payload */
	hangar_output_fn on_output;  /* and the caller's callback and payload */
	void *payload;
	atomic_int cancel;           /* set on a stop signal: the library stops the command */
	struct exec_outcome out;
	int done_fd;
};

static void job_output(int stream, const char *data, size_t len, void *payload)
{
	struct exec_job *job = payload;

	job->on_output(stream, data, len, job->payload);
}

static int job_cancelled(void *payload)
{
	struct exec_job *job = payload;

	return atomic_load(&job->cancel);
}

static void *exec_worker(void *arg)
{
	struct exec_job *job = arg;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;

	job->out.rc = hangar_sandbox_exec(&res, job->sb, job->command, &job->opts);
	if (job->out.rc) {
		const hangar_error *e = hangar_error_last();

		snprintf(job->out.message, sizeof(job->out.message), "%s",
			 *e->message ? e->message : hangar_strerror(job->out.rc));
	} else {
		job->out.status = cli_exit_status(&res);
		job->out.oom_killed = res.oom_killed;
	}
	hangar_exec_result_dispose(&res);
	if (write(job->done_fd, "x", 1) < 0) {
		/* the reader polls; it cannot miss a closed pipe */
	}
	return NULL;
}

/*
 * Runs the command and waits for it or for a signal from sig_setup(),
 * whichever comes first. On a signal the worker is left running (the caller
 * ends the process soon after) and out->rc is EXEC_INTERRUPTED.
 */
void cli_exec(struct exec_outcome *out, hangar_sandbox *sb, const char *command, const hangar_exec_opts *opts)
{
	static const int stop[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
	struct exec_job *job = calloc(1, sizeof(*job));
	int done[2] = { -1, -1 };
	pthread_t tid;
	sigset_t old;
	int err;

	memset(out, 0, sizeof(*out));
	if (!job || !(job->command = strdup(command)) || pipe2(done, O_CLOEXEC) < 0) {
		out->rc = HANGAR_ENOMEM;
		snprintf(out->message, sizeof(out->message), "%s", strerror(errno ? errno : ENOMEM));
		goto free_job;
	}
	job->sb = sb;
	job->opts = *opts;
	job->on_output = opts->on_output;
	job->payload = opts->payload;
	job->opts.on_output = opts->on_output ? job_output : NULL;
	job->opts.payload = job;
	job->opts.cancel = job_cancelled;
	job->done_fd = done[1];

	/* The worker never takes our signals: they land on this thread's poll. */
	sig_block(stop, sizeof(stop) / sizeof(stop[0]), &old);
	err = pthread_create(&tid, NULL, exec_worker, job);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		out->rc = HANGAR_EOS;
		snprintf(out->message, sizeof(out->message), "cannot start a thread: %s", strerror(err));
		goto free_job;
	}

	for (;;) {
		struct pollfd pfd[2] = { { done[0], POLLIN, 0 }, { sig_fd(), POLLIN, 0 } };
		int signo;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		while ((signo = sig_next()) != 0) {
			struct pollfd wait_done = { done[0], POLLIN, 0 };

			if (signo == SIGWINCH)
				continue;
			out->rc = EXEC_INTERRUPTED;
			out->signo = signo;
			/*
			 * Stop the command in the sandbox too, and give the library a
			 * few seconds to do it; if it cannot, the process is about to
			 * end anyway and the worker with it.
			 */
			atomic_store(&job->cancel, 1);
			if (poll(&wait_done, 1, CANCEL_WAIT_MS) <= 0)
				return;
			pthread_join(tid, NULL);
			goto free_job;
		}
	}
	pthread_join(tid, NULL);
	*out = job->out;
free_job:
	if (done[0] >= 0) {
		close(done[0]);
		close(done[1]);
	}
	if (job)
		free(job->command);
	free(job);
}

/* ---- operands and options anywhere (checkpoint, session) ------------------------------- */

int cli_parse(const struct cli *cli, int argc, char **argv, const char *shortopts, const struct option *longopts,
		 char **ops, int max, cli_opt_fn fn, void *payload)
{
	int got = 0, dd, c;

	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, shortopts, longopts, &dd);
		if (c == -1) {
			if (optind >= argc)
				break;
			do {
				if (got == max) {
					cli_usage(cli, "unexpected argument '%s'", argv[optind]);
					return -EXIT_USAGE;
				}
				ops[got++] = argv[optind++];
			} while (dd && optind < argc);
			continue;
		}
		if (c == OPT_HELP)
			return -OPT_HELP;
		if (c == '?' || !fn || fn(cli, c, optarg, payload) != 0)
			return -EXIT_USAGE;
	}
	return got;
}

int cli_want(const struct cli *cli, int got, int n, const char *names)
{
	if (got == -OPT_HELP)
		return cli_help_cmd(cli->cmd), -1;
	if (got < 0)
		return -got;
	if (got < n)
		return cli_usage(cli, "missing %s", names);
	return 0;
}

const struct option cli_opts_help[] = {
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

const struct option cli_opts_json[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 },
};

int cli_opt_json(const struct cli *cli, int c, const char *arg, void *payload)
{
	(void)cli;
	(void)arg;
	if (c != 'j')
		return EXIT_USAGE;
	*(int *)payload = 1;
	return 0;
}

int cli_read_file(const char *path, char **data, size_t *len)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return cli_fail("cannot open %s: %s", path, strerror(errno));
	for (;;) {
		if (n == cap) {
			char *b = cap > (256u << 20) ? NULL : realloc(buf, cap ? cap * 2 : 65536);

			if (!b) {
				free(buf);
				if (f != stdin)
					fclose(f);
				return cli_fail("%s: too big for a blob (256 MiB at most) or out of memory", path);
			}
			buf = b;
			cap = cap ? cap * 2 : 65536;
		}
		size_t got = fread(buf + n, 1, cap - n, f);

		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		if (f != stdin)
			fclose(f);
		return cli_fail("cannot read %s", path);
	}
	if (f != stdin)
		fclose(f);
	*data = buf;
	*len = n;
	return 0;
}
