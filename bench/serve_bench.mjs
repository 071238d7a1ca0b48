// serve_bench.mjs — what `tern serve` delivers, measured from outside over HTTP (plain fetch,
// no client library): (1) aggregate decode tokens/s of N concurrent streams vs one stream,
// each generating T tokens (ignore_eos: fixed length); (2) TTFT of a request with a ~1000-token
// system prompt, cold, then a second request sharing that system prompt (different question).
// Timed: from sending the request to the first content chunk (TTFT) and to [DONE] (tokens/s =
// sum of completion tokens / wall time of the whole group). Not timed: model load.
// usage: node bench/serve_bench.mjs BASE_URL [T=64] [N=1,2,4,8] [REPS=2] [SYSTEM_CHARS=1000] [PID]
// (SYSTEM_CHARS: length of the shared system prompt; ~1000 tokens with a byte-level vocabulary;
// 0 skips the TTFT part.) With PID (the server's process id, Linux) each group also reports the
// server's CPU time per generated token (utime + stime from /proc/PID/stat over the group, all
// its threads): a figure a loaded machine does not inflate the way it inflates wall time.
import { readFileSync } from "node:fs";
const [base = "http://127.0.0.1:8080", tArg = "64", nArg = "1,2,4,8", repArg = "2", sysArg = "1000", pidArg] = process.argv.slice(2);
const T = Number(tArg), NS = nArg.split(",").map(Number), REPS = Number(repArg), SYS = Number(sysArg);
const PID = pidArg ? Number(pidArg) : null;
// CPU seconds of process PID so far (clock ticks of 1/100 s, the Linux USER_HZ)
function cpuSeconds() {
  const stat = readFileSync(`/proc/${PID}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // fields from 3 (state) on
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function stream(body) {
  const t0 = performance.now();
  const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }) });
  if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = "", ttft = null, usage = null, done = false;
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(6, i); buf = buf.slice(i + 2);
      if (ev === "[DONE]") { done = true; continue; }
      const j = JSON.parse(ev);
      if (j.usage) usage = j.usage;
      // the first chunk after the role chunk: the first token's text (or the end)
      if (ttft === null && j.choices[0] && !j.choices[0].delta?.role) ttft = performance.now() - t0;
    }
  }
  if (!done || !usage) throw new Error("incomplete stream");
  return { ttft, ms: performance.now() - t0, usage };
}

const results = { tokens_per_stream: T, throughput: [], ttft: [] };
for (const n of NS) {
  let best = 0, cpuTok = Infinity;
  for (let rep = 0; rep < REPS; rep++) {
    const t0 = performance.now(), c0 = PID ? cpuSeconds() : 0;
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => stream({
      messages: [{ role: "user", content: `Stream ${i} rep ${rep} of ${n}.` }], max_tokens: T, ignore_eos: true, temperature: 0 })));
    const wall = (performance.now() - t0) / 1000;
    const tok = rs.reduce((a, r) => a + r.usage.completion_tokens, 0);
    best = Math.max(best, tok / wall);
    if (PID) cpuTok = Math.min(cpuTok, (cpuSeconds() - c0) / tok);
  }
  const row = { streams: n, tokens_per_s: +best.toFixed(1) };
  if (PID) row.cpu_ms_per_token = +(cpuTok * 1e3).toFixed(1);
  results.throughput.push(row);
  console.error(`${n} stream(s): ${best.toFixed(1)} tokens/s aggregate (best of ${REPS})` +
    (PID ? `, server CPU ${(cpuTok * 1e3).toFixed(1)} ms per token (least of ${REPS})` : ""));
}
const one = results.throughput.find((x) => x.streams === 1);
if (one) for (const x of results.throughput) {
  x.vs_one = +(x.tokens_per_s / one.tokens_per_s).toFixed(2);
  if (PID) x.cpu_vs_one = +(one.cpu_ms_per_token / x.cpu_ms_per_token).toFixed(2);
}
for (let rep = 0; rep < (SYS > 0 ? REPS : 0); rep++) {
  const system = (`Session ${rep} ${Date.now()}. ` + "You are a careful assistant that answers questions about the weather. ".repeat(1 + SYS / 70)).slice(0, SYS);
  const cold = await stream({ messages: [{ role: "system", content: system }, { role: "user", content: "First question?" }], max_tokens: 4, ignore_eos: true, temperature: 0 });
  const warm = await stream({ messages: [{ role: "system", content: system }, { role: "user", content: "Another one?" }], max_tokens: 4, ignore_eos: true, temperature: 0 });
  results.ttft.push({ prompt_tokens: cold.usage.prompt_tokens, cold_ms: +cold.ttft.toFixed(1), warm_ms: +warm.ttft.toFixed(1),
    warm_cached_tokens: warm.usage.prompt_tokens_details.cached_tokens, ratio: +(warm.ttft / cold.ttft).toFixed(3) });
  console.error(`shared ${cold.usage.prompt_tokens}-token prompt: TTFT cold ${cold.ttft.toFixed(1)} ms, warm ${warm.ttft.toFixed(1)} ms (${warm.usage.prompt_tokens_details.cached_tokens} cached)`);
}
console.log(JSON.stringify(results));
