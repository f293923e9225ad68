"""`rtrl broker ...` and `rtrl topics ...`' options as settings classes (``infra.settings_cli``):
one field per option, the cluster's layout and the topics' names read from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infra.broker_config import ClusterLayout
from infra.kafka_options import BOOTSTRAP_OPTION, TOPIC_PREFIX_HELP
from infra.settings import DEFAULT_BOOTSTRAP
from infra.settings_cli import Option, SettingsOptions

DEFAULT_DATA_DIR = Path(".rtrl/kafka")


@dataclass(frozen=True)
class BrokerOptions:
    """A local cluster as `rtrl broker start` takes it; stop and status take its data dir."""

    data_dir: Path = field(
        default=DEFAULT_DATA_DIR, metadata={"help": "where the cluster keeps its logs and state"}
    )
    port: int = field(
        default=9092,
        metadata={"help": "client port of node 0; node i uses port+i, controllers after"},
    )
    nodes: int = field(default=1, metadata={"help": "1 (default) or 3 for replication"})
    foreground: bool = field(
        default=False, metadata={"help": "stay attached; Ctrl-C stops the cluster"}
    )
    timeout: float = field(default=90.0, metadata={"help": "seconds to wait for start-up"})
    secure: bool = field(
        default=False,
        metadata={
            "help": "SASL_SSL only (SCRAM-SHA-512 over mutual TLS) with ACLs: a generated CA, "
            "a user per service and its settings file under DATA_DIR/secure"
        },
    )
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})

    def layout(self) -> ClusterLayout:
        """The cluster to start (checked: its nodes and ports)."""
        return ClusterLayout(
            self.data_dir.resolve(), port=self.port, nodes=self.nodes, secure=self.secure
        )


@dataclass(frozen=True)
class TopicsOptions:
    """Where `rtrl topics apply` declares the topics, and their names' prefix."""

    bootstrap: str = DEFAULT_BOOTSTRAP  # its option falls back on the environment's
    topic_prefix: str = field(default="", metadata={"help": TOPIC_PREFIX_HELP})
    replication: int | None = field(
        default=None,
        metadata={"help": "replication factor for new topics (default: min(3, brokers))"},
    )


# Their helps never said these defaults; text options keep argparse's own (no) type.
START_OPTIONS = SettingsOptions(
    BrokerOptions,
    typed_text=False,
    options={"port": Option(show_default=False), "timeout": Option(show_default=False)},
)
# Stop and status read the rest from the cluster's state file.
DATA_DIR_OPTIONS = SettingsOptions(
    BrokerOptions, omit=("port", "nodes", "foreground", "timeout", "secure", "topic_prefix")
)
APPLY_OPTIONS = SettingsOptions(
    TopicsOptions, typed_text=False, options={"bootstrap": BOOTSTRAP_OPTION}
)
LIST_OPTIONS = SettingsOptions(TopicsOptions, typed_text=False, omit=("bootstrap", "replication"))
