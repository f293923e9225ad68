"""`rtrl warehouse catalog|compact`, `rtrl batches list`, `rtrl report ab` and `rtrl forget`'s
options as settings classes (``infra.settings_cli``): one field per option, read back into them.

The sink's and the batch builder's are their services' settings (``warehouse.settings``); the
warehouse folder and its catalog file, which every command here names, are spelled once below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings import DEFAULT_BOOTSTRAP
from infra.settings_cli import Option, SettingsOptions
from warehouse.settings import DEFAULT_GROUP

ROOT_ENV = "RTRL_WAREHOUSE"
DEFAULT_ROOT = ".rtrl/warehouse"
ROOT_HELP = (
    "warehouse folder or fsspec URL such as s3://bucket/wh "
    f"(default: ${ROOT_ENV} or {DEFAULT_ROOT})"
)
DB_HELP = (
    "DuckDB catalog file (default: warehouse.duckdb in a local root, else in the working folder)"
)


_ROOT = {"help": ROOT_HELP}
_DB = {"help": DB_HELP}
_TOPIC_PREFIX = {"help": TOPIC_PREFIX_HELP}


@dataclass(frozen=True)
class CatalogOptions:
    """The warehouse whose DuckDB views and marts `rtrl warehouse catalog` (re)builds."""

    root: str | None = field(default=None, metadata=_ROOT)
    db: str | None = field(default=None, metadata=_DB)


@dataclass(frozen=True)
class CompactOptions:
    """The warehouse `rtrl warehouse compact` merges, and the sink's commits that make it safe."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = field(default="", metadata=_TOPIC_PREFIX)
    root: str | None = field(default=None, metadata=_ROOT)
    group_id: str = field(default=DEFAULT_GROUP, metadata={"help": "the sink's consumer group"})
    all: bool = field(default=False, metadata={"help": "no sink runs: merge every small file"})


@dataclass(frozen=True)
class BatchListOptions:
    """Which batches of the manifest `rtrl batches list` shows."""

    root: str | None = field(default=None, metadata=_ROOT)
    offered: bool = field(default=False, metadata={"help": "only batches ready for training"})


@dataclass(frozen=True, kw_only=True)
class AbReportOptions:
    """The experiment `rtrl report ab` reports on, against which arm and split, and how."""

    root: str | None = field(default=None, metadata=_ROOT)
    db: str | None = field(default=None, metadata=_DB)
    experiment: str = field(metadata={"help": "experiment name"})
    control: str = field(default="control", metadata={"help": "the control arm's name"})
    org: str | None = field(
        default=None,
        metadata={
            "help": "one organisation's own users only (the ab_report_by_org mart: its own "
            "intervals and Holm family, never pooled with the others'); the SRM check stays "
            "the experiment's"
        },
    )
    weights: str | None = field(
        default=None,
        metadata={
            "help": "the configured split, e.g. parent=90,canary=10, for the SRM check (default: "
            "equal shares, as the ab_srm mart assumes: the data records no weights)"
        },
    )
    sequential: bool = field(
        default=False,
        metadata={
            "help": "show the anytime-valid 95% intervals and p-values (a confidence sequence "
            "over users, N* 5,000): they hold however often the report is refreshed and read"
        },
    )
    format: Literal["table", "csv", "json"] = field(
        default="table",
        metadata={"help": "table and json include the SRM check; csv holds the metric rows only"},
    )
    plot: Path | None = field(
        default=None,
        metadata={
            "help": "also write a forest plot of the changes and their 95 % CIs "
            "(.svg, .png or .pdf)"
        },
    )


@dataclass(frozen=True, kw_only=True)
class ForgetOptions:
    """The user `rtrl forget` removes, from which warehouse and rewards topic."""

    root: str | None = field(default=None, metadata=_ROOT)
    db: str | None = field(default=None, metadata=_DB)
    org: str = field(metadata={"help": "the organisation (org_id) whose user it is"})
    user_id: str | None = field(
        default=None,
        metadata={"help": "the pseudonymous user id to forget, within --org (or --whole-org)"},
    )
    whole_org: bool = field(
        default=False,
        metadata={
            "help": "forget the whole organisation: every row of it, its records on the rewards "
            "topic and, with --registry, its own checkpoints (revoke its keys first: rtrl keys "
            "revoke); the shared checkpoints it helped train are kept and named"
        },
    )
    registry: Path | None = field(
        default=None,
        metadata={"help": "with --whole-org: the checkpoint registry whose line of it to remove"},
    )
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = field(default="", metadata=_TOPIC_PREFIX)
    skip_kafka: bool = field(
        default=False,
        metadata={
            "help": "leave the rewards topic alone (its records of the user stay until "
            "tombstoned by other means)"
        },
    )


_KAFKA = {"bootstrap": BOOTSTRAP_OPTION}
# one name in every command for the warehouse folder and for its catalog; the old still read
WAREHOUSE_FLAG, OLD_WAREHOUSE_FLAGS = "--warehouse", ("--root",)
CATALOG_FLAG, OLD_CATALOG_FLAGS = "--catalog", ("--db",)
_WAREHOUSE = {"root": Option(flags=(WAREHOUSE_FLAG,), old_flags=OLD_WAREHOUSE_FLAGS)}
_NAMES = {**_WAREHOUSE, "db": Option(flags=(CATALOG_FLAG,), old_flags=OLD_CATALOG_FLAGS)}
_AS_WRITTEN = Option(show_default=False)  # these helps never said their defaults
# Text options keep argparse's own (no) type, as they were written by hand.
CATALOG_OPTIONS = SettingsOptions(CatalogOptions, typed_text=False, options=_NAMES)
COMPACT_OPTIONS = SettingsOptions(
    CompactOptions, typed_text=False, options={**_KAFKA, **_WAREHOUSE, "group_id": _AS_WRITTEN}
)
BATCH_LIST_OPTIONS = SettingsOptions(BatchListOptions, typed_text=False, options=_WAREHOUSE)
AB_REPORT_OPTIONS = SettingsOptions(
    AbReportOptions,
    typed_text=False,
    options={
        **_NAMES,
        "experiment": Option(required=True),
        "control": _AS_WRITTEN,
        "format": _AS_WRITTEN,
    },
)
FORGET_OPTIONS = SettingsOptions(
    ForgetOptions,
    typed_text=False,
    options={
        **_KAFKA,
        **_NAMES,
        "org": Option(required=True),
    },
)
