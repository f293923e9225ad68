"""The settings of ``rtrl console``: where a run's data lies, which services to scrape, where to
serve. A module apart from the server, so that building the ``rtrl`` command line imports no
FastAPI, DuckDB or HTTP client.

The defaults fit ``rtrl run``: its data folder (``.rtrl/run``) holds the checkpoint registry
(``checkpoints/``) and the warehouse (``warehouse/``, its DuckDB catalog
``warehouse/warehouse.duckdb``), so ``rtrl console --data-dir .rtrl/run`` needs nothing else.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

DEFAULT_DATA_DIR = Path(".rtrl/run")
DEFAULT_PORT = 8650


class ConsoleSettings(BaseModel):
    """Read-only sources of the live page and how often it is refreshed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = Field(
        DEFAULT_DATA_DIR,
        description="a run's data folder: the registry and the warehouse are looked for in its "
        "checkpoints/ and warehouse/",
    )
    warehouse: Path | None = Field(
        None,
        description="the DuckDB catalog, opened read-only (default: "
        "DATA_DIR/warehouse/warehouse.duckdb)",
    )
    registry: Path | None = Field(
        None, description="the checkpoint registry folder (default: DATA_DIR/checkpoints)"
    )
    metrics: tuple[str, ...] = Field(
        (),
        description="the services' Prometheus endpoints, e.g. http://127.0.0.1:9101/metrics "
        "(the collector, the stream worker, the sink, the gateway); by default none, and the "
        "page shows no ingest or stream health",
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(DEFAULT_PORT, ge=0, le=65535, description="port of the page (0: any free)")
    refresh_s: float = Field(
        1.0,
        gt=0.05,
        le=60,
        description="how often the sources are read again; a change reaches an open page "
        "within about this long (server-sent events, no reload)",
    )
    rate_window_s: float = Field(
        30.0, gt=0, description="the window over which ingest and dead-letter rates are taken"
    )

    @field_validator("metrics")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"metrics: an http(s) URL, got {url!r}")
        return value

    def registry_dir(self) -> Path:
        return self.registry if self.registry is not None else self.data_dir / "checkpoints"

    def catalog(self) -> Path:
        if self.warehouse is not None:
            return self.warehouse
        return self.data_dir / "warehouse" / "warehouse.duckdb"
