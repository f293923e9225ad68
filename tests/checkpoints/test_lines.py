"""Checkpoint lines per organisation (``checkpoints.lines``): an organisation's checkpoints grow
only on the shared line or its own, serve only that organisation, and only while they grow on the
shared line's current checkpoint; `rtrl checkpoints list --org` shows no other organisation's."""

from __future__ import annotations

import json

import pytest

from checkpoints.store import CheckpointRegistry
from rtrl.cli import main
from tests.support.checkpoints import register_variant


def _serving(registry: CheckpointRegistry, org: str | None) -> str:
    current = registry.current(org)
    assert current is not None
    return current.checkpoint_id


def test_a_lineage_never_crosses_organisations(registry: CheckpointRegistry) -> None:
    acme = register_variant(registry, "acme-0001", "t-0000", seed=1, org_id="acme")
    assert (acme.org_id, acme.shared_base) == ("acme", "t-0000")
    mine = register_variant(registry, "acme-0002", "acme-0001", seed=2, org_id="acme")
    assert mine.shared_base == "t-0000"  # its line still grows on the shared checkpoint
    with pytest.raises(ValueError, match="another organisation"):
        register_variant(registry, "globex-0001", "acme-0002", seed=3, org_id="globex")
    with pytest.raises(ValueError, match="shared checkpoint cannot grow"):
        register_variant(registry, "t-0001", "acme-0002", seed=4)
    with pytest.raises(ValueError, match="grows on a shared checkpoint"):
        register_variant(registry, "acme-root", None, seed=5, org_id="acme")
    assert {i.checkpoint_id for i in registry.list()} == {"t-0000", "acme-0001", "acme-0002"}
    assert registry.get("acme-0002").org_id == "acme"  # what was stored reads back


def test_each_organisation_is_served_its_line_until_the_shared_line_moves(
    registry: CheckpointRegistry,
) -> None:
    register_variant(registry, "acme-0001", "t-0000", seed=1, org_id="acme")
    register_variant(registry, "acme-0002", "acme-0001", seed=2, org_id="acme",
                     status="rejected", reasons=("gate",))  # fmt: skip
    assert _serving(registry, "acme") == "acme-0001"  # its own last promoted
    assert _serving(registry, "globex") == "t-0000"  # no line: the shared checkpoint
    assert _serving(registry, None) == "t-0000"  # the shared line ignores every organisation's

    register_variant(registry, "t-0001", "t-0000", seed=3)  # the shared line moves
    # acme's adapter was trained against t-0000's weights: it never serves on t-0001
    assert _serving(registry, "acme") == "t-0001"
    rebased = register_variant(registry, "acme-0003", "t-0001", seed=4, org_id="acme")
    assert rebased.shared_base == "t-0001"
    assert _serving(registry, "acme") == "acme-0003"
    assert _serving(registry, "globex") == "t-0001"


def test_the_listing_of_one_organisation_shows_no_other(
    registry: CheckpointRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    register_variant(registry, "acme-0001", "t-0000", seed=1, org_id="acme")
    register_variant(registry, "globex-0001", "t-0000", seed=2, org_id="globex")
    capsys.readouterr()
    assert main(["checkpoints", "list", "--registry", str(registry.root), "--org", "globex",
                 "--json"]) == 0  # fmt: skip
    listed = json.loads(capsys.readouterr().out)
    assert [(c["checkpoint_id"], c["org_id"]) for c in listed] == [
        ("t-0000", None),
        ("globex-0001", "globex"),
    ]
    assert main(["checkpoints", "list", "--registry", str(registry.root), "--org", "acme"]) == 0
    out = capsys.readouterr().out
    assert "globex" not in out and "serves acme: acme-0001 (its own line)" in out
