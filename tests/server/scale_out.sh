#!/bin/sh
# scale_out.sh — two `tern serve` processes behind Debian's nginx on loopback, a conversation
# pinned to one server by consistent hashing on X-Session-Id (deploy/nginx-tern.conf, run as is):
#   scale_out.sh TERN_BIN SHARED_DIR [SESSIONS]
# nginx runs unprivileged from a temporary directory (no system service; as root it drops to
# nobody). For each session (a system prompt of its own, so sessions share no prefix) it sends
# two turns through nginx: the second repeats the first turn and its answer, and must come back
# from the same server with usage.prompt_tokens_details.cached_tokens covering the first turn's
# prompt. The same second turn sent straight to the OTHER server gets no such reuse: the
# affinity is what keeps the prefix cached. Both servers must have served sessions, streams must
# pass through nginx unbuffered to [DONE], and both servers must stop cleanly on SIGTERM.
# Exits 77 (skipped, with the reason) without nginx, curl, jq or the fixture model.
bin=$1 shared=$2 sessions=${3:-12}
dir=$(cd "$(dirname "$0")" && pwd)
conf_in="$dir/../../deploy/nginx-tern.conf"
model="$shared/fixtures/models/qwen2-tiny-q8_0.gguf"
nginx=$(command -v nginx || ls /usr/sbin/nginx 2>/dev/null) || { echo "SKIP: nginx is not installed (scripts/install-deps.sh)"; exit 77; }
command -v curl >/dev/null 2>&1 || { echo "SKIP: curl is not installed"; exit 77; }
command -v jq >/dev/null 2>&1 || { echo "SKIP: jq is not installed"; exit 77; }
[ -f "$model" ] || { echo "SKIP: fixture model $model not found (../shared)"; exit 77; }

tmp=$(mktemp -d)
pids=""
ngx_pid=""
cleanup() {
    [ -n "$ngx_pid" ] && kill -QUIT "$ngx_pid" 2>/dev/null
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    wait 2>/dev/null
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- nginx"; cat "$tmp/ngx/error.log" 2>/dev/null; for i in 1 2; do echo "--- server $i"; tail -20 "$tmp/s$i.log"; done; exit 1; }

# two servers on ports the OS picks
for i in 1 2; do
    "$bin" serve -m "$model" --port 0 -t 1 -c 1024 --parallel 2 2> "$tmp/s$i.log" &
    pids="$pids $!"
done
for i in 1 2; do
    port=""
    for k in $(seq 1 100); do
        port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\) (.*/\1/p' "$tmp/s$i.log")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || fail "tern serve $i did not start"
    eval "port$i=$port"
done

# nginx from the deployment file, on a free port (retried if another process takes it first)
mkdir -p "$tmp/ngx"
run_as=""
if [ "$(id -u)" -eq 0 ]; then
    chmod 711 "$tmp" # nobody passes through to its own folder, reads nothing else
    chown -R nobody "$tmp/ngx"
    run_as="setpriv --reuid=nobody --regid=nogroup --clear-groups"
fi
lport=""
for attempt in 1 2 3 4 5; do
    try=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000 ))
    sed -e "s|@DIR@|$tmp/ngx|g" -e "s|@LISTEN@|127.0.0.1:$try|" \
        -e "s|@SERVER1@|127.0.0.1:$port1|" -e "s|@SERVER2@|127.0.0.1:$port2|" "$conf_in" > "$tmp/ngx/nginx.conf"
    [ -n "$run_as" ] && chown nobody "$tmp/ngx/nginx.conf"
    $run_as "$nginx" -p "$tmp/ngx" -c "$tmp/ngx/nginx.conf" 2>> "$tmp/ngx/start.log" &
    ngx_pid=$!
    for k in $(seq 1 50); do
        curl -s -o /dev/null "http://127.0.0.1:$try/health" && { lport=$try; break; }
        kill -0 "$ngx_pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$lport" ] && break
    kill -QUIT "$ngx_pid" 2>/dev/null
    wait "$ngx_pid" 2>/dev/null
    ngx_pid=""
done
[ -n "$lport" ] || { cat "$tmp/ngx/start.log" "$tmp/ngx/error.log" 2>/dev/null; fail "nginx did not start"; }

# one chat request: post URL SESSION BODY_FILE OUT_PREFIX -> OUT.json (body) and OUT.h (headers)
post() {
    curl -s -D "$4.h" -o "$4.json" -H "Content-Type: application/json" -H "X-Session-Id: $2" \
        --data-binary @"$3" "$1/v1/chat/completions" || fail "curl $1 failed"
    grep -q "^HTTP/1.1 200" "$4.h" || { cat "$4.h" "$4.json"; fail "request $4 was not answered 200"; }
}
upstream() { sed -n 's/^X-Tern-Upstream: *\([^[:space:]]*\).*/\1/p' "$1.h"; }

passed=0 served1=0 served2=0
for n in $(seq 1 "$sessions"); do
    sid="session-$n-$$"
    sys="You are assistant number $n of run $$. Answer in one short sentence; session $sid keeps its own context."
    jq -n --arg s "$sys" '{messages: [{role: "system", content: $s}, {role: "user", content: "What is the capital of Norway?"}],
        temperature: 0, max_tokens: 8}' > "$tmp/t1.body"
    post "http://127.0.0.1:$lport" "$sid" "$tmp/t1.body" "$tmp/t1"
    p1=$(jq '.usage.prompt_tokens' "$tmp/t1.json")
    a1=$(jq -r '.choices[0].message.content' "$tmp/t1.json")
    jq -n --arg s "$sys" --arg a "$a1" '{messages: [{role: "system", content: $s}, {role: "user", content: "What is the capital of Norway?"},
        {role: "assistant", content: $a}, {role: "user", content: "And of Sweden?"}], temperature: 0, max_tokens: 8}' > "$tmp/t2.body"
    post "http://127.0.0.1:$lport" "$sid" "$tmp/t2.body" "$tmp/t2"
    u1=$(upstream "$tmp/t1") u2=$(upstream "$tmp/t2")
    c2=$(jq '.usage.prompt_tokens_details.cached_tokens' "$tmp/t2.json")
    [ -n "$u1" ] && [ "$u1" = "$u2" ] || fail "session $sid: turn 1 went to '$u1', turn 2 to '$u2'"
    # the first turn's prompt, up to the tokens a template may re-render differently at its end
    [ "$c2" -ge $((p1 - 4)) ] || fail "session $sid: turn 2 reused $c2 tokens through nginx, turn 1 had $p1"
    # the same turn on the other server: nothing of this session's prefix is there
    if [ "$u1" = "127.0.0.1:$port1" ]; then other=$port2; served1=$((served1 + 1)); else other=$port1; served2=$((served2 + 1)); fi
    post "http://127.0.0.1:$other" "$sid" "$tmp/t2.body" "$tmp/t3"
    c3=$(jq '.usage.prompt_tokens_details.cached_tokens' "$tmp/t3.json")
    [ "$c3" -lt $((p1 / 2)) ] || fail "session $sid: the other server reused $c3 of $p1 tokens without affinity"
    echo "session $n -> $u1: turn 1 prompt $p1, turn 2 cached $c2 (other server: $c3)"
    passed=$((passed + 1))
done
[ "$served1" -gt 0 ] && [ "$served2" -gt 0 ] || fail "all $sessions sessions hashed to one server ($served1 / $served2)"
echo "sessions per server: $served1 / $served2"

# a stream through nginx: events as they come, ending with [DONE]
jq -n '{messages: [{role: "user", content: "Count."}], stream: true, max_tokens: 6, temperature: 0,
    stream_options: {include_usage: true}}' > "$tmp/s.body"
curl -s -N -H "Content-Type: application/json" -H "X-Session-Id: stream-$$" --data-binary @"$tmp/s.body" \
    "http://127.0.0.1:$lport/v1/chat/completions" > "$tmp/s.out" || fail "streamed request failed"
tail -c 20 "$tmp/s.out" | grep -q 'data: \[DONE\]' || { cat "$tmp/s.out"; fail "the stream through nginx did not end with [DONE]"; }
grep -q '"usage"' "$tmp/s.out" || fail "the stream through nginx has no usage chunk"

# shut down: nginx, then the servers (SIGTERM: drain, exit 0)
kill -QUIT "$ngx_pid"
wait "$ngx_pid" 2>/dev/null
ngx_pid=""
for p in $pids; do
    kill -TERM "$p"
    wait "$p" || fail "tern serve (pid $p) exited with $? after SIGTERM"
done
pids=""
rm -rf "$tmp"
echo "$passed sessions pinned; 1 passed, 0 failed"
