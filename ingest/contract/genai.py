"""OpenTelemetry's GenAI semantic conventions: the names rtrl reads and writes, one version.

The collector's OTLP intake maps spans and log events carrying these names onto events-v1, and
the reward exporter writes each reward as a ``gen_ai.evaluation.result`` event with them. Both
name the same version so a team can tell which conventions a payload was read against
(``docs/contracts/otlp-v1.md``). The GenAI conventions are marked "development": a later version
may rename attributes, which is why the version is pinned here and not read from a library.
"""

SEMCONV_VERSION = "1.38.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# Spans of a model call
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
USER_ID = "user.id"
TOOL_NAME = "gen_ai.tool.name"
MODEL_CALL_OPERATIONS = ("chat", "text_completion", "generate_content")
"""The ``gen_ai.operation.name`` values of a call to a model (the others: agents, tools,
embeddings)."""

# The evaluation event
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# OTLP log records name their event in this field (the Logs data model's EventName, with the
# attribute older SDKs set instead).
EVENT_NAME_ATTRIBUTE = "event.name"

# rtrl's own names on OTLP (docs/contracts/otlp-v1.md): an outcome is a log event named
# ``rtrl.`` + its events-v1 type; a payload field ``f`` travels as the attribute ``rtrl.f``
# (the tool's name as ``gen_ai.tool.name``).
RTRL_EVENT_PREFIX = "rtrl."
RTRL_ATTRIBUTE_PREFIX = "rtrl."
RTRL_INTERACTION_ID = "rtrl.interaction.id"
"""The gateway's ``X-Rtrl-Interaction-Id`` answer header, copied onto a span or a log event."""
RTRL_CHECKPOINT_ID = "rtrl.checkpoint.id"
"""The gateway's ``X-Rtrl-Checkpoint-Id`` answer header."""
RTRL_EXPERIMENT = "rtrl.experiment"
"""The gateway's ``X-Rtrl-Experiment`` answer header, ``name:arm``."""
RTRL_PRIVACY_MODE = "rtrl.privacy_mode"
RTRL_EVENT_ID = "rtrl.event.id"
"""An emitter's own event id, kept across its retries (else one is derived from the record)."""
