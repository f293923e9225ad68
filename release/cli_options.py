"""The options of `rtrl gate evaluate`, `rtrl canary evaluate` and `rtrl canary decide` as
settings classes (``infra.settings_cli``): one field per option, read back into them.

The gate's limits come from ``GateConfig``'s defaults, so that the command line and a round's
gate never disagree on them; the canary's what-ifs are None unless given (the evidence's
recorded settings hold otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from checkpoints.cli_options import DEFAULT_REGISTRY
from infra.cli import watch_options
from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings import DEFAULT_BOOTSTRAP
from infra.settings_cli import Option, SettingsOptions
from release.gate import GateConfig

_GATE = GateConfig()
_REGISTRY_HELP = "registry folder"
_RANGE_END = (
    "override one end of the reward range (rewards that are not reward v1's; a reward outside "
    "the range is an error)"
)


@dataclass(frozen=True)
class GateEvaluateOptions:
    """What `rtrl gate evaluate` judges, and how."""

    evidence: list[Path] = field(default_factory=list)  # recorded without a help: verbatim
    checkpoint: list[str] = field(
        default_factory=list,
        metadata={
            "help": "re-run this registered decision from its stored evidence and settings (repeat)"
        },
    )
    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": _REGISTRY_HELP})
    json: bool = field(default=False, metadata={"help": "one JSON object per line and decision"})
    level: float = field(
        default=_GATE.level,
        metadata={"help": "confidence level over all attempts on one parent (default %(default)s)"},
    )
    attempt: int | None = field(
        default=None,
        metadata={
            "help": "which attempt on its parent the decision is; an evidence file does not say, "
            "so without it attempt 1 is assumed and the output says so (--checkpoint reads the "
            "attempt the round reserved from the record)"
        },
    )
    seed: int = field(default=0, metadata={"help": "bootstrap seed of the percentile bound"})
    reward_config: Path | None = field(
        default=None,
        metadata={
            "help": "the reward configuration (JSON/TOML/YAML) the evidence's rewards were "
            "computed under: the bound shifts rewards by its range (default: reward v1's "
            f"defaults, {_GATE.reward_min}..{_GATE.reward_max})"
        },
    )
    reward_min: float | None = field(default=None, metadata={"help": _RANGE_END})
    reward_max: float | None = field(default=None, metadata={"help": _RANGE_END})
    resamples: int = _GATE.resamples
    weight_cap: float = _GATE.weight_cap
    min_gain: float = _GATE.min_gain
    max_kl: float = _GATE.max_kl
    min_ess_fraction: float = _GATE.min_ess_fraction
    min_examples: int = _GATE.min_examples
    min_users: int = _GATE.min_users

    def config(self, reward_min: float, reward_max: float) -> GateConfig:
        """The gate's settings; ``reward_min`` and ``reward_max`` are the reward configuration's
        range, unless ``--reward-min`` or ``--reward-max`` override an end."""
        return GateConfig(
            level=self.level,
            resamples=self.resamples,
            weight_cap=self.weight_cap,
            min_gain=self.min_gain,
            max_kl=self.max_kl,
            min_ess_fraction=self.min_ess_fraction,
            min_examples=self.min_examples,
            min_users=self.min_users,
            reward_min=reward_min if self.reward_min is None else self.reward_min,
            reward_max=reward_max if self.reward_max is None else self.reward_max,
        )


@dataclass(frozen=True)
class CanaryEvaluateOptions:
    """What `rtrl canary evaluate` re-runs, and the what-ifs over the recorded settings."""

    evidence: list[Path] = field(
        default_factory=list,
        metadata={"help": "canary evidence files to re-run with their recorded settings"},
    )
    checkpoint: list[str] = field(
        default_factory=list,
        metadata={"help": "re-run this canary from its stored evidence and compare (repeat)"},
    )
    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": _REGISTRY_HELP})
    json: bool = field(default=False, metadata={"help": "one JSON object per line and file"})
    margin: float | None = field(default=None, metadata={"help": "what-if: another margin"})
    alpha: float | None = field(default=None, metadata={"help": "what-if: another alpha"})
    min_users: int | None = field(default=None, metadata={"help": "what-if: users per arm"})
    min_exposure: float | None = field(
        default=None, metadata={"help": "what-if: another minimum exposure"}
    )
    deadline: float | None = field(default=None, metadata={"help": "what-if: another deadline"})

    def overrides(self) -> dict[str, float | int | None]:
        """The what-ifs by the canary settings' names (None: the recorded value)."""
        return {
            "margin": self.margin,
            "alpha": self.alpha,
            "min_users": self.min_users,
            "min_exposure_hours": self.min_exposure,
            "deadline_hours": self.deadline,
        }


DECIDE_INTERVAL_S = 30.0


@dataclass(frozen=True)
class CanaryDecideOptions:
    """Which canaries `rtrl canary decide` looks at, where their data is, and what it tells."""

    registry: Path = field(default=Path(DEFAULT_REGISTRY), metadata={"help": _REGISTRY_HELP})
    catalog: Path = field(
        default=Path(".rtrl/warehouse/warehouse.duckdb"),
        metadata={"help": "the warehouse's DuckDB catalog (its rewards mart)"},
    )
    candidate: str | None = field(default=None, metadata={"help": "only this canary"})
    thresholds: Path | None = field(
        default=None, metadata={"help": "monitor thresholds file (default built-in)"}
    )
    json: bool = field(default=False, metadata={"help": "the verdicts as a JSON array"})
    publish: bool = field(
        default=False,
        metadata={"help": "announce the outcome on the checkpoints topic (gateways follow it)"},
    )
    bootstrap: str = DEFAULT_BOOTSTRAP  # its option falls back on the environment's
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})
    watch: bool = False
    interval_s: float = DECIDE_INTERVAL_S
    metrics_port: int | None = field(
        default=None,
        metadata={
            "help": "with --watch: Prometheus metrics on this port (/metrics): passes by "
            "outcome, the last pass's time and canaries judged (infra/watch_metrics.py)"
        },
    )


_REPEATED_ID = Option(action="append", metavar="ID")
# The gate's limits say their defaults the way argparse writes them.
GATE_OPTIONS = SettingsOptions(
    GateEvaluateOptions,
    typed_text=False,
    options={
        "evidence": Option(verbatim=True, type=Path, nargs="+", metavar="FILE"),
        "checkpoint": _REPEATED_ID,
        "level": Option(argparse_format=True),
        "reward_config": Option(metavar="FILE"),
        **{
            name: Option(help="(default %(default)s)", argparse_format=True)
            for name in (
                "resamples",
                "weight_cap",
                "min_gain",
                "max_kl",
                "min_ess_fraction",
                "min_examples",
                "min_users",
            )  # fmt: skip
        },
    },
)
CANARY_EVALUATE_OPTIONS = SettingsOptions(
    CanaryEvaluateOptions,
    typed_text=False,
    options={
        "evidence": Option(nargs="+", metavar="FILE"),
        "checkpoint": _REPEATED_ID,
        "min_exposure": Option(metavar="HOURS"),
        "deadline": Option(metavar="HOURS"),
    },
)
CANARY_DECIDE_OPTIONS = SettingsOptions(
    CanaryDecideOptions,
    typed_text=False,
    options={
        "catalog": Option(show_default=False),
        "bootstrap": BOOTSTRAP_OPTION,
        **watch_options(
            "poll every live canary (a look is taken only when new data landed)",
            DECIDE_INTERVAL_S,
        ),
    },
)
