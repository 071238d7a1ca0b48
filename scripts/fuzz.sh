#!/bin/sh
# fuzz.sh — build every tests/fuzz/fuzz_<name>.c as a libFuzzer binary (clang, ASan + UBSan)
# and run each for SECONDS (default 60) from its seed corpus (tests/fuzz/corpus/<name>).
#
#   sh scripts/fuzz.sh [SECONDS] [name ...]        # CI: sh scripts/fuzz.sh 60
#
# New inputs go to build-fuzz/corpus/<name> (seeds are copied there first; the repository's
# corpus is never written). A crash, leak or sanitizer report fails the run; the input is kept
# as build-fuzz/crashes/<name>-crash-<sha1> and must become a regression: copy it to
# tests/fuzz/regress/<name>/ (ctest replays those in every build) and fix the bug. The summary
# lists executions, coverage (edges) and corpus size per target, as the docs report them.
set -eu
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-60}
[ $# -gt 0 ] && shift
OUT=build-fuzz
command -v clang >/dev/null || { echo "fuzz.sh: clang not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
CC=clang cmake -S . -B $OUT -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_FUZZ=ON >/dev/null
cmake --build $OUT -j "$(nproc)" >/dev/null
targets="$*"
[ -n "$targets" ] || targets=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')
mkdir -p $OUT/crashes
fail=0
printf '%-12s %10s %8s %8s %8s  %s\n' target execs exec/s edges corpus result
for t in $targets; do
    bin=$OUT/bin/fuzz_$t
    [ -x "$bin" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
    work=$OUT/corpus/$t
    mkdir -p "$work"
    cp tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
    [ -d tests/fuzz/regress/"$t" ] && cp tests/fuzz/regress/"$t"/* "$work"/ 2>/dev/null || true
    log=$OUT/$t.log
    set +e
    # -timeout: an input running longer is a hang. 30 s, because this build traces every
    # comparison for the fuzzer: the grammar engine runs 17x slower than in Release, and
    # regress/gbnf/ambiguous-sentences-generate (0.45 s in Release) takes 7.5 s on an AMD Zen 3.
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$bin" -seed=1 -max_total_time="$SECONDS_PER" -print_final_stats=1 -rss_limit_mb=4096 \
        -timeout=30 -artifact_prefix="$OUT/crashes/$t-" "$work" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
    corp=$(ls "$work" | wc -l)
    if [ $rc -eq 0 ]; then res=ok; else res="FAILED (exit $rc, log $log)"; fail=1; fi
    printf '%-12s %10s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${edges:-?}" "$corp" "$res"
    if [ $rc -ne 0 ]; then
        # what broke (a sanitizer report, a fuzz target's broken promise, an internal check) and
        # the input itself, so a failure seen only on another machine (CI) can be replayed here:
        # base64 -d > tests/fuzz/regress/<name>/<file>
        grep -m12 -E 'ERROR|runtime error|SUMMARY|Test unit written|broken promise|internal check failed|#[0-9]+ 0x' "$log" >&2 || true
        for c in $(sed -n "s/^.*Test unit written to //p" "$log"); do
            if [ -f "$c" ] && [ "$(wc -c <"$c")" -le 16384 ]; then
                echo "--- $c (base64):" >&2
                base64 -w 120 "$c" >&2
            fi
        done
    fi
done
exit $fail
