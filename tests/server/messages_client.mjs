// messages_client.mjs — tern serve's POST /v1/messages driven by the official
// `@anthropic-ai/sdk` client (messages.create / .stream / .countTokens, not written here) on a
// real model (tern-tool-2-smollm2): a tool_use constrained to its input_schema (the input is checked
// against the schema here), its tool_result sent back, a final text answer; the same streamed,
// with Anthropic's event order checked (message_start, ping, content blocks started, deltas,
// stopped, message_delta, message_stop) and the SDK's accumulated message equal to what the
// events said; usage as Anthropic counts it (input_tokens + cache_read_input_tokens = the
// prompt, equal to count_tokens); stop_sequences; errors as the SDK surfaces them (status and
// error.type): missing max_tokens, a tool_result without its tool_use, a server tool type, a
// wrong x-api-key.
// usage: node messages_client.mjs TERN_BIN MODEL (MODEL unused: tern-tool-2-smollm2 is started)
import assert from "node:assert/strict";
import { importAnthropic, runChecks } from "./serve.mjs";
import { KEY, MODEL, startToolServer, checkSchema } from "./agents_common.mjs";

const [bin] = process.argv.slice(2);
const Anthropic = await importAnthropic();
const srv = await startToolServer(bin);
// the SDK appends /v1/messages to its base URL
const baseURL = srv.baseURL.replace(/\/v1$/, "");
const client = new Anthropic({ baseURL, apiKey: KEY, maxRetries: 0 });

const weather = { type: "object", properties: { city: { type: "string", maxLength: 20 },
  unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city", "unit"] };
const time = { type: "object", properties: { tz: { type: "string", maxLength: 8 } }, required: ["tz"] };
const tools = [
  { name: "get_weather", description: "Current weather in a city", input_schema: weather },
  { name: "get_time", description: "Current time in a time zone", input_schema: time },
];
const checks = [];
const check = (name, fn) => checks.push({ name, fn });

function checkToolUse(block, name, schema) {
  assert.equal(block.type, "tool_use");
  assert.match(block.id, /^toolu_/);
  assert.equal(block.name, name);
  checkSchema(block.input, schema);
}

check("tool round trip: forced tool_use -> tool_result -> text", async () => {
  const messages = [{ role: "user", content: "What is the weather in Paris, in celsius?" }];
  const first = await client.messages.create({ model: MODEL, max_tokens: 64, temperature: 0, system: "You call tools.",
    messages, tools, tool_choice: { type: "tool", name: "get_weather" } });
  assert.equal(first.type, "message");
  assert.equal(first.role, "assistant");
  assert.match(first.id, /^msg_/);
  assert.equal(first.model, MODEL);
  assert.equal(first.stop_reason, "tool_use");
  assert.equal(first.stop_sequence, null);
  const uses = first.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length >= 1, true);
  for (const u of uses) checkToolUse(u, "get_weather", weather);
  assert.ok(first.usage.input_tokens + first.usage.cache_read_input_tokens > 20);
  assert.ok(first.usage.output_tokens >= 1);
  const second = await client.messages.create({ model: MODEL, max_tokens: 48, temperature: 0, system: "You call tools.",
    tools, messages: [...messages, { role: "assistant", content: first.content },
      { role: "user", content: uses.map((u) => ({ type: "tool_result", tool_use_id: u.id,
        content: [{ type: "text", text: "14 C, cloudy" }] })) }] });
  assert.ok(["end_turn", "max_tokens"].includes(second.stop_reason), second.stop_reason);
  const text = second.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  assert.ok(text.length > 0, JSON.stringify(second.content));
  // the first turn's prompt (system, tools, question) is a prefix of this one: read from cache
  assert.ok(second.usage.cache_read_input_tokens > 0, JSON.stringify(second.usage));
});

check("streamed: Anthropic's event order; the SDK's message equals the events", async () => {
  const stream = client.messages.stream({ model: MODEL, max_tokens: 64, temperature: 0,
    messages: [{ role: "user", content: "What time is it in UTC?" }], tools, tool_choice: { type: "any", disable_parallel_tool_use: true } });
  const events = [];
  let json = "";
  stream.on("streamEvent", (e) => events.push(e));
  stream.on("inputJson", (delta) => { json += delta; });
  const msg = await stream.finalMessage();
  const types = events.map((e) => e.type);
  assert.equal(types[0], "message_start");
  assert.equal(types.at(-1), "message_stop");
  assert.equal(types.at(-2), "message_delta");
  assert.equal(msg.stop_reason, "tool_use");
  const uses = msg.content.filter((b) => b.type === "tool_use");
  assert.equal(uses.length, 1, "disable_parallel_tool_use: one call");
  checkToolUse(uses[0], uses[0].name, uses[0].name === "get_weather" ? weather : time);
  assert.deepEqual(JSON.parse(json), uses[0].input);
  // every block: start, deltas, stop, with its index
  const starts = events.filter((e) => e.type === "content_block_start").map((e) => e.index);
  const stops = events.filter((e) => e.type === "content_block_stop").map((e) => e.index);
  assert.deepEqual(starts, stops);
  assert.deepEqual(starts, msg.content.map((_, i) => i));
  const delta = events.at(-2);
  assert.equal(delta.usage.output_tokens, msg.usage.output_tokens);

  const next = client.messages.stream({ model: MODEL, max_tokens: 40, temperature: 0, tools,
    messages: [{ role: "user", content: "What time is it in UTC?" }, { role: "assistant", content: msg.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: uses[0].id, content: "12:00" }] }] });
  let text = "";
  next.on("text", (t) => { text += t; });
  const answer = await next.finalMessage();
  assert.ok(text.length > 0);
  assert.equal(answer.content[0].type, "text");
  assert.equal(answer.content[0].text, text);
});

check("streamed and whole answers agree; usage adds up to count_tokens", async () => {
  const req = { model: MODEL, max_tokens: 24, temperature: 0, messages: [{ role: "user", content: "Say hello." }] };
  const counted = await client.messages.countTokens({ model: MODEL, messages: req.messages });
  const whole = await client.messages.create(req);
  const streamed = await client.messages.stream(req).finalMessage();
  assert.deepEqual(streamed.content, whole.content);
  assert.equal(streamed.stop_reason, whole.stop_reason);
  for (const u of [whole.usage, streamed.usage])
    assert.equal(u.input_tokens + u.cache_read_input_tokens, counted.input_tokens);
  // the same prompt again: most of it comes from the cache
  assert.ok(streamed.usage.cache_read_input_tokens > 0, JSON.stringify(streamed.usage));
});

check("stop_sequences: stop_reason stop_sequence names the one met", async () => {
  const req = { model: MODEL, max_tokens: 40, temperature: 0, messages: [{ role: "user", content: "Count from 1 to 9, separated by commas." }] };
  const free = await client.messages.create(req);
  const text = free.content[0].text;
  // a sequence the free answer holds, after its start
  const seq = [",", " ", "3", "5"].find((x) => text.indexOf(x) > 0);
  assert.ok(seq, `no stop sequence to test in ${JSON.stringify(text)}`);
  const cut = await client.messages.create({ ...req, stop_sequences: ["never-appears", seq] });
  assert.equal(cut.stop_reason, "stop_sequence");
  assert.equal(cut.stop_sequence, seq);
  assert.equal(cut.content[0].text, text.slice(0, text.indexOf(seq)));
});

check("errors: Anthropic's shape and types as the SDK surfaces them", async () => {
  const bad = (p, status, type, re) => assert.rejects(client.messages.create({ model: MODEL, ...p }),
    (e) => e instanceof Anthropic.APIError && e.status === status && e.error?.type === "error" &&
           e.error?.error?.type === type && re.test(e.error.error.message));
  await bad({ messages: [{ role: "user", content: "hi" }] }, 400, "invalid_request_error", /max_tokens: Field required/);
  await bad({ max_tokens: 8, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_x", content: "1" }] }] },
    400, "invalid_request_error", /toolu_x/);
  await bad({ max_tokens: 8, messages: [{ role: "user", content: "hi" }], tools: [{ type: "web_search_20250305", name: "web_search" }] },
    400, "invalid_request_error", /web_search_20250305/);
  await bad({ max_tokens: 8, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "" } }] }] },
    400, "invalid_request_error", /'image'/);
  await bad({ max_tokens: 8, messages: [{ role: "user", content: "hi" }], tools, tool_choice: { type: "tool", name: "nope" } },
    400, "invalid_request_error", /nope/);
  await bad({ max_tokens: 8, messages: [{ role: "user", content: "hi" }], top_logprobs: 2 }, 400, "invalid_request_error",
    /top_logprobs: Extra inputs are not permitted/);
  const wrong = new Anthropic({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: MODEL, max_tokens: 8, messages: [{ role: "user", content: "hi" }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401 && e.error?.error?.type === "authentication_error");
});

check("the raw stream: 'event: NAME' lines match each data's type, ping after message_start", async () => {
  const res = await fetch(`${baseURL}/v1/messages`, { method: "POST", headers: { "Content-Type": "application/json",
    "x-api-key": KEY, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ model: MODEL, max_tokens: 8, stream: true, messages: [{ role: "user", content: "Hi" }] }) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const frames = (await res.text()).trim().split("\n\n").map((f) => {
    const m = /^event: (\S+)\ndata: (.*)$/s.exec(f);
    assert.ok(m, `not an Anthropic SSE frame: ${JSON.stringify(f)}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1]);
    return m[1];
  });
  assert.deepEqual(frames.slice(0, 3), ["message_start", "ping", "content_block_start"]);
  assert.deepEqual(frames.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
});

await runChecks(checks, srv);
