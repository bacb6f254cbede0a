"""Structured logging. Secrets are redacted after formatting, so tracebacks are covered too.

structlog events go through ``_redact``; the standard-library loggers of Bolt,
slack_sdk and aiohttp go through ``_RedactFilter`` on the root handler. Both
use the same patterns as the audit log (bot.redact).
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

from bot.redact import scrub, scrub_text

_SECRET_KEYS = {"token", "signing_secret", "authorization", "password", "secret", "app_token", "bot_token"}
# Logged headers and reprs show tokens without a "Bearer" in front; catch the Slack shapes too.
_SLACKISH = re.compile(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]+")


def _clean(text: str) -> str:
    return _SLACKISH.sub("[redacted]", scrub_text(text))


def _redact(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key, val in list(event.items()):
        if key.lower() in _SECRET_KEYS:
            event[key] = "[redacted]"
        elif isinstance(val, str):
            event[key] = _clean(val)
        elif isinstance(val, (dict, list, tuple)):
            event[key] = scrub(val)
    return event


class _RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = _clean(msg), None
        return True


def configure(level: str = "INFO", json: bool = True, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    logging.basicConfig(stream=stream, level=level, format="%(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _RedactFilter) for f in handler.filters):
            handler.addFilter(_RedactFilter())
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,  # first, so the traceback text is redacted too
            _redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
