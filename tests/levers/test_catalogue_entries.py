"""A lever is one catalogue entry: it declares its plan, verify, undo, params, RBAC needs and policy
default, and the policy names no lever the catalogue lacks."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from bot.policy.levers import LeverRule
from levers.base import Access, Ctx, Kind, Lever
from levers.catalogue import LEVERS
from levers.plan import Plan

REPO = Path(__file__).resolve().parents[2]
POLICY_FILES = [REPO / "policies" / "levers.yaml", REPO / "deploy" / "base" / "policies" / "levers.yaml"]


def missing(lever: Lever) -> list[str]:
    """What an entry lacks of what every lever must declare."""
    cls = type(lever)
    out = []
    if inspect.isabstract(cls) or not inspect.iscoroutinefunction(getattr(cls, "plan", None)):
        out.append("plan")
    if not inspect.iscoroutinefunction(getattr(cls, "verify", None)):
        out.append("verify")
    if lever.reversible and not callable(getattr(cls, "undo_ops", None)):
        out.append("undo")
    if not lever.reversible and not lever.not_reversible_why:
        out.append("undo (not reversible, but no not_reversible_why)")
    params = getattr(cls, "Params", None)
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        out.append("params")
    elif params.model_fields and not lever.usage:
        out.append("params (usage)")
    needs = getattr(cls, "needs", ())
    if not needs or not all(isinstance(a, Access) for a in needs):
        out.append("needs")
    rule = getattr(cls, "default_rule", None)
    if not isinstance(rule, LeverRule) or not rule.roles:
        out.append("policy default (default_rule)")
    for attr in ("name", "kind", "summary"):
        if not getattr(cls, attr, None):
            out.append(attr)
    return out


@pytest.mark.parametrize("name", list(LEVERS))
def test_each_entry_declares_everything_a_lever_needs(name):
    assert missing(LEVERS[name]) == []


def test_an_entry_lacking_a_declaration_is_caught():
    class Bare(Lever):
        name = "widget-freeze"
        kind = Kind("Widget", "example.com", "v1", "widgets", namespaced=True)
        summary = "freeze a widget"

        async def plan(self, ctx: Ctx, obj: dict[str, Any]) -> Plan:
            raise AssertionError("never planned")

    assert missing(Bare()) == ["needs", "policy default (default_rule)"]

    class NotUndoable(Bare):
        needs = (Access.on(Bare.kind, "get"),)
        default_rule = LeverRule(roles=["ops"])
        reversible = False

    assert missing(NotUndoable()) == ["undo (not reversible, but no not_reversible_why)"]


def test_the_policy_names_only_catalogue_levers_and_agrees_with_their_defaults():
    for path in POLICY_FILES:
        named = (yaml.safe_load(path.read_text()) or {}).get("levers") or {}
        unknown = sorted(set(named) - set(LEVERS))
        assert not unknown, f"{path.relative_to(REPO)} names levers the catalogue lacks: {unknown}"
        for name, rule in named.items():
            assert LeverRule.model_validate(rule) == LEVERS[name].default_rule, (
                f"{path.relative_to(REPO)}: {name} differs from its catalogue default (levers/catalogue)"
            )


def test_a_lever_the_policy_leaves_out_takes_its_default(tmp_path):
    from bot.policy.loader import load_policy
    from levers.base import rule_of

    text = (REPO / "policies" / "levers.yaml").read_text().replace("  kueue-hold-drain:", "  # kueue-hold-drain:")
    d = tmp_path / "policies"
    d.mkdir()
    (d / "levers.yaml").write_text(text)
    pol = load_policy(d).levers
    assert "kueue-hold-drain" not in pol.levers
    rule = rule_of(pol, LEVERS["kueue-hold-drain"])
    assert rule.needs_approval and rule.roles == ["ops"] and rule.why == "HoldAndDrain evicts admitted workloads"
