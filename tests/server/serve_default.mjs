// serve_default.mjs — `tern serve` without -m serves the default model as run and chat do:
// with no adapter installed (TERN_MODELS_DIR points at an empty folder) that is the model
// embedded in the binary, listed in /v1/models as "tern-tool" and answering a chat request;
// a build without an embedded model refuses with exit 2 and says -m is needed.
// usage: node serve_default.mjs TERN_BIN MODEL (MODEL unused: run.sh passes it to every script)
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [bin] = process.argv.slice(2);
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 60 s"); process.exit(1); }, 60000);
hardStop.unref();
const empty = mkdtempSync(join(tmpdir(), "tern-serve-default-"));
const env = { ...process.env, TERN_MODELS_DIR: empty };
const embedded = execFileSync(bin, ["version"], { env }).toString().includes("embedded model: tern-tool");
const child = spawn(bin, ["serve", "--port", "0", "-c", "512", "-t", "1", "--quiet"], { env, stdio: ["ignore", "ignore", "pipe"] });
let log = "";
child.stderr.on("data", (d) => { log += d; });
try {
  if (!embedded) {
    const code = await new Promise((resolve) => child.on("exit", resolve));
    assert.equal(code, 2, log);
    assert.match(log, /a model is required/);
    console.log(JSON.stringify({ embedded: false, refused: true }));
  } else {
    const port = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no listening line:\n" + log)), 30000);
      const poll = setInterval(() => {
        const m = /listening on http:\/\/[^ ]*:(\d+) /.exec(log);
        if (m) { clearInterval(poll); clearTimeout(timer); resolve(Number(m[1])); }
      }, 50);
      child.on("exit", (code) => reject(new Error(`tern serve exited with ${code}:\n${log}`)));
    });
    const base = `http://127.0.0.1:${port}`;
    let models;
    for (let i = 0; i < 100; i++) { /* the port is bound before the model loads */
      const r = await fetch(`${base}/v1/models`);
      if (r.status === 200) { models = await r.json(); break; }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(models, "no /v1/models answer");
    assert.equal(models.data[0].id, "tern-tool");
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 }),
    });
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.equal(body.model, "tern-tool");
    assert.ok(body.usage.completion_tokens >= 1);
    console.log(JSON.stringify({ embedded: true, model: models.data[0].id, answered: body.choices[0].message.content }));
  }
} finally {
  child.kill("SIGTERM");
  rmSync(empty, { recursive: true, force: true });
}
