#!/bin/sh
# Runs one test file against the fake control planes with Node's test runner.
#   run-sdk.sh NODE FILE
# Exits 77 (meson's SKIP) when the E2B SDK is not installed, as
# tests/conformance/run.sh does.
set -eu

node=$1
file=$2
here=$(cd "$(dirname "$0")" && pwd)

if [ ! -f "$here/../conformance/node_modules/e2b/package.json" ]; then
	echo "skipping: the E2B SDK is not installed; run: npm ci --prefix tests/conformance" >&2
	exit 77
fi
if [ -z "${FAKE_E2B:-}" ] || [ -z "${HANGAR_ENVD:-}" ]; then
	echo "FAKE_E2B and HANGAR_ENVD must name the binaries to test" >&2
	exit 1
fi

cd "$here"
exec "$node" --test --test-reporter=spec "$file"
