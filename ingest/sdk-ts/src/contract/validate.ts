/**
 * Strict validation of one event, in the order ingest/contract/validate.py checks it, so that an
 * event with several faults gets the same reason from both: `schema_version` first, then
 * `received_at` against the origin, unknown fields, missing fields, then each field in the
 * event's own order, the payload last (its fields depend on `type`).
 */
import { compile, type Check, isObject, jsonTypeName, unknownFieldError } from "./fields.js";
import { parseJson } from "./json.js";
import { ContractError } from "./reasons.js";
import { CONTRACT } from "./schema.generated.js";

/** Where an event is in its journey, which decides the rule for `received_at`. */
export type Origin = "client" | "collected";

export const MAX_EVENT_BYTES = CONTRACT.maxEventBytes;
export const EVENT_TYPES: readonly string[] = Object.keys(CONTRACT.payloads);

export type Event = Record<string, unknown>;

export type Verdict = { ok: true; event: Event } | { ok: false; error: ContractError };

const NAMES = new Set(Object.keys(CONTRACT.envelope));
const CHECKS = new Map<string, Check>(
  Object.entries(CONTRACT.envelope).filter(([name]) => name !== "payload")
    .map(([name, spec]) => [name, compile(spec)]));
const PAYLOAD_CHECKS = new Map<string, Check>(
  Object.entries(CONTRACT.payloads).map(([type, spec]) => [type, compile(spec)]));
const CHECK_VERSION = CHECKS.get("schema_version") as Check;

function checkOrigin(obj: Record<string, unknown>, origin: Origin): void {
  if (origin === "client") {
    const set = CONTRACT.forbiddenFromClient.find((name) => Object.hasOwn(obj, name));
    if (set !== undefined) {
      throw new ContractError("forbidden_field", set, "set by the collector, never by a client");
    }
  } else {
    const absent = CONTRACT.requiredWhenCollected.find((name) => !Object.hasOwn(obj, name));
    if (absent !== undefined) {
      throw new ContractError("missing_field", absent, "required on collected events");
    }
  }
}

function check(obj: unknown, origin: Origin, tenant: string | undefined): Event {
  if (!isObject(obj)) {
    throw new ContractError("not_object", null,
                            `an event is a JSON object, got ${jsonTypeName(obj)}`);
  }
  if (Object.hasOwn(obj, "schema_version")) CHECK_VERSION(obj.schema_version, "schema_version");
  checkOrigin(obj, origin);
  const keys = Object.keys(obj);
  if (keys.some((key) => !NAMES.has(key))) throw unknownFieldError(null, obj, NAMES);
  for (const name of CONTRACT.required) {
    if (!Object.hasOwn(obj, name)) throw new ContractError("missing_field", name, "required");
  }
  const event: Event = {};
  for (const key of keys) {
    event[key] = key === "payload" ? obj[key] : (CHECKS.get(key) as Check)(obj[key], key);
  }
  event.payload = (PAYLOAD_CHECKS.get(event.type as string) as Check)(obj.payload, "payload");
  if (tenant !== undefined && event.org_id !== tenant) {
    throw new ContractError("tenant_mismatch", "org_id", "org_id differs from the API key's tenant");
  }
  return event;
}

export interface ValidateOptions {
  origin: Origin;
  /** The API key's tenant, which `org_id` must equal (the collector's check). */
  tenant?: string;
}

/** Check an event object; returns the normalized copy or the first violation. Never throws. */
export function validateEvent(obj: unknown, options: ValidateOptions): Verdict {
  try {
    return { ok: true, event: check(obj, options.origin, options.tenant) };
  } catch (err) {
    if (err instanceof ContractError) return { ok: false, error: err };
    return { ok: false, error: new ContractError("not_object", null, String(err)) };
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Size-check, decode and validate one serialized event (bytes or text). Never throws. */
export function parseEvent(raw: string | Uint8Array, options: ValidateOptions): Verdict {
  const size = typeof raw === "string" ? Buffer.byteLength(raw, "utf8") : raw.byteLength;
  if (size > MAX_EVENT_BYTES) {
    return { ok: false, error: new ContractError(
      "too_large", null, `${size} bytes exceed the limit of ${MAX_EVENT_BYTES}`) };
  }
  let parsed: unknown;
  try {
    parsed = parseJson(typeof raw === "string" ? raw : strictUtf8.decode(raw));
  } catch (err) {
    return { ok: false, error: new ContractError("not_json", null, String(err)) };
  }
  return validateEvent(parsed, options);
}
