/**
 * The emitter's settings: one options object, checked once in the constructor, defaults equal to
 * the Python SDK's (ingest/sdk/config.py) so both SDKs behave alike out of the box.
 */
import type { Rejection } from "./rejection.js";

export const SDK_NAME = "rtrl-ts-sdk";
export const SDK_VERSION = "0.1.0";
/** Above any collector's per-request limit. */
export const MAX_BATCH_EVENTS = 10_000;

export interface Logger {
  debug(message: string): void;
  warn(message: string): void;
}

export interface ClientOptions {
  /** Base URL of the collector; events go to `${endpoint}/v1/events`. */
  endpoint: string;
  /** The tenant's key, sent as `Authorization: Bearer`. */
  apiKey: string;
  /** The key's tenant, the `org_id` of every event. */
  orgId: string;
  /** A folder (an extension's `globalStorageUri`) that keeps unacknowledged events across a
   * crash of the process; without it they are kept in memory only. */
  spoolDir?: string;
  /** Bound of the spool; beyond it the oldest events are dropped (and counted). */
  spoolMaxBytes?: number;
  spoolMaxEvents?: number;
  /** Bound of the hand-off queue between `emit` and the sender; full means `queue_full`. */
  queueMaxEvents?: number;
  batchMaxEvents?: number;
  /** Uncompressed size of one request body at most. */
  batchMaxBytes?: number;
  /** A partial batch waits at most this long before it is sent. */
  flushIntervalMs?: number;
  requestTimeoutMs?: number;
  /** When the event loop empties (`beforeExit`), flush and close within this (0: do nothing). */
  closeOnExitMs?: number;
  /** gzip request bodies. */
  compress?: boolean;
  /** Share of interactions kept, decided per `interactionId` so an interaction stays whole. */
  sampleRate?: number;
  /** The user opted out of training: every event carries `privacy_mode: true`. */
  privacyMode?: boolean;
  clientName?: string;
  clientVersion?: string;
  /** Called with the events the collector refused for good (a 4xx, or per-event rejections). */
  onRejected?: (rejected: Rejection[]) => void;
  /** Where the SDK says what went wrong; default: warnings to `console.warn`, no debug. */
  logger?: Logger;
}

export type Config = Required<Omit<ClientOptions, "spoolDir" | "onRejected">> &
  Pick<ClientOptions, "spoolDir" | "onRejected">;

const DEFAULTS = {
  spoolMaxBytes: 64 * 1024 * 1024,
  spoolMaxEvents: 1_000_000,
  queueMaxEvents: 10_000,
  batchMaxEvents: 100,
  batchMaxBytes: 512 * 1024,
  flushIntervalMs: 1_000,
  requestTimeoutMs: 10_000,
  closeOnExitMs: 2_000,
  compress: true,
  sampleRate: 1,
  privacyMode: false,
  clientName: SDK_NAME,
  clientVersion: SDK_VERSION,
};

const CONSOLE_LOGGER: Logger = {
  debug: () => undefined,
  warn: (message) => console.warn(message),
};

/** The options with their defaults; throws a RangeError naming the first bad setting. */
export function resolveConfig(options: ClientOptions): Config {
  const config = { ...DEFAULTS, logger: CONSOLE_LOGGER, ...stripUndefined(options) } as Config;
  if (!/^https?:\/\//.test(config.endpoint ?? "")) {
    throw new RangeError(`endpoint must be an http(s) URL, got ${String(config.endpoint)}`);
  }
  if (!config.apiKey) throw new RangeError("apiKey is required");
  if (!config.orgId) throw new RangeError("orgId is required");
  if (!(config.sampleRate >= 0 && config.sampleRate <= 1)) {
    throw new RangeError(`sampleRate must be in [0, 1], got ${config.sampleRate}`);
  }
  for (const name of ["spoolMaxBytes", "spoolMaxEvents", "queueMaxEvents", "batchMaxEvents",
                      "batchMaxBytes", "flushIntervalMs", "requestTimeoutMs"] as const) {
    if (!(config[name] >= 1)) throw new RangeError(`${name} must be >= 1`);
  }
  if (config.batchMaxEvents > MAX_BATCH_EVENTS) {
    throw new RangeError(`batchMaxEvents must be <= ${MAX_BATCH_EVENTS}`);
  }
  return config;
}

function stripUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as
    Partial<T>;
}

export function eventsUrl(config: Config): string {
  return config.endpoint.replace(/\/+$/, "") + "/v1/events";
}
