"""The standard target: one OTLP/HTTP protobuf POST to ``<endpoint>/v1/logs`` per batch."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence

import httpx

from otel.delivery import ENDPOINT_REJECTED, RetryLater, Sent, classify, retry_after_s
from otel.evaluation import Evaluation
from otel.otlp_logs import CONTENT_TYPE, export_request, rejected_by
from otel.settings import ExportSettings

log = logging.getLogger(__name__)

SCOPE_VERSION = "1"  # the mapping's version: docs/contracts/otel-export-v1.md


class OtlpLogsTarget:
    """Sends each batch as one ``ExportLogsServiceRequest``; a 2xx means the endpoint took it
    (its partial success names records it rejected, counted as ``endpoint_rejected``)."""

    def __init__(self, settings: ExportSettings, client: httpx.Client | None = None) -> None:
        self.settings = settings
        self.url = settings.logs_url
        self.client = client or httpx.Client(timeout=settings.timeout_s)
        self.headers = {"content-type": CONTENT_TYPE, **settings.header_values()}

    def send(self, evaluations: Sequence[Evaluation]) -> Sent:
        body = export_request(
            evaluations,
            service_name=self.settings.service_name,
            scope_version=SCOPE_VERSION,
            observed_unix_nano=time.time_ns(),
        ).SerializeToString()
        try:
            answer = self.client.post(self.url, content=body, headers=self.headers)
        except httpx.TransportError as exc:
            raise RetryLater(f"no answer from {self.url}: {type(exc).__name__}: {exc}") from exc
        if answer.status_code in (429, 503):
            wait = retry_after_s(answer.headers.get("retry-after"))
            raise RetryLater(f"the endpoint answered {answer.status_code}", wait)
        classify(answer.status_code, answer.text)
        rejected, message = rejected_by(answer.content)
        sent = Sent(accepted=len(evaluations) - rejected)
        if rejected:
            sent.rejected = Counter({ENDPOINT_REJECTED: rejected})
            log.warning(
                "the endpoint rejected %d of %d evaluations: %s", rejected, len(evaluations),
                message or "(no message)",
            )  # fmt: skip
        return sent

    def close(self) -> None:
        self.client.close()
