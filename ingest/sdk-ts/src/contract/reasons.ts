/**
 * Why an event was rejected: the codes of ingest/contract/reasons.py, byte for byte, because
 * they travel in the collector's answers and on telemetry.dlq whichever SDK sent the event.
 */

export const REASONS = [
  "not_json",
  "not_object",
  "too_large",
  "missing_field",
  "unknown_field",
  "wrong_type",
  "out_of_range",
  "bad_timestamp",
  "unknown_type",
  "bad_schema_version",
  "forbidden_field",
  "tenant_mismatch",
] as const;

export type Reason = (typeof REASONS)[number];

const MAX_TEXT = 200;

function clip(text: string): string {
  return text.length <= MAX_TEXT ? text : text.slice(0, MAX_TEXT - 3) + "...";
}

/** A contract violation: `reason` says how, `field` where (a dotted path, or null). */
export class ContractError extends Error {
  readonly reason: Reason;
  readonly field: string | null;
  readonly detail: string;

  constructor(reason: Reason, field: string | null, detail: string) {
    const where = field ? ` at ${clip(field)}` : "";
    super(`${reason}${where}: ${clip(detail)}`);
    this.name = "ContractError";
    this.reason = reason;
    this.field = field === null ? null : clip(field);
    this.detail = clip(detail);
  }

  toJSON(): { reason: Reason; field: string | null; detail: string } {
    return { reason: this.reason, field: this.field, detail: this.detail };
  }
}
