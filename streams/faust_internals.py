"""The private names of Faust (and of mode, its service library) that the stream join relies on.

``streams.fetch`` replaces the consumer's drain loop and ``streams.tablestore`` writes a table's
local store directly; both reach into Faust's internals, which Faust may rename or reshape in any
release. This is the one list of them, with the versions it was checked against:
``tests/streams/test_faust_internals.py`` fails, naming the attribute, when the pinned or
installed versions differ from these, when a name is gone from the real classes or a private
method's parameters changed, and when the stream code touches a private name not listed here.
"""

from __future__ import annotations

from dataclasses import dataclass

# The distributions whose internals are listed below, at the versions they were read from.
CHECKED_AGAINST = {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}

CONSUMER = "faust.transport.drivers.aiokafka:Consumer"
FETCHER = "faust.transport.consumer:Fetcher"
APP = "faust.app.base:App"
ROCKSDB_STORE = "faust.stores.rocksdb:Store"


@dataclass(frozen=True)
class PrivateName:
    """``owner.name``: an attribute of an instance (``params`` None) or a method whose parameters
    after ``self`` are ``params``. ``called`` is set for a method ``streams`` overrides: Faust's
    own source must still call it, or the override is silently dead."""

    owner: str  # "module:Class"
    name: str
    params: tuple[str, ...] | None = None
    called: bool = False


PRIVATE_NAMES: tuple[PrivateName, ...] = (
    # streams.fetch.BatchConsumer: the drain loop Faust's fetcher runs, replaced.
    PrivateName(CONSUMER, "_drain_messages", ("fetcher",), called=True),
    PrivateName(CONSUMER, "_wait_next_records", ("timeout",)),
    PrivateName(CONSUMER, "_to_message", ("tp", "record")),
    PrivateName(CONSUMER, "_add_gap", ("tp", "offset_from", "offset_to")),
    PrivateName(CONSUMER, "_stopped"),  # mode.Service's stop event
    PrivateName(CONSUMER, "_commit_every"),
    PrivateName(CONSUMER, "_n_acked"),
    PrivateName(CONSUMER, "_buffered_partitions"),
    PrivateName(CONSUMER, "_read_offset"),
    PrivateName(CONSUMER, "_committed_offset"),
    PrivateName(CONSUMER, "_acked"),
    PrivateName(CONSUMER, "_acked_index"),
    PrivateName(CONSUMER, "_waiting_for_ack"),
    PrivateName(FETCHER, "_stopped"),
    # streams.fetch.BatchApp: the consumer it builds, with the app's rebalance callbacks.
    PrivateName(APP, "_new_consumer", (), called=True),
    PrivateName(APP, "_on_partitions_revoked", ("revoked",)),
    PrivateName(APP, "_on_partitions_assigned", ("assigned", "generation_id")),
    # streams.tablestore: one partition's RocksDB database and its visible entries.
    PrivateName(ROCKSDB_STORE, "_db_for_partition", ("partition",)),
    PrivateName(ROCKSDB_STORE, "_visible_items", ("db",)),
)

# The batch path hands the join aiokafka's own records (no Faust message): the fields it reads.
AIOKAFKA_RECORD = "aiokafka.structs:ConsumerRecord"
RECORD_FIELDS = ("topic", "partition", "offset", "key", "value")
