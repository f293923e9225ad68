"""The two completion routes served straight from ASGI, in front of the FastAPI app.

FastAPI declares, documents (OpenAPI) and can serve ``POST /v1/chat/completions`` and ``POST
/v1/completions`` (``api``); this wrapper answers them before the app sees them, doing what
those routes do — the API key, the body checked against the same pydantic models, the same
errors — without FastAPI's per-request machinery: its middleware stack (errors, telemetry,
exceptions), routing, the dependency solver, the body read, parsed and validated in separate
steps. That machinery cost about as much CPU per request as the rest of the gateway's own work
(``bench/RESULTS.md``, gateway), and a gateway is judged by what it adds to its backend. Every
other request, and the lifespan, go to the app. ``create_app(fast_path=False)`` serves the two
routes through FastAPI alone; the tests check that both answer alike.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from infra.api_keys import KeyStore, bearer
from serving.answers import ApiError, error_response, invalid_request
from serving.completions import Completions
from serving.protocol import ChatCompletionRequest, CompletionRequest

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 16 * 1024 * 1024
ROUTES: dict[str, tuple[str, type[BaseModel]]] = {
    "/v1/chat/completions": ("chat", ChatCompletionRequest),
    "/v1/completions": ("completions", CompletionRequest),
}


def tenant_of(keys: KeyStore, authorization: str | None) -> str:
    """The organisation of a request's API key; a 401 when it has none or an unknown one."""
    found = keys.lookup(bearer(authorization))
    if found is None:
        raise ApiError(401, "missing or unknown API key", "authentication_error", "invalid_api_key")
    return found[1]


async def read_body(receive: Receive, limit: int = MAX_BODY_BYTES) -> bytes:
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(
                400, "the client went away before its body was read", "invalid_request_error"
            )
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body over {limit} bytes", "invalid_request_error")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


class CompletionsFastPath:
    def __init__(self, app: ASGIApp, completions: Completions, keys: KeyStore) -> None:
        self.app, self.completions, self.keys = app, completions, keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = ROUTES.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        endpoint, model = route
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:  # lower-case already; the first of a name counts
            headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
        try:
            org_id = tenant_of(self.keys, headers.get("authorization"))
            request = _parse(model, await read_body(receive))
            response = await self.completions.serve(headers, endpoint, request, org_id)
        except ApiError as exc:
            response = exc.response()
        except Exception:  # what FastAPI's error middleware would answer (a stream's own
            # failure, once started, goes to uvicorn, which closes the connection)
            log.exception("%s %s failed", scope["method"], scope["path"])
            response = error_response(500, "internal server error", "server_error")
        await response(scope, receive, send)


def _parse(model: type[BaseModel], body: bytes) -> Any:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise invalid_request(exc.errors()) from None
