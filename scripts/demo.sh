#!/bin/sh
# `make demo`: tern's main job on an embedded default, no download. Writes a small random-weight
# model with tern's own GGUF writer, checks it, and generates from it.
set -e
BIN=build/bin/tern
DIR=${TMPDIR:-/tmp}/tern-demo
mkdir -p "$DIR"
MODEL="$DIR/tiny-q8_0.gguf"
echo "== tern synth tiny:q8_0 -o $MODEL"
$BIN synth tiny:q8_0 -o "$MODEL"
echo "== tern check -m $MODEL"
$BIN check -m "$MODEL"
echo "== tern run -m $MODEL --tokens 256,72,101,108,108,111 -n 32   (random weights: the ids are noise)"
$BIN run -m "$MODEL" --tokens 256,72,101,108,108,111 -n 32
