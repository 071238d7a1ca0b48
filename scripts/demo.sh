#!/bin/sh
# `make demo`: tern's main job on real models, offline, in well under 3 minutes after the build.
#   1. the real models installed from packages (scripts/install-models.py; tern models);
#   2. a real pretrained model answers a real question (SmolLM2-135M-Instruct, greedy, its own chat
#      template), and a pretrained base model continues a text (Gemma 3 270M), each with its speed;
#   3. the tool request of models/demo.json ("Check the weather in Oslo, please.", four tools)
#      answered with a tool call by tern's tool caller tern-tool 2 (Qwen2.5-Coder-0.5B-Instruct +
#      tern's LoRA adapter, when installed), by its small sibling on SmolLM2-135M-Instruct, and by
#      tern-tool 1 (models/tern-tool.gguf, linked into the binary).
# Speed governance at a real size (a suite report, bless, gate) is `make demo-gate`.
set -e
BIN=build/bin/tern
DEMO=models/demo.json
QUESTION="Why is the sky blue? Answer in two sentences."

echo "== tern models   (real pretrained models, installed from Python packages by scripts/install-models.py)"
$BIN models
have() { $BIN models --json | jq -e --arg n "$1" 'any(.[]; .name == $n and (.error | not))' >/dev/null; }
speed() { jq -r '"   (\(.stats.n_prompt) prompt tokens in \(.stats.prompt_ms | floor) ms; \(.stats.n_generated) tokens at \(.stats.gen_tps * 10 | floor / 10) tokens/s)"'; }
echo

if have smollm2-135m-instruct; then
    echo "== a real question to a real model: tern chat -m smollm2-135m-instruct (greedy)"
    echo "   user: $QUESTION"
    printf '[{"role": "user", "content": "%s"}]\n' "$QUESTION" > "${TMPDIR:-/tmp}/tern-demo-question.json"
    out=$($BIN chat -m smollm2-135m-instruct --messages "${TMPDIR:-/tmp}/tern-demo-question.json" -n 160 --json < /dev/null 2>/dev/null | tail -1)
    echo "$out" | jq -r '"   assistant: " + .content'
    echo "$out" | speed
else
    echo "== smollm2-135m-instruct is not installed: python3 scripts/install-models.py installs it"
fi
if have gemma-3-270m; then
    echo "== a base (pretrained, not instruction-tuned) model continues a text: tern run -m gemma-3-270m"
    $BIN run -m gemma-3-270m -p "The three primary colors of light are" -n 32 --json 2>/dev/null |
        jq -r '"   text: The three primary colors of light are" + .text,
               "   (\(.n_generated) tokens at \(.gen_tps * 10 | floor / 10) tokens/s)"'
fi
echo

echo "== the tool request (system prompt, user message and tools from $DEMO):"
jq -r '.messages[] | "   \(.role): \(.content)"' "$DEMO"
jq -r '"   tools: " + ([.tools[].function.name] | join(", "))' "$DEMO"
echo "   expected: $(jq -c '.expected[]' "$DEMO")"
if have tern-tool-2; then
    echo "== tern chat --messages $DEMO   (tern's tool caller: tern-tool 2, Qwen2.5-Coder-0.5B-Instruct"
    echo "   with tern's LoRA adapter, the default of run and chat when installed: no -m)"
    out=$($BIN chat --messages "$DEMO" --json < /dev/null 2>/dev/null | tail -1)
    echo "$out" | jq -c '"   call: " + (.tool_calls[0].function | tojson)' -r
    echo "$out" | speed
fi
if have tern-tool-2-smollm2; then
    echo "== tern chat -m tern-tool-2-smollm2 --messages $DEMO   (the same adapter recipe on SmolLM2-135M-Instruct:"
    echo "   6x faster, copies less exactly)"
    out=$($BIN chat -m tern-tool-2-smollm2 --messages "$DEMO" --json < /dev/null 2>/dev/null | tail -1)
    echo "$out" | jq -c '"   call: " + (.tool_calls[0].function | tojson)' -r
    echo "$out" | speed
fi
if $BIN version | grep -q "embedded model: tern-tool"; then
    echo "== tern chat -m tern-tool --messages $DEMO   (tern-tool 1: 14 M parameters, trained from scratch, linked in)"
    out=$($BIN chat -m tern-tool --messages "$DEMO" --json < /dev/null 2>/dev/null | tail -1)
    echo "$out" | jq -c '"   call: " + (.tool_calls[0].function | tojson)' -r
    echo "$out" | speed
else
    echo "== this build has no embedded model (models/tern-tool.gguf is missing): skipping its request"
fi
echo
echo "More: tern models --help, tern chat --help, tern serve --help; speed governance: make demo-gate"
