"""Kafka security settings without a broker: where they come from, what each client library is
given, and that no secret reaches a repr, a log line or an error message."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest
from pydantic import ValidationError

from infra import certs
from infra.cli import explain
from infra.kafka_security import (
    CONFIG_ENV,
    KafkaSecurity,
    KafkaSecurityError,
    security_file_text,
    security_from,
)
from infra.settings import (
    aiokafka_options,
    client,
    faust_options,
    manual_commit_consumer,
    reliable_producer,
)

SECRET = "s3cr3t-Pa55word"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, certs.Identity]:
    folder = tmp_path_factory.mktemp("pki")
    ca = certs.make_ca(folder)
    return ca.cert, certs.issue(ca, folder, "sink", server=False)


def _sasl_ssl(pki: tuple[Path, certs.Identity]) -> KafkaSecurity:
    ca, mine = pki
    return KafkaSecurity(
        protocol="SASL_SSL",
        username="sink",
        password=SECRET,
        ca_file=ca,
        cert_file=mine.cert,
        key_file=mine.key,
    )


def test_environment_variables_set_every_field(pki) -> None:
    ca, mine = pki
    security = security_from(
        {
            "RTRL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "RTRL_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
            "RTRL_KAFKA_SASL_USERNAME": "sink",
            "RTRL_KAFKA_SASL_PASSWORD": SECRET,
            "RTRL_KAFKA_SSL_CA": str(ca),
            "RTRL_KAFKA_SSL_CERT": str(mine.cert),
            "RTRL_KAFKA_SSL_KEY": str(mine.key),
        }
    )
    assert (security.protocol, security.sasl_mechanism, security.username) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "sink",
    )
    assert security.password is not None and security.password.get_secret_value() == SECRET
    assert (security.ca_file, security.cert_file, security.key_file) == (ca, mine.cert, mine.key)


def test_a_file_with_relative_paths_and_the_environment_over_it(pki, tmp_path: Path) -> None:
    ca, mine = pki
    for path in (ca, mine.cert, mine.key):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    relative = _sasl_ssl(pki).model_copy(
        update={
            "ca_file": Path(ca.name),
            "cert_file": Path(mine.cert.name),
            "key_file": Path(mine.key.name),
        }
    )
    settings = tmp_path / "sink.toml"
    settings.write_text(security_file_text(relative))
    from_file = security_from({CONFIG_ENV: str(settings)})
    assert from_file.ca_file == tmp_path / ca.name  # from the file's folder, not the cwd
    assert from_file.password is not None and from_file.password.get_secret_value() == SECRET
    overridden = security_from({CONFIG_ENV: str(settings), "RTRL_KAFKA_SASL_USERNAME": "other"})
    assert overridden.username == "other" and overridden.ca_file == from_file.ca_file


def test_incomplete_or_missing_settings_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(KafkaSecurityError, match="does not exist"):
        security_from({CONFIG_ENV: str(tmp_path / "none.toml")})
    with pytest.raises(KafkaSecurityError, match="ca_file"):
        security_from(
            {
                "RTRL_KAFKA_SECURITY_PROTOCOL": "SSL",
                "RTRL_KAFKA_SSL_CA": str(tmp_path / "missing.pem"),
            }
        )
    with pytest.raises(ValidationError, match="needs a username and a password"):
        security_from({"RTRL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"})
    with pytest.raises(ValidationError, match="TLS files are set but the protocol is PLAINTEXT"):
        KafkaSecurity(ca_file=tmp_path / "ca.pem")


def test_no_secret_in_a_repr_a_log_line_or_an_error(pki, caplog) -> None:
    security = _sasl_ssl(pki)
    caplog.set_level(logging.DEBUG)
    logging.getLogger("t").info("kafka: %s / %r / %s", security.describe(), security, security)
    with pytest.raises(ValidationError) as refused:
        KafkaSecurity(protocol="SASL_SSL", username="u", password=SECRET, cert_file="x.pem")
    for text in (
        repr(security),
        str(security),
        security.describe(),
        caplog.text,
        str(refused.value),
        explain(refused.value),
    ):
        assert SECRET not in text and SECRET[-6:] not in text, text


def test_each_library_gets_the_same_identity(pki) -> None:
    security = _sasl_ssl(pki)
    conf = reliable_producer("h:1", security, **{"linger.ms": 1})
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl.username"], conf["sasl.password"]) == ("sink", SECRET)
    assert conf["ssl.certificate.location"] == str(pki[1].cert) and conf["linger.ms"] == 1
    assert conf["acks"] == "all" and conf["enable.idempotence"] is True
    consumer = manual_commit_consumer("h:1", "g", security)
    assert consumer["ssl.ca.location"] == str(pki[0]) and consumer["enable.auto.commit"] is False
    assert client("h:1", KafkaSecurity()) == {
        "bootstrap.servers": "h:1",
        "security.protocol": "PLAINTEXT",
    }
    aio = aiokafka_options("h:1", security=security)
    assert (aio["security_protocol"], aio["sasl_mechanism"], aio["sasl_plain_password"]) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        SECRET,
    )
    assert isinstance(aio["ssl_context"], ssl.SSLContext)
    assert aio["ssl_context"].verify_mode == ssl.CERT_REQUIRED and aio["ssl_context"].check_hostname
    faust = faust_options("a:1,b:2", security=security)
    credentials = faust["broker_credentials"]
    assert faust["broker"] == ["kafka://a:1", "kafka://b:2"]
    assert (credentials.protocol.value, credentials.mechanism.value, credentials.username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "sink",
    )
    assert credentials.ssl_context is not None
