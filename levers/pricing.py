"""Reading a price's figures from Prometheus: one number per query, or why there is none.

A price is never guessed (levers/price.py): a query Prometheus refuses or can't answer, one that
matches no series, or one that answers several series where the price needs one figure gives no
number, and the reason is said in a few words. Nothing here raises: a failed read is a figure
unknown, and the lever still plans.
"""

from __future__ import annotations

import math

from bot import logs
from bot.core.services import Services
from bot.prom import Failed, Matrix, Result, Scalar, Text, Vector

log = logs.get(__name__)


async def figure(svc: Services, promql: str, at: float | None = None) -> tuple[float | None, str]:
    """The one number `promql` answers at `at` (default: the clock's now), or (None, why)."""
    prom = svc.prometheus
    if prom is None:
        return None, "PROMETHEUS_URL is not set"
    when = svc.clock.now() if at is None else at
    return one(await prom.query(promql, when, svc.policy.levers.price.timeout_seconds), promql)


def one(got: Result, promql: str) -> tuple[float | None, str]:
    """The one number an answer holds, or (None, why): what `figure` reads, for an answer from
    another Prometheus (a KEDA trigger's serverAddress, levers/catalogue/keda.py)."""
    why: str | None = None
    value: float | None = None
    if isinstance(got, Failed):
        why = str(got)
    elif isinstance(got, Scalar):
        value = got.value
    elif isinstance(got, Vector):
        if not got.samples:
            why = "no data (the query matches no series)"
        elif len(got.samples) > 1:
            why = f"the query answers {len(got.samples)} series, not one figure: can't tell which is meant"
        else:
            value = got.samples[0].value
    else:
        what = "a range vector" if isinstance(got, Matrix) else "a string" if isinstance(got, Text) else "no number"
        why = f"the query answers {what}, not an instant vector or a scalar"
    if value is not None and math.isnan(value):
        value, why = None, "NaN (nothing to count in the window)"
    if why is not None:
        log.info("price_figure_unread", query=promql[:200], reason=why)
        return None, why
    return value, ""
