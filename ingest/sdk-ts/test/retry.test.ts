import { strict as assert } from "node:assert";
import { test } from "node:test";

import { backoffDelayMs, isRetryable, MAX_DELAY_MS, parseRetryAfter } from "../src/sdk/retry.js";

test("what is retried: no answer, 408, 429, 5xx", () => {
  assert.deepEqual([null, 200, 400, 401, 408, 429, 500, 503].map(isRetryable),
                   [true, false, false, false, true, true, true, true]);
});

test("capped exponential backoff with equal jitter; Retry-After is a floor", () => {
  assert.equal(backoffDelayMs(1, null, () => 0), 250);
  assert.equal(backoffDelayMs(1, null, () => 1), 500);
  assert.equal(backoffDelayMs(3, null, () => 1), 2000);
  assert.equal(backoffDelayMs(30, null, () => 1), MAX_DELAY_MS);
  assert.equal(backoffDelayMs(1, 7000, () => 0.5), 7000);
  assert.equal(backoffDelayMs(1, 10_000_000, () => 0.5), 300_000);
});

test("Retry-After: delta-seconds or an HTTP date", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter(null), null);
  assert.equal(parseRetryAfter("soon"), null);
  const now = Date.parse("2026-11-30T02:00:00Z");
  assert.equal(parseRetryAfter("Mon, 30 Nov 2026 02:00:10 GMT", now), 10_000);
});
