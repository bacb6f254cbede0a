"""Import every command module once so their routes register.

The one place that lists the capabilities: to find where a command is handled,
look up its name in policies/commands.yaml, then the module here.
"""
from __future__ import annotations

import importlib

MODULES = (
    "bot.incidents.flows",  # declare sev assess status mitigated resolved help
    "bot.incidents.flows_roles",  # role handoff accept
    "bot.comms.flows",  # update, reminders/escalation, snooze, update form, handoff nudge, secret flag
    "levers.flows",  # lever, undo, levers (+ open levers in status)
    "bot.approvals.flows",  # approve deny (lever.*/breakglass.* buttons), breakglass, approval timers
)


def load_all() -> None:
    for m in MODULES:
        importlib.import_module(m)
