import { strict as assert } from "node:assert";
import { test } from "node:test";

import { normalizeTs, nowTs, uuid7, uuid7UnixMs, validateEvent } from "../src/index.js";
import { crc32, keepsInteraction } from "../src/sdk/sampling.js";

test("timestamps normalize to canonical UTC, as ingest/contract/timestamps.py does", () => {
  assert.equal(normalizeTs("2026-11-30T03:23:05.1+01:00", "ts"), "2026-11-30T02:23:05.100000Z");
  assert.equal(normalizeTs("2026-11-30t02:23:05z", "ts"), "2026-11-30T02:23:05.000000Z");
  assert.equal(normalizeTs("2026-11-30T02:23:05.1234567Z", "ts"), "2026-11-30T02:23:05.123456Z");
  assert.equal(normalizeTs("2026-03-01T00:30:00+01:00", "ts"), "2026-02-28T23:30:00.000000Z");
  assert.equal(normalizeTs("2024-02-29T12:00:00Z", "ts"), "2024-02-29T12:00:00.000000Z");
  for (const bad of ["2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-11-30T02:23:05",
                     "2026-11-30 02:23:05Z", "2100-12-31T23:30:00-01:00", "1970-01-01T00:00:00Z",
                     "2026-11-30T02:23:05Z\n"]) {
    assert.throws(() => normalizeTs(bad, "ts"), { reason: "bad_timestamp" }, bad);
  }
  assert.match(nowTs(), /^20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}000Z$/);
});

test("uuid7: version 7, variant 10, the current time, strictly increasing", () => {
  const ids = Array.from({ length: 5000 }, () => uuid7());
  for (const id of ids) assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(ids).size, ids.length);
  assert.ok(Math.abs(uuid7UnixMs(ids[0] as string) - Date.now()) < 5000);
});

test("text lengths count code points, like Python's len", () => {
  const base = { event_id: "e-1", type: "edit.accepted", schema_version: 1,
                 ts: "2026-11-30T02:23:05Z", interaction_id: "i", session_id: "s", user_id: "u",
                 org_id: "o", checkpoint_id: "c", payload: { edit_id: "e" } };
  assert.equal(validateEvent({ ...base, session_id: "😀".repeat(128) }, { origin: "client" }).ok, true);
  const long = validateEvent({ ...base, session_id: "😀".repeat(129) }, { origin: "client" });
  assert.equal(long.ok ? "" : long.error.reason, "out_of_range");
  const lone = validateEvent({ ...base, session_id: "a\ud800" }, { origin: "client" });
  assert.equal(lone.ok ? "" : lone.error.reason, "out_of_range");
  const email = validateEvent({ ...base, user_id: "a@b.c" }, { origin: "client" });
  assert.equal(email.ok ? "" : `${email.error.reason} ${email.error.field}`, "out_of_range user_id");
});

test("sampling keeps an interaction whole, with zlib's CRC-32", () => {
  assert.equal(crc32("hello"), 0x3610a686);
  assert.equal(keepsInteraction("i-1", 1), true);
  assert.equal(keepsInteraction("i-1", 0), false);
  let kept = 0;
  for (let n = 0; n < 10_000; n++) kept += keepsInteraction(`i-${n}`, 0.25) ? 1 : 0;
  assert.equal(Math.floor(kept / 100), 25);  // the Python doctest's figure on the same ids
});
