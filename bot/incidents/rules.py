"""The incident's pure rules: the four-axis SEV matrix, the first update's due, the channel name.

A SEV raise or an update moves the next due inside Redis (lua.SEV_RAISE, bot/comms/lua.UPDATE_RECORD),
from the stored state; only the first due is computed here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from bot.chat import words
from bot.clock import ymd
from bot.policy.models import CadencePolicy, SeverityPolicy


@dataclass(frozen=True)
class Impact:
    users_burn: float | None = None  # SLO burn rate, multiples of budget
    gpus: int | None = None  # GPUs burning (GPU-hours lost per hour)
    quality: bool = False
    security: bool = False


@dataclass(frozen=True)
class Assessment:
    sev: int
    deciding_axis: str
    reasons: dict[str, str]  # axis -> why it scored what it did
    sevs: dict[str, int] = field(default_factory=dict)  # axis -> the SEV it scored


def assess(impact: Impact, policy: SeverityPolicy) -> Assessment:
    scores: dict[str, tuple[int, str]] = {}
    if impact.users_burn is not None:
        for step in sorted(policy.users, key=lambda s: s.sev):
            if impact.users_burn >= step.burn_at_least:
                scores["users"] = (step.sev, f"SLO burn {impact.users_burn:g}x ≥ {step.burn_at_least:g}x")
                break
    if impact.gpus is not None:
        for g in sorted(policy.gpu_hours, key=lambda s: s.sev):
            if impact.gpus >= g.gpus_at_least:
                cost = impact.gpus * policy.gpu_hour_cost_usd
                scores["gpu"] = (
                    g.sev,
                    f"{impact.gpus} GPU-hours/h burning (≈${cost:,.0f}/h) ≥ {g.gpus_at_least}",
                )
                break
    if impact.quality:
        scores["quality"] = (policy.quality, "model fast and wrong")
    if impact.security:
        scores["security"] = (policy.security, "SEV1 regardless of latency")
    if not scores:
        return Assessment(policy.floor, "none", {"none": "no axis above its threshold"})
    # Worst SEV wins; on a tie, the axis order above (users, gpu, quality, security) is
    # not meaningful, so prefer security > quality > users > gpu as the headline.
    order = {"security": 0, "quality": 1, "users": 2, "gpu": 3}
    axis = min(scores, key=lambda a: (scores[a][0], order[a]))
    return Assessment(
        scores[axis][0], axis, {a: why for a, (_, why) in scores.items()}, {a: sev for a, (sev, _) in scores.items()}
    )


def explain(a: Assessment) -> str:
    """ "SEV1, decided by security (SEV1 regardless of latency); also: quality → SEV1"."""
    if a.deciding_axis == "none":
        return f"SEV{a.sev}: no axis above its threshold"
    head = f"SEV{a.sev}, decided by {a.deciding_axis} ({a.reasons[a.deciding_axis]})"
    others = [f"{axis} → SEV{sev}" for axis, sev in a.sevs.items() if axis != a.deciding_axis]
    return head + (f"; also: {', '.join(others)}" if others else "")


def is_raise(current: int, proposed: int) -> bool:
    """SEV1 is the worst: a raise is a smaller number."""
    return proposed < current


def first_due(declared_at: float, sev: int, policy: CadencePolicy) -> float:
    return declared_at + policy.first_update_minutes.get(sev, policy.interval_minutes[sev]) * 60


def slugify(text: str, limit: int) -> str:
    text = words(text)  # the title as the chat sent it, markup dropped (no "lt-channel-gt")
    # Fold accents first (ñandú -> nandu) so non-ASCII titles keep their words.
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")
    return slug[:limit].strip("-") or "incident"


def channel_name(number: int, title: str, now: float) -> str:
    head = f"inc-{ymd(now)}-{number}-"
    return head + slugify(title, 80 - len(head))
