"""`firebreak postmortem INC-n` and `firebreak report [--since YYYY-MM-DD]` as a person runs them:
`python -m bot …` in a child process, on the same Redis the app wrote (tests/support/core.py run_cli).
That the printed postmortem is byte for byte the file `/incident postmortem` shares is in
test_document.py; here, what the commands print and how they fail (one line, exit 2)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.core import run_cli
from tests.support.ports import free_port
from tests.support.postmortem import resolved_incidents
from tests.support.signals import CELL_A, ONCALL_A, TOKEN, policy_dir

# The alert's cell with its on-call, and the cell `declare` names (a cell Firebreak must know).
KNOWN: dict[str, str | None] = {CELL_A: ONCALL_A, "us-east-3": None}


@pytest.fixture
def app_settings(tmp_path: Path) -> dict[str, Any]:
    return {"alertmanager_token": TOKEN, "firebreak_policy_dir": policy_dir(tmp_path, KNOWN)}


async def cli(*args: str, redis_url: str | None, **env: str) -> Any:
    full = {"REDIS_URL": redis_url, **env} if redis_url else dict(env)
    return await asyncio.to_thread(run_cli, *args, env=full)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


async def test_postmortem_prints_the_markdown(app, redis_url):
    inc = await app.declare("KV cache thrash", sev=3)
    await app.run("cause trigger a bigger context window shipped", channel=inc.channel_id)
    got = await cli("postmortem", "inc-1", redis_url=redis_url)  # the id's case does not matter
    assert got.returncode == 0, got.stderr
    out = got.stdout
    assert out.startswith("# Postmortem: INC-1 KV cache thrash\n\n> **DRAFT**: INC-1 is active, not resolved.")
    assert [line for line in out.splitlines() if line.startswith("## ")] == [
        "## Summary",
        "## What the mitigations cost",
        "## Timeline",
        "## Detection gap",
        "## Trigger and root cause",
        "## Action items",
    ]
    assert "- Trigger: a bigger context window shipped (@U_IC, 2026-11-30 03:10:00 UTC)" in out
    assert "- Impact start: 2026-11-30 03:10:00 UTC, the declaration" in out


async def test_postmortem_refusals_are_one_line_and_exit_2(app, redis_url):
    got = await cli("postmortem", "INC-9", redis_url=redis_url)
    assert (got.returncode, got.stdout, one_line(got.stderr)) == (2, "", "firebreak: INC-9 does not exist")
    got = await cli("postmortem", "9", redis_url=redis_url)
    assert got.returncode == 2 and got.stdout == ""
    assert one_line(got.stderr) == "firebreak: '9' is not an incident id: use INC-<n>, like INC-3"
    got = await cli("postmortem", "INC-1", redis_url=None)
    assert got.returncode == 2 and "REDIS_URL is not set" in one_line(got.stderr)
    got = await cli("postmortem", "INC-1", redis_url=f"redis://127.0.0.1:{free_port()}/0")
    assert got.returncode == 2 and one_line(got.stderr).startswith("firebreak: can't read the incidents from REDIS_URL")


async def test_report_prints_the_table_and_refuses_a_bad_date(app, redis_url):
    await resolved_incidents(app)
    got = await cli("report", redis_url=redis_url, PROMETHEUS_URL=f"http://127.0.0.1:{free_port()}")
    assert got.returncode == 0, got.stderr
    assert "| driver | 2 | 0h 15m | 1h 45m | 3,000 | INC-1, INC-2 |" in got.stdout
    assert "| **all** | 4 |" in got.stdout and "INC-5" not in got.stdout
    got = await cli("report", "--since", "2026-12-01", redis_url=redis_url)
    assert got.returncode == 0, got.stderr
    assert "(resolved since 2026-12-01)" in got.stdout and "INC-1," not in got.stdout
    for bad in ("2026-13-01", "last week"):
        got = await cli("report", "--since", bad, redis_url=redis_url)
        assert (got.returncode, got.stdout) == (2, "")
        assert one_line(got.stderr) == f"firebreak: --since {bad!r} is not a date: use YYYY-MM-DD, like 2026-10-01"
