"""How an answer leaves the gateway: OpenAI's error form, a JSON answer with its headers laid
out once, and the call that runs once an answer is sent.

Errors are OpenAI's ``{"error": {"message", "type", "param", "code"}}``, every key present
(``param`` and ``code`` null when there is none), as ``ErrorResponse`` in OpenAI's published
schema requires.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import orjson
from starlette.responses import Response

T = TypeVar("T")
RETRY_AFTER_S = 10  # what a refusal for capacity (overloaded, deadline_exceeded) asks to wait


class ApiError(Exception):
    """A request refused before the backend answers: ``status``, and OpenAI's error fields."""

    def __init__(self, status: int, message: str, kind: str, code: str | None = None,
                 param: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code
        self.param, self.headers = param, headers

    def response(self) -> Response:
        return error_response(self.status, self.message, self.kind, self.code, self.param,
                              self.headers)  # fmt: skip


class JsonAnswer(Response):
    """A JSON response with its headers laid out once, here: Starlette's ``Response`` works out
    the media type, charset and length anew on every answer."""

    media_type = "application/json"

    def __init__(self, body: bytes, status: int = 200,
                 headers: Mapping[str, str] | None = None) -> None:  # fmt: skip
        self.status_code, self.body, self.background = status, body, None
        self.raw_headers = [
            (b"content-length", b"%d" % len(body)),
            (b"content-type", b"application/json"),
            *(
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in (headers or {}).items()
            ),
        ]


def error_response(status: int, message: str, kind: str, code: str | None = None,
                   param: str | None = None,
                   headers: Mapping[str, str] | None = None) -> Response:  # fmt: skip
    """An error in OpenAI's shape, with ``headers`` (``Retry-After``) when given.

    >>> answer = error_response(404, "gone", "invalid_request_error", "model_not_found", "model")
    >>> answer.status_code, orjson.loads(answer.body)["error"]["param"]
    (404, 'model')
    """
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JsonAnswer(orjson.dumps(body), status, headers)


def invalid_request(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """The first of pydantic's validation errors as a 400, named by its place in the body.

    >>> e = invalid_request([{"loc": ("body", "max_tokens"), "msg": "too big"}])
    >>> e.message, e.param
    ('max_tokens: too big', 'max_tokens')
    """
    first = errors[0] if errors else {"loc": (), "msg": "invalid"}
    where = ".".join(str(p) for p in first["loc"] if p != "body")
    return ApiError(400, f"{where}: {first['msg']}", "invalid_request_error", param=where or None)


class After(Generic[T]):
    """A response's background, which Starlette awaits once the answer is sent: ``call(arg)``
    on the event loop (Starlette's ``BackgroundTask`` would send a sync call to a thread pool,
    and inspects what it is given on every request)."""

    def __init__(self, call: Callable[[T], None], arg: T) -> None:
        self._call, self._arg = call, arg

    async def __call__(self) -> None:
        self._call(self._arg)
