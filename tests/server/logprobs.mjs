// logprobs.mjs — `logprobs` / `top_logprobs` of tern serve through the official `openai` npm
// client, against a reference computed here: `tern probe` prints the model's raw logits for a
// token sequence (one batch, another code path than the server's batched decode), and this
// script takes their log-softmax in double precision.
//   completions (legacy shape: tokens, token_logprobs, top_logprobs, text_offset), prompt given
//   as token ids: at temperature 0 each token is the argmax of the reference logits at its
//   position, its log-prob and its 5 alternatives' log-probs equal the reference, its text is
//   that token's (`tern tokenize` of the text gives the id back), offsets add up to the text.
//   chat (OpenAI's shape: content[{token, logprob, bytes, top_logprobs}]), whole and streamed:
//   the stream's entries are the whole answer's, the tokens' text is the content, bytes are the
//   token's UTF-8, each log-prob is the first of its alternatives, and the values are the
//   reference's for the same prompt sent as completions text.
//   errors: top_logprobs without logprobs, out of range, as the SDK's typed 400s.
// usage: node logprobs.mjs TERN_BIN MODEL   (exit 77 when the client is not installed)
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, importOpenAI } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const OpenAI = await importOpenAI();
const srv = await startServer(bin, model, ["--parallel", "2"]);
const client = new OpenAI({ baseURL: srv.baseURL, apiKey: "none", maxRetries: 0 });
const TOL = 2e-4; // float32 log-probs of the same logits (the server's decode and probe's batch)

// log-softmax of the logits that follow `ids` (the last position), from tern probe
function refLogprobs(ids) {
  const out = execFileSync(bin, ["probe", "-m", model, "-t", "1", "--top", "1", "--logits", "last",
    "--tokens", ids.join(",")], { encoding: "utf8", maxBuffer: 1 << 28 });
  const lines = out.trim().split("\n");
  const logits = JSON.parse(lines[lines.length - 1]).logits;
  const mx = Math.max(...logits);
  let sum = 0;
  for (const l of logits) sum += Math.exp(l - mx);
  const lse = mx + Math.log(sum);
  return logits.map((l) => l - lse);
}
function argmax(a) {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i;
  return b;
}
// the n largest values, descending
const topValues = (a, n) => Float64Array.from(a).sort().reverse().slice(0, n);
function tokenize(text, extra = []) {
  return JSON.parse(execFileSync(bin, ["tokenize", "-m", model, "-p", text, "--json", ...extra], { encoding: "utf8" }));
}
function close(got, want, what) {
  assert.ok(Math.abs(got - want) <= TOL, `${what}: ${got} against the reference ${want}`);
}

const checks = [];
const check = (name, fn) => checks.push({ name, fn });

check("completions: logprobs 5 against tern probe's logits", async () => {
  const prompt = tokenize("The capital of France is");
  const r = await client.completions.create({ model: "x", prompt, max_tokens: 6, temperature: 0, logprobs: 5 });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.tokens.join(""), r.choices[0].text);
  let ids = [...prompt], off = 0;
  for (let i = 0; i < lp.tokens.length; i++) {
    const ref = refLogprobs(ids), best = argmax(ref);
    close(lp.token_logprobs[i], ref[best], `token ${i} '${lp.tokens[i]}'`);
    const alts = Object.values(lp.top_logprobs[i]).sort((a, b) => b - a);
    assert.equal(alts.length, 5);
    topValues(ref, 5).forEach((v, k) => close(alts[k], v, `token ${i} alternative ${k}`));
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i]); // greedy: its own first
    assert.equal(lp.text_offset[i], off);
    off += Buffer.byteLength(lp.tokens[i]);
    if (!lp.tokens[i].includes("\uFFFD")) assert.deepEqual(tokenize(lp.tokens[i], ["--no-bos"]), [best], `token ${i} text`);
    ids.push(best);
  }
});

const chatReq = { model: "x", messages: [{ role: "user", content: "Name three colors." }], max_tokens: 8,
                  temperature: 0, logprobs: true, top_logprobs: 3 };

check("chat: logprobs with top_logprobs 3, whole and streamed", async () => {
  const whole = await client.chat.completions.create(chatReq);
  const content = whole.choices[0].logprobs.content;
  assert.equal(whole.choices[0].logprobs.refusal, null);
  assert.ok(content.length > 0 && content.length <= whole.usage.completion_tokens);
  assert.equal(content.map((e) => e.token).join(""), whole.choices[0].message.content);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].logprob, e.logprob); // temperature 0
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob);
    assert.ok(e.logprob <= 0);
    if (!e.token.includes("\uFFFD")) assert.deepEqual(e.bytes, [...Buffer.from(e.token, "utf8")]);
  }
  const stream = await client.chat.completions.create({ ...chatReq, stream: true });
  const got = [];
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    if (c?.logprobs?.content) got.push(...c.logprobs.content);
  }
  assert.deepEqual(got, content);

  // the same prompt as text through completions (the template's rendering, control tokens parsed)
  const dir = mkdtempSync(join(tmpdir(), "tern-logprobs-"));
  writeFileSync(join(dir, "conv.json"), JSON.stringify(chatReq.messages));
  const rendered = execFileSync(bin, ["template", "-m", model, "--messages", join(dir, "conv.json")], { encoding: "utf8" });
  rmSync(dir, { recursive: true });
  let ids = tokenize(rendered, ["--parse-special"]);
  assert.equal(ids.length, whole.usage.prompt_tokens, "the reference's prompt is the server's");
  for (let i = 0; i < content.length; i++) {
    const ref = refLogprobs(ids), best = argmax(ref);
    close(content[i].logprob, ref[best], `chat token ${i} '${content[i].token}'`);
    topValues(ref, 3).forEach((v, k) => close(content[i].top_logprobs[k].logprob, v, `chat token ${i} alternative ${k}`));
    ids.push(best);
  }
});

check("logprobs off: null, as before", async () => {
  const r = await client.chat.completions.create({ ...chatReq, logprobs: undefined, top_logprobs: undefined });
  assert.equal(r.choices[0].logprobs, null);
});

check("errors: top_logprobs without logprobs, out of range", async () => {
  for (const [body, param] of [[{ ...chatReq, logprobs: false }, "top_logprobs"], [{ ...chatReq, top_logprobs: 21 }, "top_logprobs"]]) {
    await assert.rejects(client.chat.completions.create(body), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, param);
      return true;
    });
  }
  await assert.rejects(client.completions.create({ model: "x", prompt: "hi", logprobs: 6 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === "logprobs");
});

let failed = 0;
for (const { name, fn } of checks) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}\n${e.stack}`);
  }
}
await srv.stop();
process.exit(failed ? 1 : 0);
