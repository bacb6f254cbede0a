"""Who is typing: `@alice`-style names mapped to Slack-like user ids, both ways."""

from __future__ import annotations

import re

_ID = re.compile(r"^[UW][A-Z0-9]{1,20}$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,20}$", re.IGNORECASE)
# `@alice` in typed text, the way Slack's "escape users" turns it into `<@UALICE|alice>`.
_MENTION = re.compile(r"(?<![<\w@])@([A-Za-z0-9][A-Za-z0-9._-]{0,20})")


_SPELLED = re.compile(r"<@([UW][A-Z0-9]{1,20})\|([^>]+)>")

# The demo workspace's user groups (the packaged policies/roles.yaml names them), so every seat can
# be filled with no setup. `you` (the console's default user) is in all of them; @mallory in none,
# to see a refusal: `/incident role ops @mallory`.
DEMO_GROUPS: dict[str, tuple[str, ...]] = {
    "ml-ic": ("you", "alice", "carol", "erin"),
    "ml-oncall": ("you", "alice", "bob", "erin"),
    "ml-model-owners": ("you", "carol", "dave"),
    "ml-capacity": ("you", "bob", "dave"),
    "ml-security": ("you", "carol"),
    "ml-comms": ("you", "alice", "dave"),  # the publish seat: who speaks to stakeholders
}


class Directory:
    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def resolve(self, who: str) -> str | None:
        """A user id for `U2`, `@alice` or `alice`; None when it is neither."""
        who = who.strip().lstrip("@")
        if _ID.match(who):
            return who
        if not _NAME.match(who):
            return None
        uid = "U" + re.sub(r"[^A-Z0-9]", "", who.upper())[:20]
        self._names.setdefault(uid, who.lower())
        return uid

    def learn(self, text: str) -> None:
        """Names Slack spells out in mentions (`<@UBOB|bob>`), so @UBOB shows as @bob from then on."""
        for uid, name in _SPELLED.findall(text):
            if _NAME.match(name):
                self._names.setdefault(uid, name.lower())

    def name(self, uid: str) -> str:
        return self._names.get(uid, uid)

    def mentions(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            uid = self.resolve(m.group(1))
            return f"<@{uid}|{self.name(uid)}>" if uid else m.group(0)

        return _MENTION.sub(sub, text)
