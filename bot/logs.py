"""Structured logging. Secrets are redacted after formatting, so tracebacks are covered too.

One line per event, JSON (``firebreak serve``'s default) or a console format. The
JSON lines carry ``timestamp``, ``level``, ``event`` and whatever is bound: a request's
lines carry ``request_id`` and ``incident_id`` (bound by the listener, the lane and the
executor, bot/core/dispatch.py; the code binds ``incident``, renamed here), a timer's
``job``, ``job_key`` and ``incident_id``. The standard-library loggers of Bolt, slack_sdk
and aiohttp come out in the same format, with the same bound ids.

Redaction: structlog events go through ``_redact`` (secret-named keys dropped, every
string and nested value scrubbed, any other object scrubbed as its text); the
standard-library records go through ``_RedactFilter`` (message and traceback) and then
``_redact``. Both use the audit log's patterns (bot.redact) plus the Slack token shapes.

``LOG_FORMAT=json`` or ``LOG_FORMAT=console`` overrides the caller's default format.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from bot.redact import compile_pattern, scrub, scrub_text

_SECRET_KEYS = {"token", "signing_secret", "authorization", "password", "secret", "app_token", "bot_token"}
# Logged headers and reprs show tokens without a "Bearer" in front; catch the Slack shapes too.
_SLACKISH = compile_pattern(r"\b(?:xox[abposr]|xapp)-[A-Za-z0-9-]+")  # RE2, like every scan
_PLAIN = (bool, int, float, type(None))
FORMATS = {"json": True, "console": False}


def _clean(text: str) -> str:
    return str(_SLACKISH.sub(lambda _m: "[redacted]", scrub_text(text)))


# Keys the processors set (TimeStamper, add_log_level overwrite a caller's), and for a
# standard-library record its logger name and its message (_RedactFilter scrubbed it): not
# scrubbed again, since each scrub is nine regex passes and this runs for every line.
_SET_BY_PROCESSORS = frozenset({"timestamp", "level"})
_SET_FOR_STDLIB = frozenset({"timestamp", "level", "logger", "event"})


def _redact(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    done = _SET_FOR_STDLIB if event.get("_from_structlog") is False else _SET_BY_PROCESSORS
    for key, val in list(event.items()):
        if key.startswith("_") or key in done:  # "_": structlog's bookkeeping (the record), never rendered
            continue
        if key.lower() in _SECRET_KEYS:
            event[key] = "[redacted]"
        elif isinstance(val, str):
            event[key] = _clean(val)
        elif isinstance(val, (dict, list, tuple)):
            event[key] = scrub(val)
        elif not isinstance(val, _PLAIN):
            event[key] = _clean(str(val))  # an exception, a path, a model: as its scrubbed text
    return event


def _ids(_logger: object, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The code binds ``incident``; the lines say ``incident_id``, beside ``request_id``."""
    if "incident" in event:
        event["incident_id"] = event.pop("incident")
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


class _Handler(logging.StreamHandler):
    """The root handler configure() installs (and replaces when called again)."""


def json_default(default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """JSON or not: LOG_FORMAT when it names a format, else ``default``."""
    value = (os.environ if environ is None else environ).get("LOG_FORMAT", "").strip().lower()
    return FORMATS.get(value, default)


def configure(level: str = "INFO", json: bool = True, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    as_json = json_default(json)
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _ids,
    ]
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    handler = _Handler(stream)
    handler.addFilter(_RedactFilter())  # message and traceback scrubbed before they are formatted
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, _redact],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root.addHandler(handler)
    root.setLevel(level)
    for other in root.handlers:  # e.g. a test's capture handler: scrubbed the same way
        if not any(isinstance(f, _RedactFilter) for f in other.filters):
            other.addFilter(_RedactFilter())
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.format_exc_info,  # before _redact, so the traceback text is redacted too
            _redact,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )


def get(name: str) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name)
