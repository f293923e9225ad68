"""The marker of a clean stop: the file a worker leaves in its data dir when its local tables
agree with the changelog (``streams.worker`` reads it at start; ``streams.join`` writes it once
its last chunk is durable). Its own module, so that the join need not import the worker that
builds it."""

from __future__ import annotations

CLEAN_MARKER = "clean-shutdown"
