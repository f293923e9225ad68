/**
 * One HTTP attempt per call: POST a batch to the collector and say what came back. No retries
 * here; the sender decides what an answer means, so the retry rules live in one place (`retry`).
 * Uses the runtime's own `fetch` and `zlib` (Node >= 18, Electron): no dependency to ship.
 */
import { gzip } from "node:zlib";

import { parseRetryAfter } from "./retry.js";

const GZIP_LEVEL = 5;

export interface EventResult {
  event_id?: string;
  accepted?: boolean;
  reason?: string;
  field?: string;
  detail?: string;
  status?: number;
}

export interface SendOutcome {
  /** null when no HTTP answer came (refused, reset, timed out, aborted). */
  status: number | null;
  retryAfterMs: number | null;
  /** The collector's per-event answers in the batch's order, when it gave them. */
  results: EventResult[] | null;
  /** A short description for logs and rejection reports. */
  error: string | null;
}

/** `{"events": [...]}` with `sent_at` spliced into each spooled event (compact JSON objects
 * without `sent_at`), without parsing them again. */
export function buildBody(events: readonly string[], sentAt: string): string {
  const head = `{"sent_at":"${sentAt}",`;
  return `{"events":[${events.map((e) => head + e.slice(1)).join(",")}]}`;
}

function gzipped(body: string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    gzip(body, { level: GZIP_LEVEL }, (err, out) => (err ? reject(err) : resolve(out)));
  });
}

export class HttpTransport {
  private readonly headers: Record<string, string>;

  constructor(private readonly url: string, apiKey: string, private readonly timeoutMs: number,
              private readonly compress: boolean, userAgent: string) {
    this.headers = { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json",
                     "User-Agent": userAgent };
    if (compress) this.headers["Content-Encoding"] = "gzip";
  }

  /** Never rejects: every failure is an outcome. `stop` aborts the attempt (close). */
  async send(body: string, stop: AbortSignal): Promise<SendOutcome> {
    const controller = new AbortController();
    const abort = () => controller.abort();
    stop.addEventListener("abort", abort);
    const timer = setTimeout(abort, this.timeoutMs);
    try {
      const content = this.compress ? await gzipped(body) : body;
      const response = await fetch(this.url, { method: "POST", headers: this.headers,
                                               body: content, signal: controller.signal });
      const text = await response.text();
      const answer = jsonOrNull(text);
      const results = isRecord(answer) && Array.isArray(answer.results)
        ? (answer.results as EventResult[]) : null;
      let error: string | null = null;
      if (response.status >= 300) {
        const reason = isRecord(answer) && typeof answer.reason === "string" ? answer.reason : "";
        error = `HTTP ${response.status}${reason ? " " + reason : ""}`;
      }
      return { status: response.status, results, error,
               retryAfterMs: parseRetryAfter(response.headers.get("retry-after")) };
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause?.code;
      return { status: null, retryAfterMs: null, results: null,
               error: `${(err as Error).name}: ${(err as Error).message}${cause ? ` (${cause})` : ""}` };
    } finally {
      clearTimeout(timer);
      stop.removeEventListener("abort", abort);
    }
  }
}

function jsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
