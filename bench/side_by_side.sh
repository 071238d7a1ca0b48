#!/usr/bin/env bash
# side_by_side.sh — tern and llama.cpp on the same GGUF files, in the same minutes.
#
# For each round, model and thread count it runs `tern bench` and then `llama-bench` (the order
# flips every round, so neither engine always runs on a warmer or cooler machine), each with the
# same -p/-n and JSON output, and prints one markdown table: per model and thread count, the
# median tokens/s of both engines over all rounds, the min-max spread and the ratio
# tern/llama.cpp. Both are llama-bench-style measurements (ppN = one N-token prompt from an empty
# KV cache, logits for the last token; tgN = N single-token decodes; one untimed warm-up each).
#
# It only RUNS a llama-bench binary you give it; it never builds or downloads llama.cpp.
# Use files both engines load (e.g. `tern synth SHAPE:TYPE --vocab ggml-vocab-....gguf`, or
# llama-quantize output in types tern supports). A model one engine cannot load is reported in
# the table with that engine's first error line, and the run goes on.
#
# 2-thread decode on this VM kind is bimodal (both vCPUs on one L3 or on two, see
# ../shared/anchors/machine.md §4): with --roofline (or the tool found at
# ../shared/tools/roofline/roofline), its placement probe runs before and after, and the table
# header says which state the machine was in. On a shared machine run the whole script under
# `flock /tmp/tern-bench.lock` so that nobody else times at the same moment.
#
# Other processes disturb both engines badly (llama.cpp's OpenMP threads spin, and a 2-thread run
# on 2 vCPUs has no spare core): before every run the script waits until the machine is quiet,
# measures the CPU time other processes used during the run (/proc/stat busy time minus the
# engine's own), and repeats a disturbed run up to --retries times. Medians use the undisturbed
# runs only; a cell where every run was disturbed is marked with a dagger.
#
# Needs: bash, jq, awk. Raw JSON of every run is kept in --keep DIR (default: a temp dir that is
# removed at the end).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

usage() {
    cat <<EOF
usage: bench/side_by_side.sh --llama-bench PATH [options] MODEL.gguf...

  --llama-bench PATH  llama.cpp's llama-bench binary (required)
  --llama-args ARGS   extra arguments for it, e.g. "-rtr 1" for ik_llama.cpp (whose llama-bench
                      then prints WARNING lines into its JSON on stdout: they are dropped)
  --tern PATH         tern binary (default: $repo/build/bin/tern)
  -t LIST             thread counts, comma-separated (default: 2)
  -r N                rounds (default: 3); each round runs every model once per engine
  -p N                prompt length (default: 512; 0 = no prompt test)
  -n N                generation length (default: 128; 0 = no generation test)
  --reps N            timed repetitions inside each engine run (default: 1); the table's
                      median is over rounds x reps samples
  --roofline BIN      roofline tool for the placement probe before/after (default:
                      $repo/../shared/tools/roofline/roofline if it is executable)
  --no-roofline       skip the probe
  --keep DIR          keep every run's raw JSON and stderr in DIR
  --max-other X       a run is disturbed if other processes used more than X CPUs on
                      average while it ran (default: 0.2)
  --quiet-wait S      before each run wait up to S seconds for a quiet machine (default: 120;
                      0 = do not wait)
  --retries N         repeat a disturbed run up to N times (default: 2)
  -h, --help          this text

Example:
  flock /tmp/tern-bench.lock bench/side_by_side.sh --llama-bench ~/llama.cpp/build/bin/llama-bench \\
      -t 2,1 -r 3 qwen-q8_0.gguf llama-q4_0.gguf
EOF
}

die() { echo "side_by_side.sh: $*" >&2; exit 2; }

llama_bench="" llama_args="" tern_bin="$repo/build/bin/tern" threads="2" rounds=3 n_prompt=512 n_gen=128
reps=1 roofline="" use_roofline=1 keep="" models=() max_other=0.2 quiet_wait=120 retries=2
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --llama-bench) [ $# -ge 2 ] || die "$1 needs a value"; llama_bench=$2; shift 2 ;;
    --llama-args) [ $# -ge 2 ] || die "$1 needs a value"; llama_args=$2; shift 2 ;;
    --tern) [ $# -ge 2 ] || die "$1 needs a value"; tern_bin=$2; shift 2 ;;
    -t) [ $# -ge 2 ] || die "$1 needs a value"; threads=$2; shift 2 ;;
    -r) [ $# -ge 2 ] || die "$1 needs a value"; rounds=$2; shift 2 ;;
    -p) [ $# -ge 2 ] || die "$1 needs a value"; n_prompt=$2; shift 2 ;;
    -n) [ $# -ge 2 ] || die "$1 needs a value"; n_gen=$2; shift 2 ;;
    --reps) [ $# -ge 2 ] || die "$1 needs a value"; reps=$2; shift 2 ;;
    --roofline) [ $# -ge 2 ] || die "$1 needs a value"; roofline=$2; shift 2 ;;
    --no-roofline) use_roofline=0; shift ;;
    --keep) [ $# -ge 2 ] || die "$1 needs a value"; keep=$2; shift 2 ;;
    --max-other) [ $# -ge 2 ] || die "$1 needs a value"; max_other=$2; shift 2 ;;
    --quiet-wait) [ $# -ge 2 ] || die "$1 needs a value"; quiet_wait=$2; shift 2 ;;
    --retries) [ $# -ge 2 ] || die "$1 needs a value"; retries=$2; shift 2 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) models+=("$1"); shift ;;
    esac
done

[ -n "$llama_bench" ] || { usage >&2; die "--llama-bench PATH is required"; }
[ -x "$llama_bench" ] || die "llama-bench '$llama_bench' is not an executable file"
[ -x "$tern_bin" ] || die "tern binary '$tern_bin' not found (build with make, or give --tern)"
[ ${#models[@]} -gt 0 ] || die "give at least one MODEL.gguf"
command -v jq >/dev/null || die "jq is needed (scripts/install-deps.sh installs it)"
[[ "$max_other" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--max-other '$max_other' is not a number"
for v in "$rounds" "$n_prompt" "$n_gen" "$reps" "$quiet_wait" "$retries"; do
    [[ "$v" =~ ^[0-9]+$ ]] || die "'$v' is not a non-negative integer"
done
[[ "$threads" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "-t '$threads' is not a comma-separated list of numbers"
[ "$rounds" -ge 1 ] && [ "$reps" -ge 1 ] || die "-r and --reps must be at least 1"
[ "$n_prompt" -gt 0 ] || [ "$n_gen" -gt 0 ] || die "-p and -n are both 0: nothing to measure"
for m in "${models[@]}"; do [ -r "$m" ] || die "model '$m' is not a readable file"; done
IFS=, read -r -a thread_list <<<"$threads"

if [ "$use_roofline" = 1 ] && [ -z "$roofline" ] && [ -x "$repo/../shared/tools/roofline/roofline" ]; then
    roofline="$repo/../shared/tools/roofline/roofline"
fi
[ "$use_roofline" = 1 ] || roofline=""
[ -z "$roofline" ] || [ -x "$roofline" ] || die "roofline '$roofline' is not executable"

if [ -n "$keep" ]; then
    mkdir -p "$keep" || die "cannot create '$keep'"
    out=$keep
else
    out=$(mktemp -d /tmp/side_by_side.XXXXXX) || die "mktemp failed"
    trap 'rm -rf "$out"' EXIT
fi

# Placement probe: median 48 MiB and 2 GiB read over 5 iterations; 48 MiB >= 100 GB/s means the
# two vCPUs sit on two L3s (machine.md §4).
probe() {
    local f="$out/roofline-$1.txt"
    if ! "$roofline" -P 5 -w 60 >"$f" 2>&1; then
        echo "probe failed (see $f)"
        return
    fi
    awk '$1 == "probe" && NF >= 5 && $2 ~ /^[0-9]+$/ { a[n] = $4; b[n] = $5; n++ }
         function med(x, n,   i, j, t) {
             for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
             return n % 2 ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2
         }
         END {
             if (!n) { print "no probe lines"; exit }
             m48 = med(a, n); m2 = med(b, n)
             printf "%s (2-thread read: 48 MiB %.0f GB/s, 2 GiB %.1f GB/s, median of %d)\n",
                    (m48 >= 100 ? "two L3s" : "one L3"), m48, m2, n
         }' "$f"
}

label() { local b; b=$(basename "$1"); echo "${b%.gguf}"; }

clk=$(getconf CLK_TCK 2>/dev/null || echo 100)
# CPU time all CPUs spent busy (user, nice, system, irq, softirq), in clock ticks
busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }

# Wait until the CPUs were busy less than max_other CPUs over half a second (or give up).
wait_quiet() {
    [ "$quiet_wait" -gt 0 ] || return 0
    local deadline=$((SECONDS + quiet_wait)) a b
    while :; do
        a=$(busy_ticks); sleep 0.5; b=$(busy_ticks)
        awk -v d=$((b - a)) -v c="$clk" -v m="$max_other" 'BEGIN { exit !(2 * d / c <= m) }' && return 0
        if [ $SECONDS -ge $deadline ]; then
            echo "  machine not quiet after ${quiet_wait}s; running anyway" >&2
            return 0
        fi
    done
}

# run ENGINE MODEL_INDEX THREADS ROUND: one engine run (repeated while disturbed), its JSON in
# $out/<name>.json and the CPUs other processes used meanwhile in $out/<name>.other
run() {
    local engine=$1 mi=$2 t=$3 r=$4 model=${models[$2]}
    local base="$out/m$mi-t$t-r$r-$engine" attempt rc b0 b1 wall user sys other
    local TIMEFORMAT='%3R %3U %3S'
    for ((attempt = 0; attempt <= retries; attempt++)); do
        wait_quiet
        b0=$(busy_ticks)
        if [ "$engine" = tern ]; then
            { time "$tern_bin" bench -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r "$reps" \
                  --json >"$base.json" 2>"$base.err"; } 2>"$base.time"
        else
            # shellcheck disable=SC2086
            { time "$llama_bench" -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r "$reps" \
                  $llama_args -o json >"$base.raw" 2>"$base.err"; } 2>"$base.time"
        fi
        rc=$?
        if [ "$engine" != tern ]; then grep -v '^WARNING' "$base.raw" >"$base.json"; rm -f "$base.raw"; fi
        b1=$(busy_ticks)
        read -r wall user sys <"$base.time"
        other=$(awk -v d=$((b1 - b0)) -v c="$clk" -v w="$wall" -v u="$user" -v s="$sys" \
            'BEGIN { o = (d / c - u - s) / (w > 0 ? w : 1); printf "%.2f", o < 0 ? 0 : o }')
        echo "$other" >"$base.other"
        if [ $rc -ne 0 ] || ! jq -e 'type == "array" and length > 0' "$base.json" >/dev/null 2>&1; then
            echo "  $engine $(label "$model") -t $t round $r: FAILED (exit $rc)" >&2
            rm -f "$base.json"
            return
        fi
        awk -v o="$other" -v m="$max_other" 'BEGIN { exit !(o <= m) }' && return
        echo "  $engine -t $t round $r: other processes used $other CPUs meanwhile; disturbed" >&2
    done
}

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)
place_before=""
[ -z "$roofline" ] || place_before=$(probe before)

for ((r = 1; r <= rounds; r++)); do
    for mi in "${!models[@]}"; do
        for t in "${thread_list[@]}"; do
            echo "round $r/$rounds: $(label "${models[$mi]}") -t $t" >&2
            if ((r % 2)); then
                run tern "$mi" "$t" "$r"; run llama "$mi" "$t" "$r"
            else
                run llama "$mi" "$t" "$r"; run tern "$mi" "$t" "$r"
            fi
        done
    done
done

place_after=""
[ -z "$roofline" ] || place_after=$(probe after)
finished=$(date -u '+%H:%M:%S UTC')

# stats MI T ENGINE KIND: "median min max count mark" of the samples_ts of that test kind over
# the undisturbed runs (all runs, mark "†", if none was undisturbed), or nothing
stats() {
    local all=("$out"/m$1-t$2-r*-$3.json) files=() f mark=""
    [ -e "${all[0]}" ] || return 0
    for f in "${all[@]}"; do
        awk -v o="$(cat "${f%.json}.other" 2>/dev/null || echo 0)" -v m="$max_other" \
            'BEGIN { exit !(o <= m) }' && files+=("$f")
    done
    if [ ${#files[@]} -eq 0 ]; then files=("${all[@]}"); mark="†"; fi
    jq -s -r --arg kind "$4" --arg mark "$mark" '
        [ .[][] | select(if $kind == "pp" then .n_prompt > 0 and .n_gen == 0
                         else .n_gen > 0 and .n_prompt == 0 end) | .samples_ts[] ] | sort
        | if length == 0 then empty else
            "\(if length % 2 == 1 then .[length / 2 | floor]
               else (.[length / 2 - 1] + .[length / 2]) / 2 end) \(.[0]) \(.[-1]) \(length) \($mark)"
          end' "${files[@]}"
}

# cell MEDIAN MIN MAX MARK -> "123.4 (120.0-125.1)"
cell() {
    [ -n "$1" ] || return 0
    awk -v m="$1" -v lo="$2" -v hi="$3" -v k="$4" 'BEGIN { printf "%.1f (%.1f-%.1f)%s", m, lo, hi, k }'
}

fail_text() {
    local e
    e=$(grep -h -m1 -iE 'error|fail|unsupported|cannot|invalid' "$out"/m$1-t*-r*-$2.err 2>/dev/null | head -n1)
    [ -n "$e" ] || e="failed"
    e=${e//|//}
    echo "failed: ${e:0:80}"
}

tern_version=$("$tern_bin" version 2>/dev/null | head -n1)
llama_build=$(jq -s -r '[.[][0] | "\(.build_commit) (\(.build_number))"] | first // "?"' \
    "$out"/*-llama.json 2>/dev/null)
cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')
fam=$(grep -m1 'cpu family' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | tr -d ' ')

echo "### tern vs llama.cpp, side by side"
echo
echo "- $started - $finished, $rounds rounds (engine order flipped every round), $reps timed rep(s) per run,"
echo "  each engine with one untimed warm-up; loadavg before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "- CPU: ${cpu:-?} (family ${fam:-?}), $(nproc 2>/dev/null) online"
echo "- tern: \`$tern_bin\` ($tern_version): \`tern bench -m MODEL -p $n_prompt -n $n_gen -t T -r $reps --json\`"
echo "- llama.cpp: \`$llama_bench\` (build ${llama_build:-?}): \`llama-bench -m MODEL -p $n_prompt -n $n_gen -t T -r $reps${llama_args:+ $llama_args} -o json\`"
if [ -n "$roofline" ]; then
    echo "- placement probe (\`$roofline -P 5 -w 60\`): before: $place_before; after: $place_after"
fi
echo "- tokens/s: median over the undisturbed runs' samples (min-max); ratio = tern / llama.cpp median;"
echo "  a run is disturbed when other processes used > $max_other CPUs during it († = every run of the cell was)"
n_runs=$(ls "$out"/*.other 2>/dev/null | wc -l)
n_dist=$(cat "$out"/*.other 2>/dev/null | awk -v m="$max_other" '$1 > m { n++ } END { print n + 0 }')
echo "- runs: $n_runs, of which $n_dist disturbed (each repeated up to $retries times)"
echo

hdr="| model | size (llama-bench) | threads |"
sep="|---|---:|---:|"
if [ "$n_prompt" -gt 0 ]; then
    hdr+=" pp$n_prompt tern | pp$n_prompt llama.cpp | ratio |"; sep+="---:|---:|---:|"
fi
if [ "$n_gen" -gt 0 ]; then
    hdr+=" tg$n_gen tern | tg$n_gen llama.cpp | ratio |"; sep+="---:|---:|---:|"
fi
echo "$hdr"
echo "$sep"
for mi in "${!models[@]}"; do
    size=$(jq -s -r '[.[][] | .model_size] | first // empty' "$out"/m$mi-t*-llama.json 2>/dev/null)
    [ -n "$size" ] || size=$(jq -s -r '[.[][] | .model_size] | first // empty' "$out"/m$mi-t*-tern.json 2>/dev/null)
    [ -z "$size" ] || size=$(awk -v b="$size" 'BEGIN { printf "%.1f MiB", b / 1048576 }')
    for t in "${thread_list[@]}"; do
        row="| $(label "${models[$mi]}") | ${size:-?} | $t |"
        kinds=()
        [ "$n_prompt" -gt 0 ] && kinds+=(pp)
        [ "$n_gen" -gt 0 ] && kinds+=(tg)
        for kind in "${kinds[@]}"; do
            read -r tm tlo thi _ tk <<<"$(stats "$mi" "$t" tern "$kind")"
            read -r lm llo lhi _ lk <<<"$(stats "$mi" "$t" llama "$kind")"
            tc=$(cell "$tm" "$tlo" "$thi" "$tk"); lc=$(cell "$lm" "$llo" "$lhi" "$lk")
            [ -n "$tm" ] || tc=$(fail_text "$mi" tern)
            [ -n "$lm" ] || lc=$(fail_text "$mi" llama)
            ratio="-"
            if [ -n "$tm" ] && [ -n "$lm" ]; then
                ratio=$(awk -v a="$tm" -v b="$lm" 'BEGIN { printf "%.2fx", a / b }')
            fi
            row+=" $tc | $lc | $ratio |"
        done
        echo "$row"
    done
done
[ -z "$keep" ] || { echo; echo "Raw JSON and stderr of every run: $keep"; }
