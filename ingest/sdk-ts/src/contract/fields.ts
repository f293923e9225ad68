/**
 * One check per field kind of the contract table, each failing with the reason and the dotted
 * path that ingest/contract/fields.py gives for the same value.
 *
 * JSON numbers have one type in JavaScript; text parsed by `parseEvent` keeps `1873.0` apart
 * as a JsonFloat (see `json`), so the two contracts agree on it. An event object built in
 * JavaScript has no such number: there, an integral number is an integer.
 */
import { JsonFloat } from "./json.js";
import { ContractError } from "./reasons.js";
import type { FieldSpec, RecordSpec } from "./table.js";
import { normalizeTs } from "./timestamps.js";

export type Check = (value: unknown, path: string) => unknown;

/** The JSON name of a value's type, for error details. */
export function jsonTypeName(value: unknown): string {
  if (value === null) return "null";
  if (value instanceof JsonFloat) return "number";
  if (Array.isArray(value)) return "array";
  switch (typeof value) {
    case "boolean": return "boolean";
    case "number": return Number.isInteger(value) ? "integer" : "number";
    case "string": return "string";
    case "object": return "object";
    default: return typeof value;
  }
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) &&
    !(value instanceof JsonFloat);
}

function wrongType(path: string, expected: string, value: unknown): ContractError {
  return new ContractError("wrong_type", path, `expected ${expected}, got ${jsonTypeName(value)}`);
}

function codePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

function textCheck(minLength: number, maxLength: number, allowed: string): Check {
  // Python's classes exclude lone surrogates (such a string cannot be serialized); with the `u`
  // flag a lone surrogate is one code point, which a negated class then has to name.
  const positive = allowed.startsWith("[^") ? allowed.slice(0, -1) + "\\u{D800}-\\u{DFFF}]"
                                            : allowed;
  const whole = new RegExp(`^${positive}{${minLength},${maxLength}}$`, "u");
  return (value, path) => {
    if (typeof value !== "string") throw wrongType(path, "a string", value);
    if (!whole.test(value)) {
      const length = codePoints(value);
      const detail = length < minLength || length > maxLength
        ? `length ${length} outside ${minLength}..${maxLength}`
        : `every character must match ${allowed}`;
      throw new ContractError("out_of_range", path, detail);
    }
    return value;
  };
}

function integerCheck(minimum: number, maximum: number): Check {
  return (value, path) => {
    if (typeof value !== "number" || !Number.isInteger(value)) {
      throw wrongType(path, "an integer", value);
    }
    if (value < minimum || value > maximum) {
      throw new ContractError("out_of_range", path, `${value} outside ${minimum}..${maximum}`);
    }
    return value;
  };
}

function numberCheck(minimum: number, maximum: number): Check {
  return (value, path) => {
    if (value instanceof JsonFloat) value = value.value;
    if (typeof value !== "number") throw wrongType(path, "a number", value);
    if (!(minimum <= value && value <= maximum)) {  // also refuses NaN
      throw new ContractError("out_of_range", path, `${value} outside [${minimum}, ${maximum}]`);
    }
    return value;
  };
}

function flagCheck(): Check {
  return (value, path) => {
    if (typeof value !== "boolean") throw wrongType(path, "a boolean", value);
    return value;
  };
}

function choiceCheck(choices: string[], reason: string): Check {
  const allowed = new Set(choices);
  return (value, path) => {
    if (typeof value !== "string") throw wrongType(path, "a string", value);
    if (!allowed.has(value)) {
      const shown = value.length <= 64 ? value : value.slice(0, 61) + "...";
      throw new ContractError(reason as ContractError["reason"], path,
                              `'${shown}' is not one of ${choices.join(", ")}`);
    }
    return value;
  };
}

function versionCheck(version: number): Check {
  return (value, path) => {
    if (typeof value !== "number" || !Number.isInteger(value)) {
      throw wrongType(path, "an integer", value);
    }
    if (value !== version) {
      throw new ContractError("bad_schema_version", path,
                              `this contract is version ${version}, got ${value}`);
    }
    return value;
  };
}

function timestampCheck(): Check {
  return (value, path) => {
    if (typeof value !== "string") throw wrongType(path, "an RFC 3339 timestamp string", value);
    return normalizeTs(value, path);
  };
}

/** The error for the first field of `value` (in its order) that `known` lacks. */
export function unknownFieldError(path: string | null, value: object,
                                  known: ReadonlySet<string>): ContractError {
  const name = Object.keys(value).find((key) => !known.has(key)) ?? "";
  return new ContractError("unknown_field", path === null ? name : `${path}.${name}`,
                           `unknown field '${name}'`);
}

export function recordCheck(spec: RecordSpec): Check {
  const names = new Set(Object.keys(spec.fields));
  const checks = new Map(Object.entries(spec.fields).map(([n, f]) => [n, compile(f)]));
  return (value, path) => {
    if (!isObject(value)) throw wrongType(path, "an object", value);
    const keys = Object.keys(value);
    if (keys.some((key) => !names.has(key))) throw unknownFieldError(path, value, names);
    for (const name of spec.required) {
      if (!Object.hasOwn(value, name)) throw new ContractError("missing_field", `${path}.${name}`, "required");
    }
    const out: Record<string, unknown> = {};
    for (const key of keys) out[key] = (checks.get(key) as Check)(value[key], `${path}.${key}`);
    return out;
  };
}

export function compile(spec: FieldSpec): Check {
  switch (spec.kind) {
    case "text": return textCheck(spec.minLength, spec.maxLength, spec.allowed);
    case "integer": return integerCheck(spec.minimum, spec.maximum);
    case "number": return numberCheck(spec.minimum, spec.maximum);
    case "flag": return flagCheck();
    case "choice": return choiceCheck(spec.choices, spec.reason);
    case "version": return versionCheck(spec.version);
    case "timestamp": return timestampCheck();
    case "record": return recordCheck(spec);
  }
}
