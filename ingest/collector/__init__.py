"""The HTTP collector: the only way into ``telemetry.events`` (``rtrl collector --port P``)."""

from ingest.collector.config import CollectorConfig

__all__ = ["CollectorConfig"]
