"""What the stream join relies on inside Faust and aiokafka, checked on the installed packages.

``streams.faust_internals`` lists the private names; here each is looked up on the real class
(a method: its parameters too) or on a real instance (an attribute Faust sets in ``__init__``),
the pinned versions are compared with the installed ones and with the versions the list was read
from, and the stream code is read (AST) for private names that the list lacks. Each failure names
the attribute, so that an upgrade says what to look at before it breaks the join at run time.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import importlib
import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from streams.faust_internals import (
    AIOKAFKA_RECORD,
    CHECKED_AGAINST,
    PRIVATE_NAMES,
    RECORD_FIELDS,
    PrivateName,
)

REPO = Path(__file__).resolve().parents[2]
STREAMS = REPO / "streams"
# Packages whose private names count as Faust's: what the join's code reaches into.
FOREIGN = ("faust", "mode", "aiokafka")


def _resolve(owner: str) -> type:
    module, name = owner.split(":")
    return getattr(importlib.import_module(module), name)


def _pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for spec in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?==(\S+)", spec.strip())
        if match:
            pins[match[1].lower()] = match[3]
    return pins


@pytest.mark.parametrize("dist", sorted(CHECKED_AGAINST))
def test_the_pinned_and_installed_versions_are_the_ones_the_list_was_read_from(dist: str) -> None:
    pinned, installed = _pins().get(dist), version(dist)
    assert pinned == CHECKED_AGAINST[dist], (
        f"pyproject.toml pins {dist}=={pinned}; streams/faust_internals.py was checked against "
        f"{CHECKED_AGAINST[dist]}: read the new version's source for every name listed there"
    )
    assert installed == pinned, f"{dist} {installed} is installed, pyproject.toml pins {pinned}"


def _instances() -> dict[str, Any]:
    """A real app's consumer and fetcher, built as the worker builds them (nothing connects)."""
    from faust.transport.consumer import Fetcher

    from infra.settings import faust_options
    from streams.faust_internals import CONSUMER, FETCHER
    from streams.fetch import BatchApp

    async def build() -> dict[str, Any]:
        app = BatchApp("internals-probe", **faust_options("localhost:1"), web_enabled=False)
        consumer = app.consumer
        assert isinstance(consumer, _resolve(CONSUMER))
        return {CONSUMER: consumer, FETCHER: Fetcher(app)}

    return asyncio.run(build())


@pytest.mark.parametrize("private", PRIVATE_NAMES, ids=lambda p: f"{p.owner}.{p.name}")
def test_every_private_name_is_there_with_the_parameters_the_join_passes(
    private: PrivateName,
) -> None:
    cls = _resolve(private.owner)
    where = f"{private.owner}.{private.name}"
    if private.params is None:
        instance = _instances()[private.owner]
        assert hasattr(instance, private.name), f"{where} is gone (an attribute the join uses)"
        return
    method = getattr(cls, private.name, None)
    assert callable(method), f"{where} is gone (a method the join calls or overrides)"
    params = tuple(inspect.signature(method).parameters)[1:]  # after self
    assert params == private.params, f"{where} now takes {params}, the join passes {private.params}"
    if private.called:
        module = inspect.getmodule(method)  # where Faust defines it
        assert module is not None
        source = inspect.getsource(module)
        assert f".{private.name}(" in source, f"Faust no longer calls {where}: the override is dead"


def test_the_batches_carry_aiokafkas_record_fields() -> None:
    fields = {f.name for f in dataclasses.fields(_resolve(AIOKAFKA_RECORD))}
    missing = set(RECORD_FIELDS) - fields
    assert not missing, f"{AIOKAFKA_RECORD} lost {sorted(missing)}, which the join reads"


def _foreign_modules(tree: ast.Module) -> set[str]:
    """Names bound by imports of modules other than Faust's (``os._exit`` is not Faust's)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in FOREIGN:
                    names.add((alias.asname or alias.name).split(".")[0])
    return names


def _derives_from_faust(module: str, name: str) -> bool:
    cls = getattr(importlib.import_module(module), name, None)
    return isinstance(cls, type) and any(
        base.__module__.split(".")[0] in FOREIGN for base in cls.__mro__[1:]
    )


def _own_names(module: str, tree: ast.Module) -> set[str]:
    """Private names ``streams`` defines itself: methods and class attributes of its classes,
    and attributes its ``__init__`` methods set; in a subclass of Faust's, only those Faust's
    class does not have (defining one it has overrides it)."""
    names = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        defined = set()
        for node in cls.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(node.name)
                if node.name == "__init__":
                    defined |= {
                        t.attr
                        for t in ast.walk(node)
                        if isinstance(t, ast.Attribute) and isinstance(t.ctx, ast.Store)
                    }
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                defined.add(node.target.id)
            elif isinstance(node, ast.Assign):
                defined |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        if _derives_from_faust(module, cls.name):
            base = getattr(importlib.import_module(module), cls.name).__mro__[1]
            defined = {name for name in defined if not hasattr(base, name)}
        names |= defined
    return names


def _private_uses(tree: ast.Module) -> set[str]:
    """Every ``x._name`` read or written, and every private method a class defines."""
    skip = _foreign_modules(tree)
    uses = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            if not node.attr.startswith("__") and not (
                isinstance(node.value, ast.Name) and node.value.id in skip
            ):
                uses.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            uses |= {
                n.name
                for n in node.body
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                and n.name.startswith("_")
                and not n.name.startswith("__")
            }
    return uses


def test_the_stream_code_touches_no_private_name_the_list_lacks() -> None:
    listed = {p.name for p in PRIVATE_NAMES}
    trees = {
        f"streams.{path.stem}": ast.parse(path.read_text())
        for path in sorted(STREAMS.glob("*.py"))
        if path.stem not in ("__main__", "faust_internals")
    }
    ours = set().union(*(_own_names(module, tree) for module, tree in trees.items()))
    unlisted = {}
    used: set[str] = set()
    for module, tree in trees.items():
        uses = _private_uses(tree)
        used |= uses
        if extra := uses - ours - listed:
            unlisted[module] = sorted(extra)
    assert not unlisted, (
        f"private names not in streams/faust_internals.py: {unlisted}; if they are Faust's, "
        "list them there"
    )
    assert listed <= used, f"listed but no longer used: {sorted(listed - used)}"
