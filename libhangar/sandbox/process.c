/*
 * hangar_process: background commands and terminals. Each handle runs its
 * envd stream (Start or Connect) on a thread of its own, delivering output
 * to the caller's callback and recording the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/pjson.h"
#include "sandbox.h"
#include "core/versioned.h"

#define PROCESS_KEEPALIVE_SEC 30
#define PROCESS_TIMEOUT_MAX (366LL * 86400)  /* as HANGAR_SANDBOX_TIMEOUT_SECONDS */

struct hangar_process {
	atomic_int refs;
	struct hangar_sandbox *sb;          /* referenced */
	hangar_process_opts opts;
	int is_pty;
	cJSON *request;                     /* Start or Connect request */
	const char *method;

	pthread_t thread;
	atomic_int stop;                    /* the last reference went: stop following */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t pid;
	int started;                        /* the start event arrived */
	struct proc_order order;            /* stream thread only */
	int broken;                         /* the stream broke the protocol: its error is the thread's */
	int ended;                          /* the stream is over */
	int have_exit;
	int32_t exit_code;
	int rc;                             /* how the stream ended */
	hangar_error err;                   /* the stream thread's error, for wait() */
	char err_message[1024];
	char err_provider_code[64];
};

int hangar_process_opts_init(hangar_process_opts *opts, uint32_t version)
{
	return hversioned_init(opts, version, &hv_process_opts);
}

static int on_event(const cJSON *msg, void *arg)
{
	struct hangar_process *p = arg;
	struct proc_event ev;

	proc_event_parse(msg, &ev);
	if (proc_order_check(&p->order, &ev, "process") != 0) {
		free(ev.bytes);
		p->broken = 1;
		return 1;
	}
	switch (ev.kind) {
	case PROC_EVENT_START:
		pthread_mutex_lock(&p->mu);
		p->pid = ev.pid;
		p->started = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		break;
	case PROC_EVENT_DATA:
		if (ev.bytes && p->opts.on_output)
			p->opts.on_output(ev.stream, (const char *)ev.bytes, ev.len, p->opts.payload);
		break;
	case PROC_EVENT_END:
		pthread_mutex_lock(&p->mu);
		p->have_exit = 1;
		p->exit_code = ev.exit_code;
		pthread_mutex_unlock(&p->mu);
		break;
	default:
		break;
	}
	free(ev.bytes);
	return atomic_load(&p->stop);
}

static int stop_requested(void *arg)
{
	struct hangar_process *p = arg;

	return atomic_load(&p->stop);
}

static void *follow(void *arg)
{
	struct hangar_process *p = arg;
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c = envd_client_of(p->sb->ctx);
	struct sbview *v = c ? sandbox_begin(p->sb, &call, p->opts.user) : NULL;
	int rc;

	if (!v) {
		rc = hangar_error_last()->code;
	} else {
		/* The stream lives as long as the process; only its lifetime option bounds it. */
		call.deadline_ms = 0;
		call.connect_timeout_ms = p->opts.timeout_sec * 1000;
		call.keepalive_sec = PROCESS_KEEPALIVE_SEC;
		call.cancel = stop_requested;
		call.cancel_arg = p;
		rc = envd_stream(c, &call, p->method, p->request, on_event, p, &st);
		sbview_put(v);
		if (p->broken) {
			/* A second end, output after it, or garbage: no exit status to believe. */
			rc = HANGAR_EPROTOCOL;
			pthread_mutex_lock(&p->mu);
			p->have_exit = 0;
			pthread_mutex_unlock(&p->mu);
		} else if (rc == ENVD_CANCELLED)
			rc = herr(HANGAR_ECREATE, HANGAR_ERRCAT_SANDBOX, "stopped following the process");
		else if (rc == HANGAR_ETIMEOUT && st.code == CONNECT_DEADLINE_EXCEEDED && !p->have_exit) {
			/* Its lifetime ran out and envd killed it: an end like a kill. */
			rc = 0;
			p->have_exit = 1;
			p->exit_code = -1;
		} else if (rc)
			rc = sandbox_classify_failure(p->sb, rc, &st);
		else if (!p->have_exit)
			rc = sandbox_classify_failure(p->sb, herr(HANGAR_EPROTOCOL, HANGAR_ERRCAT_SANDBOX,
								  "process stream ended without an end event"), &st);
	}
	pthread_mutex_lock(&p->mu);
	p->rc = rc;
	if (rc) {
		const hangar_error *e = hangar_error_last();

		p->err = *e;
		snprintf(p->err_message, sizeof(p->err_message), "%s", e->message);
		snprintf(p->err_provider_code, sizeof(p->err_provider_code), "%s", e->provider_code);
		p->err.message = p->err_message;
		p->err.provider_code = p->err_provider_code;
	}
	p->ended = 1;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Re-raises the stream thread's error on the calling thread. */
static int raise_stream_error(struct hangar_process *p)
{
	int rc = herr_http(p->err.code ? p->err.code : p->rc, p->err.category, p->err.http_status,
			   p->err.provider_code, "%s", p->err.message);

	herr_flags(p->err.flags);
	herr_retry_after(p->err.retry_after_s);
	return rc;
}

static void process_free(struct hangar_process *p)
{
	cJSON_Delete(p->request);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	hangar_sandbox_unref(p->sb);
	free(p);
}

static int launch(hangar_process **out, struct hangar_sandbox *sb, const hangar_process_opts *o, int is_pty,
		  const char *method, cJSON *request)
{
	struct hangar_process *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p) {
		cJSON_Delete(request);
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	}
	atomic_init(&p->refs, 1);
	p->sb = hangar_sandbox_ref(sb);
	p->opts = *o;
	p->is_pty = is_pty;
	p->method = method;
	p->request = request;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_create(&p->thread, NULL, follow, p) != 0) {
		process_free(p);
		return herr_os(HANGAR_EOS, errno, "cannot start a thread");
	}
	/* Return once the process exists (or the stream failed before it did). */
	pthread_mutex_lock(&p->mu);
	while (!p->started && !p->ended)
		pthread_cond_wait(&p->cv, &p->mu);
	if (!p->started)
		rc = raise_stream_error(p);
	pthread_mutex_unlock(&p->mu);
	if (rc) {
		pthread_join(p->thread, NULL);
		process_free(p);
		return rc;
	}
	herr_clear();
	*out = p;
	return 0;
}

static int copy_opts(hangar_process_opts *o, const hangar_process_opts *opts)
{
	int rc = HOPTS_COPY(*o, opts, hv_process_opts, "opts");

	if (rc)
		return rc;
	HCHECK_ARG(o->timeout_sec >= 0 && o->timeout_sec <= PROCESS_TIMEOUT_MAX,
		   "opts->timeout_sec must be from 0 to 31622400 (366 days)");
	HCHECK_ARG(o->cols <= 0xffff && o->rows <= 0xffff, "terminal size out of range");
	for (const char *const *e = o->env; e && *e; e++) {
		HCHECK_ARG(strchr(*e, '=') && **e != '=', "opts->env entries must be KEY=VALUE");
		HCHECK_ARG(strlen(*e) < 128 * 1024, "an opts->env entry is over 128 KiB, more than a program may get");
	}
	if (hcheck_texts(o->env, "opts->env") || hcheck_text(o->cwd, "opts->cwd") || hcheck_text(o->user, "opts->user"))
		return HANGAR_EINVAL;
	return 0;
}

static void add_env(cJSON *envs, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char *key = strndup(kv, (size_t)(eq - kv));

	if (!key)
		return;
	cJSON_DeleteItemFromObjectCaseSensitive(envs, key);
	cJSON_AddStringToObject(envs, key, eq + 1);
	free(key);
}

int hangar_process_start(hangar_process **out, hangar_sandbox *sb, const char *command,
			 const hangar_process_opts *opts)
{
	hangar_process_opts o;
	cJSON *req, *proc, *args, *envs;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(sb, "sb is NULL");
	rc = copy_opts(&o, opts);
	if (rc)
		return rc;
	HCHECK_ARG(command || o.pty, "command is NULL (only a terminal may start a login shell)");
	HCHECK_ARG(!command || strlen(command) < 128 * 1024,
		   "the command line is over 128 KiB, more than a sandbox runs (write it to a file and run that)");
	HCHECK_TEXT(command, "command");
	if (o.pty && !(provider_caps(sb->provider) & HANGAR_CAP_PTY))
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_PROVIDER, "provider %s has no terminals",
			    sb->provider->ops.name);

	req = cJSON_CreateObject();
	proc = cJSON_AddObjectToObject(req, "process");
	cJSON_AddStringToObject(proc, "cmd", "/bin/bash");
	args = cJSON_AddArrayToObject(proc, "args");
	envs = cJSON_AddObjectToObject(proc, "envs");
	if (command) {
		cJSON_AddItemToArray(args, cJSON_CreateString("-lc"));
		cJSON_AddItemToArray(args, cJSON_CreateString(command));
	} else {
		cJSON_AddItemToArray(args, cJSON_CreateString("-i"));
		cJSON_AddItemToArray(args, cJSON_CreateString("-l"));
	}
	cJSON_AddStringToObject(envs, "CI", "true");
	if (o.pty) {
		cJSON *size = cJSON_AddObjectToObject(cJSON_AddObjectToObject(req, "pty"), "size");

		cJSON_AddNumberToObject(size, "cols", o.cols ? o.cols : 80);
		cJSON_AddNumberToObject(size, "rows", o.rows ? o.rows : 24);
		/* A terminal gets what interactive programs expect; CI=true would make them quiet. */
		cJSON_DeleteItemFromObjectCaseSensitive(envs, "CI");
		cJSON_AddStringToObject(envs, "TERM", "xterm-256color");
		cJSON_AddStringToObject(envs, "LANG", "C.UTF-8");
		cJSON_AddStringToObject(envs, "LC_ALL", "C.UTF-8");
	}
	for (const char *const *e = o.env; e && *e; e++)
		add_env(envs, *e);
	if (o.cwd)
		cJSON_AddStringToObject(proc, "cwd", o.cwd);
	cJSON_AddBoolToObject(req, "stdin", !o.pty && o.stdin_enabled);
	return launch(out, sb, &o, o.pty, "/process.Process/Start", req);
}

int hangar_process_attach(hangar_process **out, hangar_sandbox *sb, uint32_t pid, const hangar_process_opts *opts)
{
	hangar_process_opts o;
	cJSON *req;
	int rc;

	HCHECK_ARG(out, "out is NULL");
	*out = NULL;
	HCHECK_ARG(sb, "sb is NULL");
	HCHECK_ARG(pid > 0, "pid is 0");
	rc = copy_opts(&o, opts);
	if (rc)
		return rc;
	o.timeout_sec = 0; /* attaching never bounds the process */
	req = cJSON_CreateObject();
	cJSON_AddNumberToObject(cJSON_AddObjectToObject(req, "process"), "pid", pid);
	return launch(out, sb, &o, o.pty, "/process.Process/Connect", req);
}

hangar_process *hangar_process_ref(hangar_process *p)
{
	if (p)
		atomic_fetch_add(&p->refs, 1);
	return p;
}

hangar_process *hangar_process_unref(hangar_process *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return NULL;
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	process_free(p);
	return NULL;
}

uint32_t hangar_process_pid(const hangar_process *p)
{
	return p ? p->pid : 0;
}

/* A unary call about this process: {"process":{"pid":N}, …extra}. */
static int process_rpc(struct hangar_process *p, const char *method, cJSON *req)
{
	struct envd_status st = { 0 };
	struct envd_call call;
	struct envd_client *c = envd_client_of(p->sb->ctx);
	struct sbview *v;
	cJSON *resp = NULL;
	int rc;

	cJSON_AddNumberToObject(cJSON_AddObjectToObject(req, "process"), "pid", p->pid);
	v = c ? sandbox_begin(p->sb, &call, NULL) : NULL;
	if (!v) {
		cJSON_Delete(req);
		return hangar_error_last()->code;
	}
	rc = envd_unary(c, &call, method, req, &resp, &st);
	sbview_put(v);
	cJSON_Delete(req);
	cJSON_Delete(resp);
	if (rc)
		return sandbox_classify_failure(p->sb, rc, &st);
	herr_clear();
	return 0;
}

int hangar_process_write(hangar_process *p, const void *data, size_t len)
{
	cJSON *req;
	char *b64;

	HCHECK_ARG(p, "p is NULL");
	HCHECK_ARG(data || len == 0, "data is NULL");
	b64 = pjson_b64_encode(data ? data : "", len);
	if (!b64)
		return herr(HANGAR_ENOMEM, HANGAR_ERRCAT_OS, "out of memory");
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(cJSON_AddObjectToObject(req, "input"), p->is_pty ? "pty" : "stdin", b64);
	free(b64);
	return process_rpc(p, "/process.Process/SendInput", req);
}

int hangar_process_close_stdin(hangar_process *p)
{
	HCHECK_ARG(p, "p is NULL");
	if (p->is_pty)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_ARGUMENT,
			    "a terminal has no stdin to close: write \"\\x04\" instead");
	return process_rpc(p, "/process.Process/CloseStdin", cJSON_CreateObject());
}

int hangar_process_resize(hangar_process *p, uint32_t cols, uint32_t rows)
{
	cJSON *req, *size;

	HCHECK_ARG(p, "p is NULL");
	HCHECK_ARG(cols > 0 && rows > 0 && cols <= 0xffff && rows <= 0xffff, "terminal size out of range");
	if (!p->is_pty)
		return herr(HANGAR_EUNSUPPORTED, HANGAR_ERRCAT_ARGUMENT, "the process has no terminal");
	req = cJSON_CreateObject();
	size = cJSON_AddObjectToObject(cJSON_AddObjectToObject(req, "pty"), "size");
	cJSON_AddNumberToObject(size, "cols", cols);
	cJSON_AddNumberToObject(size, "rows", rows);
	return process_rpc(p, "/process.Process/Update", req);
}

int hangar_process_signal(hangar_process *p, int32_t sig)
{
	cJSON *req;

	HCHECK_ARG(p, "p is NULL");
	HCHECK_ARG(sig == HANGAR_SIGTERM || sig == HANGAR_SIGKILL, "sig must be HANGAR_SIGTERM or HANGAR_SIGKILL");
	req = cJSON_CreateObject();
	cJSON_AddStringToObject(req, "signal", sig == HANGAR_SIGKILL ? "SIGNAL_SIGKILL" : "SIGNAL_SIGTERM");
	return process_rpc(p, "/process.Process/SendSignal", req);
}

int hangar_process_wait(int32_t *exit_code, hangar_process *p, int64_t timeout_ms)
{
	struct timespec until;
	int rc = 0;

	HCHECK_ARG(p, "p is NULL");
	clock_gettime(CLOCK_REALTIME, &until);
	if (timeout_ms >= 0) {
		until.tv_sec += timeout_ms / 1000;
		until.tv_nsec += (timeout_ms % 1000) * 1000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
	}
	pthread_mutex_lock(&p->mu);
	while (!p->ended && rc == 0) {
		if (timeout_ms < 0)
			pthread_cond_wait(&p->cv, &p->mu);
		else if (pthread_cond_timedwait(&p->cv, &p->mu, &until) == ETIMEDOUT)
			rc = herr(HANGAR_ETIMEOUT, HANGAR_ERRCAT_ARGUMENT, "process %u is still running", p->pid);
	}
	if (rc == 0 && p->have_exit) {
		if (exit_code)
			*exit_code = p->exit_code;
		herr_clear();
	} else if (rc == 0) {
		rc = raise_stream_error(p);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}
