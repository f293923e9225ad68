"""The names a canary runs under, shared by the gate (``release.canary``) and every gateway
(``serving.routing``): its experiment and the experiment's two arms. Apart from the
verdict's statistics so that a gateway loads none of them.
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
