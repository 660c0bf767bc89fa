/*
 * Run at build time: writes seccomp.c's filter, compiled, to standard output
 * as a C header holding the program's bytes (seccomp-filter.h), which the
 * jail hands to bwrap (seccomp-fd.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "seccomp-rules.h"

int main(void)
{
	int fd = memfd_create("seccomp-gen", MFD_CLOEXEC), r;
	unsigned char buf[4096];
	size_t total = 0;
	ssize_t n;

	if (fd < 0 || (r = seccomp_compile(fd)) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		fprintf(stderr, "seccomp-gen: cannot compile the filter: %s\n",
			strerror(fd < 0 ? errno : r < 0 ? -r : errno));
		return 1;
	}
	printf("/* Made by seccomp-gen at build time: seccomp.c's filter, compiled for this architecture. */\n"
	       "static const unsigned char seccomp_program[] = {");
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++, total++)
			printf("%s0x%02x,", total % 12 ? " " : "\n\t", buf[i]);
	printf("\n};\n");
	/* A classic BPF program is whole instructions of 8 bytes each. */
	if (n < 0 || total == 0 || total % 8 || fflush(stdout) != 0) {
		fprintf(stderr, "seccomp-gen: the compiled filter is unusable (%zu bytes)\n", total);
		return 1;
	}
	return 0;
}
