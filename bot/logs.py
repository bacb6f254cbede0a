"""Structured logging. Secrets are redacted before any renderer sees them."""
from __future__ import annotations

import logging
import re
import sys

import structlog

# Slack tokens, bearer tokens and anything that looks like a signing secret.
_SECRETISH = re.compile(r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|Bearer\s+[A-Za-z0-9._~+/=-]+)")
_SECRET_KEYS = {"token", "signing_secret", "authorization", "password", "secret", "app_token", "bot_token"}


def _redact(_logger: object, _name: str, event: dict) -> dict:
    for key, val in list(event.items()):
        if key.lower() in _SECRET_KEYS:
            event[key] = "[redacted]"
        elif isinstance(val, str):
            event[key] = _SECRETISH.sub("[redacted]", val)
    return event


def configure(level: str = "INFO", json: bool = True) -> None:
    logging.basicConfig(stream=sys.stderr, level=level, format="%(message)s")
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
