"""A local certificate authority for a secured local cluster: a CA, the brokers' certificate and
one client certificate per service, made with the ``openssl`` command.

The brokers present a certificate for ``localhost`` and ``127.0.0.1`` (clients verify the host
name), kept in a PKCS#12 keystore because the JVM reads that natively; clients get PEM files,
which librdkafka and Python's ``ssl`` read. Every key is an EC P-256 key: quick to make, and
every client here supports it. Existing files are kept, so a restart keeps its identities.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from infra.kafka_dist import BrokerSetupError

VALID_DAYS = 825  # the longest validity TLS clients accept for a leaf certificate


@dataclass(frozen=True)
class Identity:
    """A certificate and its key, PEM."""

    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise BrokerSetupError("`openssl` is needed to make the secure cluster's certificates")
    done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise BrokerSetupError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}")


def _key(path: Path) -> None:
    if not path.exists():
        _openssl(
            "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)
        )
        path.chmod(0o600)


def make_ca(folder: Path) -> Identity:
    """The CA that signs everything below (self-signed)."""
    ca = Identity(folder / "ca.pem", folder / "ca.key")
    _key(ca.key)
    if not ca.cert.exists():
        _openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            str(ca.key),
            "-out",
            str(ca.cert),
            "-days",
            "3650",
            "-subj",
            "/CN=rtrl local CA",
        )
    return ca


def issue(ca: Identity, folder: Path, name: str, server: bool) -> Identity:
    """A certificate for ``name`` signed by ``ca``: a server one (for ``localhost`` and
    ``127.0.0.1``) or a client one (its common name is the service)."""
    made = Identity(folder / f"{name}.pem", folder / f"{name}.key")
    _key(made.key)
    if made.cert.exists():
        return made
    csr, ext = folder / f"{name}.csr", folder / f"{name}.ext"
    usage = "serverAuth,clientAuth" if server else "clientAuth"
    ext.write_text(
        f"extendedKeyUsage={usage}\n"
        + ("subjectAltName=DNS:localhost,IP:127.0.0.1\n" if server else "")
    )
    _openssl("req", "-new", "-key", str(made.key), "-out", str(csr), "-subj", f"/CN={name}")
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca.cert),
        "-CAkey",
        str(ca.key),
        "-CAcreateserial",
        "-out",
        str(made.cert),
        "-days",
        str(VALID_DAYS),
        "-extfile",
        str(ext),
    )
    csr.unlink()
    ext.unlink()
    return made


def pkcs12(identity: Identity, ca: Identity, path: Path, password: str) -> Path:
    """``identity`` with the CA's chain as a PKCS#12 keystore (the brokers' format)."""
    if not path.exists():
        _openssl(
            "pkcs12",
            "-export",
            "-in",
            str(identity.cert),
            "-inkey",
            str(identity.key),
            "-certfile",
            str(ca.cert),
            "-name",
            "broker",
            "-out",
            str(path),
            "-passout",
            f"pass:{password}",
        )
        path.chmod(0o600)
    return path
