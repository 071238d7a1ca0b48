// openai_client.mjs — tern serve driven by the official `openai` npm client (not written here):
// models, chat whole and streamed (the SDK's own stream accumulator assembles the deltas), tool
// calls (tool_choice required and named, streamed), usage with cached_tokens, completions, and
// errors as the SDK's typed exceptions (401, 400 with param, context_length_exceeded).
// usage: node openai_client.mjs TERN_BIN MODEL   (exit 77 when the client is not installed)
import assert from "node:assert/strict";
import { startServer, importOpenAI, runChecks } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const OpenAI = await importOpenAI();
const KEY = "test-key-123";
const srv = await startServer(bin, model, ["--api-key", KEY, "--parallel", "2"]);
const client = new OpenAI({ baseURL: srv.baseURL, apiKey: KEY, maxRetries: 0 });
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 12 },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city", "unit"] } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object",
    properties: { tz: { type: "string", maxLength: 6 } }, required: ["tz"] } } },
];
const checks = [];
const check = (name, fn) => checks.push({ name, fn });

check("models.list", async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.match(page.data[0].id, /qwen2-tiny/);
});

check("chat.completions.create (whole), then the same prompt from the slot's KV", async () => {
  const req = { model: "x", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }],
                max_tokens: 8, temperature: 0 };
  const a = await client.chat.completions.create(req);
  assert.equal(a.object, "chat.completion");
  assert.equal(typeof a.choices[0].message.content, "string");
  assert.ok(["length", "stop"].includes(a.choices[0].finish_reason));
  assert.ok(a.usage.prompt_tokens > 5);
  assert.equal(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  const b = await client.chat.completions.create(req);
  assert.equal(b.choices[0].message.content, a.choices[0].message.content);
  assert.equal(b.usage.prompt_tokens_details.cached_tokens, b.usage.prompt_tokens - 1);
});

check("stream with include_usage equals the whole answer", async () => {
  const req = { model: "x", messages: [{ role: "user", content: "Count to five." }], max_tokens: 16, temperature: 0 };
  const whole = await client.chat.completions.create(req);
  const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null, role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(role, "assistant");
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

function checkCall(call, name) {
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  assert.equal(call.function.name, name);
  const args = JSON.parse(call.function.arguments);
  if (name === "get_weather") {
    assert.equal(typeof args.city, "string");
    assert.ok(["celsius", "fahrenheit"].includes(args.unit));
  } else {
    assert.equal(typeof args.tz, "string");
  }
}

check("tool call, tool_choice required", async () => {
  const r = await client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "Weather in Rome?" }],
    tools, tool_choice: "required", parallel_tool_calls: false, temperature: 0 });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.equal(m.tool_calls.length, 1);
  checkCall(m.tool_calls[0], m.tool_calls[0].function.name);
});

check("tool call streamed (named), assembled by the SDK's stream helper", async () => {
  const runner = client.beta.chat.completions.stream({ model: "x",
    messages: [{ role: "user", content: "What time is it in UTC?" }], tools,
    tool_choice: { type: "function", function: { name: "get_time" } }, temperature: 0 });
  const final = await runner.finalChatCompletion();
  const m = final.choices[0].message;
  assert.equal(final.choices[0].finish_reason, "tool_calls");
  assert.equal(m.tool_calls.length >= 1, true);
  for (const c of m.tool_calls) checkCall(c, "get_time");
});

check("tool result in the conversation", async () => {
  const r = await client.chat.completions.create({ model: "x", tools, tool_choice: "none", max_tokens: 4, temperature: 0,
    messages: [{ role: "user", content: "Weather in Rome?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_9", type: "function",
        function: { name: "get_weather", arguments: JSON.stringify({ city: "Rome", unit: "celsius" }) } }] },
      { role: "tool", tool_call_id: "call_9", content: "21 C, sunny" }] });
  assert.equal(typeof r.choices[0].message.content, "string");
  assert.equal(r.choices[0].message.tool_calls, undefined);
});

check("response_format json_schema", async () => {
  const r = await client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "An id" }], temperature: 0,
    response_format: { type: "json_schema", json_schema: { name: "id", strict: true, schema: { type: "object",
      properties: { id: { type: "integer", minimum: 1, maximum: 99 } }, required: ["id"], additionalProperties: false } } } });
  const doc = JSON.parse(r.choices[0].message.content);
  assert.equal(Number.isInteger(doc.id), true);
});

check("completions.create", async () => {
  const r = await client.completions.create({ model: "x", prompt: "The capital of France is", max_tokens: 5, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(typeof r.choices[0].text, "string");
  assert.equal(r.usage.completion_tokens <= 5, true);
});

check("errors: 401, 400 with param, context_length_exceeded", async () => {
  const bad = new OpenAI({ baseURL: srv.baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }], temperature: 7 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
  await assert.rejects(client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "word ".repeat(1500) }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded");
  await assert.rejects(client.chat.completions.create({ model: "x", messages: [{ role: "user", content: "hi" }], tools,
    tool_choice: { type: "function", function: { name: "nope" } } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "tool_choice");
});

await runChecks(checks, srv);
