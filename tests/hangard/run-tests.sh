#!/bin/sh
# The hangard suite: pytest over this directory, or over the test files of
# it named as arguments (NAME.py); other arguments go to pytest. Without
# pytest (Debian's python3-pytest) the suite is skipped (77), never passed.
here=$(dirname "$0")
for py in "${PYTHON:-}" /usr/bin/python3 python3; do
	[ -n "$py" ] && command -v "$py" >/dev/null 2>&1 && break
done
"$py" -c 'import pytest' 2>/dev/null || { echo "no pytest: skipped"; exit 77; }
files=
n=$#
while [ "$n" -gt 0 ]; do
	case $1 in
	*.py) files="$files $here/$1" ;;
	*) set -- "$@" "$1" ;;
	esac
	shift
	n=$((n - 1))
done
# shellcheck disable=SC2086 # the test files' names have no spaces
exec "$py" -m pytest -p no:cacheprovider -q -ra ${files:-"$here"} "$@"
