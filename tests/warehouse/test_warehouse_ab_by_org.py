"""The A/B report per organisation: one experiment, a large organisation whose users keep far more
of the treatment's edits and a small one whose users keep far fewer. The report over everyone
shows the large one's gain; each organisation's own report (``ab_report_by_org``, `rtrl report ab
--org`) shows its own change, the small one's loss included, on its own users, and their users
add up to the whole. The same user and interaction ids in both organisations stay apart."""

from __future__ import annotations

from collections import defaultdict

from rewards.config import RewardConfig
from rewards.function import compute_record
from rtrl.cli import main
from tests.support.warehouse import land
from warehouse.catalog import build_catalog
from warehouse.report import ReportRow, ab_report
from warehouse.store import Store

EXPERIMENT = "exp-orgs"
# organisation -> users an arm, and the share of interactions whose edit is kept in each arm
ORGS = {"big": (30, {"control": 0.3, "treatment": 0.8}),
        "small": (12, {"control": 0.75, "treatment": 0.1})}  # fmt: skip


def _events() -> list[dict]:
    events = []
    for org, (users, kept) in ORGS.items():
        for arm, share in kept.items():
            for u in range(users):
                for k in range(3):  # three interactions a user, kept by a fixed pattern
                    n = (u * 3 + k) % 20
                    interaction = f"{arm}-{u}-{k}"  # the same ids in both organisations
                    base = {"checkpoint_id": f"ckpt-{arm}", "schema_version": 1,
                            "experiment": {"name": EXPERIMENT, "arm": arm},
                            "interaction_id": interaction, "org_id": org,
                            "session_id": f"s-{u}", "user_id": f"u{u}"}  # fmt: skip
                    at = f"2026-11-30T10:{(u % 50):02d}:{k * 10:02d}"
                    steps = [("interaction.started", {}, 0),
                             ("agent.edit_proposed", {"edit_id": "e", "lines_added": 1,
                                                      "lines_removed": 0}, 1),
                             ("edit.accepted", {"edit_id": "e"}, 2)]  # fmt: skip
                    if n >= share * 20:
                        steps.append(("edit.reverted", {"edit_id": "e"}, 5))
                    else:
                        steps.append(("edit.retention", {"edit_id": "e", "retained_fraction": 1.0,
                                                         "after_s": 5}, 5))  # fmt: skip
                    for i, (kind, payload, second) in enumerate(steps):
                        stamp = f"{at[:-2]}{int(at[-2:]) + second:02d}.000000Z"
                        events.append({**base, "event_id": f"{org}-{interaction}-{i}",
                                       "type": kind, "payload": payload, "ts": stamp,
                                       "received_at": stamp})  # fmt: skip
    return events


def _records(events: list[dict]) -> list[dict]:
    by_id: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for event in events:
        by_id[(event["org_id"], event["interaction_id"])].append(event)
    return [compute_record(evs, RewardConfig()).to_json_dict() for evs in by_id.values()]


def test_each_organisation_gets_its_own_report(tmp_path, capsys):  # noqa: ANN001, ANN201
    store = Store(str(tmp_path))
    events = _events()
    land(store, "events", events)
    land(store, "rewards", _records(events))
    build_catalog(store)

    def kept(org: str | None) -> ReportRow:
        rows = ab_report(store, EXPERIMENT, org=org)
        return next(r for r in rows if r.metric == "kept_per_interaction")

    everyone, big, small = kept(None), kept("big"), kept("small")
    assert everyone.relative_change > 0  # the large one carries the whole
    assert big.relative_change > 0 and big.ci_low > 0
    assert small.relative_change < 0 and small.ci_high < 0  # its own loss, shown
    assert (big.n_users, small.n_users) == (30, 12) and everyone.n_users == 42
    assert abs(small.control - 0.75) < 0.1 and abs(big.value - 0.8) < 0.1  # the patterns

    assert main(["report", "ab", "--warehouse", str(tmp_path), "--experiment", EXPERIMENT,
                 "--org", "small", "--format", "json"]) == 0  # fmt: skip
    assert '"n_users": 12' in capsys.readouterr().out
    assert main(["report", "ab", "--warehouse", str(tmp_path), "--experiment", EXPERIMENT,
                 "--org", "nobody"]) == 1  # fmt: skip
