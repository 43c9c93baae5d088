"""The house's size rules, kept by a test: no module of the scheduler over 400 lines, no class
over 250 (a class past it holds more than one concern; split it by concern, as the queue's
teams/ and checkpoints/ are)."""

from __future__ import annotations

import ast
from pathlib import Path

SCHEDULER = Path(__file__).resolve().parents[2] / "scheduler"


def sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in sorted(SCHEDULER.rglob("*.py"))]


def test_no_module_over_400_lines():
    long = {str(p): n for p, text in sources() if (n := len(text.splitlines())) > 400}
    assert long == {}


def test_no_class_over_250_lines():
    big = {
        f"{p}:{node.name}": size
        for p, text in sources()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ClassDef)
        and (size := (node.end_lineno or node.lineno) - node.lineno + 1) > 250
    }
    assert big == {}
