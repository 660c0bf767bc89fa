#!/bin/sh
# Runs every fuzzer for a while on a scratch copy of its seed corpus.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
#
# SECONDS defaults to 60 per fuzzer; BUILD_DIR to build-fuzz (set up with
# CC=clang meson setup build-fuzz -Dfuzzing=true -Dtests=false). Exits non-zero
# when any fuzzer finds a crash, leak or sanitizer report; the reproducer is
# kept under $WORK/<name>/ (printed), to be copied to regressions/<name>/.
set -u
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${2:-$top/build-fuzz}
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hangar-fuzz.XXXXXX")}
status=0

for name in envelope pjson sjson hangard-body multipart seal e2b-decode settings envd-client tarcheck oci s3list; do
	bin="$build/tests/fuzz/fuzz-$name"
	if [ ! -x "$bin" ]; then
		echo "missing $bin: build it first" >&2
		exit 2
	fi
	mkdir -p "$work/$name/corpus" "$work/$name/artifacts"
	cp "$here/corpus/$name/"* "$work/$name/corpus/" 2>/dev/null || true
	echo "== fuzz-$name for ${secs}s"
	if "$bin" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$work/$name/artifacts/" \
		"$work/$name/corpus" >"$work/$name/log" 2>&1; then
		grep -E '^stat::number_of_executed_units|^Done' "$work/$name/log"
	else
		status=1
		echo "fuzz-$name FAILED; log: $work/$name/log" >&2
		grep -E 'ERROR|SUMMARY|Test unit written' "$work/$name/log" >&2
	fi
done
echo "work directory: $work"
exit $status
