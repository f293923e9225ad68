"""What every benchmark script needs: the repo's interpreter, a broker, a table, a JSON file.

Benchmarks run as plain executables (``bench/<name>``); they re-exec under ``.venv`` so a
bare ``python3`` on PATH is enough, start a throwaway single-node broker unless given
``--bootstrap``, and leave their figures in ``bench/out/<name>.json`` for other benchmarks
(and RESULTS.md) to read.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
OUT = REPO / "bench" / "out"


def reexec_in_venv(script: str) -> None:
    """Run ``script`` again under the repo's virtualenv unless we already are in it."""
    python = VENV / "bin" / "python"
    if python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(str(python), [str(python), script, *sys.argv[1:]])
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def quiet_port_block(size: int, host: str = "127.0.0.1") -> int:
    """Free loopback ports outside the ephemeral range (imported late: this module is loaded
    before the re-exec under .venv)."""
    from infra.ports import free_port_block

    return free_port_block(size, host)


@contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    """Yield ``bootstrap`` as given, or start a single node in a temp dir and remove it after."""
    if bootstrap:
        yield bootstrap
        return
    from infra import broker
    from infra.broker_config import ClusterLayout
    from infra.kafka_dist import default_cache_root

    # Under the repo's ignored .rtrl/, not /tmp: a sweep of /tmp must not kill it mid-run.
    parent = REPO / ".rtrl" / "bench"
    parent.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="kafka-", dir=parent))
    layout = ClusterLayout(data, port=quiet_port_block(2), nodes=1)
    try:
        print(f"starting a local broker in {data} ...", file=sys.stderr, flush=True)
        yield broker.start(layout, default_cache_root(os.environ))
    finally:
        broker.stop(layout)
        shutil.rmtree(data, ignore_errors=True)


def machine() -> dict[str, Any]:
    """Enough about the host to tell whether two result files are comparable."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg_1m": os.getloadavg()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def matmul_peak_gflops(device: str = "cpu", n: int = 2048, repeats: int = 8) -> float:
    """The best GFLOP/s of an ``n``-square float32 matmul on torch's threads: the machine's
    compute limit, beside which the model benchmarks print what they reach."""
    import torch

    a, b = (torch.randn(n, n, device=device) for _ in range(2))
    best = float("inf")
    for _ in range(repeats + 1):  # the first one warms up
        started = time.perf_counter()
        torch.mm(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * n**3 / best / 1e9


def write_results(name: str, results: dict[str, Any]) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    tmp.replace(path)
    return path


def format_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table, numbers right-aligned.

    >>> print(format_table(["a", "n"], [["x", 1], ["yy", 22]]))
    a    n
    --  --
    x    1
    yy  22
    """
    cells = [[str(c) for c in header]] + [[_cell(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [all(isinstance(r[i], int | float) for r in rows) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(r, widths, numeric, strict=True)
        ).rstrip()

    rule = line(["-" * w for w in widths])
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
