"""The node return gate: before `undo` puts a quarantined node back in the pool, look at it.

"Don't restart into the same bad node." Checked: the node is Ready; dcgm-exporter reported no
node-fatal XID (policy `return_gate.fatal_xids`) on any of its GPUs since the quarantine; no ECC
double-bit error since (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL rose); and now no row remap pending
(DCGM_FI_DEV_ROW_REMAP_PENDING: it waits for a GPU reset) or failed (DCGM_FI_DEV_ROW_REMAP_FAILURE,
1 for good once a remapping failed, so said as such, never as new). GPUs are told apart by gpu and
UUID. What was found is said either way; a failing check, or one that could not be made
(Prometheus refused or unreachable, no XID series at all for the node), makes the undo wait for
the IC's approval. Without PROMETHEUS_URL only Ready is checked, and the text says so. ECC and
row-remap fields are not all in dcgm-exporter's default counters: a node without those series is
said to be unchecked there, not failing.

"Since the quarantine" is the hard part: the node was usually quarantined FOR an XID, and neither
XID series forgets it at once (world/fbworld/dcgm.py models both from dcgm-exporter's source):

- DCGM_EXP_XID_ERRORS_COUNT (when the exporter's CSV enables it) is not a counter but a count per
  GPU and code of the XIDs in the last window_size_in_ms (default 5 min; expcollector.go getMetrics
  over GetValuesSince), so `increase()` is wrong and the causing XID stays counted for up to a
  window after it. A new XID makes its code's count RISE from one scrape to the next (older ones
  only ever leave the window), so the gate reads the raw scrapes from the last one at or before
  the quarantine and calls any rise new; a count above 0 at a scrape more than a window after the
  quarantine can only hold XIDs after it (that also catches a repeat that arrived in the scrape
  interval in which the causing one left). DCGM keeps an XID 600 s (devicewatcher/const.go
  maxKeepAge), so past that any count is new and one `max_over_time` covers the rest.
- DCGM_FI_DEV_XID_ERRORS (the default) holds the LAST code until the driver reloads. New is a
  change against the code it held at the quarantine: another fatal code, or the held one back
  after the gauge showed another (a reload's 0, say). A repeat of the held code is invisible on
  it: when that code is fatal the text says so.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.chat import quote
from bot.clock import hhmm
from bot.core.services import Services
from bot.prom import Failed, Matrix, Result, Vector

KEEP_S = 600.0  # how long DCGM keeps an XID (dcgm-exporter internal/pkg/devicewatcher/const.go, maxKeepAge)
LOOKBACK_S = 300.0  # how far before the quarantine its reading may be (Prometheus's default lookback)
WINDOW_S = 300.0  # --xid-count-window-size's default (pkg/cmd/app.go), when a series lacks its label
COUNT, GAUGE = "DCGM_EXP_XID_ERRORS_COUNT", "DCGM_FI_DEV_XID_ERRORS"

GpuKey = tuple[str, str]  # (gpu, UUID)


@dataclass
class Gate:
    ok: bool
    found: list[str] = field(default_factory=list)  # one line per check, passing or not
    failing: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "; ".join(self.found)


@dataclass
class Xids:
    """What the XID series say per GPU: codes held at the quarantine, codes reported since (new),
    fatal codes seen after it that can't be told from the held one (no reading at the quarantine)."""

    source: str
    before: dict[GpuKey, set[int]] = field(default_factory=lambda: defaultdict(set))
    new: dict[GpuKey, set[int]] = field(default_factory=lambda: defaultdict(set))
    unsure: dict[GpuKey, set[int]] = field(default_factory=lambda: defaultdict(set))
    labels: dict[GpuKey, Mapping[str, str]] = field(default_factory=dict)

    def counted_after(self, rows: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """The count's most per code from KEEP_S after the quarantine on: past DCGM's horizon any
        count is of XIDs after the quarantine."""
        for labels, value in rows:
            code = _code(labels.get("xid"))
            if code is not None and value > 0:
                self.labels.setdefault(_key(labels), labels)
                self.new[_key(labels)].add(code)


def _ready(node: dict[str, Any]) -> tuple[bool, str]:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = str(c.get("status"))
            reason = f" ({quote(str(c['reason']))})" if c.get("reason") else ""
            return status == "True", f"Ready={quote(status)}{reason}"
    return False, "no Ready condition"


def _key(labels: Mapping[str, str]) -> GpuKey:
    return str(labels.get("gpu", "?")), str(labels.get("UUID") or labels.get("uuid") or "")


def _gpu(labels: Mapping[str, str]) -> str:
    gpu, uuid = _key(labels)
    return f"GPU {quote(gpu)}" + (f" ({quote(uuid)})" if uuid else "")


def _code(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def _samples(got: Result) -> list[tuple[Mapping[str, str], float]] | None:
    if not isinstance(got, Vector):
        return None
    return [(s.labels, s.value) for s in got.samples if not math.isnan(s.value)]


def _unread(got: Result, shape: str) -> str:
    return str(got) if isinstance(got, Failed) else f"not {shape}"


def _duration(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds))}s"


def from_counts(series: Iterable[tuple[Mapping[str, str], Iterable[tuple[float, float]]]], since: float) -> Xids:
    """The count's raw samples from before the quarantine to at most KEEP_S after it, per GPU."""
    xids = Xids(COUNT)
    by_gpu: dict[GpuKey, list[tuple[Mapping[str, str], list[tuple[float, float]]]]] = defaultdict(list)
    for labels, points in series:
        by_gpu[_key(labels)].append((labels, list(points)))
    for key, gpu_series in by_gpu.items():
        xids.labels[key] = gpu_series[0][0]
        # Every scrape of the GPU (the no-XID series of 0 fills those with none), and each code's count at it.
        scrapes = sorted({t for _, points in gpu_series for t, _ in points})
        counts: dict[int, dict[float, float]] = defaultdict(dict)
        # An XID counts for the window, but never past DCGM's horizon.
        window = min(KEEP_S, *(float(lb.get("window_size_in_ms") or WINDOW_S * 1000) / 1000 for lb, _ in gpu_series))
        for labels, points in gpu_series:
            code = _code(labels.get("xid"))
            if code is not None:
                counts[code].update(points)
        base = max((t for t in scrapes if t <= since), default=None)
        for code, at in counts.items():
            seen = [(t, at.get(t, 0.0)) for t in scrapes if base is None or t >= base]
            if base is not None and at.get(base, 0.0) > 0:
                xids.before[key].add(code)
            rose = any(b > a for (_, a), (_, b) in itertools.pairwise(seen))
            if rose or any(n > 0 and t > since + window for t, n in seen):
                xids.new[key].add(code)
            elif base is None and any(n > 0 for _, n in seen):
                xids.unsure[key].add(code)
    return xids


def from_gauge(
    held_then: list[tuple[Mapping[str, str], float]],
    shown: list[tuple[Mapping[str, str], float]],
    held_now: list[tuple[Mapping[str, str], float]],
) -> Xids:
    """The gauge's code per GPU at the quarantine (``held_then``: each err_code series' latest
    sample time), the codes it showed since (``shown``), and its code now (``held_now``)."""
    xids = Xids(GAUGE)

    def latest(rows: list[tuple[Mapping[str, str], float]]) -> dict[GpuKey, int | None]:
        # Under a live scrape a replaced code's series is marked stale; a backfill has no such marker,
        # so the series with the newest sample is the code held.
        newest: dict[GpuKey, tuple[float, int | None]] = {}
        for labels, t in rows:
            key = _key(labels)
            xids.labels.setdefault(key, labels)
            if key not in newest or t > newest[key][0]:
                newest[key] = (t, _code(labels.get("err_code")))
        return {key: code for key, (_, code) in newest.items()}

    then, now = latest(held_then), latest(held_now)
    codes: dict[GpuKey, set[int]] = defaultdict(set)
    for labels, value in shown:
        xids.labels.setdefault(_key(labels), labels)
        codes[_key(labels)].add(int(value))
    for key, seen in codes.items():
        held = then.get(key)
        if held is None:  # no reading at the quarantine (or one without err_code)
            xids.unsure[key] |= {c for c in seen if c}
            continue
        if held:
            xids.before[key].add(held)
        xids.new[key] |= seen - {held}
        if now.get(key) == held and seen - {held}:  # it showed another code, then the held one again
            xids.new[key].add(held)
    return xids


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

    def ask(query: str, when: float, window: float = 0.0) -> Awaitable[Result]:
        return prom.query(pol.render(query, name, cell, _duration(window)), when, pol.timeout_seconds)

    # The count's scrapes from the quarantine's reading to DCGM's horizon (or now), then past it.
    first_end = min(now, since + KEEP_S)
    raw = [
        prom.query(q, first_end, pol.timeout_seconds)
        for q in pol.render_each(pol.xid_count_query, name, cell, _duration(first_end - since + LOOKBACK_S))
    ]
    after = now - (since + KEEP_S)
    asked = [
        ask(pol.xid_count_after_query, now, after) if after >= 1 else _nothing(),
        ask(pol.xid_held_query, since),
        ask(pol.xid_query, now, now - since),
        ask(pol.xid_held_query, now),
        ask(pol.ecc_dbe_query, now, now - since),
        ask(pol.row_remap_pending_query, now),
        ask(pol.row_remap_failure_query, now),
    ]
    got = await asyncio.gather(*raw, *asked)
    raw_got, (count_after, held_then, shown, held_now, dbe, pending, failure) = got[: len(raw)], got[len(raw) :]

    _judge_xids(pol.fatal_xids, raw_got, count_after, held_then, shown, held_now, since, name, at, gate, fail)

    rows = _samples(dbe)
    if rows is None:
        fail(f"ECC double-bit errors could not be read ({_unread(dbe, 'an instant vector')})")
    elif not rows:
        gate.found.append("ECC double-bit errors not checked (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL is not exported for it)")
    elif bad := [(lb, v) for lb, v in rows if v > 0]:
        fail(f"ECC double-bit errors {at}: " + ", ".join(f"{_gpu(lb)} {v:g}" for lb, v in bad))
    else:
        gate.found.append(f"no ECC double-bit errors {at}")
    _judge_remap(pending, failure, gate, fail)
    return gate


async def _nothing() -> Result:
    return Vector(())


def _judge_xids(
    fatal_xids: list[int],
    raw: list[Result],
    count_after: Result,
    held_then: Result,
    shown: Result,
    held_now: Result,
    since: float,
    name: str,
    at: str,
    gate: Gate,
    fail: Callable[[str], None],
) -> None:
    fatal = set(fatal_xids)
    unread = [g for g in (*raw, count_after, held_then, shown, held_now) if isinstance(g, Failed)]
    if unread:
        fail(f"XIDs could not be read ({unread[0]})")
        return
    series = [(s.labels, s.points) for g in raw if isinstance(g, Matrix) for s in g.series]
    if series:
        xids = from_counts(series, since)
    else:
        rows_then, rows_shown, rows_now = _samples(held_then), _samples(shown), _samples(held_now)
        if rows_then is None or rows_shown is None or rows_now is None:
            fail("XIDs could not be read (not an instant vector)")
            return
        xids = from_gauge(rows_then, rows_shown, rows_now)
    xids.counted_after(_samples(count_after) or [])
    if not xids.labels:
        fail(f"no {GAUGE} or {COUNT} series for {quote(name)} {at}: is dcgm-exporter scraped there?")
        return

    def listed(found: Mapping[GpuKey, set[int]], codes: set[int], again: bool = False) -> str:
        return ", ".join(
            f"XID {code} on {_gpu(xids.labels[key])}" + (" again" if again and code in xids.before[key] else "")
            for key in sorted(found)
            for code in sorted(found[key] & codes)
        )

    new_fatal = listed(xids.new, fatal, again=True)
    unsure = listed(xids.unsure, fatal)
    if new_fatal:
        fail(f"{new_fatal} {at} ({xids.source})")
    if unsure:
        fail(f"{unsure} seen after the quarantine, with no {xids.source} reading at it to tell it from one before")
    if new_fatal or unsure:
        return
    others = sorted({code for codes in xids.new.values() for code in codes if code})
    text = f"no fatal XID {at}" + (f" (non-fatal: {', '.join(map(str, others))})" if others else "")
    before = listed(xids.before, fatal)
    if before:
        text += f"; {before} came before the quarantine"
        if xids.source == GAUGE:
            held = sorted({code for key in xids.before for code in xids.before[key] & fatal})
            codes = ", ".join(map(str, held))
            text += (
                f" (a repeat of XID {codes} can't be seen on {GAUGE}, which holds the last code: {COUNT} counts each)"
            )
    gate.found.append(text)


def _judge_remap(pending: Result, failure: Result, gate: Gate, fail: Callable[[str], None]) -> None:
    unchecked: list[str] = []
    bad = False
    for got, metric, say in (
        (pending, "DCGM_FI_DEV_ROW_REMAP_PENDING", "row remap pending on {}: it waits for a GPU reset"),
        (
            failure,
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "row-remap failure on {} (DCGM_FI_DEV_ROW_REMAP_FAILURE stays 1 once a remapping failed, "
            "so it may predate the quarantine)",
        ),
    ):
        rows = _samples(got)
        if rows is None:
            fail(f"{metric} could not be read ({_unread(got, 'an instant vector')})")
            bad = True
        elif not rows:
            unchecked.append(metric)
        elif hits := [lb for lb, v in rows if v > 0]:
            fail(say.format(", ".join(_gpu(lb) for lb in hits)))
            bad = True
    if len(unchecked) == 2:
        gate.found.append("row remapping not checked (neither row-remap field is exported for it)")
    elif not bad:
        gate.found.append(
            "no row remap pending or failed" + (f" ({unchecked[0]} is not exported: not checked)" if unchecked else "")
        )
