"""The way from a served completion to the ``rollouts`` topic.

- ``build``: a backend's answer as a rollout, or the reason it cannot be one (pure).
- ``recorder``: builds rollouts off the event loop and hands them to Kafka in bursts.
- ``spool``: the disk spool, where a burst waits until Kafka acknowledged it.
"""
