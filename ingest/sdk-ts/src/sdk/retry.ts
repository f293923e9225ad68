/**
 * When to retry a request and how long to wait: the rules of ingest/sdk/retry.py as named
 * constants and one backoff function. A batch keeps its events (and their `event_id`s) across
 * retries. Network errors, 408, 429 and 5xx are retried with capped exponential backoff and
 * jitter, waiting at least what `Retry-After` asks; any other 4xx is final.
 */

/** Wait before the first retry (before jitter). */
export const BASE_DELAY_MS = 500;
export const MULTIPLIER = 2;
/** Cap of the exponential part: an outage of hours is retried every ~30 s. */
export const MAX_DELAY_MS = 30_000;
/** A `Retry-After` beyond this counts as this (a misconfigured server must not stall us). */
export const MAX_RETRY_AFTER_MS = 300_000;
export const RETRYABLE_4XX: ReadonlySet<number> = new Set([408, 429]);

/** `null` stands for no HTTP answer at all (refused, reset, timed out). */
export function isRetryable(status: number | null): boolean {
  return status === null || RETRYABLE_4XX.has(status) || status >= 500;
}

/**
 * Milliseconds before retry number `attempt` (1 = first retry). "Equal jitter": half the capped
 * exponential delay is fixed, half random, so clients that failed together spread out yet none
 * retries at once. `Retry-After` is a floor.
 */
export function backoffDelayMs(attempt: number, retryAfterMs: number | null = null,
                               rand: () => number = Math.random): number {
  const exponential = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * MULTIPLIER ** Math.max(0, attempt - 1));
  let delay = exponential / 2 + (exponential / 2) * rand();
  if (retryAfterMs !== null) delay = Math.max(delay, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
  return delay;
}

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (!value) return null;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  if (Number.isNaN(when)) return null;
  return Math.max(0, when - now);
}
