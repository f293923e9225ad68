"""The agent: what a model's text does (``harness``) and the behaviour flags read from it
(``behaviour``), the telemetry an editor plugin sends for it (``telemetry``), the coding tasks
users bring (``tasks``, ``tasks.toml``), and the sandbox that grades the code it writes
(``sandbox``, ``sandbox_runner``)."""
