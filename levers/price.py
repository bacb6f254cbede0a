"""What pulling a lever costs, stated before it acts (DESIGN.md section 4, "The price of the mitigation").

A price is a list of costs, each a figure read from the cluster or Prometheus at plan time in the
units on-call's follow-up questions use (GPU-hours, GPUs, jobs, requests per second, calls per
minute, sessions, replicas). A figure that could not be read is `None` with the reason: a price is
never guessed, and an unread figure never counts as 0.
"""

from __future__ import annotations

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

    def moved(self, other: Price, tolerance: float) -> list[str]:
        """How `other` (read later) differs from this price by more than `tolerance` (a fraction of each
        figure): a figure gone, new, turned unknown or known, or changed by more than that. [] when not."""
        mine = {(c.what, c.unit): c.value for c in self.costs}
        theirs = {(c.what, c.unit): c.value for c in other.costs}
        out: list[str] = []
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            what, unit = key
            if key not in theirs:
                out.append(f"{what}: {figure(mine[key], unit)} is no longer a cost")
                continue
            if key not in mine:
                out.append(f"{what}: {figure(theirs[key], unit)} is a new cost")
                continue
            a, b = mine[key], theirs[key]
            if a is None and b is None:
                continue
            # An ordinal names one thing (revision 10 is not revision 11): any change is a move.
            moved = (
                a != b if unit in ORDINALS else a is None or b is None or abs(b - a) > tolerance * max(abs(a), abs(b))
            )
            if moved:
                out.append(f"{what}: {figure(a, unit)} -> {figure(b, unit)}")
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


def figure(value: float | None, unit: str) -> str:
    """A figure with its unit (`341 GPU-hours`, `1 GPU`); an unread one is `unknown`, never 0."""
    if value is None:
        return f"unknown {unit}"
    if unit in ORDINALS:  # a number that names one thing, not a count of them: revision 3
        return f"{unit} {show(value)}"
    return f"{show(value)} {unit.removesuffix('s') if value == 1 else unit}"  # 1 workload, 1 GPU
