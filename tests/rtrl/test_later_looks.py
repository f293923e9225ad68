"""The users' second looks are sent a few seconds after each user reacted, not after the whole
round did, nor when the next user reacts: when reacting to a round takes longer than a reward
window (the code world grades every answer in a sandbox; an agent run takes minutes to come
back), a look held until then arrives after its interaction's window and the reward and the
A/B's edits-kept never read it."""

from __future__ import annotations

import time
from typing import Any

from rtrl.worlds.http_users import Later

DELAY_S = 0.2


class Recorder:
    def __init__(self) -> None:
        self.sent: dict[str, float] = {}

    def emit(
        self, event_type: str, interaction_id: str, payload: Any = None, **fields: Any
    ) -> None:
        self.sent[interaction_id] = time.monotonic()


def test_each_look_is_sent_its_delay_after_its_own_reaction() -> None:
    client = Recorder()
    later = Later(client, delay_s=DELAY_S)
    reacted = {}
    for n in range(6):  # reacting to each answer takes a while (a sandbox run, an agent run)
        reacted[f"i{n}"] = time.monotonic()
        later.append(("edit.retention", f"i{n}", {}, {}))
        time.sleep(0.1 if n != 2 else 1.0)  # the fourth run comes back long after the third
    took = time.monotonic() - reacted["i0"]
    assert took > 2 * DELAY_S  # the round's reactions outlast the delay
    later.drain()
    assert len(later) == 0 and set(client.sent) == set(reacted)
    for interaction, at in reacted.items():
        waited = client.sent[interaction] - at
        # never early, and never held for the next reaction
        assert DELAY_S <= waited < DELAY_S + 0.1, (interaction, waited)
