// The TypeScript half of bench/sdk_ts_emit.py: emit() timed call by call against a dead
// collector, then memory once the sender has spooled everything. Prints one JSON object.
//   node --expose-gc bench/sdk_ts_emit.mjs EVENTS disk|memory
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { Client } from "../ingest/sdk-ts/dist/esm/index.js";

const MIB = 1 << 20;
const SHAPES = [  // (type, payload): the mix of bench/sdk_emit.py
  ["interaction.started", { mode: "agent" }],
  ["agent.tool_call", { tool: "read_file", valid: true }],
  ["agent.edit_proposed", { edit_id: "e-1", lines_added: 12, lines_removed: 3 }],
  ["edit.accepted", { edit_id: "e-1" }],
  ["interaction.completed", { latency_ms: 2300, output_tokens: 512 }],
];
/** Emits between two turns of the event loop: the editor's code yields; a tight loop of 1M
 * synchronous calls would leave the sender no turn at all. */
const YIELD_EVERY = 100;

function du(dir) {
  let total = 0;
  for (const name of readdirSync(dir, { recursive: true })) {
    const st = statSync(join(dir, name));
    if (st.isFile()) total += st.size;
  }
  return total;
}

async function run(n, kind) {
  const dir = kind === "disk" ? mkdtempSync(join(tmpdir(), "rtrl-ts-bench-")) : undefined;
  global.gc();
  const before = process.memoryUsage();
  const client = new Client({
    endpoint: "http://127.0.0.1:9", apiKey: "rtrl_bench", orgId: "org-01", spoolDir: dir,
    spoolMaxEvents: 2 * n, spoolMaxBytes: kind === "disk" ? 4096 * MIB : 64 * MIB,
    closeOnExitMs: 0, logger: { debug() {}, warn() {} },
  });
  const durations = new Float64Array(n);
  const results = {};
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const [type, payload] = SHAPES[i % SHAPES.length];
    const t0 = process.hrtime.bigint();
    const status = client.emit(type, `i-${Math.floor(i / SHAPES.length)}`, payload,
                               { sessionId: "s-1", userId: "u-91b7584a", checkpointId: "ckpt-0002" });
    durations[i] = Number(process.hrtime.bigint() - t0) / 1000;
    results[status] = (results[status] ?? 0) + 1;
    if (i % YIELD_EVERY === YIELD_EVERY - 1) await new Promise((r) => setImmediate(r));
  }
  const emitS = (performance.now() - started) / 1000;
  const deadline = performance.now() + 300_000;
  for (;;) {
    const c = client.counters();
    if (c.spooled + c.dropped >= (results.queued ?? 0) || performance.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  global.gc();
  const after = process.memoryUsage();
  const counters = client.counters();
  const left = await client.close(500);
  durations.sort();
  const q = (p) => durations[Math.min(n - 1, Math.floor(p * n))];
  const row = {
    spool: kind === "disk" ? "disk (spoolDir)" : "memory (64 MiB)", events: n,
    emit_median_us: q(0.5), emit_p99_us: q(0.99), emit_p999_us: q(0.999),
    emit_calls_per_s: n / emitS, results, counters, undelivered_at_close: left,
    rss_growth_mib: (after.rss - before.rss) / MIB, heap_used_growth_mib: (after.heapUsed - before.heapUsed) / MIB,
    spool_file_mib: dir ? du(dir) / MIB : 0,
  };
  if (dir) rmSync(dir, { recursive: true, force: true });
  return row;
}

const [events, kind] = process.argv.slice(2);
console.log(JSON.stringify(await run(Number(events), kind)));
