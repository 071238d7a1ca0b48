// isolation.mjs — one user's prompt is not reused for, nor visible to, another:
// prefix reuse (a slot's KV, another slot's, the prompt cache) happens only within an isolation
// group, the API key a request was sent with plus its prompt_cache_key. Checked on a server with
// one slot and a prompt cache (a user's second request finds its prefix in the cache, the slot
// having served another user in between) and on one with four slots and no cache (slot reuse
// and copies between slots): with a system prompt holding a PIN,
//   key 1 first: cold; key 2 then: cached_tokens 0; key 1 again: its prefix cached;
//   key 1 with prompt_cache_key "x": 0, again: cached; key 2 with "x": 0;
// keys given by --api-key, --api-key-file and TERN_API_KEY; a wrong key is a 401, a
// prompt_cache_key that is not a string a 400, both in OpenAI's error shape. Prints a JSON summary.
// usage: node isolation.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 120 s"); process.exit(1); }, 120000);
hardStop.unref();
const dir = mkdtempSync(join(tmpdir(), "tern-isolation-"));
const keyFile = join(dir, "keys");
writeFileSync(keyFile, "# the second user's key\n\n  key-two-0123456789  \r\n");
const K1 = "key-one-abcdef", K2 = "key-two-0123456789";
const system = "You are the assistant of Ada. Her bank PIN is 4821 and must never be told. ".repeat(6);

async function ask(srv, key, question, extra = {}) {
  const res = await fetch(`${srv.baseURL}/chat/completions`, {
    method: "POST", signal: AbortSignal.timeout(30000),
    headers: { "Content-Type": "application/json", ...(key ? { Authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify({ messages: [{ role: "system", content: system }, { role: "user", content: question }],
      max_tokens: 2, temperature: 0, ...extra }),
  });
  const body = await res.json();
  return { status: res.status, body, cached: body.usage?.prompt_tokens_details?.cached_tokens, prompt: body.usage?.prompt_tokens };
}

async function scenario(name, args) {
  const srv = await startServer(bin, model, ["--quiet", "--api-key", K1, "--api-key-file", keyFile, ...args]);
  try {
    const r = {};
    r.k1_first = await ask(srv, K1, "What is the weather like?");
    r.k2_other = await ask(srv, K2, "What is the time?");
    r.k1_again = await ask(srv, K1, "What day is it?");
    r.k1_x = await ask(srv, K1, "Who are you?", { prompt_cache_key: "x" });
    r.k1_x_again = await ask(srv, K1, "Where are you?", { prompt_cache_key: "x" });
    r.k2_x = await ask(srv, K2, "Why are you?", { prompt_cache_key: "x" });
    const wrong = await ask(srv, "key-three", "Hello?");
    const badType = await ask(srv, K1, "Hello?", { prompt_cache_key: 7 });
    const out = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v.cached]));
    console.log(JSON.stringify({ server: name, prompt_tokens: r.k1_first.prompt, cached_tokens: out }));
    for (const [k, v] of Object.entries(r)) assert.equal(v.status, 200, `${name} ${k}: ${JSON.stringify(v.body)}`);
    assert.equal(r.k1_first.cached, 0, `${name}: the first request is cold`);
    assert.equal(r.k2_other.cached, 0, `${name}: key 2 reused ${r.k2_other.cached} tokens of key 1's prompt`);
    assert.ok(r.k1_again.cached > 0, `${name}: key 1 reuses its own prefix`);
    assert.equal(r.k1_x.cached, 0, `${name}: prompt_cache_key "x" is another group than none`);
    assert.ok(r.k1_x_again.cached > 0, `${name}: the same key and prompt_cache_key share`);
    assert.equal(r.k2_x.cached, 0, `${name}: the same prompt_cache_key under another key is isolated`);
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error.code, "invalid_api_key");
    assert.equal(badType.status, 400);
    assert.equal(badType.body.error.param, "prompt_cache_key");
    assert.equal(typeof badType.body.error.message, "string");
  } finally {
    await srv.stop();
  }
}

let failed = 0;
try {
  await scenario("1 slot + prompt cache", ["--parallel", "1", "--cache-mb", "16"]);
  await scenario("4 slots", ["--parallel", "4"]);
  // the key from the environment (out of ps): needed, and accepted
  process.env.TERN_API_KEY = "key-from-env";
  const srv = await startServer(bin, model, ["--quiet"]);
  delete process.env.TERN_API_KEY;
  try {
    const none = await ask(srv, null, "Hello?"), ok = await ask(srv, "key-from-env", "Hello?");
    console.log(JSON.stringify({ server: "TERN_API_KEY", without_key: none.status, with_key: ok.status }));
    assert.equal(none.status, 401);
    assert.equal(ok.status, 200);
  } finally {
    await srv.stop();
  }
} catch (e) {
  console.log("FAIL: " + e.message);
  failed = 1;
}
rmSync(dir, { recursive: true, force: true });
process.exit(failed);
