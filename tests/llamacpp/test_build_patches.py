"""The patches of ``llamacpp/patches`` reach the tree the server is built from: applied to a copy
of the pristine tree, once (applying again changes nothing), again from the pristine tree when a
patch changes (so a file a former patch changed is restored, and touched so that the incremental
build recompiles it), and a patch that does not apply exactly fails the build. The binary's name
changes with the patches' content."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamacpp.build import EngineBuildError, patch_files, patched_source, patches_digest

OLD = "int grammar_first = 0;\n"


def _tree(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "server").mkdir(parents=True)
    (src / "server" / "a.cpp").write_text("// a\n" + OLD + "// end\n")
    (src / "server" / "b.cpp").write_text("// b\nint x = 1;\n")
    (src / "server" / "c.cpp").write_text("// c\n")
    for path in (src / "server").iterdir():
        os.utime(path, (1_000_000, 1_000_000))  # old, as an extracted tree's files are
    return src


def _patch(tmp_path: Path, name: str, file: str, old: str, new: str) -> Path:
    lines = (tmp_path / "src" / "server" / file).read_text().splitlines(keepends=True)
    body = "".join(("-" if line == old else " ") + line for line in lines)
    body = body.replace("-" + old, "-" + old + "+" + new)
    count = len(lines)
    patch = tmp_path / "patches" / name
    patch.parent.mkdir(exist_ok=True)
    patch.write_text(f"--- a/server/{file}\n+++ b/server/{file}\n"
                     f"@@ -1,{count} +1,{count} @@\n{body}")  # fmt: skip
    return patch


def test_patches_apply_once_and_a_changed_patch_rebuilds_what_it_touched(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    first = [_patch(tmp_path, "one.patch", "a.cpp", OLD, "int grammar_first = 1;\n")]
    tree = patched_source(tmp_path, src, lambda _: None, first)
    assert "grammar_first = 1" in (tree / "server" / "a.cpp").read_text()
    assert "grammar_first = 0" in (src / "server" / "a.cpp").read_text()  # pristine kept
    before = {p.name: p.stat().st_mtime_ns for p in (tree / "server").iterdir()}
    assert patched_source(tmp_path, src, lambda _: None, first) == tree  # again: a no-op
    assert {p.name: p.stat().st_mtime_ns for p in (tree / "server").iterdir()} == before

    second = [_patch(tmp_path, "two.patch", "b.cpp", "int x = 1;\n", "int x = 2;\n")]
    assert patches_digest(second) != patches_digest(first)
    patched_source(tmp_path, src, lambda _: None, second)
    assert "grammar_first = 0" in (tree / "server" / "a.cpp").read_text()  # restored
    assert "x = 2" in (tree / "server" / "b.cpp").read_text()
    after = {p.name: p.stat().st_mtime_ns for p in (tree / "server").iterdir()}
    assert after["c.cpp"] == before["c.cpp"]  # the same content: not recompiled
    assert after["a.cpp"] > before["a.cpp"] and after["b.cpp"] > before["b.cpp"]  # recompiled


def test_a_patch_that_does_not_apply_fails_the_build(tmp_path: Path) -> None:
    src = _tree(tmp_path)
    stale = _patch(tmp_path, "stale.patch", "a.cpp", OLD, "int grammar_first = 1;\n")
    stale.write_text(stale.read_text().replace("// end", "// not there"))
    with pytest.raises(EngineBuildError, match="patch stale.patch"):
        patched_source(tmp_path, src, lambda _: None, [stale])


def test_the_shipped_patch_samples_grammar_first() -> None:
    (patch,) = (p for p in patch_files() if p.name == "grammar-first.patch")
    assert "/*grammar_first=*/true" in patch.read_text()
    assert len(patches_digest()) == 64
