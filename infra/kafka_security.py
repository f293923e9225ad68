"""How a process authenticates to Kafka: one typed record, read from ``RTRL_KAFKA_*`` or a file.

A deployment hands each service its own identity (a SCRAM user, and with mutual TLS a client
certificate); nothing between ``main`` and the Kafka client should have to carry it. So the
record is read from the process's environment, optionally from a TOML file that
``RTRL_KAFKA_CONFIG`` names (a secret in a mounted file rather than in the environment), and the
environment wins over the file field by field. Secrets are ``SecretStr``: they print as
``**********`` in a repr, a log line or a validation error, and only the client configuration
functions (``infra.settings``) reveal them, to the client itself.

This module is pure: it reads the mapping and the file it is given, and opens no connection.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

CONFIG_ENV = "RTRL_KAFKA_CONFIG"
"""A TOML file of :class:`KafkaSecurity`'s fields (relative paths: from the file's folder)."""

ENV_FIELDS = {
    "RTRL_KAFKA_SECURITY_PROTOCOL": "protocol",
    "RTRL_KAFKA_SASL_MECHANISM": "sasl_mechanism",
    "RTRL_KAFKA_SASL_USERNAME": "username",
    "RTRL_KAFKA_SASL_PASSWORD": "password",
    "RTRL_KAFKA_SSL_CA": "ca_file",
    "RTRL_KAFKA_SSL_CERT": "cert_file",
    "RTRL_KAFKA_SSL_KEY": "key_file",
    "RTRL_KAFKA_SSL_KEY_PASSWORD": "key_password",
}
"""Each environment variable and the field it sets."""

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]


class KafkaSecurityError(ValueError):
    """The security settings are incomplete or name a file that is not there."""


class KafkaSecurity(BaseModel):
    """The security half of a Kafka client's configuration (the other half is the bootstrap).

    >>> KafkaSecurity().protocol
    'PLAINTEXT'
    >>> s = KafkaSecurity(protocol="SASL_PLAINTEXT", username="collector", password="hunter2")
    >>> "hunter2" in repr(s) or "hunter2" in s.describe()
    False
    >>> s.describe()
    "SASL_PLAINTEXT as user 'collector' (SCRAM-SHA-512)"
    >>> KafkaSecurity(protocol="SASL_SSL")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for KafkaSecurity
      Value error, SASL_SSL needs a username and a password ...
    """

    # A validation error must not quote its input: the input holds the password.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism = "SCRAM-SHA-512"
    username: str | None = None
    password: SecretStr | None = None
    ca_file: Path | None = None
    """The CA that signed the brokers' certificates (the system's CAs when unset)."""
    cert_file: Path | None = None
    """This client's certificate, PEM, for brokers that require mutual TLS."""
    key_file: Path | None = None
    """Its private key, PEM."""
    key_password: SecretStr | None = None

    @model_validator(mode="after")
    def _complete(self) -> KafkaSecurity:
        if self.uses_sasl and not (self.username and self.password is not None):
            raise ValueError(
                f"{self.protocol} needs a username and a password "
                "(RTRL_KAFKA_SASL_USERNAME, RTRL_KAFKA_SASL_PASSWORD)"
            )
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError(
                "a client certificate needs its key and a key its certificate "
                "(RTRL_KAFKA_SSL_CERT, RTRL_KAFKA_SSL_KEY)"
            )
        if not self.uses_tls and (self.ca_file or self.cert_file):
            raise ValueError(
                f"TLS files are set but the protocol is {self.protocol}; use SSL or SASL_SSL"
            )
        return self

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def principal(self) -> str:
        """Who the broker will take this client for, in words (for messages, never secret)."""
        if self.uses_sasl:
            return f"user {self.username!r}"
        if self.cert_file is not None:
            return f"the holder of {self.cert_file.name}"
        return "an anonymous client"

    def describe(self) -> str:
        """One line for a start-up log: the protocol and who, never a secret."""
        text: str = self.protocol
        if self.uses_sasl:
            text += f" as {self.principal} ({self.sasl_mechanism})"
        if self.cert_file is not None:
            text += f", client certificate {self.cert_file}"
        return text

    def check_files(self) -> None:
        """Raise KafkaSecurityError naming the first TLS file that does not exist.

        A client library reports a missing file as a handshake failure much later; a service
        should refuse to start with the file's name instead.
        """
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise KafkaSecurityError(f"{name} {path} does not exist")


def security_from(environ: Mapping[str, str]) -> KafkaSecurity:
    """The settings of a process: the file ``RTRL_KAFKA_CONFIG`` names, then ``RTRL_KAFKA_*``.

    >>> security_from({}).protocol
    'PLAINTEXT'
    >>> security_from({"RTRL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    ...                "RTRL_KAFKA_SASL_USERNAME": "sink",
    ...                "RTRL_KAFKA_SASL_PASSWORD": "p"}).describe()
    "SASL_SSL as user 'sink' (SCRAM-SHA-512)"
    """
    fields: dict[str, Any] = {}
    config_file = environ.get(CONFIG_ENV)
    if config_file:
        fields.update(read_security_file(Path(config_file)))
    for env, field in ENV_FIELDS.items():
        if environ.get(env):
            fields[field] = environ[env]
    security = KafkaSecurity(**fields)
    security.check_files()
    return security


def read_security_file(path: Path) -> dict[str, Any]:
    """The fields of a TOML security file; relative file paths are taken from its folder."""
    try:
        fields = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise KafkaSecurityError(f"{CONFIG_ENV} names {path}, which does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise KafkaSecurityError(f"{path} is not TOML: {exc}") from None
    for name in ("ca_file", "cert_file", "key_file"):
        if isinstance(fields.get(name), str):
            fields[name] = path.parent / fields[name]
    return fields


def security_file_text(security: KafkaSecurity) -> str:
    """A TOML file that :func:`read_security_file` reads back as ``security`` (secrets included:
    it is for a file only its service may read).

    >>> text = security_file_text(KafkaSecurity(protocol="SASL_PLAINTEXT", username="u",
    ...                                         password="p"))
    >>> KafkaSecurity(**tomllib.loads(text)).username
    'u'
    """
    lines = []
    for name, value in security.model_dump().items():
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        lines.append(f"{name} = {_toml_string(str(value))}")
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
