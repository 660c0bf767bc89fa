/*
 * process.Process: starting commands (pipes or a PTY), streaming their output
 * to any number of subscribers, input, signals and resizing.
 *
 * Each process has a supervisor thread that reads its output, fans it out to
 * the subscribed streams, enforces the Start deadline, reaps the child and
 * sends exactly one end event. Subscribers are the Start stream and any
 * Connect streams; output is lossless while someone listens (a slow client
 * slows the child down) and dropped while nobody does, as upstream.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "envd.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "creds.h"
#include "pjson.h"
#include "request.h"

#define PIPE_CHUNK (32 * 1024)
#define PTY_CHUNK (16 * 1024)

struct sub {
	struct proc *proc;
	struct envd_stream *stream;
	int deadline_owner;     /* the Start stream: ends with deadline_exceeded */
	int linked;             /* on proc->subs (under proc->mu) */
	struct sub *next;
};

struct proc {
	atomic_int refs;
	pid_t pid;
	int pidfd;
	char *tag;
	cJSON *config;          /* the ProcessConfig as List echoes it */
	int is_pty;
	int out_fd, err_fd;     /* pipes, or out_fd = PTY master */
	int stop_fd;            /* eventfd: wakes the supervisor */
	int64_t deadline_ns;    /* 0: none */
	pthread_t thread;

	/*
	 * hangar-envd standing in for timeout(1) (plan.c): the signal and when
	 * it is due, then SIGKILL kill_after later (tmo_kill_at once armed).
	 */
	int tmo, tmo_sig;
	int64_t tmo_term_at, tmo_kill_after;

	pthread_mutex_t mu;     /* subs, finished, stop_readers, the timeout's state */
	struct sub *subs;
	int stop_readers;
	int finished;
	int64_t tmo_kill_at;    /* 0: not armed */
	int tmo_signalled;      /* the timeout's signal went to the group: it timed out */
	int tmo_killed;         /* SIGKILL went to the group */

	pthread_mutex_t in_mu;  /* stdin_fd and writes to the PTY */
	int stdin_fd;           /* -1: disabled or closed */

	struct proc *next;      /* live list */
};

struct retained {
	pid_t pid;
	char *tag;
	char *end_json;         /* the end event, {"event":{"end":…}} */
	int64_t expires_ns;
	struct retained *next;
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct proc *live;
static struct retained *exits;

static void proc_ref(struct proc *p)
{
	atomic_fetch_add(&p->refs, 1);
}

static void proc_unref(struct proc *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	cJSON_Delete(p->config);
	free(p->tag);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->in_mu);
	free(p);
}

static void wake(struct proc *p)
{
	uint64_t one = 1;
	ssize_t n = write(p->stop_fd, &one, sizeof(one));

	(void)n;
}

/* ---- retained exits ---------------------------------------------------- */

static void retained_free(struct retained *r)
{
	free(r->tag);
	free(r->end_json);
	free(r);
}

/* Drops expired entries and any matching pid or tag (a newer process owns them). */
static void retained_prune_locked(pid_t pid, const char *tag)
{
	int64_t now = clock_mono_ns();

	for (struct retained **pp = &exits; *pp;) {
		struct retained *r = *pp;

		if (r->expires_ns <= now || (pid > 0 && r->pid == pid) ||
		    (tag && r->tag && strcmp(r->tag, tag) == 0)) {
			*pp = r->next;
			retained_free(r);
		} else {
			pp = &r->next;
		}
	}
}

/* ---- selectors ----------------------------------------------------------- */

struct selector {
	int by_tag;
	uint32_t pid;
	const char *tag;
};

static int parse_selector(const cJSON *in, struct selector *sel, struct rpc_error *err)
{
	const cJSON *ps = pjson_field(in, "process", NULL);
	int rp, rt;

	memset(sel, 0, sizeof(*sel));
	rp = pjson_uint32(ps, "pid", NULL, &sel->pid);
	rt = pjson_string(ps, "tag", NULL, &sel->tag);
	if (rp < 0 || rt < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid process selector");
	if (rt == 1) {
		sel->by_tag = 1;
		return 0;
	}
	if (rp == 1 && sel->pid > 0)
		return 0;
	return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "process selector needs a pid or a tag");
}

static int matches(const struct selector *sel, pid_t pid, const char *tag)
{
	if (sel->by_tag)
		return tag && strcmp(tag, sel->tag) == 0;
	return (uint32_t)pid == sel->pid;
}

static int not_found(const struct selector *sel, struct rpc_error *err)
{
	if (sel->by_tag)
		return rpc_fail(err, CONNECT_NOT_FOUND, "process with tag %s not found", sel->tag);
	return rpc_fail(err, CONNECT_NOT_FOUND, "process with pid %u not found", sel->pid);
}

/* A live process with a reference, or NULL. Every live entry is checked. */
static struct proc *find_live(const struct selector *sel)
{
	struct proc *found = NULL;

	pthread_mutex_lock(&table_mu);
	for (struct proc *p = live; p; p = p->next)
		if (matches(sel, p->pid, p->tag)) {
			proc_ref(p);
			found = p;
			break;
		}
	pthread_mutex_unlock(&table_mu);
	return found;
}

/* ---- events -------------------------------------------------------------- */

static cJSON *event_wrap(const char *kind, cJSON *body)
{
	cJSON *root = cJSON_CreateObject(), *ev = cJSON_AddObjectToObject(root, "event");

	cJSON_AddItemToObject(ev, kind, body);
	return root;
}

static cJSON *start_event(pid_t pid)
{
	cJSON *b = cJSON_CreateObject();

	cJSON_AddNumberToObject(b, "pid", (double)pid);
	return event_wrap("start", b);
}

static const char *signal_name(int sig)
{
	/* The wording Go's os.ProcessState uses, which clients may show or match. */
	switch (sig) {
	case SIGHUP: return "hangup";
	case SIGINT: return "interrupt";
	case SIGQUIT: return "quit";
	case SIGILL: return "illegal instruction";
	case SIGTRAP: return "trace/breakpoint trap";
	case SIGABRT: return "aborted";
	case SIGBUS: return "bus error";
	case SIGFPE: return "floating point exception";
	case SIGKILL: return "killed";
	case SIGUSR1: return "user defined signal 1";
	case SIGSEGV: return "segmentation fault";
	case SIGUSR2: return "user defined signal 2";
	case SIGPIPE: return "broken pipe";
	case SIGALRM: return "alarm clock";
	case SIGTERM: return "terminated";
	case SIGXCPU: return "CPU time limit exceeded";
	case SIGXFSZ: return "file size limit exceeded";
	default: return NULL;
	}
}

static cJSON *end_event(int wstatus)
{
	cJSON *b = cJSON_CreateObject();
	char status[96];

	if (WIFEXITED(wstatus)) {
		int code = WEXITSTATUS(wstatus);

		snprintf(status, sizeof(status), "exit status %d", code);
		if (code)
			cJSON_AddNumberToObject(b, "exitCode", code);
		cJSON_AddTrueToObject(b, "exited");
		cJSON_AddStringToObject(b, "status", status);
		if (code)
			cJSON_AddStringToObject(b, "error", status);
	} else {
		int sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
		const char *name = signal_name(sig);
		int n = name ? snprintf(status, sizeof(status), "signal: %s", name)
			     : snprintf(status, sizeof(status), "signal %d", sig);

		if (WIFSIGNALED(wstatus) && WCOREDUMP(wstatus))
			snprintf(status + n, sizeof(status) - (size_t)n, " (core dumped)");
		cJSON_AddNumberToObject(b, "exitCode", -1);
		cJSON_AddStringToObject(b, "status", status);
		cJSON_AddStringToObject(b, "error", status);
	}
	return event_wrap("end", b);
}

/* ---- subscribers ----------------------------------------------------------- */

static void sub_detach(struct envd_stream *s, void *ctx)
{
	struct sub *sub = ctx;
	struct proc *p = sub->proc;

	(void)s;
	pthread_mutex_lock(&p->mu);
	if (sub->linked) {
		for (struct sub **pp = &p->subs; *pp; pp = &(*pp)->next)
			if (*pp == sub) {
				*pp = sub->next;
				break;
			}
		sub->linked = 0;
	}
	pthread_mutex_unlock(&p->mu);
	envd_stream_unref(sub->stream);
	proc_unref(p);
	free(sub);
}

/*
 * Subscribes s to p, sending the start event first so it precedes any output.
 * Returns 0, or -1 when p already finished (the caller falls back to the
 * retained exit).
 */
static int subscribe(struct proc *p, struct envd_stream *s, int deadline_owner)
{
	struct sub *sub = calloc(1, sizeof(*sub));

	if (!sub)
		return -1;
	pthread_mutex_lock(&p->mu);
	if (p->finished) {
		pthread_mutex_unlock(&p->mu);
		free(sub);
		return -1;
	}
	/* A fresh stream has no backlog, so this cannot block under the lock. */
	envd_stream_send(s, start_event(p->pid));
	proc_ref(p);
	envd_stream_ref(s);
	sub->proc = p;
	sub->stream = s;
	sub->deadline_owner = deadline_owner;
	sub->linked = 1;
	sub->next = p->subs;
	p->subs = sub;
	envd_stream_set_detach(s, sub_detach, sub);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* The streams currently subscribed, each with a reference, for sending outside the lock. */
static size_t snapshot_subs(struct proc *p, struct envd_stream ***out)
{
	size_t n = 0, i = 0;
	struct envd_stream **v;

	pthread_mutex_lock(&p->mu);
	for (struct sub *s = p->subs; s; s = s->next)
		n++;
	v = n ? calloc(n, sizeof(*v)) : NULL;
	if (v)
		for (struct sub *s = p->subs; s; s = s->next) {
			envd_stream_ref(s->stream);
			v[i++] = s->stream;
		}
	pthread_mutex_unlock(&p->mu);
	*out = v;
	return v ? n : 0;
}

static void broadcast(struct proc *p, const cJSON *msg)
{
	struct envd_stream **v;
	size_t n = snapshot_subs(p, &v);

	for (size_t i = 0; i < n; i++) {
		envd_stream_send(v[i], cJSON_Duplicate(msg, 1));
		envd_stream_unref(v[i]);
	}
	free(v);
}

static void send_data(struct proc *p, const char *kind, const char *buf, size_t len)
{
	char *b64;
	cJSON *d, *msg;

	pthread_mutex_lock(&p->mu);
	if (!p->subs) {
		pthread_mutex_unlock(&p->mu);
		return; /* nobody listens: dropped, as upstream */
	}
	pthread_mutex_unlock(&p->mu);
	b64 = pjson_b64_encode(buf, len);
	if (!b64)
		return;
	d = cJSON_CreateObject();
	cJSON_AddStringToObject(d, kind, b64);
	free(b64);
	msg = event_wrap("data", d);
	broadcast(p, msg);
	cJSON_Delete(msg);
}

/* ---- the supervisor ------------------------------------------------------ */

static void unlink_live(struct proc *p)
{
	pthread_mutex_lock(&table_mu);
	for (struct proc **pp = &live; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	pthread_mutex_unlock(&table_mu);
}

/*
 * The end coreutils' timeout would report for a command whose own status is
 * wstatus: killed with its group once it sent SIGKILL, 124 once it sent its
 * signal, else the command's status (raised again without a core dump).
 */
static int timeout_status(struct proc *p, int wstatus)
{
	int killed, signalled;

	pthread_mutex_lock(&p->mu);
	killed = p->tmo_killed;
	signalled = p->tmo_signalled;
	pthread_mutex_unlock(&p->mu);
	if (killed)
		return SIGKILL;
	if (signalled)
		return 124 << 8;
	return WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : wstatus;
}

static void finish(struct proc *p, int wstatus, int deadline_hit)
{
	cJSON *end = end_event(p->tmo ? timeout_status(p, wstatus) : wstatus);
	char *json = cJSON_PrintUnformatted(end);
	struct retained *r = calloc(1, sizeof(*r));
	struct envd_stream **v;
	size_t n;

	/* Retain the exit before leaving the live list, so Connect never misses both. */
	pthread_mutex_lock(&table_mu);
	retained_prune_locked(0, NULL);
	if (r && json) {
		r->pid = p->pid;
		r->tag = p->tag ? strdup(p->tag) : NULL;
		r->end_json = strdup(json);
		r->expires_ns = clock_mono_ns() + (int64_t)ENVD_EXIT_RETENTION_SEC * 1000000000;
		r->next = exits;
		exits = r;
		r = NULL;
	}
	pthread_mutex_unlock(&table_mu);
	free(r);
	free(json);
	unlink_live(p);

	pthread_mutex_lock(&p->mu);
	p->finished = 1;
	pthread_mutex_unlock(&p->mu);
	n = snapshot_subs(p, &v);
	for (size_t i = 0; i < n; i++) {
		(void)deadline_hit;
		envd_stream_send(v[i], cJSON_Duplicate(end, 1));
		envd_stream_end(v[i], CONNECT_OK, NULL);
		envd_stream_unref(v[i]);
	}
	free(v);
	cJSON_Delete(end);
}

/* Ends the Start stream with deadline_exceeded; other subscribers see the kill's end event. */
static void end_deadline_owner(struct proc *p)
{
	struct envd_stream *owner = NULL;

	pthread_mutex_lock(&p->mu);
	for (struct sub *s = p->subs; s; s = s->next)
		if (s->deadline_owner) {
			owner = s->stream;
			envd_stream_ref(owner);
			break;
		}
	pthread_mutex_unlock(&p->mu);
	if (owner) {
		envd_stream_end(owner, CONNECT_DEADLINE_EXCEEDED, "context deadline exceeded");
		envd_stream_unref(owner);
	}
}

static void close_readers(struct proc *p)
{
	if (p->out_fd >= 0 && !p->is_pty) {
		close(p->out_fd);
		p->out_fd = -1;
	}
	if (p->err_fd >= 0) {
		close(p->err_fd);
		p->err_fd = -1;
	}
	/* A PTY master stays open for input until the end; we just stop reading it. */
}

/*
 * The timeout's signals, as coreutils' timeout sends them: to the command
 * and its process group (the command leads one: setsid), SIGCONT after any
 * signal but SIGKILL so a stopped group sees it.
 */
static void timeout_signal(struct proc *p, int sig)
{
	if (kill(-p->pid, sig) < 0)
		kill(p->pid, sig);
	if (sig != SIGKILL && sig != SIGCONT && kill(-p->pid, SIGCONT) < 0)
		kill(p->pid, SIGCONT);
}

/* Sends what is due at now; the next moment something is due, or 0. */
static int64_t timeout_step(struct proc *p, int64_t now)
{
	int term = 0, killing = 0;
	int64_t next;

	pthread_mutex_lock(&p->mu);
	if (!p->tmo_signalled && p->tmo_term_at && now >= p->tmo_term_at) {
		p->tmo_signalled = term = 1;
		p->tmo_killed = p->tmo_sig == SIGKILL;
		if (p->tmo_kill_after && !p->tmo_kill_at)
			p->tmo_kill_at = now + p->tmo_kill_after;
	}
	if (!p->tmo_killed && p->tmo_kill_at && now >= p->tmo_kill_at)
		p->tmo_killed = killing = 1;
	/* The earlier of what is still to come: the signal, and SIGKILL once armed (a SIGTERM of the caller's arms it). */
	next = p->tmo_signalled ? 0 : p->tmo_term_at;
	if (!p->tmo_killed && p->tmo_kill_at && (!next || p->tmo_kill_at < next))
		next = p->tmo_kill_at;
	if (p->tmo_killed)
		next = 0;
	pthread_mutex_unlock(&p->mu);
	if (term)
		timeout_signal(p, p->tmo_sig);
	if (killing)
		timeout_signal(p, SIGKILL);
	return next;
}

static void *supervise(void *arg)
{
	struct proc *p = arg;
	char *buf = malloc(PIPE_CHUNK);
	int out_open = 1, err_open = p->err_fd >= 0, exited = 0, deadline_hit = 0;
	int wstatus = 0;

	while (buf) {
		struct pollfd pfd[4];
		int n = 0, i_out = -1, i_err = -1, i_pid, i_stop, timeout = -1, stop;

		pthread_mutex_lock(&p->mu);
		stop = p->stop_readers;
		pthread_mutex_unlock(&p->mu);
		if (stop && (out_open || err_open)) {
			close_readers(p);
			out_open = err_open = 0;
		}
		if (exited && !out_open && !err_open)
			break;
		if (out_open) {
			i_out = n;
			pfd[n++] = (struct pollfd){ .fd = p->out_fd, .events = POLLIN };
		}
		if (err_open) {
			i_err = n;
			pfd[n++] = (struct pollfd){ .fd = p->err_fd, .events = POLLIN };
		}
		i_pid = n;
		pfd[n++] = (struct pollfd){ .fd = exited ? -1 : p->pidfd, .events = POLLIN };
		i_stop = n;
		pfd[n++] = (struct pollfd){ .fd = p->stop_fd, .events = POLLIN };
		if (p->deadline_ns && !deadline_hit) {
			int64_t left = p->deadline_ns - clock_mono_ns();

			timeout = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
		}
		/* The stand-in timeout acts while the command runs, as coreutils' does. */
		if (p->tmo && !exited) {
			int64_t due = timeout_step(p, clock_mono_ns()), left;

			if (due) {
				left = due - clock_mono_ns();
				left = left <= 0 ? 0 : (left + 999999) / 1000000;
				if (left > INT32_MAX)
					left = INT32_MAX;
				if (timeout < 0 || left < timeout)
					timeout = (int)left;
			}
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p->deadline_ns && !deadline_hit && clock_mono_ns() >= p->deadline_ns) {
			deadline_hit = 1;
			kill(p->pid, SIGKILL);
			end_deadline_owner(p);
			pthread_mutex_lock(&p->mu);
			p->stop_readers = 1;
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		if (pfd[i_stop].revents & POLLIN) {
			uint64_t v;
			ssize_t r = read(p->stop_fd, &v, sizeof(v));

			(void)r;
		}
		if (i_out >= 0 && pfd[i_out].revents) {
			ssize_t r = read(p->out_fd, buf, p->is_pty ? PTY_CHUNK : PIPE_CHUNK);

			if (r > 0)
				send_data(p, p->is_pty ? "pty" : "stdout", buf, (size_t)r);
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				out_open = 0; /* EOF, or EIO from a PTY whose slave side closed */
		}
		if (i_err >= 0 && pfd[i_err].revents) {
			ssize_t r = read(p->err_fd, buf, PIPE_CHUNK);

			if (r > 0)
				send_data(p, "stderr", buf, (size_t)r);
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				err_open = 0;
		}
		if (!exited && (pfd[i_pid].revents & POLLIN)) {
			if (waitpid(p->pid, &wstatus, WNOHANG) == p->pid)
				exited = 1;
		}
	}
	free(buf);
	if (!exited)
		waitpid(p->pid, &wstatus, 0);
	finish(p, wstatus, deadline_hit);
	proc_unref(p);
	return NULL;
}

/* ---- Start ----------------------------------------------------------------- */

struct start_req {
	const char *cmd;
	char **argv;            /* cmd, args…, NULL */
	char **envs;            /* "K=V"…, NULL */
	const char *cwd;
	int has_pty;
	uint32_t cols, rows;
	const char *tag;
	int want_stdin;
};

static void start_req_free(struct start_req *sr)
{
	if (sr->argv)
		for (char **a = sr->argv + 1; *a; a++)
			free(*a);
	free(sr->argv);
	if (sr->envs)
		for (char **e = sr->envs; *e; e++)
			free(*e);
	free(sr->envs);
}

static int parse_start(const cJSON *in, struct start_req *sr, cJSON **config, struct rpc_error *err)
{
	const cJSON *proc = pjson_field(in, "process", NULL), *args, *envs, *pty, *size;
	size_t nargs = 0, nenv = 0, i = 0;
	cJSON *cfg, *cfg_args, *cfg_envs;
	int r;

	memset(sr, 0, sizeof(*sr));
	sr->want_stdin = 1; /* absent means true, for old clients */
	if (!cJSON_IsObject(proc))
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "process config is required");
	if (pjson_string(proc, "cmd", NULL, &sr->cmd) != 1 || !*sr->cmd)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "process.cmd is required");
	if (pjson_string(proc, "cwd", NULL, &sr->cwd) < 0 || pjson_string(in, "tag", NULL, &sr->tag) < 0 ||
	    pjson_bool(in, "stdin", NULL, &sr->want_stdin) < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid start request");

	args = pjson_field(proc, "args", NULL);
	envs = pjson_field(proc, "envs", NULL);
	if ((args && !cJSON_IsArray(args)) || (envs && !cJSON_IsObject(envs)))
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid process config");
	nargs = args ? (size_t)cJSON_GetArraySize(args) : 0;
	nenv = envs ? (size_t)cJSON_GetArraySize(envs) : 0;
	sr->argv = calloc(nargs + 2, sizeof(char *));
	sr->envs = calloc(nenv + 1, sizeof(char *));
	if (!sr->argv || !sr->envs)
		return rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
	sr->argv[0] = (char *)sr->cmd;

	cfg = cJSON_CreateObject();
	cJSON_AddStringToObject(cfg, "cmd", sr->cmd);
	cfg_args = cJSON_AddArrayToObject(cfg, "args");
	cfg_envs = cJSON_AddObjectToObject(cfg, "envs");
	*config = cfg;

	for (const cJSON *a = args ? args->child : NULL; a; a = a->next) {
		if (!cJSON_IsString(a))
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "process.args must be strings");
		sr->argv[1 + i++] = strdup(a->valuestring);
		cJSON_AddItemToArray(cfg_args, cJSON_CreateString(a->valuestring));
	}
	i = 0;
	for (const cJSON *e = envs ? envs->child : NULL; e; e = e->next) {
		size_t kl, vl;

		if (!cJSON_IsString(e) || !e->string || !*e->string || strchr(e->string, '='))
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid environment variable");
		kl = strlen(e->string);
		vl = strlen(e->valuestring);
		sr->envs[i] = malloc(kl + vl + 2);
		if (!sr->envs[i])
			return rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
		memcpy(sr->envs[i], e->string, kl);
		sr->envs[i][kl] = '=';
		memcpy(sr->envs[i] + kl + 1, e->valuestring, vl + 1);
		i++;
		cJSON_AddStringToObject(cfg_envs, e->string, e->valuestring);
	}
	if (sr->cwd)
		cJSON_AddStringToObject(cfg, "cwd", sr->cwd);

	pty = pjson_field(in, "pty", NULL);
	if (pty) {
		sr->has_pty = 1;
		size = pjson_field(pty, "size", NULL);
		r = pjson_uint32(size, "cols", NULL, &sr->cols);
		if (r >= 0)
			r = pjson_uint32(size, "rows", NULL, &sr->rows);
		if (r < 0 || sr->cols > 0xffff || sr->rows > 0xffff)
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid pty size");
	}
	return 0;
}

/* Everything the child needs, prepared before it exists. */
struct child_args {
	const char *path;       /* resolved executable, or NULL when not found */
	const char *cmd;        /* as requested, for the error message */
	const char *why;        /* path NULL: the message, or "" for "cmd: command not found" */
	char **argv;
	char **envp;
	const char *cwd;
	const struct envd_user *u;
	const gid_t *groups;
	int ngroups;
	int in_fd, out_fd, err_fd, pty_slave;
};

static void child_fail(const char *cmd, const char *why, int code)
{
	ssize_t n = write(2, cmd, strlen(cmd));

	n = write(2, why, strlen(why));
	(void)n;
	_exit(code);
}

/*
 * The child, between clone and exec. It shares the daemon's memory (the
 * parent thread waits until it execs or exits), so it only makes system
 * calls and writes nothing but its own stack.
 */
static int child_main(void *arg)
{
	const struct child_args *a = arg;
	sigset_t none;
	int fd, in_fd = a->in_fd, out_fd = a->out_fd, err_fd = a->err_fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL); /* the daemon ignores it; exec keeps ignored signals ignored */
	setsid();
	if (a->pty_slave >= 0) {
		ioctl(a->pty_slave, TIOCSCTTY, 0);
		in_fd = out_fd = err_fd = a->pty_slave;
	}
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
		_exit(126);
	/*
	 * Children go first when memory runs out, so the daemon survives. Here,
	 * while still the daemon's uid: like the daemon this child is not
	 * dumpable, so its /proc files are its namespace's root's, and once in
	 * the commands' namespace it could no longer open them.
	 */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = write(fd, "100", 3);

		(void)n;
		close(fd);
	}
	/* Before the descriptors go: the namespace's is one of them. */
	if (envd_inner_enter() < 0)
		child_fail(a->cmd, ": cannot enter the sandbox's user namespace\n", 126);
	syscall(SYS_close_range, 3, ~0U, 0);

	/* Raw system calls: glibc's set*id would try to change every thread of
	 * the daemon whose memory this child shares, taking its locks. */
	if (envd_cfg.is_root &&
	    (syscall(SYS_setgroups, (size_t)a->ngroups, a->groups) < 0 ||
	     syscall(SYS_setresgid, a->u->gid, a->u->gid, a->u->gid) < 0 ||
	     syscall(SYS_setresuid, a->u->uid, a->u->uid, a->u->uid) < 0))
		child_fail(a->cmd, ": cannot switch user\n", 126);
	if (chdir(a->cwd) < 0)
		child_fail(a->cmd, ": cannot enter the working directory\n", 126);
	if (!a->path && a->why[0]) {
		ssize_t n = write(2, a->why, strlen(a->why));

		(void)n;
		child_fail("", "\n", 127);
	}
	if (!a->path)
		child_fail(a->cmd, ": command not found\n", 127);
	execve(a->path, a->argv, a->envp);
	child_fail(a->cmd, errno == ENOENT ? ": command not found\n" : ": cannot execute\n",
		   errno == ENOENT ? 127 : 126);
	return 126;
}

/*
 * Starts the child without copying the daemon's page tables (the costly part
 * of fork for a process with many threads and libraries). Returns its pid
 * and a pidfd for it, or -1 with errno set.
 */
static pid_t spawn_child(struct child_args *a, int *pidfd)
{
	size_t stack_size = 64 * 1024;
	char *stack = malloc(stack_size);
	pid_t pid;

	if (!stack)
		return -1;
	*pidfd = -1;
	pid = clone(child_main, stack + stack_size, CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, a, pidfd);
	free(stack);
	return pid;
}

static int proc_new(struct proc **out)
{
	struct proc *p = calloc(1, sizeof(*p));

	if (!p)
		return -1;
	atomic_init(&p->refs, 1);
	p->out_fd = p->err_fd = p->stdin_fd = p->pidfd = -1;
	p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->in_mu, NULL);
	if (p->stop_fd < 0) {
		proc_unref(p);
		return -1;
	}
	*out = p;
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

/* Spawns the child. On success p holds the parent's ends. */
static int spawn(struct proc *p, struct start_req *sr, const struct envd_user *u, const char *cwd,
		 struct rpc_error *err)
{
	int in_p[2] = { -1, -1 }, out_p[2] = { -1, -1 }, err_p[2] = { -1, -1 };
	int master = -1, slave = -1, devnull = -1, ngroups;
	gid_t groups[ENVD_MAX_GROUPS];
	struct envd_exec_plan plan;
	char **envp;
	pid_t pid;

	ngroups = envd_cfg.is_root ? envd_user_groups(u, groups, ENVD_MAX_GROUPS) : 0;
	envp = envd_build_env(u, sr->envs);
	if (!envp)
		return rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
	if (envd_exec_plan(&plan, sr->argv, envp, u) < 0) {
		envd_exec_plan_free(&plan);
		free(envp);
		return rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
	}

	if (sr->has_pty) {
		struct winsize ws = { .ws_row = (unsigned short)(sr->rows ? sr->rows : 24),
				      .ws_col = (unsigned short)(sr->cols ? sr->cols : 80) };

		if (openpty(&master, &slave, NULL, NULL, &ws) < 0) {
			envd_exec_plan_free(&plan);
			free(envp);
			return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "error starting pty: %s", strerror(errno));
		}
		fcntl(master, F_SETFD, FD_CLOEXEC);
		fcntl(slave, F_SETFD, FD_CLOEXEC);
	} else {
		if (pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
		    (sr->want_stdin ? pipe2(in_p, O_CLOEXEC) : 0) < 0 ||
		    (!sr->want_stdin && (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)) {
			int e = errno;

			close_fd(&out_p[0]); close_fd(&out_p[1]);
			close_fd(&err_p[0]); close_fd(&err_p[1]);
			close_fd(&in_p[0]); close_fd(&in_p[1]);
			envd_exec_plan_free(&plan);
			free(envp);
			return rpc_fail(err, CONNECT_INTERNAL, "error creating pipes: %s", strerror(e));
		}
	}

	{
		struct child_args a = {
			.cmd = sr->cmd, .argv = plan.argv, .envp = envp, .cwd = cwd, .u = u,
			.groups = groups, .ngroups = ngroups,
			.in_fd = sr->want_stdin ? in_p[0] : devnull, .out_fd = out_p[1], .err_fd = err_p[1],
			.pty_slave = slave, .path = plan.path, .why = plan.why,
		};

		pid = spawn_child(&a, &p->pidfd);
	}
	if (plan.timeout) {
		int64_t now = clock_mono_ns();

		p->tmo = 1;
		p->tmo_sig = plan.term_sig;
		p->tmo_term_at = plan.term_ns ? now + plan.term_ns : 0;
		p->tmo_kill_after = plan.kill_ns;
	}
	envd_exec_plan_free(&plan);
	free(envp);
	close_fd(&slave);
	close_fd(&in_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	close_fd(&devnull);
	if (pid < 0) {
		int e = errno;

		close_fd(&master); close_fd(&in_p[1]); close_fd(&out_p[0]); close_fd(&err_p[0]);
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "error starting process: %s", strerror(e));
	}
	p->pid = pid;
	if (sr->has_pty) {
		p->is_pty = 1;
		p->out_fd = master;
	} else {
		p->out_fd = out_p[0];
		p->err_fd = err_p[0];
		p->stdin_fd = in_p[1];
	}
	return 0;
}

static int cwd_for(struct envd_req *r, const struct start_req *sr, char *cwd, size_t sz,
		   struct rpc_error *err)
{
	struct stat st;

	if (envd_resolve_path(&r->user, sr->cwd ? sr->cwd : "", cwd, sz, err) < 0)
		return -1;
	if (stat(cwd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rpc_fail(err, CONNECT_INVALID_ARGUMENT, "cwd '%s' does not exist", cwd);
		return -1;
	}
	return 0;
}

static int do_start(struct envd_req *r, const cJSON *in, struct envd_stream *s, struct rpc_error *err)
{
	struct start_req sr;
	struct proc *p = NULL;
	cJSON *config = NULL;
	char cwd[4096];
	int rc;

	rc = parse_start(in, &sr, &config, err);
	if (rc == 0 && envd_cfg.single_uid && r->user.uid != geteuid())
		rc = rpc_fail(err, CONNECT_PERMISSION_DENIED,
			      "user '%s' cannot run commands here: every process of this sandbox has hangar-envd's "
			      "own uid (its caller has no subordinate ids), so '%s' would be hangar-envd itself",
			      r->user.name, r->user.name);
	if (rc == 0 && cwd_for(r, &sr, cwd, sizeof(cwd), err) < 0)
		rc = err->code;
	if (rc == 0 && proc_new(&p) < 0)
		rc = rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "out of memory");
	if (rc == 0)
		rc = spawn(p, &sr, &r->user, cwd, err);
	if (rc != 0) {
		cJSON_Delete(config);
		start_req_free(&sr);
		proc_unref(p);
		return rc ? rc : (int)CONNECT_INTERNAL;
	}
	p->config = config;
	p->tag = sr.tag ? strdup(sr.tag) : NULL;
	if (r->timeout_ms > 0)
		p->deadline_ns = clock_mono_ns() + r->timeout_ms * 1000000;
	start_req_free(&sr);

	subscribe(p, s, 1);
	pthread_mutex_lock(&table_mu);
	retained_prune_locked(p->pid, p->tag);
	p->next = live;
	live = p;
	pthread_mutex_unlock(&table_mu);

	proc_ref(p); /* the supervisor's */
	if (pthread_create(&p->thread, NULL, supervise, p) != 0) {
		/* Cannot watch it: kill it and report, rather than leave it unreaped. */
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		unlink_live(p);
		proc_unref(p);
		proc_unref(p);
		return rpc_fail(err, CONNECT_RESOURCE_EXHAUSTED, "cannot start a supervisor thread");
	}
	pthread_detach(p->thread);
	proc_unref(p);
	return 0;
}

/* ---- Connect --------------------------------------------------------------- */

static int replay_retained(const struct selector *sel, struct envd_stream *s)
{
	char *end_json = NULL;
	pid_t pid = 0;

	pthread_mutex_lock(&table_mu);
	retained_prune_locked(0, NULL);
	for (struct retained *r = exits; r; r = r->next)
		if (matches(sel, r->pid, r->tag)) {
			end_json = strdup(r->end_json);
			pid = r->pid;
			break;
		}
	pthread_mutex_unlock(&table_mu);
	if (!end_json)
		return -1;
	envd_stream_send(s, start_event(pid));
	envd_stream_send(s, cJSON_Parse(end_json));
	envd_stream_end(s, CONNECT_OK, NULL);
	free(end_json);
	return 0;
}

static int do_connect(struct envd_req *r, const cJSON *in, struct envd_stream *s, struct rpc_error *err)
{
	struct selector sel;
	struct proc *p;

	if (parse_selector(in, &sel, err))
		return err->code;
	if (r->timeout_ms > 0)
		envd_stream_set_deadline_ms(s, r->timeout_ms); /* bounds the stream, never the process */
	p = find_live(&sel);
	if (p) {
		int rc = subscribe(p, s, 0);

		proc_unref(p);
		if (rc == 0)
			return 0;
	}
	if (replay_retained(&sel, s) == 0)
		return 0;
	return not_found(&sel, err);
}

/* ---- unary RPCs ------------------------------------------------------------ */

static int do_list(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	cJSON *res = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(res, "processes");

	(void)r;
	(void)in;
	(void)err;
	pthread_mutex_lock(&table_mu);
	for (struct proc *p = live; p; p = p->next) {
		cJSON *info = cJSON_CreateObject();

		cJSON_AddItemToObject(info, "config", cJSON_Duplicate(p->config, 1));
		cJSON_AddNumberToObject(info, "pid", (double)p->pid);
		if (p->tag)
			cJSON_AddStringToObject(info, "tag", p->tag);
		cJSON_AddItemToArray(arr, info);
	}
	pthread_mutex_unlock(&table_mu);
	*out = res;
	return 0;
}

static int write_all(int fd, const unsigned char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int do_send_input(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	const cJSON *input = pjson_field(in, "input", NULL);
	unsigned char *data = NULL;
	size_t len = 0;
	struct selector sel;
	struct proc *p;
	int is_stdin, rc = 0, got;

	(void)r;
	if (parse_selector(in, &sel, err))
		return err->code;
	got = pjson_bytes(input, "stdin", NULL, &data, &len);
	is_stdin = got == 1;
	if (got == 0)
		got = pjson_bytes(input, "pty", NULL, &data, &len);
	if (got < 0)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "input is not valid base64");
	if (got == 0)
		return rpc_fail(err, CONNECT_UNIMPLEMENTED, "invalid input type");
	p = find_live(&sel);
	if (!p) {
		free(data);
		return not_found(&sel, err);
	}
	pthread_mutex_lock(&p->in_mu);
	if (is_stdin && p->is_pty)
		rc = rpc_fail(err, CONNECT_INTERNAL, "process has a pty: send pty input instead of stdin");
	else if (!is_stdin && !p->is_pty)
		rc = rpc_fail(err, CONNECT_INTERNAL, "tty not assigned to process");
	else if (is_stdin && p->stdin_fd < 0)
		rc = rpc_fail(err, CONNECT_INTERNAL, "stdin not enabled or closed");
	else if (write_all(is_stdin ? p->stdin_fd : p->out_fd, data, len) < 0)
		rc = rpc_fail(err, CONNECT_INTERNAL, "error writing input: %s", strerror(errno));
	pthread_mutex_unlock(&p->in_mu);
	proc_unref(p);
	free(data);
	if (rc)
		return rc;
	*out = cJSON_CreateObject();
	return 0;
}

static int do_close_stdin(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	struct selector sel;
	struct proc *p;
	int rc = 0;

	(void)r;
	if (parse_selector(in, &sel, err))
		return err->code;
	p = find_live(&sel);
	if (!p)
		return not_found(&sel, err);
	pthread_mutex_lock(&p->in_mu);
	if (p->is_pty)
		rc = rpc_fail(err, CONNECT_UNKNOWN, "cannot close stdin of a pty: send 0x04 (ctrl-d) instead");
	else
		close_fd(&p->stdin_fd);
	pthread_mutex_unlock(&p->in_mu);
	proc_unref(p);
	if (rc)
		return rc;
	*out = cJSON_CreateObject();
	return 0;
}

static int do_send_signal(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	static const char *const names[] = { "SIGNAL_UNSPECIFIED", "SIGNAL_SIGTERM", "SIGNAL_SIGKILL" };
	static const int values[] = { 0, 15, 9 };
	struct selector sel;
	struct proc *p;
	int sig = 0;

	(void)r;
	if (parse_selector(in, &sel, err))
		return err->code;
	if (pjson_enum(in, "signal", NULL, names, values, 3, &sig) < 0 || (sig != SIGTERM && sig != SIGKILL))
		return rpc_fail(err, CONNECT_UNIMPLEMENTED, "invalid signal");
	p = find_live(&sel);
	if (!p)
		return not_found(&sel, err);
	if (p->tmo && sig == SIGTERM) {
		/* What coreutils' timeout does with a SIGTERM of its own: the group gets it, and -k runs from now. */
		pthread_mutex_lock(&p->mu);
		if (p->tmo_kill_after && !p->tmo_kill_at)
			p->tmo_kill_at = clock_mono_ns() + p->tmo_kill_after;
		pthread_mutex_unlock(&p->mu);
		timeout_signal(p, SIGTERM);
	} else if (kill(p->pid, sig) < 0 && errno != ESRCH) {
		proc_unref(p);
		return rpc_fail(err, CONNECT_INTERNAL, "error sending signal: %s", strerror(errno));
	}
	/* Stop reading output, so the end event follows the signal promptly. */
	pthread_mutex_lock(&p->mu);
	p->stop_readers = 1;
	pthread_mutex_unlock(&p->mu);
	wake(p);
	proc_unref(p);
	*out = cJSON_CreateObject();
	return 0;
}

static int do_update(struct envd_req *r, const cJSON *in, cJSON **out, struct rpc_error *err)
{
	const cJSON *pty = pjson_field(in, "pty", NULL), *size;
	uint32_t cols = 0, rows = 0;
	struct selector sel;
	struct proc *p;
	int rc = 0;

	(void)r;
	if (parse_selector(in, &sel, err))
		return err->code;
	size = pjson_field(pty, "size", NULL);
	if (pjson_uint32(size, "cols", NULL, &cols) < 0 || pjson_uint32(size, "rows", NULL, &rows) < 0 ||
	    cols > 0xffff || rows > 0xffff)
		return rpc_fail(err, CONNECT_INVALID_ARGUMENT, "invalid pty size");
	p = find_live(&sel);
	if (!p)
		return not_found(&sel, err);
	if (pty) {
		pthread_mutex_lock(&p->in_mu);
		if (!p->is_pty) {
			rc = rpc_fail(err, CONNECT_INTERNAL, "tty not assigned to process");
		} else {
			struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

			if (ioctl(p->out_fd, TIOCSWINSZ, &ws) < 0)
				rc = rpc_fail(err, CONNECT_INTERNAL, "error resizing tty: %s", strerror(errno));
		}
		pthread_mutex_unlock(&p->in_mu);
	}
	proc_unref(p);
	if (rc)
		return rc;
	*out = cJSON_CreateObject();
	return 0;
}

const struct rpc_method process_methods[] = {
	{ "/process.Process/Start", NULL, do_start },
	{ "/process.Process/Connect", NULL, do_connect },
	{ "/process.Process/List", do_list, NULL },
	{ "/process.Process/SendInput", do_send_input, NULL },
	{ "/process.Process/CloseStdin", do_close_stdin, NULL },
	{ "/process.Process/SendSignal", do_send_signal, NULL },
	{ "/process.Process/Update", do_update, NULL },
	{ "/process.Process/StreamInput", NULL, NULL }, /* client streaming: unimplemented */
	{ NULL, NULL, NULL }
};

int process_service_init(void)
{
	return 0;
}

void process_service_shutdown(void)
{
	/* Children keep running; the daemon's exit is the sandbox's end. */
}
