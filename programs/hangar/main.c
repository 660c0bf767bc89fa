/* hangar(1): the command-line tool. Global options, the command tables and help. */
#define _GNU_SOURCE
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sjson.h"

static const struct command sandbox_commands[] = {
	{ "create", cmd_sandbox_create, NULL,
	  "sandbox create [--environment E] [--tier T | --provider P] [--template T] [--timeout S] [--env K=V]... "
	  "[--network on|off]",
	  "create a sandbox and print its id",
	  "      --environment E  start from environment E (HANGAR_ENVIRONMENTS_FILE):\n"
	  "                      the options below override what it sets\n"
	  "      --tier T        fast, isolated, default or heavy: the tier picks the\n"
	  "                      provider (HANGAR_TIERS; default: the environment's,\n"
	  "                      else default)\n"
	  "  -p, --provider P    the provider, whatever the tier (isolated: one listed\n"
	  "                      for it)\n"
	  "  -T, --template T    the template or image (default: the provider's);\n"
	  "      --image IMG     the same: an image of the local store (hangar image list)\n"
	  "  -t, --timeout S     lifetime in seconds; 0: no limit\n"
	  "                      (default: HANGAR_SANDBOX_TIMEOUT_SECONDS)\n"
	  "  -e, --env K=V       an environment variable for every command; repeatable\n"
	  "  -n, --network on|off  network inside the sandbox (default: the provider's)\n" },
	{ "list", cmd_sandbox_list, NULL,
	  "sandbox list [--provider P] [--json]",
	  "list sandboxes: ID, PROVIDER, STATE, CREATED, EXPIRES",
	  "  -p, --provider P    only this provider's sandboxes (default: all)\n"
	  "  -j, --json          a JSON array of objects instead of a table\n"
	  "Times are UTC; EXPIRES is '-' when the sandbox has no expiry.\n" },
	{ "info", cmd_sandbox_info, NULL,
	  "sandbox info ID [--json]",
	  "show a sandbox's provider, state and times",
	  "  -j, --json          one JSON object instead of text\n" },
	{ "exec", cmd_sandbox_exec, NULL,
	  "sandbox exec ID [--timeout S] [--cwd DIR] [--env K=V]... -- COMMAND...",
	  "run a command in an existing sandbox and exit with its status",
	  "  -t, --timeout S     the command's timeout (default: HANGAR_EXEC_TIMEOUT_SECONDS)\n"
	  "  -C, --cwd DIR       the directory to run in\n"
	  "  -e, --env K=V       an environment variable for the command; repeatable\n"
	  "The words after -- are quoted and joined into one command line for bash;\n"
	  "a single word is taken as a command line as it is. Output is streamed live.\n" },
	{ "shell", cmd_sandbox_shell, NULL,
	  "sandbox shell ID [--cwd DIR]",
	  "open an interactive login shell on a terminal in a sandbox",
	  "  -C, --cwd DIR       the directory to start in\n"
	  "The local terminal is put in raw mode while the shell runs and follows\n"
	  "window size changes. Exits with the shell's status.\n" },
	{ "cp", cmd_sandbox_cp, NULL,
	  "sandbox cp [--] SRC DST",
	  "copy a file into or out of a sandbox",
	  "Exactly one of SRC and DST is ID:PATH, a path in sandbox ID; the other is\n"
	  "a local path (write ./NAME for a local name with a colon in it). Copying to\n"
	  "a local directory or to a sandbox path ending in / keeps the file's name.\n" },
	{ "pause", cmd_sandbox_pause, NULL, "sandbox pause ID", "pause a sandbox, keeping its memory", NULL },
	{ "resume", cmd_sandbox_resume, NULL, "sandbox resume ID", "resume a paused sandbox", NULL },
	{ "kill", cmd_sandbox_kill, NULL, "sandbox kill ID", "destroy a sandbox", NULL },
	{ "timeout", cmd_sandbox_timeout, NULL,
	  "sandbox timeout ID SECONDS",
	  "let a sandbox live SECONDS from now (0: no limit)", NULL },
	{ "port", cmd_sandbox_port, NULL,
	  "sandbox port ID PORT",
	  "expose a TCP port of a sandbox and print the address to reach it at",
	  "A program in the sandbox listening on PORT is then reached at the address\n"
	  "printed: local sandboxes forward it from an ephemeral port of the host's\n"
	  "127.0.0.1 (every program on the host can connect; other sandboxes cannot).\n"
	  "Exposing a port again prints the same address; it lasts as long as the\n"
	  "sandbox.\n" },
	{ "fork", cmd_sandbox_fork, NULL,
	  "sandbox fork ID [--count N]",
	  "fork a running sandbox natively and print each new id",
	  "  -c, --count N       how many forks, 1 to 100 (default 1)\n"
	  "Needs a provider that forks (capability 'fork': e2b on E2B's cloud).\n"
	  "Each fork lives HANGAR_SANDBOX_TIMEOUT_SECONDS; a fork that failed is\n"
	  "reported on stderr, and hangar then exits 1.\n" },
	{ "logs", cmd_sandbox_logs, NULL,
	  "sandbox logs ID [--json]",
	  "print the platform's log of a sandbox: TIME, LEVEL, MESSAGE",
	  "  -j, --json          a JSON array of objects instead of lines\n"
	  "Lifecycle and system lines kept by the platform, not command output;\n"
	  "at most 1000 entries, oldest first.\n" },
	{ "metrics", cmd_sandbox_metrics, NULL,
	  "sandbox metrics ID [--json]",
	  "print a sandbox's recent CPU, memory and disk samples",
	  "  -j, --json          a JSON array of objects (bytes) instead of a table (MiB)\n"
	  "At most the newest 1000 samples, oldest first. The cube flavour of the\n"
	  "e2b provider keeps none.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command environment_commands[] = {
	{ "list", cmd_environment_list, NULL, "environment list [--json]",
	  "list the environments: NAME, TIER, TEMPLATES, DESCRIPTION",
	  "  -j, --json          a JSON array of objects instead of a table\n"
	  "Environments come from HANGAR_ENVIRONMENTS_FILE (default:\n"
	  "$XDG_CONFIG_HOME/hangar/environments.json, when it exists).\n" },
	{ "show", cmd_environment_show, NULL, "environment show NAME [--json]",
	  "show everything an environment sets",
	  "  -j, --json          one JSON object instead of text\n" },
	{ "publish", cmd_environment_publish, NULL, "environment publish NAME [--rebuild] [--json]",
	  "make what an environment's image needs on every provider of its tier",
	  "  -r, --rebuild       build templates again, even where one exists\n"
	  "  -j, --json          a JSON array, one object per provider\n"
	  "Prints one line per provider of the environment's tier: PROVIDER ACTION\n"
	  "TEMPLATE, where ACTION is built (a template built from the image now),\n"
	  "reused (one built before from the same image), named (the environment\n"
	  "names a template for it), image (the provider runs the image, which it\n"
	  "has) or pulled (the same, pulled into the image store now).\n"
	  "A provider that failed is said on stderr, and hangar exits 1.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command checkpoint_commands[] = {
	{ "create", cmd_checkpoint_create, NULL,
	  "checkpoint create ID [--workspace DIR] [--all] [--session S] [--parent C] [--label K=V]... [--blob FILE]",
	  "capture a sandbox's workspace into a sealed checkpoint and print its id",
	  "  -w, --workspace DIR  the directory kept (default: HANGAR_WORKSPACE)\n"
	  "  -a, --all           keep the whole tree, even in a git repository (default:\n"
	  "                      .git, tracked and untracked files, not ignored paths)\n"
	  "  -s, --session S     the session the checkpoint belongs to\n"
	  "  -P, --parent C      the checkpoint this one follows\n"
	  "  -l, --label K=V     a label; repeatable\n"
	  "  -b, --blob FILE     bytes to keep with it, sealed (- reads standard input)\n"
	  "  -u, --user U        capture as this user in the sandbox\n"
	  "  -t, --timeout S     give up after S seconds (default:\n"
	  "                      HANGAR_CHECKPOINT_TIMEOUT_SECONDS)\n"
	  "  -N, --no-native     use the sandbox's own tools, not hangar-envd's endpoint\n"
	  "  -j, --json          print the checkpoint's details as JSON\n"
	  "Shows progress on a terminal; a stop signal cancels and stores nothing.\n" },
	{ "list", cmd_checkpoint_list, NULL, "checkpoint list [--session S] [--json]",
	  "list checkpoints, oldest first: ID, SESSION, CREATED, STORED, FILES",
	  "  -s, --session S     only this session's checkpoints\n"
	  "  -j, --json          a JSON array of objects instead of a table\n" },
	{ "info", cmd_checkpoint_info, NULL, "checkpoint info C [--json]",
	  "show a checkpoint's session, parent, sizes, labels and store",
	  "  -j, --json          one JSON object instead of text\n" },
	{ "restore", cmd_checkpoint_restore, NULL,
	  "checkpoint restore C ID [--workspace DIR] [--merge] [--user U] [--timeout S]",
	  "restore checkpoint C into sandbox ID",
	  "  -w, --workspace DIR  where to restore (default: where it was captured)\n"
	  "  -m, --merge         add to the workspace instead of replacing its contents\n"
	  "  -u, --user U        write as this user in the sandbox\n"
	  "  -t, --timeout S     give up after S seconds\n"
	  "  -N, --no-native     use the sandbox's own tools, not hangar-envd's endpoint\n"
	  "The checkpoint is verified whole before anything in the workspace changes.\n" },
	{ "export", cmd_checkpoint_export, NULL, "checkpoint export C FILE [--timeout S]",
	  "write checkpoint C as a plain tar.zst to a local FILE",
	  "The file appears only once the checkpoint has been verified whole.\n" },
	{ "blob", cmd_checkpoint_blob, NULL, "checkpoint blob C",
	  "write the bytes kept with checkpoint C to standard output", NULL },
	{ "delete", cmd_checkpoint_delete, NULL, "checkpoint delete C",
	  "delete checkpoint C from the store and the index", NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command session_commands[] = {
	{ "create", cmd_session_create, NULL,
	  "session create [--environment E] [--tier T | --provider P] [--template T] [--timeout S] [--env K=V]... "
	  "[--network on|off] [--id ID] [--workspace DIR] [--user U] [--label K=V]... [--exclusive-credential]",
	  "create a session and its first sandbox, and print the session's id",
	  "      --environment E  make its sandboxes from environment E\n"
	  "      --tier T        fast, isolated, default or heavy\n"
	  "  -p, --provider P    the provider, whatever the tier\n"
	  "  -T, --template T    the template or image (--image IMG: the same)\n"
	  "  -t, --timeout S     each sandbox's lifetime in seconds\n"
	  "  -e, --env K=V       an environment variable for every command; repeatable\n"
	  "  -n, --network on|off  network inside its sandboxes\n"
	  "  -i, --id ID         the session's id (1 to 128 of [A-Za-z0-9._-]; default:\n"
	  "                      generated)\n"
	  "  -w, --workspace DIR what its checkpoints keep (default: the environment's,\n"
	  "                      else HANGAR_WORKSPACE)\n"
	  "  -u, --user U        the user its checkpoints run as\n"
	  "  -l, --label K=V     a label for its checkpoints; repeatable\n"
	  "      --exclusive-credential  its sandbox holds a rotating credential: never\n"
	  "                      park it\n"
	  "  -q, --quiet         print only the id\n"
	  "The create options are kept, sealed, for the sandboxes of later resumes.\n" },
	{ "list", cmd_session_list, NULL, "session list [--json]",
	  "list sessions: ID, STATE, PROVIDER, SANDBOX, UPDATED",
	  "  -j, --json          a JSON array of objects instead of a table\n" },
	{ "info", cmd_session_info, NULL, "session info S [--json]",
	  "show a session's state, sandbox, latest checkpoint and last resume",
	  "  -j, --json          one JSON object instead of text\n" },
	{ "exec", cmd_session_exec, NULL, "session exec S [--timeout S] [--cwd DIR] [--env K=V]... -- COMMAND...",
	  "run a command in a session's sandbox, resuming the session first if needed",
	  "  -t, --timeout S     the command's timeout (default: HANGAR_EXEC_TIMEOUT_SECONDS)\n"
	  "  -C, --cwd DIR       the directory to run in\n"
	  "  -e, --env K=V       an environment variable for the command; repeatable\n" },
	{ "suspend", cmd_session_suspend, NULL,
	  "session suspend S [--blob FILE] [--label K=V]... [--no-park] [--timeout S]",
	  "checkpoint a session, then park its sandbox or destroy it",
	  "  -b, --blob FILE     bytes to keep with the checkpoint (e.g. the conversation;\n"
	  "                      -: standard input)\n"
	  "  -l, --label K=V     a label for this checkpoint; repeatable\n"
	  "  -N, --no-park       destroy the sandbox even where it could be parked\n"
	  "  -t, --timeout S     the checkpoint's timeout\n"
	  "Parks (pauses with its memory) where the provider hot-resumes and\n"
	  "HANGAR_SESSION_HOT_RESUME_MINUTES, HANGAR_SESSION_HOT_RESUME_MAX and\n"
	  "HANGAR_MAX_SANDBOXES allow; prints which happened and why.\n" },
	{ "resume", cmd_session_resume, NULL, "session resume S",
	  "bring a session back and print its sandbox's id",
	  "Resumes the parked sandbox when it is still the latest state, else restores\n"
	  "the latest checkpoint into a new sandbox; says which on stderr, and why.\n" },
	{ "fork", cmd_session_fork, NULL, "session fork S [--count N]",
	  "make N sessions from a session's current state and print their ids",
	  "  -c, --count N       how many, 1 to 100 (default 1)\n"
	  "Natively where the provider forks, else from a snapshot, else from a\n"
	  "checkpoint. A fork that failed is reported on stderr, and hangar exits 1.\n" },
	{ "keep", cmd_session_keep, NULL, "session keep S",
	  "keep one session of a fork and archive the others", NULL },
	{ "archive", cmd_session_archive, NULL, "session archive S",
	  "destroy a session's sandbox and keep its checkpoints; it no longer resumes", NULL },
	{ "delete", cmd_session_delete, NULL, "session delete S",
	  "destroy a session's sandbox and delete it with its checkpoints", NULL },
	{ "reap", cmd_session_reap, NULL, "session reap",
	  "destroy parked sandboxes past HANGAR_SESSION_HOT_RESUME_MINUTES or _MAX",
	  "Prints how many were destroyed. Their sessions resume from their checkpoints.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command config_commands[] = {
	{ "check", cmd_config_check, NULL, "config check",
	  "print every setting and check that the default provider can be set up",
	  "Prints NAME=value  (source) for every HANGAR_* setting, secrets masked,\n"
	  "then the registered providers, the default one and its capabilities.\n"
	  "Fails naming the variable when a setting is malformed.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command snapshot_commands[] = {
	{ "create", cmd_snapshot_create, NULL, "snapshot create SANDBOX [NAME]",
	  "snapshot a sandbox's files and print the snapshot's id",
	  "The sandbox goes on running. Create sandboxes from the snapshot with\n"
	  "`sandbox create --template ID`. It stays until deleted.\n" },
	{ "list", cmd_snapshot_list, NULL, "snapshot list [--provider P] [--json]",
	  "list a provider's snapshots: SNAPSHOT, NAME, SANDBOX, CREATED, RELEASED",
	  "  -p, --provider P    the provider (default: HANGAR_DEFAULT_PROVIDER)\n"
	  "  -j, --json          one JSON array of {id, name, sandbox, provider,\n"
	  "                      created_at, released}\n"
	  "Oldest first. RELEASED: deleted with the last sandbox made from it.\n" },
	{ "delete", cmd_snapshot_delete, NULL, "snapshot delete ID [--provider P]",
	  "delete a snapshot no sandbox uses",
	  "  -p, --provider P    the provider (default: HANGAR_DEFAULT_PROVIDER)\n"
	  "Fails while a sandbox made from the snapshot runs.\n" },
	{ "release", cmd_snapshot_release, NULL, "snapshot release ID [--provider P]",
	  "delete a snapshot once no sandbox uses it",
	  "  -p, --provider P    the provider (default: HANGAR_DEFAULT_PROVIDER)\n"
	  "At once when no sandbox made from it runs, else with the last of them.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command template_commands[] = {
	{ "build", cmd_template_build, NULL,
	  "template build [--provider P] --name N --image IMG [--cpu MILLICORES] [--memory MIB] [--disk MIB]",
	  "build a template from an image, showing its progress, and print its id",
	  "  -p, --provider P    the provider (default: HANGAR_DEFAULT_PROVIDER)\n"
	  "  -n, --name N        the template's name\n"
	  "  -i, --image IMG     the image to build from, pullable by the platform\n"
	  "  -c, --cpu M         CPU in millicores (2000: two cores)\n"
	  "  -m, --memory MIB    memory in MiB\n"
	  "  -d, --disk MIB      writable disk in MiB\n"
	  "  -q, --quiet         print only the id\n"
	  "Waits up to HANGAR_E2B_TEMPLATE_BUILD_TIMEOUT_SECONDS for the build.\n" },
	{ "list", cmd_template_list, NULL, "template list [--provider P]",
	  "list a provider's templates: TEMPLATE, NAME, STATUS",
	  "  -p, --provider P    the provider (default: HANGAR_DEFAULT_PROVIDER)\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command image_commands[] = {
	{ "pull", cmd_image_pull, NULL, "image pull REFERENCE [--json]",
	  "pull an image from its registry into the store and print its digest",
	  "  -j, --json          the stored image as a JSON object instead of its digest\n"
	  "REFERENCE is [REGISTRY/]NAME[:TAG|@sha256:HEX] (docker.io and library/ by\n"
	  "default, :latest without a tag). Shows blobs and bytes on a terminal.\n"
	  "Logs in with HANGAR_REGISTRY_AUTH_FILE (a docker config.json); plain http\n"
	  "only for loopback or HANGAR_REGISTRY_INSECURE. A stop signal cancels it.\n" },
	{ "import", cmd_image_import, NULL, "image import PATH [--name NAME] [--json]",
	  "import an image from a file or directory and print its digest",
	  "  -n, --name NAME     a name for it (\"debian:12\"); required for a root filesystem\n"
	  "  -j, --json          the stored image as a JSON object instead of its digest\n"
	  "PATH is an OCI image layout directory, a docker or podman save archive, or\n"
	  "a root-filesystem tarball (tar, gzip or zstd), told apart by content.\n"
	  "Shows layers and bytes on a terminal. Fails, naming the member or blob,\n"
	  "on content that does not match its digests or could write outside a layer.\n" },
	{ "list", cmd_image_list, NULL, "image list [--json]",
	  "list the stored images, newest first: IMAGE, SIZE, STORED, NAMES",
	  "  -j, --json          a JSON array of objects instead of a table\n" },
	{ "inspect", cmd_image_inspect, NULL, "image inspect IMAGE [--json]",
	  "show an image: digest, names, platform, size, config, layers",
	  "  -j, --json          a JSON object instead of text\n"
	  "IMAGE is a name, sha256:<hex>, or at least 12 digits of its digest.\n" },
	{ "rm", cmd_image_rm, NULL, "image rm IMAGE... [--json]",
	  "remove images and their names; their layers go when no other image has them",
	  "  -j, --json          a JSON array of {image, removed, error, message}\n"
	  "An image a sandbox uses is not removed (HANGAR_EBUSY).\n" },
	{ "gc", cmd_image_gc, NULL, "image gc [--max-mb MIB] [--json]",
	  "remove what no image needs, then the oldest unused images past the cap",
	  "  -m, --max-mb MIB    the size to keep under (default: HANGAR_IMAGE_CACHE_MB)\n"
	  "  -j, --json          {\"freed_bytes\": N} instead of text\n"
	  "Never removes what a sandbox uses or an import is making.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command tier_commands[] = {
	{ "list", cmd_tier_list, NULL, "tier list [--json]",
	  "list the tiers, their providers, and which can serve",
	  "  -j, --json          a JSON array of objects instead of a table\n"
	  "A provider is 'not loaded' when it is not registered, cannot be set up\n"
	  "(its settings), or, for isolated, has no kernel boundary. Cooldowns belong\n"
	  "to one process: a new hangar starts with none.\n" },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const struct command commands[] = {
	{ "run", cmd_run, NULL,
	  "run [--timeout S] [--environment E] [--tier T | --provider P] [--env K=V]... [--cwd DIR] [--keep] -- "
	  "COMMAND...",
	  "run one command in a new sandbox, then kill the sandbox",
	  "  -t, --timeout S     the command's timeout (default: HANGAR_EXEC_TIMEOUT_SECONDS)\n"
	  "      --environment E  create the sandbox from environment E\n"
	  "      --tier T        fast, isolated, default or heavy: the tier picks the\n"
	  "                      provider (HANGAR_TIERS; default: default)\n"
	  "  -p, --provider P    the provider, whatever the tier (isolated: one listed\n"
	  "                      for it)\n"
	  "  -e, --env K=V       an environment variable for the command; repeatable\n"
	  "  -C, --cwd DIR       the directory to run in\n"
	  "  -k, --keep          keep the sandbox and print its id on stderr\n"
	  "The words after -- are quoted and joined into one command line for bash;\n"
	  "a single word is taken as a command line as it is. Output is streamed live;\n"
	  "hangar exits with the command's status (124: timed out, 137: killed).\n"
	  "The sandbox is killed on every way out, also on SIGINT and SIGTERM.\n" },
	{ "sandbox", NULL, sandbox_commands, "sandbox SUBCOMMAND ...", "manage sandboxes", NULL },
	{ "session", NULL, session_commands, "session SUBCOMMAND ...", "keep an agent's machine across turns", NULL },
	{ "checkpoint", NULL, checkpoint_commands, "checkpoint SUBCOMMAND ...", "capture, list and restore checkpoints", NULL },
	{ "snapshot", NULL, snapshot_commands, "snapshot SUBCOMMAND ...", "snapshot sandboxes, list and delete snapshots", NULL },
	{ "template", NULL, template_commands, "template SUBCOMMAND ...", "build and list templates", NULL },
	{ "image", NULL, image_commands, "image SUBCOMMAND ...", "pull, import, list and remove local images", NULL },
	{ "config", NULL, config_commands, "config SUBCOMMAND", "inspect the configuration", NULL },
	{ "tier", NULL, tier_commands, "tier SUBCOMMAND", "inspect the tiers", NULL },
	{ "environment", NULL, environment_commands, "environment SUBCOMMAND", "inspect the environments", NULL },
	{ "version", cmd_version, NULL, "version", "print the version", NULL },
	{ "help", cmd_help, NULL, "help [COMMAND [SUBCOMMAND]]", "show help for a command", NULL },
	{ NULL, NULL, NULL, NULL, NULL, NULL },
};

static const char exit_status_text[] =
	"Exit status:\n"
	"  0      success\n"
	"  1      a failure; one line on stderr says what failed\n"
	"  2      a usage error\n"
	"  124    the command timed out (run, sandbox exec)\n"
	"  137    the command was killed by a signal\n"
	"  128+N  hangar itself was interrupted by signal N\n"
	"  other  the command's own exit status (run, sandbox exec, sandbox shell)\n";

static const struct command *find(const struct command *table, const char *name)
{
	for (; table && table->name; table++)
		if (strcmp(table->name, name) == 0)
			return table;
	return NULL;
}

/* Prints every command of table, prefixed by the words that lead to it. */
static void print_table(const struct command *table, const char *prefix)
{
	for (const struct command *c = table; c->name; c++) {
		int width = 18 - (int)strlen(prefix);

		if (c->sub) {
			size_t n = strlen(prefix) + strlen(c->name) + 2;
			char *sub_prefix = malloc(n);

			if (!sub_prefix)
				continue;
			snprintf(sub_prefix, n, "%s%s ", prefix, c->name);
			print_table(c->sub, sub_prefix);
			free(sub_prefix);
			continue;
		}
		printf("  %s%-*s %s\n", prefix, width > 0 ? width : 0, c->name, c->summary);
	}
}

static void print_main_help(void)
{
	printf("usage: hangar [--verbose] [--events[=FILE]] COMMAND [ARGS...]\n"
	       "\n"
	       "Run untrusted code in sandboxes, on this machine or on a provider.\n"
	       "\n"
	       "Commands:\n");
	print_table(commands, "");
	printf("\n"
	       "Global options:\n"
	       "  -v, --verbose      log what the library does, on stderr\n"
	       "      --events[=FILE]  write every audit event as one JSON line on stderr,\n"
	       "                     or appended to FILE\n"
	       "  -h, --help         show this help\n"
	       "      --version      print the version\n"
	       "\n"
	       "%s"
	       "\n"
	       "Settings come from HANGAR_* environment variables: see 'hangar config check'\n"
	       "and hangar(1). 'hangar help COMMAND' shows a command's options.\n",
	       exit_status_text);
}

static void print_command_help(const struct command *c)
{
	printf("usage: hangar %s\n\n%c%s.\n", c->synopsis, toupper((unsigned char)c->summary[0]), c->summary + 1);
	if (c->sub) {
		printf("\nSubcommands:\n");
		for (const struct command *s = c->sub; s->name; s++)
			printf("  %-10s %s\n", s->name, s->summary);
		return;
	}
	if (c->help)
		printf("\n%s", c->help);
	if (c->fn == cmd_run || c->fn == cmd_sandbox_exec || c->fn == cmd_session_exec || c->fn == cmd_sandbox_shell)
		printf("\n%s", exit_status_text);
}

/* "sandbox exec" → the table entry; NULL when unknown. */
static const struct command *lookup(const char *name, const char *subname)
{
	const struct command *c = find(commands, name);

	if (c && subname)
		return c->sub ? find(c->sub, subname) : NULL;
	return c;
}

int cli_help_cmd(const char *fullname)
{
	char name[64];
	const char *space = strchr(fullname, ' ');
	const struct command *c;

	snprintf(name, sizeof(name), "%.*s", space ? (int)(space - fullname) : (int)strlen(fullname), fullname);
	c = lookup(name, space ? space + 1 : NULL);
	if (c)
		print_command_help(c);
	else
		print_main_help();
	return 0;
}

int cmd_help(struct cli *cli, int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		print_main_help();
		return 0;
	}
	if (argc > 3)
		return cli_usage(cli, "too many arguments");
	c = lookup(argv[1], argc > 2 ? argv[2] : NULL);
	if (!c) {
		if (argc > 2)
			return cli_usage(cli, "no command '%s %s'", argv[1], argv[2]);
		return cli_usage(cli, "no command '%s'", argv[1]);
	}
	print_command_help(c);
	return 0;
}

int cmd_version(struct cli *cli, int argc, char **argv)
{
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return cli_help_cmd(cli->cmd);
	if (argc > 1)
		return cli_usage(cli, "unexpected argument '%s'", argv[1]);
	printf("hangar %s\n", HANGAR_VERSION_STRING);
	if (hangar_version_number() != HANGAR_VERSION_NUMBER)
		printf("libhangar %s\n", hangar_version());
	return 0;
}

/*
 * Every argument is text that may become an id, a path, a command or a
 * label, so every one is held to the library's rule here, once: valid UTF-8
 * or nothing is done. The bytes themselves are not echoed.
 */
static int check_arguments(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		size_t len = strlen(argv[i]), at = 0, n;

		while (at < len && (n = sjson_char_len(argv[i] + at, len - at)) != 0)
			at += n;
		if (at < len)
			return cli_usage(NULL, "argument %d is not valid UTF-8 (byte %zu of %zu)", i, at + 1, len);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "events", optional_argument, NULL, 'E' },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct cli cli = { 0 };
	const struct command *c;
	char fullname[64];
	int dd, opt;

	/* A closed pipe on our output must not kill us before the sandbox is. */
	signal(SIGPIPE, SIG_IGN);
	if (check_arguments(argc, argv))
		return EXIT_USAGE;

	cli_getopt_reset();
	while ((opt = cli_getopt(&cli, argc, argv, "vh", longopts, &dd)) != -1) {
		switch (opt) {
		case 'v': cli.verbose = 1; break;
		case 'E': cli.events = optarg ? optarg : ""; break;
		case OPT_HELP: print_main_help(); return 0;
		case 'V': return cmd_version(&cli, 1, argv);
		default: return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return cli_usage(NULL, "no command given");
	argc -= optind;
	argv += optind;

	c = find(commands, argv[0]);
	if (!c)
		return cli_usage(NULL, "unknown command '%s'", argv[0]);
	snprintf(fullname, sizeof(fullname), "%s", c->name);
	cli.cmd = fullname;
	if (c->sub) {
		const struct command *s;

		if (argc < 2)
			return cli_usage(&cli, "no subcommand given");
		if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
			return cli_help_cmd(fullname);
		s = find(c->sub, argv[1]);
		if (!s)
			return cli_usage(&cli, "unknown subcommand '%s'", argv[1]);
		snprintf(fullname, sizeof(fullname), "%s %s", c->name, s->name);
		c = s;
		argc--;
		argv++;
	}
	return c->fn(&cli, argc, argv);
}
