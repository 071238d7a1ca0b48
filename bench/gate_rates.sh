#!/bin/sh
# gate_rates.sh — how often does `tern gate` cry wolf, and how often does it catch a slower build?
#
# usage: bench/gate_rates.sh -m MODEL [-N TRIALS] [--suite FILE] [-r REPS] [-n N_GEN] [-t THREADS]
#                            [--slow-threads T | --slow-model FILE | --slow-env VAR=VALUE] [--keep DIR]
#                            [--bench-args "MORE"]   (e.g. "--max-repetitions 15", for every run)
#
# Each trial makes three suite reports in rotated order (so neither variant always runs first):
# A and B of the same build and model, and S of the slower variant. `tern gate --baseline A B`
# exiting 1 is a false alarm; `tern gate --baseline A S` exiting 1 is a detection. The slower
# variant is made honestly: fewer threads (default on machines with 4+ CPUs: one fewer), another
# model file (a slower quantization), or an environment (default on 2-3 CPUs with AVX-512:
# TERN_KERNELS=avx2, the AVX2 kernels; that changes the hardware profile key, so those gates run
# with --allow-cross-hw). Prints each trial, then the false-alarm rate, the detection rate and
# the slowdown actually measured (median over trials of S/A for TTFT p50 and TPS p50): a
# detection rate means something only next to the slowdown it detected. Needs jq.
set -e
BIN=${TERN_BIN:-build/bin/tern}
MODEL= TRIALS=20 SUITE=bench/suites/toolcalls.jsonl REPS=3 NGEN=32 THREADS=
SLOW_THREADS= SLOW_MODEL= SLOW_ENV= KEEP= MORE=
while [ $# -gt 0 ]; do
    case $1 in
    -m) MODEL=$2; shift 2 ;;
    -N) TRIALS=$2; shift 2 ;;
    --suite) SUITE=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -n) NGEN=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --slow-threads) SLOW_THREADS=$2; shift 2 ;;
    --slow-model) SLOW_MODEL=$2; shift 2 ;;
    --slow-env) SLOW_ENV=$2; shift 2 ;;
    --keep) KEEP=$2; shift 2 ;;
    --bench-args) MORE=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "gate_rates.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$MODEL" ] || { echo "gate_rates.sh: give -m MODEL" >&2; exit 2; }
command -v jq >/dev/null || { echo "gate_rates.sh: needs jq (scripts/install-deps.sh)" >&2; exit 2; }
NCPU=$(nproc)
[ -n "$THREADS" ] || THREADS=$NCPU
if [ -z "$SLOW_THREADS$SLOW_MODEL$SLOW_ENV" ]; then
    if [ "$THREADS" -ge 4 ]; then SLOW_THREADS=$((THREADS - 1))
    elif [ "$($BIN bench --hardware | jq -r .kernel_isa)" = avx512 ]; then SLOW_ENV=TERN_KERNELS=avx2
    else echo "gate_rates.sh: say how to make the slower variant (--slow-threads, --slow-model, --slow-env)" >&2; exit 2
    fi
fi
DIR=${KEEP:-$(mktemp -d)}
mkdir -p "$DIR"
base_args="--suite $SUITE -r $REPS -n $NGEN $MORE"
run_base() { $BIN bench $base_args -m "$MODEL" -t "$THREADS" --json "$1" > /dev/null 2>&1; }
run_slow() {
    if [ -n "$SLOW_ENV" ]; then env "$SLOW_ENV" $BIN bench $base_args -m "$MODEL" -t "$THREADS" --json "$1" > /dev/null 2>&1
    else $BIN bench $base_args -m "${SLOW_MODEL:-$MODEL}" -t "${SLOW_THREADS:-$THREADS}" --json "$1" > /dev/null 2>&1
    fi
}
echo "gate_rates: $TRIALS trials of $SUITE (-r $REPS -n $NGEN -t $THREADS $MORE) on $MODEL; slower variant:" \
     "${SLOW_THREADS:+-t $SLOW_THREADS}${SLOW_MODEL:+$SLOW_MODEL}${SLOW_ENV:+$SLOW_ENV}; load $(cut -d' ' -f1-3 /proc/loadavg)"
fa=0 det=0
: > "$DIR/ratios"
i=1
while [ "$i" -le "$TRIALS" ]; do
    a="$DIR/a$i.json" b="$DIR/b$i.json" s="$DIR/s$i.json"
    case $((i % 3)) in
    1) run_base "$a"; run_base "$b"; run_slow "$s" ;;
    2) run_slow "$s"; run_base "$a"; run_base "$b" ;;
    0) run_base "$a"; run_slow "$s"; run_base "$b" ;;
    esac
    cross=
    [ "$(jq -r .hardware.profile.key "$a")" = "$(jq -r .hardware.profile.key "$s")" ] || cross=--allow-cross-hw
    rc_same=0; $BIN gate --baseline "$a" "$b" > "$DIR/gate-same$i.txt" || rc_same=$?
    rc_slow=0; $BIN gate --baseline "$a" "$s" $cross > "$DIR/gate-slow$i.txt" || rc_slow=$?
    [ $rc_same -le 1 ] && [ $rc_slow -le 1 ] || { echo "gate_rates.sh: tern gate failed (exit $rc_same/$rc_slow), see $DIR" >&2; exit 1; }
    [ $rc_same -eq 1 ] && fa=$((fa + 1))
    [ $rc_slow -eq 1 ] && det=$((det + 1))
    r=$(jq -rn --slurpfile a "$a" --slurpfile b "$b" --slurpfile s "$s" \
        '[$b[0].metrics.ttft_ms.p50 / $a[0].metrics.ttft_ms.p50, $b[0].metrics.tps.p50 / $a[0].metrics.tps.p50,
          $s[0].metrics.ttft_ms.p50 / $a[0].metrics.ttft_ms.p50, $s[0].metrics.tps.p50 / $a[0].metrics.tps.p50] | @tsv')
    echo "$r" >> "$DIR/ratios"
    echo "trial $i: same build $([ $rc_same -eq 0 ] && echo pass || echo FALSE-ALARM)," \
         "slower $([ $rc_slow -eq 1 ] && echo detected || echo MISSED);" \
         "B/A TTFT p50 x$(echo "$r" | cut -f1 | xargs printf %.3f) TPS x$(echo "$r" | cut -f2 | xargs printf %.3f);" \
         "S/A TTFT x$(echo "$r" | cut -f3 | xargs printf %.3f) TPS x$(echo "$r" | cut -f4 | xargs printf %.3f)"
    i=$((i + 1))
done
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "false alarms (same build failed the gate): $fa / $TRIALS = $(echo "$fa $TRIALS" | awk '{ printf "%.0f %%", 100 * $1 / $2 }')" \
     "(target <= 5 %)"
echo "detections (slower variant failed the gate): $det / $TRIALS = $(echo "$det $TRIALS" | awk '{ printf "%.0f %%", 100 * $1 / $2 }')" \
     "(target >= 95 % for a 10 % slower build)"
echo "measured slowdown of the variant (median S/A): TTFT p50 x$(cut -f3 "$DIR/ratios" | median)," \
     "TPS p50 x$(cut -f4 "$DIR/ratios" | median); same build (median B/A): TTFT x$(cut -f1 "$DIR/ratios" | median)," \
     "TPS x$(cut -f2 "$DIR/ratios" | median)"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); reports and gate tables in $DIR"
