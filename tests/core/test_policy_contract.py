"""The packaged policy and the command registry agree: no rule for a command that
does not exist, and every command a person can reach has a rule (timers run as
`system` and need none)."""
import re

from bot import commands
from bot.core.registry import ROUTES
from bot.policy import load_policy

SYSTEM_ONLY = {"approval_settle", "breakglass_end", "escalate", "handoff_nudge", "lever_settle", "remind"}


def test_commands_yaml_matches_the_registry():
    commands.load_all()
    rules = set(load_policy().commands.commands)
    assert rules - set(ROUTES) == set(), "rules for commands Firebreak does not have"
    assert set(ROUTES) - rules == SYSTEM_ONLY
    # System-only commands cannot be typed or pressed.
    assert all(ROUTES[n].spec is None for n in SYSTEM_ONLY)


def test_every_command_name_is_snake_case():
    commands.load_all()
    assert [n for n in ROUTES if not re.fullmatch(r"[a-z]+(_[a-z]+)*", n)] == []
