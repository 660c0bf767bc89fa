/* Buffers, version, directories and who this process is. */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- process identity --------------------------------------------------------- */

/* The first 8 hex digits of this boot's id, or "" when unknown. */
static void boot_id(char out[9])
{
	char buf[64] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t n = 0;

	if (f) {
		if (fgets(buf, sizeof(buf), f))
			for (const char *c = buf; *c && n < 8; c++)
				if ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f'))
					out[n++] = *c;
		fclose(f);
	}
	out[n] = '\0';
}

/* The inode of a pid namespace: the one of this process, or 0 when unknown. */
static uint64_t pidns_inode(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The start time of process pid (clock ticks after boot), or 0 when it does not run. */
static uint64_t start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long t = 0;
	const char *p;
	FILE *f;
	size_t n;
	int field;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold anything: count the fields after its last ')'. */
	if (!(p = strrchr(buf, ')')))
		return 0;
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &t) != 1)
		return 0;
	return t;
}

void hproc_identity(char *out, size_t size)
{
	unsigned char raw[4];
	char boot[9];

	boot_id(boot);
	randombytes_buf(raw, sizeof(raw));
	snprintf(out, size, "b%s.n%" PRIu64 ".p%ld.s%" PRIu64 ".%02x%02x%02x%02x", boot, pidns_inode(), (long)getpid(),
		 start_time(getpid()), raw[0], raw[1], raw[2], raw[3]);
}

int hproc_dead(const char *holder)
{
	char boot[9], their_boot[9] = "";
	unsigned long long ns = 0, start = 0;
	long pid = 0;

	if (!holder || sscanf(holder, "b%8[0-9a-f].n%llu.p%ld.s%llu.", their_boot, &ns, &pid, &start) != 4)
		return 0; /* not a name this code makes: only its lease's end tells */
	boot_id(boot);
	if (!boot[0] || strcmp(boot, their_boot) != 0 || ns == 0 || ns != pidns_inode() || pid <= 0 || start == 0)
		return 0; /* another machine, boot or pid namespace */
	return start_time((pid_t)pid) != start;
}
