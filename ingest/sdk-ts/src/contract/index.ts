/** The events-v1 contract in TypeScript: the table generated from the JSON Schema, its checks. */
export { ContractError, REASONS, type Reason } from "./reasons.js";
export { nowTs, normalizeTs } from "./timestamps.js";
export { uuid7, uuid7UnixMs } from "./ids.js";
export {
  EVENT_TYPES,
  MAX_EVENT_BYTES,
  parseEvent,
  validateEvent,
  type Event,
  type Origin,
  type ValidateOptions,
  type Verdict,
} from "./validate.js";
