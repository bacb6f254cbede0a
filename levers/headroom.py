"""Receiving cells' headroom: TTFT SLO burn over 1h from Prometheus, fail closed.

prometheus-api-client is synchronous, so each query runs in a worker thread.
Queries are evaluated at the injected clock's now.
"""

from __future__ import annotations

import asyncio
from string import Template
from typing import Any

from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from bot import logs
from bot.core.services import Services
from levers.base import LeverRefusal

log = logs.get(__name__)


def _query(url: str, promql: str, at: float, timeout: float) -> list[dict[str, Any]]:
    pc = PrometheusConnect(url, disable_ssl=True, retry=Retry(total=0))
    rows: list[dict[str, Any]] = pc.custom_query(promql, params={"time": at}, timeout=timeout)
    return rows


async def burn_rates(svc: Services, cells: list[str]) -> dict[str, float]:
    """TTFT burn per cell; LeverRefusal when Prometheus can't answer for every cell."""
    pol = svc.policy.levers.headroom
    url = svc.settings.prometheus_url
    if not url:
        raise LeverRefusal(
            "Headroom check needs Prometheus and PROMETHEUS_URL is not set; route-weight refuses without it."
        )
    out: dict[str, float] = {}
    for cell in cells:
        promql = Template(pol.query).safe_substitute(cell=cell)
        try:
            rows = await asyncio.to_thread(_query, url, promql, svc.clock.now(), pol.timeout_seconds)
        except Exception as exc:  # noqa: BLE001 - any failure to get the figure means "no headroom known"
            log.warning("headroom_query_failed", cell=cell, error=type(exc).__name__)
            raise LeverRefusal(
                f"Prometheus can't be reached for the headroom check ({type(exc).__name__}); "
                "route-weight refuses without it (fail closed). Nothing changed."
            ) from None
        values = [float(r["value"][1]) for r in rows if r.get("value")]
        if not values:
            raise LeverRefusal(
                f"Prometheus has no TTFT data for receiving cell {cell}; can't confirm headroom, so nothing changed."
            )
        out[cell] = max(values)
    return out


async def check(svc: Services, cells: list[str]) -> str:
    """A line with the figures when every cell is below the threshold, else LeverRefusal with them."""
    limit = svc.policy.levers.headroom.max_burn
    burns = await burn_rates(svc, cells)
    figures = ", ".join(f"{c} {b:.2f}x" for c, b in burns.items())
    hot = [c for c, b in burns.items() if not b < limit]  # NaN counts as hot
    if hot:
        raise LeverRefusal(
            f"No headroom: TTFT SLO burn over 1h is {figures} (must be below {limit:g}x); "
            f"{', '.join(hot)} can't take more traffic. Nothing changed."
        )
    return f"headroom ok: TTFT burn 1h {figures} (< {limit:g}x)"
