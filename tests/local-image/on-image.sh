#!/bin/sh
# Runs a test program (the arguments) with the sandboxes it creates made from
# the Debian test image (HANGAR_TEST_TEMPLATE, which tests/local-isolation's
# create() honours; HANGAR_TEST_IMAGE_ROOT, its layer), in an image store of
# its own that goes with it.
set -e
dir=$(mktemp -d /tmp/hangar-on-image-XXXXXX)
trap 'rm -rf "$dir"' EXIT
HANGAR_IMAGE_DIR="$dir/images"
python3 "$(dirname "$0")/images.py" debian "$HANGAR_IMAGE_DIR" > "$dir/made"
HANGAR_TEST_TEMPLATE=$(sed -n 1p "$dir/made")
HANGAR_TEST_IMAGE_ROOT=$(sed -n 2p "$dir/made")
export HANGAR_IMAGE_DIR HANGAR_TEST_TEMPLATE HANGAR_TEST_IMAGE_ROOT
"$@"
