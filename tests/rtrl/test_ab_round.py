"""The closing A/B test of `rtrl run` (``rtrl.run.ab_round``): a real `rtrl serve` with the
experiment's split, asked over HTTP by the simulated users; every interaction is reported with
the arm and checkpoint the gateway chose, sticky per user."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from infra.tenancy import scoped_key
from models.sampling import SamplingParams
from rtrl.run.ab_round import EXPERIMENT, arms, run_final_ab
from rtrl.run.gateway import GatewaySetup
from rtrl.worlds.token_users import Taste
from serving.routing import parse_arms


class Recorder:
    """Stands in for the SDK's client, which has its own tests: what the users reported."""

    def __init__(self) -> None:
        self.events: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)

    def emit(self, kind: str, interaction_id: str, payload: dict, **fields: Any) -> None:
        self.events[interaction_id].append((kind, fields))


def test_the_users_are_split_by_the_gateway_and_report_its_arm(
    tmp_path: Path, ab_gateway: GatewaySetup
) -> None:
    recorder = Recorder()
    users = 40
    served = run_final_ab(ab_gateway, "t-0000", "t-0001", recorder, Taste(432), users,  # type: ignore[arg-type]
                          SamplingParams(max_tokens=4), tmp_path / "gateway.log")  # fmt: skip

    split = parse_arms(EXPERIMENT, arms("t-0000", "t-0001"))
    assert sum(served.values()) == 2 * users and set(served) == {"control", "treatment"}
    by_user: dict[str, set[str]] = defaultdict(set)
    for interaction, events in recorder.events.items():
        kinds = [kind for kind, _ in events]
        assert kinds[0] == "interaction.started" and "interaction.completed" in kinds
        # after the interaction, only what the user later did with its edit
        after = kinds[kinds.index("interaction.completed") + 1 :]
        assert set(after) <= {"edit.retention", "edit.reverted", "followup.sent"}, kinds
        fields = {repr(f) for _, f in events}
        assert len(fields) == 1, interaction  # every event of an interaction stamped alike
        stamp = events[0][1]
        arm = stamp["experiment"]["arm"]
        assert stamp["experiment"]["name"] == EXPERIMENT
        assert stamp["checkpoint_id"] == {"control": "t-0000", "treatment": "t-0001"}[arm]
        # the gateway's own assignment, of the user within its API key's organisation
        assert arm == split.assign(scoped_key("acme", stamp["user_id"])).name
        by_user[stamp["user_id"]].add(arm)
    assert len(recorder.events) == 2 * users
    assert all(len(a) == 1 for a in by_user.values())  # sticky: one arm per user
