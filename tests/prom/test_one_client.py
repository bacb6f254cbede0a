"""One Prometheus client: only bot/prom/connect.py talks HTTP to Prometheus (prometheus-api-client
and the requests/urllib3 under it), and only the composition root (bot/runtime.py) builds it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "levers")
HTTP_LIBRARIES = {"prometheus_api_client", "requests", "urllib3"}
IMPLEMENTATION = "bot/prom/connect.py"


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved to the package)."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out |= {base, *(f"{base}.{a.name}" for a in node.names)}
    return out


def product_imports() -> dict[str, set[str]]:
    return {str(p.relative_to(REPO)): imports(p) for top in PRODUCT for p in sorted((REPO / top).rglob("*.py"))}


def test_only_the_one_implementation_imports_prometheus_api_client_or_requests():
    found = {
        path: sorted(m for m in mods if m.split(".")[0] in HTTP_LIBRARIES) for path, mods in product_imports().items()
    }
    users = {path: mods for path, mods in found.items() if mods}
    assert set(users) == {IMPLEMENTATION}, users
    assert {m.split(".")[0] for m in users[IMPLEMENTATION]} == HTTP_LIBRARIES  # the scan sees imports


def test_only_the_runtime_builds_the_client():
    builders = sorted(path for path, mods in product_imports().items() if "bot.prom.connect" in mods)
    assert builders == ["bot/runtime.py"]
