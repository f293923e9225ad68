/**
 * A spool in files: what the collector has not acknowledged survives a collector outage and a
 * crash (SIGKILL) of the process, and the next process delivers it.
 *
 * A slot folder holds segments `NNNNNNNNNNNN.jsonl`, one event per line, appended with one write
 * per `add` (once written, a line is in the operating system's hands, which is what a process
 * crash needs; power loss is not covered), and `head.json`, the first line not yet done, replaced
 * atomically (write, rename) after each acknowledgement or drop. A torn last line (the process
 * died mid-write) is cut off on open. Segments wholly before the head are deleted. An event sent
 * but not yet marked done when the process dies is sent again: at least once, same `event_id`.
 * All file work is asynchronous, so the editor's thread never waits on the disk.
 */
import { type FileHandle, open, readFile, readdir, rename, truncate, unlink, writeFile }
  from "node:fs/promises";
import { join } from "node:path";

import type { Spool, SpoolBatch } from "./spool.js";

export const SEGMENT_MAX_EVENTS = 8192;
export const SEGMENT_MAX_BYTES = 4 * 1024 * 1024;
const HEAD = "head.json";
const NEWLINE = 0x0a;

interface Segment {
  seq: number;
  path: string;
  /** Bytes of each line of the file, its newline included. */
  sizes: number[];
  bytes: number;
}

interface Position {
  seq: number;
  line: number;
}

function segmentName(seq: number): string {
  return `${String(seq).padStart(12, "0")}.jsonl`;
}

export class DiskSpool implements Spool {
  readonly durable = true;
  private segments: Segment[] = [];
  private headLine = 0;
  private headOffset = 0;
  private events = 0;
  private bytes = 0;
  private nextSeq = 1;
  private tail: FileHandle | null = null;
  private savedHead = "";
  /** Segments the head moved past, deleted by the next `collect` once the head is saved. */
  private retired: Segment[] = [];

  private constructor(readonly dir: string, private readonly maxEvents: number,
                      private readonly maxBytes: number) {}

  /** Open the spool kept in folder `dir` (locked by the caller: one process per folder). */
  static async open(dir: string, maxEvents: number, maxBytes: number): Promise<DiskSpool> {
    const spool = new DiskSpool(dir, maxEvents, maxBytes);
    await spool.load();
    return spool;
  }

  private async load(): Promise<void> {
    let head: Position = { seq: 0, line: 0 };
    try {
      head = JSON.parse(await readFile(join(this.dir, HEAD), "utf8")) as Position;
    } catch { /* a new spool, or a head never written */ }
    const seqs = (await readdir(this.dir)).filter((n) => /^[0-9]{12}\.jsonl$/.test(n))
      .map((n) => Number(n.slice(0, 12))).sort((a, b) => a - b);
    for (const seq of seqs) {
      const path = join(this.dir, segmentName(seq));
      if (seq < head.seq) {
        await unlink(path).catch(() => undefined);
        continue;
      }
      const sizes = await lineSizes(path);
      this.segments.push({ seq, path, sizes, bytes: sizes.reduce((a, b) => a + b, 0) });
    }
    this.nextSeq = Math.max(head.seq, seqs.at(-1) ?? 0) + 1;
    const first = this.segments[0];
    if (first !== undefined && first.seq === head.seq) {
      this.headLine = Math.min(head.line, first.sizes.length);
      for (let i = 0; i < this.headLine; i++) this.headOffset += first.sizes[i] as number;
    }
    this.segments.forEach((segment, index) => {
      const from = index === 0 ? this.headLine : 0;
      for (let i = from; i < segment.sizes.length; i++) {
        this.events++;
        this.bytes += segment.sizes[i] as number;
      }
    });
    this.savedHead = JSON.stringify(this.position());
    await this.collect();
  }

  async add(events: string[]): Promise<number> {
    let at = 0;
    while (at < events.length) {
      const segment = await this.writableSegment();
      const room = SEGMENT_MAX_EVENTS - segment.sizes.length;
      const chunk = events.slice(at, at + room);
      at += chunk.length;
      const data = Buffer.from(chunk.join("\n") + "\n", "utf8");
      await writeAll(this.tail as FileHandle, data);
      for (const event of chunk) {
        const size = Buffer.byteLength(event, "utf8") + 1;
        segment.sizes.push(size);
        segment.bytes += size;
        this.bytes += size;
      }
      this.events += chunk.length;
    }
    let dropped = 0;
    while (this.events > 0 && (this.events > this.maxEvents || this.bytes > this.maxBytes)) {
      this.advance();
      dropped++;
    }
    if (dropped) await this.collect();
    return dropped;
  }

  async nextBatch(maxEvents: number, maxBytes: number): Promise<SpoolBatch> {
    const events: string[] = [];
    let total = 0;
    let end: Position = this.position();
    for (let index = 0; index < this.segments.length && events.length < maxEvents; index++) {
      const segment = this.segments[index] as Segment;
      const first = index === 0 ? this.headLine : 0;
      let line = first;
      let length = 0;
      while (line < segment.sizes.length && events.length + (line - first) < maxEvents) {
        const size = segment.sizes[line] as number;
        if ((events.length || line > first) && total + length + size > maxBytes) break;
        length += size;
        line++;
      }
      if (line === first) {
        if (first < segment.sizes.length) break;  // the byte limit stopped us
        continue;
      }
      const text = await readRange(segment.path, index === 0 ? this.headOffset : 0, length);
      events.push(...text.split("\n").slice(0, line - first));
      total += length;
      end = { seq: segment.seq, line };
      if (line < segment.sizes.length) break;
    }
    return { events, token: end };
  }

  async ack(batch: SpoolBatch, retry: boolean): Promise<void> {
    if (retry) return;
    const end = batch.token as Position;
    // Lines dropped for room meanwhile are already behind the head.
    while (this.events > 0 && this.before(end)) this.advance();
    await this.collect();
  }

  size(): number {
    return this.events;
  }

  async close(): Promise<void> {
    await this.tail?.close().catch(() => undefined);
    this.tail = null;
  }

  private before(end: Position): boolean {
    const first = this.segments[0];
    if (first === undefined) return false;
    return first.seq < end.seq || (first.seq === end.seq && this.headLine < end.line);
  }

  /** Move the head past the oldest line that is not done yet. */
  private advance(): void {
    let first = this.segments[0] as Segment;
    while (this.headLine >= first.sizes.length) {  // a consumed segment still in the list
      this.retired.push(this.segments.shift() as Segment);
      this.headLine = 0;
      this.headOffset = 0;
      first = this.segments[0] as Segment;
    }
    const size = first.sizes[this.headLine] as number;
    this.headLine++;
    this.headOffset += size;
    this.events--;
    this.bytes -= size;
  }

  private position(): Position {
    const first = this.segments[0];
    return first === undefined ? { seq: this.nextSeq - 1, line: 0 }
                               : { seq: first.seq, line: this.headLine };
  }

  /** Save the head, then delete the segments wholly before it (the last one stays: the tail). */
  private async collect(): Promise<void> {
    const gone = this.retired;
    this.retired = [];
    while (this.segments.length > 1 && this.headLine >= (this.segments[0] as Segment).sizes.length) {
      gone.push(this.segments.shift() as Segment);
      this.headLine = 0;
      this.headOffset = 0;
    }
    const head = JSON.stringify(this.position());
    if (head !== this.savedHead) {
      const tmp = join(this.dir, `${HEAD}.tmp`);
      await writeFile(tmp, head);
      await rename(tmp, join(this.dir, HEAD));
      this.savedHead = head;
    }
    for (const segment of gone) await unlink(segment.path).catch(() => undefined);
  }

  private async writableSegment(): Promise<Segment> {
    let last = this.segments.at(-1);
    const full = last !== undefined && (last.sizes.length >= SEGMENT_MAX_EVENTS ||
      last.bytes >= SEGMENT_MAX_BYTES);
    if (last === undefined || full) {
      await this.tail?.close();
      this.tail = null;
      const seq = this.nextSeq++;
      last = { seq, path: join(this.dir, segmentName(seq)), sizes: [], bytes: 0 };
      this.segments.push(last);
      if (this.segments.length > 1) await this.collect();
    }
    if (this.tail === null) this.tail = await open(last.path, "a");
    return last;
  }
}

async function writeAll(handle: FileHandle, data: Buffer): Promise<void> {
  let written = 0;
  while (written < data.length) {
    const { bytesWritten } = await handle.write(data, written, data.length - written);
    written += bytesWritten;
  }
}

async function readRange(path: string, offset: number, length: number): Promise<string> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(length);
    let read = 0;
    while (read < length) {
      const { bytesRead } = await handle.read(buffer, read, length - read, offset + read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return buffer.toString("utf8", 0, read);
  } finally {
    await handle.close();
  }
}

/** The size of each complete line of a segment; a torn last line (no newline) is cut off. */
async function lineSizes(path: string): Promise<number[]> {
  const data = await readFile(path);
  const sizes: number[] = [];
  let start = 0;
  for (let at = data.indexOf(NEWLINE); at !== -1; at = data.indexOf(NEWLINE, start)) {
    sizes.push(at + 1 - start);
    start = at + 1;
  }
  if (start < data.length) await truncate(path, start);
  return sizes;
}
