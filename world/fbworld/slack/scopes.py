"""The bot token scopes each Web API method the emulator serves needs, as Slack's reference gives them.

One table (METHOD_SCOPES) for the emulator, which answers a call without its scope as Slack does,
and for tests/slack/test_scopes.py, which checks the app's manifest asks for every scope of every
method the product calls. A Conversations API method needs the scope of the conversation's kind:
``channels:*`` for a public channel, ``groups:*`` for a private one, ``im:*`` / ``mpim:*`` for
direct messages.

Sources (read for this table):
  * Slack's Web API spec, github.com/slackapi/slack-api-specs web-api/slack_web_openapi_v2.json:
    each method's ``security.slackAuth`` list (conversations.* by conversation kind, pins.add
    pins:write, users.info users:read, users.lookupByEmail users:read.email, files.info files:read,
    usergroups.list / usergroups.users.list usergroups:read, views.* and auth.test none). The spec
    predates granular bot tokens and names the classic scopes; a bot token has the granular ones:
    ``channels:manage`` for ``channels:write`` (docs.slack.dev/reference/scopes/channels.manage,
    "Manage public channels that your Slack app has been added to and create new ones"),
    ``channels:join`` for conversations.join, ``chat:write`` for ``chat:write:bot``
    (docs.slack.dev/reference/scopes/chat.write: chat.postMessage, chat.update,
    chat.postEphemeral, chat.delete), ``files:write`` for ``files:write:user``
    (api.slack.com/scopes/files:write: "files:write replaces both files:write:user and
    files:write:bot").
  * docs.slack.dev/reference/scopes/mpim.write (conversations.create, .invite, .archive),
    docs.slack.dev/reference/scopes/groups.write ("Manage private channels that your Slack app
    has been added to and create new ones"), docs.slack.dev/reference/scopes/channels.history
    (conversations.history; the message.channels event).
  * docs.slack.dev/reference/methods/files.getUploadURLExternal and files.completeUploadExternal,
    docs.slack.dev/messaging/working-with-files ("The files:write scope allows your app to upload
    files"): files:write for both steps (files.upload, retired, had it too).
  * docs.slack.dev/reference/scopes/chat.write.public: posting in a public channel the app is not
    a member of. Without it chat.postMessage answers not_in_channel there, as to any non-member
    (its documented error), not missing_scope.
  * api.slack.com/events/message.groups ("A message was posted to a private channel",
    channel_type "group"): groups:history, the private twin of channels:history, whose page lists
    message.channels among its events.

The refusal is Slack's: HTTP 200, ``{"ok": false, "error": "missing_scope", "needed": <scope>,
"provided": <the token's scopes, comma-separated>}`` (as Slack's answers quoted in
apache/superset#15904 and elementary-data/elementary#705 show).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

PUBLIC, PRIVATE, IM, MPIM = "public", "private", "im", "mpim"
KINDS: Final = (PUBLIC, PRIVATE, IM, MPIM)
ANY = "any"  # a method whose scope does not depend on a conversation's kind

# A method -> {conversation kind (or ANY): the scope}. A kind not listed cannot be used with the
# method; an empty mapping needs no scope.
_WRITE = {PUBLIC: "channels:manage", PRIVATE: "groups:write", IM: "im:write", MPIM: "mpim:write"}
_READ = {PUBLIC: "channels:read", PRIVATE: "groups:read", IM: "im:read", MPIM: "mpim:read"}
_HISTORY = {PUBLIC: "channels:history", PRIVATE: "groups:history", IM: "im:history", MPIM: "mpim:history"}
METHOD_SCOPES: Final[Mapping[str, Mapping[str, str]]] = {
    "auth.test": {},
    "conversations.create": {PUBLIC: "channels:manage", PRIVATE: "groups:write"},  # is_private
    "conversations.invite": {PUBLIC: "channels:manage", PRIVATE: "groups:write", MPIM: "mpim:write"},
    "conversations.archive": _WRITE,
    "conversations.join": {PUBLIC: "channels:join"},
    "conversations.info": _READ,
    "conversations.list": _READ,  # each kind `types` asks for
    "conversations.history": _HISTORY,
    "chat.postMessage": {ANY: "chat:write"},  # + chat:write.public where the app is not a member
    "chat.update": {ANY: "chat:write"},
    "chat.postEphemeral": {ANY: "chat:write"},
    "chat.delete": {ANY: "chat:write"},
    "pins.add": {ANY: "pins:write"},
    "views.open": {},
    "views.update": {},
    "users.info": {ANY: "users:read"},
    "users.lookupByEmail": {ANY: "users:read.email"},
    "files.getUploadURLExternal": {ANY: "files:write"},
    "files.completeUploadExternal": {ANY: "files:write"},
    "files.info": {ANY: "files:read"},
    "usergroups.list": {ANY: "usergroups:read"},
    "usergroups.users.list": {ANY: "usergroups:read"},
}
POST_AS_NONMEMBER: Final = "chat:write.public"  # chat.postMessage in a public channel the app is not in

# The Events API's message events by conversation kind, and the scope each needs (a subscription
# without it is refused when the manifest is saved).
MESSAGE_EVENTS: Final[Mapping[str, str]] = {
    PUBLIC: "message.channels",
    PRIVATE: "message.groups",
    IM: "message.im",
    MPIM: "message.mpim",
}
EVENT_SCOPES: Final[Mapping[str, str]] = {MESSAGE_EVENTS[k]: _HISTORY[k] for k in KINDS}

# Every scope the table names: what an emulator test that exercises every method gives its token.
ALL_SCOPES: Final = frozenset(
    {s for needs in METHOD_SCOPES.values() for s in needs.values()} | {POST_AS_NONMEMBER, "commands"}
)

# The app's manifest in the checkout this package is read from (fbworld is installed editable from
# it, never from a wheel: world/pyproject.toml).
MANIFEST: Final = Path(__file__).resolve().parents[3] / "deploy" / "slack-app-manifest.yaml"


def manifest(path: Path | None = None) -> dict[str, Any]:
    """The app manifest (deploy/slack-app-manifest.yaml unless ``path``), parsed."""
    where = path or MANIFEST
    try:
        # libyaml's loader where PyYAML has it: every emulator start reads the manifest.
        loaded = yaml.load(where.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the Slack app manifest is not at {where}: the Slack emulator gives its token the manifest's "
            "scopes, so it runs from a Firebreak checkout (pip install -e ./world)"
        ) from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{where} is not a Slack app manifest")
    return loaded


def manifest_scopes(path: Path | None = None) -> list[str]:
    """The bot token scopes the manifest asks for, in its order (the order Slack lists them in)."""
    bot = ((manifest(path).get("oauth_config") or {}).get("scopes") or {}).get("bot") or []
    return [str(s) for s in bot]


def manifest_events(path: Path | None = None) -> list[str]:
    """The bot events the manifest subscribes to."""
    subs = (manifest(path).get("settings") or {}).get("event_subscriptions") or {}
    return [str(e) for e in subs.get("bot_events") or []]


def needed(method: str, kind: str | None) -> str | None:
    """The scope ``method`` needs for a conversation of ``kind`` (None: any kind, or not about one);
    None when it needs none. KeyError for a method the table does not have."""
    needs = METHOD_SCOPES[method]
    if not needs:
        return None
    if ANY in needs:
        return needs[ANY]
    if kind is None:  # the kind is not known: the first kind's scope (what Slack names first)
        return next(iter(needs.values()))
    return needs.get(kind)


def scopes_for(method: str, kinds: tuple[str, ...] = KINDS) -> set[str]:
    """Every scope ``method`` needs to be used with conversations of ``kinds``."""
    needs = METHOD_SCOPES[method]
    if ANY in needs:
        return {needs[ANY]}
    return {needs[k] for k in kinds if k in needs}
