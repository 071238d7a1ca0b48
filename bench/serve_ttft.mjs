// serve_ttft.mjs — time to first token of chat requests sent to a server one at a time: the
// server side of the "tern serve adds <= 1 ms to TTFT over the library" target (bench/
// serve_overhead.sh runs it beside build/bin/bench_ttft, which sends the same requests to the
// library directly). Request i is the same conversation bench_ttft renders ("Request i: what is
// the weather in Paris today? ..."), streamed, max_tokens 1, temperature 0, ignore_eos. Timed:
// from sending the request to the first chunk after the role chunk (the first token's text or
// the end), as an OpenAI client sees it. One warm-up request first, not counted.
// usage: node bench/serve_ttft.mjs BASE_URL [N=30] [FIRST=0]; prints one line of JSON.
const [base = "http://127.0.0.1:8080", nArg = "30", firstArg = "0"] = process.argv.slice(2);
const N = Number(nArg), FIRST = Number(firstArg);

async function ttft(i) {
  const content = `Request ${i}: what is the weather in Paris today? Answer in one short sentence.`;
  const t0 = performance.now();
  const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content }], max_tokens: 1, temperature: 0, ignore_eos: true,
      stream: true }) });
  if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
  const dec = new TextDecoder();
  let buf = "", t = null;
  for await (const part of r.body) {
    buf += dec.decode(part, { stream: true });
    let k;
    while ((k = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(6, k); buf = buf.slice(k + 2);
      if (ev === "[DONE]") continue;
      const j = JSON.parse(ev);
      if (t === null && j.choices[0] && !j.choices[0].delta?.role) t = performance.now() - t0;
    }
  }
  if (t === null) throw new Error("no chunk after the role chunk");
  return t;
}

const pct = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.round(p * (s.length - 1))]; };
await ttft(FIRST); // warm-up, as bench_ttft
const ms = [];
for (let i = 0; i < N; i++) ms.push(await ttft(FIRST + i + 1));
console.log(JSON.stringify({ requests: N, ttft_ms_p50: +pct(ms, 0.5).toFixed(3), ttft_ms_p10: +pct(ms, 0.1).toFixed(3),
  ttft_ms_p90: +pct(ms, 0.9).toFixed(3) }));
