#!/bin/sh
# make_toolcalls.sh — rebuilds bench/suites/toolcalls.jsonl, the suite `tern bench --suite` ships:
# five cases of tern's development set (eval/toolcalls-dev.jsonl, itself made by `tern corpus
# toolcalls` and `tern eval cases`; docs/eval.md), one per slice and growing in length
# (rendered: ~0.8k to ~3k bytes, 1 to 5 tools), so the prompt-length buckets fill and one prompt
# offers a tool it should not need. Only the request is kept ({"id", "messages", "tools"}); the
# expected calls stay in the dev set. Needs jq.
set -e
cd "$(dirname "$0")/../.."
for id in 1332.2 2665.2 2750.2 2191.2 1112.2; do
    jq -c --arg id "$id" 'select(.id == $id) | {id, messages, tools}' eval/toolcalls-dev.jsonl
done > bench/suites/toolcalls.jsonl
wc -l bench/suites/toolcalls.jsonl
