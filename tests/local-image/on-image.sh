#!/bin/sh
# Runs a test program (the arguments) with the sandboxes it creates made from
# the Debian test image (HANGAR_TEST_TEMPLATE, which tests/local-isolation's
# create() honours; HANGAR_TEST_IMAGE_ROOT, its layer), in an image store of
# its own that goes with it.
#
# As root, when the test user `user` has subordinate ids, the same root
# filesystem is imported by `user` into a store of its own too (its layers
# owned by its image range, hangar-images(7)), for the unprivileged cases:
# HANGAR_TEST_USER_TEMPLATE, HANGAR_TEST_USER_IMAGE_DIR and
# HANGAR_TEST_USER_IMAGE_ROOT, a copy of the image's /etc that `user` can
# read to compare with (in its store the files are its image range's).
set -e
dir=$(mktemp -d /tmp/hangar-on-image-XXXXXX)
trap 'rm -rf "$dir"' EXIT
HANGAR_IMAGE_DIR="$dir/images"
python3 "$(dirname "$0")/images.py" debian "$HANGAR_IMAGE_DIR" > "$dir/made"
HANGAR_TEST_TEMPLATE=$(sed -n 1p "$dir/made")
HANGAR_TEST_IMAGE_ROOT=$(sed -n 2p "$dir/made")
export HANGAR_IMAGE_DIR HANGAR_TEST_TEMPLATE HANGAR_TEST_IMAGE_ROOT
if [ "$(id -u)" = 0 ] && id user >/dev/null 2>&1 && grep -qE "^(user|$(id -u user)):" /etc/subuid &&
	grep -qE "^(user|$(id -u user)):" /etc/subgid; then
	chmod 0755 "$dir"
	mkdir "$dir/user"
	chown user: "$dir/user"
	tar=$(python3 "$(dirname "$0")/images.py" debian-tar)
	# The tools run without the sanitizer runtime the tests may be under.
	HANGAR_TEST_USER_TEMPLATE=$(env -u LD_PRELOAD HOME="$dir/user" HANGAR_STATE_DIR="$dir/user/state" \
		HANGAR_IMAGE_DIR="$dir/user/images" setpriv --reuid=user --regid=user --clear-groups \
		"$HANGAR_BUILD_ROOT/programs/hangar/hangar" image import "$tar" --name hangar-test/debian:12)
	HANGAR_TEST_USER_IMAGE_DIR="$dir/user/images"
	HANGAR_TEST_USER_IMAGE_ROOT="$dir/user-view"
	mkdir "$HANGAR_TEST_USER_IMAGE_ROOT"
	cp -a "$HANGAR_TEST_IMAGE_ROOT/etc" "$HANGAR_TEST_USER_IMAGE_ROOT/etc"
	chmod -R a+rX "$HANGAR_TEST_USER_IMAGE_ROOT"
	export HANGAR_TEST_USER_TEMPLATE HANGAR_TEST_USER_IMAGE_DIR HANGAR_TEST_USER_IMAGE_ROOT
fi
"$@"
