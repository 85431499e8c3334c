"""docs/code-map.md names real places: every `file:function` of its road is defined there, in
the room the table says, and the count it states is the table's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (\d+) \| `([\w/]+\.py):([\w.]+)`[^|]*\| ([\w., ]+) \|", re.M)


def _defined(path: Path) -> set[str]:
    """``f``, ``Class`` and ``Class.method`` (and ``f.closure``) names defined in ``path``."""
    names: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(prefix + child.name)
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(path.read_text()), "")
    return names


def test_every_call_of_the_road_is_defined_where_the_map_says():
    text = (ROOT / "docs" / "code-map.md").read_text()
    rows = ROW.findall(text)
    assert [int(number) for number, *_ in rows] == list(range(1, len(rows) + 1))
    for _, file, function, room in rows:
        assert function in _defined(ROOT / file), f"{file}:{function}"
        top = file.split("/")[0]
        where = f"{top}.{file.split('/')[1]}" if top == "tasks" else top
        assert room.split(",")[0].strip() == where, (file, room)
    assert f"\n{len(rows)} calls, " in text
