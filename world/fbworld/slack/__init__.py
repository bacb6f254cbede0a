"""Test doubles for Slack: a fake Web API server and signed inbound-request helpers."""

from .inbound import (
    SlackSender,
    block_actions_body,
    event_body,
    sign,
    slash_command_body,
    url_verification_body,
    view_submission_body,
)
from .server import UPLOAD_URL, Call, FakeSlack, ResponseUrlPost
from .state import BOT_ID, BOT_USER_ID, TEAM_ID, File, SlackError

__all__ = [
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "UPLOAD_URL",
    "Call",
    "FakeSlack",
    "File",
    "ResponseUrlPost",
    "SlackError",
    "SlackSender",
    "block_actions_body",
    "event_body",
    "sign",
    "slash_command_body",
    "url_verification_body",
    "view_submission_body",
]
