#!/bin/sh
# Runs the image store tests in this directory with pytest; exit 77 (skip) without it.
dir=$(dirname "$0")
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "pytest is not installed (Debian: python3-pytest); skipping"
	exit 77
fi
exec "$py" -m pytest -p no:cacheprovider -q -ra "$dir" "$@"
