/**
 * The background sender: moves emitted events from the hand-off queue into the spool, sends them
 * in batches, retries. One per client, running on the event loop between the editor's own work:
 * every step awaits I/O (disk, network), none blocks. A batch goes out when it is full
 * (`batchMaxEvents`; bytes cap its size), when `flushIntervalMs` passed since the last send, or
 * when a flush or close asks; after a retryable failure nothing is sent before the backoff delay,
 * but emitted events keep moving into the spool, so memory stays bounded. An event leaves the
 * spool only once the collector answered for it: accepted, or refused for good.
 */
import { nowTs } from "../contract/timestamps.js";
import { type Config, eventsUrl } from "./config.js";
import type { Counters } from "./counters.js";
import type { Rejection } from "./rejection.js";
import { backoffDelayMs, isRetryable } from "./retry.js";
import type { Spool, SpoolBatch } from "./spool.js";
import { buildBody, HttpTransport, type SendOutcome } from "./transport.js";

/** Longest sleep with nothing to do; a safety net, wake-ups come from `put`, flush and close. */
export const IDLE_WAIT_MS = 5_000;
/** Pause after an unexpected error, so a persistent one does not spin the event loop. */
const ERROR_PAUSE_MS = 500;

export class Sender {
  /** Events in the spool, published for flush and close. */
  backlog = 0;
  opened = false;
  flushRequests = 0;
  stopping = false;
  readonly done: Promise<void>;
  private outbox: string[] = [];
  private taking = 0;
  private notified = false;
  private wakeUp: (() => void) | null = null;
  private readonly stop = new AbortController();
  private readonly transport: HttpTransport;
  private attempt = 0;
  private retryAt = 0;
  private lastSendAt = 0;

  constructor(private readonly config: Config, private readonly counters: Counters,
              openSpool: () => Promise<Spool>) {
    this.transport = new HttpTransport(eventsUrl(config), config.apiKey, config.requestTimeoutMs,
                                       config.compress,
                                       `${config.clientName}/${config.clientVersion}`);
    this.done = this.run(openSpool);
  }

  /** Hand one serialized event over; false when the queue is full (the caller counts it). */
  put(event: string): boolean {
    if (this.outbox.length >= this.config.queueMaxEvents) return false;
    this.outbox.push(event);
    if (!this.notified) {
      this.notified = true;
      this.wake();
    }
    return true;
  }

  pending(): number {
    return this.outbox.length + this.taking + this.backlog;
  }

  /** End the current wait early (first event after a pull, flush, close). */
  wake(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = null;
    wakeUp?.();
  }

  /** Stop: abort a request in flight, leave the loop after the events queued are spooled. */
  halt(): void {
    this.stopping = true;
    this.stop.abort();
    this.wake();
  }

  private async run(openSpool: () => Promise<Spool>): Promise<void> {
    const spool = await openSpool();
    this.backlog = spool.size();
    this.opened = true;
    try {
      while (!this.stopping) {
        try {
          await this.step(spool);
        } catch (err) {  // a dead sender loses everything after it: log and go on
          this.config.logger.warn(`rtrl sdk sender: unexpected error; continuing: ${String(err)}`);
          await this.sleep(ERROR_PAUSE_MS);
        }
      }
      await this.pull(spool);  // what is still queued goes to the spool, not away
    } finally {
      await spool.close().catch(() => undefined);
    }
  }

  private async step(spool: Spool): Promise<void> {
    await this.pull(spool);
    if (this.stopping) return;
    const now = performance.now();
    if (this.backlog && this.due(now)) {
      await this.send(spool);
    } else if (this.outbox.length === 0) {
      await this.sleep(this.waitMs(now));
    }
  }

  private due(now: number): boolean {
    if (now < this.retryAt) return false;
    return this.backlog >= this.config.batchMaxEvents || this.flushRequests > 0 ||
      now - this.lastSendAt >= this.config.flushIntervalMs;
  }

  private waitMs(now: number): number {
    if (!this.backlog) return IDLE_WAIT_MS;
    if (now < this.retryAt) return this.retryAt - now;
    if (this.flushRequests > 0 || this.backlog >= this.config.batchMaxEvents) return 0;
    return Math.max(0, this.lastSendAt + this.config.flushIntervalMs - now);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // unref: an idle SDK does not keep the process alive (`beforeExit` then closes it).
      const timer = setTimeout(() => {
        this.wakeUp = null;
        resolve();
      }, ms);
      timer.unref();
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  private async pull(spool: Spool): Promise<void> {
    if (this.outbox.length === 0) return;
    const events = this.outbox;
    this.outbox = [];
    this.notified = false;
    this.taking = events.length;
    try {
      const dropped = await spool.add(events);
      this.counters.add("spooled", events.length);
      this.counters.add("dropped", dropped);
    } catch (err) {
      this.counters.add("dropped", events.length);
      this.config.logger.warn(`rtrl sdk: cannot spool ${events.length} events: ${String(err)}`);
    } finally {
      this.taking = 0;
      this.backlog = spool.size();
    }
  }

  private async send(spool: Spool): Promise<void> {
    const batch = await spool.nextBatch(this.config.batchMaxEvents, this.config.batchMaxBytes);
    if (batch.events.length === 0) {
      this.backlog = spool.size();
      return;
    }
    this.lastSendAt = performance.now();
    const outcome = await this.transport.send(buildBody(batch.events, nowTs()), this.stop.signal);
    const status = outcome.status;
    if (status !== null && status >= 200 && status < 300) {
      this.settle(batch, outcome);
      await spool.ack(batch, false);
      this.attempt = 0;
    } else if (isRetryable(status)) {
      await spool.ack(batch, true);
      this.attempt++;
      const delay = backoffDelayMs(this.attempt, outcome.retryAfterMs);
      this.retryAt = performance.now() + delay;
      this.counters.add("retried", batch.events.length);
      this.config.logger.debug(`rtrl sdk: ${outcome.error}; retrying ${batch.events.length} ` +
                               `events in ${Math.round(delay)} ms`);
    } else {
      this.report(batch.events.map((e) => ({
        eventId: eventIdOf(e), reason: `http_${status}`, field: null, detail: outcome.error,
        status })));
      await spool.ack(batch, false);
      this.attempt = 0;
    }
    this.backlog = spool.size();
  }

  /** Count what a 2xx answer accepted and report what it rejected, event by event. */
  private settle(batch: SpoolBatch, outcome: SendOutcome): void {
    const results = outcome.results;
    if (results === null || results.length !== batch.events.length) {
      this.counters.add("sent", batch.events.length);  // a 2xx without details accepts all
      return;
    }
    const rejected: Rejection[] = results.filter((r) => r && !r.accepted).map((r) => ({
      eventId: r.event_id ?? null, reason: r.reason ?? "rejected", field: r.field ?? null,
      detail: r.detail ?? null, status: r.status ?? null }));
    this.counters.add("sent", batch.events.length - rejected.length);
    this.report(rejected);
  }

  private report(rejected: Rejection[]): void {
    if (rejected.length === 0) return;
    this.counters.add("rejected", rejected.length);
    const callback = this.config.onRejected;
    if (callback === undefined) {
      this.config.logger.warn(`rtrl sdk: collector rejected ${rejected.length} events, first: ` +
                              JSON.stringify(rejected[0]));
      return;
    }
    try {
      callback(rejected);
    } catch (err) {
      this.config.logger.warn(`rtrl sdk: onRejected callback failed: ${String(err)}`);
    }
  }
}

function eventIdOf(event: string): string | null {
  try {
    const id = (JSON.parse(event) as { event_id?: unknown }).event_id;
    return typeof id === "string" ? id : null;
  } catch {
    return null;
  }
}
