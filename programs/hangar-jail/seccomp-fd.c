/* The sandbox's seccomp filter, as seccomp-gen compiled it at build time (seccomp.c says what it denies). */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "jail.h"
#include "seccomp-filter.h"

int seccomp_filter_fd(void)
{
	int fd = memfd_create("hangar-seccomp", MFD_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, seccomp_program, sizeof(seccomp_program));
	if (n != (ssize_t)sizeof(seccomp_program) || lseek(fd, 0, SEEK_SET) < 0) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}
