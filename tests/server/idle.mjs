// idle.mjs — idle and slow connections must not lock other clients out.
// Opens IDLE sockets that send nothing plus tricklers that send a request's headers (or its
// body) one byte a second, then fires 50 real requests (GET /health and 4-token completions,
// 10 at a time, a new connection each) while they are all open: every one must answer 200
// (their latency is reported, never asserted: speed belongs to benchmarks). Then: a trickler
// is closed by the server once the receive deadline (--read-timeout T) has passed although it
// keeps sending, and a stream whose reader pauses longer than T still completes (the deadline
// covers receiving a request, not sending its answer). Last, with --max-connections-per-ip 8
// the 9th connection from one address is closed at once. Bounded: the whole run stops itself within 60 s. Prints a JSON summary.
// usage: node idle.mjs TERN_BIN MODEL [IDLE=1000] [T=5]   (T = "default": no --read-timeout flag)
import assert from "node:assert/strict";
import net from "node:net";
import http from "node:http";
import { startServer } from "./serve.mjs";

const [bin, model, nIdle = "1000", tArg = "5"] = process.argv.slice(2);
const IDLE = Number(nIdle), T = tArg === "default" ? 30 : Number(tArg), TRICKLE = 20;
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 60 s"); process.exit(1); }, 60000);
hardStop.unref();

const srv = await startServer(bin, model, ["--quiet", ...(tArg === "default" ? [] : ["--read-timeout", String(T)])]);
const sockets = [];
let failed = 0;
try {
  // --- the attackers: silent sockets, and tricklers of a header or a body
  const t_open = Date.now();
  const open = (onConnect) => new Promise((resolve) => {
    const s = net.connect(srv.port, "127.0.0.1");
    const rec = { s, t0: Date.now(), closedAt: 0, data: "" };
    s.on("connect", () => { onConnect?.(s); resolve(rec); });
    s.on("data", (d) => { rec.data += d; });
    s.on("error", () => {});
    s.on("close", () => { rec.closedAt = Date.now(); resolve(rec); });
    sockets.push(rec);
  });
  const idle = await Promise.all(Array.from({ length: IDLE }, () => open()));
  const trickle = (text) => (s) => {
    let i = 0;
    const timer = setInterval(() => {
      if (s.destroyed || i >= text.length) return clearInterval(timer);
      s.write(text[i++]);
    }, 1000);
    timer.unref();
  };
  const header = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + "X-Pad: a\r\n".repeat(20);
  const body = '{"prompt": "' + "x".repeat(200) + '"}';
  const tricklers = await Promise.all([
    ...Array.from({ length: TRICKLE / 2 }, () => open(trickle(header))),
    ...Array.from({ length: TRICKLE / 2 }, () => open((s) => {
      s.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      trickle(body)(s);
    })),
  ]);
  const opened = (Date.now() - t_open) / 1000;
  const connected = [...idle, ...tricklers].filter((r) => !r.closedAt).length;

  // --- 50 real requests while they are all open
  const request = (i) => new Promise((resolve) => {
    const t0 = performance.now();
    const post = i % 2 === 1;
    const data = JSON.stringify({ prompt: `real request ${i}`, max_tokens: 4, temperature: 0 });
    const req = http.request({ host: "127.0.0.1", port: srv.port, path: post ? "/v1/completions" : "/health",
      method: post ? "POST" : "GET", agent: false, timeout: 5000,
      headers: post ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(data) } : {} }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, ms: performance.now() - t0 }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out after 5 s")));
    req.on("error", (e) => resolve({ status: 0, ms: performance.now() - t0, error: e.message }));
    if (post) req.write(data);
    req.end();
  });
  const results = [];
  for (let wave = 0; wave < 5; wave++)
    results.push(...await Promise.all(Array.from({ length: 10 }, (_, k) => request(wave * 10 + k))));
  const still_open = [...idle, ...tricklers].filter((r) => !r.closedAt).length;
  const bad = results.filter((r) => r.status !== 200);
  if (bad.length) throw new Error(`${bad.length} of 50 requests failed under ${IDLE} idle connections: ${bad.slice(0, 3).map((r) => `${r.status} ${r.error ?? ""}`).join(", ")}`);
  const ms = results.map((r) => r.ms).sort((a, b) => a - b);
  const p = (q) => ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)];

  // --- a stream whose reader pauses past the deadline still completes
  const stream = await new Promise((resolve) => {
    const data = JSON.stringify({ prompt: "a long answer", max_tokens: 64, ignore_eos: true, stream: true, temperature: 0 });
    const s = net.connect(srv.port, "127.0.0.1", () => {
      s.write(`POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(data)}\r\n\r\n${data}`);
    });
    let got = "", paused = false;
    s.on("data", (d) => {
      got += d;
      if (!paused) { paused = true; s.pause(); setTimeout(() => s.resume(), (T + 1.5) * 1000); }
      if (got.includes("data: [DONE]")) { s.destroy(); resolve({ done: true, bytes: got.length }); }
    });
    s.on("error", () => {});
    s.on("close", () => resolve({ done: got.includes("data: [DONE]"), bytes: got.length }));
    setTimeout(() => { s.destroy(); resolve({ done: false, bytes: got.length }); }, (T + 10) * 1000).unref();
  });

  // --- the tricklers are cut at the deadline although they keep sending
  const until = Date.now() + (T + 4) * 1000;
  while (Date.now() < until && tricklers.some((r) => !r.closedAt)) await new Promise((r) => setTimeout(r, 100));
  const cut = tricklers.map((r) => (r.closedAt ? (r.closedAt - r.t0) / 1000 : Infinity)).sort((a, b) => a - b);
  const got408 = tricklers.filter((r) => r.data.startsWith("HTTP/1.1 408")).length;

  const summary = { idle: IDLE, tricklers: TRICKLE, opened_s: opened, connected_before: connected, open_after_requests: still_open,
    ok: results.filter((r) => r.status === 200).length, p50_ms: +p(0.5).toFixed(1), p99_ms: +p(0.99).toFixed(1),
    max_ms: +ms[ms.length - 1].toFixed(1), stream_paused_past_deadline: stream.done,
    read_timeout_s: T, tricklers_closed_after_s: [+cut[0].toFixed(2), +cut[cut.length - 1].toFixed(2)], answered_408: got408 };
  console.log(JSON.stringify(summary));
  const errs = results.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.error ?? ""}`);
  assert.equal(connected, IDLE + TRICKLE, "every attacking socket connected and stayed open");
  assert.equal(errs.length, 0, `requests failed under ${IDLE} idle connections: ${errs.slice(0, 5).join(", ")}`);
  assert.ok(still_open >= IDLE, `the idle sockets were still open while the requests ran (${still_open})`);
  assert.ok(stream.done, "a stream paused past the deadline completed");
  assert.ok(cut[0] >= T - 0.5 && cut[cut.length - 1] <= T + 3, `tricklers closed ${cut[0]}..${cut[cut.length - 1]} s after connecting (deadline ${T} s)`);
  assert.equal(got408, TRICKLE, "each trickler got a 408");
} catch (e) {
  console.log("FAIL: " + e.message);
  failed = 1;
}
for (const r of sockets) r.s.destroy();
await srv.stop().catch((e) => { console.log("FAIL: " + e.message); failed = 1; });

// --- --max-connections-per-ip: the address's next connection is closed at once
if (!failed) {
  const srv2 = await startServer(bin, model, ["--quiet", "--max-connections-per-ip", "8"]);
  const held = [];
  try {
    const conn = () => new Promise((resolve) => {
      const s = net.connect(srv2.port, "127.0.0.1");
      const t0 = Date.now();
      held.push(s);
      s.on("error", () => {});
      s.on("close", () => resolve((Date.now() - t0) / 1000));
      setTimeout(() => resolve(-1), 3000).unref(); // -1: still open
    });
    const eight = [];
    for (let i = 0; i < 8; i++) { eight.push(conn()); await new Promise((r) => setTimeout(r, 20)); }
    const ninth = await conn();
    held[0].destroy();
    await eight[0];
    await new Promise((r) => setTimeout(r, 200));
    const health = await fetch(`http://127.0.0.1:${srv2.port}/health`, { signal: AbortSignal.timeout(5000) }).then((r) => r.status, (e) => e.message);
    console.log(JSON.stringify({ per_ip_limit: 8, ninth_closed_after_s: ninth, health_after_one_left: health }));
    assert.ok(ninth >= 0 && ninth < 1, "the 9th connection from one address is closed at once");
    assert.equal(health, 200, "a freed place is usable again");
  } catch (e) {
    console.log("FAIL: " + e.message);
    failed = 1;
  }
  for (const s of held) s.destroy();
  await srv2.stop().catch((e) => { console.log("FAIL: " + e.message); failed = 1; });
}
process.exit(failed);
