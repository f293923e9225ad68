// An HTTP stub of the collector's POST /v1/events with the real API's answer shape, scripted per
// request, recording what it received. The same flows run against the real collector in
// tests/ingest/test_sdk_ts_delivery.py.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

export interface Received {
  at: number;
  headers: IncomingMessage["headers"];
  events: Array<Record<string, unknown>>;
}

export type Answer = { status: number; headers?: Record<string, string>;
                       reject?: (event: Record<string, unknown>) => string | null };

export class Stub {
  readonly received: Received[] = [];
  script: Answer[] = [];
  private server: Server;

  private constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        const events = (JSON.parse(body.toString("utf8")) as { events: Array<Record<string, unknown>> }).events;
        this.received.push({ at: performance.now(), headers: req.headers, events });
        const answer = this.script.shift() ?? { status: 200 };
        let out: unknown = { reason: "scripted", detail: `status ${answer.status}` };
        if (answer.status === 200) {
          out = { results: events.map((e, index) => {
            const reason = answer.reject?.(e) ?? null;
            return reason === null ? { index, event_id: e.event_id, accepted: true, status: 202 }
              : { index, event_id: e.event_id, accepted: false, status: 422, reason, field: null,
                  detail: "scripted" };
          }) };
        }
        res.writeHead(answer.status, { "Content-Type": "application/json", ...answer.headers });
        res.end(JSON.stringify(out));
      });
    });
  }

  static async start(): Promise<Stub> {
    const stub = new Stub();
    await new Promise<void>((resolve) => stub.server.listen(0, "127.0.0.1", resolve));
    return stub;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  ids(): unknown[] {
    return this.received.flatMap((r) => r.events.map((e) => e.event_id));
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
