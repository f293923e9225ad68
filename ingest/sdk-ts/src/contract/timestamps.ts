/**
 * Strict RFC 3339 timestamps, normalized to the platform's one canonical UTC form
 * (`2026-11-30T02:23:05.123456Z`), as ingest/contract/timestamps.py does: the pattern comes from
 * the schema; impossible dates and the year bounds in UTC are checked here, beyond the schema.
 */
import { ContractError } from "./reasons.js";
import { CONTRACT } from "./schema.generated.js";

const MIN_YEAR = 2000;
const MAX_YEAR = 2100;
const STRICT = new RegExp(CONTRACT.timestampPattern);
const CANONICAL_LENGTH = "2026-11-30T02:23:05.123456Z".length;
const SHAPE = /^([0-9]{4})-[0-9]{2}-[0-9]{2}[Tt ][0-9:.]+(.*)$/;

function diagnose(text: string): string {
  const shape = SHAPE.exec(text);
  if (shape === null) {
    if (/^[0-9]{4}-[0-9]{2}-[0-9]{2}$/.test(text)) return `date without a time: '${text}'`;
    return `not an RFC 3339 timestamp: '${text}'`;
  }
  const year = Number(shape[1]);
  if (year < MIN_YEAR || year > MAX_YEAR) return `year ${year} outside ${MIN_YEAR}..${MAX_YEAR}`;
  if (shape[2] === "") return `no UTC offset (add 'Z' or '+hh:mm'): '${text}'`;
  if (text.includes(" ")) return `'T' must separate date and time: '${text}'`;
  return `not an RFC 3339 timestamp: '${text}'`;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, "0");
}

/** Validate a timestamp and return its canonical form; throws ContractError(bad_timestamp). */
export function normalizeTs(text: string, field: string | null): string {
  if (!STRICT.test(text)) throw new ContractError("bad_timestamp", field, diagnose(text));
  const year = Number(text.slice(0, 4));
  const month = Number(text.slice(5, 7));
  const day = Number(text.slice(8, 10));
  if (day > daysIn(year, month)) {
    throw new ContractError("bad_timestamp", field, `no such date or time: '${text}'`);
  }
  const dot = text[19] === ".";
  const end = text.search(/[Zz+-](?=[^Zz+-]*$)/);
  const fraction = dot ? text.slice(20, end) : "";
  const offset = text.slice(end);
  if (text[10] === "T" && offset === "Z") {
    // UTC already (the common case): only the fraction may need padding or truncating.
    if (text.length === CANONICAL_LENGTH) return text;
    return `${text.slice(0, 19)}.${fraction.slice(0, 6).padEnd(6, "0")}Z`;
  }
  let minutes = 0;
  if (offset !== "Z" && offset !== "z") {
    const sign = offset[0] === "-" ? -1 : 1;
    minutes = sign * (Number(offset.slice(1, 3)) * 60 + Number(offset.slice(4, 6)));
  }
  const local = Date.UTC(year, month - 1, day, Number(text.slice(11, 13)),
                         Number(text.slice(14, 16)), Number(text.slice(17, 19)));
  const utc = new Date(local - minutes * 60_000);
  const utcYear = utc.getUTCFullYear();
  if (utcYear < MIN_YEAR || utcYear > MAX_YEAR) {
    throw new ContractError("bad_timestamp", field,
                            `year ${utcYear} in UTC outside ${MIN_YEAR}..${MAX_YEAR}: '${text}'`);
  }
  return `${pad(utcYear, 4)}-${pad(utc.getUTCMonth() + 1, 2)}-${pad(utc.getUTCDate(), 2)}T` +
    `${pad(utc.getUTCHours(), 2)}:${pad(utc.getUTCMinutes(), 2)}:${pad(utc.getUTCSeconds(), 2)}` +
    `.${fraction.slice(0, 6).padEnd(6, "0")}Z`;
}

/** The current time in canonical form (the clock has milliseconds; microseconds are zero). */
export function nowTs(): string {
  return new Date().toISOString().slice(0, 23) + "000Z";
}
