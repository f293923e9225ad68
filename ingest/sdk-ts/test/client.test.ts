import { strict as assert } from "node:assert";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, test } from "node:test";

import { Client, type ClientOptions, type Rejection } from "../src/index.js";
import { keepsInteraction } from "../src/sdk/sampling.js";
import { Stub } from "./stub.js";

const WHO = { sessionId: "s-1", userId: "u-1", checkpointId: "ck-1" };
const quiet = { debug: () => undefined, warn: () => undefined };
let stub: Stub;
let client: Client | null = null;

beforeEach(async () => {
  stub = await Stub.start();
});

afterEach(async () => {
  await client?.close(1000);
  client = null;
  await stub.stop();
});

function make(options: Partial<ClientOptions> = {}): Client {
  client = new Client({ apiKey: "k", orgId: "acme", flushIntervalMs: 50, logger: quiet,
                        ...options, endpoint: options.endpoint ?? stub.url });
  return client;
}

function emitMany(c: Client, n: number, prefix = "i"): string[] {
  return Array.from({ length: n }, (_, i) =>
    c.emit("interaction.started", `${prefix}-${i}`, { mode: "agent" }, WHO));
}

test("emit answers at once; a flush delivers valid, gzipped, authorised batches", async () => {
  const c = make({ batchMaxEvents: 10 });
  assert.deepEqual(new Set(emitMany(c, 25)), new Set(["queued"]));
  assert.equal(stub.received.length, 0);  // nothing sent inside emit
  assert.equal(await c.flush(5000), 0);
  assert.equal(c.counters().sent, 25);
  assert.deepEqual(stub.received.map((r) => r.events.length).sort(), [10, 10, 5]);
  const first = stub.received[0];
  assert.equal(first?.headers["content-encoding"], "gzip");
  assert.equal(first?.headers.authorization, "Bearer k");
  const event = first?.events[0] as Record<string, unknown>;
  assert.equal(event.org_id, "acme");
  assert.equal(typeof event.sent_at, "string");
  assert.match(String(event.event_id), /^[0-9a-f-]{36}$/);
});

test("a partial batch goes out after flushIntervalMs without a flush", async () => {
  const c = make({ flushIntervalMs: 100, batchMaxEvents: 100 });
  const start = performance.now();
  emitMany(c, 3);
  while (stub.received.length === 0 && performance.now() - start < 3000) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.equal(stub.received[0]?.events.length, 3);
});

test("the byte bound caps a batch", async () => {
  const c = make({ batchMaxEvents: 100, batchMaxBytes: 600 });
  emitMany(c, 10);
  assert.equal(await c.flush(5000), 0);
  assert.ok(stub.received.length >= 4, `${stub.received.length} requests`);
  assert.ok(stub.received.every((r) => r.events.length <= 3));
});

test("invalid events, sampling, privacy mode and a closed client answer without throwing",
     async () => {
  const c = make({ sampleRate: 0.5 });
  assert.ok(keepsInteraction("i-2", 0.5));
  assert.equal(c.emit("edit.acepted", "i-2", { edit_id: "e" }, WHO), "invalid");
  assert.equal(c.emit("edit.accepted", "i-2", {}, WHO), "invalid");
  assert.equal(c.emit("edit.accepted", "i-2", { edit_id: "e" },
                      { ...WHO, userId: "someone@example.com" }), "invalid");
  assert.equal(c.emit("edit.accepted", "i-2", { edit_id: "e" },
                      undefined as unknown as typeof WHO), "invalid");
  const statuses = emitMany(c, 200);
  const sampled = statuses.filter((s) => s === "sampled_out").length;
  assert.ok(sampled > 60 && sampled < 140, `${sampled}`);
  c.privacyMode = true;
  let privacySampled = 0;
  let kept: string | undefined;
  for (let i = 0; kept === undefined; i++) {
    const status = c.emit("edit.accepted", `p-${i}`, { edit_id: "e" }, WHO);
    if (status === "queued") kept = `p-${i}`;
    else privacySampled++;
  }
  assert.equal(await c.flush(5000), 0);
  const counters = c.counters();
  assert.equal(counters.invalid, 4);
  assert.equal(counters.sampledOut, sampled + privacySampled);
  const privacy = stub.received.flatMap((r) => r.events).filter((e) => e.privacy_mode === true);
  assert.deepEqual(privacy.map((e) => e.interaction_id), [kept]);
  await c.close(1000);
  assert.equal(c.emit("edit.accepted", "i-2", { edit_id: "e" }, WHO), "closed");
});

test("a full hand-off queue answers queue_full and counts the drop", async () => {
  const c = make({ queueMaxEvents: 5 });
  const statuses = emitMany(c, 8);
  assert.deepEqual(statuses, [...Array(5).fill("queued"), ...Array(3).fill("queue_full")]);
  assert.equal(c.counters().dropped, 3);
});

test("503 is retried after Retry-After with the same events; ids kept", async () => {
  stub.script = [{ status: 503, headers: { "Retry-After": "1" } }];
  const c = make({ batchMaxEvents: 50 });
  emitMany(c, 5);
  assert.equal(await c.flush(5000), 0);
  assert.equal(stub.received.length, 2);
  const [failed, retried] = stub.received;
  assert.deepEqual(retried?.events.map((e) => e.event_id), failed?.events.map((e) => e.event_id));
  assert.ok((retried?.at ?? 0) - (failed?.at ?? 0) >= 990, "Retry-After honoured");
  assert.equal(c.counters().retried, 5);
  assert.equal(c.counters().sent, 5);
});

test("a 400 is not retried: reported through onRejected and the counters", async () => {
  stub.script = [{ status: 400 }];
  const rejected: Rejection[] = [];
  const c = make({ onRejected: (r) => rejected.push(...r) });
  emitMany(c, 3);
  assert.equal(await c.flush(5000), 0);
  assert.equal(stub.received.length, 1);
  assert.equal(rejected.length, 3);
  assert.equal(rejected[0]?.reason, "http_400");
  assert.equal(rejected[0]?.status, 400);
  assert.deepEqual(rejected.map((r) => r.eventId), stub.ids());
  assert.equal(c.counters().rejected, 3);
  assert.equal(c.counters().retried, 0);
});

test("per-event rejections in a 200 answer are reported, the rest counted as sent", async () => {
  stub.script = [{ status: 200, reject: (e) => (e.interaction_id === "i-1" ? "tenant_mismatch" : null) }];
  const rejected: Rejection[] = [];
  const c = make({ onRejected: (r) => rejected.push(...r) });
  emitMany(c, 3);
  assert.equal(await c.flush(5000), 0);
  assert.deepEqual(rejected.map((r) => r.reason), ["tenant_mismatch"]);
  assert.equal(c.counters().sent, 2);
});

test("with the collector down, flush gives up at its deadline and keeps the events", async () => {
  await stub.stop();
  const c = make({ endpoint: "http://127.0.0.1:9" });
  emitMany(c, 4);
  const start = performance.now();
  assert.equal(await c.flush(300), 4);
  assert.ok(performance.now() - start < 1000);
  assert.ok(c.counters().retried >= 4);
  assert.equal(await c.close(200), 4);
  assert.equal(c.counters().dropped, 4);  // a memory spool cannot keep them past close
  stub = await Stub.start();
});

test("with a spoolDir, events left at close are delivered by the next client", async () => {
  const dir = mkdtempSync(join(tmpdir(), "rtrl-client-"));
  const down = make({ endpoint: "http://127.0.0.1:9", spoolDir: dir });
  emitMany(down, 7);
  assert.equal(await down.close(300), 7);
  assert.equal(down.counters().dropped, 0);
  const up = make({ spoolDir: dir });
  assert.equal(await up.flush(5000), 0);
  assert.equal(up.counters().sent, 7);
  assert.equal(stub.ids().length, 7);
});
