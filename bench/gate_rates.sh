#!/bin/sh
# gate_rates.sh — how often does `tern gate` cry wolf, and how often does it catch a slower build?
#
# usage: bench/gate_rates.sh -m MODEL [-N TRIALS] [--suite FILE] [-r REPS] [-n N_GEN] [-t THREADS]
#        (threads and rounds default to the hardware profile's measure section, as tern bench's do)
#                            [--slow-threads T | --slow-model FILE | --slow-env VAR=VALUE] [--keep DIR]
#                            [--bench-args "MORE"]   (e.g. "--max-repetitions 15", for every run)
#                            [--all-pairs] [--analyze DIR]
#
# Each trial makes three suite reports in rotated order (so neither variant always runs first):
# A and B of the same build and model, and S of the slower variant. `tern gate --baseline A B`
# exiting 1 is a false alarm; `tern gate --baseline A S` exiting 1 is a detection.
# --all-pairs: N reports of each kind instead, alternating A S S A A S ..., and every ordered pair
# gated: A_i against A_j (i != j, N(N-1) same-build gates: a baseline blessed at any time of the
# run, before or after) and A_i against S_j (N^2 detections). Pairs share reports, so they are not
# independent trials, but every report is used N-fold and slow drift between distant runs counts
# as it does for a baseline blessed days before. --analyze DIR: no runs, the all-pairs gates of
# the reports a1.json, s1.json, a2.json ... already in DIR (as --keep left them, even from a run
# cut short: the pairs both of whose reports are complete). The slower
# variant is made honestly: fewer threads (default on machines with 4+ CPUs: one fewer), another
# model file (a slower quantization), or an environment (default on 2-3 CPUs with AVX-512:
# TERN_KERNELS=avx2, the AVX2 kernels; that changes the hardware profile key, so those gates run
# with --allow-cross-hw). Prints each trial, then the false-alarm rate, the detection rate and
# the slowdown actually measured (median over trials of S/A for TTFT p50 and TPS p50): a
# detection rate means something only next to the slowdown it detected. Both rates are also
# given for `tern gate --raw` (no allowance for the machine's speed probe) on the same reports.
# Needs jq.
set -e
BIN=${TERN_BIN:-build/bin/tern}
MODEL= TRIALS=20 SUITE=bench/suites/toolcalls.jsonl REPS= NGEN=32 THREADS=
SLOW_THREADS= SLOW_MODEL= SLOW_ENV= KEEP= MORE= ALL_PAIRS= ANALYZE=
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
    --all-pairs) ALL_PAIRS=1; shift ;;
    --analyze) ANALYZE=$2; ALL_PAIRS=1; KEEP=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "gate_rates.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$MODEL$ANALYZE" ] || { echo "gate_rates.sh: give -m MODEL" >&2; exit 2; }
command -v jq >/dev/null || { echo "gate_rates.sh: needs jq (scripts/install-deps.sh)" >&2; exit 2; }
# threads and rounds: the hardware profile's measure section unless -t / -r are given
if [ -z "$SLOW_THREADS$SLOW_MODEL$SLOW_ENV$ANALYZE" ]; then
    if [ "${THREADS:-0}" -ge 4 ]; then SLOW_THREADS=$((THREADS - 1))
    elif [ "$($BIN bench --hardware | jq -r .kernel_isa)" = avx512 ]; then SLOW_ENV=TERN_KERNELS=avx2
    else echo "gate_rates.sh: say how to make the slower variant (--slow-threads, --slow-model, --slow-env)" >&2; exit 2
    fi
fi
DIR=${KEEP:-$(mktemp -d)}
mkdir -p "$DIR"
base_args="--suite $SUITE ${REPS:+-r $REPS} -n $NGEN $MORE"
run_base() { $BIN bench $base_args -m "$MODEL" ${THREADS:+-t $THREADS} --json "$1" > /dev/null 2>&1; }
run_slow() {
    if [ -n "$SLOW_ENV" ]; then env "$SLOW_ENV" $BIN bench $base_args -m "$MODEL" ${THREADS:+-t $THREADS} --json "$1" > /dev/null 2>&1
    else slow_t=${SLOW_THREADS:-$THREADS}; $BIN bench $base_args -m "${SLOW_MODEL:-$MODEL}" ${slow_t:+-t $slow_t} --json "$1" > /dev/null 2>&1
    fi
}
[ -n "$ANALYZE" ] || echo "gate_rates: $TRIALS trials of $SUITE (${REPS:+-r $REPS }-n $NGEN ${THREADS:+-t $THREADS }$MORE; threads and rounds" \
     "otherwise the hardware profile's) on $MODEL; slower variant:" \
     "${SLOW_THREADS:+-t $SLOW_THREADS}${SLOW_MODEL:+$SLOW_MODEL}${SLOW_ENV:+$SLOW_ENV}; load $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
p50s() { jq -r '[.metrics.ttft_ms.p50, .metrics.tps.p50] | @tsv' "$1"; }
if [ -n "$ANALYZE" ]; then
    TRIALS=0
    while [ -f "$DIR/a$((TRIALS + 1)).json" ] && [ -f "$DIR/s$((TRIALS + 1)).json" ]; do TRIALS=$((TRIALS + 1)); done
    [ "$TRIALS" -ge 2 ] || { echo "gate_rates.sh: $DIR holds fewer than 2 pairs of reports (a1.json s1.json ...)" >&2; exit 2; }
    echo "analyzing the $TRIALS pairs of reports in $DIR"
fi
if [ -n "$ALL_PAIRS" ]; then
    i=1
    while [ -z "$ANALYZE" ] && [ "$i" -le "$TRIALS" ]; do
        if [ $((i % 2)) = 1 ]; then run_base "$DIR/a$i.json"; run_slow "$DIR/s$i.json"
        else run_slow "$DIR/s$i.json"; run_base "$DIR/a$i.json"; fi
        echo "run $i: A TTFT p50 / TPS p50 $(p50s "$DIR/a$i.json" | tr '\t' /), S $(p50s "$DIR/s$i.json" | tr '\t' /)"
        i=$((i + 1))
    done
    cross=
    [ "$(jq -r .hardware.profile.key "$DIR/a1.json")" = "$(jq -r .hardware.profile.key "$DIR/s1.json")" ] || cross=--allow-cross-hw
    fa=0 det=0 n_same=0 n_slow=0 fa_raw=0 det_raw=0
    : > "$DIR/ratios-same"; : > "$DIR/ratios-slow"
    for i in $(seq 1 "$TRIALS"); do
        for j in $(seq 1 "$TRIALS"); do
            if [ "$i" != "$j" ]; then
                rc=0; $BIN gate --baseline "$DIR/a$i.json" "$DIR/a$j.json" > "$DIR/gate-same-$i-$j.txt" || rc=$?
                [ $rc -le 1 ] || { echo "gate_rates.sh: tern gate failed (exit $rc), see $DIR/gate-same-$i-$j.txt" >&2; exit 1; }
                n_same=$((n_same + 1)); [ $rc = 1 ] && fa=$((fa + 1))
                $BIN gate --raw --baseline "$DIR/a$i.json" "$DIR/a$j.json" > /dev/null || fa_raw=$((fa_raw + 1))
                jq -rn --slurpfile a "$DIR/a$i.json" --slurpfile b "$DIR/a$j.json" \
                    '[$b[0].metrics.ttft_ms.p50 / $a[0].metrics.ttft_ms.p50, $b[0].metrics.tps.p50 / $a[0].metrics.tps.p50] | @tsv' >> "$DIR/ratios-same"
            fi
            rc=0; $BIN gate --baseline "$DIR/a$i.json" "$DIR/s$j.json" $cross > "$DIR/gate-slow-$i-$j.txt" || rc=$?
            [ $rc -le 1 ] || { echo "gate_rates.sh: tern gate failed (exit $rc), see $DIR/gate-slow-$i-$j.txt" >&2; exit 1; }
            n_slow=$((n_slow + 1)); [ $rc = 1 ] && det=$((det + 1))
            $BIN gate --raw --baseline "$DIR/a$i.json" "$DIR/s$j.json" $cross > /dev/null || det_raw=$((det_raw + 1))
            jq -rn --slurpfile a "$DIR/a$i.json" --slurpfile s "$DIR/s$j.json" \
                '[$s[0].metrics.ttft_ms.p50 / $a[0].metrics.ttft_ms.p50, $s[0].metrics.tps.p50 / $a[0].metrics.tps.p50] | @tsv' >> "$DIR/ratios-slow"
        done
    done
    echo "false alarms (a report of the same build failed the gate against another): $fa / $n_same =" \
         "$(echo "$fa $n_same" | awk '{ printf "%.1f %%", 100 * $1 / $2 }') (target <= 5 %)"
    echo "detections (a report of the slower variant failed the gate): $det / $n_slow =" \
         "$(echo "$det $n_slow" | awk '{ printf "%.1f %%", 100 * $1 / $2 }') (target >= 95 % for a 10 % slower build)"
    echo "the same gates with --raw (no allowance for the machine's speed): false alarms $fa_raw / $n_same," \
         "detections $det_raw / $n_slow"
    echo "machine-speed probe of the reports (GOP/s): $(for f in "$DIR"/a*.json "$DIR"/s*.json; do jq -r '.machine_speed.gops // "none"' "$f"; done | sort -g | tr '\n' ' ')"
    echo "measured slowdown (median S_j/A_i): TTFT p50 x$(cut -f1 "$DIR/ratios-slow" | median), TPS p50 x$(cut -f2 "$DIR/ratios-slow" | median);" \
         "same build A_j/A_i: TTFT x$(cut -f1 "$DIR/ratios-same" | sort -g | sed -n '1p')-$(cut -f1 "$DIR/ratios-same" | sort -g | tail -1)," \
         "TPS x$(cut -f2 "$DIR/ratios-same" | sort -g | sed -n '1p')-$(cut -f2 "$DIR/ratios-same" | sort -g | tail -1) (range)"
    echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); reports and gate tables in $DIR"
    exit 0
fi
fa=0 det=0 fa_raw=0 det_raw=0
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
    $BIN gate --raw --baseline "$a" "$b" > /dev/null || fa_raw=$((fa_raw + 1))
    $BIN gate --raw --baseline "$a" "$s" $cross > /dev/null || det_raw=$((det_raw + 1))
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
echo "false alarms (same build failed the gate): $fa / $TRIALS = $(echo "$fa $TRIALS" | awk '{ printf "%.0f %%", 100 * $1 / $2 }')" \
     "(target <= 5 %)"
echo "detections (slower variant failed the gate): $det / $TRIALS = $(echo "$det $TRIALS" | awk '{ printf "%.0f %%", 100 * $1 / $2 }')" \
     "(target >= 95 % for a 10 % slower build)"
echo "the same gates with --raw (no allowance for the machine's speed): false alarms $fa_raw / $TRIALS," \
     "detections $det_raw / $TRIALS"
echo "measured slowdown of the variant (median S/A): TTFT p50 x$(cut -f3 "$DIR/ratios" | median)," \
     "TPS p50 x$(cut -f4 "$DIR/ratios" | median); same build (median B/A): TTFT x$(cut -f1 "$DIR/ratios" | median)," \
     "TPS x$(cut -f2 "$DIR/ratios" | median)"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg); reports and gate tables in $DIR"
