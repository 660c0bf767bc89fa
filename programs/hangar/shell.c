/*
 * hangar sandbox shell: an interactive login shell on a terminal in the
 * sandbox. The local terminal goes raw so every key reaches the remote one;
 * it is restored on every way out, signals included. One poll loop on the
 * main thread reads stdin, the signal self-pipe (SIGWINCH resizes) and a
 * pipe a waiter thread writes to when the shell ends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

static const int shell_signals[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
#define N_SHELL_SIGNALS (sizeof(shell_signals) / sizeof(shell_signals[0]))

#define DEFAULT_COLS 80
#define DEFAULT_ROWS 24

struct shell {
	hangar_process *proc;
	int done[2];              /* the waiter writes a byte when the shell ended */
	int wait_rc;
	int32_t exit_code;
	char message[512];
	int raw;                  /* the local terminal is in raw mode */
	struct termios saved;
};

static void shell_output(int stream, const char *data, size_t len, void *payload)
{
	(void)payload;
	write_all(stream == HANGAR_STREAM_STDERR ? STDERR_FILENO : STDOUT_FILENO, data, len);
}

static void *waiter(void *arg)
{
	struct shell *sh = arg;

	sh->wait_rc = hangar_process_wait(&sh->exit_code, sh->proc, -1);
	if (sh->wait_rc)
		snprintf(sh->message, sizeof(sh->message), "%s", hangar_error_last()->message);
	if (write(sh->done[1], "x", 1) < 0) {
		/* the main loop polls the pipe; a failed write cannot happen on an empty one */
	}
	return NULL;
}

/* The local terminal's size, from stdin or stdout, whichever is a terminal. */
static void window_size(uint32_t *cols, uint32_t *rows)
{
	struct winsize ws;

	*cols = DEFAULT_COLS;
	*rows = DEFAULT_ROWS;
	if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) &&
	    ws.ws_col > 0 && ws.ws_row > 0) {
		*cols = ws.ws_col;
		*rows = ws.ws_row;
	}
}

static int raw_on(struct shell *sh)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &sh->saved) < 0)
		return 0;
	t = sh->saved;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t) < 0)
		return -1;
	sh->raw = 1;
	return 0;
}

static void raw_off(struct shell *sh)
{
	if (sh->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &sh->saved);
	sh->raw = 0;
}

static int exit_status_of(int32_t code)
{
	if (code < 0)
		return EXIT_KILLED;
	return code > 255 ? 255 : code;
}

/*
 * After our input ends, the terminal gets an end-of-file character, and again
 * every EOF_REPEAT_MS while the shell runs on: one that arrives while the
 * shell is busy with a command is eaten by the line discipline when readline
 * leaves canonical mode, and the shell would wait for input forever.
 */
#define EOF_REPEAT_MS 500

static int send_eof(struct shell *sh, const char *id)
{
	if (hangar_process_write(sh->proc, "\x04", 1) != 0 && hangar_error_last()->code != HANGAR_ENOTFOUND) {
		raw_off(sh);
		return cli_fail("cannot write to the shell in sandbox %s", id);
	}
	/* ENOTFOUND: it just exited; the waiter reports it. */
	return 0;
}

/* Runs until the shell ends or a signal ends us; returns the exit status. */
static int shell_loop(struct shell *sh, const char *id)
{
	int stdin_open = 1;
	char buf[4096];

	for (;;) {
		struct pollfd pfd[3] = {
			{ sh->done[0], POLLIN, 0 },
			{ sig_fd(), POLLIN, 0 },
			{ stdin_open ? STDIN_FILENO : -1, POLLIN, 0 },
		};
		int signo, n;

		n = poll(pfd, 3, stdin_open ? -1 : EOF_REPEAT_MS);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			raw_off(sh);
			fprintf(stderr, "hangar: poll failed: %s\n", strerror(errno));
			return EXIT_FAIL;
		}
		if (pfd[0].revents)
			return 0;
		if (n == 0) {
			if (send_eof(sh, id) != 0)
				return EXIT_FAIL;
			continue;
		}
		while ((signo = sig_next()) != 0) {
			if (signo == SIGWINCH) {
				uint32_t cols, rows;

				window_size(&cols, &rows);
				hangar_process_resize(sh->proc, cols, rows);
				continue;
			}
			/* Our terminal is going away: so does the shell. */
			hangar_process_signal(sh->proc, HANGAR_SIGKILL);
			return EXIT_SIGNAL_BASE + signo;
		}
		if (pfd[2].revents) {
			ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));

			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				stdin_open = 0;
				if (send_eof(sh, id) != 0)
					return EXIT_FAIL;
				continue;
			}
			if (hangar_process_write(sh->proc, buf, (size_t)got) != 0 &&
			    hangar_error_last()->code != HANGAR_ENOTFOUND) {
				raw_off(sh);
				return cli_fail("cannot write to the shell in sandbox %s", id);
			}
		}
	}
}

int cmd_sandbox_shell(struct cli *cli, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "cwd", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	hangar_process_opts opts = HANGAR_PROCESS_OPTS_INIT;
	struct shell sh = { .done = { -1, -1 } };
	struct strv env = { 0 };
	hangar_sandbox *sb = NULL;
	hangar_ctx *ctx = NULL;
	const char *id = NULL, *cwd = NULL, *term;
	char *term_env = NULL;
	int dd, c, status = 0;
	pthread_t tid;
	sigset_t old;

	cli_getopt_reset();
	for (;;) {
		c = cli_getopt(cli, argc, argv, "C:h", longopts, &dd);
		if (c == -1) {
			if (!id && optind < argc) {
				id = argv[optind++];
				if (!dd)
					continue;
			}
			break;
		}
		switch (c) {
		case 'C': cwd = optarg; break;
		case OPT_HELP: return cli_help_cmd(cli->cmd);
		default: return EXIT_USAGE;
		}
	}
	if (!id)
		return cli_usage(cli, "no sandbox id given");
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);

	if ((status = cli_open(cli, &ctx)) != 0 || (status = cli_attach(ctx, id, &sb)) != 0)
		goto out;
	if (sig_setup(shell_signals, N_SHELL_SIGNALS) < 0) {
		status = EXIT_FAIL;
		goto out;
	}
	if (pipe2(sh.done, O_CLOEXEC) < 0) {
		fprintf(stderr, "hangar: cannot create a pipe: %s\n", strerror(errno));
		status = EXIT_FAIL;
		goto out;
	}

	/* The remote terminal speaks the same language as ours. */
	term = getenv("TERM");
	if (asprintf(&term_env, "TERM=%s", term && *term ? term : "xterm-256color") < 0 ||
	    strv_push(&env, term_env) < 0) {
		fprintf(stderr, "hangar: out of memory\n");
		status = EXIT_FAIL;
		goto out;
	}
	opts.pty = 1;
	opts.cwd = cwd;
	opts.env = env.v;
	window_size(&opts.cols, &opts.rows);
	opts.on_output = shell_output;
	/* Raw before the shell starts, so nothing typed meanwhile is echoed twice. */
	if (raw_on(&sh) < 0) {
		fprintf(stderr, "hangar: cannot put the terminal in raw mode: %s\n", strerror(errno));
		status = EXIT_FAIL;
		goto out;
	}
	if (hangar_process_start(&sh.proc, sb, NULL, &opts) != 0) {
		raw_off(&sh);
		status = cli_fail("cannot start a shell in sandbox %s", id);
		goto out;
	}

	sig_block(shell_signals, N_SHELL_SIGNALS, &old);
	c = pthread_create(&tid, NULL, waiter, &sh);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (c) {
		raw_off(&sh);
		fprintf(stderr, "hangar: cannot start a thread: %s\n", strerror(c));
		hangar_process_signal(sh.proc, HANGAR_SIGKILL);
		status = EXIT_FAIL;
		goto out;
	}
	status = shell_loop(&sh, id);
	raw_off(&sh);
	if (status != 0) {
		/* Interrupted or failed: the waiter may still be inside the library. */
		fflush(NULL);
		_exit(status);
	}
	pthread_join(tid, NULL);
	if (sh.wait_rc) {
		fflush(stdout);
		fprintf(stderr, "hangar: shell in sandbox %s failed: %s\n", id,
			*sh.message ? sh.message : hangar_strerror(sh.wait_rc));
		status = EXIT_FAIL;
	} else {
		status = exit_status_of(sh.exit_code);
	}
out:
	raw_off(&sh);
	hangar_process_unref(sh.proc);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	if (sh.done[0] >= 0) {
		close(sh.done[0]);
		close(sh.done[1]);
	}
	strv_free(&env);
	free(term_env);
	return status;
}
