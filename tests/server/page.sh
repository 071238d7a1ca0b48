#!/bin/sh
# page.sh — the chat page at / in headless Chromium (Debian's chromium): page.sh TERN_BIN SHARED_DIR
# The page is opened with ?q=TEXT, which types TEXT into the message box and sends it through the
# page's own submit handler; after a few seconds of the page's time the DOM must hold the user's
# message and a non-empty streamed answer, and the model name fetched from /v1/models. Exits 77
# (skipped, with the reason) without chromium or the fixture model.
bin=$1 shared=$2
model="$shared/fixtures/models/qwen2-tiny-q8_0.gguf"
browser=$(command -v chromium || command -v chromium-browser) || { echo "SKIP: chromium is not installed"; exit 77; }
[ -f "$model" ] || { echo "SKIP: fixture model $model not found (../shared)"; exit 77; }
tmp=$(mktemp -d)
# a first launch builds caches (fonts, profile) that can eat the page's time budget: do it first
timeout 90 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
    --dump-dom about:blank > /dev/null 2>&1
"$bin" serve -m "$model" --port 0 -t 1 -c 512 2> "$tmp/log" &
pid=$!
port=""
for i in $(seq 1 100); do
    port=$(sed -n 's/.*listening on http:[^ ]*:\([0-9]*\) (.*/\1/p' "$tmp/log")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "tern serve did not start:"; cat "$tmp/log"; kill $pid; exit 1; }
# The page's time is virtual, the server's is not: on a loaded machine the streamed answer can
# come after the page's budget. Up to three loads, each with a longer budget, before judging.
for budget in 8000 20000 40000; do
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/profile" \
        --virtual-time-budget=$budget --dump-dom "http://127.0.0.1:$port/?q=Hello%20from%20the%20page" \
        > "$tmp/dom.html" 2> "$tmp/browser.log"
    grep -Eq '<div class="msg assistant"[^>]*>[^<]+' "$tmp/dom.html" && break
    echo "page.sh: no answer within a virtual ${budget} ms (load: $(cut -d' ' -f1 /proc/loadavg)); loading again"
done
kill -TERM $pid
wait $pid
rc=$?
fail=0
grep -q '<div class="msg user">Hello from the page</div>' "$tmp/dom.html" || { echo "FAIL: the typed message is not shown"; fail=1; }
grep -Eq '<div class="msg assistant"[^>]*>[^<]+' "$tmp/dom.html" || { echo "FAIL: no streamed answer in the page"; fail=1; }
grep -q 'id="model">qwen2-tiny-q8_0.gguf<' "$tmp/dom.html" || { echo "FAIL: the model name from /v1/models is not shown"; fail=1; }
grep -q 'POST /v1/chat/completions 200' "$tmp/log" || { echo "FAIL: the server saw no chat request"; fail=1; }
[ $rc -eq 0 ] || { echo "FAIL: tern serve exited with $rc after SIGTERM"; fail=1; }
if [ $fail -ne 0 ]; then
    echo "--- DOM"; head -c 3000 "$tmp/dom.html"; echo "--- server"; cat "$tmp/log"
    echo "0 passed, 1 failed"; exit 1
fi
rm -rf "$tmp"
echo "1 passed, 0 failed"
