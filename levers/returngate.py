"""The node return gate: before `undo` puts a quarantined node back in the pool, look at it.

"Don't restart into the same bad node." Checked: the node is Ready, and since the quarantine landed
dcgm-exporter reported no node-fatal XID (policy `return_gate.fatal_xids`), no ECC double-bit error
(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL rose) and no row-remap failure (DCGM_FI_DEV_ROW_REMAP_FAILURE) on any of
its GPUs (told apart by gpu and UUID). What was found is said either way; a failing check, or one
that could not be made (Prometheus refused or unreachable, no XID series at all for the node), makes
the undo wait for the IC's approval. Without PROMETHEUS_URL only Ready is checked, and the text says
so. ECC and row-remap are not in dcgm-exporter's default counters: a node without those series is
said to be unchecked there, not failing.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

from bot.chat import quote
from bot.clock import hhmm
from bot.core.services import Services
from bot.prom import Failed, Result, Vector


@dataclass
class Gate:
    ok: bool
    found: list[str] = field(default_factory=list)  # one line per check, passing or not
    failing: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "; ".join(self.found)


def _ready(node: dict[str, Any]) -> tuple[bool, str]:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = str(c.get("status"))
            reason = f" ({quote(str(c['reason']))})" if c.get("reason") else ""
            return status == "True", f"Ready={quote(status)}{reason}"
    return False, "no Ready condition"


def _gpu(labels: Any) -> str:
    gpu = labels.get("gpu", "?")
    uuid = labels.get("UUID")
    return f"GPU {quote(str(gpu))}" + (f" ({quote(str(uuid))})" if uuid else "")


def _samples(got: Result) -> list[tuple[Any, float]] | None:
    if not isinstance(got, Vector):
        return None
    return [(s.labels, s.value) for s in got.samples if not math.isnan(s.value)]


async def check(svc: Services, node: dict[str, Any], cell: str, since: float) -> Gate:
    """The gate for `node` of `cell`, quarantined at `since`, evaluated at the clock's now."""
    name = str((node.get("metadata") or {}).get("name"))
    pol = svc.policy.levers.node_quarantine.return_gate
    gate = Gate(ok=True)

    def fail(text: str) -> None:
        gate.ok = False
        gate.found.append(text)
        gate.failing.append(text)

    ready, said = _ready(node)
    if ready:
        gate.found.append(said)
    else:
        fail(f"not Ready: {said}")
    prom = svc.prometheus
    at = f"since the quarantine at {hhmm(since)} UTC"
    if prom is None:
        # No Prometheus at all is the operator's choice, said as such; one that can't answer fails below.
        gate.found.append("DCGM signals not checked: PROMETHEUS_URL is not set")
        return gate
    now = svc.clock.now()
    window = f"{max(60, math.ceil(now - since))}s"
    queries = pol.render(name, cell, window)
    xid, dbe, remap = await asyncio.gather(*(prom.query(q, now, pol.timeout_seconds) for q in queries))

    rows = _samples(xid)
    if rows is None:
        fail(f"XIDs could not be read ({xid if isinstance(xid, Failed) else 'not an instant vector'})")
    elif not rows:
        fail(f"no DCGM_FI_DEV_XID_ERRORS series for {quote(name)} {at}: is dcgm-exporter scraped there?")
    else:
        fatal = sorted({(int(v), _gpu(lb)) for lb, v in rows if int(v) in pol.fatal_xids}, key=lambda x: (x[1], x[0]))
        if fatal:
            fail("XID " + ", ".join(f"{x} on {g}" for x, g in fatal) + f" {at}")
        else:
            seen = sorted({int(v) for _, v in rows if int(v)})
            others = f" (non-fatal: {', '.join(map(str, seen))})" if seen else ""
            gate.found.append(f"no fatal XID {at}{others}")
    for what, got, metric in (
        ("ECC double-bit errors", dbe, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
        ("row-remap failure", remap, "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
    ):
        rows = _samples(got)
        if rows is None:
            fail(f"{what} could not be read ({got if isinstance(got, Failed) else 'not an instant vector'})")
        elif not rows:
            gate.found.append(f"{what} not checked ({metric} is not exported for it)")
        elif bad := [(lb, v) for lb, v in rows if v > 0]:
            fail(f"{what} {at}: " + ", ".join(f"{_gpu(lb)} {v:g}" for lb, v in bad))
        else:
            gate.found.append(f"no {what} {at}")
    return gate
