"""The chat port's text codec: how the domain names people and channels, and how a person's words
are made safe to repost (shown as typed, never re-parsed into a ping or a link).

The port's text is the markup the chat sends and shows (Slack's mrkdwn: a typed ``&``, ``<``, ``>``
arrive as ``&amp;``, ``&lt;``, ``&gt;``; @channel arrives as ``<!channel>``, a group ping as
``<!subteam^S1|@oncall>``, a link as ``<https://x|label>``). This module is the only place outside
the platform's adapter that spells that markup: the domain names a person with ``person(user_id)``,
a channel with ``channel_ref``, parses a typed mention with ``person_of`` and renders the people in
stored text with ``name_people``. The Slack adapter posts the text as it is; another platform's
adapter would translate this markup, people included, in one place. Stored text (an update, a
cause) is kept as the chat sent it, in this markup; who did what is stored as user ids.

Posted back verbatim, the markup is parsed again and pings the channel. ``quote`` is applied
to every piece of user text Firebreak reposts; ``visible`` cleans what is stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Bidirectional embeddings/overrides (U+202A-U+202E) and isolates (U+2066-U+2069) reorder what
# follows them (U+202E then "gpj.exe" reads "exe.jpg"); zero-width characters hide inside words and names.
_INVISIBLE = re.compile("[\u200b-\u200d\u2060\ufeff\u202a-\u202e\u2066-\u2069]")
# The three entities Slack's escaping produces, decoded in one pass so "&amp;lt;" (a typed
# "&lt;") becomes "&lt;" and not "<".
_ENTITY = re.compile(r"&(amp|lt|gt);")
_DECODED = {"amp": "&", "lt": "<", "gt": ">"}
# A mention of one person as the chat sends it: <@U123> or <@U123|alex> (any id Firebreak itself
# writes, so text it made and then quotes again keeps its mentions).
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9_]{1,20})(?:\|[^<>]*)?>")
# A person picked as a command's argument: an id as the workspace issues them (no ``_``).
_TYPED_MENTION = re.compile(r"<@([UW][A-Z0-9]{1,20})(?:\|[^>]*)?>")
# A ping of everyone present in a channel: the one crowd ping Firebreak itself sends (an update
# reminder when nobody holds the seat).
HERE = "<!here>"


def person(user_id: str) -> str:
    """A person named in text the chat shows: it renders as their name and notifies them
    (``<@U123>`` on Slack). The domain never spells the mention markup itself."""
    return f"<@{user_id}>"


def channel_ref(channel_id: str) -> str:
    """A channel named in text the chat shows: it renders as a link to the channel (``<#C123>``)."""
    return f"<#{channel_id}>"


def person_of(word: str) -> str | None:
    """The user id a typed mention names (``<@U123>`` or ``<@U123|alex>``, as the chat sends a
    person picked in the composer), or None when ``word`` is not exactly one mention."""
    m = _TYPED_MENTION.fullmatch(word.strip())
    return m.group(1) if m else None


def name_people(text: str, name: Callable[[str], str]) -> str:
    """``text`` with every person it mentions written as ``name(user_id)`` (``@U123`` in a Markdown
    document, a display name in a terminal)."""
    return _USER_MENTION.sub(lambda m: name(m.group(1)), text)


# Markup that names no words (a ping, a mention, a channel link), and a link, which keeps its label.
_PING = re.compile(r"<[!@#][^<>]*>")
_LINK = re.compile(r"<([^<>|]*)\|([^<>]*)>|<([^<>]*)>")


def words(text: str) -> str:
    """Chat text as the words it shows: pings, mentions and channel links dropped, a link kept as
    its label, entities decoded once, invisible characters dropped (a title made into a channel
    name reads no "lt-channel-gt")."""
    text = _LINK.sub(lambda m: f" {m.group(2) or m.group(1) or m.group(3)} ", _PING.sub(" ", text))
    return visible(unescape(text))


def visible(text: str) -> str:
    """``text`` without bidirectional controls and zero-width characters."""
    return _INVISIBLE.sub("", text)


def unescape(text: str) -> str:
    """Slack's three entities decoded, once."""
    return _ENTITY.sub(lambda m: _DECODED[m.group(1)], text)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def quote(text: str) -> str:
    """A person's text made inert for reposting: it reads as they typed it and pings nobody.

    Every markup token is shown literally: ``<!channel>``, ``<!here>``, ``<!everyone>``,
    ``<!subteam^…>`` (group pings), ``<!date^…>``, ``<#C…>`` channel links and ``<https://…|label>``
    links (so a label can never hide where a link goes). The chat's entities are decoded once
    and ``&``, ``<``, ``>`` escaped again, so a typed ``&lt;`` stays ``&lt;`` on screen rather than
    ``&amp;lt;``. Bidirectional controls and zero-width characters are dropped.

    One token stays active: a mention of a single person, ``<@U123>`` (written without its
    ``|label``). It notifies one named person, not a crowd, and an update such as "<@U123> is
    rolling back" should reach the person it names; the mass pings are what the chat's own
    mention rules make dangerous. Only a mention as the chat sent it counts: text typed as
    ``&lt;@U123&gt;`` stays literal.

    Idempotent: quoting the output again changes nothing.
    """
    text = visible(text)
    out: list[str] = []
    at = 0
    for m in _USER_MENTION.finditer(text):
        out.append(_escape(unescape(text[at : m.start()])))
        out.append(person(m.group(1)))
        at = m.end()
    out.append(_escape(unescape(text[at:])))
    return "".join(out)


# Control characters but newline and tab: a terminal escape or a NUL in cluster data shows as nothing
# or rewrites what is around it.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def literal(text: str) -> str:
    """Text from outside the chat (cluster data: names, annotations, labels, an API path) made
    inert: ``&``, ``<``, ``>`` escaped, so nothing in it pings (``<!channel>``), mentions
    (``<@U1>``) or links; bidirectional, zero-width and control characters (but newline and tab)
    dropped. Unlike ``quote`` nothing is decoded first: this text never came from the chat, so a
    ``&lt;`` in an annotation is shown as typed, and no mention stays active."""
    return _escape(_CONTROL.sub("", visible(text)))


def inert(text: str, mentions: tuple[str, ...] = ()) -> str:
    """Text that mixes Firebreak's own words with cluster data (a lever's effect, its verdict, the API
    server's error), made inert for chat the way ``literal`` makes cluster data inert, but idempotent:
    Slack's three entities are decoded once first, so a part some code already escaped (``quote``,
    ``literal``) is not escaped twice and shown as ``&amp;lt;``. No mention stays active but one of
    ``mentions``, the user ids Firebreak itself names in the text (the requester, the approver): a
    cluster string that spells ``<@U123>`` for someone else shows as text."""
    out = _escape(unescape(_CONTROL.sub("", visible(text))))
    for user in mentions:
        out = out.replace(_escape(person(user)), person(user))
    return out


def code(text: str, limit: int | None = None) -> str:
    """Cluster data as an inline code span it cannot leave: on one line (newlines and runs of
    space become one space), ``literal``, and no backtick to close the span early; cut to
    ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return "`" + (literal(flat).replace("`", "'") or " ") + "`"


def code_block(text: str, limit: int | None = None) -> str:
    """Cluster data (a plan, a pre-state, a kubectl line) as a fenced block it cannot leave: lines
    kept, ``literal``, every backtick shown as ``'`` (a ``` inside, or one beside the closing
    fence, would end the block and let the rest render as markup); cut to ``limit`` characters."""
    body = text if limit is None or len(text) <= limit else text[: limit - 1] + "…"
    return "```" + (literal(body).replace("`", "'") or " ") + "```"
