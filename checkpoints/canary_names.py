"""The names a canary checkpoint runs under, shared by the release decision
(``release.canary``) and every gateway (``serving.routing``): its experiment and the
experiment's two arms. Here, below both, so that a gateway loads none of the verdict's
statistics.
"""

from __future__ import annotations

PARENT_ARM = "parent"
CANARY_ARM = "canary"


def experiment_of(candidate: str) -> str:
    """The experiment a canary runs as (the events' limit on a name is 64 characters).

    >>> experiment_of("tiny-0003")
    'canary-tiny-0003'
    """
    return f"canary-{candidate}"[:64]
