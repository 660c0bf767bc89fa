/*
 * ckpt-bench: checkpoint capture and restore on the local provider, against
 * the shell pipelines that do the same work with no sealing and no store.
 *
 * In one sandbox it builds a git repository of generated source (a few
 * commits, then uncommitted edits and untracked files), takes a checkpoint
 * before and after adding ignored dependencies (node_modules/, .venv/), and
 * restores it into a second sandbox; it times, in the same sandbox and the
 * same run:
 *   capture   hangar_checkpoint_create (hangar-envd's endpoint, then the
 *             fallback through the sandbox's tools)
 *   baseline  { git ls-files -z --cached --others --exclude-standard;
 *               find .git -print0; } | tar --null -T - -c | zstd -1
 *   restore   hangar_checkpoint_restore into a fresh sandbox
 *   baseline  zstd -d | tar -x
 * and prints the ratios, the stored size, and the benchmark's peak memory.
 *   ckpt-bench [--quick] [--src-mib N] [--deps-mib N] [--runs N]
 * Needs root (local jails), bubblewrap, git, GNU tar and zstd on the host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <hangar/hangar.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "stats.h"

static hangar_ctx *g_ctx;
static char g_state[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void die(const char *what)
{
	const hangar_error *e = hangar_error_last();

	fprintf(stderr, "ckpt-bench: %s: %s\n", what, e && e->message ? e->message : "failed");
	exit(1);
}

/* Runs a shell command in sb; its standard output (trimmed) into out. Exits on failure. */
static void run(hangar_sandbox *sb, const char *cmd, char *out, size_t size)
{
	hangar_exec_opts o = HANGAR_EXEC_OPTS_INIT;
	hangar_exec_result r = HANGAR_EXEC_RESULT_INIT;

	o.timeout_sec = 1800;
	if (hangar_sandbox_exec(&r, sb, cmd, &o) != 0)
		die("exec");
	if (r.exit_code != 0) {
		fprintf(stderr, "ckpt-bench: `%.200s` exited %d: %.*s\n", cmd, (int)r.exit_code,
			(int)(r.err.size > 2000 ? 2000 : r.err.size), r.err.ptr);
		exit(1);
	}
	if (out) {
		size_t n = r.out.size < size - 1 ? r.out.size : size - 1;

		memcpy(out, r.out.ptr ? r.out.ptr : "", n);
		while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
			n--;
		out[n] = '\0';
	}
	hangar_exec_result_dispose(&r);
}

/* Milliseconds a shell command takes inside sb, measured in the sandbox. */
static double timed(hangar_sandbox *sb, const char *cmd)
{
	char buf[4096], out[64];

	snprintf(buf, sizeof(buf), "t0=$(date +%%s%%N); ( %s ) >/dev/null; t1=$(date +%%s%%N); echo $(( (t1 - t0) / 1000 ))",
		 cmd);
	run(sb, buf, out, sizeof(out));
	return strtod(out, NULL) / 1000.0;
}

static hangar_sandbox *make_sandbox(void)
{
	hangar_create_opts o = HANGAR_CREATE_OPTS_INIT;
	hangar_sandbox *sb;

	o.provider = "local";
	o.timeout_sec = 3600;
	if (hangar_sandbox_create(&sb, g_ctx, &o) != 0)
		die("create a sandbox");
	return sb;
}

/* Generates the repository: src_mib of text over `commits` commits, then edits. */
static void make_repo(hangar_sandbox *sb, unsigned src_mib)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd /workspace; git init -q; git config user.email bench@example.org; "
		 "git config user.name bench; printf 'node_modules/\\n.venv/\\nbuild/\\n' > .gitignore; "
		 "python3 - <<'EOF'\n"
		 "import os, random\n"
		 "random.seed(7)\n"
		 "words = ['int', 'return', 'static', 'struct', 'const', 'char', 'if', 'else', 'for', 'while',\n"
		 "         'buffer', 'length', 'error', 'result', 'sandbox', 'value', 'index', 'count', '{', '}',\n"
		 "         '(', ')', ';', '=', '+', '->', 'NULL', '0', '1', 'size_t', 'void', 'goto', 'out']\n"
		 "total = %u << 20\n"
		 "per = 48 << 10\n"
		 "n = total // per\n"
		 "for i in range(n):\n"
		 "    d = 'src/m%%03d' %% (i // 100)\n"
		 "    os.makedirs(d, exist_ok=True)\n"
		 "    lines = []\n"
		 "    size = 0\n"
		 "    while size < per:\n"
		 "        ln = ' '.join(random.choice(words) for _ in range(random.randint(4, 14))) + '\\n'\n"
		 "        lines.append(ln)\n"
		 "        size += len(ln)\n"
		 "    open('%%s/f%%05d.c' %% (d, i), 'w').write(''.join(lines))\n"
		 "EOF\n"
		 "git add -A; git commit -qm one; "
		 "for f in $(git ls-files 'src/*' | awk 'NR %% 7 == 0'); do echo '/* two */' >> $f; done; "
		 "git commit -qam two; "
		 "for f in $(git ls-files 'src/*' | awk 'NR %% 11 == 0'); do echo '/* three */' >> $f; done; "
		 "git commit -qam three; "
		 "for f in $(git ls-files 'src/*' | awk 'NR %% 13 == 0'); do echo '/* uncommitted */' >> $f; done; "
		 "mkdir -p notes; echo untracked > notes/todo.txt",
		 src_mib);
	run(sb, cmd, NULL, 0);
}

/* Adds deps_mib of ignored files: node_modules (many small) and .venv (a few large). */
static void make_deps(hangar_sandbox *sb, unsigned deps_mib)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "set -e; cd /workspace; python3 - <<'EOF'\n"
		 "import os\n"
		 "total = %u << 20\n"
		 "small = total // 2\n"
		 "i = 0\n"
		 "while small > 0:\n"
		 "    d = 'node_modules/p%%04d' %% (i // 50)\n"
		 "    os.makedirs(d, exist_ok=True)\n"
		 "    open('%%s/m%%05d.js' %% (d, i), 'wb').write(os.urandom(64 << 10))\n"
		 "    small -= 64 << 10\n"
		 "    i += 1\n"
		 "os.makedirs('.venv/lib', exist_ok=True)\n"
		 "big = total - total // 2\n"
		 "j = 0\n"
		 "while big > 0:\n"
		 "    open('.venv/lib/w%%03d.so' %% j, 'wb').write(os.urandom(8 << 20))\n"
		 "    big -= 8 << 20\n"
		 "    j += 1\n"
		 "EOF",
		 deps_mib);
	run(sb, cmd, NULL, 0);
}

static hangar_checkpoint *capture(hangar_sandbox *sb, uint32_t flags, double *ms)
{
	hangar_checkpoint_opts o = HANGAR_CHECKPOINT_OPTS_INIT;
	hangar_checkpoint *cp;
	double t0 = now_ms();

	o.flags = flags;
	o.session_id = "bench-session";
	if (hangar_checkpoint_create(&cp, sb, &o) != 0)
		die("hangar_checkpoint_create");
	*ms = now_ms() - t0;
	return cp;
}

static double restore(hangar_checkpoint *cp, uint32_t flags, char *digest, size_t size)
{
	hangar_restore_opts o = HANGAR_RESTORE_OPTS_INIT;
	hangar_sandbox *sb = make_sandbox();
	double t0, ms;

	o.flags = flags;
	t0 = now_ms();
	if (hangar_checkpoint_restore(sb, cp, &o) != 0)
		die("hangar_checkpoint_restore");
	ms = now_ms() - t0;
	run(sb, "cd /workspace && git status --porcelain | sort | sha256sum && "
		"git ls-files -z | xargs -0 sha256sum | sha256sum && git rev-list --count HEAD",
	    digest, size);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	return ms;
}

static double best(const double *v, size_t n)
{
	double b = v[0];

	for (size_t i = 1; i < n; i++)
		if (v[i] < b)
			b = v[i];
	return b;
}

static const char *base_capture =
	"cd /workspace && { git ls-files -z --cached --others --exclude-standard; find .git -print0; } | "
	"tar --null --no-recursion -T - -c -f - 2>/dev/null | zstd -1 -q -c > /tmp/base.tar.zst";
static const char *base_restore =
	"rm -rf /tmp/r && mkdir /tmp/r && zstd -d -q -c /tmp/base.tar.zst | tar -x -C /tmp/r";

int main(int argc, char **argv)
{
	unsigned src_mib = 100, deps_mib = 300, runs = 3;
	double cap_native[8], cap_fallback[8], cap_bare[8], base_cap[8], base_cap_bare[8];
	double res_native[8], res_fallback[8], base_res[8];
	char want[512], got[512], sizes[256];
	hangar_checkpoint_info info = HANGAR_CHECKPOINT_INFO_INIT;
	hangar_checkpoint *cp = NULL, *bare = NULL;
	hangar_sandbox *sb;
	struct rusage ru;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			src_mib = 10;
			deps_mib = 30;
			runs = 1;
		} else if (i + 1 < argc && !strcmp(argv[i], "--src-mib")) {
			src_mib = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (i + 1 < argc && !strcmp(argv[i], "--deps-mib")) {
			deps_mib = (unsigned)strtoul(argv[++i], NULL, 10);
		} else if (i + 1 < argc && !strcmp(argv[i], "--runs")) {
			runs = (unsigned)strtoul(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: ckpt-bench [--quick] [--src-mib N] [--deps-mib N] [--runs N]\n");
			return 2;
		}
	}
	if (!src_mib || runs == 0 || runs > 8) {
		fprintf(stderr, "ckpt-bench: --src-mib must be > 0 and --runs 1 to 8\n");
		return 2;
	}
	if (geteuid() != 0) {
		printf("ckpt-bench: needs root for local jails; skipped\n");
		return 77;
	}
	snprintf(g_state, sizeof(g_state), "/tmp/hangar-cbench-XXXXXX");
	if (!mkdtemp(g_state)) {
		perror("ckpt-bench: mkdtemp");
		return 1;
	}
	char disk[32];

	snprintf(disk, sizeof(disk), "%u", 2 * (src_mib * 3 + deps_mib) + 512);
	if (hangar_ctx_new(&g_ctx, 0) != 0 || hangar_ctx_set(g_ctx, "HANGAR_STATE_DIR", g_state) != 0 ||
	    hangar_ctx_set(g_ctx, "HANGAR_SECRET_KEY", "ckpt-bench key, not secret") != 0 ||
	    hangar_ctx_set(g_ctx, "HANGAR_LOCAL_DISK_MB", disk) != 0 ||
	    hangar_ctx_set(g_ctx, "HANGAR_LOCAL_MEMORY_MB", "8192") != 0)
		die("context");

	printf("ckpt-bench: libhangar %s; %u MiB of source in git (3 commits + edits), %u MiB ignored; "
	       "best of %u runs, ms\n", hangar_version(), src_mib, deps_mib, runs);
	fflush(stdout);
	sb = make_sandbox();
	make_repo(sb, src_mib);
	run(sb, "cd /workspace && du -sm --exclude=.git . | cut -f1; du -sm .git | cut -f1", sizes, sizeof(sizes));
	for (char *p = sizes; *p; p++)
		if (*p == '\n')
			*p = '/';
	printf("  tree (MiB, work tree/.git): %s\n", sizes);

	/* Without the ignored data first, so its effect shows. */
	for (unsigned r = 0; r < runs; r++) {
		hangar_checkpoint_unref(bare);
		bare = capture(sb, 0, &cap_bare[r]);
		base_cap_bare[r] = timed(sb, base_capture);
	}
	make_deps(sb, deps_mib);
	for (unsigned r = 0; r < runs; r++) {
		hangar_checkpoint_unref(cp);
		cp = capture(sb, HANGAR_CHECKPOINT_NO_NATIVE, &cap_fallback[r]);
		hangar_checkpoint_unref(cp);
		cp = capture(sb, 0, &cap_native[r]);
		base_cap[r] = timed(sb, base_capture);
		base_res[r] = timed(sb, base_restore);
	}
	run(sb, "cd /workspace && git status --porcelain | sort | sha256sum && "
		"git ls-files -z | xargs -0 sha256sum | sha256sum && git rev-list --count HEAD",
	    want, sizeof(want));
	for (unsigned r = 0; r < runs; r++) {
		res_native[r] = restore(cp, 0, got, sizeof(got));
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "ckpt-bench: the restored workspace differs:\n%s\nvs\n%s\n", got, want);
			return 1;
		}
		res_fallback[r] = restore(cp, HANGAR_RESTORE_NO_NATIVE, got, sizeof(got));
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "ckpt-bench: the workspace restored by the fallback differs\n");
			return 1;
		}
	}
	if (hangar_checkpoint_get_info(&info, cp) != 0)
		die("info");

	double bn = best(cap_native, runs), bf = best(cap_fallback, runs), bb = best(base_cap, runs);
	double bnb = best(cap_bare, runs), bbb = best(base_cap_bare, runs);
	double rn = best(res_native, runs), rf = best(res_fallback, runs), rb = best(base_res, runs);

	printf("  %-44s %9s %9s %7s\n", "", "hangar", "pipeline", "ratio");
	printf("  %-44s %9.0f %9.0f %6.2fx\n", "capture, no ignored data (native)", bnb, bbb, bnb / bbb);
	printf("  %-44s %9.0f %9.0f %6.2fx\n", "capture, with ignored data (native)", bn, bb, bn / bb);
	printf("  %-44s %9.0f %9.0f %6.2fx\n", "capture, with ignored data (fallback)", bf, bb, bf / bb);
	printf("  %-44s %9.0f %9.0f %6.2fx\n", "restore into a fresh sandbox (native)", rn, rb, rn / rb);
	printf("  %-44s %9.0f %9.0f %6.2fx\n", "restore into a fresh sandbox (fallback)", rf, rb, rf / rb);
	printf("  capture grows with ignored data by %.2fx (pipeline %.2fx)\n", bn / bnb, bb / bbb);
	printf("  stored %" PRIu64 " bytes sealed (archive %" PRIu64 "), %" PRIu64 " files; restores verified "
	       "(status, tracked file hashes, history)\n",
	       info.stored_bytes, info.archive_bytes, info.files);
	getrusage(RUSAGE_SELF, &ru);
	printf("  peak RSS of this process: %ld KiB\n", ru.ru_maxrss);

	hangar_checkpoint_unref(bare);
	hangar_checkpoint_unref(cp);
	hangar_sandbox_kill(sb);
	hangar_sandbox_unref(sb);
	hangar_ctx_unref(g_ctx);
	nftw(g_state, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
