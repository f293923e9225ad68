/**
 * JSON text to a value, keeping what JavaScript's parser forgets and the contract needs: whether
 * a number was written as a fraction or with an exponent. Python's contract refuses `1873.0` as a
 * count (a float is not an integer) and `JSON.parse` would read it as 1873, so such numbers come
 * back as `JsonFloat`; the checks take it as a number where a number is allowed and refuse it
 * elsewhere with Python's reason. Only integral values need it (3.5 is no integer either way).
 */

export class JsonFloat {
  constructor(readonly value: number) {}
}

const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/** JSON.parse, integral numbers written with `.` or an exponent as JsonFloat. Throws on bad JSON. */
export function parseJson(text: string): unknown {
  const marker = `\u0000float${Math.random().toString(36).slice(2)}:`;
  const rewritten = markIntegralFloats(text, marker);
  if (rewritten === text) return JSON.parse(text);
  return JSON.parse(rewritten, (_key, value: unknown) =>
    typeof value === "string" && value.startsWith(marker)
      ? new JsonFloat(Number(value.slice(marker.length))) : value);
}

/** Replace each integral float in a value position by a string carrying `marker`; the rest of
 * the text (invalid JSON included) is left exactly as it was. */
function markIntegralFloats(text: string, marker: string): string {
  if (!/[0-9][.eE]/.test(text)) return text;
  const out: string[] = [];
  const stack: string[] = [];
  let expectKey = false;
  let last = 0;
  let i = 0;
  while (i < text.length) {
    const ch = text[i] as string;
    if (ch === '"') {
      i++;
      while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
      i++;
      continue;
    }
    if (ch === "{" || ch === "[") {
      stack.push(ch);
      expectKey = ch === "{";
    } else if (ch === "}" || ch === "]") {
      stack.pop();
      expectKey = false;
    } else if (ch === ",") {
      expectKey = stack.at(-1) === "{";
    } else if (ch === ":") {
      expectKey = false;
    } else if (ch === "-" || (ch >= "0" && ch <= "9")) {
      const start = i;
      while (i < text.length && /[-+0-9.eE]/.test(text[i] as string)) i++;
      const token = text.slice(start, i);
      if (!expectKey && /[.eE]/.test(token) && NUMBER.test(token) &&
          Number.isInteger(Number(token))) {
        out.push(text.slice(last, start), JSON.stringify(marker + token));
        last = i;
      }
      continue;
    }
    i++;
  }
  out.push(text.slice(last));
  return out.join("");
}
