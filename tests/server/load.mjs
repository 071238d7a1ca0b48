// load.mjs — a bounded load test of tern serve on loopback with the official openai client:
// N concurrent streaming clients loop for a fixed time (every request completes or the run
// fails), some requests are aborted mid-stream on purpose (disconnects must free their slots),
// and at the end: zero errors, every non-aborted stream complete (finish_reason, usage with
// exactly the requested tokens), no request left running or queued, server RSS flat (growth
// bounded after the first round warmed everything). Prints a JSON summary.
// usage: node load.mjs TERN_BIN MODEL [CLIENTS=8] [SECONDS=15] [PARALLEL=4]
import assert from "node:assert/strict";
import { startServer, importOpenAI } from "./serve.mjs";

const [bin, model, nc = "8", secs = "15", par = "4"] = process.argv.slice(2);
const CLIENTS = Number(nc), SECONDS = Number(secs);
const OpenAI = await importOpenAI();
const srv = await startServer(bin, model, ["--parallel", par, "--max-queue", String(CLIENTS * 2), "--quiet"]);
const client = new OpenAI({ baseURL: srv.baseURL, apiKey: "none", maxRetries: 0, timeout: 120000 });
const system = "You are a helpful assistant. ".repeat(20); // shared prefix: reused across requests

const stats = { requests: 0, completed: 0, aborted: 0, errors: 0, incomplete: 0, tokens: 0, cached_tokens: 0, prompt_tokens: 0 };
const problems = [];

async function one(i, round, abort) {
  const max_tokens = 16 + ((i * 7 + round * 3) % 33);
  const ac = new AbortController();
  stats.requests++;
  try {
    const stream = await client.chat.completions.create({ model: "x", stream: true, stream_options: { include_usage: true },
      messages: [{ role: "system", content: system }, { role: "user", content: `client ${i} round ${round}` }],
      max_tokens, ignore_eos: true, temperature: 0.7, seed: i * 1000 + round }, { signal: ac.signal });
    let finish = null, usage = null, chunks = 0;
    for await (const ch of stream) {
      if (ch.usage) usage = ch.usage;
      const c = ch.choices[0];
      if (c?.delta?.content) chunks++;
      if (c?.finish_reason) finish = c.finish_reason;
      if (abort && chunks === 3) ac.abort();
    }
    if (abort && ac.signal.aborted) { stats.aborted++; return; } // the SDK ends the loop quietly
    if (finish !== "length" || !usage || usage.completion_tokens !== max_tokens || chunks === 0) {
      stats.incomplete++;
      problems.push(`client ${i} round ${round}: finish ${finish}, usage ${JSON.stringify(usage)}, ${chunks} chunks`);
      return;
    }
    stats.completed++;
    stats.tokens += usage.completion_tokens;
    stats.prompt_tokens += usage.prompt_tokens;
    stats.cached_tokens += usage.prompt_tokens_details.cached_tokens;
  } catch (e) {
    if (abort && (e.name === "AbortError" || e instanceof OpenAI.APIUserAbortError)) { stats.aborted++; return; }
    stats.errors++;
    problems.push(`client ${i} round ${round}: ${e.message}`);
  }
}

// Two rounds at least whatever the clock says, so "more requests completed than clients" holds
// on a machine of any speed (the rate is reported, never asserted).
async function worker(i, until) {
  for (let round = 0; round < 2 || Date.now() < until; round++) await one(i, round, round % 5 === 4 && i % 2 === 0);
}

// warm-up round (first requests allocate what the server keeps), then the timed run
await Promise.all(Array.from({ length: CLIENTS }, (_, i) => one(i, -1, false)));
const rss0 = srv.rssKiB();
const t0 = Date.now();
await Promise.all(Array.from({ length: CLIENTS }, (_, i) => worker(i, t0 + SECONDS * 1000)));
const wall = (Date.now() - t0) / 1000;
await new Promise((r) => setTimeout(r, 500)); // aborted requests' slots are freed within a step
const metrics = await (await fetch(`http://127.0.0.1:${srv.port}/metrics`)).text();
const gauge = (name) => Number(new RegExp(`\\n${name} ([0-9.e+-]+)`).exec(metrics)[1]);
const rss1 = srv.rssKiB();
await srv.stop();
const summary = { clients: CLIENTS, seconds: wall, ...stats, tokens_per_s: +(stats.tokens / wall).toFixed(1),
  rss_kib_after_warmup: rss0, rss_kib_end: rss1, active_after: gauge("tern_active_sequences"),
  queue_after: gauge("tern_queue_depth"), cancelled_metric: gauge("tern_requests_cancelled_total") };
console.log(JSON.stringify(summary));
let failed = 0;
try {
  assert.equal(stats.errors, 0, problems.join("\n"));
  assert.equal(stats.incomplete, 0, problems.join("\n"));
  assert.ok(stats.completed > CLIENTS, "too few requests completed");
  assert.equal(summary.active_after, 0);
  assert.equal(summary.queue_after, 0);
  if (process.env.TERN_SANITIZED) console.log("RSS check skipped: ASan's quarantine grows RSS; LeakSanitizer checks leaks");
  else assert.ok(rss1 - rss0 < 32 * 1024, `server RSS grew by ${rss1 - rss0} KiB`);
  assert.ok(stats.cached_tokens > 0, "the shared system prompt was never reused");
} catch (e) {
  failed = 1;
  console.log(e.message);
}
console.log(`${1 - failed} passed, ${failed} failed`);
process.exit(failed);
