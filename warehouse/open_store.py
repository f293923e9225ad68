"""The warehouse a command names: ``--warehouse``, else ``$RTRL_WAREHOUSE``, else the default
folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.cli_options import DEFAULT_ROOT, ROOT_ENV

if TYPE_CHECKING:
    from warehouse.store import Store


def open_store(root: str | None, *, must_exist: bool = True) -> Store:
    """The warehouse at ``root`` (--warehouse), else the environment's, else the default folder;
    every command but the sink (which makes it) needs one already."""
    from warehouse.store import Store

    store = Store(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    if must_exist and store.local and not Path(store.root).is_dir():
        raise FileNotFoundError(
            f"no warehouse at {store.root} (the sink makes one: `rtrl "
            "warehouse sink`; or give --warehouse)"
        )
    return store
