"""The exporter's typed settings: where evaluations go, how they are batched and retried.

Light on purpose (pydantic only): ``rtrl --help`` builds its options from these fields
(``infra.settings_cli``) without importing Kafka, HTTP or protobuf. Never reads the environment:
``otel.cli`` does, once, for the standard ``OTEL_EXPORTER_OTLP_HEADERS``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from infra.topics import TopicNames

DEFAULT_GROUP = "rtrl-otel-export"
OTLP_LOGS_PATH = "/v1/logs"

# `otlp-logs`: standard OTLP/HTTP protobuf logs, one gen_ai.evaluation.result record per reward,
# to any OTLP endpoint (an OpenTelemetry Collector, Grafana, Datadog, ...).
# `phoenix`: Arize Phoenix receives OTLP traces only (no /v1/logs) and shows evaluations as span
# annotations, so the same evaluation is written there, on the span of its response.
Target = Literal["otlp-logs", "phoenix"]


class ExportSettings(BaseModel):
    """How `rtrl otel export` reads `rewards` and delivers evaluations."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    bootstrap: str = Field(description="Kafka bootstrap servers")
    topics: TopicNames = Field(default_factory=TopicNames, description="the platform's topics")
    endpoint: str = Field(
        default="http://127.0.0.1:4318",
        description="the team's endpoint: an OTLP/HTTP base URL (/v1/logs is added unless "
        "given) or, with --target phoenix, Phoenix's base URL (http://127.0.0.1:6006)",
    )
    target: Target = Field(
        default="otlp-logs",
        description="otlp-logs: standard OTLP logs to any endpoint; phoenix: span annotations "
        "on the span of the reward's interaction (its gen_ai.response.id or rtrl.interaction.id; "
        "Phoenix has no OTLP logs)",
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="HTTP headers sent with every request (an API key, a tenant); "
        "NAME=VALUE, repeated; values never logged",
    )
    group_id: str = Field(default=DEFAULT_GROUP, description="consumer group of the exporter")
    evaluation_name: str = Field(
        default="rtrl.reward", min_length=1, description="gen_ai.evaluation.name of each reward"
    )
    service_name: str = Field(
        default="rtrl", min_length=1, description="service.name of the exported resource"
    )
    max_batch: int = Field(default=512, gt=0, description="rewards per request at most")
    max_wait_s: float = Field(
        default=1.0, gt=0, description="send a smaller batch once no reward came for this long"
    )
    timeout_s: float = Field(default=10.0, gt=0, description="one HTTP request's time limit")
    retry_initial_s: float = Field(
        default=0.5, gt=0, description="first pause before a retry; doubles each retry"
    )
    retry_max_s: float = Field(default=30.0, gt=0, description="longest pause between retries")
    phoenix_project: str | None = Field(
        default=None,
        description="Phoenix project to find spans in (default: every project)",
    )
    span_wait_s: float = Field(
        default=60.0,
        ge=0,
        description="with --target phoenix, how long a reward waits for its span to appear "
        "before it is counted as span_not_found and passed",
    )
    session_timeout_ms: int = Field(
        default=10_000,
        ge=6_000,
        description="how long the group waits for a silent exporter before a successor takes "
        "its partitions (and delivers what it left uncommitted)",
    )
    once: bool = Field(
        default=False, description="export what the topic holds now, commit and exit"
    )
    once_idle_s: float = Field(
        default=5.0, gt=0, description="with --once, stop after this long without a reward"
    )
    metrics_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="serve Prometheus metrics on this port (/metrics); default: none",
    )

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must be an http:// or https:// URL, got {value!r}")
        return value.rstrip("/")

    @property
    def logs_url(self) -> str:
        """The OTLP/HTTP logs URL: the endpoint with ``/v1/logs`` unless it names it already.

        >>> ExportSettings(bootstrap="k:1", endpoint="http://otel:4318/").logs_url
        'http://otel:4318/v1/logs'
        >>> ExportSettings(bootstrap="k:1", endpoint="http://otel:4318/v1/logs").logs_url
        'http://otel:4318/v1/logs'
        """
        if self.endpoint.endswith(OTLP_LOGS_PATH):
            return self.endpoint
        return self.endpoint + OTLP_LOGS_PATH

    def header_values(self) -> dict[str, str]:
        """The headers with their values revealed: for the HTTP client only."""
        return {name: value.get_secret_value() for name, value in self.headers.items()}


def parse_headers(items: list[str] | str | None) -> dict[str, SecretStr]:
    """``NAME=VALUE`` items (or one comma-separated string, as OTEL_EXPORTER_OTLP_HEADERS
    spells them) as headers.

    >>> sorted(parse_headers(["api_key=abc", "x-tenant = t1"]))
    ['api_key', 'x-tenant']
    >>> parse_headers("a=1,b=2")["b"].get_secret_value()
    '2'
    >>> parse_headers(["novalue"])
    Traceback (most recent call last):
    ...
    ValueError: header 'novalue' is not NAME=VALUE
    """
    if items is None:
        return {}
    parts = items.split(",") if isinstance(items, str) else items
    out: dict[str, SecretStr] = {}
    for part in parts:
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            shown = name.strip() or part
            raise ValueError(f"header {shown!r} is not NAME=VALUE")
        out[name.strip()] = SecretStr(value.strip())
    return out
