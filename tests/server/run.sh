#!/bin/sh
# run.sh — ctest's entry to the node tests of tern serve: run.sh SCRIPT TERN_BIN SHARED_DIR [ARGS]
# Exits 77 (skipped, with the reason) when node, the openai package (scripts/install-deps.sh runs
# npm ci here) or the fixture model (../shared) is missing.
dir=$(cd "$(dirname "$0")" && pwd)
script=$1 bin=$2 shared=$3
shift 3
model="$shared/fixtures/models/qwen2-tiny-q8_0.gguf"
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed"; exit 77; }
[ -f "$dir/node_modules/openai/package.json" ] || { echo "SKIP: the openai npm package is not installed (npm ci --prefix tests/server)"; exit 77; }
[ -f "$model" ] || { echo "SKIP: fixture model $model not found (../shared)"; exit 77; }
exec node "$dir/$script" "$bin" "$model" "$@"
