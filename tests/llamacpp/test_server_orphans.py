"""A llama-server does not outlive the process that started it: a gateway (or trainer) killed
with SIGKILL, which runs no cleanup, takes its servers with it (the kernel's parent-death
signal, ``llamacpp/server.py``), instead of leaving them holding memory and ports.

Skipped only when the server binary is not built (``python -m llamacpp.build``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infra.kafka_dist import default_cache_root
from infra.ports import free_port_block
from llamacpp.build import server_binary
from models.catalog import fetch, models_dir

BINARY = server_binary(default_cache_root(os.environ))
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    not BINARY.is_file(),
    reason=f"llama-server is not built at {BINARY} (python -m llamacpp.build)",
)


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def test_a_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    gguf = fetch("smollm2-135m", models_dir(), log=lambda _: None)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from llamacpp.server import EngineConfig, LlamaServer\n"
        f"config = EngineConfig(Path({str(BINARY)!r}), Path({str(gguf)!r}), "
        f"{free_port_block(1)}, threads=1, slots=1, context=512)\n"
        f"server = LlamaServer(config, Path({str(tmp_path / 'server.log')!r}))\n"
        "print(server.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert owner.stdout is not None
        server_pid = int(owner.stdout.readline())
        assert _running(server_pid)
        owner.kill()  # SIGKILL: no cleanup runs in the owner
        owner.wait(10)
        deadline = time.monotonic() + 15
        while _running(server_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(server_pid), "llama-server outlived the process that started it"
    finally:
        if owner.poll() is None:
            owner.kill()
        if "server_pid" in locals() and _running(server_pid):
            os.kill(server_pid, 9)
