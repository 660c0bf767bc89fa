/*
 * hangar(1): shared declarations of the command-line tool.
 *
 * The tool uses nothing but the public libhangar API. Each command is one
 * function taking its own argv (argv[0] is the command's name); it returns
 * the process's exit status.
 */
#pragma once

#include <getopt.h>
#include <hangar/hangar.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define CLI_ATTR_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Exit statuses of the tool itself; a command's own status is passed through. */
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_TIMED_OUT 124
#define EXIT_KILLED 137           /* the command was killed by a signal */
#define EXIT_SIGNAL_BASE 128      /* hangar itself interrupted by signal N: 128 + N */

/* What every command gets: the global options. */
struct cli {
	int verbose;
	const char *events;       /* --events: NULL off, "" stderr, else a file to append to */
	const char *cmd;          /* the command's full name, for messages ("sandbox exec") */
};

typedef int (*command_fn)(struct cli *cli, int argc, char **argv);

struct command {
	const char *name;
	command_fn fn;                 /* NULL when sub is set */
	const struct command *sub;     /* subcommands, ended by a NULL name */
	const char *synopsis;          /* after "hangar " */
	const char *summary;           /* one line */
	const char *help;              /* options and details, or NULL */
};

/* main.c */
int cli_help_cmd(const char *fullname); /* prints a command's help on stdout; returns 0 */

/* util.c: messages. Every failure is one line on stderr. */
int cli_fail(const char *fmt, ...) CLI_ATTR_PRINTF(1, 2);
int cli_usage(const struct cli *cli, const char *fmt, ...) CLI_ATTR_PRINTF(2, 3);
void cli_say(const char *fmt, ...) CLI_ATTR_PRINTF(1, 2);
/* Text from a user or a peer (ids, paths) made safe for one message line:
 * control bytes escaped, cut after CLI_TEXT_MAX bytes. The result is valid
 * until four more calls on the same thread. */
#define CLI_TEXT_MAX 80
const char *cli_text(const char *s);

/* util.c: option parsing on glibc's getopt_long, stopping at the first
 * operand. Returns the option, -1 at an operand or the end (*dashdash set
 * when "--" ended the options), or '?' after reporting a usage error. */
#define OPT_HELP 'h'
int cli_getopt(const struct cli *cli, int argc, char **argv, const char *shortopts, const struct option *longopts,
	       int *dashdash);
void cli_getopt_reset(void);
/* util.c: options anywhere among at most max operands: each option goes to fn
 * (0 to go on, else a usage failure), the operands to ops. Returns the number
 * of operands (>= 0), -EXIT_USAGE or -OPT_HELP. cli_want then checks there
 * are at least n: 0, or the status to exit with (-1: help was printed). */
typedef int (*cli_opt_fn)(const struct cli *cli, int c, const char *arg, void *payload);
int cli_parse(const struct cli *cli, int argc, char **argv, const char *shortopts, const struct option *longopts,
	      char **ops, int max, cli_opt_fn fn, void *payload);
int cli_want(const struct cli *cli, int got, int n, const char *names);
/* The option tables most commands take: --help alone, or --json (-j) and
 * --help; cli_opt_json is the cli_opt_fn that sets *(int *)payload on -j. */
extern const struct option cli_opts_help[];
extern const struct option cli_opts_json[];
int cli_opt_json(const struct cli *cli, int c, const char *arg, void *payload);
/* A whole local file ("-": standard input), at most 256 MiB, into *data (malloc'd). */
int cli_read_file(const char *path, char **data, size_t *len);
/* Bounds of what the library takes: a sandbox's lifetime and a command's timeout. */
#define CLI_LIFETIME_MAX (366LL * 86400)
#define CLI_EXEC_TIMEOUT_MAX (7LL * 86400)
int cli_parse_seconds(const struct cli *cli, const char *opt, const char *s, int64_t max, int64_t *out);

/* util.c: a growing NULL-terminated list of strings (borrowed from argv). */
struct strv {
	const char **v;
	size_t n, cap;
};
int strv_push(struct strv *s, const char *str);
void strv_free(struct strv *s);
int cli_add_env(const struct cli *cli, struct strv *env, const char *kv);

/* util.c: the context and sandboxes. */
int cli_open(const struct cli *cli, hangar_ctx **out);
int cli_attach(hangar_ctx *ctx, const char *id, hangar_sandbox **out);
int cli_exit_status(const hangar_exec_result *res);

/* util.c: text. */
char *shell_join(int n, char *const *words);
int write_all(int fd, const void *data, size_t len);
void format_time_us(char *buf, size_t size, int64_t us);
void json_string(const char *s);
/* A JSON value the library made (labels, templates), written as valid UTF-8:
 * a byte that is not part of a character becomes \ufffd; "{}" for NULL. */
void json_value(const char *json);
const char *state_name(int32_t state);

/* util.c: signals. Handlers record the signal in a flag and write its number
 * to a self-pipe, so poll loops wake up; nothing else happens in a handler. */
int sig_setup(const int *signals, size_t n);
int sig_fd(void);
int sig_caught(void);
int sig_next(void);       /* the next signal from the pipe, 0 when none is pending */
int sig_block(const int *signals, size_t n, sigset_t *old);
/*
 * For long operations that stop on a signal (capture, restore, export,
 * suspend): catches SIGINT, SIGTERM, SIGHUP and SIGQUIT (EXIT_FAIL when it
 * cannot); stop_requested is their cancel callback; stop_status is the exit
 * status of a failed one: 128+signal when a signal stopped it, else the
 * message "cannot WHAT ID".
 */
int stop_signals_setup(void);
int stop_requested(void *payload);
int stop_status(int rc, const char *what, const char *id);

/* util.c: running a command with hangar_sandbox_exec on a worker thread, so a
 * signal can be noticed while it runs. */
struct exec_outcome {
	int rc;                  /* 0, a HANGAR_E* code, or 1: interrupted (see signo) */
	int signo;
	int status;              /* the exit status to pass through when rc == 0 */
	int oom_killed;          /* and it was the OOM killer's (hangar_exec_result.oom_killed) */
	char message[512];       /* when rc < 0 */
};
#define EXEC_INTERRUPTED 1
void cli_exec(struct exec_outcome *out, hangar_sandbox *sb, const char *command, const hangar_exec_opts *opts);

/* The commands. */
int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_sandbox_create(struct cli *cli, int argc, char **argv);
int cmd_sandbox_list(struct cli *cli, int argc, char **argv);
int cmd_sandbox_info(struct cli *cli, int argc, char **argv);
int cmd_sandbox_exec(struct cli *cli, int argc, char **argv);
int cmd_sandbox_shell(struct cli *cli, int argc, char **argv);
int cmd_sandbox_cp(struct cli *cli, int argc, char **argv);
int cmd_sandbox_pause(struct cli *cli, int argc, char **argv);
int cmd_sandbox_resume(struct cli *cli, int argc, char **argv);
int cmd_sandbox_kill(struct cli *cli, int argc, char **argv);
int cmd_sandbox_timeout(struct cli *cli, int argc, char **argv);
int cmd_sandbox_port(struct cli *cli, int argc, char **argv);
int cmd_sandbox_fork(struct cli *cli, int argc, char **argv);
int cmd_environment_list(struct cli *cli, int argc, char **argv);
int cmd_environment_show(struct cli *cli, int argc, char **argv);
int cmd_environment_publish(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_create(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_list(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_info(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_restore(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_export(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_blob(struct cli *cli, int argc, char **argv);
int cmd_checkpoint_delete(struct cli *cli, int argc, char **argv);
int cmd_sandbox_logs(struct cli *cli, int argc, char **argv);
int cmd_sandbox_metrics(struct cli *cli, int argc, char **argv);
int cmd_config_check(struct cli *cli, int argc, char **argv);
int cmd_template_build(struct cli *cli, int argc, char **argv);
/* snapshot.c */
int cmd_snapshot_create(struct cli *cli, int argc, char **argv);
int cmd_snapshot_delete(struct cli *cli, int argc, char **argv);
int cmd_snapshot_list(struct cli *cli, int argc, char **argv);
int cmd_snapshot_release(struct cli *cli, int argc, char **argv);
int cmd_template_list(struct cli *cli, int argc, char **argv);
int cmd_image_pull(struct cli *cli, int argc, char **argv);
int cmd_image_import(struct cli *cli, int argc, char **argv);
int cmd_image_list(struct cli *cli, int argc, char **argv);
int cmd_image_inspect(struct cli *cli, int argc, char **argv);
int cmd_image_rm(struct cli *cli, int argc, char **argv);
int cmd_image_gc(struct cli *cli, int argc, char **argv);
int cmd_version(struct cli *cli, int argc, char **argv);
int cmd_help(struct cli *cli, int argc, char **argv);
int cmd_tier_list(struct cli *cli, int argc, char **argv);
int cmd_session_create(struct cli *cli, int argc, char **argv);
int cmd_session_list(struct cli *cli, int argc, char **argv);
int cmd_session_info(struct cli *cli, int argc, char **argv);
int cmd_session_exec(struct cli *cli, int argc, char **argv);
int cmd_session_suspend(struct cli *cli, int argc, char **argv);
int cmd_session_resume(struct cli *cli, int argc, char **argv);
int cmd_session_fork(struct cli *cli, int argc, char **argv);
int cmd_session_keep(struct cli *cli, int argc, char **argv);
int cmd_session_archive(struct cli *cli, int argc, char **argv);
int cmd_session_delete(struct cli *cli, int argc, char **argv);
int cmd_session_reap(struct cli *cli, int argc, char **argv);

/* events.c: with --events, every event of ctx as one JSON line; 0 or an exit status. */
int cli_events_install(const struct cli *cli, hangar_ctx *ctx);
