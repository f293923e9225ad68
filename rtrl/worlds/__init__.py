"""The worlds `rtrl run` and `rtrl simulate` play: the token, code and agent worlds, their
simulated users and how they read an answer, and the simulated editor plugin that emits the
run's first workload."""
