/**
 * UUIDv7 event ids (RFC 9562) with the layout of ingest/contract/ids.py: 48-bit Unix ms,
 * version 7, a 42-bit counter (12 bits, variant, 30 bits) that starts at a random value each
 * millisecond and increments within one, then 32 random bits. Ids of one process are strictly
 * increasing even when many are made in one millisecond or the clock steps back.
 */
import { randomFillSync } from "node:crypto";

const COUNTER_MAX = 2 ** 42 - 1;
const pool = new Uint32Array(256);
let poolAt = pool.length;
let lastMs = 0;
let counter = 0;

function random32(): number {
  if (poolAt === pool.length) {  // one call to the system's generator per 256 words
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++] as number;
}

function freshCounter(): number {
  // The top bit clear leaves at least 2**41 increments before the counter could overflow.
  return (random32() & 0x1ff) * 2 ** 32 + random32();
}

function hex(value: number, digits: number): string {
  return value.toString(16).padStart(digits, "0");
}

/** A new UUIDv7 in its canonical 36-character form, a valid `event_id`. */
export function uuid7(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    counter = freshCounter();
  } else if (counter < COUNTER_MAX) {
    counter += 1;  // same millisecond, or the clock went back: stay monotonic
  } else {
    lastMs += 1;
    counter = freshCounter();
  }
  const high = Math.floor(counter / 2 ** 30);  // 12 bits
  const low = counter % 2 ** 30;  // 30 bits
  const time = hex(lastMs, 12);
  const variantAndLow = hex(0x80000000 + low, 8);
  return `${time.slice(0, 8)}-${time.slice(8)}-7${hex(high, 3)}-` +
    `${variantAndLow.slice(0, 4)}-${variantAndLow.slice(4)}${hex(random32(), 8)}`;
}

/** The creation time (Unix ms) carried by a UUIDv7 string. */
export function uuid7UnixMs(value: string): number {
  return parseInt(value.replace(/-/g, "").slice(0, 12), 16);
}
