// reasoning_agents.mjs — reasoning through the agents' protocols: POST /v1/responses with the
// official `openai` client (responses.create / .stream) and POST /v1/messages with the official
// `@anthropic-ai/sdk` (messages.create / .stream), on the Qwen3-style template of
// reasoning_common.mjs and the random-weight fixture model, greedy.
//
// The reference is /v1/chat/completions, whose reasoning budget tests/server/reasoning.mjs checks
// token by token: the same request in each protocol must give the same thinking and the same
// answer —
// - Responses: reasoning.effort is reasoning_effort (minimal: closed at once, no reasoning item;
//   low: cut at 256 tokens, the chat's logprobs show where); the reasoning item {type
//   "reasoning", id "rs_...", summary [], content [{type "reasoning_text", text}]} comes first
//   and holds chat's reasoning_content, output_tokens_details.reasoning_tokens chat's count; the
//   stream says it with output_item.added, content_part.added, reasoning_text.delta (their
//   concatenation the text), reasoning_text.done, content_part.done, output_item.done before the
//   message's events, sequence numbers 0, 1, 2, ...; cut short inside the thinking, the reasoning
//   item is the incomplete item and the last;
// - Messages: thinking {enabled, budget_tokens N} is thinking_budget_tokens N (N = 8 and 3: the
//   thinking block holds chat's reasoning_content, cut at N tokens); the stream gives
//   thinking_delta pieces then one signature_delta before the block's stop, then the text block;
//   display omitted keeps the block without its text; disabled is enable_thinking false (the same
//   prompt and answer as chat's with it);
// - a required tool call comes after the thinking in both (reasoning item then function_call;
//   thinking block then tool_use), streamed in that order;
// - thinking sent back goes to the template as reasoning_content: this template renders the
//   current turn's (a tool loop: the prompt is chat's with reasoning_content on the assistant
//   message, longer than without it) and not an earlier turn's (the prompt is as without it);
//   previous_response_id continues from a response with a reasoning item;
// - bad values are 400s in each protocol's error shape, naming the field.
// usage: node reasoning_agents.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { importAnthropic, importOpenAI, runChecks } from "./serve.mjs";
import { CLOSE, startThinkingServer } from "./reasoning_common.mjs";

const [bin, model] = process.argv.slice(2);
const OpenAI = await importOpenAI();
const Anthropic = await importAnthropic();
const srv = await startThinkingServer(bin, model);
const openai = new OpenAI({ baseURL: srv.baseURL, apiKey: "none", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: srv.baseURL.replace(/\/v1$/, ""), apiKey: "none", maxRetries: 0 });

const checks = [];
const check = (name, fn) => checks.push({ name, fn });
const USER = "Hi";
const params = { type: "object", properties: { city: { type: "string", maxLength: 8 } }, required: ["city"] };
const chatTools = [{ type: "function", function: { name: "get_weather", parameters: params } }];
const respTools = [{ type: "function", name: "get_weather", parameters: params, strict: false }];
const msgTools = [{ name: "get_weather", input_schema: params }];

// The chat-completions reference (greedy), its generated tokens' texts from logprobs.
async function chat(body) {
  const r = await fetch(`${srv.baseURL}/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: USER }], temperature: 0, logprobs: true, ...body }) });
  const o = await r.json();
  assert.equal(r.status, 200, JSON.stringify(o));
  const c = o.choices[0];
  return { message: c.message, usage: o.usage, finish: c.finish_reason, toks: (c.logprobs?.content || []).map((t) => t.token) };
}

// The tokens of the reference are N of thinking, then exactly the forced close.
function assertCutAt(toks, n) {
  assert.ok(!toks.slice(0, n).join("").includes("</think>"), "the model closed its thinking itself before the budget");
  let k = n, closed = "";
  while (closed.length < CLOSE.length) closed += toks[k++];
  assert.equal(closed, CLOSE, `tokens ${n}.. are the forced close`);
}

const reasoningOf = (resp) => resp.output.find((o) => o.type === "reasoning");
const messageText = (resp) => resp.output.filter((o) => o.type === "message").map((o) => o.content[0].text).join("");

// ------------------------------------------------------------------------------- Responses
check("responses: effort low cuts the thinking at 256 tokens, as reasoning_effort low does", async () => {
  const ref = await chat({ max_tokens: 300, reasoning_effort: "low" });
  assertCutAt(ref.toks, 256);
  const r = await openai.responses.create({ model: "any", input: USER, temperature: 0, max_output_tokens: 300,
                                            reasoning: { effort: "low", summary: "auto" } });
  assert.equal(r.output[0].type, "reasoning", "the reasoning item comes first");
  const rs = r.output[0];
  assert.match(rs.id, /^rs_/);
  assert.deepEqual(rs.summary, []);
  assert.deepEqual(rs.content, [{ type: "reasoning_text", text: ref.message.reasoning_content }]);
  assert.equal(rs.status, "completed");
  assert.equal(r.output[1].type, "message");
  assert.equal(messageText(r), ref.message.content);
  assert.equal(r.status, "incomplete");
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, ref.usage.completion_tokens_details.reasoning_tokens);
  assert.ok(r.usage.output_tokens_details.reasoning_tokens > 256, "N + the close's tokens");
  assert.equal(r.usage.input_tokens, ref.usage.prompt_tokens);
  assert.deepEqual(r.reasoning, { effort: "low", summary: "auto" });
});

check("responses: effort minimal and none close the thinking at once: no reasoning item", async () => {
  for (const effort of ["minimal", "none"]) {
    const ref = await chat({ max_tokens: 20, reasoning_effort: effort });
    assert.ok(ref.toks.join("").startsWith(CLOSE));
    const r = await openai.responses.create({ model: "any", input: USER, temperature: 0, max_output_tokens: 20, reasoning: { effort } });
    assert.deepEqual(r.output.map((o) => o.type), ["message"]);
    assert.equal(messageText(r), ref.message.content);
    assert.equal(r.usage.output_tokens_details.reasoning_tokens, ref.usage.completion_tokens_details.reasoning_tokens);
  }
});

check("responses: the stream gives the reasoning item's events first, numbered in order", async () => {
  const whole = await openai.responses.create({ model: "any", input: USER, temperature: 0, max_output_tokens: 270,
                                                reasoning: { effort: "low" }, store: false });
  const stream = openai.responses.stream({ model: "any", input: USER, temperature: 0, max_output_tokens: 270,
                                           reasoning: { effort: "low" }, store: false });
  const events = [];
  for await (const ev of stream) events.push(ev);
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i, `event ${i} (${ev.type})`));
  const types = events.map((e) => e.type);
  const deltas = events.filter((e) => e.type === "response.reasoning_text.delta");
  assert.ok(deltas.length >= 256, "a delta per piece");
  const want = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                ...deltas.map(() => "response.reasoning_text.delta"), "response.reasoning_text.done",
                "response.content_part.done", "response.output_item.done", "response.output_item.added"];
  assert.deepEqual(types.slice(0, want.length), want);
  const rs = reasoningOf(whole);
  const added = events[2], part = events[3], done = events[want.length - 2];
  assert.equal(added.output_index, 0);
  assert.deepEqual({ ...added.item, id: "" }, { id: "", type: "reasoning", summary: [], content: [], status: "in_progress" });
  assert.deepEqual(part.part, { type: "reasoning_text", text: "" });
  for (const e of [part, ...deltas]) {
    assert.equal(e.item_id, added.item.id);
    assert.equal(e.output_index, 0);
    assert.equal(e.content_index, 0);
  }
  const text = deltas.map((d) => d.delta).join("");
  assert.equal(text, rs.content[0].text);
  assert.equal(events[want.length - 4].text, text, "reasoning_text.done holds the whole text");
  assert.deepEqual(events[want.length - 3].part, { type: "reasoning_text", text });
  assert.deepEqual({ ...done.item, id: "" }, { ...rs, id: "" });
  assert.equal(events[want.length - 1].item.type, "message");
  assert.equal(events[want.length - 1].output_index, 1);
  const last = events[events.length - 1];
  assert.equal(last.type, "response.incomplete");
  assert.deepEqual(last.response.output.map((o) => ({ ...o, id: "" })), whole.output.map((o) => ({ ...o, id: "" })));
  assert.deepEqual(last.response.usage.output_tokens_details, whole.usage.output_tokens_details);
});

check("responses: cut short inside the thinking, the reasoning item is the incomplete one (create and stream)", async () => {
  const ref = await chat({ max_tokens: 20, reasoning_effort: "low" });
  assert.equal(ref.message.content, "");
  const req = { model: "any", input: USER, temperature: 0, max_output_tokens: 20, reasoning: { effort: "low" }, store: false };
  const r = await openai.responses.create(req);
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.output.map((o) => [o.type, o.status]), [["reasoning", "incomplete"]]);
  assert.equal(r.output[0].content[0].text, ref.message.reasoning_content);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 20);
  const events = [];
  for await (const ev of openai.responses.stream(req)) events.push(ev);
  const last = events[events.length - 1];
  assert.equal(last.type, "response.incomplete");
  assert.deepEqual(last.response.output.map((o) => ({ ...o, id: "" })), r.output.map((o) => ({ ...o, id: "" })));
  assert.ok(!events.some((e) => e.type.startsWith("response.output_text")), "no message item");
});

check("responses: a required call follows the thinking (create and stream); previous_response_id continues", async () => {
  const ref = await chat({ max_tokens: 400, reasoning_effort: "low", tools: chatTools, tool_choice: "required" });
  assert.equal(ref.finish, "tool_calls");
  const req = { model: "any", input: USER, temperature: 0, max_output_tokens: 400, reasoning: { effort: "low" },
                tools: respTools, tool_choice: "required" };
  const r = await openai.responses.create(req);
  assert.deepEqual(r.output.map((o) => o.type), ["reasoning", "function_call"]);
  assert.equal(r.output[0].content[0].text, ref.message.reasoning_content);
  assert.equal(r.output[1].arguments, ref.message.tool_calls[0].function.arguments);
  assert.equal(r.status, "completed");

  const stream = openai.responses.stream({ ...req, store: false });
  const order = [];
  for await (const ev of stream)
    if (ev.type === "response.output_item.added" || ev.type === "response.output_item.done") order.push(`${ev.type.slice(21)} ${ev.item.type}`);
  assert.deepEqual(order, ["added reasoning", "done reasoning", "added function_call", "done function_call"]);

  // the call's result: the thinking of this turn is rendered before the call, as chat renders it
  const call = r.output[1];
  const next = await openai.responses.create({ model: "any", previous_response_id: r.id, temperature: 0, max_output_tokens: 4,
    tools: respTools, input: [{ type: "function_call_output", call_id: call.call_id, output: "12 C" }] });
  assert.ok(["completed", "incomplete"].includes(next.status));
  assert.ok(next.usage.input_tokens_details.cached_tokens >= r.usage.input_tokens, "the first turn's prompt is reused");
  const assistant = { role: "assistant", content: "", tool_calls: [{ id: call.call_id, type: "function",
                      function: { name: call.name, arguments: call.arguments } }] };
  const tool = { role: "tool", tool_call_id: call.call_id, name: call.name, content: "12 C" };
  const withThinking = await chat({ max_tokens: 1, tools: chatTools, messages: [{ role: "user", content: USER },
    { ...assistant, reasoning_content: r.output[0].content[0].text }, tool] });
  const without = await chat({ max_tokens: 1, tools: chatTools, messages: [{ role: "user", content: USER }, assistant, tool] });
  assert.equal(next.usage.input_tokens, withThinking.usage.prompt_tokens);
  assert.ok(withThinking.usage.prompt_tokens > without.usage.prompt_tokens + 256, "the thinking is in the prompt");
  // the same conversation as a whole input list, with and without the reasoning item
  const items = [{ role: "user", content: USER }, r.output[0], call, { type: "function_call_output", call_id: call.call_id, output: "12 C" }];
  const listed = await openai.responses.create({ model: "any", input: items, tools: respTools, max_output_tokens: 1, store: false });
  assert.equal(listed.usage.input_tokens, withThinking.usage.prompt_tokens);
  const dropped = await openai.responses.create({ model: "any", input: items.filter((o) => o.type !== "reasoning"), tools: respTools,
                                                  max_output_tokens: 1, store: false });
  assert.equal(dropped.usage.input_tokens, without.usage.prompt_tokens);
});

check("responses: an earlier turn's reasoning item is not rendered by this template", async () => {
  const items = [{ role: "user", content: USER }, { type: "reasoning", id: "rs_x", summary: [],
                   content: [{ type: "reasoning_text", text: "long thoughts of an earlier turn" }] },
                 { role: "assistant", content: "Hello." }, { role: "user", content: "More?" }];
  const a = await openai.responses.create({ model: "any", input: items, max_output_tokens: 1, store: false });
  const b = await openai.responses.create({ model: "any", input: items.filter((o) => o.type !== "reasoning"), max_output_tokens: 1, store: false });
  assert.equal(a.usage.input_tokens, b.usage.input_tokens);
});

check("responses: bad reasoning values are 400s naming the field", async () => {
  const bad = async (body, param, re) => assert.rejects(
    openai.responses.create({ model: "any", input: USER, max_output_tokens: 4, ...body }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === param && re.test(e.message));
  await bad({ reasoning: { effort: "extreme" } }, "reasoning.effort", /'reasoning\.effort' must be one of .*"extreme"/);
  await bad({ reasoning: { effort: 2 } }, "reasoning.effort", /'reasoning\.effort' must be one of/);
  await bad({ reasoning: { summary: "verbose" } }, "reasoning.summary", /'reasoning\.summary'/);
  await bad({ reasoning: "high" }, "reasoning", /'reasoning' must be an object/);
  await bad({ reasoning: { effort: "low", budget: 3 } }, "reasoning", /unknown field 'budget'/);
  await bad({ input: [{ type: "reasoning", summary: [], content: [{ type: "text", text: "x" }] }, { role: "user", content: USER }] },
            "input", /'input\[0\]\.content\[0\]' must be \{"type": "reasoning_text"/);
});

// ------------------------------------------------------------------------------- Messages
check("messages: thinking budget_tokens N is chat's thinking_budget_tokens N (N = 8, 3)", async () => {
  for (const n of [8, 3]) {
    const ref = await chat({ max_tokens: 30, thinking_budget_tokens: n });
    assertCutAt(ref.toks, n);
    const m = await anthropic.messages.create({ model: "any", max_tokens: 30, temperature: 0, messages: [{ role: "user", content: USER }],
                                                thinking: { type: "enabled", budget_tokens: n } });
    assert.deepEqual(m.content, [{ type: "thinking", thinking: ref.message.reasoning_content, signature: "" },
                                 { type: "text", text: ref.message.content }]);
    assert.equal(m.stop_reason, "max_tokens");
    assert.equal(m.usage.output_tokens, ref.usage.completion_tokens, "output_tokens include the thinking");
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens);
  }
});

check("messages: the stream gives thinking_delta pieces, a signature_delta, then the text block", async () => {
  const req = { model: "any", max_tokens: 30, temperature: 0, messages: [{ role: "user", content: USER }],
                thinking: { type: "enabled", budget_tokens: 8 } };
  const whole = await anthropic.messages.create(req);
  const stream = anthropic.messages.stream(req);
  const events = [];
  for await (const ev of stream) events.push(ev);
  const final = await stream.finalMessage();
  const shape = events.map((e) => e.type === "content_block_delta" ? `delta ${e.index} ${e.delta.type}`
                                   : e.type.startsWith("content_block") ? `${e.type} ${e.index}` : e.type);
  const thinking = shape.filter((s) => s === "delta 0 thinking_delta").length;
  const text = shape.filter((s) => s === "delta 1 text_delta").length;
  assert.ok(thinking > 0 && text > 0);
  assert.deepEqual(shape, ["message_start", "content_block_start 0", ...Array(thinking).fill("delta 0 thinking_delta"),
                           "delta 0 signature_delta", "content_block_stop 0", "content_block_start 1",
                           ...Array(text).fill("delta 1 text_delta"), "content_block_stop 1", "message_delta", "message_stop"]);
  assert.deepEqual(events[1].content_block, { type: "thinking", thinking: "", signature: "" });
  assert.equal(events.filter((e) => e.delta?.type === "thinking_delta").map((e) => e.delta.thinking).join(""), whole.content[0].thinking);
  assert.equal(events.find((e) => e.delta?.type === "signature_delta").delta.signature, "");
  assert.deepEqual(final.content, whole.content, "the SDK's accumulated message");
  assert.equal(final.stop_reason, whole.stop_reason);
});

check("messages: display omitted keeps the thinking block without its text", async () => {
  const req = { model: "any", max_tokens: 30, temperature: 0, messages: [{ role: "user", content: USER }] };
  const shown = await anthropic.messages.create({ ...req, thinking: { type: "enabled", budget_tokens: 8, display: "summarized" } });
  const hidden = await anthropic.messages.create({ ...req, thinking: { type: "enabled", budget_tokens: 8, display: "omitted" } });
  assert.ok(shown.content[0].thinking.length > 0);
  assert.deepEqual(hidden.content, [{ type: "thinking", thinking: "", signature: "" }, shown.content[1]]);
  const events = [];
  for await (const ev of anthropic.messages.stream({ ...req, thinking: { type: "enabled", budget_tokens: 8, display: "omitted" } })) events.push(ev);
  assert.ok(!events.some((e) => e.delta?.type === "thinking_delta"));
  assert.ok(events.some((e) => e.delta?.type === "signature_delta"));
});

check("messages: thinking disabled is enable_thinking false (no thinking block, chat's prompt and answer)", async () => {
  const ref = await chat({ max_tokens: 20, chat_template_kwargs: { enable_thinking: false } });
  assert.ok(!ref.message.reasoning_content);
  const m = await anthropic.messages.create({ model: "any", max_tokens: 20, temperature: 0, messages: [{ role: "user", content: USER }],
                                              thinking: { type: "disabled" } });
  assert.deepEqual(m.content, [{ type: "text", text: ref.message.content }]);
  assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens);
  const count = await anthropic.messages.countTokens({ model: "any", messages: [{ role: "user", content: USER }], thinking: { type: "disabled" } });
  assert.equal(count.input_tokens, ref.usage.prompt_tokens);
});

check("messages: a forced tool_use follows the thinking (create and stream); thinking sent back is rendered in this turn only", async () => {
  const ref = await chat({ max_tokens: 60, thinking_budget_tokens: 6, tools: chatTools, tool_choice: "required" });
  assert.ok(ref.toks.join("").startsWith(ref.toks.slice(0, 6).join("") + CLOSE + "<tool_call>"));
  const req = { model: "any", max_tokens: 60, temperature: 0, messages: [{ role: "user", content: USER }], tools: msgTools,
                tool_choice: { type: "any" }, thinking: { type: "enabled", budget_tokens: 6 } };
  const m = await anthropic.messages.create(req);
  assert.deepEqual(m.content.map((b) => b.type), ["thinking", "tool_use"]);
  assert.equal(m.content[0].thinking, ref.message.reasoning_content);
  assert.deepEqual(m.content[1].input, JSON.parse(ref.message.tool_calls[0].function.arguments));
  assert.equal(m.stop_reason, "tool_use");
  const starts = [];
  for await (const ev of anthropic.messages.stream(req)) if (ev.type === "content_block_start") starts.push(ev.content_block.type);
  assert.deepEqual(starts, ["thinking", "tool_use"]);

  // the tool loop goes on with the whole assistant content sent back, as Anthropic asks
  const use = m.content[1];
  const loop = [{ role: "user", content: USER }, { role: "assistant", content: m.content },
                { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "12 C" }] }];
  const next = await anthropic.messages.create({ model: "any", max_tokens: 1, tools: msgTools, messages: loop });
  const assistant = { role: "assistant", content: "", tool_calls: [{ id: use.id, type: "function",
                      function: { name: use.name, arguments: JSON.stringify(use.input) } }] };
  const tool = { role: "tool", tool_call_id: use.id, name: use.name, content: "12 C" };
  const withThinking = await chat({ max_tokens: 1, tools: chatTools, messages: [{ role: "user", content: USER },
    { ...assistant, reasoning_content: m.content[0].thinking }, tool] });
  const without = await chat({ max_tokens: 1, tools: chatTools, messages: [{ role: "user", content: USER }, assistant, tool] });
  assert.equal(next.usage.input_tokens + next.usage.cache_read_input_tokens, withThinking.usage.prompt_tokens);
  assert.ok(withThinking.usage.prompt_tokens > without.usage.prompt_tokens, "the thinking is in the prompt");
  // after a new user message, that thinking is an earlier turn's: not rendered
  const later = [...loop, { role: "assistant", content: "It is 12 C." }, { role: "user", content: "Thanks" }];
  const strip = (msgs) => msgs.map((x) => Array.isArray(x.content) ? { ...x, content: x.content.filter((b) => b.type !== "thinking") } : x);
  const a = await anthropic.messages.countTokens({ model: "any", tools: msgTools, messages: later });
  const b = await anthropic.messages.countTokens({ model: "any", tools: msgTools, messages: strip(later) });
  assert.equal(a.input_tokens, b.input_tokens);
});

check("messages: bad thinking values are 400 invalid_request_error naming the field", async () => {
  const bad = async (thinking, re, maxTokens = 30) => assert.rejects(
    anthropic.messages.create({ model: "any", max_tokens: maxTokens, messages: [{ role: "user", content: USER }], thinking }),
    (e) => e instanceof Anthropic.BadRequestError && e.status === 400 && e.error?.type === "error" &&
           e.error?.error?.type === "invalid_request_error" && re.test(e.error.error.message));
  await bad({ type: "enabled", budget_tokens: -1 }, /^thinking\.enabled\.budget_tokens: Input should be an integer from 0/);
  await bad({ type: "enabled", budget_tokens: 2.5 }, /^thinking\.enabled\.budget_tokens/);
  await bad({ type: "enabled" }, /^thinking\.enabled\.budget_tokens: Field required/);
  await bad({ type: "enabled", budget_tokens: 30 }, /`max_tokens` must be greater than `thinking\.budget_tokens`/);
  await bad({ type: "enabled", budget_tokens: 2048 }, /`max_tokens` must be greater than `thinking\.budget_tokens` \(2048 >= 1024\)/, 1024);
  await bad({ type: "extreme" }, /^thinking\.type: Input should be 'enabled', 'adaptive' or 'disabled'/);
  await bad({ type: "disabled", budget_tokens: 4 }, /^thinking\.disabled\.budget_tokens: Extra inputs are not permitted/);
  await bad({ type: "enabled", budget_tokens: 4, display: "full" }, /^thinking\.enabled\.display/);
  await assert.rejects(anthropic.messages.create({ model: "any", max_tokens: 8, messages: [{ role: "user", content: USER },
    { role: "assistant", content: [{ type: "thinking", signature: "" }, { type: "text", text: "x" }] }, { role: "user", content: "y" }] }),
    (e) => e.status === 400 && /^messages\.1\.content\.0\.thinking: Field required/.test(e.error.error.message));
});

await runChecks(checks, srv);
