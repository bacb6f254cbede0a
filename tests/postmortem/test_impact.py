"""Impact start, found rather than guessed (bot/postmortem/impact.py): the expression of an alert's
generatorURL, the last continuous run in which it returned any series up to startsAt, and the
earliest of those, the alerts' startsAt and the declaration. Pure parts here; the real
Prometheus and the whole path are in test_document.py."""

from __future__ import annotations

from bot.postmortem.impact import (
    LOOKBACK_S,
    STEP_S,
    Evidence,
    Found,
    earliest,
    evaluate,
    expr_of,
    judge,
    last_run,
    window,
)
from bot.prom import Failed, Matrix, Series, Vector, Why
from bot.signals.models import AlertRecord
from tests.support.harness import T0


def test_the_expression_comes_url_decoded_from_prometheuss_graph_link():
    # Prometheus writes it with Go's url.QueryEscape: spaces as `+`, the rest %-encoded.
    url = "http://prom:9090/graph?g0.expr=sum+by+%28cell%29+%28rate%28x_total%5B5m%5D%29%29+%3E+0.5&g0.tab=1"
    assert expr_of(url) == "sum by (cell) (rate(x_total[5m])) > 0.5"
    assert expr_of("http://prom:9090/graph?g0.expr=up%7Bjob%3D~%22a%7Cb%22%7D+%3D%3D+0") == 'up{job=~"a|b"} == 0'
    assert expr_of("https://grafana.example.com/alerting/grafana/abc/view") is None
    assert expr_of("http://prom:9090/graph?g0.expr=&g0.tab=1") is None
    assert expr_of("") is None
    assert expr_of("http://[::1") is None  # not a URL at all


def test_a_gap_of_more_than_one_step_ends_a_run():
    m = 60.0
    assert last_run([], m) is None
    assert last_run([5 * m], m) == (5 * m, 5 * m)
    # One missed point (a gap of two steps) breaks the run; consecutive points (one step) do not.
    assert last_run([0, m, 2 * m, 4 * m, 5 * m, 6 * m], m) == (4 * m, 6 * m)
    assert last_run([6 * m, 4 * m, 5 * m, 5 * m, 0], m) == (4 * m, 6 * m)  # order and repeats don't matter


def test_the_window_is_the_24_hours_before_startsAt_on_the_steps_grid():
    first, last = window(T0 + 7.5)
    assert last == T0 + STEP_S  # the first point at or after startsAt (T0 sits on the minute)
    assert last - first == LOOKBACK_S + STEP_S
    assert window(T0) == (T0 - LOOKBACK_S - STEP_S, T0)


def _matrix(*runs: tuple[float, float], step: float = STEP_S) -> Matrix:
    pts = [(t, 1.0) for a, b in runs for t in [a + i * step for i in range(int((b - a) // step) + 1)]]
    return Matrix((Series({"cell": "us-east-1"}, tuple(pts)),))


def test_judging_an_answer():
    starts = T0
    first, last = window(starts)
    # True from 01:00 to startsAt, after an earlier run: the last run counts.
    assert judge(_matrix((first, first + 600), (T0 - 7800, last)), starts) == (Found.run, T0 - 7800, last, False)
    # True only until an hour before startsAt: not the alert's condition; reported, not used.
    assert judge(_matrix((T0 - 7800, T0 - 3600)), starts) == (Found.not_true, T0 - 7800, T0 - 3600, False)
    # True through the whole window: it may have begun before it.
    assert judge(_matrix((first, last)), starts) == (Found.run, first, last, True)
    assert judge(Matrix(()), starts) == (Found.no_series, None, None, False)
    assert judge(Vector(()), starts)[0] is Found.no_series
    assert judge(Failed(Why.UNREACHABLE, "ConnectionError"), starts)[0] is Found.failed
    # Series that take turns still make one run: "any series" is what counts.
    two = Matrix(
        (
            Series({"gpu": "0"}, tuple((t, 1.0) for t in (last - 240, last - 180))),
            Series({"gpu": "1"}, tuple((t, 1.0) for t in (last - 120, last - 60, last))),
        )
    )
    assert judge(two, starts) == (Found.run, last - 240, last, False)


def _ev(name: str, starts: float | None, found: Found, run_start: float | None = None) -> Evidence:
    return Evidence((name,), 1, "x > 0", starts, found, run_start, starts)


def test_impact_start_is_the_earliest_evidence():
    declared = T0
    got = earliest([_ev("A", T0 - 600, Found.run, T0 - 7200), _ev("B", T0 - 900, Found.failed)], declared)
    assert (got.at, got.source, got.by_alert) == (T0 - 7200, "expression", "A")
    got = earliest([_ev("A", T0 - 600, Found.failed), _ev("B", T0 - 900, Found.no_expr)], declared)
    assert (got.at, got.source, got.by_alert) == (T0 - 900, "startsAt", "B")
    assert got.how() == "the startsAt of `B` (no expression showed an earlier start)"
    # A run that starts at or after startsAt is no earlier than the startsAt itself.
    got = earliest([_ev("A", T0 - 600, Found.run, T0 - 600)], declared)
    assert (got.at, got.source) == (T0 - 600, "expression")
    # A not-true run is never used, however early.
    got = earliest([_ev("A", T0 + 60, Found.not_true, T0 - 9000)], declared)
    assert (got.at, got.source, got.by_alert) == (T0, "declaration", None)
    assert earliest([], declared).how() == "the declaration (no alert showed an earlier start)"


def _alert(name: str, starts: str, url: str, fp: str) -> AlertRecord:
    return AlertRecord(
        fingerprint=fp, status="firing", alertname=name, starts_at=starts, generator_url=url, received_at=T0
    )


async def test_without_prometheus_each_expression_says_so_and_a_storm_is_one_line():
    url = "http://prom:9090/graph?g0.expr=up+%3D%3D+0"
    storm = [_alert("NodeDown", f"2026-11-30T03:0{i}:00Z", url, f"fp{i}") for i in range(5)]
    odd = [
        _alert("Stalled", "2026-11-30T03:01:00Z", "", "s1"),
        _alert("Stalled", "2026-11-30T03:02:00Z", "", "s2"),
        _alert("Weird", "yesterday", url, "w1"),
        _alert("Zero", "0001-01-01T00:00:00Z", url, "z1"),
    ]
    got = await evaluate(None, [*storm, *odd], timeout=1)
    by = {e.alertnames: e for e in got}
    assert by[("NodeDown",)].alerts == 5 and by[("NodeDown",)].found is Found.not_configured
    assert by[("NodeDown",)].starts_at == T0 - 600  # the earliest startsAt among them (03:00)
    assert (
        by[("NodeDown",)].sentence() == "`up == 0` not evaluated: PROMETHEUS_URL is not set; its startsAt 03:00 stands"
    )
    assert by[("Stalled",)].alerts == 2 and by[("Stalled",)].found is Found.no_expr
    assert by[("Weird",)].sentence() == "`up == 0` not evaluated: its startsAt `yesterday` is not a time"
    assert by[("Zero",)].sentence() == "`up == 0` not evaluated: it has no startsAt"
    assert earliest(got, T0).at == T0 - 600
