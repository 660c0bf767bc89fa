/* Buffers, version and directories. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

void hangar_buf_dispose(hangar_buf *buf)
{
	if (!buf)
		return;
	free(buf->ptr);
	buf->ptr = NULL;
	buf->size = 0;
	buf->reserved = 0;
}

const char *hangar_version(void)
{
	return HANGAR_VERSION_STRING;
}

uint32_t hangar_version_number(void)
{
	return HANGAR_VERSION_NUMBER;
}

int hmkdirs(const char *dir, const char *setting)
{
	char tmp[PATH_MAX];
	size_t len = strlen(dir);

	if (len >= sizeof(tmp))
		return herr(HANGAR_ECONFIG, HANGAR_ERRCAT_CONFIG, "%s is too long", setting);
	memcpy(tmp, dir, len + 1);
	for (char *p = tmp + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
			return herr_os(HANGAR_EOS, errno, "cannot create %s (%s)", tmp, setting);
		*p = c;
		if (!c)
			break;
	}
	return 0;
}
