#!/bin/sh
# Runs one conformance test file with Node's built-in test runner.
#   run.sh NODE FILE
# Exits 77 (meson's SKIP) when the SDK is not installed, so a plain
# `meson test` works on machines without npm access.
set -eu

node=$1
file=$2
here=$(cd "$(dirname "$0")" && pwd)

if [ ! -f "$here/node_modules/e2b/package.json" ]; then
	echo "skipping: the E2B SDK is not installed; run: npm ci --prefix tests/conformance" >&2
	exit 77
fi
if [ -z "${HANGAR_ENVD:-}" ]; then
	echo "HANGAR_ENVD must name the hangar-envd binary to test" >&2
	exit 1
fi

cd "$here"
exec "$node" --test --test-reporter=spec "$file"
