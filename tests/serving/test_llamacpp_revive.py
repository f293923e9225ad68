"""A gateway's llama-server killed under load: the fleet starts it again on the same port, and
every request is answered, those it was decoding when it died asked again, so none fails and
each answer is recorded once (``llamacpp.fleet.ServedEngine.revive``,
``serving.backends.llamacpp_engine``).

Skipped only when the server binary is not built (``python -m llamacpp.build``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import openai
import pytest

from models.catalog import fetch, models_dir
from models.loading import LoadedBase, load_base
from tests.support.engine import acme_engine_gateway, needs_engine

pytestmark = needs_engine
RECORDED = 'rtrl_gateway_rollouts_total{outcome="recorded"}'


@pytest.fixture(scope="module")
def base() -> LoadedBase:
    return load_base(fetch("smollm2-135m", models_dir(), log=lambda _: None))


def llama_servers(parent: int) -> list[int]:
    """The pids of the llama-servers ``parent`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"llama-server" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_killed_llama_server_is_started_again_and_no_request_fails(
    base: LoadedBase, tmp_path: Path, kafka_bootstrap: str, topic_names
) -> None:  # noqa: ANN001
    front, key = acme_engine_gateway(tmp_path, base, kafka_bootstrap, topic_names.prefix, 4, 32)
    answered, failed = [], []
    done = threading.Event()

    def client(k: int) -> None:
        ask = openai.OpenAI(base_url=f"{front.url}/v1", api_key=key, max_retries=0, timeout=120)
        n = 0
        while not done.is_set():
            n += 1
            try:
                answer = ask.chat.completions.create(
                    model="default", seed=n, max_tokens=32, user=f"u{k}",
                    messages=[{"role": "user", "content": f"Count to {n + k} in words."}],
                )  # fmt: skip
                answered.append(answer.id)
            except openai.APIError as exc:
                failed.append(repr(exc))

    try:
        (before,) = llama_servers(front.proc.pid)
        clients = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for thread in clients:
            thread.start()
        time.sleep(3)
        at_kill = len(answered)
        os.kill(before, signal.SIGKILL)
        time.sleep(12)
        done.set()
        for thread in clients:
            thread.join(180)
        after = llama_servers(front.proc.pid)
        counts = front.metrics_when(RECORDED, len(answered))
    finally:
        done.set()
        assert front.stop() == 0, front.log.read_text()[-3000:]
    log = front.log.read_text()
    assert failed == [], (failed[:3], log[-3000:])
    assert len(answered) > at_kill + 4, (at_kill, len(answered))  # it served on after the kill
    assert len(after) == 1 and after != [before]
    assert "exited with -9; starting it again" in log and "up again" in log
    assert counts[RECORDED] == len(answered)  # each answer recorded once, retried ones too
    assert counts["rtrl_gateway_engine_restarts_total"] == 1
