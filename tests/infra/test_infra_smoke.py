from tests.support.kafka import drain, produce_json


def test_session_broker_round_trip(kafka_bootstrap, topic_names):
    produce_json(
        kafka_bootstrap,
        topic_names.events,
        [{"i": i} for i in range(10)],
        key=lambda v: str(v["i"]),
    )
    got = drain(kafka_bootstrap, topic_names.events, expected=10, timeout=30)
    assert sorted(int(m.key()) for m in got) == list(range(10))
