"""Kafka client settings shared by every stage: one place that says how rtrl talks to Kafka.

Every client of the project, whatever its library (confluent-kafka producers, consumers and admin
clients, aiokafka, Faust), takes its configuration from a function here, so that one deployment
setting (TLS, SASL/SCRAM credentials: ``infra.kafka_security``) reaches all of them.

Producers that accept events for the platform are idempotent with ``acks=all``: a send is
acknowledged only once every in-sync replica has it, and retries never write a copy twice.
Every producer places keys with murmur2, as Java, aiokafka and Faust do, so that topics
written by different clients stay co-partitioned. Consumers never auto-commit: each stage
commits an offset only after the work for it is durable.

The security settings are the process's: its service identity, given by whoever runs it (the
``RTRL_KAFKA_*`` environment or the file it names), read once, the first time a client is
configured. A caller that needs another identity in the same process (a test, a benchmark)
passes one explicitly: the argument after the bootstrap (positional, so that no override of a
client setting can be mistaken for it).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Mapping
from typing import Any

from infra.kafka_security import KafkaSecurity, security_from

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"


def resolve_bootstrap(cli_value: str | None, environ: Mapping[str, str]) -> str:
    """``--bootstrap`` wins, then ``KAFKA_BOOTSTRAP_SERVERS``, then the local default.

    >>> resolve_bootstrap(None, {})
    '127.0.0.1:9092'
    >>> resolve_bootstrap(None, {"KAFKA_BOOTSTRAP_SERVERS": "k:1"})
    'k:1'
    >>> resolve_bootstrap("a:2", {"KAFKA_BOOTSTRAP_SERVERS": "k:1"})
    'a:2'
    """
    if cli_value:
        return cli_value
    return environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


@functools.cache
def process_security() -> KafkaSecurity:
    """This process's Kafka identity, from its environment (read once)."""
    return security_from(os.environ)


def confluent_security(security: KafkaSecurity) -> dict[str, Any]:
    """librdkafka's names for the security settings (secrets revealed: for the client only).

    >>> confluent_security(KafkaSecurity())
    {'security.protocol': 'PLAINTEXT'}
    >>> conf = confluent_security(KafkaSecurity(protocol="SASL_PLAINTEXT", username="u",
    ...                                         password="p"))
    >>> conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"]
    ('SCRAM-SHA-512', 'u', 'p')
    """
    conf: dict[str, Any] = {"security.protocol": security.protocol}
    if security.uses_sasl:
        conf["sasl.mechanism"] = security.sasl_mechanism
        conf["sasl.username"] = security.username
        conf["sasl.password"] = _reveal(security.password)
    if security.ca_file is not None:
        conf["ssl.ca.location"] = str(security.ca_file)
    if security.cert_file is not None and security.key_file is not None:
        conf["ssl.certificate.location"] = str(security.cert_file)
        conf["ssl.key.location"] = str(security.key_file)
        if security.key_password is not None:
            conf["ssl.key.password"] = _reveal(security.key_password)
    return conf


def client(
    bootstrap: str, security: KafkaSecurity | None = None, /, **overrides: Any
) -> dict[str, Any]:
    """confluent-kafka settings of any client: the bootstrap and the security, then
    ``overrides`` (a producer, consumer or admin client with its own needs)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        **confluent_security(security or process_security()),
    }
    conf.update(overrides)
    return conf


def reliable_producer(
    bootstrap: str, security: KafkaSecurity | None = None, /, **overrides: Any
) -> dict[str, Any]:
    """confluent-kafka settings for a producer whose acknowledged writes survive a broker loss."""
    conf = client(
        bootstrap,
        security,
        **{
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
            "message.timeout.ms": 30_000,
            # Java, aiokafka and Faust place keys with murmur2; librdkafka's default is CRC32.
            # The same key must land on the same partition whoever writes it (co-partitioned
            # joins).
            "partitioner": "murmur2_random",
        },
    )
    conf.update(overrides)
    return conf


def manual_commit_consumer(
    bootstrap: str, group_id: str, security: KafkaSecurity | None = None, /, **overrides: Any
) -> dict[str, Any]:
    """confluent-kafka settings for a consumer that commits only what its caller made durable."""
    conf = client(
        bootstrap,
        security,
        **{
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        },
    )
    conf.update(overrides)
    return conf


def admin(
    bootstrap: str, security: KafkaSecurity | None = None, /, **overrides: Any
) -> dict[str, Any]:
    """confluent-kafka settings for an AdminClient."""
    return client(bootstrap, security, **overrides)


def ssl_context(security: KafkaSecurity) -> ssl.SSLContext | None:
    """The TLS context of a Python client (aiokafka, Faust), or None without TLS."""
    if not security.uses_tls:
        return None
    context = ssl.create_default_context(cafile=str(security.ca_file) if security.ca_file else None)
    if security.cert_file is not None and security.key_file is not None:
        context.load_cert_chain(
            str(security.cert_file),
            str(security.key_file),
            _reveal(security.key_password) if security.key_password else None,
        )
    return context


def aiokafka_options(bootstrap: str, *, security: KafkaSecurity | None = None) -> dict[str, Any]:
    """Keyword arguments of an aiokafka producer, consumer or admin client.

    >>> aiokafka_options("h:1", security=KafkaSecurity())
    {'bootstrap_servers': 'h:1', 'security_protocol': 'PLAINTEXT'}
    """
    security = security or process_security()
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "security_protocol": security.protocol,
    }
    if security.uses_sasl:
        options["sasl_mechanism"] = security.sasl_mechanism
        options["sasl_plain_username"] = security.username
        options["sasl_plain_password"] = _reveal(security.password)
    context = ssl_context(security)
    if context is not None:
        options["ssl_context"] = context
    return options


def faust_options(bootstrap: str, *, security: KafkaSecurity | None = None) -> dict[str, Any]:
    """The ``broker`` and ``broker_credentials`` arguments of a ``faust.App``.

    >>> faust_options("a:1,b:2", security=KafkaSecurity())
    {'broker': ['kafka://a:1', 'kafka://b:2'], 'broker_credentials': None}
    """
    import faust

    security = security or process_security()
    credentials: Any = None
    context = ssl_context(security)
    if security.uses_sasl:
        credentials = faust.SASLCredentials(
            username=security.username,
            password=_reveal(security.password),
            ssl_context=context,
            mechanism=security.sasl_mechanism,
        )
    elif context is not None:
        credentials = faust.SSLCredentials(context)
    return {
        "broker": [f"kafka://{host}" for host in bootstrap.split(",")],
        "broker_credentials": credentials,
    }


def _reveal(secret: Any) -> str | None:
    return None if secret is None else secret.get_secret_value()
