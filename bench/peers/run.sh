#!/usr/bin/env bash
# run.sh — tern side by side with the best library at each layer, in one run, one table:
#   tokenizer   Hugging Face tokenizers (ids on the fixtures' test texts and 10 MB of mixed text,
#               single-thread speed)                          bench/peers/tokenizers_compare.py
#   grammar     XGrammar and LLGuidance (compile and mask time, schemas supported, agreement of
#               the allowed tokens at every step)             bench/peers/grammar_compare.py
#   trainer     PyTorch 2.x: full training of one shape, and LoRA on a real base (forward,
#               backward, AdamW tokens/s)                      bench/train_side_by_side.sh,
#                                                              bench/peers/lora_side_by_side.sh
# The peers live in a virtual environment made here (bench/peers/.venv, or $PEERS_VENV) from the
# pinned bench/peers/requirements.txt; a peer that cannot be installed or imported gets a row
# saying why, and the rest still runs. Engines alternate within each comparison (rounds of tern,
# peer, tern, peer) so that both see the same minutes of a shared machine; still, pause
# background jobs first (kill -STOP / -CONT). Not part of `make test`.
#
# Output: every comparison's log and the table (table.md, headed by the date, the CPU and this
# command) in $OUT (default bench/peers/out/DATE); the table also on stdout.
#
# usage: bench/peers/run.sh [--quick] [--only tokenizer|grammar|trainer]
#   --quick   small sizes (1 MB of text, fewer schemas and rounds): a check that it all runs
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TERN=${TERN:-$ROOT/build/bin/tern}
VENV=${PEERS_VENV:-$ROOT/bench/peers/.venv}
MODELS=${TERN_MODELS_DIR:-$HOME/.local/share/tern/models}
QUICK=0 ONLY=""
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --only) ONLY=${2:?--only needs tokenizer, grammar or trainer}; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
OUT=${OUT:-$ROOT/bench/peers/out/$(date -u +%Y-%m-%dT%H%M)}
mkdir -p "$OUT"
[ -x "$TERN" ] || { echo "run.sh: build tern first ($TERN missing: make)" >&2; exit 2; }
ROWS="$OUT/rows.txt"
: > "$ROWS"
row() { # row LAYER PEER METRIC NOTE: a row without figures (the comparison could not run)
    python3 -c 'import json,sys; print("ROW " + json.dumps({"layer": sys.argv[1], "peer": sys.argv[2],
        "metric": sys.argv[3], "note": sys.argv[4]}))' "$@" >> "$ROWS"
}
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# ---- the virtual environment of the peers ----
if [ ! -x "$VENV/bin/python" ]; then
    echo "creating $VENV" >&2
    python3 -m venv "$VENV" > "$OUT/venv.log" 2>&1 ||
        { echo "run.sh: python3 -m venv failed (Debian: apt-get install python3-venv); see $OUT/venv.log" >&2; exit 2; }
fi
PY=$VENV/bin/python
echo "installing the pinned peers (bench/peers/requirements.txt) into $VENV" >&2
"$PY" -m pip install -q -r "$ROOT/bench/peers/requirements.txt" > "$OUT/pip.log" 2>&1 ||
    echo "run.sh: pip could not install every pinned peer (reason: $(tail -1 "$OUT/pip.log")); going on with what imports" >&2
version() { "$PY" -c "import importlib.metadata as m, $1; print(m.version('$1'))" 2>/dev/null; }
why_not() { "$PY" -c "import $1" 2>&1 | tail -1; }

# ---- tokenizers ----
if want tokenizer; then
    V=$(version tokenizers)
    if [ -z "$V" ] || [ -z "$(version transformers)" ]; then
        row "tokenizer" "tokenizers" "all" "not importable: $(why_not tokenizers) / $(why_not transformers)"
    else
        found=0
        for f in smollm2-135m-instruct-q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf gemma-3-270m-q4_k_m.gguf; do
            [ -f "$MODELS/$f" ] || continue
            found=1
            echo "tokenizer: $f" >&2
            "$PY" "$ROOT/bench/peers/tokenizers_compare.py" --tern "$TERN" --mb $([ $QUICK = 1 ] && echo 1 || echo 10) \
                --repeat $([ $QUICK = 1 ] && echo 3 || echo 5) "$MODELS/$f" 2>> "$OUT/tokenizers.log" |
                tee -a "$OUT/tokenizers.jsonl" | grep '^ROW ' >> "$ROWS" ||
                row "tokenizer $f" "tokenizers $V" "all" "the comparison failed: see $OUT/tokenizers.log"
        done
        [ $found = 1 ] || row "tokenizer" "tokenizers $V" "all" "no real model installed (scripts/install-models.py)"
    fi
fi

# ---- grammar engines ----
if want grammar; then
    if [ -f "$ROOT/bench/peers/grammar_compare.py" ]; then
        echo "grammar: XGrammar $(version xgrammar), LLGuidance $(version llguidance)" >&2
        vocabs=""
        for f in smollm2-135m-instruct-q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf gemma-3-270m-q4_k_m.gguf; do
            [ -f "$MODELS/$f" ] && vocabs="$vocabs $MODELS/$f"
        done
        if [ -z "$vocabs" ]; then
            row "grammar" "XGrammar, LLGuidance" "all" "no real model installed (scripts/install-models.py)"
        else
            # shellcheck disable=SC2086
            "$PY" "$ROOT/bench/peers/grammar_compare.py" --tern "$TERN" $([ $QUICK = 1 ] && echo "--limit 8 --reps 2") \
                --table "$OUT/grammar-table.md" $vocabs 2>> "$OUT/grammar.log" | tee -a "$OUT/grammar.jsonl" |
                grep '^ROW ' >> "$ROWS" ||
                row "grammar" "XGrammar, LLGuidance" "all" "the comparison failed: see $OUT/grammar.log"
        fi
    else
        row "grammar" "XGrammar, LLGuidance" "all" "bench/peers/grammar_compare.py is missing"
    fi
fi

# ---- trainer ----
if want trainer; then
    TV=$(version torch)
    if [ -z "$TV" ]; then
        row "trainer" "PyTorch" "all" "not importable: $(why_not torch)"
    else
        rounds=$([ $QUICK = 1 ] && echo 1 || echo 3)
        echo "trainer: full training, PyTorch $TV" >&2
        PYTHON=$PY TERN=$TERN bash "$ROOT/bench/train_side_by_side.sh" "$rounds" 3 2 > "$OUT/train_full.log" 2>&1
        # "| tern train (2 threads) | 1234 | 1.23 |" and "| PyTorch 2.15.0 (2 threads) | 567 | 2.34 |"
        awk -F'|' -v tv="PyTorch $TV" '
            /^\| tern train/ { t = $3 + 0; tc = $4 + 0 }
            /^\| PyTorch/    { p = $3 + 0; pc = $4 + 0 }
            END { if (t > 0 && p > 0) {
                printf "ROW {\"layer\": \"trainer, full (llama 384x6, n_ctx 1024, F32, 2 threads)\", \"peer\": \"%s\", \"metric\": \"tokens/s, forward + backward + AdamW\", \"tern\": %.1f, \"peer_value\": %.1f, \"ratio\": %.4f}\n", tv, t, p, t / p
                printf "ROW {\"layer\": \"trainer, full (llama 384x6, n_ctx 1024, F32, 2 threads)\", \"peer\": \"%s\", \"metric\": \"CPU s per step (lower is better; ratio = peer / tern)\", \"tern\": %.2f, \"peer_value\": %.2f, \"ratio\": %.4f}\n", tv, tc, pc, pc / tc } }
        ' "$OUT/train_full.log" >> "$ROWS"
        grep -q '"layer": "trainer, full' "$ROWS" || row "trainer, full" "PyTorch $TV" "tokens/s" "failed: see $OUT/train_full.log"
        base="$MODELS/smollm2-135m-instruct-q4_1.gguf"
        if [ -f "$base" ]; then
            echo "trainer: LoRA on $(basename "$base"), PyTorch $TV" >&2
            PYTHON=$PY TERN=$TERN bash "$ROOT/bench/peers/lora_side_by_side.sh" "$base" "$rounds" 4 2 16 > "$OUT/train_lora.log" 2>&1
            # "median: tern 258, PyTorch 2.15.0 161 tokens/s; tern / PyTorch 1.60x"
            awk -v tv="PyTorch $TV" '/^median:/ {
                t = $3 + 0; p = $6 + 0
                if (t > 0 && p > 0)
                    printf "ROW {\"layer\": \"trainer, LoRA rank 16 (SmolLM2-135M shape, n_ctx 1024, 2 threads)\", \"peer\": \"%s\", \"metric\": \"tokens/s, forward + backward + AdamW\", \"tern\": %.1f, \"peer_value\": %.1f, \"ratio\": %.4f}\n", tv, t, p, t / p }
            ' "$OUT/train_lora.log" >> "$ROWS"
            grep -q '"layer": "trainer, LoRA' "$ROWS" || row "trainer, LoRA" "PyTorch $TV" "tokens/s" "failed: see $OUT/train_lora.log"
        else
            row "trainer, LoRA" "PyTorch $TV" "tokens/s" "smollm2-135m-instruct not installed (scripts/install-models.py)"
        fi
    fi
fi

{
    echo "bench/peers/run.sh $([ $QUICK = 1 ] && echo --quick) $([ -n "$ONLY" ] && echo "--only $ONLY"), $(date -u '+%Y-%m-%d %H:%M UTC'),"
    echo "$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), tern $(git -C "$ROOT" rev-parse --short HEAD)"
    echo
    python3 "$ROOT/bench/peers/table.py" "$ROWS"
} | tee "$OUT/table.md"
