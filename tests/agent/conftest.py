"""Fixtures of the agent tests (harness, tasks, sandbox): none shared yet."""
