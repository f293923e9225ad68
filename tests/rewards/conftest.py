"""Fixtures of the reward tests: none shared yet; each module builds its own workload."""
