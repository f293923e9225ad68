"""OpenTelemetry's GenAI semantic conventions, the names rtrl reads and writes, pinned to one version.

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

# The evaluation event
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# OTLP log records name their event in this field (the Logs data model's EventName, with the
# attribute older SDKs set instead).
EVENT_NAME_ATTRIBUTE = "event.name"
