"""One HTTP attempt per call: POST a batch to the collector and say what came back.

No retries here (``httpx`` retries nothing by default): the sender decides what to do with the
answer, so the retry rules live in one place (``retry``).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from ingest.sdk.retry import parse_retry_after

GZIP_LEVEL = 5


@dataclass(frozen=True)
class SendOutcome:
    """``status`` is None when no HTTP answer came (refused, timed out, reset)."""

    status: int | None
    retry_after_s: float | None = None
    results: list[dict[str, Any]] | None = None
    """The collector's per-event answers, in the batch's order, when it gave them."""
    error: str | None = None
    """A short description for logs and rejection reports."""


def build_body(events: tuple[bytes, ...], sent_at: str) -> bytes:
    """``{"events": [...]}`` with ``sent_at`` set on each event, without re-parsing them.

    Spooled events are compact JSON objects without ``sent_at`` (``emit`` removes it), so the
    field can be spliced in after the opening brace.

    >>> build_body((b'{"a":1}',), "2026-11-30T02:23:05.000000Z")
    b'{"events":[{"sent_at":"2026-11-30T02:23:05.000000Z","a":1}]}'
    """
    head = b'{"sent_at":"' + sent_at.encode() + b'",'
    return b'{"events":[' + b",".join(head + e[1:] for e in events) + b"]}"


class HttpTransport:
    def __init__(
        self, url: str, api_key: str, timeout_s: float, compress: bool, user_agent: str
    ) -> None:
        self._url = url
        self._compress = compress
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "User-Agent": user_agent,
        }
        if compress:
            self._headers["Content-Encoding"] = "gzip"
        self._http = httpx.Client(timeout=timeout_s)

    def send(self, body: bytes) -> SendOutcome:
        content = gzip.compress(body, GZIP_LEVEL) if self._compress else body
        try:
            response = self._http.post(self._url, content=content, headers=self._headers)
        except httpx.HTTPError as exc:
            return SendOutcome(None, error=f"{type(exc).__name__}: {exc}")
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        answer = _json_or_none(response.content)
        results = answer.get("results") if isinstance(answer, dict) else None
        error = None
        if response.status_code >= 300:
            reason = answer.get("reason") if isinstance(answer, dict) else None
            error = f"HTTP {response.status_code}" + (f" {reason}" if reason else "")
        return SendOutcome(
            response.status_code, retry_after, results if isinstance(results, list) else None, error
        )

    def close(self) -> None:
        self._http.close()


def _json_or_none(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
