"""Test data for the warehouse: real reward records from the project's own workload generator.

``records_and_events`` groups a generated workload by interaction and calls the one reward
function, as a replay would; ``land`` writes records and events (``land_messages``: any messages,
headers and tombstones included) through the sink's own encoder and store (the same code path as a
flush, without a broker).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson

from rewards.config import RewardConfig
from rewards.function import compute_record
from rewards.workload import generate_workload
from warehouse.encode import Message, encode
from warehouse.layout import join, part_name
from warehouse.store import Store


def records_and_events(n_interactions: int, seed: int = 0,
                       **workload: Any) -> tuple[list[dict], list[dict]]:  # fmt: skip
    """(reward record JSON dicts, events) of a generated workload."""
    events = generate_workload(n_interactions, seed=seed, **workload)
    by_interaction: dict[str, list[dict]] = defaultdict(list)
    for event in events:
        by_interaction[event["interaction_id"]].append(event)
    config = RewardConfig()
    records = [compute_record(evs, config).to_json_dict() for evs in by_interaction.values()]
    return records, events


def land(store: Store, dataset: str, values: list[dict], partition: int = 0,
         first_offset: int = 0, key: str = "interaction_id") -> None:  # fmt: skip
    """Write ``values`` as if the sink had consumed them from one partition."""
    messages = [
        Message(first_offset + i, str(v.get(key, "")).encode(), orjson.dumps(v), 1_700_000_000_000)
        for i, v in enumerate(values)
    ]
    land_messages(store, dataset, messages, partition)


def land_messages(store: Store, dataset: str, messages: list[Message], partition: int = 0) -> None:
    """Write Kafka messages as they are (headers, tombstones) as if the sink had consumed them."""
    if not messages:
        return
    name = part_name(partition, messages[0].offset, messages[-1].offset)
    for folder, frame in encode(dataset, partition, messages).items():
        store.write_parquet(join(folder, name), frame)
