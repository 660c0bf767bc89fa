#!/bin/sh
# Runs the registry tests in this directory with pytest; exit 77 (skip) without it.
dir=$(dirname "$0")
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import pytest' 2>/dev/null; then
	echo "pytest is not installed (Debian: python3-pytest); skipping"
	exit 77
fi
for t in docker-registry skopeo umoci openssl; do
	if ! command -v "$t" >/dev/null; then
		echo "$t is not installed (./dev installs the test packages); skipping"
		exit 77
	fi
done
exec "$py" -m pytest -p no:cacheprovider -q -ra "$dir" "$@"
