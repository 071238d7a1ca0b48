#!/bin/sh
# `make demo`: tern's main job on an embedded default, no download. Writes a random-weight model
# with the exact shape of Qwen2.5-0.5B (Q8_0) using tern's own GGUF writer and quantizer,
# validates it, generates from a text prompt, and prints the speed table.
set -e
BIN=build/bin/tern
DIR=${TERN_SYNTH_DIR:-${TMPDIR:-/tmp}/tern-synth}
mkdir -p "$DIR"
MODEL="$DIR/qwen2.5-0.5b-q8_0.gguf"
if [ ! -f "$MODEL" ]; then
    echo "== tern synth qwen2.5-0.5b:q8_0 -o $MODEL"
    $BIN synth qwen2.5-0.5b:q8_0 -o "$MODEL"
fi
echo "== tern check -m $MODEL"
$BIN check -m "$MODEL"
echo
echo "== tern run -m $MODEL -p 'Hello' -n 32 --ignore-eos   (random weights: the text is noise)"
echo "   (most sampled ids are the vocabulary's unused padding tokens, which print as nothing;"
echo "    --json shows the ids)"
$BIN run -m "$MODEL" -p "Hello" -n 32 --ignore-eos
$BIN run -m "$MODEL" -p "Hello" -n 32 --ignore-eos --json
echo
echo "== tern bench -m $MODEL -p 512 -n 128 -r 3"
TERN_SYNTH_DIR="$DIR" $BIN bench -m "$MODEL" -p 512 -n 128 -r 3
