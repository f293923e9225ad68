"""Training examples: a rollout and the reward its interaction earned, read from a batch file.
Rows without a reward (censored: no outcome) are not trained on; their calls come back apart
(``BatchExamples.censored``) for the gate's held-out evidence, which keeps them.

A batch (``warehouse.batches``) is one Parquet file of scored reward records of one checkpoint,
each row with the rollouts the serving side published for its interaction (``trajectory_json``:
every call of an agent run, in the order they were published; ``rollout_json``, the last of
them, is all a batch of an older writer holds). An example is one call: the calls of an agent
run (rollouts with a ``turn``) are each an example with the run's reward, deduplicated by call
id (a rollout published twice is trained on once); of the rollouts without a ``turn`` (single
answers) only the last is, as it is the one the reward was earned by. Rows without a rollout,
or whose rollout came from another checkpoint than the batch's, are left out and counted,
never guessed.

Per-turn terms: a broken tool call is a negative term of the reward (``r_tool``, per invalid
call, floored); the gateway records in each call's rollout how many of its calls it could not
read (``turn.broken_calls``). That share of ``r_tool`` is charged to the turn that made the
calls: a call's ``credited`` reward is the trajectory's reward less the terms of the turns
before it (its ancestors), which would blame a broken call on its own turn and those that led
to it, never on later turns. It is still read, but the learner does not train on it
(``trainer.advantages``: one advantage per run, since per-turn credit divided by a spread of
whole-run rewards paid the answer after a broken call). Invalid calls the gateway could read but
the agent could not carry out (an unknown path) stay a term of the whole trajectory. The user and
session of each interaction come along (null when the record has none): the gate holds out and
resamples whole users. A rollout decoded under a constraint carries it (``rollout.constraint``),
for scoring to replay; one this process cannot replay (another grammar library or version) is
left out and counted here, before any scoring pass would refuse it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from models.constraint import NOT_REPLAYABLE, unreplayable_reason
from models.rollout import Rollout, RolloutError


@dataclass(frozen=True)
class Example:
    rollout: Rollout
    reward: float | None  # the interaction's (the whole trajectory's); None: censored
    user_id: str | None = None
    session_id: str | None = None
    earlier_terms: float = 0.0  # per-turn terms of the turns before this call (<= 0)
    org_id: str | None = None  # the ids above are unique only within their organisation

    @property
    def scored(self) -> float:
        """The trajectory's reward; a censored example (no outcome) has none to train on."""
        if self.reward is None:
            raise ValueError(f"{self.rollout.interaction_id}: censored, it has no reward")
        return self.reward

    @property
    def credited(self) -> float:
        """The reward this call is credited with: the trajectory's, less the per-turn terms
        (broken calls) of the turns before it."""
        return self.scored - self.earlier_terms


def trajectories(examples: Sequence[Example]) -> list[list[int]]:
    """The examples' indices by trajectory: the calls of one agent run (``rollout.turn`` set,
    one interaction) together, each single answer alone."""
    members: dict[object, list[int]] = {}
    for index, e in enumerate(examples):
        key = (e.org_id, e.rollout.interaction_id) if e.rollout.turn is not None else index
        members.setdefault(key, []).append(index)
    return list(members.values())


@dataclass(frozen=True)
class BatchExamples:
    checkpoint_id: str
    examples: list[Example]
    skipped: Counter[str]
    """Rows left out, by reason: no_rollout, no_reward, bad_rollout, old_rollout_version,
    other_interaction (the rollout names another interaction), other_checkpoint (it was served
    by another one), constraint_not_replayable (decoded under a grammar this process cannot
    replay)."""
    censored: list[Example] = field(default_factory=list)
    """Calls of interactions without a reward (no outcome), each with ``reward=None``: not for
    training, but the gate keeps them in its held-out evidence (``release.offpolicy_bound``)."""


def read_examples(path: str | Path) -> BatchExamples:
    """The examples of one batch file (all its rows share one checkpoint). A trajectory is
    taken whole or not at all: one call that cannot be trained on (another checkpoint served
    it, its rollout is malformed) leaves out the row, counted once by that call's reason, since
    the run's reward and its per-turn credit belong to all its calls together."""
    present = pl.read_parquet_schema(path)
    wanted = ["interaction_id", "checkpoint_id", "reward", "rollout_json", "trajectory_json",
              "user_id", "session_id", "r_tool", "n_invalid_tool_calls", "org_id"]  # fmt: skip
    frame = pl.read_parquet(path, columns=[name for name in wanted if name in present])
    for name in ("user_id", "session_id", "org_id"):  # batches of older writers may lack them
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    last = pl.concat_list(pl.col("rollout_json"))  # all a row written before trajectories has
    if "trajectory_json" not in frame.columns:
        frame = frame.with_columns(last.alias("trajectory_json"))
    frame = frame.with_columns(
        pl.when(pl.col("trajectory_json").list.len() > 0)
        .then(pl.col("trajectory_json"))
        .otherwise(last)
        .alias("trajectory_json")
    )
    for name in ("r_tool", "n_invalid_tool_calls"):
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(0).alias(name))
    checkpoints = frame["checkpoint_id"].unique().to_list()
    if len(checkpoints) != 1:
        found = sorted(map(str, checkpoints))
        raise ValueError(f"{path}: a batch holds one checkpoint, found {found}")
    checkpoint = str(checkpoints[0])
    examples: list[Example] = []
    censored: list[Example] = []
    skipped: Counter[str] = Counter()
    columns = ("interaction_id", "reward", "trajectory_json", "user_id", "session_id", "r_tool",
               "n_invalid_tool_calls", "org_id")  # fmt: skip
    for interaction_id, reward, raws, user_id, session_id, r_tool, n_invalid, org_id in (
            frame.select(columns).iter_rows()):  # fmt: skip
        raws = [raw for raw in raws or () if raw is not None]
        if not raws:
            skipped["no_rollout"] += 1
            continue
        calls = _calls(raws, str(interaction_id), checkpoint)
        if isinstance(calls, str):
            skipped[calls] += 1
            continue
        if reward is None:
            skipped["no_reward"] += 1
            censored.extend(Example(rollout, None, user_id, session_id, org_id=org_id)
                            for rollout in calls)  # fmt: skip
            continue
        terms = _earlier_terms(calls, float(r_tool or 0.0), int(n_invalid or 0))
        examples.extend(Example(rollout, float(reward), user_id, session_id, term, org_id)
                        for rollout, term in zip(calls, terms, strict=True))  # fmt: skip
    return BatchExamples(checkpoint, examples, skipped, censored)


def _calls(raws: list[str], interaction_id: str, checkpoint: str) -> list[Rollout] | str:
    """The trajectory's calls to train on, or the reason the row is left out."""
    by_call: dict[str, Rollout] = {}  # a call published twice counts once (the last copy)
    last_single: Rollout | None = None
    for raw in raws:
        try:
            rollout = Rollout.from_json(raw)
        except RolloutError as exc:
            return exc.reason
        if rollout.interaction_id != interaction_id:
            return "other_interaction"
        if rollout.checkpoint_id != checkpoint:
            return "other_checkpoint"
        if rollout.constraint is not None and unreplayable_reason(rollout.constraint):
            return NOT_REPLAYABLE
        if rollout.turn is None:
            last_single = rollout
        else:
            by_call[rollout.turn.call_id] = rollout
    return [*by_call.values(), *([last_single] if last_single is not None else [])]


def _earlier_terms(calls: list[Rollout], r_tool: float, n_invalid: int) -> list[float]:
    """Per call, the broken-call terms of the turns before it (its ancestors by parent id).

    The gateway counted ``b_j`` unreadable calls in turn ``j``; the reward counted
    ``n_invalid`` invalid calls in all, worth ``r_tool`` together (floored). Turn ``j``'s term
    is ``r_tool * b_j / max(n_invalid, sum b)``: the share of the penalty its calls earned.

    >>> from types import SimpleNamespace as NS
    >>> def call(i, parent, broken):
    ...     return NS(turn=NS(call_id=f"c{i}", parent_call_id=parent, broken_calls=broken))
    >>> _earlier_terms([call(1, None, 1), call(2, "c1", 0), call(3, "c2", 1)], -1.0, 2)
    [0.0, -0.5, -0.5]
    """
    broken = {c.turn.call_id: c.turn.broken_calls for c in calls if c.turn is not None}
    parents = {c.turn.call_id: c.turn.parent_call_id for c in calls if c.turn is not None}
    total = max(n_invalid, sum(broken.values()))
    if total == 0 or r_tool == 0:
        return [0.0] * len(calls)
    out = []
    for call in calls:
        term, seen = 0.0, set()
        parent = call.turn.parent_call_id if call.turn is not None else None
        while parent is not None and parent in broken and parent not in seen:
            seen.add(parent)
            term += r_tool * broken[parent] / total
            parent = parents[parent]
        out.append(term)
    return out
