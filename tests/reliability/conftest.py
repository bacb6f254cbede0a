"""The reliability suite (issue 13, item 4): real `firebreak serve` processes, killed, overloaded and
fed faults, on loopback. It takes minutes, so the default `pytest` run leaves it out; CI runs it as
its own step (`pytest -m reliability`, .ci/run).

Every module here is marked ``reliability`` (``pytestmark``). A run whose ``-m`` does not mention
``reliability`` and that names no path in this directory deselects them; ``-m reliability``, or
naming the directory or a file in it, runs them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _names_this_dir(config: pytest.Config) -> bool:
    base = Path(config.invocation_params.dir)
    for arg in config.args:
        p = (base / arg.split("::", 1)[0]).resolve()
        if p == HERE or HERE in p.parents:
            return True
    return False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "reliability" in (config.option.markexpr or "") or _names_this_dir(config):
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("reliability") is not None else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
