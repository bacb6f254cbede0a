"""The return gate's reading of dcgm-exporter's XID count (levers/returngate.py, from_counts and
counted_after), over the exporter's own series as world/fbworld/dcgm.py models them from its
source: DCGM_EXP_XID_ERRORS_COUNT counts a GPU's XIDs per code in a sliding window, so the XID a
node was quarantined for stays counted for up to a window after it. For every mix of scrape
interval and phase, window size, causing XID, new XID (the same code or another) and time of the
undo on a grid, the gate must never call the causing XID new, and must catch every XID after the
quarantine that a scrape could show, except where sampling hides it: a repeat that arrives in the
very scrape interval in which an older XID of its code leaves the window (the count does not
move) and that no scrape sees after the quarantine's window has passed."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from fbworld.dcgm import XID_COUNT, DcgmSeries, Exporter, Gpu, series
from levers.returngate import KEEP_S, LOOKBACK_S, from_counts

S = 1_796_008_200.0  # the quarantine


def judged(counted: list[DcgmSeries], now: float) -> tuple[set[int], set[int]]:
    """(codes called new, codes unsure) from what the gate's two count queries would answer at
    ``now``, over the scrapes ``counted`` (a scrape's samples don't depend on later ones)."""
    end = min(now, S + KEEP_S)
    start = end - (end - S + LOOKBACK_S)  # the raw query's range, closed as Prometheus 2.x reads it
    raw = [(s.labels, [(t, v) for t, v in s.points if start <= t <= end]) for s in counted]
    xids = from_counts([(labels, points) for labels, points in raw if points], S)
    if now - (S + KEEP_S) >= 1:
        after = [[v for t, v in s.points if S + KEEP_S <= t <= now] for s in counted]
        xids.counted_after((s.labels, max(v)) for s, v in zip(counted, after, strict=True) if v)
    return {c for cs in xids.new.values() for c in cs}, {c for cs in xids.unsure.values() for c in cs}


GRID = list(itertools.product((15, 60), (0, 7), (60, 300, 600)))
BEFORE = (1, 60, 120, 245, 299, 590)  # the causing XID, seconds before the quarantine
AFTER = (None, 1, 20, 61, 200, 299, 301, 599, 1000)  # a later one, seconds after it
UNDO = (30, 120, 299, 600, 900, 1800)  # the undo, seconds after it


@pytest.mark.parametrize(("step", "phase", "window"), GRID, ids=[f"scrape{s}s+{p}-window{w}s" for s, p, w in GRID])
def test_the_causing_xid_is_never_new_and_a_later_one_is_caught_where_a_scrape_can_tell(step, phase, window):
    exporter = Exporter(xid_window_ms=window * 1000).with_counters(XID_COUNT)
    times = [S - 1500 + phase + i * step for i in range(4000 // step)]
    base = max(t for t in times if t <= S)  # the gate's reading at the quarantine
    caught = 0
    for before, after, code in itertools.product(BEFORE, AFTER, (79, 48)):
        causing = S - before
        gpu = Gpu("gpu-a3-0001", 0).xid(causing, 79)
        if after is not None:
            gpu.xid(S + after, code)
        counted = series(exporter, [gpu], times, [XID_COUNT])
        for undo in UNDO:
            now, case = S + undo, (before, after, code, undo)
            new, unsure = judged(
                [dataclasses.replace(s, points=[p for p in s.points if p[0] <= now]) for s in counted], now
            )
            assert not unsure, case
            if causing > base:
                continue  # an XID between the last scrape and the quarantine can't be told from a later one
            assert new <= ({code} if after is not None and S + after <= now else set()), case
            if after is None:
                continue
            seen = [t for t in times if S + after <= t <= min(now, S + after + window)]
            if not seen:
                continue  # no scrape showed it (yet)
            prev = max(t for t in times if t < seen[0])
            # The causing XID left the window in the interval the new one came in: the count did not move.
            hidden = code == 79 and prev - window <= causing < seen[0] - window
            if not hidden or any(t > S + window for t in seen):
                assert code in new, case
                caught += 1
    assert caught > 100
