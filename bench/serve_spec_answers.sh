#!/bin/sh
# serve_spec_answers.sh — speculative decoding through `tern serve` on real tool-call answers:
# cases of a tern eval data file sent to two servers of the same model, one with --draft SRC and
# one without, alternating, each answer ending where the model ends it (tools offered, so the
# call is constrained by the tools grammar, as an agent's request is).
#
# usage: bench/serve_spec_answers.sh -m TARGET --draft SRC [--data FILE] [-N CASES] [--echo]
#                                    [-t THREADS] [-r ROUNDS] [--port P]
#
# Each case is sent once to each server untimed (the prompt is prefilled and stays in the slot),
# then -r times to each, alternating: a repeat reuses all but the prompt's last token, so its
# time is the answer's decode (plus one prompt token and the HTTP round trip, the same on both).
# --echo: only cases whose expected calls' string values all appear verbatim in the request (as
# bench/spec_answers.sh). The answers must be the same from both servers (checked per case).
# Prints per case the medians and at the end total time with and without the draft and the
# ratio. Needs jq and curl.
set -e
BIN=${TERN_BIN:-build/bin/tern}
MODEL= DRAFT= DATA=eval/toolcalls-dev.jsonl N=20 THREADS=1 ROUNDS=3 PORT=18180 ECHO=false
while [ $# -gt 0 ]; do
    case $1 in
    -m) MODEL=$2; shift 2 ;;
    --draft) DRAFT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    -N) N=$2; shift 2 ;;
    --echo) ECHO=true; shift ;;
    -t) THREADS=$2; shift 2 ;;
    -r) ROUNDS=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "serve_spec_answers.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$MODEL" ] && [ -n "$DRAFT" ] || { echo "serve_spec_answers.sh: give -m TARGET and --draft SRC" >&2; exit 2; }
for c in jq curl; do command -v $c > /dev/null || { echo "serve_spec_answers.sh: needs $c" >&2; exit 2; }; done
[ -x "$BIN" ] || { echo "serve_spec_answers.sh: no tern binary at $BIN" >&2; exit 2; }
DIR=$(mktemp -d)
PLAIN=$PORT SPEC=$((PORT + 1))
cleanup() { kill $P1 $P2 2> /dev/null || true; wait $P1 $P2 2> /dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
$BIN serve -m "$MODEL" --port $PLAIN -t "$THREADS" -np 1 > "$DIR/plain.log" 2>&1 & P1=$!
$BIN serve -m "$MODEL" --port $SPEC -t "$THREADS" -np 1 --draft "$DRAFT" > "$DIR/spec.log" 2>&1 & P2=$!
for p in $PLAIN $SPEC; do
    i=0
    until curl -s "localhost:$p/health" > /dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 600 ] || { echo "serve_spec_answers.sh: server on $p did not start" >&2; cat "$DIR"/*.log >&2; exit 1; }
        sleep 0.1
    done
done
jq -c -L "$(dirname "$0")" --argjson echo "$ECHO" 'include "cases";
    select(.expected != null) | select(($echo | not) or echoes) | {id, slice, messages, tools}' "$DATA" | head -n "$N" > "$DIR/cases"
echo "target $MODEL, draft $DRAFT, $(wc -l < "$DIR/cases") cases of $DATA$($ECHO && echo ' (echoing the request)'), $THREADS thread(s), $ROUNDS rounds, tern serve -np 1"
echo "| case | slice | tokens | plain ms | spec ms | speed-up | same answer |"
echo "| --- | --- | ---: | ---: | ---: | ---: | --- |"
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ask() { # port -> prints "ms answer-json"
    curl -s -o "$DIR/out" -w '%{time_total}' "localhost:$1/v1/chat/completions" -d @"$DIR/req.json" > "$DIR/t"
    printf '%s %s\n' "$(awk '{ printf "%.3f", $1 * 1000 }' "$DIR/t")" "$(jq -c '[.choices[0].message.content, .choices[0].message.tool_calls[]?.function, .usage.completion_tokens]' "$DIR/out")"
}
: > "$DIR/totals"
while IFS= read -r line; do
    printf '%s\n' "$line" | jq '{model: "tern", messages, tools, temperature: 0, max_tokens: 512}' > "$DIR/req.json"
    ask $PLAIN > /dev/null; ask $SPEC > /dev/null
    : > "$DIR/p"; : > "$DIR/s"
    for r in $(seq 1 "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then ask $PLAIN >> "$DIR/p"; ask $SPEC >> "$DIR/s"
        else ask $SPEC >> "$DIR/s"; ask $PLAIN >> "$DIR/p"; fi
    done
    same=$(cut -d' ' -f2- "$DIR/p" "$DIR/s" | sort -u | wc -l)
    n=$(head -1 "$DIR/p" | cut -d' ' -f2- | jq '.[-1]')
    pms=$(cut -d' ' -f1 "$DIR/p" | median)
    sms=$(cut -d' ' -f1 "$DIR/s" | median)
    echo "$n $pms $sms" >> "$DIR/totals"
    printf '%s\n' "$line" | jq -r --arg n "$n" --arg p "$pms" --arg s "$sms" --arg same "$same" \
        '"| \(.id) | \(.slice) | \($n) | \($p) | \($s) | \(($p|tonumber) / ($s|tonumber) * 100 | floor / 100)x | \(if $same == "1" then "yes" else "NO" end) |"'
    [ "$same" = 1 ] || { echo "serve_spec_answers.sh: the answers differ with and without the draft" >&2; exit 1; }
done < "$DIR/cases"
awk '{ n += $1; p += $2; s += $3 } END { printf "total: %d tokens; plain %.0f ms, speculative %.0f ms, %.2fx\n", n, p, s, p / s }' "$DIR/totals"
grep -h "drafted" "$DIR/spec.log" | awk '{ for (i = 1; i <= NF; i++) { if ($i == "drafted") d += $(i + 1); if ($i == "kept") k += $(i + 1) } }
    END { if (d) printf "server log: drafted %d, kept %d (%.1f %%), untimed requests included\n", d, k, 100 * k / d }'
