/*
 * copy: copies a file into a sandbox, works on it there, and copies the
 * result back out.
 *
 *   copy INPUT OUTPUT
 *
 * INPUT goes to /tmp/input in a fresh sandbox; the sandbox upper-cases it
 * into /tmp/output, which is copied to OUTPUT on this machine. Both copies
 * stream, so the files can be larger than memory; copy-out takes at most
 * HANGAR_COPY_LIMIT_BYTES unless told otherwise (here: 1 GiB).
 */
#include <stdio.h>
#include <stdlib.h>
#include <hangar/hangar.h>

static int fail(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "copy: %s: %s (%s)\n", what, e->message, hangar_error_name(e->code));
	return 1;
}

int main(int argc, char **argv)
{
	hangar_ctx *ctx = NULL;
	hangar_sandbox *sb = NULL;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_copy_opts co;
	int status = 1, r;

	if (argc != 3) {
		fprintf(stderr, "usage: copy INPUT OUTPUT\n");
		return 2;
	}
	if (hangar_copy_opts_init(&co, HANGAR_COPY_OPTS_VERSION) < 0 || hangar_ctx_new(&ctx, 0) < 0)
		return fail("context");
	co.limit_bytes = 1ull << 30;
	if (hangar_sandbox_create(&sb, ctx, NULL) < 0) {
		status = fail("create");
		goto out;
	}

	if (hangar_sandbox_copy_in(sb, argv[1], "/tmp/input") < 0) {
		fail("copy in");
		goto kill;
	}
	if (hangar_sandbox_exec(&res, sb, "tr a-z A-Z < /tmp/input > /tmp/output && wc -c < /tmp/output", NULL) < 0) {
		fail("exec");
		goto kill;
	}
	if (res.exit_code != 0) {
		fprintf(stderr, "copy: the sandbox said (exit %d): %s", res.exit_code, res.err.ptr);
		goto kill;
	}
	if (hangar_sandbox_copy_out(sb, "/tmp/output", argv[2], &co) < 0) {
		fail("copy out");
		goto kill;
	}
	printf("%s: %llu bytes from sandbox %s\n", argv[2], strtoull(res.out.ptr, NULL, 10), hangar_sandbox_id(sb));
	status = 0;

kill:
	r = hangar_sandbox_kill(sb);
	if (r < 0 && r != HANGAR_EGONE && status == 0)
		status = fail("kill");
out:
	hangar_exec_result_dispose(&res);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}
