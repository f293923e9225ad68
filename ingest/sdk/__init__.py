"""The emitter SDK that an editor plugin embeds: ``Client(SdkConfig(...)).emit(...)``.

``emit`` validates against the event contract, enqueues and returns at once; a background sender
batches, compresses and delivers to the collector, keeping what is unacknowledged in a bounded
spool (in memory, or on disk to survive a crash of the editor).
"""

from ingest.sdk.client import Client, EmitResult
from ingest.sdk.config import SdkConfig
from ingest.sdk.counters import CounterSnapshot
from ingest.sdk.disk_spool import SqliteSpool
from ingest.sdk.sender import Rejection
from ingest.sdk.spool import MemorySpool, Spool, SpoolBatch

__all__ = [
    "Client",
    "CounterSnapshot",
    "EmitResult",
    "MemorySpool",
    "Rejection",
    "SdkConfig",
    "Spool",
    "SpoolBatch",
    "SqliteSpool",
]
