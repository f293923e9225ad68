"""A secured local cluster's identities: the CA and certificates, a SCRAM user per service, the
client settings file each service runs with, and the ACLs that bound each one.

``prepare`` makes (or finds again) everything under ``<data_dir>/secure``: passwords are random
and kept in ``users.json`` (mode 600), each service gets ``<service>.toml``, a settings file for
``RTRL_KAFKA_CONFIG`` (``infra.kafka_security``), and the operator gets ``admin.toml``. The SCRAM
users exist from the first start on (``--add-scram`` when storage is formatted), so the brokers
can authenticate to each other before any admin call; ``apply_acls`` then grants each service
what ``infra.acls`` lists.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

from infra import certs
from infra.acls import Grant, service_access
from infra.broker_config import ClusterLayout, ListenerSecrets
from infra.kafka_security import KafkaSecurity, read_security_file, security_file_text
from infra.topics import TopicNames

log = logging.getLogger(__name__)

ADMIN_USER = "admin"
SCRAM_MECHANISM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class SecureCluster:
    """What ``prepare`` made: the brokers' secrets and every user's password."""

    folder: Path
    listener: ListenerSecrets
    passwords: dict[str, str]

    def client_file(self, user: str) -> Path:
        """The settings file of ``user`` (a service or ``admin``), for ``RTRL_KAFKA_CONFIG``."""
        return self.folder / f"{user}.toml"

    def security(self, user: str) -> KafkaSecurity:
        return KafkaSecurity(**read_security_file(self.client_file(user)))

    def scram_format_args(self) -> list[str]:
        """``StorageTool format`` arguments that create every SCRAM user with the storage."""
        args = []
        for user, password in sorted(self.passwords.items()):
            args += ["--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]"]
        return args


def users(names: TopicNames) -> list[str]:
    return [ADMIN_USER] + [s.user for s in service_access(names)]


def prepare(layout: ClusterLayout, names: TopicNames) -> SecureCluster:
    """Make the CA, certificates, passwords and client files that are missing; keep the rest."""
    folder = layout.secure_dir
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    kept = folder / "users.json"
    passwords: dict[str, str] = json.loads(kept.read_text()) if kept.exists() else {}
    for user in [*users(names), "controller", "keystore"]:
        passwords.setdefault(user, secrets.token_urlsafe(24))
    kept.write_text(json.dumps(passwords, indent=2))
    kept.chmod(0o600)
    ca = certs.make_ca(folder)
    broker = certs.issue(ca, folder, "broker", server=True)
    keystore = certs.pkcs12(broker, ca, folder / "broker.p12", passwords["keystore"])
    for user in users(names):
        mine = certs.issue(ca, folder, user, server=False)
        security = KafkaSecurity(
            protocol="SASL_SSL",
            sasl_mechanism=SCRAM_MECHANISM,
            username=user,
            password=passwords[user],
            ca_file=Path(ca.cert.name),
            cert_file=Path(mine.cert.name),
            key_file=Path(mine.key.name),
        )
        path = folder / f"{user}.toml"
        path.write_text(security_file_text(security))
        path.chmod(0o600)
    scram = {u: passwords[u] for u in users(names)}
    listener = ListenerSecrets(
        passwords[ADMIN_USER], passwords["controller"], keystore, passwords["keystore"], ca.cert
    )
    return SecureCluster(folder, listener, scram)


def apply_acls(
    bootstrap: str, admin_security: KafkaSecurity, names: TopicNames, timeout_s: float = 30.0
) -> int:
    """Grant each service its ``infra.acls`` rows (creating an existing ACL again is harmless).
    Returns how many ACLs were applied."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    from infra.settings import admin

    def binding(user: str, grant: Grant) -> AclBinding:
        return AclBinding(
            ResourceType[grant.kind],
            grant.name,
            ResourcePatternType[grant.pattern],
            f"User:{user}",
            "*",
            AclOperation[grant.operation],
            AclPermissionType.ALLOW,
        )

    bindings = [binding(s.user, g) for s in service_access(names) for g in s.grants]
    client = AdminClient(admin(bootstrap, admin_security))
    for future in client.create_acls(bindings, request_timeout=timeout_s).values():
        future.result()
    log.info("ACLs: %d rules for %d services", len(bindings), len(service_access(names)))
    return len(bindings)
