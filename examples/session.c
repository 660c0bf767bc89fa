/*
 * session: one agent session across two turns.
 *
 *   session [--keep]
 *
 * Turn one writes notes in the session's sandbox and suspends the session
 * with the conversation so far (the blob). Turn two resumes it, hot when
 * the parked sandbox is still there and trusted, cold from the checkpoint
 * otherwise, and reads the notes and the conversation back. The session is
 * deleted at the end unless --keep is given.
 */
#include <stdio.h>
#include <string.h>
#include <hangar/hangar.h>

static int fail(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "session: %s: %s (%s)\n", what, e->message, hangar_error_name(e->code));
	return 1;
}

int main(int argc, char **argv)
{
	static const char *const how[] = { "never", "hot", "cold", "fresh" };
	const char *chat = "user: keep the notes\n";
	int keep = argc > 1 && strcmp(argv[1], "--keep") == 0;
	hangar_ctx *ctx = NULL;
	hangar_session *s = NULL;
	hangar_sandbox *sb = NULL;
	hangar_exec_result res = HANGAR_EXEC_RESULT_INIT;
	hangar_buf blob = HANGAR_BUF_INIT;
	hangar_suspend_opts so;
	hangar_session_info info;
	hangar_checkpoint *ck = NULL;
	int status = 1;

	/* As HANGAR_SESSION_INFO_INIT, spelt out for -Wmissing-field-initializers. */
	memset(&info, 0, sizeof(info));
	info.version = HANGAR_SESSION_INFO_VERSION;
	info.size = sizeof(info);
	if (hangar_suspend_opts_init(&so, HANGAR_SUSPEND_OPTS_VERSION) < 0 || hangar_ctx_new(&ctx, 0) < 0)
		return fail("context");
	if (hangar_session_create(&s, ctx, NULL) < 0) {
		fail("create");
		goto out;
	}
	printf("session %s\n", hangar_session_id(s));

	/* Turn one. */
	if (hangar_session_sandbox(&sb, s) < 0 ||
	    hangar_sandbox_exec(&res, sb, "mkdir -p /workspace && echo draft one > /workspace/notes", NULL) < 0) {
		fail("turn one");
		goto out;
	}
	sb = hangar_sandbox_unref(sb);
	so.blob = chat;
	so.blob_len = strlen(chat);
	if (hangar_session_suspend(s, &so) < 0) {
		fail("suspend");
		goto out;
	}

	/* Turn two. */
	hangar_exec_result_dispose(&res);
	if (hangar_session_resume(s, &sb) < 0 || hangar_session_get_info(&info, s) < 0) {
		fail("resume");
		goto out;
	}
	printf("resumed %s%s%s\n", how[info.last_resume], *info.last_resume_reason ? ": " : "",
	       info.last_resume_reason);
	if (hangar_sandbox_exec(&res, sb, "cat /workspace/notes", NULL) < 0) {
		fail("turn two");
		goto out;
	}
	printf("notes: %s", res.out.ptr);
	if (hangar_checkpoint_lookup(&ck, ctx, info.checkpoint_id) < 0 || hangar_checkpoint_read_blob(&blob, ck) < 0) {
		fail("conversation");
		goto out;
	}
	printf("conversation: %.*s", (int)blob.size, blob.ptr);
	status = 0;
out:
	if (s && !keep && hangar_session_delete(s) < 0 && status == 0)
		status = fail("delete");
	hangar_buf_dispose(&blob);
	hangar_checkpoint_unref(ck);
	hangar_exec_result_dispose(&res);
	hangar_sandbox_unref(sb);
	hangar_session_unref(s);
	hangar_ctx_unref(ctx);
	return status;
}
