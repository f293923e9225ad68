"""The live page of a running loop (``rtrl console``): what serves, the gate's and the canary's
decisions, rewards over time and the services' health, read-only."""
