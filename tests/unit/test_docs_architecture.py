"""docs/architecture.md names real code: every file it quotes exists, and every function in
its hop tables is defined in the file of its row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PATH = re.compile(r"`((?:manager|workers|proto|loadtest|tests|examples)/[\w./-]*)`")
ROW = re.compile(r"^\| *\d+ *\| *`([^`]+)` *\| *(.+?) *\| .* \|$")
NAME = re.compile(r"`([A-Za-z_][\w.]*)`")


def _definitions(path: Path) -> set[str]:
    """``f`` for top-level functions and classes, ``Class.method`` for methods."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(
                f"{node.name}.{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )
    return names


def hop_rows() -> list[tuple[str, list[str]]]:
    rows = []
    for line in DOC.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows.append((match.group(1), NAME.findall(match.group(2))))
    return rows


def test_every_quoted_path_exists() -> None:
    quoted = set(PATH.findall(DOC.read_text()))
    assert quoted, "the document quotes no file"
    missing = sorted(p for p in quoted if not (ROOT / p).exists())
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"


def test_every_function_of_the_hop_tables_is_defined_in_its_file() -> None:
    rows = hop_rows()
    assert len(rows) >= 10, "the hop tables are gone or no longer parse"
    missing = []
    for file, functions in rows:
        assert functions, f"a hop of {file} names no function"
        defined = _definitions(ROOT / file)
        missing += [f"{file}: {f}" for f in functions if f not in defined]
    assert missing == [], f"hop tables name undefined functions: {missing}"


def test_each_side_walks_through_at_most_five_files() -> None:
    rows = hop_rows()
    for side in ("manager/", "workers/"):
        files = {file for file, _ in rows if file.startswith(side)}
        assert 0 < len(files) <= 5, (side, sorted(files))
