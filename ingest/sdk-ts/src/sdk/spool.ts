/**
 * The offline buffer between `emit` and the collector, behind one small interface (after
 * ingest/sdk/spool.py). Events enter with `add` and leave only when `ack`-ed as done; until then
 * `nextBatch` offers the oldest again, so a retried batch carries the very same events. A spool
 * is bounded by count and bytes: when full, the oldest are dropped and `add` says how many.
 * Batches come from the oldest end and are acknowledged one at a time, in order.
 */

export interface SpoolBatch {
  readonly events: readonly string[];
  /** The spool's own handle for `ack`. */
  readonly token: unknown;
}

export interface Spool {
  /** Keep `events`; resolves to how many of the oldest were dropped to stay in bounds. */
  add(events: string[]): Promise<number>;
  /** The oldest events, at most `maxEvents` and `maxBytes` (but at least one when not empty). */
  nextBatch(maxEvents: number, maxBytes: number): Promise<SpoolBatch>;
  /** Done with `batch`: forget it, or (`retry`) keep it to be offered again. */
  ack(batch: SpoolBatch, retry: boolean): Promise<void>;
  size(): number;
  /** Whether what it holds survives the process (a disk spool) or dies with it. */
  readonly durable: boolean;
  close(): Promise<void>;
}

/** What keeping one event costs in memory beyond its characters (string header, array slot). */
export const ENTRY_OVERHEAD_BYTES = 40;

/** A bounded in-memory spool: survives collector outages, not a crash of the process. */
export class MemorySpool implements Spool {
  readonly durable = false;
  private items: string[] = [];
  private start = 0;
  /** Sequence number of `items[start]`: a batch's token is the sequence number after it. */
  private firstSeq = 0;
  private bytes = 0;

  constructor(private readonly maxEvents: number, private readonly maxBytes: number) {}

  async add(events: string[]): Promise<number> {
    for (const event of events) {
      this.items.push(event);
      this.bytes += event.length + ENTRY_OVERHEAD_BYTES;
    }
    let dropped = 0;
    while (this.size() > 0 && (this.size() > this.maxEvents || this.bytes > this.maxBytes)) {
      this.dropOldest();
      dropped++;
    }
    this.compact();
    return dropped;
  }

  async nextBatch(maxEvents: number, maxBytes: number): Promise<SpoolBatch> {
    const events: string[] = [];
    let total = 0;
    for (let i = this.start; i < this.items.length && events.length < maxEvents; i++) {
      const event = this.items[i] as string;
      if (events.length && total + event.length > maxBytes) break;
      events.push(event);
      total += event.length;
    }
    return { events, token: this.firstSeq + events.length };
  }

  async ack(batch: SpoolBatch, retry: boolean): Promise<void> {
    if (retry) return;
    // Events dropped for room meanwhile are already gone: remove what is left of the batch.
    while (this.size() > 0 && this.firstSeq < (batch.token as number)) this.dropOldest();
    this.compact();
  }

  size(): number {
    return this.items.length - this.start;
  }

  async close(): Promise<void> {}

  private dropOldest(): void {
    const event = this.items[this.start] as string;
    this.bytes -= event.length + ENTRY_OVERHEAD_BYTES;
    this.items[this.start] = "";
    this.start++;
    this.firstSeq++;
  }

  private compact(): void {
    if (this.start > 4096 && this.start * 2 > this.items.length) {
      this.items = this.items.slice(this.start);
      this.start = 0;
    }
  }
}
