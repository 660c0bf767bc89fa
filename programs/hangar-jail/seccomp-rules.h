/* The sandbox's seccomp filter (seccomp.c), for its build-time compiler (seccomp-gen.c). */
#pragma once

/*
 * Compiles the filter with libseccomp for this machine's architecture (and
 * its 32-bit ones) and writes it to fd as classic BPF, as bwrap --seccomp
 * reads it. 0, or a negative errno.
 */
int seccomp_compile(int fd);
