"""One error body for every refusal the collector makes, and the request id it carries.

Whatever refuses a request (the events handler, FastAPI's router with a 404 or 405, a handler
that raised), the answer is ``{"reason", "detail", "request_id"}``: a machine-readable code, a
sentence, and the id that the same request's log lines and ``X-Request-ID`` header carry, so that
an emitter's report can be found in the collector's log. A caller's own ``X-Request-ID`` is kept
when it is a plausible id (a proxy in front may have set it); anything else gets a fresh one, so
a hostile header never reaches a log line.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

REQUEST_ID_HEADER = "x-request-id"
_PLAUSIBLE_ID = re.compile(r"[A-Za-z0-9._:-]{8,64}")

REASON_OF_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "bad_request",
    429: "rate_limited",
    500: "internal_error",
    503: "unavailable",
}
"""The reason of a refusal that did not name its own (FastAPI's, Starlette's)."""


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The caller's ``X-Request-ID`` when plausible, else a new one.

    >>> request_id([(b"x-request-id", b"abcd-1234-ef")])
    'abcd-1234-ef'
    >>> len(request_id([(b"x-request-id", b"<script>")]))
    32
    """
    for name, value in headers:
        if name == REQUEST_ID_HEADER.encode():
            text = value.decode("latin-1")
            if _PLAUSIBLE_ID.fullmatch(text):
                return text
    return uuid.uuid4().hex


def error_body(reason: str, detail: str, rid: str) -> dict[str, str]:
    return {"reason": reason, "detail": detail, "request_id": rid}


def error_response(
    status: int, reason: str | None, detail: str, rid: str, headers: dict[str, str] | None = None
) -> Response:
    """The collector's answer to a refused request (``reason`` None: the status's own)."""
    body = error_body(reason or REASON_OF_STATUS.get(status, f"http_{status}"), detail, rid)
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


class RequestIds:
    """ASGI middleware: every HTTP request gets an id (``scope["state"]["request_id"]``) and
    every answer the ``X-Request-ID`` header."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope.get("headers", []))
        scope.setdefault("state", {})["request_id"] = rid

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        (REQUEST_ID_HEADER.encode(), rid.encode()),
                    ],
                }
            await send(message)

        await self.app(scope, receive, send_with_id)


def scope_request_id(scope: Mapping[str, Any]) -> str:
    """The id ``RequestIds`` gave this request (a new one for an app served without it)."""
    state = scope.get("state") or {}
    rid = state.get("request_id")
    return rid if isinstance(rid, str) else uuid.uuid4().hex
