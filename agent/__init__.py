"""The agent: what a model's text does (harness), the coding tasks users bring (tasks), and the
sandbox that grades the code it writes (sandbox)."""
