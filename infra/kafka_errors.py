"""Kafka's refusals in one sentence a person can act on: who was refused what, and why.

librdkafka reports an ACL refusal as ``Broker: Topic authorization failed`` and a bad password as
a failed SASL handshake, neither naming the user; a service that hits one should say which
identity it ran as and what it tried, so that the fix (an ACL, a credential) is plain.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from infra.kafka_security import KafkaSecurity

REFUSED_BY_ACL = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "consumer group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
}
"""Error codes of an ACL refusal, and the kind of resource each is about."""

REFUSED_CREDENTIALS = {KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION}


class KafkaRefused(Exception):
    """Kafka refused this process's identity something: the message is the whole story."""


def is_refusal(code: int) -> bool:
    """True for an error that retrying cannot cure: an ACL or the credentials refused.

    >>> is_refusal(KafkaError.TOPIC_AUTHORIZATION_FAILED), is_refusal(KafkaError._TRANSPORT)
    (True, False)
    """
    return code in REFUSED_BY_ACL or code in REFUSED_CREDENTIALS


def refusal_sentence(code: int, security: KafkaSecurity, action: str, resource: str) -> str:
    """What Kafka refused, in one sentence.

    >>> s = KafkaSecurity(protocol="SASL_PLAINTEXT", username="collector", password="p")
    >>> refusal_sentence(KafkaError.TOPIC_AUTHORIZATION_FAILED, s, "read", "rewards")
    "Kafka refuses user 'collector' to read topic rewards: no ACL allows it."
    >>> refusal_sentence(KafkaError.CLUSTER_AUTHORIZATION_FAILED, s, "produce to", "")
    "Kafka refuses user 'collector' to produce to the cluster: no ACL allows it."
    >>> refusal_sentence(KafkaError.SASL_AUTHENTICATION_FAILED, s, "read", "rewards")
    "Kafka refuses the credentials of user 'collector' (SASL_PLAINTEXT): check its password."
    """
    if code in REFUSED_CREDENTIALS:
        return (
            f"Kafka refuses the credentials of {security.principal} ({security.protocol}): "
            "check its password."
        )
    kind = REFUSED_BY_ACL.get(code, "resource")
    if kind == "cluster":  # the cluster has no name worth saying
        return f"Kafka refuses {security.principal} to {action} the cluster: no ACL allows it."
    return f"Kafka refuses {security.principal} to {action} {kind} {resource}: no ACL allows it."
