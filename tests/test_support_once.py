"""The tests' helpers for asking Firebreak something and reading what it posted are written once, in
tests/support/messages.py; every other test and helper imports them."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
HOME = TESTS / "support" / "messages.py"
ONCE = {"say", "texts", "text_of", "block_texts", "channel_texts"}


def test_each_message_helper_is_defined_once() -> None:
    found: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in ONCE:
                found.setdefault(node.name, []).append(f"{path.relative_to(TESTS)}:{node.lineno}")
    home = str(HOME.relative_to(TESTS))
    assert {name: [w for w in where if not w.startswith(home)] for name, where in found.items()} == {
        name: [] for name in ONCE
    }
    assert set(found) == ONCE
