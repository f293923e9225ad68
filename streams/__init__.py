"""The stream stage: `rtrl stream worker` joins ``telemetry.events`` into ``rewards``.

Guarantee: at-least-once delivery with an idempotent downstream. A record may be published more
than once after a crash, but a given ``(interaction_id, revision)`` always carries the same
content, revisions of an interaction are 0..n without gaps, and the latest revision per
``interaction_id`` equals what the batch replay computes from the same events. Layout:
``state`` and ``clock`` (pure rules), ``processor`` (one partition's state machine, pure),
``intake`` (validation, DLQ), ``join`` (the durable order of effects), ``outbox`` (the one
producer and its wait), ``tablestore`` (the table's store and changelog), ``fetch`` (Faust's
consumer, batch at a time), ``app`` (Faust wiring), ``worker`` and ``cli`` (process and command
line), ``worker_options`` (the command line's options as one settings class).
"""
