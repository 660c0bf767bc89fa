/*
 * hangar_sandbox_exec: one command, run the same way on every provider.
 *
 * The command runs once, as `timeout -k 5s <N>s bash -lc <command>`, so the
 * in-sandbox timeout kills the whole process group and exit 124 means "timed
 * out" everywhere. envd's own deadline (Connect-Timeout-Ms) is a little
 * longer, as a backstop, and our request deadline longer still, so a silent
 * sandbox is told apart from a slow command. envd sends a keepalive every
 * second while the command is quiet, so a stream that falls silent means a
 * frozen or dead sandbox: its state is asked then, and a sandbox another
 * caller paused fails the call with HANGAR_EPAUSED within seconds. Output is
 * capped per stream, keeping its head and tail.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "util/pjson.h"
#include "sandbox.h"
#include "core/versioned.h"

#define KILL_GRACE_SEC 5      /* timeout -k: SIGKILL this long after SIGTERM */
#define ENVD_BACKSTOP_SEC 10  /* envd kills the command this long after the timeout */
#define REQUEST_SLACK_SEC 20  /* and we give up on the request this long after it */
#define EXEC_KEEPALIVE_SEC 1  /* envd's keepalive while a command is silent */
#define SILENCE_CHECK_MS 2500 /* a stream silent this long: is the sandbox still running? */
#define EXEC_TIMEOUT_MAX (7LL * 86400)     /* as HANGAR_EXEC_TIMEOUT_SECONDS */
#define OUTPUT_LIMIT_MAX (1ULL << 32)      /* as HANGAR_OUTPUT_LIMIT_BYTES */
/* Linux's MAX_ARG_STRLEN: no single argument or environment entry of a new program may be longer. */
#define ARG_STRLEN_MAX (128 * 1024)

/* Keeps the first and the last half of a stream's output. */
struct capped {
	uint64_t limit;
	uint64_t total;
	struct hbuf head;
	char *tail;               /* ring of limit - limit/2 bytes */
	size_t tail_cap, tail_len, tail_pos;
};

/* The tail ring is made when output first overflows the head: most commands never fill it. */
static void capped_init(struct capped *c, uint64_t limit)
{
	memset(c, 0, sizeof(*c));
	c->limit = limit;
	c->tail_cap = (size_t)(limit - limit / 2);
}

static void capped_free(struct capped *c)
{
	hbuf_free(&c->head);
	free(c->tail);
}

static int capped_add(struct capped *c, const char *data, size_t len)
{
	size_t head_room = (size_t)(c->limit / 2) - c->head.len;

	c->total += len;
	if (c->head.len < c->limit / 2) {
		size_t n = len < head_room ? len : head_room;

		if (hbuf_put(&c->head, data, n) < 0)
			return -1;
		data += n;
		len -= n;
	}
	/* The rest goes round the tail ring; only the last tail_cap bytes survive. */
	if (len > c->tail_cap) {
		data += len - c->tail_cap;
		len = c->tail_cap;
	}
	if (len > 0 && !c->tail && !(c->tail = malloc(c->tail_cap)))
		return -1;
	while (len > 0) {
		size_t n = c->tail_cap - c->tail_pos;

		if (n > len)
			n = len;
		memcpy(c->tail + c->tail_pos, data, n);
		c->tail_pos = (c->tail_pos + n) % c->tail_cap;
		if (c->tail_len < c->tail_cap)
			c->tail_len = c->tail_len + n > c->tail_cap ? c->tail_cap : c->tail_len + n;
		data += n;
		len -= n;
	}
	return 0;
}

/* Head, then a marker when bytes were dropped, then the tail, into out. */
static int capped_finish(struct capped *c, hangar_buf *out)
{
	struct hbuf b = HBUF_INIT;
	uint64_t kept = c->head.len + c->tail_len;
	size_t start = (c->tail_pos + c->tail_cap - c->tail_len) % (c->tail_cap ? c->tail_cap : 1);

	if (hbuf_put(&b, c->head.data ? c->head.data : "", c->head.len) < 0)
		return -1;
	if (c->total > kept &&
	    hbuf_printf(&b, "\n[... %" PRIu64 " bytes of output omitted ...]\n", c->total - kept) < 0)
		goto fail;
	if (c->tail_len) {
		size_t first = c->tail_cap - start < c->tail_len ? c->tail_cap - start : c->tail_len;

		if (hbuf_put(&b, c->tail + start, first) < 0 || hbuf_put(&b, c->tail, c->tail_len - first) < 0)
			goto fail;
	}
	free(out->ptr);
	out->size = b.len;
	out->reserved = b.cap;
	out->ptr = hbuf_steal(&b);
	return out->ptr ? 0 : -1;
fail:
	hbuf_free(&b);
	return -1;
}

/*
 * The OOM killer's count in the sandbox, where the provider keeps one
 * (table version 4), or -1. Read around a command killed by SIGKILL to say
 * that it was killed for memory rather than by some other sender.
 */
static int64_t oom_kills(struct hangar_sandbox *sb)
{
	struct hangar_provider *p = sb->provider;
	uint64_t n = 0;

	if (!p->ops.oom_kills || p->ops.oom_kills(p->state, sb->id, &n) != 0 ||
	    n > INT64_MAX)
		return -1;
	return (int64_t)n;
}

int hangar_exec_opts_init(hangar_exec_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_exec_opts);
}

void hangar_exec_result_dispose(hangar_exec_result *r)
{
	if (!r)
		return;
	/* A caller's older, smaller struct may end before the buffers. */
	if (HRESULT_HAS(r, hangar_exec_result, out))
		hangar_buf_dispose(&r->out);
	if (HRESULT_HAS(r, hangar_exec_result, err))
		hangar_buf_dispose(&r->err);
}

/* How long a stop by tag waits for envd (see stop_command). */
#define STOP_BY_TAG_MS 3000

struct exec_run {
	struct hangar_sandbox *sb;
	const hangar_exec_opts *opts;
	struct envd_call input_call;  /* for stdin, once the pid is known */
	struct capped out, err;
	uint32_t pid;
	char tag[40];                 /* the command's tag in envd: what stops it before its pid is known */
	struct proc_order order;
	int ended;
	int exit_code;
	int sigkill;                  /* SIGKILL ended the command itself */
	int failed;                   /* stdin delivery, memory or a broken protocol */
	int rc;
	int cancelled;                /* the caller's cancel callback said stop */
	int stopped;                  /* the sandbox was found paused (HANGAR_EPAUSED) or gone */
	int64_t heard_ms;             /* when the stream last said anything, keepalives too */
	int64_t checked_ms;           /* when the sandbox's state was last asked about */
};

/*
 * Polled by the envd client at least once a second while the command runs.
 * Besides the caller's cancel: envd sends a keepalive every second, so a
 * stream silent for SILENCE_CHECK_MS means a frozen or dead sandbox. Its
 * state is then asked once per SILENCE_CHECK_MS, so a command on a sandbox
 * that another process paused fails within seconds with HANGAR_EPAUSED,
 * not after its whole deadline.
 */
static int exec_poll(void *arg)
{
	struct exec_run *run = arg;
	int64_t now;
	int r;

	if (!run->cancelled && run->opts->cancel && run->opts->cancel(run->opts->payload))
		run->cancelled = 1;
	if (run->cancelled || run->stopped)
		return 1;
	now = clock_mono_ms();
	if (now - run->heard_ms < SILENCE_CHECK_MS || now - run->checked_ms < SILENCE_CHECK_MS)
		return 0;
	run->checked_ms = now;
	r = sandbox_paused_now(run->sb);
	if (r == 1)
		run->stopped = HANGAR_EPAUSED;
	else if (r == HANGAR_EGONE)
		run->stopped = HANGAR_EGONE;
	return run->stopped != 0;
}

static int send_stdin(struct exec_run *run)
{
	struct envd_client *c = envd_client_of(run->sb->ctx);
	cJSON *req = cJSON_CreateObject(), *resp = NULL;
	cJSON *sel = cJSON_AddObjectToObject(req, "process");
	char *b64 = pjson_b64_encode(run->opts->stdin_data, run->opts->stdin_len);
	int rc;

	cJSON_AddNumberToObject(sel, "pid", run->pid);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(req, "input"), "stdin", b64 ? b64 : "");
	free(b64);
	rc = envd_unary(c, &run->input_call, "/process.Process/SendInput", req, &resp, NULL);
	cJSON_Delete(resp);
	resp = NULL;
	cJSON_DeleteItemFromObject(req, "input");
	/* EOF even if the write failed, so the command never waits for more. */
	if (envd_unary(c, &run->input_call, "/process.Process/CloseStdin", req, &resp, NULL) != 0 && rc == 0)
		rc = hangar_error_last()->code;
	cJSON_Delete(resp);
	cJSON_Delete(req);
	return rc;
}

void proc_event_parse(const cJSON *msg, struct proc_event *ev)
{
	static const struct { const char *name; int stream; } kinds[] = {
		{ "stdout", HANGAR_STREAM_STDOUT }, { "stderr", HANGAR_STREAM_STDERR }, { "pty", HANGAR_STREAM_PTY },
	};
	const cJSON *e = pjson_field(msg, "event", NULL), *x;

	memset(ev, 0, sizeof(*ev));
	if ((x = pjson_field(e, "start", NULL))) {
		ev->kind = PROC_EVENT_START;
		if (!cJSON_IsObject(x) || pjson_uint32(x, "pid", NULL, &ev->pid) < 0)
			ev->kind = PROC_EVENT_BAD;
	} else if ((x = pjson_field(e, "data", NULL))) {
		ev->kind = PROC_EVENT_DATA;
		if (!cJSON_IsObject(x)) {
			ev->kind = PROC_EVENT_BAD;
			return;
		}
		/* An empty message carries nothing; anything else must be one stream of base64. */
		for (const cJSON *f = x->child; f; f = f->next) {
			size_t i = 0;

			while (i < sizeof(kinds) / sizeof(kinds[0]) && strcmp(f->string, kinds[i].name) != 0)
				i++;
			if (i == sizeof(kinds) / sizeof(kinds[0]) || ev->bytes ||
			    pjson_bytes(x, kinds[i].name, NULL, &ev->bytes, &ev->len) != 1) {
				free(ev->bytes);
				ev->bytes = NULL;
				ev->len = 0;
				ev->kind = PROC_EVENT_BAD;
				return;
			}
			ev->stream = kinds[i].stream;
		}
		if (ev->bytes && ev->len == 0) {
			free(ev->bytes);
			ev->bytes = NULL;
		}
	} else if ((x = pjson_field(e, "end", NULL))) {
		int exited = 0;

		ev->kind = PROC_EVENT_END;
		if (!cJSON_IsObject(x) || pjson_int32(x, "exitCode", "exit_code", &ev->exit_code) < 0 ||
		    pjson_bool(x, "exited", NULL, &exited) < 0) {
			ev->kind = PROC_EVENT_BAD;
			return;
		}
		if (!exited) {
			const char *status = NULL;

			ev->exit_code = -1;
			/* envd's status is Go's ProcessState.String(): "signal: killed" for SIGKILL. */
			ev->sigkill = pjson_string(x, "status", NULL, &status) == 1 && status &&
				      !strcmp(status, "signal: killed");
		}
	}
}

int proc_order_check(struct proc_order *o, const struct proc_event *ev, const char *what)
{
	const char *broken = NULL;

	switch (ev->kind) {
	case PROC_EVENT_BAD:
		broken = "an event that does not decode";
		break;
	case PROC_EVENT_START:
		if (o->started || o->ended)
			broken = "a second start event";
		o->started = 1;
		break;
	case PROC_EVENT_DATA:
		if (o->ended)
			broken = "output after the end event";
		break;
	case PROC_EVENT_END:
		if (o->ended)
			broken = "a second end event";
		o->ended = 1;
		break;
	default:
		break;
	}
	if (!broken)
		return 0;
	return herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "%s stream broke the protocol: %s", what, broken);
}

/*
 * Stops the command in the sandbox: SIGTERM goes to timeout(1), which
 * passes it on to the command's whole process group. Best effort, and the
 * thread's error is left as it was.
 */
static void stop_command(struct exec_run *run)
{
	struct envd_client *c = envd_client_of(run->sb->ctx);
	hangar_sys_saved_error saved;
	struct envd_call call = run->input_call;
	cJSON *req, *resp = NULL, *sel;

	if (!c || (!run->pid && !run->tag[0]))
		return;
	hangar_sys_error_save(&saved);
	req = cJSON_CreateObject();
	sel = cJSON_AddObjectToObject(req, "process");
	/*
	 * By its tag until envd's start event gave the pid: a caller may give
	 * up on a command that runs already while that event is on its way.
	 */
	if (run->pid) {
		cJSON_AddNumberToObject(sel, "pid", run->pid);
	} else {
		cJSON_AddStringToObject(sel, "tag", run->tag);
		/* No start event may mean a hung envd: never wait on it longer than this. */
		call.deadline_ms = STOP_BY_TAG_MS;
	}
	cJSON_AddStringToObject(req, "signal", "SIGNAL_SIGTERM");
	envd_unary(c, &call, "/process.Process/SendSignal", req, &resp, NULL);
	cJSON_Delete(resp);
	cJSON_Delete(req);
	hangar_sys_error_restore(&saved);
}

/* The caller gave up: stop the command in the sandbox too. */
static int cancel_command(struct exec_run *run)
{
	stop_command(run);
	return herr(HANGAR_ECANCELED, HANGAR_ERRCAT_ARGUMENT, "the command was cancelled");
}

static int on_event(const cJSON *msg, void *arg)
{
	struct exec_run *run = arg;
	struct proc_event ev;

	run->heard_ms = clock_mono_ms();
	proc_event_parse(msg, &ev);
	if (proc_order_check(&run->order, &ev, "command") != 0) {
		/* Nothing after this can be believed: not the output, not an exit status. */
		free(ev.bytes);
		run->failed = run->rc = HANGAR_EPROTOCOL;
		return 1;
	}
	switch (ev.kind) {
	case PROC_EVENT_START:
		run->pid = ev.pid;
		if (run->opts->stdin_data && send_stdin(run) != 0)
			run->failed = run->rc = hangar_error_last()->code;
		break;
	case PROC_EVENT_DATA: {
		/* exec has no terminal: terminal output would be stdout. */
		int stream = ev.stream == HANGAR_STREAM_STDERR ? HANGAR_STREAM_STDERR : HANGAR_STREAM_STDOUT;

		if (!ev.bytes)
			break;
		if (run->opts->on_output)
			run->opts->on_output(stream, (const char *)ev.bytes, ev.len, run->opts->payload);
		if (capped_add(stream == HANGAR_STREAM_STDERR ? &run->err : &run->out, (const char *)ev.bytes, ev.len) < 0 &&
		    !run->failed)
			run->failed = run->rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		break;
	}
	case PROC_EVENT_END:
		run->ended = 1;
		run->exit_code = ev.exit_code;
		run->sigkill = ev.sigkill;
		break;
	default:
		break;
	}
	free(ev.bytes);
	return run->failed != 0;
}

/*
 * A tag of the command's own, "hangar-exec-" and 24 random hex digits (size
 * >= 37), so that a cancel can stop it before envd said its pid; "" when
 * there is no randomness, and then only the pid stops it.
 */
static void exec_tag(char *tag, size_t size)
{
	unsigned char r[12];
	int n;

	tag[0] = '\0';
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return;
	n = snprintf(tag, size, "hangar-exec-");
	for (size_t i = 0; i < sizeof(r); i++)
		n += snprintf(tag + n, size - (size_t)n, "%02x", r[i]);
}

/* The StartRequest: timeout -k 5s <N>s bash -lc <command>, with CI=true and the caller's env, and tag. */
static cJSON *start_request(const char *command, const hangar_exec_opts *o, int64_t timeout, const char *tag)
{
	cJSON *req = cJSON_CreateObject(), *p = cJSON_AddObjectToObject(req, "process");
	cJSON *args = cJSON_AddArrayToObject(p, "args"), *envs = cJSON_AddObjectToObject(p, "envs");
	char secs[32], grace[16];

	snprintf(secs, sizeof(secs), "%" PRId64 "s", timeout);
	snprintf(grace, sizeof(grace), "%ds", KILL_GRACE_SEC);
	cJSON_AddStringToObject(p, "cmd", "timeout");
	cJSON_AddItemToArray(args, cJSON_CreateString("-k"));
	cJSON_AddItemToArray(args, cJSON_CreateString(grace));
	cJSON_AddItemToArray(args, cJSON_CreateString(secs));
	cJSON_AddItemToArray(args, cJSON_CreateString("bash"));
	cJSON_AddItemToArray(args, cJSON_CreateString("-lc"));
	cJSON_AddItemToArray(args, cJSON_CreateString(command));
	cJSON_AddStringToObject(envs, "CI", "true");
	for (const char *const *e = o->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		char *key = strndup(*e, (size_t)(eq - *e));

		if (key) {
			cJSON_DeleteItemFromObjectCaseSensitive(envs, key);
			cJSON_AddStringToObject(envs, key, eq + 1);
			free(key);
		}
	}
	if (o->cwd)
		cJSON_AddStringToObject(p, "cwd", o->cwd);
	cJSON_AddBoolToObject(req, "stdin", o->stdin_data != NULL);
	if (tag[0])
		cJSON_AddStringToObject(req, "tag", tag);
	return req;
}

int hangar_sandbox_exec(hangar_exec_result *out, hangar_sandbox *sb, const char *command,
			const hangar_exec_opts *opts)
{
	struct exec_run run = { 0 };
	hangar_exec_opts o;
	struct envd_status st = { 0 };
	struct envd_call call;
	struct sbview *v;
	struct envd_client *c;
	int64_t timeout, started, ooms;
	uint64_t limit;
	cJSON *req;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	rc = hversioned_check(out, &hv_exec_result, "out");
	if (rc)
		return rc;
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(command, "command is NULL");
	rc = HOPTS_COPY(o, opts, hv_exec_opts, "opts");
	if (rc)
		return rc;
	HCHECK_ARG(o.timeout_sec >= 0 && o.timeout_sec <= EXEC_TIMEOUT_MAX,
		   "opts->timeout_sec must be from 0 to 604800 (7 days)");
	HCHECK_ARG(o.output_limit <= OUTPUT_LIMIT_MAX, "opts->output_limit must be at most 4294967296");
	for (const char *const *e = o.env; e && *e; e++) {
		HCHECK_ARG(strchr(*e, '=') && **e != '=', "opts->env entries must be KEY=VALUE");
		HCHECK_ARG(strlen(*e) < ARG_STRLEN_MAX, "an opts->env entry is over 128 KiB, more than a program may get");
	}
	if (strlen(command) >= ARG_STRLEN_MAX)
		return herr(HANGAR_EINVAL, HANGAR_ERRCAT_ARGUMENT,
			    "invalid argument: the command line is %zu bytes; a sandbox runs at most %d "
			    "(write a longer script to a file and run that)",
			    strlen(command), ARG_STRLEN_MAX - 1);
	timeout = o.timeout_sec ? o.timeout_sec : hctx_int(sb->ctx, HS_EXEC_TIMEOUT);
	limit = o.output_limit ? o.output_limit : (uint64_t)hctx_int(sb->ctx, HS_OUTPUT_LIMIT);
	if (timeout <= 0)
		timeout = 1;

	c = envd_client_of(sb->ctx);
	if (!c)
		return hangar_error_last()->code;
	v = sandbox_begin(sb, &call, o.user);
	if (!v)
		return hangar_error_last()->code;
	call.connect_timeout_ms = (timeout + KILL_GRACE_SEC + ENVD_BACKSTOP_SEC) * 1000;
	call.deadline_ms = (timeout + KILL_GRACE_SEC + ENVD_BACKSTOP_SEC + REQUEST_SLACK_SEC) * 1000;
	call.keepalive_sec = EXEC_KEEPALIVE_SEC;
	call.cancel = exec_poll;
	call.cancel_arg = &run;
	run.input_call = call;
	run.input_call.cancel = NULL;
	run.input_call.connect_timeout_ms = 0;
	run.input_call.keepalive_sec = 0;
	run.input_call.deadline_ms = hctx_int(sb->ctx, HS_REQUEST_TIMEOUT) * 1000;
	run.sb = sb;
	run.opts = &o;
	capped_init(&run.out, limit);
	capped_init(&run.err, limit);

	exec_tag(run.tag, sizeof(run.tag));
	req = start_request(command, &o, timeout, run.tag);
	ooms = oom_kills(sb);
	started = clock_mono_ms();
	run.heard_ms = run.checked_ms = started;
	rc = envd_stream(c, &call, "/process.Process/Start", req, on_event, &run, &st);
	cJSON_Delete(req);
	if (run.failed) {
		rc = run.rc;
		if (!run.ended)
			stop_command(&run); /* nobody is listening to it any more */
	} else if (rc == ENVD_CANCELLED && run.cancelled)
		rc = cancel_command(&run);
	else if (rc == ENVD_CANCELLED && run.stopped == HANGAR_EPAUSED)
		rc = herr(HANGAR_EPAUSED, HANGAR_ERRCAT_SANDBOX,
			  "sandbox %s was paused while the command ran (it may go on once resumed)", sb->id);
	else if (rc == ENVD_CANCELLED && run.stopped == HANGAR_EGONE)
		rc = herr(HANGAR_EGONE, HANGAR_ERRCAT_SANDBOX, "sandbox %s is gone: the command ended with it", sb->id);
	else if (rc == HANGAR_ETIMEOUT && st.code == CONNECT_DEADLINE_EXCEEDED)
		rc = 0; /* envd's backstop killed it: a timed-out command, reported as such */
	else if (rc == 0 && !run.ended)
		rc = sandbox_classify_failure(sb, herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX,
						      "command stream ended without an end event"), &st);
	else if (rc == ENVD_CANCELLED)
		rc = herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX, "command stream stopped");
	else if (rc)
		rc = sandbox_classify_failure(sb, rc, &st);
	sbview_put(v);

	if (rc == 0) {
		hangar_exec_result full = { 0 };
		int backstop = !run.ended;

		full.exit_code = backstop ? -1 : run.exit_code;
		/*
		 * A command that ignores SIGTERM is killed with SIGKILL once the
		 * timeout's grace is over: either its shell reports 137, or the
		 * kill reached the whole process group, the timeout wrapper
		 * included, and the command ended by the signal itself.
		 */
		full.timed_out = backstop || run.exit_code == 124 ||
				 ((run.exit_code == 128 + 9 || run.sigkill) && clock_mono_ms() - started >= timeout * 1000);
		full.out_bytes = run.out.total;
		full.err_bytes = run.err.total;
		full.duration_us = (clock_mono_ms() - started) * 1000;
		/*
		 * Killed for memory: SIGKILL ended the command (itself, or a
		 * process its shell waited on last: 137), and the OOM killer
		 * killed in the sandbox meanwhile. A command that ended any
		 * other way (or timed out) was not the one killed, whatever ran
		 * beside it.
		 */
		full.oom_killed = ooms >= 0 && !full.timed_out && (run.sigkill || run.exit_code == 128 + 9) &&
				  oom_kills(sb) > ooms;
		if (capped_finish(&run.out, &full.out) < 0 || capped_finish(&run.err, &full.err) < 0) {
			hangar_buf_dispose(&full.out);
			hangar_buf_dispose(&full.err);
			rc = herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
		} else {
			/* Output the caller's struct has no room for is not handed over. */
			if (!HRESULT_HAS(out, hangar_exec_result, out))
				hangar_buf_dispose(&full.out);
			if (!HRESULT_HAS(out, hangar_exec_result, err))
				hangar_buf_dispose(&full.err);
			hangar_exec_result_dispose(out);
			hresult_store(out, &full, sizeof(full));
			herr_clear();
		}
	}
	capped_free(&run.out);
	capped_free(&run.err);
	return rc;
}
