/*
 * hangar-envd's file operations in a real local sandbox, against what a
 * hostile program in it plants where the daemon goes: symbolic links to
 * devices, FIFOs, sockets, /proc entries, root-only files, envd's own
 * directory and /, and the special files themselves. Each test is an attack
 * that worked when envd followed links as root, and must fail now: nothing
 * but a regular file is streamed either way, an upload never writes through
 * a link nor changes an owner, and every operation is one the requesting
 * user could make (man/hangar-envd.8, FILES AS THE USER).
 *
 * Every test runs twice: _i == 0 with the caller as root, _i == 1 with the
 * caller as the unprivileged test user `user` (skipped when not started as
 * root). The files are asked for as both of the sandbox's users: as `user`
 * through the sandbox's handle (the public file calls act as the sandbox's
 * default user), and as root through a second handle on the same sandbox
 * from a provider of this test's own, "as-root", which describes the local
 * sandbox's envd with root as its user, as the E2B SDK's files API may ask.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <hangar/hangar.h>
#include <hangar/sys/provider.h>

#include "jail-test.h"

/* ---- the sandbox, as its user and as its root ----------------------------------------- */

/*
 * envd's token, as the jail gives it to the library's own uid on jail.sock
 * (as test-isolation.c's envd_token, reporting failures instead of
 * asserting: it runs inside the library's call).
 */
static int jail_token(const char *id, char *tok, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/jail.sock", run_of(state_dir), id);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	for (;;) {
		ssize_t r = read(fd, tok + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (n += (size_t)r) >= size - 1)
			break;
	}
	close(fd);
	tok[n] = '\0';
	tok[strcspn(tok, "\n")] = '\0';
	return strlen(tok) >= 16 ? 0 : -1;
}

static int as_root_init(void **state, hangar_ctx *ctx, void *data)
{
	(void)ctx;
	(void)data;
	*state = NULL;
	return 0;
}

static int as_root_create(void *state, const struct hangar_create_opts *opts, hangar_sys_sandbox *out)
{
	(void)state;
	(void)opts;
	(void)out;
	return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "as-root only attaches to local sandboxes");
}

/* The local sandbox id's envd, as the local provider describes it, but with root as the user. */
static int as_root_connect(void *state, const char *id, hangar_sys_sandbox *out)
{
	char path[PATH_MAX], tok[1100];
	int rc;

	(void)state;
	if (jail_token(id, tok, sizeof(tok)) < 0)
		return hangar_sys_error(HANGAR_EGONE, 0, 0, "no local sandbox %s", id);
	snprintf(path, sizeof(path), "%s/%s/envd.sock", run_of(state_dir), id);
	rc = hangar_sys_sandbox_set_id(out, id);
	if (!rc)
		rc = hangar_sys_sandbox_set_envd_socket(out, path);
	if (!rc)
		rc = hangar_sys_sandbox_set_envd_url(out, "http://localhost");
	if (!rc)
		rc = hangar_sys_sandbox_set_access_token(out, tok);
	if (!rc)
		rc = hangar_sys_sandbox_set_user(out, "root");
	explicit_bzero(tok, sizeof(tok));
	return rc;
}

static int as_root_kill(void *state, const char *id)
{
	(void)state;
	return hangar_sys_error(HANGAR_EUNSUPPORTED, 0, 0, "kill %s through the local provider", id);
}

static const struct hangar_provider_ops as_root_ops = {
	.version = HANGAR_PROVIDER_OPS_VERSION,
	.size = sizeof(struct hangar_provider_ops),
	.name = "as-root",
	.init = as_root_init,
	.create = as_root_create,
	.connect = as_root_connect,
	.kill = as_root_kill,
};

/*
 * One sandbox: sb[0] asks for files as `user`, sb[1] as root. single: one
 * uid for the whole sandbox (an unprivileged caller without subordinate
 * ids, HANGAR_LOCAL_SUBIDS=off), where envd refuses to act as root.
 */
struct box {
	hangar_ctx *ctx;
	hangar_sandbox *sb[2];
	int single;
	const char *admin;          /* who inspects the sandbox's files: root, or user when single */
};

static const char *const who[2] = { "user", "root" };

/*
 * Becomes the caller of mode (0: root, 1: `user`, 2: `user` with one uid
 * for the sandbox) and opens a sandbox; 0 when the mode cannot be run here.
 * Reads are capped at 1 MiB and copies at 1 MiB and 30 s, so that a
 * regression streaming /dev/zero fails the test instead of hanging it.
 */
static int box_open(struct box *b, int mode)
{
	int rc;

	if (!become_caller(mode != 0))
		return 0;
	b->single = mode == 2;
	b->admin = b->single ? "user" : "root";
	b->ctx = new_ctx();
	if (b->single)
		ck_assert_int_eq(hangar_ctx_set(b->ctx, "HANGAR_LOCAL_SUBIDS", "off"), 0);
	ck_assert_int_eq(hangar_ctx_set(b->ctx, "HANGAR_READ_LIMIT_BYTES", "1048576"), 0);
	ck_assert_int_eq(hangar_ctx_set(b->ctx, "HANGAR_COPY_LIMIT_BYTES", "1048576"), 0);
	ck_assert_int_eq(hangar_ctx_set(b->ctx, "HANGAR_COPY_TIMEOUT_SECONDS", "30"), 0);
	ck_assert_int_eq(hangar_ctx_set(b->ctx, "HANGAR_REQUEST_TIMEOUT_SECONDS", "30"), 0);
	ck_assert_int_eq(hangar_provider_register(b->ctx, &as_root_ops, NULL), 0);
	b->sb[0] = create(b->ctx, HANGAR_NETWORK_OFF);
	rc = hangar_sandbox_attach(&b->sb[1], b->ctx, "as-root", hangar_sandbox_id(b->sb[0]));
	ck_assert_msg(rc == 0, "as-root: %d %s", rc, hangar_error_last()->message);
	return 1;
}

static void box_close(struct box *b)
{
	hangar_sandbox_kill(b->sb[0]);
	hangar_sandbox_unref(b->sb[1]);
	hangar_sandbox_unref(b->sb[0]);
	hangar_ctx_unref(b->ctx);
}

/*
 * rc must be the error code, with HTTP status http from envd (0: any) and
 * a message holding want (NULL: any); the rest says what was tried.
 */
static void refused(int rc, int code, int http, const char *want, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void refused(int rc, int code, int http, const char *want, const char *fmt, ...)
{
	const hangar_error *e = hangar_error_last();
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ck_assert_msg(rc == code && (!http || e->http_status == http) && (!want || strstr(e->message, want)),
		      "%s: got %s (HTTP %d: %s), want %s (HTTP %d, \"%s\")", what, hangar_error_name(rc),
		      e->http_status, e->message, hangar_error_name(code), http, want ? want : "");
}

/*
 * What the sandbox's root (with one uid, its user) sees of paths: owner,
 * group, mode, type and size of the path itself, then a hash of each
 * regular file reached, so a test can tell that nothing of them changed.
 */
static void box_state(struct box *b, const char *paths, char *out, size_t size)
{
	char cmd[2048];
	struct out o;

	snprintf(cmd, sizeof(cmd),
		 "for p in %s; do stat -c '%%n %%U %%G %%a %%F %%s' \"$p\" 2>&1; "
		 "test -f \"$p\" && sha256sum \"$p\" 2>&1; done; true",
		 paths);
	sh(b->sb[0], b->admin, cmd, &o);
	ck_assert_int_eq(o.exit_code, 0);
	{
		size_t n = strnlen(o.text, size - 1); /* cut to fit, as the caller asked */

		memcpy(out, o.text, n);
		out[n] = '\0';
	}
}

/* envd's socket as the host sees it: type, owner and mode (it is outside the sandbox). */
static void host_socket_state(struct box *b, char *out, size_t size)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s/envd.sock", run_of(state_dir), hangar_sandbox_id(b->sb[0]));
	ck_assert_msg(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode), "%s: %s", path, strerror(errno));
	snprintf(out, size, "%u:%u %o", (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode);
}

/* The library still reaches envd, from this context and from a fresh one. */
static void envd_still_serves(struct box *b)
{
	hangar_ctx *again = new_ctx();
	hangar_sandbox *same = NULL;

	if (b->single)
		ck_assert_int_eq(hangar_ctx_set(again, "HANGAR_LOCAL_SUBIDS", "off"), 0);
	expect(b->sb[0], "user", "echo alive", "alive");
	ck_assert_int_eq(hangar_sandbox_attach(&same, again, "local", hangar_sandbox_id(b->sb[0])), 0);
	expect(same, "user", "echo reached", "reached");
	hangar_sandbox_unref(same);
	hangar_ctx_unref(again);
}

/* A download must be refused both ways: into memory and to a local file, which must not appear. */
static void download_refused(struct box *b, int u, const char *path, int code, int http, const char *want)
{
	hangar_copy_opts co = HANGAR_COPY_OPTS_INIT;
	hangar_buf buf = HANGAR_BUF_INIT;
	char local[PATH_MAX];
	struct stat st;

	refused(hangar_sandbox_read_file(&buf, b->sb[u], path), code, http, want, "reading %s as %s", path, who[u]);
	ck_assert_ptr_null(buf.ptr);
	snprintf(local, sizeof(local), "%s/copied", state_dir);
	co.limit_bytes = 1 << 20;
	co.timeout_sec = 30;
	refused(hangar_sandbox_copy_out(b->sb[u], path, local, &co), code, http, want, "copying %s out as %s", path,
		who[u]);
	ck_assert_msg(lstat(local, &st) < 0 && errno == ENOENT, "copying %s out as %s left %s", path, who[u], local);
	hangar_buf_dispose(&buf);
}

/* With one uid for the sandbox, every file operation for root is refused, as commands are. */
static void root_refused(struct box *b, const char *path)
{
	static const char why[] = "cannot act as user 'root'";

	download_refused(b, 1, path, HANGAR_EREFUSED, 403, why);
	refused(hangar_sandbox_write_file(b->sb[1], path, "x", 1), HANGAR_EREFUSED, 403, why, "writing %s as root",
		path);
}

/* ---- special files -------------------------------------------------------------------- */

/*
 * Devices, FIFOs, sockets and directories, named directly or through a
 * link the sandbox's user planted, are refused with 400 (HANGAR_EFILE)
 * before they are opened, naming what they are, in both directions: a
 * link to /dev/zero no longer streams zeros for ever, a FIFO with no
 * writer is no empty file, an upload never opens a FIFO or a device. They
 * are left as they were.
 */
START_TEST(special_files_refused)
{
	static const struct {
		const char *path, *kind;
	} cases[] = {
		{ "/dev/zero", "character device" },
		{ "/workspace/zero", "character device" },
		{ "/workspace/urandom", "character device" },
		{ "/workspace/fifo", "FIFO" },
		{ "/workspace/fifo-link", "FIFO" },
		{ "/workspace/sock", "socket" },
		{ "/workspace/sock-link", "socket" },
		{ "/workspace/top", "directory" },
	};
	static const char *const paths = "/dev/zero /dev/null /workspace/fifo /workspace/sock";
	char before[4096], after[4096];
	struct box b;

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "user",
	       "cd /workspace && ln -s /dev/zero zero && ln -s /dev/urandom urandom && mkfifo fifo && "
	       "ln -s fifo fifo-link && python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\" && "
	       "ln -s sock sock-link && ln -s / top && ln -s /dev/null null && echo planted",
	       "planted");
	box_state(&b, paths, before, sizeof(before));
	for (int u = 0; u < 2; u++) {
		if (u == 1 && b.single) {
			for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
				root_refused(&b, cases[i].path);
			continue;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			download_refused(&b, u, cases[i].path, HANGAR_EFILE, 400, cases[i].kind);
		refused(hangar_sandbox_write_file(b.sb[u], "/workspace/fifo", "x", 1), HANGAR_EFILE, 400, "FIFO",
			"writing the FIFO as %s", who[u]);
		refused(hangar_sandbox_write_file(b.sb[u], "/workspace/sock", "x", 1), HANGAR_EFILE, 400, "socket",
			"writing the socket as %s", who[u]);
		refused(hangar_sandbox_write_file(b.sb[u], "/dev/null", "x", 1), HANGAR_EFILE, 400,
			"character device", "writing /dev/null as %s", who[u]);
		refused(hangar_sandbox_write_file(b.sb[u], "/workspace/null", "x", 1), HANGAR_EFILE, 400,
			"symbolic link", "writing through a link to /dev/null as %s", who[u]);
	}
	box_state(&b, paths, after, sizeof(after));
	ck_assert_str_eq(after, before);
	envd_still_serves(&b);
	box_close(&b);
}
END_TEST

/* ---- /proc -------------------------------------------------------------------------- */

/*
 * A process of `user` holding open on fd 3 a 0644 file in root's 0700
 * /root/private (root opens it, then becomes `user`): `user` reads it from
 * a shell through /proc/<pid>/fd/3, not by its path; envd serves it through
 * the magic link to neither user.
 */
static void magic_link_refused(struct box *b)
{
	char magic[64], cmd[512];
	struct out o;

	sh(b->sb[0], "root",
	   "mkdir -m 700 /root/private && echo magic-secret > /root/private/note && chmod 644 /root/private/note && "
	   "(exec 3</root/private/note; exec setpriv --reuid=user --regid=user --clear-groups sleep 300 "
	   "</dev/null >/dev/null 2>&1 &) ; "
	   "for i in $(seq 100); do P=$(pgrep -u user -x sleep) && break; sleep 0.1; done; echo $P",
	   &o);
	ck_assert_msg(o.exit_code == 0 && atoi(o.text) > 1, "holder: %s", o.text);
	snprintf(magic, sizeof(magic), "/proc/%d/fd/3", atoi(o.text));
	snprintf(cmd, sizeof(cmd), "cat /root/private/note 2>/dev/null; cat %s", magic);
	expect(b->sb[0], "user", cmd, "magic-secret");
	download_refused(b, 0, magic, HANGAR_EFILE, 400, "/proc link");
	download_refused(b, 1, magic, HANGAR_EFILE, 400, "/proc link");
}

/*
 * /proc is never served, to either user, named or through a link the
 * sandbox's user planted: bwrap's entries (pid 1), envd's own (/proc/self
 * is the daemon). Where the kernel would let the request's user open the
 * file (world-readable entries, and envd's own to root, who acts with
 * envd's capabilities), envd refuses it (400, a kernel pseudo-filesystem);
 * where the kernel refuses (bwrap's environment, envd's to `user`), that
 * is 403. A /proc/<pid>/fd/<n> magic link is refused (400) even when the
 * process is the user's own (magic_link_refused). With one uid for the
 * sandbox, root is refused everything and `user` is envd's uid.
 */
START_TEST(proc_never_served)
{
	static const struct {
		const char *path;
		int kernel_may_refuse;  /* 1: the kernel's 403 is as good as envd's 400 */
	} cases[] = {
		{ "/proc/self/maps", 0 },      { "/workspace/maps-self", 0 }, { "/proc/self/cmdline", 0 },
		{ "/proc/1/cmdline", 0 },      { "/workspace/cmdline-1", 0 }, { "/proc/self/mountinfo", 0 },
		{ "/proc/1/environ", 1 },      { "/workspace/env-1", 1 },     { "/proc/self/environ", 1 },
		{ "/workspace/env-self", 1 },  { "/workspace/env-envd", 1 },  { "/workspace/mem-self", 1 },
	};
	struct box b;

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "user",
	       "cd /workspace && ln -s /proc/1/environ env-1 && ln -s /proc/self/environ env-self && "
	       "ln -s /proc/self/mem mem-self && ln -s /proc/self/maps maps-self && ln -s /proc/1/cmdline cmdline-1 && "
	       "ln -s /proc/$(pgrep -x hangar-envd)/environ env-envd && echo planted",
	       "planted");
	if (!b.single) {
		magic_link_refused(&b);
		/* Root acts with envd's capabilities: only envd itself stops it at envd's own entries. */
		download_refused(&b, 1, "/proc/self/environ", HANGAR_EFILE, 400, "pseudo-filesystem");
		download_refused(&b, 1, "/workspace/env-envd", HANGAR_EFILE, 400, "pseudo-filesystem");
	}
	for (int u = 0; u < 2; u++) {
		if (u == 1 && b.single) {
			for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
				root_refused(&b, cases[i].path);
			continue;
		}
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			hangar_buf buf = HANGAR_BUF_INIT;
			int rc = hangar_sandbox_read_file(&buf, b.sb[u], cases[i].path);
			const hangar_error *e = hangar_error_last();
			int by_envd = rc == HANGAR_EFILE && e->http_status == 400 &&
				      strstr(e->message, "pseudo-filesystem");
			int by_kernel = rc == HANGAR_EREFUSED && e->http_status == 403;

			ck_assert_msg(by_envd || (cases[i].kernel_may_refuse && by_kernel),
				      "reading %s as %s: %s (HTTP %d: %s)", cases[i].path, who[u],
				      hangar_error_name(rc), e->http_status, e->message);
			ck_assert_ptr_null(buf.ptr);
		}
		download_refused(&b, u, "/workspace/maps-self", HANGAR_EFILE, 400, "pseudo-filesystem");
	}
	envd_still_serves(&b);
	box_close(&b);
}
END_TEST

/* ---- uploads ------------------------------------------------------------------------ */

/*
 * An upload to a symbolic link the sandbox's user planted is refused (400)
 * for either user, whatever it points to: a file of root's (which root
 * could write, and a 0666 one anyone could), a root-only file, envd's own
 * binary in /run/hangar (where envd's socket was, which such an upload
 * once chowned to the sandbox's user), a socket of root's, /dev/null, a
 * dangling link into /root (which an open with O_CREAT would create).
 * Nothing it points to changes: content, owner, mode; the links stay
 * links; envd's socket on the host is as it was and envd still serves.
 */
START_TEST(uploads_never_through_links)
{
	static const char *const links[] = {
		"/workspace/l-root", "/workspace/l-open", "/workspace/l-secret", "/workspace/l-envd",
		"/workspace/l-sock", "/workspace/l-null", "/workspace/l-dangling",
	};
	static const char *const paths =
		"/workspace/rootfile /workspace/openfile /root/secret /tmp/rsock /dev/null /root/made "
		"/workspace/l-root /workspace/l-open /workspace/l-secret /workspace/l-envd /workspace/l-sock "
		"/workspace/l-null /workspace/l-dangling";
	char before[8192], after[8192], host_before[1024], host_after[1024], local[PATH_MAX];
	struct box b;
	FILE *f;

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "root",
	       "echo rootdata > /workspace/rootfile && echo opendata > /workspace/openfile && "
	       "chmod 666 /workspace/openfile && (umask 077; echo secret > /root/secret) && "
	       "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('/tmp/rsock')\" && echo made",
	       "made");
	expect(b.sb[0], "user",
	       "cd /workspace && ln -s /workspace/rootfile l-root && ln -s /workspace/openfile l-open && "
	       "ln -s /root/secret l-secret && ln -s /run/hangar/hangar-envd l-envd && ln -s /tmp/rsock l-sock && "
	       "ln -s /dev/null l-null && ln -s /root/made l-dangling && echo planted",
	       "planted");
	snprintf(local, sizeof(local), "%s/payload", state_dir);
	f = fopen(local, "w");
	ck_assert_ptr_nonnull(f);
	fputs("evil\n", f);
	fclose(f);
	box_state(&b, paths, before, sizeof(before));
	host_socket_state(&b, host_before, sizeof(host_before));
	for (int u = 0; u < 2; u++)
		for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
			refused(hangar_sandbox_write_file(b.sb[u], links[i], "evil\n", 5), HANGAR_EFILE, 400,
				"symbolic link", "writing %s as %s", links[i], who[u]);
			refused(hangar_sandbox_copy_in(b.sb[u], local, links[i]), HANGAR_EFILE, 400, "symbolic link",
				"copying to %s as %s", links[i], who[u]);
		}
	box_state(&b, paths, after, sizeof(after));
	ck_assert_str_eq(after, before);
	ck_assert_msg(strstr(after, "/root/made': No such file"), "the dangling link's target: %s", after);
	host_socket_state(&b, host_after, sizeof(host_after));
	ck_assert_str_eq(host_after, host_before);
	envd_still_serves(&b);
	box_close(&b);
}
END_TEST

static int owner_cb(const hangar_file_info *info, void *payload)
{
	snprintf(payload, 64, "%s %o", info->owner ? info->owner : "(none)", (unsigned)info->mode);
	return 0;
}

/*
 * An upload changes no owner: an existing file another user owns and the
 * writer may write is written and keeps its owner and mode, less the
 * set-user-ID bit when `user` writes (upstream gives the file to the
 * writer); what an upload creates, parents included, is the writer's.
 */
START_TEST(uploads_keep_owners)
{
	static const char *const owners =
		"stat -c '%n %U %a' /workspace/shared /workspace/tool /workspace/users /workspace/new "
		"/workspace/new/dir /workspace/new/dir/f /workspace/byroot /workspace/byroot/f; "
		"cat /workspace/shared /workspace/users";
	struct box b;
	struct out o;
	char owner[64];

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "root",
	       "echo old > /workspace/shared && chmod 666 /workspace/shared && echo old > /workspace/tool && "
	       "chmod 4777 /workspace/tool && echo made",
	       "made");
	expect(b.sb[0], "user", "echo old > /workspace/users && chmod 666 /workspace/users && echo made", "made");
	ck_assert_int_eq(hangar_sandbox_write_file(b.sb[0], "/workspace/shared", "by user\n", 8), 0);
	ck_assert_int_eq(hangar_sandbox_write_file(b.sb[0], "/workspace/tool", "#!/bin/sh\n", 10), 0);
	ck_assert_int_eq(hangar_sandbox_write_file(b.sb[0], "/workspace/new/dir/f", "x", 1), 0);
	ck_assert_int_eq(hangar_sandbox_write_file(b.sb[1], "/workspace/users", "by root\n", 8), 0);
	ck_assert_int_eq(hangar_sandbox_write_file(b.sb[1], "/workspace/byroot/f", "x", 1), 0);
	sh(b.sb[0], "root", owners, &o);
	ck_assert_int_eq(o.exit_code, 0);
	ck_assert_str_eq(o.text, "/workspace/shared root 666\n"
				 "/workspace/tool root 777\n"
				 "/workspace/users user 666\n"
				 "/workspace/new user 755\n"
				 "/workspace/new/dir user 755\n"
				 "/workspace/new/dir/f user 644\n"
				 "/workspace/byroot root 755\n"
				 "/workspace/byroot/f root 644\n"
				 "by user\n"
				 "by root\n");
	/* envd reports them so too. */
	ck_assert_int_eq(hangar_sandbox_stat(b.sb[0], "/workspace/shared", owner_cb, owner), 0);
	ck_assert_str_eq(owner, "root 666");
	box_close(&b);
}
END_TEST

/* ---- the requesting user's credentials ---------------------------------------------- */

/*
 * Every file operation is made with the requesting user's credentials:
 * `user` reaches none of root's files, by name or through a link it
 * planted (403, HANGAR_EREFUSED), reading, copying, writing, making
 * directories, renaming, removing, listing or describing them; root, asking
 * the same, reads them. Nothing of root's changes.
 */
START_TEST(files_as_the_requesting_user)
{
	static const char *const unreadable[] = {
		"/root/secret", "/workspace/l-secret", "/workspace/shadow", "/workspace/l-shadow",
		"/workspace/door/file",
	};
	static const char *const unwritable[] = {
		"/root/planted", "/workspace/door/planted", "/workspace/rootdir/planted",
		"/workspace/rootdir/sub/planted", "/workspace/l-rootdir/planted",
	};
	static const char *const paths =
		"/root/secret /workspace/shadow /workspace/closed /workspace/closed/file /workspace/rootdir "
		"/root/planted /workspace/closed/planted /workspace/closed/sub /workspace/rootdir/planted "
		"/workspace/rootdir/sub /workspace/taken";
	char before[8192], after[8192], owner[64];
	hangar_buf buf = HANGAR_BUF_INIT;
	struct box b;

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "root",
	       "(umask 077; echo rootsecret > /root/secret; echo 'root:$6$salt$hash:19000:0:99999:7:::' > "
	       "/workspace/shadow) && mkdir -m 700 /workspace/closed && echo inside > /workspace/closed/file && "
	       "chmod 644 /workspace/closed/file && mkdir -m 755 /workspace/rootdir && echo made",
	       "made");
	expect(b.sb[0], "user",
	       "cd /workspace && ln -s /root/secret l-secret && ln -s /workspace/closed door && "
	       "ln -s /workspace/shadow l-shadow && ln -s /workspace/rootdir l-rootdir && echo planted",
	       "planted");
	box_state(&b, paths, before, sizeof(before));
	for (size_t i = 0; i < sizeof(unreadable) / sizeof(unreadable[0]); i++)
		download_refused(&b, 0, unreadable[i], HANGAR_EREFUSED, 403, "permission denied");
	for (size_t i = 0; i < sizeof(unwritable) / sizeof(unwritable[0]); i++)
		refused(hangar_sandbox_write_file(b.sb[0], unwritable[i], "evil", 4), HANGAR_EREFUSED, 403,
			"permission denied", "writing %s as user", unwritable[i]);
	refused(hangar_sandbox_mkdir(b.sb[0], "/workspace/door/sub"), HANGAR_EREFUSED, 0, NULL, "mkdir as user");
	refused(hangar_sandbox_mkdir(b.sb[0], "/workspace/rootdir/sub"), HANGAR_EREFUSED, 0, NULL, "mkdir as user");
	refused(hangar_sandbox_rename(b.sb[0], "/workspace/door/file", "/workspace/taken"), HANGAR_EREFUSED, 0, NULL,
		"rename as user");
	refused(hangar_sandbox_remove(b.sb[0], "/workspace/door/file"), HANGAR_EREFUSED, 0, NULL, "remove as user");
	refused(hangar_sandbox_remove(b.sb[0], "/root/secret"), HANGAR_EREFUSED, 0, NULL, "remove as user");
	refused(hangar_sandbox_list_files(b.sb[0], "/workspace/door", 1, owner_cb, owner), HANGAR_EREFUSED, 0, NULL,
		"list as user");
	refused(hangar_sandbox_list_files(b.sb[0], "/root", 1, owner_cb, owner), HANGAR_EREFUSED, 0, NULL,
		"list as user");
	refused(hangar_sandbox_stat(b.sb[0], "/workspace/door/file", owner_cb, owner), HANGAR_EREFUSED, 0, NULL,
		"stat as user");
	refused(hangar_sandbox_exists(b.sb[0], "/root/secret"), HANGAR_EREFUSED, 0, NULL, "exists as user");
	box_state(&b, paths, after, sizeof(after));
	ck_assert_str_eq(after, before);
	/* Root, asking the same, may. */
	ck_assert_int_eq(hangar_sandbox_read_file(&buf, b.sb[1], "/workspace/l-secret"), 0);
	ck_assert_str_eq(buf.ptr, "rootsecret\n");
	ck_assert_int_eq(hangar_sandbox_read_file(&buf, b.sb[1], "/workspace/door/file"), 0);
	ck_assert_str_eq(buf.ptr, "inside\n");
	ck_assert_int_eq(hangar_sandbox_stat(b.sb[1], "/workspace/door/file", owner_cb, owner), 0);
	ck_assert_str_eq(owner, "root 644");
	hangar_buf_dispose(&buf);
	box_close(&b);
}
END_TEST

/* ---- links out of reach ------------------------------------------------------------- */

struct names {
	char text[8192];
};

static int names_cb(const hangar_file_info *info, void *payload)
{
	struct names *n = payload;
	size_t len = strlen(n->text);

	snprintf(n->text + len, sizeof(n->text) - len, "%s\n", info->path);
	return 0;
}

/*
 * Directory links the sandbox's user planted to envd's own directory
 * (/run/hangar, envd's binary, which no sandbox user may enter) and to /:
 * nothing is put into /run/hangar through them, or taken out of it, for
 * either user, whatever the operation (upload, mkdir, rename, remove), and
 * `user` cannot even look (403); envd's socket on the host is unchanged
 * and envd still serves. A listing does not follow links inside the
 * directory listed, and removing a link to a directory removes the link,
 * never what it points to.
 */
START_TEST(directory_links_out_of_reach)
{
	static const char *const dirs[] = { "/workspace/run", "/workspace/top/run/hangar" };
	char host_before[256], host_after[256], path[PATH_MAX], entry[64];
	struct names n;
	struct box b;
	struct out o;

	if (!box_open(&b, _i))
		return;
	expect(b.sb[0], "user",
	       "cd /workspace && ln -s /run/hangar run && ln -s / top && mkdir keep && echo kept > keep/f && "
	       "ln -s keep keep-link && ln -s keep keep-link2 && echo planted",
	       "planted");
	host_socket_state(&b, host_before, sizeof(host_before));
	for (int u = 0; u < 2; u++) {
		for (size_t i = 0; i < 2; i++) {
			hangar_buf buf = HANGAR_BUF_INIT;
			int rc;

			snprintf(path, sizeof(path), "%s/planted", dirs[i]);
			rc = hangar_sandbox_write_file(b.sb[u], path, "evil", 4);
			ck_assert_msg(rc < 0, "wrote %s as %s", path, who[u]);
			ck_assert_msg(u == 1 || rc == HANGAR_EREFUSED, "writing %s as user: %s", path,
				      hangar_error_last()->message);
			/*
			 * Refused (user) or in the way of a read-only file system
			 * (root): the file's error either way, never a protocol
			 * fault that would have the library doubt the sandbox.
			 */
			rc = hangar_sandbox_mkdir(b.sb[u], path);
			ck_assert_msg(rc == (u ? HANGAR_EFILE : HANGAR_EREFUSED), "made %s as %s: %d %s", path, who[u],
				      rc, hangar_error_last()->message);
			snprintf(path, sizeof(path), "%s/hangar-envd", dirs[i]);
			rc = hangar_sandbox_rename(b.sb[u], path, "/workspace/moved");
			ck_assert_msg(rc == (u ? HANGAR_EFILE : HANGAR_EREFUSED), "moved %s as %s: %d %s", path, who[u],
				      rc, hangar_error_last()->message);
			rc = hangar_sandbox_remove(b.sb[u], path);
			ck_assert_msg(rc == (u ? HANGAR_EFILE : HANGAR_EREFUSED), "removed %s as %s: %d %s", path,
				      who[u], rc, hangar_error_last()->message);
			rc = hangar_sandbox_read_file(&buf, b.sb[u], path);
			ck_assert_msg(u == 1 || rc == HANGAR_EREFUSED, "reading %s as user: %s", path,
				      hangar_error_last()->message);
			hangar_buf_dispose(&buf);
			n.text[0] = '\0';
			rc = hangar_sandbox_list_files(b.sb[u], dirs[i], 1, names_cb, &n);
			ck_assert_msg(u == 1 || rc == HANGAR_EREFUSED, "listing %s as user: %.1500s", dirs[i], n.text);
			if (rc == 0)
				ck_assert_msg(!strstr(n.text, "planted") && !strstr(n.text, "moved"), "%s: %.1500s",
					      dirs[i], n.text);
		}
		/* A deep listing names the links and goes through none of them. */
		n.text[0] = '\0';
		ck_assert_int_eq(hangar_sandbox_list_files(b.sb[u], "/workspace", 3, names_cb, &n), 0);
		ck_assert_msg(strstr(n.text, "/workspace/top\n") && strstr(n.text, "/workspace/keep/f\n") &&
				      strstr(n.text, "/workspace/keep-link\n") && !strstr(n.text, "/workspace/top/") &&
				      !strstr(n.text, "/workspace/run/") && !strstr(n.text, "/workspace/keep-link/"),
			      "listing as %s: %.1500s", who[u], n.text);
		ck_assert_int_eq(hangar_sandbox_stat(b.sb[u], "/workspace/run", owner_cb, entry), 0);
	}
	host_socket_state(&b, host_after, sizeof(host_after));
	ck_assert_str_eq(host_after, host_before);
	sh(b.sb[0], "root", "ls /workspace/moved 2>&1; true", &o);
	ck_assert_msg(strstr(o.text, "No such file"), "%s", o.text);
	/* Removing a link to a directory, as either user, leaves the directory whole. */
	ck_assert_int_eq(hangar_sandbox_remove(b.sb[1], "/workspace/keep-link"), 0);
	ck_assert_int_eq(hangar_sandbox_remove(b.sb[0], "/workspace/keep-link2"), 0);
	expect(b.sb[0], "user", "cat /workspace/keep/f", "kept");
	expect(b.sb[0], "user", "ls /workspace | tr '\\n' ' '", "keep run top ");
	envd_still_serves(&b);
	box_close(&b);
}
END_TEST

static Suite *files_suite(void)
{
	Suite *s = suite_create("local-isolation-files");
	TCase *tc = tcase_create("files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, special_files_refused, 0, 3);
	tcase_add_loop_test(tc, proc_never_served, 0, 3);
	tcase_add_loop_test(tc, uploads_never_through_links, 0, 2);
	tcase_add_loop_test(tc, uploads_keep_owners, 0, 2);
	tcase_add_loop_test(tc, files_as_the_requesting_user, 0, 2);
	tcase_add_loop_test(tc, directory_links_out_of_reach, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(files_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
