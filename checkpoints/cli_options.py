"""`rtrl checkpoints init|rollback|announce|list`'s options as settings classes
(``infra.settings_cli``), and the registry's default folder every command shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings import DEFAULT_BOOTSTRAP
from infra.settings_cli import Option, SettingsOptions

DEFAULT_REGISTRY = ".rtrl/checkpoints"
_PUBLISH_HELP = (
    "announce on the checkpoints topic every registered checkpoint it does not hold yet (this "
    "one, and any a crash left unannounced)"
)


@dataclass(frozen=True, kw_only=True)
class InitOptions:
    """A base model registered as a lineage's first checkpoint."""

    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": "registry folder"})
    id: str = field(metadata={"help": "its checkpoint id, e.g. smol-0000"})
    model: str = field(
        metadata={
            "help": "a known model (smollm2-135m, tiny; fetched into the cache if needed) or a "
            "local path: a Hugging Face model directory or a .gguf file"
        }
    )
    publish: bool = field(default=False, metadata={"help": _PUBLISH_HELP})
    bootstrap: str = DEFAULT_BOOTSTRAP  # its option falls back on the environment's
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})


@dataclass(frozen=True, kw_only=True)
class RollbackOptions:
    """An earlier checkpoint's weights registered again under a new id, and announced."""

    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": "registry folder"})
    to: str = field(metadata={"help": "the checkpoint whose weights to serve again"})
    id: str | None = field(default=None, metadata={"help": "the new id (default: the next number)"})
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})


@dataclass(frozen=True)
class AnnounceOptions:
    """The registry whose checkpoints the checkpoints topic should hold, and that topic."""

    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": "registry folder"})
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})


@dataclass(frozen=True)
class ListOptions:
    """How `rtrl checkpoints list` shows the registry."""

    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": "registry folder"})
    org: str | None = field(
        default=None,
        metadata={
            "help": "one organisation's view: the shared line and that organisation's own line "
            "(no other organisation's), and which checkpoint serves it now"
        },
    )
    json: bool = field(
        default=False,
        metadata={
            "help": "one JSON object per checkpoint, as the registry stores it, in a JSON array"
        },
    )
    plot: Path | None = field(
        default=None,
        metadata={
            "help": "also draw each checkpoint's measured reward beside the gate's estimate "
            "(.svg, .png or .pdf); needs --catalog"
        },
    )
    catalog: Path | None = field(
        default=None,
        metadata={"help": "the warehouse's DuckDB catalog (its rewards mart) for --plot"},
    )


_KAFKA = {"bootstrap": BOOTSTRAP_OPTION}
INIT_OPTIONS = SettingsOptions(
    InitOptions,
    typed_text=False,
    options={**_KAFKA, "id": Option(required=True), "model": Option(required=True)},
)
ROLLBACK_OPTIONS = SettingsOptions(
    RollbackOptions, typed_text=False, options={**_KAFKA, "to": Option(required=True)}
)
ANNOUNCE_OPTIONS = SettingsOptions(AnnounceOptions, typed_text=False, options=_KAFKA)
LIST_OPTIONS = SettingsOptions(ListOptions)
