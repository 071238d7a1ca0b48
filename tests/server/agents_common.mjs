// agents_common.mjs — what the Responses and Messages client tests share: starting `tern serve`
// on tern's small tool caller (tern-tool-2-smollm2: SmolLM2-135M-Instruct + tern's LoRA adapter,
// a real installed model, 6x faster than the default tern-tool-2 on Qwen2.5-Coder-0.5B), a
// checker of arguments against the JSON Schema they were constrained to (written here,
// independent of tern's grammar compiler).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "./serve.mjs";

export const KEY = "agents-key-1";
export const OTHER_KEY = "agents-key-2";
export const MODEL = "tern-tool-2-smollm2";

// Start tern serve -m tern-tool-2-smollm2 with two API keys, or exit 77 (skipped) when the model or its
// adapter is not installed (scripts/install-models.py installs both).
export async function startToolServer(bin) {
  let listed = "";
  try {
    listed = execFileSync(bin, ["models", "--json"], { stdio: ["ignore", "pipe", "ignore"] }).toString();
  } catch (e) {
    listed = "";
  }
  if (!listed.includes(`"${MODEL}"`)) {
    console.log(`SKIP: the ${MODEL} adapter or its base smollm2-135m-instruct is not installed (python3 scripts/install-models.py)`);
    process.exit(77);
  }
  const dir = mkdtempSync(join(tmpdir(), "tern-agents-"));
  const keyFile = join(dir, "keys");
  writeFileSync(keyFile, OTHER_KEY + "\n");
  const srv = await startServer(bin, MODEL, ["--api-key", KEY, "--api-key-file", keyFile, "--parallel", "2",
                                            "-c", "2048", "--default-model", MODEL]);
  rmSync(dir, { recursive: true, force: true });
  return srv;
}

// value against schema: the keywords the tests' tools use (type, properties, required,
// additionalProperties false, enum, maxLength, minimum, maximum).
export function checkSchema(value, schema, path = "$") {
  const types = { object: (v) => v !== null && typeof v === "object" && !Array.isArray(v), string: (v) => typeof v === "string",
                  integer: Number.isInteger, number: (v) => typeof v === "number", boolean: (v) => typeof v === "boolean" };
  if (schema.type) assert.ok(types[schema.type](value), `${path}: expected ${schema.type}, got ${JSON.stringify(value)}`);
  if (schema.enum) assert.ok(schema.enum.includes(value), `${path}: ${JSON.stringify(value)} is not one of ${schema.enum}`);
  if (schema.maxLength !== undefined) assert.ok(value.length <= schema.maxLength, `${path}: longer than ${schema.maxLength}`);
  if (schema.minimum !== undefined) assert.ok(value >= schema.minimum, `${path}: below ${schema.minimum}`);
  if (schema.maximum !== undefined) assert.ok(value <= schema.maximum, `${path}: above ${schema.maximum}`);
  if (schema.type === "object") {
    for (const k of schema.required || []) assert.ok(k in value, `${path}: '${k}' is required`);
    for (const [k, v] of Object.entries(value)) {
      const sub = (schema.properties || {})[k];
      if (!sub) {
        assert.notEqual(schema.additionalProperties, false, `${path}: '${k}' is not a declared property`);
        continue;
      }
      checkSchema(v, sub, `${path}.${k}`);
    }
  }
}
