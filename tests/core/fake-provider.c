#define _GNU_SOURCE
#include "fake-provider.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct fake_box *fake_find(struct fake *f, const char *id)
{
	for (struct fake_box *b = f->boxes; b; b = b->next)
		if (!strcmp(b->id, id))
			return b;
	return NULL;
}

static int alive(struct fake_box *b)
{
	int st;

	if (b->killed)
		return 0;
	if (!b->pid)
		return 1;
	if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
		b->killed = 1;
		return 0;
	}
	return 1;
}

/* Waits for the daemon's ready line, with a deadline. */
static int wait_ready(int fd)
{
	char buf[64];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	size_t got = 0;

	while (got < sizeof(buf) - 1) {
		ssize_t n;

		if (poll(&pfd, 1, 10000) <= 0)
			return -1;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
		if (memchr(buf, '\n', got))
			return 0;
	}
	return -1;
}

static const char *me(void)
{
	struct passwd *pw = getpwuid(geteuid());

	return pw ? pw->pw_name : "root";
}

static int describe(struct fake_box *b, hangar_sys_sandbox *out)
{
	int rc = hangar_sys_sandbox_set_id(out, b->id);

	if (!rc)
		rc = b->url[0] ? hangar_sys_sandbox_set_envd_url(out, b->url) : hangar_sys_sandbox_set_envd_socket(out, b->sock);
	if (!rc)
		rc = hangar_sys_sandbox_set_user(out, me());
	if (!rc)
		rc = hangar_sys_sandbox_set_template(out, "fake");
	if (!rc)
		rc = hangar_sys_sandbox_set_state(out, b->paused ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING);
	return rc;
}

static int f_init(void **state, hangar_ctx *ctx, void *data)
{
	(void)ctx;
	*state = data;
	return 0;
}

static int f_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	struct fake *f = state;
	struct fake_box *b;
	int pfd[2];
	char fdarg[16];

	(void)opts;
	if (f->create_fails)
		return hangar_sys_error(f->create_fails, 429, 0, "fake: create refused as asked");
	b = calloc(1, sizeof(*b));
	if (b && f->envd_url) {
		snprintf(b->id, sizeof(b->id), "fake-%d", ++f->next_id);
		snprintf(b->url, sizeof(b->url), "%s", f->envd_url);
		b->next = f->boxes;
		f->boxes = b;
		return describe(b, out);
	}
	if (!b || pipe(pfd) < 0) {
		free(b);
		return hangar_sys_error(HANGAR_ECREATE, 0, errno, "fake: cannot set up");
	}
	snprintf(b->id, sizeof(b->id), "fake-%d", ++f->next_id);
	snprintf(b->sock, sizeof(b->sock), "%s/%s.sock", f->dir, b->id);
	snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
	b->pid = fork();
	if (b->pid == 0) {
		close(pfd[0]);
		execl(f->envd, "hangar-envd", "-socket", b->sock, "-ready-fd", fdarg, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (b->pid < 0 || wait_ready(pfd[0]) < 0) {
		close(pfd[0]);
		if (b->pid > 0) {
			kill(b->pid, SIGKILL);
			waitpid(b->pid, NULL, 0);
		}
		free(b);
		return hangar_sys_error(HANGAR_ECREATE, 0, 0, "fake: daemon did not start");
	}
	close(pfd[0]);
	b->next = f->boxes;
	f->boxes = b;
	return describe(b, out);
}

static int f_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct fake_box *b = fake_find(state, id);

	if (!b || !alive(b))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "fake: no sandbox %s", id);
	return describe(b, out);
}

static int f_kill(void *state, const char *id)
{
	struct fake_box *b = fake_find(state, id);

	if (!b || !alive(b))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "fake: no sandbox %s", id);
	if (b->pid) {
		kill(b->pid, SIGKILL);
		waitpid(b->pid, NULL, 0);
	}
	b->killed = 1;
	return 0;
}

static int f_pause(void *state, const char *id)
{
	struct fake_box *b = fake_find(state, id);

	if (!b || !alive(b))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "fake: no sandbox %s", id);
	if (b->pid)
		kill(b->pid, SIGSTOP);
	b->paused = 1;
	return 0;
}

static int f_resume(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct fake_box *b = fake_find(state, id);

	if (!b || !alive(b))
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "fake: no sandbox %s", id);
	if (b->pid)
		kill(b->pid, SIGCONT);
	b->paused = 0;
	return describe(b, out);
}

static int f_list(void *state, hangar_sys_list *out)
{
	struct fake *f = state;

	if (f->list_fails)
		return hangar_sys_error(f->list_fails, 503, 0, "fake: list failed as asked");
	for (struct fake_box *b = f->boxes; b; b = b->next) {
		hangar_sys_sandbox *d;

		if (!alive(b))
			continue;
		d = hangar_sys_list_add(out);
		if (!d || describe(b, d))
			return hangar_sys_error(HANGAR_ENOMEM, 0, 0, "fake: out of memory");
	}
	return 0;
}

static const struct hangar_provider_ops fake_ops_table = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "fake",
	.capabilities = HANGAR_CAP_PAUSE | HANGAR_CAP_PTY,
	.init = f_init,
	.create = f_create,
	.connect = f_connect,
	.kill = f_kill,
	.pause = f_pause,
	.resume = f_resume,
	.list = f_list,
};

const struct hangar_provider_ops *fake_ops(void)
{
	return &fake_ops_table;
}

int fake_register(hangar_ctx *ctx, struct fake *f)
{
	return hangar_provider_register(ctx, &fake_ops_table, f);
}

void fake_cleanup(struct fake *f)
{
	while (f->boxes) {
		struct fake_box *b = f->boxes;

		f->boxes = b->next;
		if (!b->killed && b->pid) {
			kill(b->pid, SIGKILL);
			kill(b->pid, SIGCONT);
			waitpid(b->pid, NULL, 0);
		}
		if (b->sock[0])
			unlink(b->sock);
		free(b);
	}
}
