// draft.mjs — `tern serve --draft`: drafts checked in the shared forward pass, by n-gram lookup
// in each request's own prompt and answer (--draft ngram) and by drafter models beside the
// batcher (--draft drafter.gguf, --draft self:q4_0: a context of the drafter's own with a
// sequence per slot). Servers on the same model, all on the scalar kernels (batch-invariant on
// every CPU, so "greedy output is token for token the undrafted output" is checkable anywhere):
// the same greedy requests, sent at once to each drafting server, give the text and token counts
// they give one at a time without drafting; /metrics shows drafts checked and kept (and the
// drafter's passes); a sampled streamed request completes; a request with a grammar is not
// drafted; a drafter with another tokenizer is refused at start naming both fingerprints. The
// official openai client sends the requests. usage: node draft.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { startServer, importOpenAI } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const models = dirname(model);
const OpenAI = await importOpenAI();
process.env.TERN_KERNELS = "scalar";

// prompts that repeat themselves, so the lookup has continuations to offer
const prompts = ["one two three four one two three four one two three four one two",
                 "a, b, c, a, b, c, a, b, c, a, b,", "The cat sat. The cat sat. The cat sat. The"];
const req = (p) => ({ model: "x", prompt: p, max_tokens: 32, temperature: 0, ignore_eos: true });
const chatReq = { model: "x", max_tokens: 32, temperature: 0,
                  messages: [{ role: "user", content: "Repeat: red green blue red green blue red green blue" }] };
const metric = (text, name) => Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)[1]);
const metrics = async (srv) => (await fetch(srv.baseURL.replace("/v1", "/metrics"))).text();
// A request's answer can reach the client before the engine thread has added the step that
// finished it to /metrics: read them once the forward-pass count holds still.
async function settled(srv) {
  let last = await metrics(srv);
  for (;;) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await metrics(srv);
    if (metric(now, "tern_forward_passes_total") === metric(last, "tern_forward_passes_total")) return now;
    last = now;
  }
}

let failed = 0;
const servers = [];
try {
  const plain = await startServer(bin, model, ["--parallel", "3"]);
  servers.push(plain);
  const A = new OpenAI({ baseURL: plain.baseURL, apiKey: "none", maxRetries: 0 });
  const want = [];
  for (const p of prompts) want.push(await A.completions.create(req(p)));
  const wantChat = await A.chat.completions.create(chatReq);
  assert.match(await metrics(plain), /^tern_draft_tokens_total 0$/m);

  // --draft-p-min 0: the random-weight fixture's drafter is never 75 % sure of a token (the
  // default cut), though the model keeps repeating one
  // --draft-min = --draft-max: a fixed length (the timing-driven controller would hold drafting
  // off on a pair where it does not pay, and these checks need drafts)
  const drafters = [["ngram", "--draft-max", "6", "--draft-min", "6"],
                    [join(models, "qwen2-tiny-q4_0.gguf"), "--draft-max", "4", "--draft-min", "4", "--draft-p-min", "0"],
                    ["self:q4_0", "--draft-max", "5", "--draft-min", "5", "--draft-p-min", "0"]];
  for (const [source, ...more] of drafters) {
    const srv = await startServer(bin, model, ["--parallel", "3", "--draft", source, ...more]);
    servers.push(srv);
    const B = new OpenAI({ baseURL: srv.baseURL, apiKey: "none", maxRetries: 0 });
    const got = await Promise.all([...prompts.map((p) => B.completions.create(req(p))), B.chat.completions.create(chatReq)]);
    prompts.forEach((p, i) => {
      assert.equal(got[i].choices[0].text, want[i].choices[0].text, `${source}: prompt ${i}`);
      assert.equal(got[i].usage.completion_tokens, want[i].usage.completion_tokens);
    });
    assert.equal(got[3].choices[0].message.content, wantChat.choices[0].message.content, `${source}: chat`);
    let m = await settled(srv);
    const drafted = metric(m, "tern_draft_tokens_total"), kept = metric(m, "tern_draft_accepted_tokens_total");
    const passes = metric(m, "tern_draft_passes_total");
    console.log(`${source}: drafted ${drafted}, kept ${kept}, drafter passes ${passes}`);
    assert.ok(drafted > 0 && kept > 0 && kept <= drafted);
    // a fixed length: the controller drafts in every step it can and never holds off
    assert.ok(metric(m, "tern_draft_on_steps_total") > 0);
    assert.equal(metric(m, "tern_draft_held_steps_total"), 0);
    if (source === "ngram") assert.equal(passes, 0);
    else assert.ok(passes > 0 && metric(m, "tern_draft_seconds_total") > 0);
    if (source === "ngram") continue;
    // a sampled request, streamed: drafts checked with the drafter's distributions, full length
    const stream = await B.chat.completions.create({ model: "x", max_tokens: 24, temperature: 0.9, seed: 11,
      ignore_eos: true, stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: "Tell me about the sea." }] });
    let text = "", usage = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(usage.completion_tokens, 24);
    assert.ok(text.length > 0);
    const m2 = await settled(srv);
    assert.ok(metric(m2, "tern_draft_tokens_total") > drafted, `${source}: the sampled request drafted`);
    // a constrained request (response_format: a grammar) decodes plainly: no drafts
    const before = metric(m2, "tern_draft_tokens_total");
    const j = await B.chat.completions.create({ model: "x", max_tokens: 16, temperature: 0,
      response_format: { type: "json_object" }, messages: [{ role: "user", content: "JSON please" }] });
    assert.ok(j.usage.completion_tokens > 0);
    m = await settled(srv);
    assert.equal(metric(m, "tern_draft_tokens_total"), before, `${source}: a grammar request was drafted`);
  }
  console.log("ok   greedy output with --draft ngram / a drafter GGUF / self:q4_0 equals the output without");

  // a drafter with another tokenizer: refused at start (exit 1), both fingerprints named
  const other = join(models, "llama-spm-tiny-q4_0.gguf");
  const r = spawnSync(bin, ["serve", "-m", model, "--port", "0", "-t", "1", "--draft", other], { encoding: "utf8", timeout: 30000 });
  assert.equal(r.status, 1, `exit status ${r.status}: ${r.stderr}`);
  assert.match(r.stderr, /tokenizer differs from the target's/);
  assert.match(r.stderr, /target: gpt2[^;]*fingerprint [0-9a-f]{16}\.\.\.; drafter: llama[^;]*fingerprint [0-9a-f]{16}\.\.\./);
  console.log("ok   a drafter with another tokenizer is refused: " + r.stderr.trim().split("\n").pop().slice(0, 160) + "...");
} catch (e) {
  failed = 1;
  console.log(`FAIL ${e.stack}`);
}
for (const s of servers) await s.stop().catch((e) => { failed = 1; console.log(`FAIL ${e.message}`); });
process.exit(failed);
