"""The project's pinned dependencies split for its two images: the services' and the model's.

The collector, the stream worker, the sink and the batch builder never load a model, so their
image leaves out torch and what only a model needs (a CUDA build of torch alone is gigabytes);
the trainer and the serving side get them in the model image, with a CPU build of torch. Both
lists come from ``pyproject.toml``'s pins, so an image never installs versions the project did
not test together.

    python docker/requirements.py services   # one requirement a line, for pip install -r
    python docker/requirements.py model
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

MODEL_PACKAGES = frozenset(
    {
        "torch",
        "accelerate",
        "safetensors",
        "transformers",
        "huggingface-hub",
        "tokenizers",
        "gguf",
        "peft",
        "sentencepiece",
        "llguidance",
    }
)
"""What only the trainer and the serving side import: model code and its formats."""

CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def name_of(requirement: str) -> str:
    """The normalised project name of a requirement.

    >>> name_of("aiokafka[lz4]==0.14.0"), name_of("Huggingface_Hub==1.0")
    ('aiokafka', 'huggingface-hub')
    """
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    if found is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", found.group(0)).lower()


def split(dependencies: list[str]) -> tuple[list[str], list[str]]:
    """(services, model): every dependency in exactly one of them.

    >>> split(["torch==2.1", "fastapi==1", "peft==0.1"])
    (['fastapi==1'], ['torch==2.1', 'peft==0.1'])
    """
    services = [d for d in dependencies if name_of(d) not in MODEL_PACKAGES]
    model = [d for d in dependencies if name_of(d) in MODEL_PACKAGES]
    return services, model


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("services", "model"):
        print("usage: requirements.py services|model", file=sys.stderr)
        return 2
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    services, model = split(tomllib.loads(pyproject.read_text())["project"]["dependencies"])
    print("\n".join(services if argv[0] == "services" else model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
