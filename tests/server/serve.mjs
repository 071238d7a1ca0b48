// serve.mjs — start `tern serve` on a free loopback port for a test and stop it (SIGTERM:
// the server drains and must exit 0). Shared by the openai-client tests and the load test.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

export async function startServer(bin, model, args = []) {
  const child = spawn(bin, ["serve", "-m", model, "--port", "0", "-c", "1024", "-t", "1", ...args],
                      { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("tern serve did not start:\n" + log)), 30000);
    child.stderr.on("data", (d) => {
      log += d;
      const m = /listening on http:\/\/[^ ]*:(\d+) /.exec(log);
      if (m) { clearTimeout(timer); resolve(Number(m[1])); }
    });
    child.on("exit", (code) => reject(new Error(`tern serve exited with ${code}:\n${log}`)));
  });
  return {
    port, child,
    baseURL: `http://127.0.0.1:${port}/v1`,
    rssKiB() {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"));
      return m ? Number(m[1]) : -1;
    },
    log: () => log,
    async stop() {
      const code = await new Promise((resolve) => { child.removeAllListeners("exit"); child.on("exit", resolve); child.kill("SIGTERM"); });
      if (code !== 0) throw new Error(`tern serve exited with ${code} after SIGTERM:\n${log}`);
    },
  };
}

// Import the official client, or exit 77 (ctest: skipped) when it is not installed.
export async function importOpenAI() {
  try {
    return (await import("openai")).default;
  } catch (e) {
    console.log("SKIP: the openai npm package is not installed (npm ci --prefix tests/server): " + e.message);
    process.exit(77);
  }
}

// Import the official Anthropic client, or exit 77 (ctest: skipped) when it is not installed.
export async function importAnthropic() {
  try {
    return (await import("@anthropic-ai/sdk")).default;
  } catch (e) {
    console.log("SKIP: the @anthropic-ai/sdk npm package is not installed (npm ci --prefix tests/server): " + e.message);
    process.exit(77);
  }
}

// Run named async checks in order, print "ok - NAME" / "not ok - NAME" lines, stop the server,
// and exit 1 if any failed.
export async function runChecks(checks, srv) {
  let passed = 0, failed = 0;
  for (const { name, fn } of checks) {
    try {
      await fn();
      passed++;
      console.log(`ok - ${name}`);
    } catch (e) {
      failed++;
      console.log(`not ok - ${name}\n${e.stack}`);
    }
  }
  await srv.stop();
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
