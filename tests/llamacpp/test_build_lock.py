"""One build of llama-server at a time per cache: a process that finds another building waits
for that binary instead of building into the same tree (two `rtrl` commands on a fresh
machine). Real
processes and a real ``flock``; the build itself is not run (minutes), a holder that "builds"
by writing the stamped binary stands for it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import llamacpp.build as build
from llamacpp.build import engine_dir, ensure_server, server_binary

HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from llamacpp.build import build_lock, engine_dir, server_binary
    cache = Path(sys.argv[1])
    root = engine_dir(cache)
    root.mkdir(parents=True, exist_ok=True)
    with build_lock(root):
        print("holding", flush=True)
        time.sleep(float(sys.argv[2]))
        binary = server_binary(cache)
        binary.parent.mkdir(parents=True, exist_ok=True)
        binary.write_text("built by the holder")
""")


def test_a_second_caller_waits_for_the_first_build_and_does_not_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    def would_build(*_args: object) -> Path:
        raise AssertionError("a second build started while the first held the lock")

    monkeypatch.setattr(build, "_extract", would_build)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "3"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        said: list[str] = []
        started = time.monotonic()
        binary = ensure_server(tmp_path, log=said.append)
        waited = time.monotonic() - started
    finally:
        holder.wait(timeout=30)
    assert binary == server_binary(tmp_path)
    assert binary.read_text() == "built by the holder"
    assert waited >= 1.5, waited  # it waited for the holder's "build"
    assert any("another process is building" in line for line in said), said


def test_a_killed_builder_lets_the_next_caller_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The lock dies with its holder: a build killed midway blocks no one."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "60"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    holder.kill()
    holder.wait(timeout=30)

    class Building(Exception):
        pass

    def builds(root: Path, _log: object) -> Path:
        assert root == engine_dir(tmp_path)
        raise Building

    monkeypatch.setattr(build, "_extract", builds)
    with pytest.raises(Building):  # it went on to build, within the lock
        ensure_server(tmp_path, log=lambda _line: None)
    assert not server_binary(tmp_path).exists()
