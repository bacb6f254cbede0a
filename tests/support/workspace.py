"""The test workspace's user groups: who the tests' usual people are (policies/roles.yaml's
packaged groups), so seating them works as in a configured workspace.

tests/harness.start_app puts these in a FakeSlack that has no groups yet; a test that wants
someone ineligible uses a person who is in none (``OUTSIDER``), or changes a group itself
(``slack.set_usergroup_users``). Adding a person here is the fix for a test that seats them;
never loosen roles.yaml for a test.
"""

from __future__ import annotations

from fbworld.slack import SlackEmulator

OUTSIDER = "U0OUTSIDER"  # a workspace member in no group: eligible for comms and scribe only

# Who declares and commands the incidents of the tests (the harness's default user, the core
# tests' IC, the people handed the IC seat).
_IC = ["U_IC", "UIC", "UCAROL", "UBOB", "UNEW", "U_NEW"]
# The Ops leads and the people the tests seat as Ops (the IC often seats themselves).
_OPS = ["U0OPS", "UOPS", "U_OPS", "UOTHER", "UCAROL", "UBOB", "U_IC", "UIC"]

GROUPS: dict[str, list[str]] = {
    "ml-ic": _IC,
    "ml-oncall": _OPS,
    "ml-model-owners": ["U0MODEL", "UMODEL", "U_MODEL", "U_IC", "UIC", "UCAROL"],
    "ml-capacity": ["U0CAP", "UCAP", "U_CAP", "U_IC", "UIC", "UCAROL"],
    "ml-security": ["U0SEC", "USEC", "U_SEC", "UCAROL"],
    # The publish seat (with ml-ic and the on-call): who may speak to the stakeholder channel.
    "ml-comms": ["U0COMMS", "UCOMMS", "U_COMMS"],
}


def seed(slack: SlackEmulator) -> None:
    """Give ``slack`` the test workspace's groups, unless the test made its own."""
    if slack.state.usergroups:
        return
    for handle, users in GROUPS.items():
        slack.add_usergroup(handle, users)
