#!/bin/sh
# spec_answers.sh — speculative decoding on real answers: cases of a tern eval data file (e.g.
# eval/toolcalls-dev.jsonl) answered by `tern chat` with and without a draft, alternating, each
# answer ending where the model ends it (no --ignore-eos: what a user of tool calls gets).
#
# usage: bench/spec_answers.sh -m TARGET --draft SRC [--data FILE] [-N CASES] [--slices a,b] [--echo]
#                              [-t THREADS] [-r ROUNDS] [--chat-args "MORE"]   (speculative runs only,
#                              e.g. "--draft-min 3 --draft-max 3" to keep speculation on)
#
# --echo: only cases whose expected calls echo the request: every string argument value appears
# verbatim in the messages (what prompt lookup is for; 99 of the 308 development cases).
#
# Per case: tokens generated, acceptance, and the decode time (tokens after the first over their
# time, tern chat's gen_ms) of both runs, medians over -r rounds; the output must be the same
# (the greedy identity, checked on every case). At the end the totals: acceptance over all
# drafts, and tokens/s summed over every case (total generated tokens over total decode time)
# with speculation and without, and their ratio. Needs jq.
set -e
BIN=${TERN_BIN:-build/bin/tern}
MODEL= DRAFT= DATA=eval/toolcalls-dev.jsonl N=20 SLICES= THREADS=1 ROUNDS=3 MORE= ECHO=false
while [ $# -gt 0 ]; do
    case $1 in
    -m) MODEL=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    -N) N=$2; shift 2 ;;
    --slices) SLICES=$2; shift 2 ;;
    --echo) ECHO=true; shift ;;
    -t) THREADS=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    --chat-args) MORE=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "spec_answers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$MODEL" ] && [ -n "$DRAFT" ] || { echo "spec_answers.sh: give -m TARGET and --draft SRC" >&2; exit 2; }
command -v jq > /dev/null || { echo "spec_answers.sh: needs jq" >&2; exit 2; }
[ -r "$DATA" ] || { echo "spec_answers.sh: cannot read $DATA" >&2; exit 2; }
[ -x "$BIN" ] || { echo "spec_answers.sh: no tern binary at $BIN (run from the checkout, or set TERN_BIN)" >&2; exit 2; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
# the first N cases of the chosen slices, each as a {"messages", "tools"} file
jq -c -L "$(dirname "$0")" --arg s "$SLICES" --argjson echo "$ECHO" 'include "cases";
    select($s == "" or (.slice as $x | $s | split(",") | index($x))) | select(($echo | not) or echoes)
    | {id, slice, messages, tools}' "$DATA" | head -n "$N" > "$DIR/cases"
[ -s "$DIR/cases" ] || { echo "spec_answers.sh: no case of $DATA matches" >&2; exit 2; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
chat() { # $1 = case file, then extra flags; prints the last JSON line (the answer and its stats)
    f=$1; shift
    more= # --chat-args are draft flags (--draft-min ...): plain decoding refuses them
    case " $* " in *" --draft "*) more=$MORE ;; esac
    $BIN chat -m "$MODEL" --messages "$f" --json -t "$THREADS" $more "$@" < /dev/null 2> /dev/null | tail -1
}
echo "target $MODEL, draft $DRAFT, $(wc -l < "$DIR/cases") cases of $DATA${SLICES:+ (slices $SLICES)}$($ECHO && echo ' (echoing the request)'), $THREADS thread(s), $ROUNDS rounds${MORE:+, $MORE}"
echo "| case | slice | tokens | plain t/s | spec t/s | speed-up | drafted | accepted | same output |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
i=0
: > "$DIR/totals"
while IFS= read -r line; do
    i=$((i + 1))
    printf '%s\n' "$line" | jq '{messages, tools}' > "$DIR/case.json"
    : > "$DIR/p"; : > "$DIR/s"
    for r in $(seq 1 "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then chat "$DIR/case.json" >> "$DIR/p"; chat "$DIR/case.json" --draft "$DRAFT" >> "$DIR/s"
        else chat "$DIR/case.json" --draft "$DRAFT" >> "$DIR/s"; chat "$DIR/case.json" >> "$DIR/p"; fi
    done
    for f in "$DIR/p" "$DIR/s"; do
        [ "$(jq -s 'map(select(.stats.n_generated != null)) | length' "$f")" = "$ROUNDS" ] ||
            { echo "spec_answers.sh: case $i: tern chat gave no answer (run it by hand: $BIN chat -m $MODEL --messages FILE --json)" >&2; exit 1; }
    done
    same=$(jq -s -r '[.[] | (.content // "") + ((.tool_calls // []) | tostring)] | unique | length' "$DIR/p" "$DIR/s")
    n=$(head -1 "$DIR/p" | jq .stats.n_generated)
    pms=$(jq .stats.gen_ms "$DIR/p" | median)
    sms=$(jq .stats.gen_ms "$DIR/s" | median)
    dr=$(head -1 "$DIR/s" | jq .stats.spec.drafted)
    ac=$(head -1 "$DIR/s" | jq .stats.spec.accepted)
    echo "$n $pms $sms $dr $ac" >> "$DIR/totals"
    printf '%s\n' "$line" | jq -r --arg n "$n" --arg p "$pms" --arg s "$sms" --arg d "$dr" --arg a "$ac" --arg same "$same" \
        '"| \(.id) | \(.slice) | \($n) | \(if ($p|tonumber) > 0 then (($n|tonumber) - 1) * 1000 / ($p|tonumber) | floor else "-" end) | \(if ($s|tonumber) > 0 then (($n|tonumber) - 1) * 1000 / ($s|tonumber) | floor else "-" end) | \(if ($s|tonumber) > 0 then ($p|tonumber) / ($s|tonumber) * 100 | floor / 100 | tostring + "x" else "-" end) | \($d) | \($a) | \(if $same == "1" then "yes" else "NO" end) |"'
    [ "$same" = 1 ] || { echo "spec_answers.sh: case $i: the answers differ with and without the draft" >&2; exit 1; }
done < "$DIR/cases"
awk '{ n += $1 - 1; p += $2; s += $3; d += $4; a += $5 }
     END { printf "total: %d tokens after the first; plain %.1f t/s, speculative %.1f t/s, %.2fx; acceptance %d / %d = %.1f %%\n",
           n, n * 1000 / p, n * 1000 / s, p / s, a, d, d ? 100 * a / d : 0 }' "$DIR/totals"
