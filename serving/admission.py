"""What a completion request is admitted as, before the backend sees it: its sampling parameters,
the grammar its tool choice requires, its interaction and response ids, privacy, experiment arm
and the checkpoint bound to serve it; or the 4xx that refuses it (``ApiError``).

Split from ``completions`` (which takes an admitted request to its answer and its rollout) so
that every refusal before the backend is in one place. Parameters and grammars are validated or
compiled once for each set seen: an agent sends the same ones on every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError

from ingest.contract import uuid7
from ingest.contract.response_ids import response_id
from llamacpp.native import chain_refusal
from models.constraint import Constraint, tool_call_constraint
from models.rollout import Experiment
from models.sampling import SamplingParams
from serving.answers import ApiError
from serving.assignment import Assignment
from serving.backends.base import Backend
from serving.protocol import ChatCompletionRequest, CompletionRequest, NamedToolChoice
from serving.tool_calls import Reading

PARAMS_KEPT = 4096  # sets of sampling parameters (and grammars) kept validated
STOPS_KEPT_CHARS = 256  # a set whose stop strings are longer in all is validated every time

INTERACTION = "x-rtrl-interaction-id"
USER = "x-rtrl-user-id"
PRIVACY = "x-rtrl-privacy-mode"

Request = ChatCompletionRequest | CompletionRequest


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True, slots=True)
class Admitted:
    interaction: str
    response_id: str  # carries the interaction (``ingest.contract.response_ids``)
    private: bool  # X-Rtrl-Privacy-Mode: served, never recorded
    experiment: Experiment | None
    target: Any  # the bound checkpoint, as the backend names it


class Admission:
    def __init__(self, backend: Backend[Any], assignment: Assignment, model_names: tuple[str, ...],
                 default_max_tokens: int) -> None:  # fmt: skip
        self.backend, self.assignment = backend, assignment
        self.model_names, self.default_max_tokens = model_names, default_max_tokens
        self._params: dict[tuple[Any, ...], SamplingParams] = {}
        self._constraints: dict[bytes, Constraint] = {}  # compiled grammars, by tools and choice

    def models(self, org_id: str | None = None) -> list[str]:
        """The names a request of ``org_id`` may give as its model, as ``/v1/models`` lists
        them: never another organisation's checkpoint."""
        foreign = self.assignment.foreign(org_id)
        served = [m for m in self.backend.models() if m not in foreign]
        return [*served, *(n for n in self.model_names if n not in served)]

    def admit(self, headers: Mapping[str, str], chat: bool, model: str, known: str | None,
              unit: str, org_id: str | None = None) -> Admitted:  # fmt: skip
        """Interaction id (``known``: the run's that the call was recognised in, else the
        header's, else a new UUIDv7), response id, privacy, experiment arm and the bound
        checkpoint of a request (``unit``: whom it is assigned as,
        ``serving.assignment.assignment_unit``). Nothing may refuse the request after this:
        a backend that counts the requests bound to a server gives the count back when it
        answers."""
        interaction = known or headers.get(INTERACTION) or uuid7()
        if not 1 <= len(interaction) <= 128:
            raise ApiError(
                400, "X-Rtrl-Interaction-Id: 1 to 128 characters", "invalid_request_error"
            )
        if model:
            self.assignment.refuse_foreign(model, org_id)
        if model and model not in self.model_names and model not in self.backend.models():
            raise ApiError(
                404,
                f"The model `{model}` does not exist; this gateway serves "
                f"{', '.join(self.models(org_id))}",
                "invalid_request_error",
                "model_not_found",
                "model",
            )
        experiment, target = self.assignment.admit(unit, model, org_id)
        rid = response_id(interaction, "chatcmpl" if chat else "cmpl")
        return Admitted(interaction, rid, _truthy(headers.get(PRIVACY)), experiment, target)

    def sampling(self, req: Request) -> SamplingParams:
        """The request's sampling parameters, validated once for each set seen (most requests
        ask for the same few)."""
        key = temperature, top_p, budget, stops = (
            req.temperature,
            req.top_p,
            req.token_budget(),
            req.stops(),
        )
        params = self._params.get(key)
        if params is not None:
            return params
        try:
            params = SamplingParams(
                temperature=temperature or 1.0,
                top_p=top_p or 1.0,
                max_tokens=budget or self.default_max_tokens,
                stop=stops,
            )
        except ValidationError as exc:
            raise ApiError(400, str(exc.errors()[0]["msg"]), "invalid_request_error") from None
        if len(self._params) < PARAMS_KEPT and sum(map(len, stops)) <= STOPS_KEPT_CHARS:
            self._params[key] = params  # bounded: unusual stop strings are not kept
        return params

    def constraint(self, req: ChatCompletionRequest, reading: Reading | None) -> Constraint | None:
        """The grammar of the calls ``req`` requires (None when it requires none), compiled once
        for each set of tools and choice seen; a choice its tools cannot satisfy, a schema the
        grammar engine cannot compile, or a backend that samples under no grammar is a 400:
        never sampled unconstrained. An upstream the tools are passed to constrains with its
        own grammar: None here (and its rollouts refused, ``UpstreamBackend.chat``)."""
        if reading is None or not reading.constrained:
            return None
        if getattr(self.backend, "passes_tools", False):
            return None
        if not getattr(self.backend, "constrains_tool_calls", False):
            raise ApiError(
                400,
                f"tool_choice {reading.mode!r} needs the answer decoded under a grammar of "
                f"calls, which the {self.backend.kind} backend does not do: use 'auto'",
                "invalid_request_error",
                "unsupported_tool_choice",
                "tool_choice",
            )
        tools = [t.model_dump(exclude_none=True) for t in req.tools or ()]
        choice = req.tool_choice
        choice_raw = choice.model_dump() if isinstance(choice, NamedToolChoice) else choice
        key = orjson.dumps(
            [tools, choice_raw, req.parallel_tool_calls], option=orjson.OPT_SORT_KEYS
        )
        constraint = self._constraints.get(key)
        if constraint is None:
            try:
                build = getattr(self.backend, "tool_call_constraint", tool_call_constraint)
                constraint = build(tools, choice_raw, req.parallel_tool_calls)
            except ValueError as exc:
                raise ApiError(
                    400, str(exc), "invalid_request_error", "invalid_tools", "tools"
                ) from None
            if constraint is None:  # not asked for: reading_of said otherwise
                raise ApiError(400, "tool_choice asks for no call", "invalid_request_error")
            if len(self._constraints) >= PARAMS_KEPT:
                self._constraints.clear()
            self._constraints[key] = constraint
        if constraint.syntax == "gbnf":  # llama-server's chain: exact with the temperature alone
            refused = chain_refusal(req.top_p, req.model_extra or {})
            if refused is not None:
                code, message, param = refused
                raise ApiError(400, message, "invalid_request_error", code, param)
        return constraint
