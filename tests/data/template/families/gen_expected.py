# gen_expected.py — reference renderings of the 2026 chat templates (Qwen3, Qwen3.5, SmolLM3,
# Gemma 4, Phi-3.5, Granite 3.3, gpt-oss) for tests/test_template_families.c.
#
# Renders every template x case with Python Jinja2 (3.1.6 when generated) set up exactly as
# Hugging Face transformers' apply_chat_template sets it up (render_jinja_template in
# transformers/utils/chat_template_utils.py):
#   ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
#                                 extensions=[jinja2.ext.loopcontrols])
#   filter tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
#       = json.dumps with those arguments
#   globals raise_exception(msg) (jinja2.exceptions.TemplateError) and strftime_now(fmt),
#       here pinned to 2025-01-15 09:30:00 so the output is reproducible
#   variables: messages, tools (only when the case has tools, as in ../../../../shared
#       fixtures/templates), add_generation_prompt, bos_token / eos_token (specials.json),
#       and the case's template variables (HF's **kwargs / chat_template_kwargs, e.g.
#       enable_thinking) merged in.
# Run from this directory: python3 gen_expected.py   (needs python3-jinja2; Debian's is 3.1.x)
# Writes cases.json, specials.json and expected/<template>/<case>.txt|.error + INDEX.tsv.
# The .jinja files are copies of ik_llama.cpp's models/templates (README.md here).
import datetime, json, os, shutil
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols

TEMPLATES = {
    # name: (bos_token, eos_token) as the models' tokenizer_config.json give them
    "Qwen-Qwen3-0.6B": ("", "<|im_end|>"),
    "Qwen3.5-4B": ("", "<|im_end|>"),
    "HuggingFaceTB-SmolLM3-3B": ("", "<|im_end|>"),
    "google-gemma-4-31B-it": ("<bos>", "<eos>"),
    "microsoft-Phi-3.5-mini-instruct": ("<s>", "<|endoftext|>"),
    "ibm-granite-granite-3.3-2B-Instruct": ("<|end_of_text|>", "<|end_of_text|>"),
    "openai-gpt-oss-120b": ("<|startoftext|>", "<|return|>"),
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_docs", "description": "Search the documentation",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "max_results": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "exact": {"type": "boolean"}},
            "required": ["query"]}}},
]

SYS = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "What is the weather in Oslo?"}
CALL1 = {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": {"location": "Oslo", "unit": "celsius"}}}
CALL2 = {"id": "call_2", "type": "function",
         "function": {"name": "search_docs", "arguments": {"query": "fjord \"tides\"", "max_results": 3,
                                                           "tags": ["sea", "norway"], "exact": False}}}

BASE = [
    {"name": "simple", "messages": [SYS, {"role": "user", "content": "Hello!"}]},
    {"name": "no_system", "messages": [{"role": "user", "content": "Hi there"}]},
    {"name": "multi_turn", "messages": [
        SYS, {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "Another one?"}]},
    {"name": "training_format", "add_generation_prompt": False, "messages": [
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
    {"name": "tools_offer", "tools": TOOLS, "messages": [SYS, U1]},
    {"name": "tool_roundtrip", "tools": TOOLS, "messages": [
        U1, {"role": "assistant", "content": "", "tool_calls": [CALL1]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 4, \"sky\": \"rain\"}"}]},
    {"name": "tool_final_answer", "tools": TOOLS, "add_generation_prompt": False, "messages": [
        SYS, U1, {"role": "assistant", "content": "", "tool_calls": [CALL1]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "4 C, rain"},
        {"role": "assistant", "content": "It is 4 C and raining in Oslo."}]},
    {"name": "parallel_tool_calls", "tools": TOOLS, "messages": [
        SYS, {"role": "user", "content": "Weather in Oslo, and docs about fjord tides?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [CALL1, CALL2]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "4 C"},
        {"role": "tool", "tool_call_id": "call_2", "name": "search_docs", "content": "No results."}]},
    {"name": "reasoning_history", "messages": [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo, 91 = 7 x 13."},
        {"role": "user", "content": "And 97?"},
        {"role": "assistant", "reasoning_content": "97 has no divisor up to 9.", "content": "Yes, 97 is prime."},
        {"role": "user", "content": "Thanks. 1001?"}]},
    {"name": "reasoning_tool_turn", "tools": TOOLS, "messages": [
        SYS, U1,
        {"role": "assistant", "reasoning_content": "I need the weather tool.", "content": "", "tool_calls": [CALL1]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "4 C"}]},
    {"name": "reasoning_last_turn", "add_generation_prompt": False, "messages": [
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo."}]},
    {"name": "system_late", "messages": [
        {"role": "user", "content": "Hi"}, {"role": "system", "content": "Be terse."}]},
    {"name": "null_content_call", "tools": TOOLS, "messages": [
        U1, {"role": "assistant", "content": None, "tool_calls": [CALL1]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "4 C"}]},
    {"name": "unicode", "messages": [
        {"role": "user", "content": "Übersetze: 東京は晴れ 🌞 \"quotes\" \\ back"}]},
]

VARIANTS = [
    ("", None),
    ("@think_off", {"enable_thinking": False}),
    ("@think_on", {"enable_thinking": True}),
]
EXTRA = [  # template-specific switches
    ("openai-gpt-oss-120b", "simple@effort_low", "simple", {"reasoning_effort": "low"}),
    ("ibm-granite-granite-3.3-2B-Instruct", "simple@thinking", "no_system", {"thinking": True}),
]


def raise_exception(m):
    raise jinja2.exceptions.TemplateError(m)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime(2025, 1, 15, 9, 30, 0).strftime(f)

cases = []
for c in BASE:
    for suffix, vars_ in VARIANTS:
        d = dict(c, name=c["name"] + suffix)
        if vars_ is not None:
            d["vars"] = vars_
        cases.append(d)
only = {}
for tname, cname, base, vars_ in EXTRA:
    d = dict(next(c for c in BASE if c["name"] == base), name=cname, vars=vars_)
    cases.append(d)
    only[cname] = tname

shutil.rmtree("expected", ignore_errors=True)
os.makedirs("expected")
index = ["template\tcase\tresult"]
for tname, (bos, eos) in TEMPLATES.items():
    src = open(tname + ".jinja", encoding="utf-8").read()
    tmpl = env.from_string(src)
    os.makedirs(os.path.join("expected", tname))
    for c in cases:
        if only.get(c["name"], tname) != tname:
            continue
        kw = dict(c.get("vars", {}))
        kw.update(messages=c["messages"], add_generation_prompt=c.get("add_generation_prompt", True),
                  bos_token=bos, eos_token=eos)
        if "tools" in c:
            kw["tools"] = c["tools"]
        base = os.path.join("expected", tname, c["name"])
        try:
            out = tmpl.render(**kw)
            with open(base + ".txt", "wb") as f:
                f.write(out.encode("utf-8"))
            index.append(f"{tname}\t{c['name']}\tok")
        except Exception as e:  # the template's own raise_exception, or Jinja/Python errors
            with open(base + ".error", "w", encoding="utf-8") as f:
                f.write(f"{type(e).__name__}: {e}\n")
            index.append(f"{tname}\t{c['name']}\terror")
with open("expected/INDEX.tsv", "w") as f:
    f.write("\n".join(index) + "\n")
with open("cases.json", "w", encoding="utf-8") as f:
    json.dump([dict(c, only=only[c["name"]]) if c["name"] in only else c for c in cases], f,
              ensure_ascii=False, indent=1)
with open("specials.json", "w") as f:
    json.dump({t: {"bos_token": b, "eos_token": e} for t, (b, e) in TEMPLATES.items()}, f, indent=1)
print(len(index) - 1, "renderings,", sum(1 for l in index if l.endswith("\terror")), "errors")
