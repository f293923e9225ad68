/**
 * What the SDK reports of an event the collector refused for good. Its own module because both the
 * settings (the `onRejected` callback's argument) and the sender (which builds it) need it.
 */

/** An event the collector refused for good, with its reason code. */
export interface Rejection {
  eventId: string | null;
  reason: string;
  field: string | null;
  detail: string | null;
  status: number | null;
}
