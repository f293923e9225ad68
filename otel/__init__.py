"""rtrl's rewards in the team's own observability tool: each reward exported over OTLP as a
``gen_ai.evaluation.result`` event."""
