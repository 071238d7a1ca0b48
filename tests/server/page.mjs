// page.mjs — the chat page at / in headless Chromium (Debian's chromium package, driven by the
// playwright-core npm package; no browser is downloaded): the page loads the model name from
// /v1/models, a message is typed into the box and sent with the Send button, and the answer must
// stream in (the answer's text changes more than once before it is complete) and end (the page
// counts finished answers in body[data-answers]). Waits are in real time, up to 60 s, so a
// loaded machine (sanitizers, a busy CI runner) only makes the test slower, never wrong: the
// earlier version used Chromium's --virtual-time-budget, whose clock kept running while a
// streamed response was open, and the page was dumped before a slow first token arrived.
// usage: node page.mjs TERN_BIN MODEL; exits 77 (skipped, with the reason) without chromium or
// playwright-core.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { basename } from "node:path";
import { startServer } from "./serve.mjs";

const [bin, model] = process.argv.slice(2);
const browserPath = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(existsSync);
if (!browserPath) { console.log("SKIP: chromium is not installed"); process.exit(77); }
let chromium;
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  console.log("SKIP: the playwright-core npm package is not installed (npm ci --prefix tests/server): " + e.message);
  process.exit(77);
}

const srv = await startServer(bin, model, ["-c", "512"]);
const browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox", "--disable-gpu"] });
let failed = false;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`http://127.0.0.1:${srv.port}/`);
  // the model name comes from GET /v1/models; Send is enabled once the page is ready
  await page.waitForFunction((name) => document.getElementById("model").textContent === name, basename(model),
                             { timeout: 60000 });
  await page.fill("#text", "Hello from the page");
  await page.waitForSelector("#send:not([disabled])", { timeout: 60000 });
  // count the changes of the answer's text while it streams (before its meta line is added)
  await page.evaluate(() => {
    window.answerChanges = 0;
    new MutationObserver(() => {
      const a = document.getElementById("answer");
      if (!a || a.querySelector(".meta")) return;
      if (a.textContent !== window.lastAnswer) { window.lastAnswer = a.textContent; window.answerChanges++; }
    }).observe(document.getElementById("log"), { childList: true, subtree: true, characterData: true });
  });
  await page.click("#send");
  await page.waitForFunction(() => document.body.dataset.answers === "1", null, { timeout: 60000 });
  const user = await page.locator(".msg.user").allTextContents();
  assert.deepEqual(user, ["Hello from the page"], "the typed message is shown once");
  // the answer: its streamed text, then a meta line with the finish reason and usage
  const got = await page.evaluate(() => {
    const a = [...document.querySelectorAll("#log > .msg")].pop();
    const meta = a.querySelector(".meta");
    return { cls: a.className, text: meta ? a.textContent.slice(0, a.textContent.length - meta.textContent.length) : a.textContent,
             meta: meta ? meta.textContent : null };
  });
  assert.equal(got.cls, "msg assistant", `an answer, not an error: ${got.text}`);
  assert.ok(got.text.trim().length > 0, "a non-empty answer");
  assert.match(got.meta || "", /^finish: (stop|length), prompt \d+ tokens \(cached \d+\), answer \d+$/, "the meta line");
  const changes = await page.evaluate(() => window.answerChanges);
  assert.ok(changes >= 2, `the answer streamed in pieces (its text changed ${changes} times)`);
  assert.equal(await page.inputValue("#text"), "", "the box is cleared after sending");
  assert.deepEqual(errors, [], "no script errors");
  console.log(`page: answer of ${got.text.length} characters, streamed in ${changes} updates; ${got.meta}`);
} catch (e) {
  failed = true;
  console.log("FAIL: " + e.message + "\n--- server\n" + srv.log());
} finally {
  await browser.close();
}
await srv.stop();
assert.match(srv.log(), /POST \/v1\/chat\/completions 200/, "the server saw the chat request");
console.log(failed ? "0 passed, 1 failed" : "1 passed, 0 failed");
process.exit(failed ? 1 : 0);
