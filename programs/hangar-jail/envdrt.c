/*
 * hangar-envd's own runtime, for a sandbox whose root is an image: the
 * host's dynamic loader and every library hangar-envd or its checkpoint
 * worker (hangar-envd-archive, beside it) needs, which the image may not
 * have (a musl image, a static busybox root with no libc).
 *
 * Found once per jail, on the host, before the sandbox exists: the loader
 * is the program interpreter hangar-envd's ELF header names, the libraries
 * what that loader resolves for both programs (`LOADER --list ENVD`, then
 * `LOADER --list WORKER`, each run with an empty environment), each by the
 * name their objects ask for, once. Nothing is ever read from inside the
 * sandbox. add_envd (bwrap.c) and the stage bind them read-only under
 * /run/hangar/lib, and start hangar-envd through the loader with that
 * directory as its only library path; hangar-envd starts its workers
 * through the same loader and directory.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail.h"

#define LIST_MAX (64 * 1024)  /* the loader's --list output: a few dozen lines */
#define LIST_TIMEOUT_MS 10000

static struct envd_runtime runtime;
static int resolved; /* 1: runtime holds the answer for envd_path */
static char envd_path[PATH_MAX];

/* The program interpreter (PT_INTERP) of the ELF file at path, into out. 0, or -1 said. */
static int read_interp(const char *path, char *out, size_t outsz)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = -1;

	if (fd < 0) {
		say("cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
		say("%s is not a 64-bit ELF program", path);
		close(fd);
		return -1;
	}
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * sizeof(ph))) != (ssize_t)sizeof(ph))
			break;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > outsz ||
		    pread(fd, out, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz ||
		    out[ph.p_filesz - 1] != '\0' || out[0] != '/' || strlen(out) != ph.p_filesz - 1)
			break;
		r = 0;
		break;
	}
	close(fd);
	if (r < 0)
		say("%s names no program interpreter: it cannot run through a loader of its own", path);
	return r;
}

/*
 * The loader's --list output for the program envd, at most LIST_MAX bytes,
 * into a malloc'd string. NULL said.
 */
static char *list_needed(const char *loader, const char *envd)
{
	char *const argv[] = { (char *)loader, "--list", (char *)envd, NULL };
	char *const envp[] = { NULL };
	char *buf = malloc(LIST_MAX + 1);
	size_t n = 0;
	int p[2], status = 0, timed_out = 0;
	pid_t pid;

	if (!buf || pipe2(p, O_CLOEXEC) < 0) {
		say("cannot list %s's libraries: %s", envd, strerror(errno));
		free(buf);
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		execve(loader, argv, envp);
		_exit(127);
	}
	close(p[1]);
	while (pid > 0 && n < LIST_MAX) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		ssize_t r;

		if (poll(&pfd, 1, LIST_TIMEOUT_MS) == 0) {
			timed_out = 1;
			break;
		}
		r = read(p[0], buf + n, LIST_MAX - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(p[0]);
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	buf[n] = '\0';
	if (pid < 0 || timed_out || n >= LIST_MAX || (!WIFEXITED(status) && !WIFSIGNALED(status)) ||
	    (WIFEXITED(status) && WEXITSTATUS(status) != 0) || (WIFSIGNALED(status) && n == 0)) {
		say("%s --list %s failed%s", loader, envd, timed_out ? ": no answer" : "");
		free(buf);
		return NULL;
	}
	return buf;
}

/* A name fit to be a file of /run/hangar/lib. */
static int plain_name(const char *name, size_t len)
{
	return len > 0 && len < sizeof(runtime.libs[0].name) && !memchr(name, '/', len) &&
	       !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

/*
 * One line of --list: "NAME => PATH (ADDR)" is a library; the vDSO and the
 * loader itself are not. A name already listed (both programs need libc) is
 * kept once. 0, or -1 said.
 */
static int add_line(char *line)
{
	char *arrow = strstr(line, " => "), *path, *end;
	size_t len;

	while (*line == '\t' || *line == ' ')
		line++;
	if (!*line)
		return 0;
	if (!arrow)
		return 0; /* the vDSO, or the loader by its own path */
	len = (size_t)(arrow - line);
	path = arrow + 4;
	end = strstr(path, " (");
	if (end)
		*end = '\0';
	if (path[0] != '/' || !plain_name(line, len) || strlen(path) >= sizeof(runtime.libs[0].path)) {
		say("hangar-envd needs %.*s, which the host's loader cannot find (%s)", (int)len, line, path);
		return -1;
	}
	for (size_t i = 0; i < runtime.n; i++)
		if (strlen(runtime.libs[i].name) == len && memcmp(runtime.libs[i].name, line, len) == 0)
			return 0;
	if (runtime.n == ENVD_RUNTIME_MAX) {
		say("hangar-envd and its worker need more than %d libraries", ENVD_RUNTIME_MAX);
		return -1;
	}
	memcpy(runtime.libs[runtime.n].name, line, len);
	runtime.libs[runtime.n].name[len] = '\0';
	snprintf(runtime.libs[runtime.n].path, sizeof(runtime.libs[0].path), "%s", path);
	runtime.n++;
	return 0;
}

int envd_beside_path(const char *envd, const char *name, char *out, size_t outsz)
{
	const char *slash = strrchr(envd, '/');
	struct stat st;
	int n;

	if (!slash)
		return -1;
	n = snprintf(out, outsz, "%.*s/%s", (int)(slash - envd), envd, name);
	if (n < 0 || (size_t)n >= outsz || stat(out, &st) < 0 || !S_ISREG(st.st_mode))
		return -1;
	return 0;
}

/* The libraries the program at path needs, added to runtime. 0, or -1 said. */
static int add_program(const char *path)
{
	char *list = list_needed(runtime.loader, path), *line, *save = NULL;

	if (!list)
		return -1;
	for (line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (add_line(line) < 0) {
			free(list);
			return -1;
		}
	free(list);
	return 0;
}

const struct envd_runtime *envd_runtime_find(const char *envd)
{
	char worker[PATH_MAX], interp[PATH_MAX];
	const char *base;

	if (resolved && strcmp(envd, envd_path) == 0)
		return &runtime;
	memset(&runtime, 0, sizeof(runtime));
	resolved = 0;
	if (strlen(envd) >= sizeof(envd_path) || read_interp(envd, runtime.loader, sizeof(runtime.loader)) < 0)
		return NULL;
	base = strrchr(runtime.loader, '/') + 1;
	if (!plain_name(base, strlen(base)) || strlen(base) >= sizeof(runtime.loader_name)) {
		say("hangar-envd's loader %s has no usable name", runtime.loader);
		return NULL;
	}
	memcpy(runtime.loader_name, base, strlen(base) + 1);
	if (add_program(envd) < 0) {
		runtime.n = 0;
		return NULL;
	}
	/*
	 * The checkpoint worker runs through the same loader and directory. A
	 * worker missing, built for another loader or needing what the host
	 * lacks is left out and the sandbox starts anyway: its checkpoint
	 * requests then fail, and nothing else does.
	 */
	if (envd_beside_path(envd, ENVD_WORKER_NAME, worker, sizeof(worker)) == 0) {
		size_t envd_n = runtime.n;

		if (read_interp(worker, interp, sizeof(interp)) < 0 || strcmp(interp, runtime.loader) != 0 ||
		    add_program(worker) < 0) {
			say("%s cannot run through %s: sandboxes have no checkpoints", worker, runtime.loader);
			runtime.n = envd_n;
		}
	}
	snprintf(envd_path, sizeof(envd_path), "%s", envd);
	resolved = 1;
	return &runtime;
}
