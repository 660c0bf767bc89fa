#!/bin/sh
# Runs every fuzzer for a while on a scratch copy of its seed corpus.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
#
# SECONDS defaults to 60 per fuzzer; BUILD_DIR to build-fuzz (set up with
# CC=clang meson setup build-fuzz -Dfuzzing=true -Dtests=false). FUZZ_JOBS
# fuzzers run at once (default: the number of CPUs), each for SECONDS of wall
# time. Exits non-zero when any fuzzer finds a crash, leak or sanitizer
# report; the reproducer is kept under $WORK/<name>/ (printed), to be copied
# to regressions/<name>/. When all pass, the scratch directory is removed
# (FUZZ_WORK=DIR keeps it there).
set -u
secs=${1:-60}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
build=${2:-$top/build-fuzz}
work=${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/hangar-fuzz.XXXXXX")}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
names="envelope pjson sjson hangard-body multipart seal e2b-decode settings envd-client tarcheck oci s3list"

for name in $names; do
	if [ ! -x "$build/tests/fuzz/fuzz-$name" ]; then
		echo "missing $build/tests/fuzz/fuzz-$name: build it first" >&2
		exit 2
	fi
done

# One fuzzer: its verdict goes to $work/<name>/status, its output to log.
fuzz_one() {
	name=$1
	mkdir -p "$work/$name/corpus" "$work/$name/artifacts"
	cp "$here/corpus/$name/"* "$work/$name/corpus/" 2>/dev/null || true
	if "$build/tests/fuzz/fuzz-$name" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$work/$name/artifacts/" \
		"$work/$name/corpus" >"$work/$name/log" 2>&1; then
		echo ok >"$work/$name/status"
	else
		echo failed >"$work/$name/status"
	fi
}

# Batches of $jobs: each batch waits for its own fuzzers only.
set -- $names
while [ $# -gt 0 ]; do
	batch=
	i=0
	while [ $i -lt "$jobs" ] && [ $# -gt 0 ]; do
		echo "== fuzz-$1 for ${secs}s"
		fuzz_one "$1" &
		batch="$batch $1"
		i=$((i + 1))
		shift
	done
	wait
	for name in $batch; do
		if [ "$(cat "$work/$name/status" 2>/dev/null)" = ok ]; then
			echo "fuzz-$name:"
			grep -E '^stat::number_of_executed_units|^Done' "$work/$name/log"
		else
			status=1
			echo "fuzz-$name FAILED; log: $work/$name/log" >&2
			grep -E 'ERROR|SUMMARY|Test unit written' "$work/$name/log" >&2
		fi
	done
done
# A pass keeps nothing (unless the caller named the work directory); a
# failure keeps the reproducers where the messages above say.
if [ -z "${status:-}" ] && [ -z "${FUZZ_WORK:-}" ]; then
	rm -rf "$work"
else
	echo "work directory: $work"
fi
exit ${status:-0}
