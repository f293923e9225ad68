"""Running the TypeScript SDK from the Python tests: its folder, npm, and a Node emitter process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SDK_TS = REPO / "ingest" / "sdk-ts"
EMITTER = REPO / "tests" / "fixtures" / "sdk_ts_emitter.mjs"


def npm(*args: str, cwd: Path = SDK_TS, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def node(
    *args: str, cwd: Path = SDK_TS, timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, input=stdin
    )


class NodeEmitter:
    """``tests/fixtures/sdk_ts_emitter.mjs`` in a child process: it emits ``n`` events at
    start (``self.started``: the ids it chose, the statuses), then answers one command a line."""

    def __init__(
        self, url: str, key: str, spool: Path | None, prefix: str, n: int, batch: int = 50
    ) -> None:
        self.proc = subprocess.Popen(
            [
                "node",
                str(EMITTER),
                url,
                key,
                str(spool) if spool else "-",
                prefix,
                str(n),
                str(batch),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.started = self._answer()

    def command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the emitter exited with {self.proc.wait(10)}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
