"""Receiving cells' headroom: TTFT SLO burn over 1h from Prometheus, fail closed.

The query goes through the app's one Prometheus client (``Services.prometheus``, bot.prom's port):
a scalar is one figure, a string or range vector is refused by name, a rejected query says why in
Prometheus's words. TLS is always verified (PROMETHEUS_CA_FILE names a private CA): this answer
decides whether traffic moves, so an unauthenticated endpoint must not be able to say "healthy".
Queries are evaluated at the injected clock's now.
"""

from __future__ import annotations

import math

from bot import logs
from bot.core.services import Services
from bot.prom import Failed, Matrix, Result, Scalar, Text, Vector, Why
from levers.base import LeverRefusal

log = logs.get(__name__)

_FAIL_CLOSED = "route-weight refuses without it (fail closed). Nothing changed."


class _NoFigure(Exception):
    """Prometheus answered, but not with a number for the cell; the message says why."""


def _figures(got: Vector | Scalar | Matrix | Text) -> list[float]:
    """The numbers in an instant query's answer: one per series of a vector, or the scalar."""
    if isinstance(got, Vector):
        return got.values
    if isinstance(got, Scalar):
        return [got.value]
    what = "a range vector" if isinstance(got, Matrix) else "a string"
    raise _NoFigure(f"the headroom query returns {what}, not a number per cell (an instant vector or a scalar)")


def _unusable(failed: Failed) -> str | None:
    """Why Prometheus's answer is no figure, in the headroom check's words (None: it was not reached)."""
    match failed.why:
        case Why.CA_FILE | Why.TOKEN_FILE:
            return failed.detail
        case Why.AUTH:
            return str(failed)
        case Why.NOT_JSON:
            return f"Prometheus answered HTTP {failed.status} without the query API's JSON"
        case Why.REJECTED:
            return f"Prometheus rejected the headroom query ({failed.detail})"
        case Why.HTTP:
            return f"Prometheus answered HTTP {failed.status} ({failed.detail or 'no error text'})"
        case Why.MALFORMED:
            return "Prometheus's answer to the headroom query is not the query API's JSON"
        case _:
            return None


def _values(cell: str, got: Result) -> list[float]:
    """The figures for ``cell``, or LeverRefusal saying why there are none."""
    if isinstance(got, Failed):
        unusable = _unusable(got)
        if unusable is not None:
            log.warning("headroom_query_unusable", cell=cell, reason=unusable)
            raise LeverRefusal(f"No headroom figure for {cell}: {unusable}; {_FAIL_CLOSED}")
        if got.why is Why.TLS:
            log.warning("headroom_tls_refused", cell=cell, reason=got.detail)
            raise LeverRefusal(
                f"Prometheus's TLS certificate is not trusted ({got.detail}); set PROMETHEUS_CA_FILE "
                f"to the CA that signed it. The headroom check can't run, so {_FAIL_CLOSED}"
            )
        # Unreachable or timed out: any failure to get the figure means "no headroom known".
        log.warning("headroom_query_failed", cell=cell, error=got.detail)
        raise LeverRefusal(f"Prometheus can't be reached for the headroom check ({got.detail}); {_FAIL_CLOSED}")
    try:
        return _figures(got)
    except _NoFigure as exc:
        log.warning("headroom_query_unusable", cell=cell, reason=str(exc))
        raise LeverRefusal(f"No headroom figure for {cell}: {exc}; {_FAIL_CLOSED}") from None


async def burn_rates(svc: Services, cells: list[str]) -> dict[str, float | None]:
    """TTFT burn per cell, None for a cell with no traffic; LeverRefusal when Prometheus can't answer
    for every cell."""
    pol = svc.policy.levers.headroom
    prom = svc.prometheus
    if prom is None:
        raise LeverRefusal(
            "Headroom check needs Prometheus and PROMETHEUS_URL is not set; route-weight refuses without it."
        )
    out: dict[str, float | None] = {}
    for cell in cells:
        promql = pol.render(cell)
        got = await prom.query(promql, svc.clock.now(), pol.timeout_seconds)
        values = _values(cell, got)
        if not values:
            raise LeverRefusal(
                f"Prometheus has no TTFT data for receiving cell {cell}; can't confirm headroom, so nothing changed."
            )
        nan = [math.isnan(v) for v in values]
        if not any(nan):
            out[cell] = max(values)
        elif all(nan) and isinstance(got, Vector):
            # The cell's series are there and every one is NaN: a ratio of rates that is 0/0, no
            # requests in the window. An idle cell has all its capacity free.
            out[cell] = None
        else:
            # A scalar NaN (scalar() of no series) says nothing about the cell, and a NaN must not hide
            # behind another series' figure in max(): either counts as hot.
            out[cell] = math.nan
    return out


def burn_text(b: float | None) -> str:
    """A cell's burn as the headroom line shows it."""
    if b is None:
        return "no traffic"
    return "NaN" if math.isnan(b) else f"{b:.2f}x"


async def check(svc: Services, cells: list[str]) -> str:
    """A line with the figures when every cell is below the threshold, else LeverRefusal with them."""
    return verdict(svc, await burn_rates(svc, cells))


def verdict(svc: Services, burns: dict[str, float | None]) -> str:
    """check's line (or LeverRefusal) for burns already read (route-weight keeps them for its price)."""
    limit = svc.policy.levers.headroom.max_burn
    figures = ", ".join(f"{c} {burn_text(b)}" for c, b in burns.items())
    hot = [c for c, b in burns.items() if b is not None and not b < limit]  # NaN counts as hot
    if hot:
        raise LeverRefusal(
            f"No headroom: TTFT SLO burn over 1h is {figures} (must be below {limit:g}x); "
            f"{', '.join(hot)} can't take more traffic. Nothing changed."
        )
    return f"headroom ok: TTFT burn 1h {figures} (< {limit:g}x)"
