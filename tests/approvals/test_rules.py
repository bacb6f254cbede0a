"""Pure rules: the window boundary, seats, scope grammar and the breakglass command shape."""

from __future__ import annotations

import pytest

from bot.approvals import rules, scope
from bot.approvals.commands import Breakglass
from bot.core.grammar import UsageError
from bot.runtime import build_registry
from levers.catalogue import LEVERS


def test_window_is_half_open():
    assert rules.within(99.0, 100.0)
    assert not rules.within(100.0, 100.0)
    assert not rules.within(101.0, 100.0)


def test_required_seats_grow_at_sev1_only():
    assert rules.required_seats(["ic"], ["security"], 2) == ["ic"]
    assert rules.required_seats(["ic"], ["security"], 1) == ["ic", "security"]
    assert rules.required_seats(["ic"], ["ic"], 1) == ["ic"]
    assert rules.seats_text(["ic", "security"]) == "the IC and the Security lead"


@pytest.mark.parametrize(
    "text,covers,not_covers",
    [
        ("kueue-hold", [("kueue-hold", "us-east-3")], [("kueue-hold", "fleet"), ("keda-pause", "us-east-3")]),
        ("kueue-hold, keda-pause", [("keda-pause", "eu-west-1")], [("route-weight", "us-east-3")]),
        (
            "cell:us-east-3",
            [("node-quarantine", "us-east-3")],
            [("node-quarantine", "us-east-4"), ("route-weight", "fleet")],
        ),
        ("fleet", [("route-weight", "fleet")], [("route-weight", "us-east-3")]),
    ],
)
def test_scope_covers(text, covers, not_covers):
    s = scope.parse(text, list(LEVERS))
    assert all(s.covers(*c) for c in covers)
    assert not any(s.covers(*c) for c in not_covers)
    assert scope.parse(s.text(), list(LEVERS)) == s


@pytest.mark.parametrize("text", ["cluster-admin", "kueue-hold,iam-widen", "cell:US EAST", ",", "*"])
def test_scope_outside_the_catalogue_is_refused_with_the_list(text):
    with pytest.raises(scope.ScopeError) as e:
        scope.parse(text, list(LEVERS))
    assert "kueue-hold" in str(e.value) or "cell name" in str(e.value)


def test_breakglass_grammar():
    parse = build_registry().parse
    cmd = parse("breakglass kueue-hold,keda-pause 30 ops lead asleep, registry down")
    assert isinstance(cmd, Breakglass)
    assert (cmd.scope, cmd.minutes, cmd.reason, cmd.revoke) == (
        "kueue-hold,keda-pause",
        30,
        "ops lead asleep, registry down",
        None,
    )
    assert parse("breakglass revoke bg-3").revoke == "BG-3"
    for bad, says in [
        ("breakglass kueue-hold", "minutes"),
        ("breakglass kueue-hold soon x", "not a number"),
        ("breakglass kueue-hold 30", "reason"),
        ("breakglass revoke", "revoke BG-3"),
        ("breakglass kueue-hold 0 why", "at least 1"),
        ("breakglass", "Missing <scope>"),
    ]:
        with pytest.raises(UsageError) as e:
            parse(bad)
        assert says in e.value.render(), (bad, e.value.render())
