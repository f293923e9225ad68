"""The Apache Kafka jars rtrl runs: resolved once by Maven into a cache outside git.

The versions are pinned in ``infra/kafka/pom.xml``; the cache is keyed by a hash of that
file, so changing a pin fetches again and nothing stale is ever run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

POM = Path(__file__).parent / "kafka" / "pom.xml"


class BrokerSetupError(RuntimeError):
    """Something on this machine (Java, Maven, a port, the disk) stops a broker from starting."""


def default_cache_root(environ: dict[str, str] | os._Environ[str]) -> Path:
    """``$RTRL_CACHE_DIR``, else ``$XDG_CACHE_HOME/rtrl``, else ``~/.cache/rtrl``."""
    if environ.get("RTRL_CACHE_DIR"):
        return Path(environ["RTRL_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rtrl"


def jar_dir(cache_root: Path) -> Path:
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    return cache_root / "kafka" / digest / "libs"


def ensure_jars(cache_root: Path, log=print) -> Path:
    """Return the folder of Kafka's jars, fetching them with Maven the first time."""
    libs = jar_dir(cache_root)
    if (libs / ".complete").exists():
        return libs
    if shutil.which("mvn") is None:
        raise BrokerSetupError(
            "Maven (mvn) is not on PATH and the Kafka jars are not cached yet; "
            "install Maven 3 or set RTRL_CACHE_DIR to a folder that has them"
        )
    libs.parent.mkdir(parents=True, exist_ok=True)
    log(f"fetching Apache Kafka jars with Maven into {libs} (once)")
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise BrokerSetupError("Maven could not fetch the Kafka jars:\n" + "\n".join(tail))
    (staging / ".complete").write_text("ok\n")
    try:
        staging.rename(libs)
    except OSError:  # another process finished first: theirs is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def check_java(min_major: int = 17) -> str:
    """Return the java executable, or say why it cannot run Kafka 4."""
    java = shutil.which("java")
    if java is None:
        raise BrokerSetupError(
            f"Java {min_major}+ is needed to run Kafka 4 and `java` is not on PATH"
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True)
    major = parse_java_major(out.stderr + out.stdout)
    if major is None or major < min_major:
        raise BrokerSetupError(
            f"Kafka 4 needs Java {min_major}+; `java -version` says: {out.stderr.strip()[:200]}"
        )
    return java


def parse_java_major(version_text: str) -> int | None:
    """Major version from ``java -version`` output.

    >>> parse_java_major('openjdk version "17.0.15" 2025-04-15')
    17
    >>> parse_java_major('java version "1.8.0_381"')
    8
    >>> parse_java_major('nothing here') is None
    True
    """
    import re

    m = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major
