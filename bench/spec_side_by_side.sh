#!/usr/bin/env bash
# spec_side_by_side.sh — tern's speculative decoding and llama.cpp's `llama-speculative` on the
# same target/drafter pair and the same prompt files, in alternating runs.
#
# For each round and prompt it runs `tern run --draft` and `llama-speculative` (the order flips
# every round), both greedy, with the same prompt text (control tokens parsed), the same -n and
# thread count, and prints one markdown table: per prompt and engine the median decode tokens/s
# over the rounds (min-max beside it), the acceptance rate, and the ratio tern/llama.cpp. tern's
# plain decoding of the same prompt (no drafter) runs in the same rounds as a reference.
# Decode tokens/s: tern's "spec.tps" (tokens after the first / generation time, drafting
# included); llama-speculative's "decoded N tokens in T seconds" line (everything after the
# prompt, drafting included).
#
# Both engines draft with their defaults unless --draft-max K is given; --fixed makes tern's
# length fixed at K (--draft-min K) and llama.cpp's minimum K with --draft-p-min 0 (no early
# stop), so both verify K drafts per round. --ignore-eos makes both generate -n tokens (the
# models' own answers are short).
#
# It only RUNS a llama-speculative binary you give it; it never builds or downloads llama.cpp.
# Needs: bash, jq, awk.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
tern="$repo/build/bin/tern"
llama=""
target=""
drafter=""
n=128
threads=1
rounds=5
kmax=""
fixed=0
ignore_eos=0
prompts=()

usage() {
    cat <<EOF
usage: bench/spec_side_by_side.sh --llama-speculative PATH -m TARGET.gguf -md DRAFTER.gguf
                                  [options] PROMPT.txt...

  --llama-speculative PATH  llama.cpp's llama-speculative binary (required)
  --tern PATH               tern binary (default: $repo/build/bin/tern)
  -m FILE, -md FILE         the target and the drafter (both engines load the same files)
  -n N                      tokens to generate (default 128)
  -t N                      threads (default 1)
  -r N                      rounds (default 5)
  --draft-max K             most drafts per round in both engines (default: each engine's own)
  --fixed                   with --draft-max: always K drafts in both (tern --draft-min K,
                            llama.cpp --draft-min K --draft-p-min 0)
  --ignore-eos              generate -n tokens in both, past end-of-turn
EOF
}

while [ $# -gt 0 ]; do
    case "$1" in
        --llama-speculative) llama="$2"; shift 2 ;;
        --tern) tern="$2"; shift 2 ;;
        -m) target="$2"; shift 2 ;;
        -md) drafter="$2"; shift 2 ;;
        -n) n="$2"; shift 2 ;;
        -t) threads="$2"; shift 2 ;;
        -r) rounds="$2"; shift 2 ;;
        --draft-max) kmax="$2"; shift 2 ;;
        --fixed) fixed=1; shift ;;
        --ignore-eos) ignore_eos=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "spec_side_by_side.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
        *) prompts+=("$1"); shift ;;
    esac
done
if [ -z "$llama" ] || [ -z "$target" ] || [ -z "$drafter" ] || [ ${#prompts[@]} -eq 0 ]; then
    usage >&2
    exit 2
fi
for f in "$llama" "$tern"; do
    [ -x "$f" ] || { echo "spec_side_by_side.sh: $f is not an executable" >&2; exit 2; }
done
for f in "$target" "$drafter" "${prompts[@]}"; do
    [ -r "$f" ] || { echo "spec_side_by_side.sh: cannot read $f" >&2; exit 2; }
done
if [ "$fixed" = 1 ] && [ -z "$kmax" ]; then
    echo "spec_side_by_side.sh: --fixed needs --draft-max K" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tern_args=(-m "$target" -n "$n" -t "$threads" --temp 0 --parse-special --json)
spec_args=()
llama_args=(-m "$target" -md "$drafter" -n "$n" -t "$threads" --temp 0 -c 4096 -cd 4096)
[ "$ignore_eos" = 1 ] && tern_args+=(--ignore-eos) && llama_args+=(--ignore-eos)
if [ -n "$kmax" ]; then
    spec_args+=(--draft-max "$kmax")
    llama_args+=(--draft-max "$kmax")
    [ "$fixed" = 1 ] && spec_args+=(--draft-min "$kmax") && llama_args+=(--draft-min "$kmax" --draft-p-min 0)
fi

# one line per run: PROMPT ENGINE TOKENS_PER_S ACCEPT_RATE
run_tern() { # prompt-index file draft?
    local out="$tmp/tern.json"
    if [ "$3" = 1 ]; then
        "$tern" run "${tern_args[@]}" --draft "$drafter" ${spec_args[@]+"${spec_args[@]}"} -f "$2" > "$out" 2> "$tmp/tern.err" || {
            echo "tern failed: $(head -1 "$tmp/tern.err")" >&2; return 1; }
        jq -r --arg p "$1" '"\($p) tern-spec \(.spec.tps) \(.spec.accept_rate)"' "$out"
    else
        "$tern" run "${tern_args[@]}" -f "$2" > "$out" 2> "$tmp/tern.err" || {
            echo "tern failed: $(head -1 "$tmp/tern.err")" >&2; return 1; }
        jq -r --arg p "$1" '"\($p) tern-plain \((.n_generated - 1) / .gen_ms * 1000) 0"' "$out"
    fi
}
run_llama() { # prompt-index file
    "$llama" "${llama_args[@]}" -f "$2" > "$tmp/llama.out" 2>&1 || {
        echo "llama-speculative failed: $(grep -m1 -i error "$tmp/llama.out")" >&2; return 1; }
    awk -v p="$1" '/^decoded/ {tps = $(NF - 1)} /^accept *=/ {acc = $3 + 0} END {print p, "llama-spec", tps, acc / 100}' "$tmp/llama.out"
}

results="$tmp/results"
: > "$results"
for r in $(seq 1 "$rounds"); do
    for i in "${!prompts[@]}"; do
        f="${prompts[$i]}"
        if [ $((r % 2)) = 1 ]; then
            run_tern "$i" "$f" 1 >> "$results"; run_llama "$i" "$f" >> "$results"; run_tern "$i" "$f" 0 >> "$results"
        else
            run_tern "$i" "$f" 0 >> "$results"; run_llama "$i" "$f" >> "$results"; run_tern "$i" "$f" 1 >> "$results"
        fi
    done
done

echo "target $(basename "$target"), drafter $(basename "$drafter"), -n $n, $threads threads, $rounds rounds alternating, draft-max ${kmax:-default}$([ "$fixed" = 1 ] && echo " fixed")$([ "$ignore_eos" = 1 ] && echo ", ignore-eos")"
echo
echo "| prompt | tern plain t/s | tern spec t/s (min-max) | accepted | llama-speculative t/s (min-max) | accepted | tern spec / llama-spec |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for i in "${!prompts[@]}"; do
    awk -v p="$i" -v name="$(basename "${prompts[$i]}")" '
        function med(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
                                        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
        $1 == p && $2 == "tern-plain" { pl[++np] = $3 }
        $1 == p && $2 == "tern-spec" { ts[++nt] = $3; ta[nt] = $4 }
        $1 == p && $2 == "llama-spec" { ls[++nl] = $3; la[nl] = $4 }
        END {
            if (!nt || !nl || !np) { printf "| %s | missing runs |\n", name; exit }
            mp = med(pl, np); mt = med(ts, nt); ml = med(ls, nl); at = med(ta, nt); al = med(la, nl)
            printf "| %s | %.0f | %.0f (%.0f-%.0f) | %.1f %% | %.0f (%.0f-%.0f) | %.1f %% | %.2fx |\n",
                   name, mp, mt, ts[1], ts[nt], 100 * at, ml, ls[1], ls[nl], 100 * al, mt / ml
        }' "$results"
done
