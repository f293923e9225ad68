"""How `rtrl train` says what a round decided (torch-free: the CLI and `rtrl run` read them)."""

from __future__ import annotations

EXIT_PROMOTED = 0
EXIT_NOTHING_TO_TRAIN = 1  # no promoted checkpoint, or no new batch of it
EXIT_REJECTED = 3
# new batches, but their held-out evidence is below the gate's minimums: no round ran, no attempt
# was spent, and the batches stay untrained, so the next look trains on them with what follows
EXIT_WAITING = 4
