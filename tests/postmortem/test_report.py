"""`firebreak report`: resolved incidents grouped by root-cause class, with counts, median TTD and
TTR and GPU-hours lost per class (bot/postmortem/report.py). Several incidents resolved over two
days on the ManualClock, through their commands; the CLI itself is in test_cli.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.postmortem import report
from bot.postmortem.report import BadDate, Resolved, classes, parse_since, render
from tests.support.ports import free_port
from tests.support.postmortem import D2, HOUR, resolved_incidents
from tests.support.signals import CELL_A, ONCALL_A, TOKEN, policy_dir

# The alert's cell with its on-call, and the cell `declare` names (a cell Firebreak must know).
KNOWN: dict[str, str | None] = {CELL_A: ONCALL_A, "us-east-3": None}


@pytest.fixture
def app_settings(tmp_path: Path) -> dict[str, Any]:
    # Prometheus is down: the alert-opened incident's impact start comes from its startsAt, said so.
    return {
        "alertmanager_token": TOKEN,
        "firebreak_policy_dir": policy_dir(tmp_path, KNOWN),
        "prometheus_url": f"http://127.0.0.1:{free_port()}",
    }


async def test_resolved_incidents_grouped_by_root_cause_class(app):
    ids = await resolved_incidents(app)
    assert ids == ["INC-1", "INC-2", "INC-3", "INC-4"]
    text = await report.report(app.services, None)
    assert text == (
        "# Incidents by root-cause class (all resolved incidents)\n"
        "\n"
        "| root-cause class | incidents | median TTD | median TTR | GPU-hours lost | which |\n"
        "|---|---|---|---|---|---|\n"
        "| driver | 2 | 0h 15m | 1h 45m | 3,000 | INC-1, INC-2 |\n"
        "| network | 1 | 0h 00m | 3h 00m | 1,000 | INC-3 |\n"
        "| unclassified | 1 | 0h 10m | 1h 10m | not recorded | INC-4 |\n"
        "| **all** | 4 | 0h 05m | 1h 45m | 4,000 (3 of 4 recorded) | INC-1, INC-2, INC-3, INC-4 |\n"
        "\n"
        "TTD and TTR run from impact start (see each postmortem: `firebreak postmortem INC-n`). "
        "A class is the `class: <name>` that starts `cause root`.\n"
        "\n"
        "Impact start without Prometheus (unreachable, or PROMETHEUS_URL unset), so from startsAt or the "
        "declaration: INC-4.\n"
    )
    # --since: resolved on or after that day (UTC); INC-1 was resolved the day before.
    since = await report.report(app.services, parse_since("2026-12-01"))
    assert since.startswith("# Incidents by root-cause class (resolved since 2026-12-01)\n")
    assert "| driver | 1 | 0h 30m | 1h 30m | 2,000 | INC-2 |" in since
    assert "INC-1" not in since
    assert await report.report(app.services, parse_since("2027-01-01")) == (
        "# Incidents by root-cause class (resolved since 2027-01-01)\n\nNo resolved incidents.\n"
    )


def test_classes_most_incidents_first_unclassified_last():
    def r(i: int, cls: str, gpu: float | None = None) -> Resolved:
        return Resolved(f"INC-{i}", cls, 60.0 * i, 600.0 * i, gpu, True)

    rows = classes([r(1, "unclassified"), r(2, "network", 10), r(3, "driver"), r(4, "driver", 5), r(5, "network")])
    assert [(c.name, c.incidents) for c in rows] == [
        ("driver", ("INC-3", "INC-4")),
        ("network", ("INC-2", "INC-5")),
        ("unclassified", ("INC-1",)),
        ("all", ("INC-1", "INC-2", "INC-3", "INC-4", "INC-5")),
    ]
    assert (rows[0].median_ttd, rows[0].gpu_hours, rows[0].gpu_recorded) == (210.0, 5, 1)
    assert classes([]) == []
    assert "No resolved incidents." in render([], None)


@pytest.mark.parametrize("bad", ["2026-13-01", "2026-02-30", "yesterday", "2026-1-5", "20261201", ""])
def test_since_must_be_a_real_date(bad):
    with pytest.raises(BadDate, match="is not a date: use YYYY-MM-DD"):
        parse_since(bad)
    assert parse_since("2026-12-01") == D2 - 3 * HOUR - 10 * 60
