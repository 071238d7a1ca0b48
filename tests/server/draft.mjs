// draft.mjs — `tern serve --draft ngram`: each request drafts from its own prompt and answer and
// the drafts are checked in the shared forward pass. Two servers on the same model, one with
// drafting and one without, both on the scalar kernels (batch-invariant on every CPU, so the
// promise "greedy output is token for token the undrafted output" is checkable anywhere): the
// same greedy requests, sent three at a time to the drafting server, give the same text and
// token counts as one at a time without drafting, and /metrics shows drafts checked and kept.
// The official openai client sends them. usage: node draft.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { startServer, importOpenAI } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const OpenAI = await importOpenAI();
process.env.TERN_KERNELS = "scalar";
const plain = await startServer(bin, model, ["--parallel", "3"]);
const draft = await startServer(bin, model, ["--parallel", "3", "--draft", "ngram", "--draft-max", "6"]);
const A = new OpenAI({ baseURL: plain.baseURL, apiKey: "none", maxRetries: 0 });
const B = new OpenAI({ baseURL: draft.baseURL, apiKey: "none", maxRetries: 0 });

// prompts that repeat themselves, so the lookup has continuations to offer
const prompts = ["one two three four one two three four one two three four one two",
                 "a, b, c, a, b, c, a, b, c, a, b,", "The cat sat. The cat sat. The cat sat. The"];
const req = (p) => ({ model: "x", prompt: p, max_tokens: 32, temperature: 0, ignore_eos: true });
const chatReq = { model: "x", max_tokens: 32, temperature: 0,
                  messages: [{ role: "user", content: "Repeat: red green blue red green blue red green blue" }] };
let failed = 0;
try {
  const want = [];
  for (const p of prompts) want.push(await A.completions.create(req(p)));
  const wantChat = await A.chat.completions.create(chatReq);
  const got = await Promise.all([...prompts.map((p) => B.completions.create(req(p))), B.chat.completions.create(chatReq)]);
  prompts.forEach((p, i) => {
    assert.equal(got[i].choices[0].text, want[i].choices[0].text, `prompt ${i}`);
    assert.equal(got[i].usage.completion_tokens, want[i].usage.completion_tokens);
  });
  assert.equal(got[3].choices[0].message.content, wantChat.choices[0].message.content, "chat");
  const m = await (await fetch(draft.baseURL.replace("/v1", "/metrics"))).text();
  const drafted = Number(/^tern_draft_tokens_total (\S+)/m.exec(m)[1]);
  const kept = Number(/^tern_draft_accepted_tokens_total (\S+)/m.exec(m)[1]);
  console.log(`drafted ${drafted}, kept ${kept}`);
  assert.ok(drafted > 0 && kept > 0 && kept <= drafted);
  const mp = await (await fetch(plain.baseURL.replace("/v1", "/metrics"))).text();
  assert.match(mp, /^tern_draft_tokens_total 0$/m);
  console.log("ok   greedy output with --draft ngram equals the output without");
} catch (e) {
  failed = 1;
  console.log(`FAIL ${e.stack}`);
}
await plain.stop();
await draft.stop();
process.exit(failed);
