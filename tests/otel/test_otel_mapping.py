"""A reward record read as a GenAI evaluation and written as an OTLP log record: pure, exact."""

from __future__ import annotations

from ingest.contract import genai
from otel.evaluation import evaluate, skip_reason
from otel.otlp_logs import export_request, plain
from otel.phoenix import annotation, latest_revisions
from tests.support.otel import reward

T_CLOSE_NS = 1_796_117_400_250_000_000  # 2026-12-01T09:30:00.25Z


def attributes(record_attrs: object) -> dict[str, object]:
    return {kv.key: plain(kv.value) for kv in record_attrs}  # type: ignore[attr-defined]


def test_a_scored_reward_is_an_evaluation_with_its_terms() -> None:
    e = evaluate(reward("chatcmpl-1"), "rtrl.reward")
    request = export_request([e], service_name="rtrl", scope_version="1", observed_unix_nano=7)
    (resource_logs,) = request.resource_logs
    assert attributes(resource_logs.resource.attributes) == {"service.name": "rtrl"}
    (scope_logs,) = resource_logs.scope_logs
    assert (scope_logs.scope.name, scope_logs.schema_url) == ("rtrl.otel", genai.SCHEMA_URL)
    (log,) = scope_logs.log_records
    assert log.event_name == "gen_ai.evaluation.result"
    assert (log.time_unix_nano, log.observed_time_unix_nano) == (T_CLOSE_NS, 7)
    assert log.trace_id == b"" and log.span_id == b""  # no reward or rollout carries them
    assert attributes(log.attributes) == {
        "event.name": "gen_ai.evaluation.result",
        "gen_ai.evaluation.name": "rtrl.reward",
        "gen_ai.evaluation.score.value": 0.65,
        "gen_ai.evaluation.score.label": "positive",
        "gen_ai.evaluation.explanation": (
            "reward 0.65 = r_edit 0.75 + r_followup 0 + r_tool 0 + r_clarify 0 + r_latency -0.1; "
            "2 edits (1 accepted, 1 rejected, 0 reverted), 0 tool calls (0 invalid), "
            "0 clarifying questions; reward v1-0123abcd revision 0"
        ),
        "gen_ai.response.id": "chatcmpl-1",
        "rtrl.interaction_id": "chatcmpl-1",
        "rtrl.reward.revision": 0,
        "rtrl.reward.version": "v1-0123abcd",
        "rtrl.checkpoint_id": "ckpt-7",
        "rtrl.reward.r_edit": 0.75,
        "rtrl.reward.r_followup": 0.0,
        "rtrl.reward.r_tool": 0.0,
        "rtrl.reward.r_clarify": 0.0,
        "rtrl.reward.r_latency": -0.1,
    }


def test_labels_follow_the_sign_and_a_censored_reward_has_no_score() -> None:
    assert evaluate(reward("a", reward=-1.5), "r").label == "negative"
    assert evaluate(reward("a", reward=0.0), "r").label == "neutral"
    censored = reward("a", status="censored", censor_reason="no_outcome", reward=None,
                      r_edit=None, r_followup=None, r_tool=None, r_clarify=None,
                      r_latency=None)  # fmt: skip
    e = evaluate(censored, "r")
    assert (e.score, e.label, e.terms) == (None, "censored", ())
    log = export_request([e], service_name="s", scope_version="1", observed_unix_nano=0)
    attrs = attributes(log.resource_logs[0].scope_logs[0].log_records[0].attributes)
    assert "gen_ai.evaluation.score.value" not in attrs
    assert str(attrs["gen_ai.evaluation.explanation"]).startswith("censored (no_outcome)")


def test_a_privacy_mode_record_is_never_exported() -> None:
    private = reward("p", status="censored", censor_reason="privacy_mode", reward=None,
                     user_id=None, dissatisfied=None)  # fmt: skip
    assert skip_reason(private) == "privacy_mode"
    assert skip_reason(reward("a")) is None


def test_phoenix_keeps_the_latest_revision_per_reward_version() -> None:
    r0, r1 = evaluate(reward("a"), "n"), evaluate(reward("a", revision=1, reward=-0.5), "n")
    other = evaluate(reward("b"), "n")
    assert latest_revisions([r0, other, r1]) == [r1, other]
    body = annotation(r1, "00f067aa0ba902b7")
    assert body["span_id"] == "00f067aa0ba902b7" and body["identifier"] == "v1-0123abcd"
    assert body["result"] == {"score": -0.5, "label": "negative", "explanation": r1.explanation}
