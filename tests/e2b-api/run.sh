#!/bin/sh
# Runs one file of the e2b-api suite with Node's test runner.
#   run.sh NODE FILE
# The SDK is the one tests/conformance pins; without it (npm ci --prefix
# tests/conformance) the file is skipped (77), never passed.
set -eu
node=$1
file=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -f "$here/../conformance/node_modules/e2b/package.json" ]; then
	echo "skipping: the E2B SDK is not installed; run: npm ci --prefix tests/conformance" >&2
	exit 77
fi
cd "$here"
exec "$node" --test --test-reporter=spec "$file"
