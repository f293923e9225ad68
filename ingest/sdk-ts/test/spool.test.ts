import { strict as assert } from "node:assert";
import { appendFileSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { DiskSpool, SEGMENT_MAX_EVENTS } from "../src/sdk/diskSpool.js";
import { MemorySpool, type Spool } from "../src/sdk/spool.js";
import { SpoolDir } from "../src/sdk/spoolDir.js";

const ev = (n: number) => `{"n":${n}}`;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => ev(from + i));

async function contract(spool: Spool): Promise<void> {
  assert.equal(await spool.add(range(0, 3)), 0);
  const batch = await spool.nextBatch(2, 1_000_000);
  assert.deepEqual(batch.events, [ev(0), ev(1)]);
  await spool.ack(batch, true);  // retry: offered again, the very same events
  assert.deepEqual((await spool.nextBatch(2, 1_000_000)).events, [ev(0), ev(1)]);
  await spool.ack(batch, false);
  assert.equal(spool.size(), 1);
  assert.deepEqual((await spool.nextBatch(10, 1_000_000)).events, [ev(2)]);
  // over the bound of 5 events: the oldest are dropped and counted
  assert.equal(await spool.add(range(3, 10)), 3);
  assert.equal(spool.size(), 5);
  const rest = await spool.nextBatch(100, 1_000_000);
  assert.deepEqual(rest.events, range(5, 10));
  // a byte limit smaller than one event still gives one
  assert.equal((await spool.nextBatch(100, 1)).events.length, 1);
  await spool.ack(rest, false);
  assert.equal(spool.size(), 0);
  await spool.close();
}

test("memory spool: bounded, oldest dropped, retried batches identical", async () => {
  await contract(new MemorySpool(5, 1_000_000));
});

test("disk spool: the same contract", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rtrl-spool-"));
  await contract(await DiskSpool.open(dir, 5, 1_000_000));
});

test("disk spool: a batch acked after drops removes only what is left of it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rtrl-spool-"));
  const spool = await DiskSpool.open(dir, 4, 1_000_000);
  await spool.add(range(0, 4));
  const batch = await spool.nextBatch(3, 1_000_000);
  assert.equal(await spool.add(range(4, 6)), 2);  // 0 and 1 dropped while 0..2 is in flight
  await spool.ack(batch, false);
  assert.deepEqual((await spool.nextBatch(10, 1_000_000)).events, range(3, 6));
  await spool.close();
});

test("disk spool: reopened, it offers what was not acknowledged; a torn line is cut", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rtrl-spool-"));
  const first = await DiskSpool.open(dir, 1_000_000, 1 << 30);
  await first.add(range(0, SEGMENT_MAX_EVENTS + 10));  // two segments
  const batch = await first.nextBatch(5, 1_000_000);
  await first.ack(batch, false);
  await first.close();  // no clean shutdown is needed: every add and ack is already on disk
  const segments = readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort();
  assert.equal(segments.length, 2);
  appendFileSync(join(dir, segments[1] as string), '{"n":"torn');  // killed mid-write

  const again = await DiskSpool.open(dir, 1_000_000, 1 << 30);
  assert.equal(again.size(), SEGMENT_MAX_EVENTS + 5);
  const all: string[] = [];
  while (again.size() > 0) {
    const b = await again.nextBatch(1000, 1 << 20);
    all.push(...b.events);
    await again.ack(b, false);
  }
  assert.deepEqual(all, range(5, SEGMENT_MAX_EVENTS + 10));
  assert.deepEqual(readdirSync(dir).filter((n) => n.endsWith(".jsonl")).length, 1);
  await again.add([ev(-1)]);  // and it keeps working after the cut
  assert.deepEqual((await again.nextBatch(10, 1 << 20)).events, [ev(-1)]);
  await again.close();
});

test("spool folder: a live owner's slot is not shared; a released slot with events is adopted",
     async () => {
  const root = mkdtempSync(join(tmpdir(), "rtrl-spooldir-"));
  const a = await SpoolDir.open(root, 100, 1 << 20);
  const b = await SpoolDir.open(root, 100, 1 << 20);
  assert.ok(a && b);
  await a.add(range(0, 3));
  await b.add(range(10, 12));
  assert.equal(a.size(), 3);
  assert.equal(b.size(), 2);
  await b.close();
  // a dead process's lock: a pid that is not running
  writeFileSync(join(root, "slot-0", "owner"), "999999999");
  await a.close();
  const c = await SpoolDir.open(root, 100, 1 << 20);
  assert.ok(c);
  assert.equal(c.size(), 5);  // its own slot and the adopted one
  const seen: string[] = [];
  while (c.size() > 0) {
    const batch = await c.nextBatch(2, 1 << 20);
    seen.push(...batch.events);
    await c.ack(batch, false);
  }
  assert.deepEqual(seen.sort(), [...range(0, 3), ...range(10, 12)].sort());
  await c.close();
});
