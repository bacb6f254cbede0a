"""Slack, emulated: one Web API emulator (SlackEmulator; FakeSlack adds opt-in fault injection)
and the requests Slack sends the app, signed by slack_sdk (inbound) or as Socket Mode envelopes
(socket_mode)."""

from .faults import FakeSlack
from .inbound import (
    SlackSender,
    block_actions_body,
    event_body,
    sign,
    signature,
    slash_command_body,
    url_verification_body,
    view_submission_body,
)
from .server import UPLOAD_URL, Call, Event, ResponseUrlPost, SlackEmulator
from .socket_mode import Ack, SocketMode, SocketSender
from .state import BOT_ID, BOT_USER_ID, TEAM_ID, File, SlackError, UserGroup

__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "UPLOAD_URL",
    "Ack",
    "Call",
    "Event",
    "FakeSlack",
    "File",
    "ResponseUrlPost",
    "SlackEmulator",
    "SlackError",
    "SlackSender",
    "SocketMode",
    "SocketSender",
    "UserGroup",
    "block_actions_body",
    "event_body",
    "sign",
    "signature",
    "slash_command_body",
    "url_verification_body",
    "view_submission_body",
]
