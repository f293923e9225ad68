/**
 * The spool a client gets for a `spoolDir`: its own slot (see `slots`), plus the slots of
 * processes that died or closed with events left, adopted so that the next process delivers
 * them; the adopted ones are sent first (they are older) and released once empty.
 */
import { DiskSpool } from "./diskSpool.js";
import { existingSlots, lockSlot, MAX_SLOTS, type SlotLock, slotDir } from "./slots.js";
import type { Spool, SpoolBatch } from "./spool.js";

interface Part {
  spool: DiskSpool;
  lock: SlotLock;
}

export class SpoolDir implements Spool {
  readonly durable = true;

  private constructor(private readonly own: Part, private adopted: Part[]) {}

  /** Lock a free slot of `root` (and every free one with events); null when all are taken. */
  static async open(root: string, maxEvents: number, maxBytes: number): Promise<SpoolDir | null> {
    let own: Part | null = null;
    for (let index = 0; index < MAX_SLOTS && own === null; index++) {
      const lock = await lockSlot(slotDir(root, index));
      if (lock !== null) own = { spool: await DiskSpool.open(lock.dir, maxEvents, maxBytes), lock };
    }
    if (own === null) return null;
    const adopted: Part[] = [];
    for (const dir of await existingSlots(root)) {
      if (dir === own.lock.dir) continue;
      const lock = await lockSlot(dir);
      if (lock === null) continue;
      const spool = await DiskSpool.open(dir, maxEvents, maxBytes);
      if (spool.size() > 0) {
        adopted.push({ spool, lock });
      } else {
        await spool.close();
        await lock.release();
      }
    }
    return new SpoolDir(own, adopted);
  }

  add(events: string[]): Promise<number> {
    return this.own.spool.add(events);
  }

  async nextBatch(maxEvents: number, maxBytes: number): Promise<SpoolBatch> {
    const part = this.adopted.find((p) => p.spool.size() > 0) ?? this.own;
    const batch = await part.spool.nextBatch(maxEvents, maxBytes);
    return { events: batch.events, token: { part, inner: batch } };
  }

  async ack(batch: SpoolBatch, retry: boolean): Promise<void> {
    const { part, inner } = batch.token as { part: Part; inner: SpoolBatch };
    await part.spool.ack(inner, retry);
    if (part !== this.own && part.spool.size() === 0) {
      this.adopted = this.adopted.filter((p) => p !== part);
      await part.spool.close();
      await part.lock.release();
    }
  }

  size(): number {
    return this.adopted.reduce((n, p) => n + p.spool.size(), this.own.spool.size());
  }

  async close(): Promise<void> {
    for (const part of [...this.adopted, this.own]) {
      await part.spool.close();
      await part.lock.release();
    }
  }
}
