"""What pulling a lever costs, stated before it acts (docs/levers.md, "Price").

A price is a list of costs, each a figure read from the cluster or Prometheus at plan time in the
units on-call's follow-up questions use (GPU-hours, GPUs, jobs, requests per second, calls per
minute, sessions, replicas). A figure that could not be read is `None` with the reason: a price is
never guessed, and an unread figure never counts as 0.

Between an approval and the execution some figures stay and some move by themselves (docs/levers.md,
"Price"): a figure in a unit of HITS counts what the lever hits (gangs, workloads, backends, nodes,
replicas, their GPUs), and any change in it, or in the objects it is about, needs a new approval;
CLOCK figures grow with the clock (GPU-hours since a checkpoint) and never do; every other unit is a
live figure (req/s, calls/min, %, a trigger's value) that needs one only past the policy's band
(`price.live_band`). Figures that moved and need none are read again and announced (Price.moved).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

GPU_HOURS = "GPU-hours"


class Cost(BaseModel):
    """One figure of a price: what it is about, its value in `unit`, and how it was read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    what: str  # the object or group it is about: "JobSet training/llama-70b"
    unit: str  # GPU_HOURS, "GPUs", "jobs", "req/s", "calls/min", "sessions", "replicas", "%"
    value: float | None  # None: could not be read (`how` says why)
    how: str = ""  # how it was read ("512 GPUs x 40 min since the checkpoint annotation") or why unknown

    def figure(self) -> str:
        """The figure and how it was read: `341 GPU-hours (512 GPUs x 40 min ...)`, `unknown (why)`."""
        said = "unknown" if self.value is None else figure(self.value, self.unit)
        return said + (f" ({self.how})" if self.how else "")


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    costs: tuple[Cost, ...] = ()
    # Context that is not a cost (each receiver's headroom after a route step) and what could not be
    # read at all (a Prometheus query that failed), in a few words each.
    notes: tuple[str, ...] = ()

    def total(self, unit: str) -> float | None:
        """The sum of the figures in `unit`; None when any of them is unknown (or none is in that unit)."""
        values = [c.value for c in self.costs if c.unit == unit]
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    def unknown(self) -> list[Cost]:
        return [c for c in self.costs if c.value is None]

    def to_record(self) -> dict[str, object]:
        return self.model_dump(mode="json")

    @classmethod
    def from_record(cls, raw: object) -> Price | None:
        return cls.model_validate(raw) if raw else None

    def moved(self, other: Price, band: float) -> Moves:
        """How `other` (read at execution) differs from this price (the approved one): what the lever hits
        (a HITS figure gone, new, changed at all, or turned unknown or known), live figures that moved
        more than `band`-fold (up or down; from or to 0 is beyond any band), and the figures that moved
        by themselves within that (CLOCK ones whatever they did), as "what: before → after" lines."""
        mine = {(c.what, c.unit): c.value for c in self.costs}
        theirs = {(c.what, c.unit): c.value for c in other.costs}
        out = Moves()
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            what, unit = key
            into = out.hits if unit in HITS else out.live
            if key not in theirs:
                into.append(f"{what}: {figure(mine[key], unit)} is no longer a cost")
                continue
            if key not in mine:
                into.append(f"{what}: {figure(theirs[key], unit)} is a new cost")
                continue
            a, b = mine[key], theirs[key]
            if a == b:
                continue
            said = f"{what}: {figure(a, unit)} → {figure(b, unit)}"
            if unit in HITS:
                out.hits.append(said)
            elif unit not in CLOCK and a is not None and b is not None and _beyond(a, b, band):
                out.beyond.append(f"{said}, more than {show(band)}-fold")
            elif figure(a, unit) != figure(b, unit):  # 341.3 -> 341.6 GPU-hours reads the same: not said
                out.live.append(said)
        return out

    def lines(self) -> list[str]:
        """The price as bullet lines, one per figure then one per note (the chat's layout). Raw text
        (cluster data in it): a chat surface escapes it (levers/messages.py)."""
        return [f"• {c.what}: {c.figure()}" for c in self.costs] + [f"• {n}" for n in self.notes]

    def text(self) -> str:
        """The price in one short paragraph, as the channel, the card and the postmortem show it: the
        figures of one object together, then the GPU-hours in all (when several), then the notes.
        Raw text (cluster data in it): a chat surface escapes it (levers/messages.py)."""
        if not self.costs and not self.notes:
            return "Price: nothing to state."
        grouped: dict[str, list[Cost]] = {}
        for c in self.costs:
            grouped.setdefault(c.what, []).append(c)
        parts = [f"{what}: " + ", ".join(c.figure() for c in costs) for what, costs in grouped.items()]
        hours = [c for c in self.costs if c.unit == GPU_HOURS]
        if len(hours) > 1:
            parts.append(f"in all: {figure(self.total(GPU_HOURS), GPU_HOURS)}")
        parts += list(self.notes)
        return "Price: " + "; ".join(parts) + "."


def show(value: float) -> str:
    """A number as people read it: whole numbers whole, from 100 up to the unit (341), others to 3
    significant digits (16.7, 0.25); never in exponent notation."""
    if value == int(value):
        return f"{int(value)}"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


# Units whose value names one thing (rollout-abort's revision restored) rather than counting things.
ORDINALS = frozenset({"revision"})
# Units that count what a lever hits (docs/levers.md, "Price"): any change is a change in what was approved.
# A revision names what is restored, so it is one too.
HITS = frozenset({"GPUs", "jobs", "gangs", "workloads", "nodes", "replicas", "backends", "pods", "sessions"}) | ORDINALS
# Units that grow with the clock alone: never a reason to ask again, whatever they did.
CLOCK = frozenset({GPU_HOURS})


@dataclass
class Moves:
    """What changed between the approved price and the one read at execution (Price.moved)."""

    hits: list[str] = field(default_factory=list)  # what the lever hits: a new approval
    beyond: list[str] = field(default_factory=list)  # a live figure beyond the band: a new approval
    live: list[str] = field(default_factory=list)  # moved by themselves within it: read again and announced

    @property
    def stale(self) -> list[str]:
        """Why the approval no longer holds; [] when it does."""
        return [*self.hits, *self.beyond]


def _beyond(a: float, b: float, band: float) -> bool:
    """Whether a live figure moved from `a` to `b` by more than `band`-fold, either way. From or to 0
    (or across it) no fold is small enough: a route that served nothing and now serves traffic moved."""
    lo, hi = sorted((abs(a), abs(b)))
    if a * b <= 0:
        return hi > 0
    return hi / lo > band


def figure(value: float | None, unit: str) -> str:
    """A figure with its unit (`341 GPU-hours`, `1 GPU`); an unread one is `unknown`, never 0."""
    if value is None:
        return f"unknown {unit}"
    if unit in ORDINALS:  # a number that names one thing, not a count of them: revision 3
        return f"{unit} {show(value)}"
    return f"{show(value)} {unit.removesuffix('s') if value == 1 else unit}"  # 1 workload, 1 GPU
