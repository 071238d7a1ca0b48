// reasoning.mjs — tern serve's reasoning budget on /v1/chat/completions, with a Qwen3-style
// template (reasoning_common.mjs: <think> markup; the generation prompt leaves the opening to the
// model, and enable_thinking false closes it in the prompt) on the random-weight fixture model,
// greedy:
// - thinking_budget_tokens N: the first N generated tokens are the reasoning, then exactly the
//   tokens of "\n</think>\n\n" are forced, then the answer; message.reasoning_content holds the
//   reasoning, message.content the answer, neither holds the markup; usage reports N + the
//   close's tokens as reasoning_tokens; streaming gives the same split in delta.reasoning_content
//   and delta.content;
// - reasoning_effort "none" closes at once; "low" allows 256 tokens (more than max_tokens here);
// - tool_choice "required" with a budget: the constrained call starts after </think> (the
//   reasoning is not empty and the call is valid); without a budget the reasoning is not cut;
// - enable_thinking false: the prompt closed the thinking, so the budget has nothing to cut;
// - bad values and both fields at once: 400 with the field named.
// The token texts come from logprobs (each generated token's text, in order).
// usage: node reasoning.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { CLOSE, startThinkingServer } from "./reasoning_common.mjs";

const [bin, model] = process.argv.slice(2);
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 120 s"); process.exit(1); }, 120000);
hardStop.unref();
const srv = await startThinkingServer(bin, model);

try {
  const port = srv.port;
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  async function post(body) {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" },
                                 body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], temperature: 0, ...body }) });
    return { status: r.status, body: body.stream ? await r.text() : await r.json() };
  }
  const report = {};

  // a budget of N tokens: N reasoning tokens, the close, the answer
  for (const n of [8, 3]) {
    const r = await post({ max_tokens: 30, thinking_budget_tokens: n, logprobs: true });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const c = r.body.choices[0];
    const toks = c.logprobs.content.map((t) => t.token);
    const think = toks.slice(0, n).join("");
    assert.ok(!think.includes("</think>"), "the random model closed its thinking itself: pick another budget");
    let k = n, closed = "";
    while (closed.length < CLOSE.length) closed += toks[k++];
    assert.equal(closed, CLOSE, `tokens ${n}.. are the forced close`);
    assert.equal(c.message.reasoning_content, think.trim());
    assert.equal(c.message.content, toks.slice(k).join("").trim());
    assert.ok(!c.message.content.includes("think>"), "no markup in the content");
    assert.equal(r.body.usage.completion_tokens_details.reasoning_tokens, k, "reasoning tokens: N + the close's");
    report[`budget_${n}`] = { reasoning_tokens: k, reasoning: c.message.reasoning_content.slice(0, 40) };

    // the same request streamed: the same split, in deltas
    const s = await post({ max_tokens: 30, thinking_budget_tokens: n, stream: true, stream_options: { include_usage: true } });
    assert.equal(s.status, 200);
    let rc = "", cc = "", usage = null;
    for (const line of s.body.split("\n")) {
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const ev = JSON.parse(line.slice(6));
      if (ev.usage) usage = ev.usage;
      for (const ch of ev.choices || []) {
        if (ch.delta.reasoning_content) rc += ch.delta.reasoning_content;
        if (ch.delta.content) cc += ch.delta.content;
      }
    }
    assert.equal(rc, c.message.reasoning_content);
    assert.equal(cc, c.message.content);
    assert.equal(usage.completion_tokens_details.reasoning_tokens, k);
  }

  // reasoning_effort: none closes at once; low (256) does not cut within 20 tokens
  let r = await post({ max_tokens: 20, reasoning_effort: "none", logprobs: true });
  assert.equal(r.status, 200);
  let toks = r.body.choices[0].logprobs.content.map((t) => t.token);
  assert.ok(toks.join("").startsWith(CLOSE), "effort none: the close first");
  assert.ok(!r.body.choices[0].message.reasoning_content, "effort none: no reasoning");
  r = await post({ max_tokens: 20, reasoning_effort: "low", logprobs: true });
  toks = r.body.choices[0].logprobs.content.map((t) => t.token);
  assert.ok(!toks.join("").includes("</think>"), "effort low: 256 tokens of budget, not cut at 20");
  assert.equal(r.body.choices[0].message.content, "");
  assert.equal(r.body.choices[0].finish_reason, "length");
  assert.equal(r.body.usage.completion_tokens_details.reasoning_tokens, 20);

  // a required tool call starts after the thinking the budget closes
  const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object",
                   properties: { city: { type: "string", maxLength: 8 } }, required: ["city"] } } }];
  r = await post({ max_tokens: 60, thinking_budget_tokens: 6, logprobs: true, tools, tool_choice: "required" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  let c = r.body.choices[0];
  toks = c.logprobs.content.map((t) => t.token);
  assert.ok(toks.join("").startsWith(toks.slice(0, 6).join("") + CLOSE + "<tool_call>"), toks.join(""));
  assert.equal(c.finish_reason, "tool_calls");
  assert.ok(c.message.reasoning_content.length > 0);
  assert.equal(c.message.tool_calls[0].function.name, "get_weather");
  assert.equal(typeof JSON.parse(c.message.tool_calls[0].function.arguments).city, "string");
  report.required_after_thinking = { reasoning: c.message.reasoning_content, call: c.message.tool_calls[0].function };
  // without a budget the thinking goes on (the call would come after it): not cut
  r = await post({ max_tokens: 20, logprobs: true, tools, tool_choice: "required" });
  c = r.body.choices[0];
  assert.ok(!c.logprobs.content.map((t) => t.token).join("").includes("<tool_call>"), "no call inside the thinking");
  assert.equal(c.message.content, "");
  assert.ok(c.message.reasoning_content.length > 0);

  // enable_thinking false: the prompt closed it; the budget cuts nothing
  r = await post({ max_tokens: 20, thinking_budget_tokens: 3, logprobs: true, chat_template_kwargs: { enable_thinking: false } });
  c = r.body.choices[0];
  assert.ok(!c.logprobs.content.map((t) => t.token).join("").includes("</think>"));
  assert.ok(!c.message.reasoning_content);
  assert.equal(r.body.usage.completion_tokens_details.reasoning_tokens, 0);

  // bad values: 400 naming the field
  for (const [body, param] of [[{ reasoning_effort: "extreme" }, "reasoning_effort"], [{ reasoning_effort: 3 }, "reasoning_effort"],
                               [{ thinking_budget_tokens: 1.5 }, "thinking_budget_tokens"], [{ thinking_budget_tokens: -2 }, "thinking_budget_tokens"],
                               [{ thinking_budget_tokens: 4, reasoning_effort: "low" }, "thinking_budget_tokens"]]) {
    r = await post({ max_tokens: 4, ...body });
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param, JSON.stringify(r.body));
  }
  console.log(JSON.stringify(report));
} finally {
  await srv.stop();
}
