"""The Phoenix target: each evaluation as a span annotation on the span of its response.

Arize Phoenix receives OTLP traces (``/v1/traces``, HTTP protobuf, and gRPC) but no OTLP logs
(``/v1/logs`` answers 405), and does not read ``gen_ai.evaluation.result`` events; what it shows
beside a span as an evaluation is a span annotation (name, score, label, explanation), written
through its REST API. So this target finds the evaluation's span and upserts the annotation
(``POST /v1/span_annotations?sync=true``). The span is, in this order: the one whose
``gen_ai.response.id`` is the evaluation's (``GET /v1/projects/{project}/spans?attribute=...``),
the one whose ``rtrl.interaction.id`` is the reward's interaction (a team that copies the
gateway's header), or one whose ``gen_ai.response.id`` is a gateway's response id that carries
that interaction (``ingest.contract.response_ids``). Phoenix matches an attribute only exactly,
so the last is a scan of the spans that started in the hours before the reward's window closed
(``SCAN_BEFORE_S``), at most ``SCAN_PAGES`` pages of them: made only for a reward that neither
exact look-up found. The annotation's identifier is the reward version:
a later revision of the same reward replaces it, another reward version sits beside it.
A span not there yet waits (``Sent.waiting``): the caller retries it for a while.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from ingest.contract import genai
from ingest.contract.response_ids import interaction_of
from otel.delivery import EndpointRefused, RetryLater, Sent, classify, retry_after_s
from otel.evaluation import Evaluation
from otel.settings import ExportSettings

ANNOTATOR_KIND = "CODE"  # Phoenix's kinds: LLM, CODE, HUMAN; a reward is computed by code
SCAN_BEFORE_S = 2 * 3600  # spans scanned start at most this long before the window's close
SCAN_AFTER_S = 600  # ... and at most this long after it (the clocks of two machines)
SCAN_PAGES = 5  # pages of SCAN_PAGE_SIZE spans at most, for one reward
SCAN_PAGE_SIZE = 1000


def carries(span: dict[str, Any], interaction_id: str) -> bool:
    """Whether a span (as Phoenix lists it: flat attributes) has a gateway's response id that
    carries ``interaction_id``.

    >>> carries({"attributes": {"gen_ai.response.id": "chatcmpl-0123456789abcdef.cnVuLTc"}},
    ...         "run-7")
    True
    >>> carries({"attributes": {"gen_ai.response.id": "run-7"}}, "run-7")
    False
    """
    response_id = (span.get("attributes") or {}).get(genai.RESPONSE_ID)
    return isinstance(response_id, str) and interaction_of(response_id) == interaction_id


def annotation(evaluation: Evaluation, span_id: str) -> dict[str, Any]:
    """The body of one span annotation (pure)."""
    return {
        "span_id": span_id,
        "name": evaluation.name,
        "annotator_kind": ANNOTATOR_KIND,
        "identifier": evaluation.reward_version,
        "result": {
            "score": evaluation.score,
            "label": evaluation.label,
            "explanation": evaluation.explanation,
        },
        "metadata": {
            genai.RESPONSE_ID: evaluation.response_id,
            "interaction_id": evaluation.interaction_id,
            "revision": evaluation.revision,
            "reward_version": evaluation.reward_version,
            "checkpoint_id": evaluation.checkpoint_id,
            "terms": dict(evaluation.terms),
        },
    }


def latest_revisions(evaluations: Sequence[Evaluation]) -> list[Evaluation]:
    """One evaluation per (interaction, reward version): its highest revision, in first-seen
    order (an upsert of an older revision after a newer one would undo it)."""
    latest: dict[tuple[str, str], Evaluation] = {}
    for e in evaluations:
        key = (e.interaction_id, e.reward_version)
        if key not in latest or e.revision >= latest[key].revision:
            latest[key] = e
    return list(latest.values())


class PhoenixTarget:
    def __init__(self, settings: ExportSettings, client: httpx.Client | None = None) -> None:
        self.base = settings.endpoint
        self.project = settings.phoenix_project
        self.client = client or httpx.Client(timeout=settings.timeout_s)
        self.headers = settings.header_values()

    def send(self, evaluations: Sequence[Evaluation]) -> Sent:
        chosen = latest_revisions(evaluations)
        projects = [self.project] if self.project else self._projects()
        found: list[dict[str, Any]] = []
        waiting: list[Evaluation] = []
        for e in chosen:
            span_id = self._span_of(e, projects)
            if span_id is None:
                waiting.append(e)
            else:
                found.append(annotation(e, span_id))
        if found:
            answer = self._call("POST", "/v1/span_annotations", params={"sync": "true"},
                                json={"data": found})  # fmt: skip
            if answer.status_code == 404:  # a span went away between finding and annotating
                raise RetryLater(f"Phoenix lost a span: {answer.text[:200]}")
            classify(answer.status_code, answer.text)
        # superseded revisions count as delivered: their latest revision was
        return Sent(accepted=len(evaluations) - len(waiting), waiting=waiting)

    def _projects(self) -> list[str]:
        names: list[str] = []
        cursor: str | None = None
        while True:
            params = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            answer = self._call("GET", "/v1/projects", params=params)
            classify(answer.status_code, answer.text)
            page = answer.json()
            names += [p["name"] for p in page["data"]]
            cursor = page.get("next_cursor")
            if not cursor:
                return names

    def _span_of(self, evaluation: Evaluation, projects: list[str]) -> str | None:
        # the values JSON-quoted: an id that looks like a number stays a string
        exact = [
            f"{genai.RESPONSE_ID}:{json.dumps(evaluation.response_id)}",
            f"{genai.RTRL_INTERACTION_ID}:{json.dumps(evaluation.interaction_id)}",
        ]
        for where in exact:
            for project in projects:
                spans = self._spans(project, {"attribute": where, "limit": "1"})
                if spans:
                    return str(spans[0]["context"]["span_id"])
        closed = evaluation.time_unix_nano / 1e9
        window = {
            "start_time": _iso(closed - SCAN_BEFORE_S),
            "end_time": _iso(closed + SCAN_AFTER_S),
            "limit": str(SCAN_PAGE_SIZE),
        }
        for project in projects:
            cursor: str | None = None
            for _ in range(SCAN_PAGES):
                params = {**window, **({"cursor": cursor} if cursor else {})}
                page = self._page(project, params)
                if page is None:
                    break
                for span in page["data"]:
                    if carries(span, evaluation.interaction_id):
                        return str(span["context"]["span_id"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return None

    def _spans(self, project: str, params: dict[str, str]) -> list[dict[str, Any]]:
        page = self._page(project, params)
        return [] if page is None else list(page["data"])

    def _page(self, project: str, params: dict[str, str]) -> dict[str, Any] | None:
        """One page of a project's spans; None for a project deleted since it was listed."""
        path = f"/v1/projects/{quote(project, safe='')}/spans"
        answer = self._call("GET", path, params=params)
        if answer.status_code == 404 and self.project is None:
            return None
        classify(answer.status_code, answer.text)
        page: dict[str, Any] = answer.json()
        return page

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = self.client.request(method, self.base + path, headers=self.headers, **kwargs)
        except httpx.TransportError as exc:
            raise RetryLater(f"no answer from {self.base}: {type(exc).__name__}: {exc}") from exc
        if answer.status_code in (429, 503):
            wait = retry_after_s(answer.headers.get("retry-after"))
            raise RetryLater(f"Phoenix answered {answer.status_code}", wait)
        if answer.status_code in (401, 403):
            raise EndpointRefused(f"Phoenix refused the credentials ({answer.status_code})")
        return answer

    def close(self) -> None:
        self.client.close()


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).isoformat()
