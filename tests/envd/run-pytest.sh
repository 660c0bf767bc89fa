#!/bin/sh
# Runs the raw-protocol tests in this directory (or $PYTEST_DIR) with pytest; exit 77 (skip) without it.
dir=${PYTEST_DIR:-$(dirname "$0")}
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "pytest is not installed (Debian: python3-pytest); skipping"
	exit 77
fi
exec "$py" -m pytest -p no:cacheprovider -q -ra "$dir" "$@"
