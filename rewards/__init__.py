"""rewards stage: reward spec v1 as one pure function, and what stands on it.

``function.compute_record`` turns the events of one interaction into one ``record.RewardRecord``
under a versioned ``config.RewardConfig``; the stream and the batch ``replay`` both call it.
``backfill`` compares two reward versions, ``monitors`` watches behaviour rates per checkpoint,
``workload`` generates realistic events for tests and benchmarks.
"""
