"""The packaged policy and the command registry agree: no rule for a command that
does not exist, and every command a person can reach has a rule (timers run as
`system` and need none)."""

import re

from bot.policy import load_policy
from bot.runtime import build_registry

SYSTEM_ONLY = {
    "action_remind",
    "alerts",
    "approval_settle",
    "breakglass_end",
    "escalate",
    "handoff_nudge",
    "lever_settle",
    "remediation_alarm",
    "remind",
}


def test_commands_yaml_matches_the_registry():
    routes = build_registry().routes
    rules = set(load_policy().commands.commands)
    assert rules - set(routes) == set(), "rules for commands Firebreak does not have"
    assert set(routes) - rules == SYSTEM_ONLY
    # System-only commands cannot be typed or pressed.
    assert all(routes[n].spec is None for n in SYSTEM_ONLY)


def test_every_command_name_is_snake_case():
    routes = build_registry().routes
    assert [n for n in routes if not re.fullmatch(r"[a-z]+(_[a-z]+)*", n)] == []
