#!/bin/sh
# Builds the OCI image layouts the image suites share, once: OUTDIR/<name>/ is
# an OCI image layout (tag "latest"), complete when OUTDIR/<name>.done exists.
# What is there and complete is kept; a half-made one is made again.
#
#   busybox   the static busybox of busybox-static, one layer: /bin/busybox
#             and every applet as a symbolic link to it (/bin/sh ...), an
#             /etc/passwd and /etc/group, and a few files the layered image
#             changes (/opt/data/*, /usr/share/doc/deleteme.txt)
#   debian    Debian bookworm, mmdebstrap --variant=minbase, one layer
#   layered   busybox + a layer deleting /usr/share/doc/deleteme.txt (a
#             whiteout, made by umoci unpack/repack) + a layer replacing
#             /opt/data by an opaque directory holding only new.txt
#
# Usage: make-images.sh [OUTDIR] [NAME...]   (OUTDIR default: build/test-images)
# Needs root (umoci unpack/repack keep ownership), busybox-static, umoci,
# mmdebstrap (debian only), and network access to a Debian mirror for debian.
set -eu

out=${1:-build/test-images}
[ $# -gt 0 ] && shift
names=${*:-busybox debian layered}
created=2024-01-01T00:00:00Z

mkdir -p "$out"
out=$(cd "$out" && pwd)
# Suites may run this at the same time: one builds, the others wait and find it done.
exec 9>"$out/.lock"
flock 9
work=$(mktemp -d "$out/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# A tar of DIR, the same bytes for the same tree: sorted, fixed times and owners.
det_tar() {
	tar --sort=name --mtime=@1704067200 --owner=0 --group=0 --numeric-owner \
		--format=pax --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$1" -cf "$2" .
}

# A new image layout at $1 with the layer tar $2 and a fixed config.
new_image() {
	umoci init --layout "$1"
	umoci new --image "$1:latest"
	umoci raw add-layer --image "$1:latest" --history.created "$created" \
		--history.created_by "make-images.sh" "$2"
	umoci config --image "$1:latest" --created "$created" \
		--config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--config.cmd /bin/sh --config.workingdir /
}

busybox_root() {
	r=$1
	mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root" "$r/opt/data" "$r/usr/share/doc" "$r/workspace"
	chmod 1777 "$r/tmp"
	cp /bin/busybox "$r/bin/busybox"
	chmod 0755 "$r/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
	printf 'NAME="hangar test busybox"\nID=busybox\n' >"$r/etc/os-release"
	echo keep >"$r/opt/data/keep.txt"
	echo old >"$r/opt/data/old.txt"
	echo "deleted by the layered image" >"$r/usr/share/doc/deleteme.txt"
}

make_busybox() {
	busybox_root "$work/busybox-root"
	det_tar "$work/busybox-root" "$work/busybox.tar"
	new_image "$1" "$work/busybox.tar"
}

make_debian() {
	mmdebstrap --quiet --variant=minbase --mode=root bookworm "$work/debian.tar"
	new_image "$1" "$work/debian.tar"
}

make_layered() {
	cp -a "$out/busybox" "$1"
	# Layer 2: a deletion, as umoci records it (a .wh. whiteout).
	umoci unpack --image "$1:latest" "$work/bundle"
	rm "$work/bundle/rootfs/usr/share/doc/deleteme.txt"
	umoci repack --image "$1:latest" --history.created "$created" "$work/bundle"
	rm -rf "$work/bundle"
	# Layer 3: /opt/data made opaque: what the layers below held there is gone.
	mkdir -p "$work/opq/opt/data"
	: >"$work/opq/opt/data/.wh..wh..opq"
	echo new >"$work/opq/opt/data/new.txt"
	det_tar "$work/opq" "$work/opq.tar"
	umoci raw add-layer --image "$1:latest" --history.created "$created" "$work/opq.tar"
	umoci config --image "$1:latest" --created "$created"
	umoci gc --layout "$1"
}

build() {
	[ -e "$out/$1.done" ] && [ -e "$out/$1/index.json" ] && return 0
	rm -rf "$out/$1" "$out/$1.done" "$work/$1.layout"
	"make_$1" "$work/$1.layout"
	mv "$work/$1.layout" "$out/$1"
	date -u +%Y-%m-%dT%H:%M:%SZ >"$out/$1.done"
	echo "made $out/$1"
}

for n in $names; do
	case $n in
	busybox | debian) build "$n" ;;
	layered) build busybox && build layered ;;
	*) echo "make-images.sh: unknown image $n (busybox, debian, layered)" >&2; exit 2 ;;
	esac
done
