"""The chat port: what the domain may ask of a chat platform, in its own words.

The domain and levers speak to ``Chat`` with plain view models (``views``); the
Slack surface (bot/slack) is one implementation and the only place Block Kit,
action ids and modal wiring exist.
"""

from bot.chat.port import Chat, ChatError, UserGroup
from bot.chat.text import HERE, channel_ref, name_people, person, person_of, quote, unescape, visible, words
from bot.chat.views import (
    Button,
    Buttons,
    Card,
    Confirm,
    Context,
    FieldError,
    Fields,
    Form,
    Header,
    Press,
    Section,
    TextField,
)

__all__ = [
    "HERE",
    "Button",
    "Buttons",
    "Card",
    "Chat",
    "ChatError",
    "Confirm",
    "Context",
    "FieldError",
    "Fields",
    "Form",
    "Header",
    "Press",
    "Section",
    "TextField",
    "UserGroup",
    "channel_ref",
    "name_people",
    "person",
    "person_of",
    "quote",
    "unescape",
    "visible",
    "words",
]
