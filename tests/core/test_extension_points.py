"""A Hook is for two or more listeners; a dependency with one implementer is a Port, which exactly one
capability's ``register`` provides (a lower layer calls a higher one without importing it)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bot
import levers
from bot.core.registry import Hook, Port
from bot.runtime import build_registry


def _declared(kind: type[Hook[object]] | type[Port[object]]) -> list:
    found: dict[str, object] = {}
    for pkg in (bot, levers):
        for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if mod.name.endswith("__main__"):
                continue
            for value in vars(importlib.import_module(mod.name)).values():
                if isinstance(value, kind):
                    found[value.name] = value
    return list(found.values())


def test_every_hook_has_two_listeners_in_the_built_app():
    reg = build_registry()
    hooks = _declared(Hook)
    assert hooks, "no Hook found: the scan is broken"
    lonely = sorted(h.name for h in hooks if len(reg.hooked(h)) < 2)
    assert lonely == [], f"hooks with fewer than two listeners (make each a Port, reg.provide): {lonely}"


def test_every_port_is_provided_in_the_built_app():
    reg = build_registry()
    ports = _declared(Port)
    assert ports, "no Port found: the scan is broken"
    assert sorted(p.name for p in ports if reg.provided(p) is None) == []


def test_a_port_has_one_provider():
    reg = build_registry()
    port: Port[object] = Port("one")
    reg.provide(port, print)
    with pytest.raises(RuntimeError, match="provided twice"):
        reg.provide(port, repr)
