/**
 * The shape of the contract table that scripts/gen-contract.mjs renders from the JSON Schema.
 * Kinds mirror ingest/contract/fields.py, so a check here and there fail the same way.
 */

export type FieldSpec =
  | { kind: "text"; minLength: number; maxLength: number; allowed: string }
  | { kind: "integer"; minimum: number; maximum: number }
  | { kind: "number"; minimum: number; maximum: number }
  | { kind: "flag" }
  | { kind: "choice"; choices: string[]; reason: string }
  | { kind: "version"; version: number }
  | { kind: "timestamp" }
  | RecordSpec;

export interface RecordSpec {
  kind: "record";
  fields: Record<string, FieldSpec>;
  required: string[];
}

export interface ContractTable {
  maxEventBytes: number;
  timestampPattern: string;
  /** Envelope fields every event has, in the order the Python contract checks them. */
  required: string[];
  forbiddenFromClient: string[];
  requiredWhenCollected: string[];
  envelope: Record<string, FieldSpec>;
  payloads: Record<string, RecordSpec>;
}
