/**
 * @rtrl/sdk: emit rtrl telemetry events (events-v1) from an editor plugin.
 *
 * `new Client({ endpoint, apiKey, orgId, spoolDir })`, then `client.emit(type, interactionId,
 * payload, { sessionId, userId, checkpointId })`, which answers a status string at once; at
 * shutdown `await client.close(2000)`. The contract's checks are exported too.
 */
export { Client, type EmitOptions, type EmitStatus } from "./sdk/client.js";
export { type ClientOptions, type Logger, SDK_NAME, SDK_VERSION } from "./sdk/config.js";
export type { CounterSnapshot } from "./sdk/counters.js";
export type { Rejection } from "./sdk/rejection.js";
export {
  ContractError,
  EVENT_TYPES,
  MAX_EVENT_BYTES,
  REASONS,
  normalizeTs,
  nowTs,
  parseEvent,
  uuid7,
  uuid7UnixMs,
  validateEvent,
  type Event,
  type Origin,
  type Reason,
  type ValidateOptions,
  type Verdict,
} from "./contract/index.js";
