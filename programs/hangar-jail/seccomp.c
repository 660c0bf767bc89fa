/*
 * The seccomp filter every local sandbox runs under (bwrap loads it just
 * before it runs hangar-envd, so envd and every command inherit it),
 * compiled with libseccomp at build time by seccomp-gen.c: libseccomp took
 * about 1 ms of every create to compile the same filter again, and the jail
 * no longer loads it (seccomp-fd.c hands bwrap the program).
 *
 * The sandbox already has no capability in the host's user namespace; the
 * filter narrows the kernel surface further, as container runtimes do. It
 * allows everything but the calls below, which fail with EPERM (ENOSYS for
 * clone3, so that libc falls back to clone, whose flags a filter can see):
 *   - file handles: open_by_handle_at, name_to_handle_at
 *   - kernel code and tracing: kexec_load, kexec_file_load, init_module,
 *     finit_module, delete_module, bpf, perf_event_open, lookup_dcookie
 *   - the kernel keyring: keyctl, add_key, request_key (keyrings are never
 *     shared with the host or other sandboxes)
 *   - mounts and namespaces: mount, umount2, pivot_root, move_mount,
 *     open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr,
 *     unshare and clone with CLONE_NEWUSER (no nested user namespaces), setns
 *     but into a user namespace (how envd's children enter the commands'
 *     namespace the jail made; entering one needs CAP_SYS_ADMIN over it,
 *     which nothing below envd has over any namespace but its own)
 *   - the host's clock, swap, reboot, accounting, quotas, kernel log:
 *     settimeofday, clock_settime, clock_adjtime, adjtimex, swapon, swapoff,
 *     reboot, acct, quotactl, syslog, vhangup
 *   - io_uring_setup (its operations bypass this filter), userfaultfd,
 *     ioperm, iopl, uselib, nfsservctl
 *   - ioctl TIOCSTI and TIOCLINUX (typing into a terminal)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "seccomp-rules.h"

static const char *const denied[] = {
	"open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
	"perf_event_open", "lookup_dcookie",
	"keyctl", "add_key", "request_key",
	"mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
	"fspick", "mount_setattr",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapon", "swapoff", "reboot", "acct",
	"quotactl", "quotactl_fd", "syslog", "vhangup",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "ioperm", "iopl", "uselib",
	"nfsservctl",
};

int seccomp_compile(int fd)
{
	scmp_filter_ctx c = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;

	if (!c) {
		errno = ENOMEM;
		return -1;
	}
	/* 32-bit calls on a 64-bit kernel go through the same filter (x86: i386 and x32). */
	if (seccomp_arch_native() == SCMP_ARCH_X86_64) {
		seccomp_arch_add(c, SCMP_ARCH_X86);
		seccomp_arch_add(c, SCMP_ARCH_X32);
	} else if (seccomp_arch_native() == SCMP_ARCH_AARCH64) {
		seccomp_arch_add(c, SCMP_ARCH_ARM);
	}
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]) && r == 0; i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a call on this architecture */
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(setns), 1,
				     SCMP_A1(SCMP_CMP_NE, (scmp_datum_t)CLONE_NEWUSER));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
	if (r == 0)
		r = seccomp_rule_add(c, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
	if (r == 0)
		r = seccomp_export_bpf(c, fd);
	seccomp_release(c);
	return r;
}
