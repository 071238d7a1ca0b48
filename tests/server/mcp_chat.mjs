// mcp_chat.mjs — `tern chat --mcp` against an MCP server built on the official
// @modelcontextprotocol/sdk (mcp_server.mjs), as the MCP stdio transport and tools spec describe:
// - with the default model (tern-tool 2, when installed) and --tool-choice get_weather: the
//   server receives tools/call get_weather {"city": "Paris"} (its log), the result comes back as
//   a tool message (JSON line, saved conversation, and inside the next answer's prompt), and the
//   chat ends with a text answer; a tool result with isError reaches the model as "Error: ...";
//   without --yes and without a terminal the call is declined, never run;
// - a JSON-RPC error and a server dying inside tools/call: the chat goes on, the error named;
// - servers that cannot start, exit at once, write garbage, never answer (--mcp-timeout), or
//   ignore SIGTERM too: exit status 1, a message naming the server and what happened, within
//   seconds, and the server process gone afterwards (its pid, from $MCP_PIDFILE, no longer exists).
// usage: node mcp_chat.mjs TERN_BIN MODEL (MODEL unused: run.sh passes it to every script)
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const [bin] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, "node_modules/@modelcontextprotocol/sdk/package.json"))) {
  console.log("SKIP: the @modelcontextprotocol/sdk npm package is not installed (npm ci --prefix tests/server)");
  process.exit(77);
}
const hardStop = setTimeout(() => { console.log("FAIL: the test did not finish within 280 s"); process.exit(1); }, 280000);
hardStop.unref();
const tmp = mkdtempSync(join(tmpdir(), "tern-mcp-"));
const server = `node ${join(here, "mcp_server.mjs")}`;

/* Run tern chat with stdin text; detached = a new session, so there is no terminal to ask. */
function chat(args, { input = "", env = {}, detached = false } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(bin, ["chat", ...args], { env: { ...process.env, ...env }, detached, stdio: ["pipe", "pipe", "pipe"] });
    let out = "", err = "";
    child.stdout.on("data", (d) => { out += d; });
    child.stderr.on("data", (d) => { err += d; });
    child.on("close", (code) => resolve({ code, out, err, ms: Date.now() - t0 }));
    child.stdin.end(input);
  });
}
const lines = (out) => out.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
function pidsGone(pidfile) {
  const pids = readFileSync(pidfile, "utf8").split("\n").filter(Boolean).map(Number);
  assert.ok(pids.length >= 1, "the server never started");
  for (const pid of pids) assert.ok(!alive(pid), `mcp server pid ${pid} is still running after tern chat exited`);
  return pids.length;
}
const report = {};

try {
  // ---- servers that fail before any model is loaded ----
  let r = await chat(["--mcp", "tern-no-such-mcp-server --stdio", "--yes"], { input: "hi\n" });
  assert.equal(r.code, 1, r.err);
  assert.match(r.err, /mcp server 'tern-no-such-mcp-server --stdio': cannot start 'tern-no-such-mcp-server': No such file or directory/);

  const failing = {
    exit: /mcp server 'node mcp_server\.mjs': exited with status 3 without answering initialize/,
    garbage: /mcp server 'node mcp_server\.mjs': wrote a line that is not a JSON-RPC message on stdout: "this is not JSON-RPC"/,
    silent: /mcp server 'node mcp_server\.mjs': no answer to initialize within 1 s \(--mcp-timeout\)/,
    stubborn: /mcp server 'node mcp_server\.mjs': no answer to initialize within 1 s \(--mcp-timeout\)/,
  };
  for (const [mode, want] of Object.entries(failing)) {
    const pidfile = join(tmp, `${mode}.pids`);
    // a server that exits or writes garbage is seen at once: its timeout is long (node itself may
    // take more than a second to start on a busy machine), and the 15 s bound below proves that
    // tern did not wait for it; the silent ones get 1 s
    const timeout = mode === "exit" || mode === "garbage" ? "20" : "1";
    r = await chat(["--mcp", server, "--yes", "--mcp-timeout", timeout], { input: "hi\n", env: { MCP_MODE: mode, MCP_PIDFILE: pidfile } });
    assert.equal(r.code, 1, `${mode}: ${r.err}`);
    assert.match(r.err, want, mode);
    // 1 s of timeout, then 2 s for the server to leave after its stdin closes, 1 s after SIGTERM
    assert.ok(r.ms < 15000, `${mode}: took ${r.ms} ms`);
    pidsGone(pidfile);
    report[mode] = { ms: r.ms };
  }
  assert.match(r.err, /SIGTERM ignored/, "the stubborn server's stderr is passed through");

  r = await chat(["--mcp", "node 'unbalanced", "--yes"], { input: "hi\n" });
  assert.equal(r.code, 1);
  assert.match(r.err, /--mcp "node 'unbalanced": unbalanced quotes/);

  r = await chat(["--mcp", server, "--mcp", server, "--yes"], { input: "hi\n" });
  assert.equal(r.code, 1);
  assert.match(r.err, /tool "get_weather" is offered by mcp server 'tern-test-mcp' and by mcp server 'tern-test-mcp'/);

  r = await chat(["--mcp", server, "--tools", join(tmp, "x.json")], { input: "hi\n" });
  assert.equal(r.code, 2);
  assert.match(r.err, /--mcp with --tools/);

  // ---- with a real tool caller: tern-tool 2 on SmolLM2-135M-Instruct (tern's LoRA adapter; the
  // default, on the 4x larger Qwen2.5-Coder-0.5B, speaks the same protocol 6x slower) ----
  const SMALL = ["-m", "tern-tool-2-smollm2"];
  const models = JSON.parse(execFileSync(bin, ["models", "--json"]).toString());
  if (!models.some((m) => m.name === "tern-tool-2-smollm2")) {
    console.log(JSON.stringify({ ...report, model: "SKIPPED: tern-tool-2-smollm2 is not installed (scripts/install-models.py)" }));
    process.exit(0);
  }
  const log = join(tmp, "calls.jsonl"), saved = join(tmp, "conv.json"), pids = join(tmp, "ok.pids");
  r = await chat([...SMALL, "--mcp", server, "--yes", "--json", "--show-prompt", "--tool-choice", "get_weather", "-t", "2",
                  "--save-messages", saved],
                 { input: "What is the weather in Paris?\n", env: { MCP_LOG: log, MCP_PIDFILE: pids } });
  assert.equal(r.code, 0, r.err);
  pidsGone(pids);
  const calls = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(calls[0], { name: "get_weather", arguments: { city: "Paris" } });
  const out = lines(r.out);
  const call = out.find((l) => l.tool_call);
  assert.equal(call.tool_call.function.name, "get_weather");
  const result = out.find((l) => l.tool_result);
  assert.deepEqual(result.tool_result, { tool_call_id: call.tool_call.id, name: "get_weather",
                                         content: "Weather in Paris: sunny, 21 °C", is_error: false });
  const turns = out.filter((l) => l.stats);
  assert.ok(turns.length >= 2, "an answer after the tool result");
  assert.ok(turns[1].prompt.includes("Weather in Paris: sunny, 21 °C"), "the result is in the prompt of the next answer");
  const last = turns[turns.length - 1];
  assert.deepEqual(last.tool_calls, [], "the chat ends with a text answer");
  assert.ok(last.content.trim().length > 0, "the final answer has text");
  const conv = JSON.parse(readFileSync(saved, "utf8"));
  assert.deepEqual(conv.messages.slice(0, 3).map((m) => m.role), ["user", "assistant", "tool"]);
  assert.equal(conv.messages[2].tool_call_id, conv.messages[1].tool_calls[0].id);
  assert.equal(conv.messages[conv.messages.length - 1].role, "assistant");
  report.model = { call: calls[0], answer: last.content, rounds: turns.length - 1 };

  // isError: the model is told, the user too
  r = await chat([...SMALL, "--mcp", server, "--yes", "--json", "--tool-choice", "always_fails", "-t", "2", "--max-tool-rounds", "1"],
                 { input: "Please run the failing tool.\n" });
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /tool call always_fails: mcp server 'tern-test-mcp' reported an error: the tool failed on purpose/);
  let res = lines(r.out).find((l) => l.tool_result).tool_result;
  assert.equal(res.is_error, true);
  assert.equal(res.content, "Error: the tool failed on purpose");

  // a JSON-RPC error, then a server that dies in tools/call: named, and the chat still ends
  for (const [mode, want] of [["rpcerror", /mcp server 'tern-test-mcp': tools\/call failed: JSON-RPC error -32603: .*the weather service is down/],
                              ["crashcall", /mcp server 'tern-test-mcp': exited with status 4 without answering tools\/call/]]) {
    r = await chat([...SMALL, "--mcp", server, "--yes", "--json", "--tool-choice", "get_weather", "-t", "2", "--max-tool-rounds", "1"],
                   { input: "What is the weather in Oslo?\n", env: { MCP_MODE: mode } });
    assert.equal(r.code, 0, `${mode}: ${r.err}`);
    assert.match(r.err, want, mode);
    res = lines(r.out).find((l) => l.tool_result).tool_result;
    assert.equal(res.is_error, true, mode);
    assert.match(res.content, /^Error: mcp server 'tern-test-mcp': /);
  }

  // no --yes and no terminal: declined, the server never sees the call
  const log2 = join(tmp, "declined.jsonl");
  r = await chat([...SMALL, "--mcp", server, "--json", "--tool-choice", "get_weather", "-t", "2", "--max-tool-rounds", "1"],
                 { input: "What is the weather in Rome?\n", env: { MCP_LOG: log2 }, detached: true });
  assert.equal(r.code, 0, r.err);
  assert.match(r.err, /Run it\? \[y\/N\]/);
  assert.match(r.err, /no terminal to ask the user \(tern chat --yes runs calls without asking\)/);
  assert.ok(!existsSync(log2), "a declined call reached the server");
  res = lines(r.out).find((l) => l.tool_result).tool_result;
  assert.match(res.content, /^Error: not run: /);
  console.log(JSON.stringify(report));
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
