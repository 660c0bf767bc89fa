/*
 * Attaching to a live local sandbox: envd's token (remembered, or asked of
 * the jail on jail.sock) and the description the library reaches envd by.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/clock.h"
#include "local.h"

/*
 * Connects to the jail's socket name (jail.sock, ports.sock) in dir; the
 * peer must be jail_pid itself. 0 with the socket in *out, or an error set.
 */
int local_jail_connect(const char *dir, const char *id, int jail_pid, const char *name, int *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { TOKEN_DEADLINE_MS / 1000, (TOKEN_DEADLINE_MS % 1000) * 1000 };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, e;

	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name) >= (int)sizeof(sa.sun_path))
		return hangar_sys_error(HANGAR_EOS, 0, ENAMETOOLONG, "local sandbox %s: socket path too long", id);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return hangar_sys_error(HANGAR_EOS, 0, errno, "socket");
	/* A unix connect() waits only while the backlog is full, and no longer than SO_SNDTIMEO. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		if (e == ENOENT || e == ECONNREFUSED)
			return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor does not "
						"answer)", id);
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, e, "local sandbox %s: cannot reach its supervisor",
					id);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred) ||
	    cred.pid != jail_pid) {
		close(fd);
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (%s is not its "
					"supervisor's)", id, name);
	}
	*out = fd;
	return 0;
}

/*
 * Asks the jail for envd's token on jail.sock: the jail writes it and closes.
 * The answer must come from jail_pid itself, within TOKEN_DEADLINE_MS.
 * 0 with the token in buf (NUL-terminated), or an error set.
 */
static int fetch_token(const char *dir, const char *id, int jail_pid, char *buf /* TOKEN_MAX + 1 */)
{
	int64_t deadline = clock_mono_ms() + TOKEN_DEADLINE_MS;
	size_t have;
	int fd, r, rc = local_jail_connect(dir, id, jail_pid, "jail.sock", &fd);

	if (rc)
		return rc;
	/* A failing poll() leaves what was read to the checks below, as an early EOF would. */
	r = local_read_until(fd, buf, TOKEN_MAX + 1, deadline, NULL, &have);
	close(fd);
	if (r == -ETIMEDOUT) {
		explicit_bzero(buf, have);
		return hangar_sys_error(HANGAR_EUNAVAILABLE, 0, 0,
					"local sandbox %s: its supervisor did not answer within %d s", id,
					TOKEN_DEADLINE_MS / 1000);
	}
	if (have == 0 || have > TOKEN_MAX || memchr(buf, '\0', have) || memchr(buf, '\n', have) ||
	    memchr(buf, '\r', have)) {
		explicit_bzero(buf, have > TOKEN_MAX ? TOKEN_MAX + 1 : have);
		/* The jail answers nothing once it is tearing the sandbox down. */
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "local sandbox %s is gone (its supervisor gave no token)",
					id);
	}
	buf[have] = '\0';
	return 0;
}

/* local_describe()'s token argument when the description is only listed, never used to connect. */
const char LOCAL_NO_TOKEN[] = "";

/*
 * Fills out from m; token is envd's, NULL to ask the jail (jail_pid) for it,
 * or LOCAL_NO_TOKEN for a listing, which needs none (so one stuck supervisor
 * cannot hold up or fail a list).
 */
int local_describe(struct local *l, const char *dir, const struct lmeta *m, const char *known_token,
		   int jail_pid, hangar_sys_sandbox *out)
{
	char path[PATH_MAX], fetched[TOKEN_MAX + 1];
	const char *token = known_token;
	int r;

	if (!token) {
		/* Remembered from an earlier attach or the create, else asked for once. */
		if (ltokens_recall(&l->tokens, m->id, jail_pid, fetched, sizeof(fetched)) != 0) {
			r = fetch_token(dir, m->id, jail_pid, fetched);
			if (r)
				return r;
			ltokens_keep(&l->tokens, m->id, jail_pid, fetched);
		}
		token = fetched;
	} else if (token != LOCAL_NO_TOKEN) {
		ltokens_keep(&l->tokens, m->id, jail_pid, token);
	}
	/* A sandbox an older jail made has its socket in run/, which was bound inside. */
	snprintf(path, sizeof(path), "%s/envd.sock", dir);
	if (access(path, F_OK) < 0)
		snprintf(path, sizeof(path), "%s/run/envd.sock", dir);
	r = hangar_sys_sandbox_set_id(out, m->id);
	if (!r)
		r = hangar_sys_sandbox_set_envd_socket(out, path);
	if (!r)
		r = hangar_sys_sandbox_set_envd_url(out, "http://localhost");
	if (!r && token != LOCAL_NO_TOKEN)
		r = hangar_sys_sandbox_set_access_token(out, token);
	if (!r)
		r = hangar_sys_sandbox_set_user(out, m->image.user && *m->image.user ? m->image.user : "user");
	if (!r)
		r = hangar_sys_sandbox_set_template(out, m->template_id ? m->template_id : "local");
	if (!r)
		r = hangar_sys_sandbox_set_times(out, m->created_at_us, m->expires_at_us);
	if (!r)
		r = hangar_sys_sandbox_set_state(out, m->paused ? HANGAR_SANDBOX_PAUSED : HANGAR_SANDBOX_RUNNING);
	if (token == fetched)
		explicit_bzero(fetched, sizeof(fetched));
	return r;
}

int local_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	struct local *l = state;
	char dir[DIR_MAX];
	struct lmeta m;
	int pid, r = local_find_running(l, id, dir, sizeof(dir), &pid);

	if (r)
		return r;
	r = lstate_meta_read(dir, &m);
	if (r < 0)
		return local_meta_failed(id, r);
	/* One read of meta.json on this hot path (every attach): the lifetime from it too. */
	r = local_past_lifetime(id, &m);
	if (!r)
		r = local_describe(l, dir, &m, NULL, pid, out);
	lstate_meta_clear(&m);
	return r;
}
