#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "subids.h"

int subids_parse(const char *s, unsigned min, unsigned *start, unsigned *count)
{
	char *end;
	unsigned long long a, b;

	errno = 0;
	a = strtoull(s, &end, 10);
	if (errno || end == s || *end != ':')
		return -1;
	s = end + 1;
	b = strtoull(s, &end, 10);
	if (errno || end == s || (*end && *end != '\n'))
		return -1;
	/* Never host root, never above the 32-bit "no uid" value. */
	if (a == 0 || b < min || a + b > 0xffffffffULL)
		return -1;
	*start = (unsigned)a;
	*count = (unsigned)b;
	return 0;
}

int subids_own(const char *file, unsigned min, unsigned *start, unsigned *count)
{
	struct passwd *pw = getpwuid(geteuid());
	char line[512], uid[32];
	FILE *f = fopen(file, "re");
	int found = -1;

	if (!f)
		return -1;
	snprintf(uid, sizeof(uid), "%u", (unsigned)geteuid());
	while (found < 0 && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if ((pw && !strcmp(line, pw->pw_name)) || !strcmp(line, uid))
			found = subids_parse(colon + 1, min, start, count);
	}
	fclose(f);
	return found;
}

int subids_image_range(unsigned us, unsigned uc, unsigned gs, unsigned gc, unsigned *uid, unsigned *gid)
{
	unsigned slots = (uc < gc ? uc : gc) / SUBIDS_SLOT;

	if (slots < 2)
		return -1;
	*uid = us + (slots - 1) * SUBIDS_SLOT;
	*gid = gs + (slots - 1) * SUBIDS_SLOT;
	return 0;
}

int subids_caller_image_range(unsigned *uid, unsigned *gid)
{
	unsigned us, uc, gs, gc;

	if (geteuid() == 0 || access(SUBIDS_NEWUIDMAP, X_OK) < 0 || access(SUBIDS_NEWGIDMAP, X_OK) < 0 ||
	    subids_own("/etc/subuid", SUBIDS_MIN, &us, &uc) < 0 || subids_own("/etc/subgid", SUBIDS_MIN, &gs, &gc) < 0)
		return -1;
	return subids_image_range(us, uc, gs, gc, uid, gid);
}

int subids_map(const char *tool, pid_t pid, const struct subids_line *lines, size_t n)
{
	char text[1 + 4 * 3][16];
	char *argv[2 + 4 * 3 + 1];
	size_t a = 0;
	int status;
	pid_t p;

	if (n > 4)
		return -1;
	argv[a++] = (char *)tool;
	snprintf(text[0], sizeof(text[0]), "%d", (int)pid);
	argv[a++] = text[0];
	for (size_t i = 0; i < n; i++) {
		unsigned v[3] = { lines[i].inside, lines[i].outside, lines[i].count };

		for (size_t k = 0; k < 3; k++) {
			snprintf(text[1 + 3 * i + k], sizeof(text[0]), "%u", v[k]);
			argv[a++] = text[1 + 3 * i + k];
		}
	}
	argv[a] = NULL;
	p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* Its complaints go to no one's terminal; the caller reports the failure. */
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(tool, argv);
		_exit(127);
	}
	while (waitpid(p, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}
