"""``python -m streams``: the same as ``rtrl stream worker``."""

from __future__ import annotations

import argparse
import logging
import sys

from streams.cli import _worker, add_worker_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams", description=__doc__)
    add_worker_args(parser)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return _worker(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
