/*
 * hangar-envd's own runtime: what it loads, and where its checkpoint worker
 * (hangar-envd-archive, ckpt.c) starts from.
 *
 * In a sandbox whose root is an image, the image's /lib may be musl's, or
 * there may be no libc at all, so hangar-envd brings the host's dynamic
 * loader and libraries along (hangar-jail binds them under /run/hangar/lib)
 * and is started through that loader (-loader). Nothing of it reaches the
 * commands: they are executed by path in the image, with the image's
 * loader, and no LD_* variable is set anywhere (the loader's library path
 * is a command-line option of the loader, not the environment).
 *
 * Two things in the image could still put code into this process:
 *  - the Name Service Switch, which loads libnss_NAME for every NAME
 *    /etc/nsswitch.conf names, searching the image's /lib among other
 *    places. hangar-envd and its worker ask for the files backend of every
 *    database before anything looks a name up (envd_runtime_lock_nss in
 *    nss.c), which glibc has built in: no module is loaded, whatever
 *    nsswitch.conf says.
 *  - /etc/ld.so.preload and /etc/ld.so.cache, read by the loader before
 *    main(): the jail hides the image's preload list from it and the
 *    loader is started with --inhibit-cache (see hangar-jail's add_envd).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envd.h"

/* O_PATH descriptors, opened at start-up: the loader and its library directory. */
static int loader_fd = -1, libdir_fd = -1;
/* hangar-envd's program as the loader mapped it: its checkpoint worker is beside it (ckpt.c). */
static char program_path[PATH_MAX];

/*
 * The file this code was mapped from, as the kernel says (/proc/self/maps):
 * under a loader started by hand, /proc/self/exe is the loader, not
 * hangar-envd. 0, or -1 with errno.
 */
static int own_program(char *out, size_t outsz)
{
	uintptr_t here = (uintptr_t)&own_program;
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	int found = -1;

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f)) {
		uintptr_t lo, hi;
		int at = 0;

		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %*s %*s %*s %n", &lo, &hi, &at) < 2 || at == 0 ||
		    here < lo || here >= hi || line[at] != '/')
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (strlen(line + at) >= outsz)
			break;
		snprintf(out, outsz, "%s", line + at);
		found = 0;
	}
	fclose(f);
	if (found < 0)
		errno = ENOENT;
	return found;
}

int envd_runtime_init(const char *loader)
{
	char dir[PATH_MAX];
	struct stat st;
	char *slash;

	if (!loader)
		return 0;
	if (loader[0] != '/' || strlen(loader) >= sizeof(dir)) {
		fprintf(stderr, "hangar-envd: -loader %s is not an absolute path\n", loader);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", loader);
	slash = strrchr(dir, '/');
	*(slash == dir ? slash + 1 : slash) = '\0';
	loader_fd = open(loader, O_PATH | O_CLOEXEC);
	libdir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (loader_fd < 0 || libdir_fd < 0 || fstat(loader_fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "hangar-envd: -loader %s: %s\n", loader,
			loader_fd >= 0 && libdir_fd >= 0 ? "not a regular file" : strerror(errno));
		return -1;
	}
	if (own_program(program_path, sizeof(program_path)) < 0) {
		fprintf(stderr, "hangar-envd: cannot find its own program under -loader: %s\n", strerror(errno));
		return -1;
	}
	envd_cfg.loader = loader;
	/* Its name is the loader's: give it its own, as ps, pgrep and an operator know it. */
	prctl(PR_SET_NAME, "hangar-envd", 0, 0, 0);
	return 0;
}

int envd_runtime_fds(int *loader, int *libdir)
{
	*loader = loader_fd;
	*libdir = libdir_fd;
	return loader_fd >= 0 ? 1 : 0;
}

const char *envd_runtime_program(void)
{
	return loader_fd >= 0 ? program_path : NULL;
}
