// Conformance: the golden events of tests/golden/events, read as the Python contract's tests read
// them (tests/ingest/test_contract_golden.py): every valid one accepted, every invalid one rejected with
// the reason and field its file names.
import { strict as assert } from "node:assert";
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { test } from "node:test";

import { JsonFloat, parseJson } from "../src/contract/json.js";
import { EVENT_TYPES, parseEvent, REASONS, validateEvent } from "../src/index.js";

const GOLDEN = process.env.RTRL_GOLDEN_DIR ??
  resolve(__dirname, "..", "..", "..", "..", "tests", "golden", "events");

function files(kind: string): string[] {
  return readdirSync(join(GOLDEN, kind)).filter((n) => n.endsWith(".json")).sort()
    .map((n) => join(GOLDEN, kind, n));
}

interface InvalidCase {
  reason: string;
  field: string | null;
  origin?: "client" | "collected";
  tenant?: string;
  event?: unknown;
  raw?: string;
  pad_to_bytes?: number;
}

/** Compact JSON as orjson writes it: a float keeps its `.0`. */
function serialize(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (v instanceof JsonFloat ? `\u0000f:${v.value}` : v))
    .replace(/"\\u0000f:([^"]*)"/g, "$1.0");
}

function rawOf(c: InvalidCase): string {
  if (c.raw !== undefined) return c.raw;
  const text = serialize(c.event);
  return c.pad_to_bytes ? text + " ".repeat(c.pad_to_bytes - Buffer.byteLength(text)) : text;
}

test("the golden sets cover every type and every reason", () => {
  const types = new Set(files("valid").map((f) => JSON.parse(readFileSync(f, "utf8")).type));
  assert.deepEqual([...types].sort(), [...EVENT_TYPES].sort());
  const reasons = new Set(files("invalid").map((f) => JSON.parse(readFileSync(f, "utf8")).reason));
  assert.deepEqual([...reasons].sort(), [...REASONS].sort());
});

for (const path of files("valid")) {
  test(`valid: ${path.split("/").at(-1)}`, () => {
    const text = readFileSync(path, "utf8");
    const collected = parseEvent(text, { origin: "collected" });
    assert.ok(collected.ok, collected.ok ? "" : collected.error.message);
    const event = JSON.parse(text) as Record<string, unknown>;
    assert.deepEqual(Object.keys(collected.event), Object.keys(event));
    const ts = collected.event.ts as string;
    assert.ok(ts.endsWith("Z") && ts.length === 27, ts);
    delete event.received_at;
    const client = validateEvent(event, { origin: "client" });
    assert.ok(client.ok, client.ok ? "" : client.error.message);
    assert.equal(validateEvent(collected.event, { origin: "collected" }).ok, true);
  });
}

for (const path of files("invalid")) {
  test(`invalid: ${path.split("/").at(-1)}`, () => {
    const c = parseJson(readFileSync(path, "utf8")) as InvalidCase;
    const options = { origin: c.origin ?? "client", tenant: c.tenant } as const;
    const verdict = parseEvent(rawOf(c), options);
    assert.equal(verdict.ok, false);
    if (verdict.ok) return;
    assert.equal(verdict.error.reason, c.reason, verdict.error.message);
    assert.equal(verdict.error.field, c.field ?? null);
    assert.ok(path.split("/").at(-1)?.startsWith(c.reason + "-"));
    if (c.event !== undefined && c.pad_to_bytes === undefined) {
      const again = validateEvent(c.event, options);  // already parsed, as in the SDK
      assert.equal(again.ok, false);
      if (!again.ok) assert.deepEqual(again.error.toJSON(), verdict.error.toJSON());
    }
  });
}
