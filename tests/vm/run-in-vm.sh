#!/usr/bin/env bash
# Runs a command as root in a virtual machine whose only cgroup hierarchy is
# v2, with this environment and working directory, and exits with the
# command's status.
#
#   run-in-vm.sh CMD [ARG...]
#
# The machines hangar is tested on have their memory, pids and cpu
# controllers on cgroup v1, so the jail's cgroup v2 code would otherwise
# meet only a fake directory. The guest boots Debian's kernel with v1
# switched off (cgroup_no_v1=all) and sees this machine's / read-only over
# 9p under a tmpfs overlay: the command, its build tree and what it uses
# (bwrap, slirp4netns, python3, the `user` account, /etc/subuid) are this
# machine's, and nothing it writes reaches this machine. The guest's
# console is this script's output; tests/vm/init is the guest's side.
#
# Exits 77 (skipped) when the guest cannot be had: no qemu-system-x86_64
# (Debian's qemu-system-x86), no busybox-static, no kernel package.
#
# Settings: HANGAR_VM_CACHE, where the kernel is kept once unpacked
# (/var/cache/hangar-vm for root, else ~/.cache/hangar-vm); HANGAR_VM_TIMEOUT,
# seconds the guest may run (240); HANGAR_VM_ACCEL, auto, kvm or tcg (below);
# HANGAR_VM_MEMORY_MB (2048); HANGAR_VM_APPEND, more kernel arguments.
set -euo pipefail

here=$(dirname "$(readlink -f "$0")")
if [ "$(id -u)" = 0 ]; then
	cache=${HANGAR_VM_CACHE:-/var/cache/hangar-vm}
else
	cache=${HANGAR_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hangar-vm}
fi
deadline=${HANGAR_VM_TIMEOUT:-240}
busybox=/bin/busybox

say() { printf 'run-in-vm: %s\n' "$*"; }
skip() {
	say "skipped: $*"
	exit 77
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }

[ $# -gt 0 ] || { say "usage: run-in-vm.sh CMD [ARG...]"; exit 2; }
command -v qemu-system-x86_64 >/dev/null || skip "no qemu-system-x86_64 (Debian's qemu-system-x86)"
# The initramfs has no libraries for a dynamic busybox to load.
installed busybox-static || skip "no static busybox (Debian's busybox-static)"

# KVM when it can run Debian's kernel, else qemu's own emulation (TCG):
# slower, the same guest. Some hosts' /dev/kvm is PVM (module kvm_pvm, a
# hypervisor without hardware virtualisation, as on the machines CI runs
# on), which runs only kernels built as PVM guests: Debian's is stopped by
# the first instruction PVM cannot emulate ("KVM internal error").
accel=${HANGAR_VM_ACCEL:-auto}
if [ "$accel" = auto ]; then
	accel=tcg
	if [ -r /dev/kvm ] && [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] &&
		echo quit | timeout 20 qemu-system-x86_64 -accel kvm -machine none -nodefaults -display none \
			-monitor stdio >/dev/null 2>&1; then
		accel=kvm
	fi
fi
case "$accel" in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel "tcg,thread=multi" -cpu max) ;;
*) say "HANGAR_VM_ACCEL must be auto, kvm or tcg, not $accel"; exit 2 ;;
esac

# add_module TREE DEST NAME: copies NAME's dependencies (its modinfo's
# depends=), then NAME, into DEST, numbered in load order.
add_module() {
	local tree=$1 dest=$2 name=$3 ko dep n
	ls "$dest"/*-"$name.ko" >/dev/null 2>&1 && return 0
	grep -q "/${name//_/[-_]}\.ko\$" "$tree"/*/modules.builtin && return 0
	ko=$(find "$tree" -name "$name.ko" -o -name "${name//_/-}.ko" | head -n 1)
	[ -n "$ko" ] || { say "no module $name in the kernel package"; return 1; }
	for dep in $(LC_ALL=C grep -ao 'depends=[A-Za-z0-9_,-]*' "$ko" | cut -d= -f2 | tr , ' '); do
		add_module "$tree" "$dest" "$dep" || return 1
	done
	n=$(find "$dest" -name '*.ko' | wc -l)
	cp "$ko" "$dest/$(printf %02d $((n + 1)))-$name.ko"
}

kernel_package() { apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" { print $2; exit }'; }

# Debian's kernel (the package linux-image-amd64 depends on), unpacked and
# not installed, which would run initramfs and boot loader hooks here. Kept:
# the kernel, and the modules for 9p, overlayfs and tun with what they need.
fetch_kernel() { # fetch_kernel DIR
	local dir=$1 pkg tmp
	pkg=$(kernel_package)
	# Package lists missing or stale: refreshed once, when we may.
	if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
		apt-get update -qq || true
		pkg=$(kernel_package)
	fi
	[ -n "$pkg" ] || return 1
	tmp=$(mktemp -d "$cache/fetch.XXXXXX")
	if ! (cd "$tmp" && apt-get download -qq "$pkg" 2>&1); then
		[ "$(id -u)" = 0 ] && apt-get update -qq
		(cd "$tmp" && apt-get download -qq "$pkg" 2>&1) || { rm -rf "$tmp"; return 1; }
	fi
	dpkg-deb -x "$tmp"/*.deb "$tmp/deb"
	mkdir -p "$tmp/kernel/modules"
	cp "$tmp"/deb/boot/vmlinuz-* "$tmp/kernel/vmlinuz"
	for m in virtio_pci 9pnet_virtio 9p overlay tun; do
		add_module "$tmp/deb/lib/modules" "$tmp/kernel/modules" "$m" || { rm -rf "$tmp"; return 1; }
	done
	rm -rf "$dir"
	mv "$tmp/kernel" "$dir"
	rm -rf "$tmp"
	say "$pkg unpacked in $dir"
}

kernel=$cache/kernel
if [ ! -f "$kernel/vmlinuz" ]; then
	mkdir -p "$cache" || skip "cannot make $cache (HANGAR_VM_CACHE)"
	say "fetching Debian's kernel into $cache"
	fetch_kernel "$kernel" || skip "cannot download Debian's kernel (linux-image-amd64)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/hangar-vm.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/initramfs/bin" "$work/shared"
cp "$busybox" "$work/initramfs/bin/busybox"
cp "$here/init" "$work/initramfs/init"
cp -r "$kernel/modules" "$work/initramfs/modules"
(cd "$work/initramfs" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initramfs.gz"

# The guest's second stage runs from the shared directory, and the command,
# with this environment and working directory, is a script there.
cp "$busybox" "$here/init" "$work/shared/"
echo "$deadline" >"$work/shared/deadline"
{
	export -p
	printf 'cd %q || exit 1\nexec' "$PWD"
	printf ' %q' "$@"
	printf '\n'
} >"$work/shared/cmd"

say "booting the guest with $accel (deadline ${deadline}s)"
start=$(date +%s)
rc=0
timeout -k 10 "$deadline" qemu-system-x86_64 "${accel_args[@]}" -smp 2 -m "${HANGAR_VM_MEMORY_MB:-2048}" \
	-nodefaults -no-user-config -no-reboot -display none -monitor none -serial stdio \
	-kernel "$kernel/vmlinuz" -initrd "$work/initramfs.gz" \
	-append "console=ttyS0 quiet panic=-1 cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1 ${HANGAR_VM_APPEND:-}" \
	-virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$work/shared,mount_tag=out,security_model=none,multidevs=remap" \
	</dev/null || rc=$?
say "the guest ran $(($(date +%s) - start))s"
case "$rc" in
0) ;;
124 | 137) say "the guest did not power off within ${deadline}s (HANGAR_VM_TIMEOUT)"; exit 1 ;;
*) say "qemu failed: exit $rc"; exit 1 ;;
esac
[ -s "$work/shared/status" ] || { say "the guest reported no exit status"; exit 1; }
status=$(cat "$work/shared/status")
if [ "$status" != 0 ] && [ -s "$work/shared/dmesg" ]; then
	say "the command failed (exit $status); the end of the guest's kernel log:"
	tail -n 60 "$work/shared/dmesg"
fi
exit "$status"
