#!/usr/bin/env python3
"""How long llama.cpp's server takes to build from cold: the unity build the project ships
against the plain one (a compilation unit per source), in one run, on the same patched tree.

The build is the longest step of a fresh machine's setup, and CI starts on a fresh machine every
time, so its minutes are spent on every CI run. Each variant is configured and built in an empty
directory of its own with ``llamacpp.build``'s options and jobs (the plain one without
``-DCMAKE_UNITY_BUILD=ON``); wall seconds and the CPU seconds of the compilers are printed side
by side, with ninja's step count.

    python bench/llamacpp_build.py [--jobs 2] [--variants unity plain]

Needs cmake, ninja and a C++ compiler, and the source in the cache (``python -m
llamacpp.build`` puts it there). Figures to stdout and ``bench/out/llamacpp_build.json``.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, format_table, machine, write_results  # noqa: E402

sys.path.insert(0, str(REPO))
from infra.kafka_dist import default_cache_root  # noqa: E402
from llamacpp.build import (  # noqa: E402
    JOBS,
    TARGET,
    UNITY_BUILD,
    cmake_options,
    compile_server,
    engine_dir,
    ensure_source,
    patched_source,
)


def options(variant: str) -> list[str]:
    """The configure options of a variant: the shipped ones, or those without the unity flag."""
    shipped = list(cmake_options())
    return shipped if variant == "unity" else [o for o in shipped if o != UNITY_BUILD]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(src: Path, variant: str, jobs: int) -> dict[str, Any]:
    """Configure and build ``TARGET`` from ``src`` in a fresh directory; its seconds."""
    with tempfile.TemporaryDirectory(prefix=f"llama-build-{variant}-") as tmp:
        out = Path(tmp)
        began, cpu = time.monotonic(), children_cpu_s()
        binary = compile_server(src, out, options(variant), jobs)
        wall, cpu = time.monotonic() - began, children_cpu_s() - cpu
        steps = sum(1 for line in (out / ".ninja_log").read_text().splitlines()
                    if not line.startswith("#"))  # fmt: skip
        assert binary.is_file()
    return {"variant": variant, "steps": steps, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=JOBS, help="parallel compile jobs (the setup's)")
    ap.add_argument("--variants", nargs="+", choices=("unity", "plain"), default=["unity", "plain"])
    args = ap.parse_args()

    cache = default_cache_root(os.environ)
    src = patched_source(engine_dir(cache), ensure_source(cache), lambda m: print(m, flush=True))
    rows = []
    for variant in args.variants:
        print(f"building {TARGET}, {variant} ...", file=sys.stderr, flush=True)
        rows.append(build(src, variant, args.jobs))
    table = [[r["variant"], r["steps"], r["wall_s"], r["cpu_s"]] for r in rows]
    print(format_table(["variant", "build steps", "wall (s)", "CPU (s)"], table))
    if {r["variant"] for r in rows} == {"unity", "plain"}:
        by = {r["variant"]: r for r in rows}
        print(f"unity / plain: wall {by['unity']['wall_s'] / by['plain']['wall_s']:.2f}, "
              f"CPU {by['unity']['cpu_s'] / by['plain']['cpu_s']:.2f}")  # fmt: skip
    path = write_results("llamacpp_build", {"machine": machine(), "jobs": args.jobs, "runs": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
