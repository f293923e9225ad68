/**
 * What an editor plugin calls: `emit` validates and enqueues, and never blocks or throws.
 *
 * Every outcome of `emit` is an answer (`EmitStatus`) and a counter, never an exception in the
 * editor's code. Sending happens in the background (`sender`), on the same event loop, only
 * through asynchronous I/O. `flush` and `close` take a deadline and resolve with how many events
 * are still undelivered; they never reject.
 */
import { nowTs } from "../contract/timestamps.js";
import { uuid7 } from "../contract/ids.js";
import { MAX_EVENT_BYTES, validateEvent } from "../contract/validate.js";
import { type ClientOptions, type Config, resolveConfig } from "./config.js";
import { Counters, type CounterSnapshot } from "./counters.js";
import { keepsInteraction } from "./sampling.js";
import { Sender } from "./sender.js";
import { MemorySpool, type Spool } from "./spool.js";
import { SpoolDir } from "./spoolDir.js";

/** The answer of `emit`: the same strings as the Python SDK's `EmitResult`. */
export type EmitStatus = "queued" | "invalid" | "queue_full" | "sampled_out" | "closed";

export interface EmitOptions {
  sessionId: string;
  /** A pseudonymous id (a hash), never an e-mail address or a name. */
  userId: string;
  /** The model checkpoint that served this interaction. */
  checkpointId: string;
  experiment?: { name: string; arm: string };
  /** This event's user opted out of training (the client's `privacyMode` forces it on). */
  privacyMode?: boolean;
  /** Defaults to a new UUIDv7; give one only to re-emit an event under its original id. */
  eventId?: string;
  /** When it happened (RFC 3339 with an offset); defaults to now. */
  ts?: string;
}

const FLUSH_POLL_MS = 10;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class Client {
  /** Settable at run time: the user may opt out in the middle of a session. */
  privacyMode: boolean;
  private readonly config: Config;
  private readonly counts = new Counters();
  private readonly sender: Sender;
  private spool: Spool | null = null;
  private closed = false;
  private closing: Promise<number> | null = null;
  private readonly onBeforeExit = () => {
    if (!this.closed) void this.close(this.config.closeOnExitMs);
  };

  /** Throws a RangeError for a bad option (a programming error, caught at first run). */
  constructor(options: ClientOptions) {
    this.config = resolveConfig(options);
    this.privacyMode = this.config.privacyMode;
    this.sender = new Sender(this.config, this.counts, () => this.openSpool());
    if (this.config.closeOnExitMs > 0) process.on("beforeExit", this.onBeforeExit);
  }

  /** Validate one event and hand it to the sender; returns at once, never throws. */
  emit(type: string, interactionId: string, payload?: Record<string, unknown> | null,
       options?: EmitOptions): EmitStatus {
    try {
      return this.enqueue(type, interactionId, payload, options);
    } catch (err) {
      this.config.logger.debug(`rtrl sdk: emit failed: ${String(err)}`);
      this.counts.add("invalid");
      return "invalid";
    }
  }

  private enqueue(type: string, interactionId: string, payload: Record<string, unknown> |
                  null | undefined, options: EmitOptions | undefined): EmitStatus {
    if (this.closed) return "closed";
    if (!keepsInteraction(String(interactionId), this.config.sampleRate)) {
      this.counts.add("sampledOut");
      return "sampled_out";
    }
    const raw: Record<string, unknown> = {
      event_id: options?.eventId ?? uuid7(),
      type,
      schema_version: 1,
      ts: options?.ts ?? nowTs(),
      interaction_id: interactionId,
      org_id: this.config.orgId,
      client: { name: this.config.clientName, version: this.config.clientVersion },
      payload: payload ?? {},
      session_id: options?.sessionId,
      user_id: options?.userId,
      checkpoint_id: options?.checkpointId,
    };
    if (options?.experiment !== undefined) raw.experiment = options.experiment;
    if (this.privacyMode) raw.privacy_mode = true;
    else if (options?.privacyMode !== undefined) raw.privacy_mode = options.privacyMode;
    for (const name of ["session_id", "user_id", "checkpoint_id"]) {
      if (raw[name] === undefined) delete raw[name];  // absent: the contract says missing_field
    }
    const verdict = validateEvent(raw, { origin: "client" });
    if (!verdict.ok) {
      this.config.logger.debug(`rtrl sdk: invalid event: ${verdict.error.message}`);
      this.counts.add("invalid");
      return "invalid";
    }
    const text = JSON.stringify(verdict.event);
    if (text.length * 3 > MAX_EVENT_BYTES && Buffer.byteLength(text) > MAX_EVENT_BYTES) {
      this.config.logger.debug(`rtrl sdk: invalid event: too_large (${text.length} chars)`);
      this.counts.add("invalid");
      return "invalid";
    }
    if (!this.sender.put(text)) {
      this.counts.add("dropped");
      return "queue_full";
    }
    this.counts.add("queued");
    return "queued";
  }

  /** What happened to the events emitted so far. */
  counters(): CounterSnapshot {
    return this.counts.snapshot();
  }

  /** Send everything emitted so far, waiting at most `timeoutMs`. Resolves with how many events
   * are still undelivered (0: all answered by the collector); those stay in the spool. */
  async flush(timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    const sender = this.sender;
    sender.flushRequests++;
    sender.wake();
    try {
      while (performance.now() < deadline && (!sender.opened || sender.pending() > 0)) {
        await delay(Math.min(FLUSH_POLL_MS, Math.max(1, deadline - performance.now())));
        sender.wake();
      }
    } catch { /* never reject */ } finally {
      sender.flushRequests--;
    }
    return sender.pending();
  }

  /** Flush, then stop the sender, all within `timeoutMs`. Resolves with how many events were not
   * delivered: kept on disk with a `spoolDir` (the next process sends them), otherwise lost and
   * counted as dropped. */
  close(timeoutMs: number): Promise<number> {
    this.closing ??= this.shutdown(timeoutMs);
    return this.closing;
  }

  private async shutdown(timeoutMs: number): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    process.removeListener("beforeExit", this.onBeforeExit);
    await this.flush(timeoutMs);
    this.closed = true;
    this.sender.halt();
    await Promise.race([this.sender.done.catch(() => undefined),
                        delay(Math.max(0, deadline - performance.now()))]);
    const left = this.sender.pending();
    const durable = this.spool?.durable ?? false;
    if (left && !durable) this.counts.add("dropped", left);
    if (left) {
      this.config.logger.warn(`rtrl sdk: closing with ${left} undelivered events (` +
                              `${durable ? "kept in the spool folder" : "dropped"})`);
    }
    return left;
  }

  private async openSpool(): Promise<Spool> {
    const c = this.config;
    if (c.spoolDir !== undefined) {
      try {
        const spool = await SpoolDir.open(c.spoolDir, c.spoolMaxEvents, c.spoolMaxBytes);
        if (spool !== null) return (this.spool = spool);
        c.logger.warn(`rtrl sdk: every slot of ${c.spoolDir} is taken; keeping events in memory`);
      } catch (err) {  // unwritable folder: degrade, do not go silent
        c.logger.warn(`rtrl sdk: cannot open spool ${c.spoolDir}; keeping events in memory: ` +
                      String(err));
      }
    }
    return (this.spool = new MemorySpool(c.spoolMaxEvents, c.spoolMaxBytes));
  }
}
