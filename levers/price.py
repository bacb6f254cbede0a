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
