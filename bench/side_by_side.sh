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
# Needs: bash, jq, awk. Raw JSON of every run is kept in --keep DIR (default: a temp dir that is
# removed at the end).
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

usage() {
    cat <<EOF
usage: bench/side_by_side.sh --llama-bench PATH [options] MODEL.gguf...

  --llama-bench PATH  llama.cpp's llama-bench binary (required)
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
  -h, --help          this text

Example:
  flock /tmp/tern-bench.lock bench/side_by_side.sh --llama-bench ~/llama.cpp/build/bin/llama-bench \\
      -t 2,1 -r 3 qwen-q8_0.gguf llama-q4_0.gguf
EOF
}

die() { echo "side_by_side.sh: $*" >&2; exit 2; }

llama_bench="" tern_bin="$repo/build/bin/tern" threads="2" rounds=3 n_prompt=512 n_gen=128
reps=1 roofline="" use_roofline=1 keep="" models=()
while [ $# -gt 0 ]; do
    case "$1" in
    -h | --help) usage; exit 0 ;;
    --llama-bench) [ $# -ge 2 ] || die "$1 needs a value"; llama_bench=$2; shift 2 ;;
    --tern) [ $# -ge 2 ] || die "$1 needs a value"; tern_bin=$2; shift 2 ;;
    -t) [ $# -ge 2 ] || die "$1 needs a value"; threads=$2; shift 2 ;;
    -r) [ $# -ge 2 ] || die "$1 needs a value"; rounds=$2; shift 2 ;;
    -p) [ $# -ge 2 ] || die "$1 needs a value"; n_prompt=$2; shift 2 ;;
    -n) [ $# -ge 2 ] || die "$1 needs a value"; n_gen=$2; shift 2 ;;
    --reps) [ $# -ge 2 ] || die "$1 needs a value"; reps=$2; shift 2 ;;
    --roofline) [ $# -ge 2 ] || die "$1 needs a value"; roofline=$2; shift 2 ;;
    --no-roofline) use_roofline=0; shift ;;
    --keep) [ $# -ge 2 ] || die "$1 needs a value"; keep=$2; shift 2 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) models+=("$1"); shift ;;
    esac
done

[ -n "$llama_bench" ] || { usage >&2; die "--llama-bench PATH is required"; }
[ -x "$llama_bench" ] || die "llama-bench '$llama_bench' is not an executable file"
[ -x "$tern_bin" ] || die "tern binary '$tern_bin' not found (build with make, or give --tern)"
[ ${#models[@]} -gt 0 ] || die "give at least one MODEL.gguf"
command -v jq >/dev/null || die "jq is needed (scripts/install-deps.sh installs it)"
for v in "$rounds" "$n_prompt" "$n_gen" "$reps"; do
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

# run ENGINE MODEL_INDEX THREADS ROUND: one engine run, JSON into $out/<name>.json
run() {
    local engine=$1 mi=$2 t=$3 r=$4 model=${models[$2]}
    local base="$out/m$mi-t$t-r$r-$engine"
    if [ "$engine" = tern ]; then
        "$tern_bin" bench -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r "$reps" --json \
            >"$base.json" 2>"$base.err"
    else
        "$llama_bench" -m "$model" -p "$n_prompt" -n "$n_gen" -t "$t" -r "$reps" -o json \
            >"$base.json" 2>"$base.err"
    fi
    local rc=$?
    if [ $rc -ne 0 ] || ! jq -e 'type == "array" and length > 0' "$base.json" >/dev/null 2>&1; then
        echo "  $engine $(label "$model") -t $t round $r: FAILED (exit $rc)" >&2
        rm -f "$base.json"
    fi
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

# stats MI T ENGINE KIND: "median min max count" of all samples_ts of that test kind, or nothing
stats() {
    local files=("$out"/m$1-t$2-r*-$3.json)
    [ -e "${files[0]}" ] || return 0
    jq -s -r --arg kind "$4" '
        [ .[][] | select(if $kind == "pp" then .n_prompt > 0 and .n_gen == 0
                         else .n_gen > 0 and .n_prompt == 0 end) | .samples_ts[] ] | sort
        | if length == 0 then empty else
            "\(if length % 2 == 1 then .[length / 2 | floor]
               else (.[length / 2 - 1] + .[length / 2]) / 2 end) \(.[0]) \(.[-1]) \(length)"
          end' "${files[@]}"
}

# cell MEDIAN MIN MAX N -> "123.4 (120.0-125.1)"; failure text if empty
cell() {
    if [ -z "$1" ]; then echo "$2"; return; fi
    awk -v m="$1" -v lo="$2" -v hi="$3" 'BEGIN { printf "%.1f (%.1f-%.1f)", m, lo, hi }'
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
echo "- llama.cpp: \`$llama_bench\` (build ${llama_build:-?}): \`llama-bench -m MODEL -p $n_prompt -n $n_gen -t T -r $reps -o json\`"
if [ -n "$roofline" ]; then
    echo "- placement probe (\`$roofline -P 5 -w 60\`): before: $place_before; after: $place_after"
fi
echo "- tokens/s: median over rounds x reps (min-max); ratio = tern / llama.cpp median"
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
            read -r tm tlo thi tn <<<"$(stats "$mi" "$t" tern "$kind")"
            read -r lm llo lhi ln <<<"$(stats "$mi" "$t" llama "$kind")"
            tc=$(cell "$tm" "$tlo" "$thi"); lc=$(cell "$lm" "$llo" "$lhi")
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
