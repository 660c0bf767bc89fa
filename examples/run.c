/*
 * run: runs one shell command in a fresh sandbox and exits as it did.
 *
 *   run [COMMAND]      (default: uname -sr)
 *
 * The sandbox comes from the default provider (the local one unless
 * HANGAR_DEFAULT_PROVIDER says otherwise) and is killed at the end.
 */
#include <stdio.h>
#include <hangar/hangar.h>

static int fail(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "run: %s: %s (%s)\n", what, e->message, hangar_error_name(e->code));
	return 1;
}

int main(int argc, char **argv)
{
	const char *command = argc > 1 ? argv[1] : "uname -sr";
	hangar_ctx *ctx = NULL;
	hangar_sandbox *sb = NULL;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	int status = 1, r;

	if (hangar_ctx_new(&ctx, 0) < 0)
		return fail("context");
	if (hangar_sandbox_create(&sb, ctx, NULL) < 0) {
		status = fail("create");
		goto out;
	}
	fprintf(stderr, "run: sandbox %s on %s\n", hangar_sandbox_id(sb),
		hangar_provider_name(hangar_sandbox_provider(sb)));

	if (hangar_sandbox_exec(&res, sb, command, NULL) < 0) {
		status = fail("exec");
	} else {
		/* out and err are NUL-terminated, but may hold NULs of their own. */
		fwrite(res.out.ptr, 1, res.out.size, stdout);
		fwrite(res.err.ptr, 1, res.err.size, stderr);
		if (res.timed_out)
			fprintf(stderr, "run: the command timed out\n");
		status = res.exit_code < 0 ? 128 : res.exit_code;
	}

	r = hangar_sandbox_kill(sb);
	if (r < 0 && r != HANGAR_EGONE && status == 0)
		status = fail("kill");
out:
	hangar_exec_result_dispose(&res);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(ctx);
	return status;
}
