#!/bin/sh
# serve_overhead.sh — what `tern serve` adds to time to first token over the library called
# directly (docs/results/server-2026-11.md, target <= 1 ms). Starts `tern serve -m MODEL -np 1 -c
# 2048 -t T` on loopback, then alternates ROUNDS times: N chat requests one at a time through HTTP
# (curl, non-streamed, max_tokens 1: the response is the first token; or with CLIENT=node
# bench/serve_ttft.mjs, streamed, which counts Node's own work too) and the same N requests through
# the library in a separate process (build/bin/bench_ttft: render, tokenize, generate to the first
# token on one generator that keeps its KV like a server slot). Every request of the run is a
# different conversation (request numbers never repeat), so both sides compute the same prompt
# suffix. Prints each round's JSON and the median difference (server - library).
#
#   sh bench/serve_overhead.sh MODEL [N=30] [ROUNDS=3] [THREADS=2] [PORT=18431]
#   CLIENT=node sh bench/serve_overhead.sh ...   (the Node client, streamed, as serve_ttft.mjs)
set -eu
cd "$(dirname "$0")/.."
MODEL=${1:?usage: serve_overhead.sh MODEL [N] [ROUNDS] [THREADS] [PORT]}
N=${2:-30}; ROUNDS=${3:-3}; T=${4:-2}; PORT=${5:-18431}; CLIENT=${CLIENT:-curl}
[ -x build/bin/tern ] && [ -x build/bin/bench_ttft ] || { echo "serve_overhead.sh: build first (make)" >&2; exit 1; }
build/bin/tern serve -m "$MODEL" -np 1 -c 2048 -t "$T" --port "$PORT" >/tmp/serve_overhead.$$.log 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    kill -0 $SRV 2>/dev/null || { cat /tmp/serve_overhead.$$.log >&2; exit 1; }
    sleep 0.2
done
# curl (C, no client work to speak of): request i non-streamed with max_tokens 1, so the whole
# response is the first token; the same warm-up and request numbers as serve_ttft.mjs
curl_ttft() {
    for i in $(seq "$1" $(($1 + N))); do
        body="{\"messages\": [{\"role\": \"user\", \"content\": \"Request $i: what is the weather in Paris today? Answer in one short sentence.\"}], \"max_tokens\": 1, \"temperature\": 0, \"ignore_eos\": true}"
        curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' -d "$body" \
            "http://127.0.0.1:$PORT/v1/chat/completions"
    done | tail -n "$N" | sort -n | awk '{ a[NR] = $1 * 1000 } END { printf "{\"requests\": %d, \"client\": \"curl\", \"ttft_ms_p50\": %.3f, \"ttft_ms_p10\": %.3f, \"ttft_ms_p90\": %.3f}\n", NR, a[int((NR + 1) / 2)], a[int(NR * 0.1 + 1)], a[int(NR * 0.9)] }'
}
out=""
for r in $(seq "$ROUNDS"); do
    if [ "$CLIENT" = node ]; then
        s=$(node bench/serve_ttft.mjs "http://127.0.0.1:$PORT" "$N" $((r * 2000)))
    else
        s=$(curl_ttft $((r * 2000)))
    fi
    l=$(build/bin/bench_ttft "$MODEL" "$N" "$T" $((r * 2000 + 1000)))
    echo "round $r server:  $s"
    echo "round $r library: $l"
    out="$out $(echo "$s" | sed 's/.*"ttft_ms_p50": *\([0-9.]*\).*/\1/'):$(echo "$l" | sed 's/.*"ttft_ms_p50": *\([0-9.]*\).*/\1/')"
done
echo "$out" | tr ' ' '\n' | awk -F: 'NF == 2 { d = $1 - $2; printf "round %d: server %.3f ms, library %.3f ms, server adds %.3f ms\n", ++i, $1, $2, d }'
rm -f /tmp/serve_overhead.$$.log
