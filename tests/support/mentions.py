"""What the fake Slack received, read the way Slack would parse it: the tokens that ping or link.

Slack parses ``<…>`` in every text it is sent (message ``text``, each Block Kit text, a
response_url reply): ``<!channel>``/``<!here>``/``<!everyone>``/``<!subteam^…>``/``<!date^…>``
notify or render, ``<https://…|label>`` and ``<mailto:…>`` link, ``<#C…|x>`` links a channel.
Firebreak itself writes only ``<@U…>`` (one person) and ``<#C…>`` for a real channel it names;
its usage text's placeholders (``<text>``, ``<@user>``) carry no ``!``, scheme, ``#`` or ``|``.
"""

from __future__ import annotations

import re

from fbworld.slack import FakeSlack
from tests.support.messages import texts

# Methods whose arguments Slack renders as message or view text.
RENDERED = ("chat.postMessage", "chat.update", "chat.postEphemeral", "views.open", "views.update")
POSTS = ("chat.postMessage", "chat.update")
_TOKEN = re.compile(r"<([^<>]*)>")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
INVISIBLE = re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069]")


def active(text: str, channels: set[str]) -> list[str]:
    """The tokens in ``text`` that Slack would turn into a ping, a link or a rendered date."""
    found = []
    for m in _TOKEN.finditer(text):
        body = m.group(1)
        if body.startswith("#") and body[1:] in channels:
            continue  # a channel Firebreak named itself
        if body.startswith(("!", "#")) or _SCHEME.match(body) or "|" in body:
            found.append(m.group(0))
    return found


def received(slack: FakeSlack, calls_from: int = 0, replies_from: int = 0, methods=RENDERED) -> list[str]:
    """The texts of what Firebreak sent since the given indexes (Web API calls, response_url replies)."""
    out = [t for c in slack.calls[calls_from:] if c.method in methods for t in texts(c.args)]
    if methods is RENDERED:
        out += [t for r in slack.responses[replies_from:] for t in texts(r.body)]
    return out


def pings(slack: FakeSlack, calls_from: int = 0, replies_from: int = 0) -> list[str]:
    """Every active token in what Firebreak sent since the given indexes."""
    channels = set(slack.state.channels)
    return [tok for t in received(slack, calls_from, replies_from) for tok in active(t, channels)]
