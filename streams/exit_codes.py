"""How a stream worker process says why it ended; its supervisor acts on it."""

from __future__ import annotations

EXIT_FAILED_CHUNK = 70  # a chunk failed before any of it was acked: restart after a pause
EXIT_OFFSET_HOLE = 75  # EX_TEMPFAIL: the consumer skipped messages: restart at once

MEANING = {
    EXIT_FAILED_CHUNK: "a chunk failed; it is processed again",
    EXIT_OFFSET_HOLE: "the consumer skipped messages; they are read again",
}
