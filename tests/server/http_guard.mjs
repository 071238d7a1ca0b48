// http_guard.mjs — tern serve's HTTP guards as real clients meet them (the server-hardening issue,
// items 7 and 9; the exact framing cases are test_server_http.c, in-process with raw sockets).
// Node's fetch sends a 20 MB body without waiting for 100-continue: it must get the 413 the
// server writes (the server reads and discards the rest before closing), three times running.
// A text/plain POST (what a cross-site page can send without a preflight) is 415; a page on
// another origin gets no Access-Control-Allow-Origin unless --cors names it. Bound to a non-loopback
// address without an API key, the server warns on stderr; with a key it does not.
// usage: node http_guard.mjs TERN_BIN MODEL
import assert from "node:assert/strict";
import { startServer } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 120 s"); process.exit(1); }, 120000);
hardStop.unref();
const summary = {};

const srv = await startServer(bin, model, ["--quiet"]);
try {
  const url = `http://127.0.0.1:${srv.port}/v1/chat/completions`;
  // a 20 MB body: over --max-body (8 MiB), refused from its Content-Length
  const big = JSON.stringify({ messages: [{ role: "user", content: "x".repeat(20 << 20) }] });
  for (let i = 0; i < 3; i++) {
    let res;
    try {
      res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body: big });
    } catch (e) {
      throw new Error(`fetch of a 20 MB body failed instead of reading the 413: ${e.message} (${e.cause?.code ?? e.cause?.message ?? ""})`);
    }
    assert.equal(res.status, 413);
    const j = await res.json();
    assert.equal(j.error.code, "request_too_large");
    summary.big_body = `413 ${j.error.code}`;
  }
  const rss = srv.rssKiB();
  // a simple cross-site request: no preflight, so it must not run
  const plain = await fetch(url, { method: "POST", headers: { "Content-Type": "text/plain" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }) });
  assert.equal(plain.status, 415);
  assert.equal((await plain.json()).error.code, "unsupported_media_type");
  const ok = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Origin: "http://evil.example" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }) });
  assert.equal(ok.status, 403);
  assert.equal(ok.headers.get("access-control-allow-origin"), null);
  summary.text_plain = plain.status;
  summary.foreign_origin = ok.status;
  summary.rss_mib_after_big_bodies = Math.round(rss / 1024);
} finally {
  await srv.stop();
}

// --cors ORIGIN: that origin may read the answers, after a preflight
const cors = await startServer(bin, model, ["--quiet", "--cors", "http://ok.example"]);
try {
  const url = `http://127.0.0.1:${cors.port}/v1/chat/completions`;
  const pre = await fetch(url, { method: "OPTIONS", headers: { Origin: "http://ok.example",
    "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization" } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get("access-control-allow-origin"), "http://ok.example");
  const res = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json", Origin: "http://ok.example" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 1 }) });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("access-control-allow-origin"), "http://ok.example");
  summary.cors = "preflight 204, POST 200 with ACAO";
} finally {
  await cors.stop();
}

// exposed without a key: a warning; with one: none
for (const [args, warn] of [[[], true], [["--api-key", "k"], false]]) {
  const s = await startServer(bin, model, ["--quiet", "--host", "0.0.0.0", ...args]);
  await s.stop();
  const warned = /warning: .*0\.0\.0\.0.*API key/.test(s.log());
  assert.equal(warned, warn, `--host 0.0.0.0 ${args.join(" ")}: stderr was\n${s.log()}`);
}
summary.exposed_warning = "with no key only";
console.log(JSON.stringify(summary));
