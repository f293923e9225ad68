"""A backend's answer (``models.generation.Generation``) as the rollout the learner trains on,
or the reason it cannot be one.

Pure: the ids and log-probabilities go into the rollout exactly as the backend gave them; an
answer that lacks any of them (an upstream may leave them out) is refused with a reason code
that the gateway counts, never filled in by tokenising the text.
"""

from __future__ import annotations

from models.generation import Generation
from models.rollout import Experiment, Rollout, RolloutError, TurnRef
from models.sampling import SamplingParams


def rollout_of(
    gen: Generation,
    interaction_id: str,
    params: SamplingParams,
    experiment: Experiment | None,
    created_at: str,
    turn: TurnRef | None = None,
    org_id: str | None = None,
) -> Rollout | str:
    """The generation's rollout, or the reason (a code for counting) why it cannot be one.

    >>> from models.rollout import ModelIdentity
    >>> ident = ModelIdentity("llama", "a" * 64, "b" * 64)
    >>> gen = Generation("c1", ident, (1, 2), (3,), None, "x", "stop")
    >>> rollout_of(gen, "i1", SamplingParams(), None, "2026-11-30T10:00:00Z")
    'missing_logprobs'
    >>> r = rollout_of(gen.__class__(**{**gen.__dict__, "logprobs": (-0.1,)}), "i1",
    ...                SamplingParams(), None, "2026-11-30T10:00:00Z")
    >>> r.completion_ids, r.logprobs
    ((3,), (-0.1,))
    """
    if gen.unrecordable is not None:
        return gen.unrecordable
    if gen.model is None:
        return "unknown_model"
    if not gen.prompt_ids:
        return "missing_prompt_token_ids"
    if not gen.token_ids:
        return "missing_token_ids"
    if gen.logprobs is None:
        return "missing_logprobs"
    if len(gen.logprobs) != len(gen.token_ids):
        return "logprobs_mismatch"
    try:
        return Rollout(
            interaction_id,
            gen.checkpoint_id,
            gen.model,
            params,
            gen.prompt_ids,
            gen.token_ids,
            gen.logprobs,
            gen.finish_reason,
            created_at,
            experiment,
            constraint=gen.constraint,
            turn=turn,
            org_id=org_id,
        )
    except RolloutError as exc:
        return exc.reason
