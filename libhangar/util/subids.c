#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
