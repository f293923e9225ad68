"""How `rtrl run`'s token-level users read a completion: the simulator's own mapping of tokens.

The last ``invalid_tokens`` ids of the vocabulary make an invalid tool call; for the agent users
the ids just below those make a clarifying question. The users (``rtrl.worlds.token_users``) and the
candidate evals (``--eval-reader rtrl.worlds.token_reader:simulated``) read with the very same
class, so the evals see what the users will see. It lives with the simulator: the release stage only
knows that a reader can be plugged in by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type only: importing it would load torch
    from models.policy import Completion

Behaviours = dict[str, bool]


@dataclass(frozen=True)
class SimulatedBehaviour:
    """The simulator's reading of a completion (``rtrl run``'s users use the very same one).

    The last ``invalid_tokens`` ids of the vocabulary make an invalid tool call. With
    ``clarify_tokens`` (the agent users of ``rtrl run --scenario``), a completion holding one of
    the ids just below those is a clarifying question: no tool call, no edit.

    >>> reader = SimulatedBehaviour(100, clarify_tokens=4)
    >>> reader.read([1, 95]), reader.read([1, 90]), reader.read([89, 99]), reader.read([1, 2])
    ((False, True), (True, False), (True, False), (False, False))
    """

    vocab_size: int
    invalid_tokens: int = 8
    clarify_tokens: int = 0

    def invalid(self, token_ids: Sequence[int]) -> bool:
        return self.read(token_ids)[1]

    def clarifying(self, token_ids: Sequence[int]) -> bool:
        return self.read(token_ids)[0]

    def read(self, token_ids: Sequence[int]) -> tuple[bool, bool]:
        """(a clarifying question, an invalid tool call): never both."""
        first_invalid = self.vocab_size - self.invalid_tokens
        first_clarify = first_invalid - self.clarify_tokens
        if any(first_clarify <= t < first_invalid for t in token_ids):
            return True, False
        return False, any(t >= first_invalid for t in token_ids)

    def __call__(self, completion: Completion) -> Behaviours:
        clarifying, invalid = self.read(completion.token_ids)
        return {
            "invalid_tool_call_rate": invalid,
            "edit_rate": not clarifying,
            "clarifying_rate": clarifying,
        }


AGENT_CLARIFY_TOKENS = 8
"""How many ids ask a question for the agent users (``eval_reader="simulated-agent"``)."""


def simulated(vocab_size: int) -> SimulatedBehaviour:
    """The reader of the default token-level users (``rtrl.worlds.token_reader:simulated``)."""
    return SimulatedBehaviour(vocab_size)


def simulated_agent(vocab_size: int) -> SimulatedBehaviour:
    """The reader of the agent users of ``rtrl run --scenario``, who may also ask."""
    return SimulatedBehaviour(vocab_size, clarify_tokens=AGENT_CLARIFY_TOKENS)


SIMULATED = "rtrl.worlds.token_reader:simulated"
SIMULATED_AGENT = "rtrl.worlds.token_reader:simulated_agent"
