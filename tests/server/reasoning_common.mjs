// reasoning_common.mjs — what the reasoning tests share: a Qwen3-style chat template and a
// `tern serve` running it on the random-weight fixture model.
//
// The template is Qwen3's in miniature: tools in a system block and calls as
// <tool_call>{"name", "arguments"}</tool_call>; the generation prompt leaves the "<think>" to
// the model, and enable_thinking false closes the thinking in the prompt; an assistant turn
// after the last user message (the current turn's tool loop) renders its reasoning_content as
// "<think>\n...\n</think>\n\n" before its content, earlier turns do not (Qwen3's rule).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "./serve.mjs";

export const CLOSE = "\n</think>\n\n"; // what a budget forces when it is spent

export const QWEN3_LIKE = `{%- if tools %}<|im_start|>system
<tools>
{%- for t in tools %}
{{ t | tojson }}
{%- endfor %}
</tools>
Call a tool as <tool_call>{"name": NAME, "arguments": ARGS}</tool_call><|im_end|>
{% endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{%- if m.role == "user" %}{%- set ns.last_user = loop.index0 %}{%- endif %}{%- endfor %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.role == "assistant" and loop.index0 > ns.last_user and m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content or "" }}
{%- for tc in m.tool_calls or [] %}<tool_call>{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments }}}</tool_call>{% endfor %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{%- endif %}`;

// tern serve -m MODEL with the template, once /health says the model is loaded.
export async function startThinkingServer(bin, model, args = []) {
  const dir = mkdtempSync(join(tmpdir(), "tern-reasoning-"));
  const tmpl = join(dir, "qwen3-like.jinja");
  writeFileSync(tmpl, QWEN3_LIKE);
  let srv;
  try {
    srv = await startServer(bin, model, ["--chat-template-file", tmpl, ...args]);
    for (let i = 0; ; i++) { /* the port is bound before the model loads */
      const r = await fetch(`http://127.0.0.1:${srv.port}/health`);
      if (r.status === 200) break;
      if (i === 300) throw new Error("the model did not load within 30 s:\n" + srv.log());
      await new Promise((res) => setTimeout(res, 100));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true }); /* read at start-up */
  }
  return srv;
}
