#!/bin/sh
# Runs the Python binding tests with pytest against the build tree; exit 77
# (skip) without pytest, or 1 when the build asked for the bindings
# (-Dpython=enabled: HANGAR_PY_REQUIRED=1), where a skip would hide them.
#
# In a build with AddressSanitizer the extension carries ASan but python3 does
# not: the runtime must be the first library loaded, so it is preloaded, and
# leak detection is off for the interpreter, which keeps its objects at exit
# by design (conftest.py drops the preload again for the processes the tests
# start).
# HANGAR_PYTEST_DIR: another suite of tests on the same bindings (local-image).
dir=${HANGAR_PYTEST_DIR:-$(dirname "$0")}
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import pytest' 2>/dev/null; then
	if [ "${HANGAR_PY_REQUIRED:-0}" = 1 ]; then
		echo "pytest is not installed (Debian: python3-pytest), and -Dpython=enabled requires the suite"
		exit 1
	fi
	echo "pytest is not installed (Debian: python3-pytest); skipping"
	exit 77
fi
case "${HANGAR_PY_SANITIZE:-none}" in
*address*)
	asan=$("${HANGAR_PY_CC:-cc}" -print-file-name=libasan.so)
	case "$asan" in
	/*) ;;
	*) echo "cannot find the ASan runtime of ${HANGAR_PY_CC:-cc}"; exit 1 ;;
	esac
	export HANGAR_PY_PRELOAD="$asan"
	export LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	;;
esac
export PYTHONPATH="$HANGAR_PY_PATH${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -m pytest -p no:cacheprovider -q -ra "$dir" "$@"
