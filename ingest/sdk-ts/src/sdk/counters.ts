/** What happened to emitted events, counted: the one place a plugin looks to see loss. */

export interface CounterSnapshot {
  /** Accepted by `emit` into the hand-off queue. */
  queued: number;
  /** Moved from the queue into the spool (on disk: durable against a process crash). */
  spooled: number;
  /** Acknowledged by the collector as accepted. */
  sent: number;
  /** Events sent again after a retryable failure (counted once per retry). */
  retried: number;
  /** Refused by the collector (a 4xx or a per-event rejection); reported to `onRejected`. */
  rejected: number;
  /** Lost on the client: queue full, spool over its bound, or left in a memory spool at close. */
  dropped: number;
  /** Refused by `emit` itself: the event broke the contract. */
  invalid: number;
  /** Not kept by sampling. */
  sampledOut: number;
}

export type CounterName = keyof CounterSnapshot;

export class Counters {
  private readonly values: CounterSnapshot = {
    queued: 0, spooled: 0, sent: 0, retried: 0, rejected: 0, dropped: 0, invalid: 0,
    sampledOut: 0,
  };

  add(name: CounterName, n = 1): void {
    this.values[name] += n;
  }

  snapshot(): CounterSnapshot {
    return { ...this.values };
  }
}
