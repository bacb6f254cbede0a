"""Secrets never reach the logs or the audit log: structlog events, tracebacks,
the standard-library loggers of Bolt/slack_sdk, and policy-defined patterns."""

from __future__ import annotations

import subprocess
import sys

from bot import redact
from tests.support.core import REPO, run_cli

SLACK = "xoxb-1234567890-abcdefghijklmnop"
AWS = "AKIAABCDEFGHIJKLMNOP"

_SNIPPET = f"""
import logging
from bot import logs
logs.configure("INFO", json=True)
log = logs.get("t")
try:
    raise RuntimeError("boom {SLACK} {AWS}")
except RuntimeError:
    log.exception("failed", header="Bearer abcdefghijklmnopqrstuvwxyz012345", nested={{"k": "{SLACK}"}})
logging.getLogger("slack_bolt").warning("payload had %s", "{SLACK}")
try:
    raise ValueError("{AWS}")
except ValueError:
    logging.getLogger("aiohttp.server").exception("handler crashed")
"""


def test_logs_redact_events_tracebacks_and_library_loggers():
    out = subprocess.run([sys.executable, "-c", _SNIPPET], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    err = out.stderr
    assert "boom" in err and "handler crashed" in err and "payload had" in err  # the lines are there…
    assert SLACK not in err and AWS not in err and "abcdefghijklmnopqrstuvwxyz012345" not in err  # …the secrets not
    assert "[redacted Slack token]" in err and "[redacted AWS access key]" in err


def test_a_bad_redis_url_is_one_line_and_exit_2():
    out = run_cli("audit", "verify", env={"REDIS_URL": "localhost:6379"})
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "firebreak: bad configuration REDIS_URL: no scheme (it is not echoed: it may hold a password); "
        "use redis://host:6379/0, rediss://host:6380/0, unix:///path/redis.sock, "
        "redis+sentinel://h1:26379,h2:26379,h3:26379/<master>/<db> "
        "or redis+cluster://h1:6379,h2:6379"
    )


async def test_policy_secret_patterns_are_scrubbed_from_the_audit(app):
    # The app was built with the packaged comms.yaml, whose patterns include Hugging Face tokens.
    hf = "hf_" + "A" * 34
    assert redact.scrub_text(f"token {hf}") == "token [redacted Hugging Face token]"
    await app.services.audit.append("test.note", actor="U1", detail={"text": f"pasted {hf} here"})
    last = [e async for e in app.services.audit.entries()][-1]
    assert hf not in str(last) and "[redacted Hugging Face token]" in last["detail"]["text"]
