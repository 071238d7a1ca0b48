// responses_client.mjs — tern serve's POST /v1/responses driven by the official `openai` npm
// client (client.responses.create / .stream / .retrieve, not written here) on a real model
// (tern-tool-2-smollm2): a tool call constrained to its schema (the arguments are checked against the
// schema here), its result sent back as function_call_output, a final text answer; the same
// streamed, with the Responses event sequence checked (created first, sequence numbers 0, 1,
// 2, ..., every item added before its deltas and done after them, completed last); a
// continuation by previous_response_id and by the whole input list; store false then
// previous_response_id -> 404; a stored response read back, and not by another API key;
// text.format json_schema; max_output_tokens -> incomplete; errors as the SDK surfaces them.
// usage: node responses_client.mjs TERN_BIN MODEL (MODEL unused: tern-tool-2-smollm2 is started)
import assert from "node:assert/strict";
import { importOpenAI, runChecks } from "./serve.mjs";
import { KEY, OTHER_KEY, MODEL, startToolServer, checkSchema } from "./agents_common.mjs";

const [bin] = process.argv.slice(2);
const OpenAI = await importOpenAI();
const srv = await startToolServer(bin);
const client = new OpenAI({ baseURL: srv.baseURL, apiKey: KEY, maxRetries: 0 });
const other = new OpenAI({ baseURL: srv.baseURL, apiKey: OTHER_KEY, maxRetries: 0 });

const weather = { type: "object", properties: { city: { type: "string", maxLength: 20 },
  unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city", "unit"], additionalProperties: false };
const time = { type: "object", properties: { tz: { type: "string", maxLength: 8 } }, required: ["tz"], additionalProperties: false };
const tools = [
  { type: "function", name: "get_weather", description: "Current weather in a city", parameters: weather, strict: true },
  { type: "function", name: "get_time", description: "Current time in a time zone", parameters: time, strict: true },
];
const checks = [];
const check = (name, fn) => checks.push({ name, fn });

function checkCall(item, name, schema) {
  assert.equal(item.type, "function_call");
  assert.match(item.id, /^fc_/);
  assert.match(item.call_id, /^call_/);
  assert.equal(item.name, name);
  assert.equal(item.status, "completed");
  checkSchema(JSON.parse(item.arguments), schema);
}

function checkUsage(u) {
  assert.ok(u.input_tokens > 10);
  assert.ok(u.output_tokens >= 1);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, "number");
  assert.equal(u.output_tokens_details.reasoning_tokens, 0);
}

check("tool round trip: required call -> function_call_output by previous_response_id -> text", async () => {
  const first = await client.responses.create({ model: MODEL, instructions: "You call tools to answer.",
    input: "What is the weather in Oslo, in celsius?", tools, tool_choice: "required", parallel_tool_calls: false,
    temperature: 0 });
  assert.equal(first.object, "response");
  assert.match(first.id, /^resp_/);
  assert.equal(first.status, "completed");
  assert.equal(first.output.length, 1);
  const call = first.output[0];
  checkCall(call, call.name, call.name === "get_weather" ? weather : time);
  checkUsage(first.usage);
  assert.equal(first.instructions, "You call tools to answer.");
  assert.equal(first.tools.length, 2);
  const second = await client.responses.create({ model: MODEL, previous_response_id: first.id, tools, tool_choice: "none",
    input: [{ type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ temperature: 12, sky: "clear" }) }],
    max_output_tokens: 40, temperature: 0 });
  assert.equal(second.previous_response_id, first.id);
  assert.ok(["completed", "incomplete"].includes(second.status));
  assert.equal(second.output[0].type, "message");
  assert.equal(second.output[0].role, "assistant");
  assert.equal(second.output[0].content[0].type, "output_text");
  assert.deepEqual(second.output[0].content[0].annotations, []);
  assert.ok(second.output_text.length > 0, "no text in the final answer");
  assert.equal(second.output_text, second.output[0].content[0].text);
  checkUsage(second.usage);
  // the conversation so far (instructions are not carried over) is a prefix of this prompt: reused
  assert.ok(second.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(second.usage));
});

check("tool round trip with the whole input list (no stored state)", async () => {
  const input = [{ role: "user", content: [{ type: "input_text", text: "What time is it in UTC?" }] }];
  const first = await client.responses.create({ model: MODEL, input, tools, store: false,
    tool_choice: { type: "function", name: "get_time" }, temperature: 0 });
  assert.equal(first.store, false);
  checkCall(first.output[0], "get_time", time);
  const { call_id, name, arguments: args } = first.output[0];
  const second = await client.responses.create({ model: MODEL, store: false, temperature: 0, max_output_tokens: 30,
    input: [...input, { type: "function_call", call_id, name, arguments: args },
      { type: "function_call_output", call_id, output: "12:00" }] });
  assert.equal(second.output[0].type, "message");
  assert.ok(second.output_text.length > 0);
});

check("streamed: events in order, tool call by name, then its result streamed as text", async () => {
  const stream = client.responses.stream({ model: MODEL, input: "Weather in Rome?", tools,
    tool_choice: { type: "function", name: "get_weather" }, temperature: 0 });
  const events = [];
  stream.on("event", (e) => events.push(e));
  const final = await stream.finalResponse();
  const types = events.map((e) => e.type);
  assert.equal(types[0], "response.created");
  assert.equal(types[1], "response.in_progress");
  assert.equal(types.at(-1), "response.completed");
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `event ${i} (${e.type})`));
  for (const t of ["response.output_item.added", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.output_item.done"])
    assert.ok(types.includes(t), `no ${t} in ${types}`);
  assert.ok(types.indexOf("response.output_item.added") < types.indexOf("response.function_call_arguments.delta"));
  assert.ok(types.indexOf("response.function_call_arguments.done") < types.indexOf("response.output_item.done"));
  const call = final.output.find((o) => o.type === "function_call");
  checkCall(call, "get_weather", weather);
  const done = events.find((e) => e.type === "response.function_call_arguments.done");
  assert.equal(done.arguments, call.arguments);
  const again = await client.responses.retrieve(final.id);
  const fields = (o) => ({ id: o.id, call_id: o.call_id, name: o.name, arguments: o.arguments });
  assert.deepEqual(again.output.map(fields), final.output.map(fields));

  const next = client.responses.stream({ model: MODEL, previous_response_id: final.id, max_output_tokens: 40,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "18 C, light rain" }], temperature: 0 });
  let deltas = "";
  const ev2 = [];
  next.on("event", (e) => ev2.push(e));
  next.on("response.output_text.delta", (e) => { deltas += e.delta; });
  const answer = await next.finalResponse();
  const t2 = ev2.map((e) => e.type);
  assert.ok(t2.includes("response.content_part.added") && t2.includes("response.output_text.done") &&
            t2.includes("response.content_part.done"), t2.join(","));
  assert.ok(["response.completed", "response.incomplete"].includes(t2.at(-1)));
  assert.ok(deltas.length > 0);
  assert.equal(deltas, textOf(answer));
  assert.equal(ev2.find((e) => e.type === "response.output_text.done").text, deltas);
});

// the text of a response's message items (the SDK's output_text is not set on every path)
const textOf = (r) => r.output.filter((o) => o.type === "message").map((o) => o.content.map((c) => c.text).join("")).join("");

check("streamed and whole answers agree (greedy)", async () => {
  const req = { model: MODEL, input: "Say hello.", max_output_tokens: 48, temperature: 0, store: false };
  const whole = await client.responses.create(req);
  const stream = client.responses.stream(req);
  const events = [];
  stream.on("event", (e) => events.push(e));
  const streamed = await stream.finalResponse();
  assert.ok(textOf(whole).length > 0);
  assert.equal(textOf(streamed), textOf(whole));
  const last = events.at(-1);
  assert.equal(last.type, whole.status === "completed" ? "response.completed" : "response.incomplete");
  assert.equal(last.response.status, whole.status);
  assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);
});

check("store: false, then previous_response_id -> 404 (NotFoundError)", async () => {
  const r = await client.responses.create({ model: MODEL, input: "Hi", max_output_tokens: 4, store: false });
  await assert.rejects(client.responses.create({ model: MODEL, previous_response_id: r.id, input: "Again" }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.param === "previous_response_id" &&
           e.code === "previous_response_not_found" && e.type === "invalid_request_error");
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(client.responses.create({ model: MODEL, previous_response_id: "resp_nope", input: "x" }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
});

check("a stored response belongs to its API key", async () => {
  const r = await client.responses.create({ model: MODEL, input: "Hello", max_output_tokens: 4 });
  assert.equal((await client.responses.retrieve(r.id)).id, r.id);
  await assert.rejects(other.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(other.responses.create({ model: MODEL, previous_response_id: r.id, input: "x" }),
    (e) => e instanceof OpenAI.NotFoundError);
  await client.responses.del(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e instanceof OpenAI.NotFoundError);
});

check("text.format json_schema (strict): the text is JSON that follows the schema", async () => {
  const schema = { type: "object", properties: { answer: { type: "integer", minimum: 0, maximum: 100 } },
    required: ["answer"], additionalProperties: false };
  const r = await client.responses.create({ model: MODEL, input: "What is 2 + 3? Answer in JSON.", temperature: 0,
    text: { format: { type: "json_schema", name: "sum", schema, strict: true } }, store: false });
  checkSchema(JSON.parse(r.output_text), schema);
});

check("max_output_tokens cuts: status incomplete, reason max_output_tokens", async () => {
  const r = await client.responses.create({ model: MODEL, input: "Write a long story about a ship.",
    max_output_tokens: 3, temperature: 0, store: false });
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(r.usage.output_tokens, 3);
  assert.equal(r.output[0].status, "incomplete");
});

check("errors: unknown tool type, malformed input items, bad key, in OpenAI's shape", async () => {
  const bad = (p, param, re) => assert.rejects(client.responses.create({ model: MODEL, ...p }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.type === "invalid_request_error" &&
           e.param === param && re.test(e.message));
  await bad({ input: "x", tools: [{ type: "web_search_preview" }] }, "tools", /web_search_preview/);
  await bad({ input: [{ type: "function_call_output", call_id: "call_missing", output: "1" }] }, "input",
    /input\[0\].*call_missing/);
  await bad({ input: [{ role: "robot", content: "hi" }] }, "input", /input\[0\]\.role/);
  await bad({ input: [{ role: "user", content: [{ type: "input_image", image_url: "data:," }] }] }, "input",
    /input_image/);
  await bad({ input: [{ type: "function_call", call_id: "c1", name: "f" }] }, "input", /input\[0\]\.arguments/);
  await bad({ input: "x", tools: [{ type: "function", name: "f", strict: true,
    parameters: { type: "object", properties: {}, additionalProperties: true } }] }, "tools", /tools\[0\]\.parameters/);
  await bad({ input: "x", frequency_penalty: 1 }, "frequency_penalty", /Unrecognized/);
  await bad({ input: "x", tools, tool_choice: { type: "function", name: "nope" } }, "tool_choice", /nope/);
  const anon = new OpenAI({ baseURL: srv.baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(anon.responses.create({ model: MODEL, input: "x" }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  // the raw body, as any other client reads it
  const res = await fetch(`${srv.baseURL}/responses`, { method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` }, body: '{"input": [1]}' });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
});

await runChecks(checks, srv);
