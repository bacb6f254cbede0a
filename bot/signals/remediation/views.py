"""What the remediation alarm says (pure: text in, text out)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.chat.text import literal
from bot.signals.remediation.commands import RemediationAlarm

SHOWN = 10


@dataclass(frozen=True)
class Offer:
    """remediation-pause for one NodeHealthCheck: the line to type and its plan, or why not."""

    nhc: str
    line: str | None  # `/incident lever remediation-pause …`, None when it would be refused
    plan: str  # the plan's effect, or the refusal


def title(cmd: RemediationAlarm) -> str:
    if cmd.reason == "rate":
        of = f" of {cmd.gpu_nodes}" if cmd.gpu_nodes else ""
        return f"Remediation alarm: {cmd.count}{of} GPU nodes out for remediation in {cmd.cell} within an hour"
    return f"Remediation alarm: GPU nodes out again in {cmd.cell} ({', '.join(cmd.repeats[:3])})"


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(names[:SHOWN]) + (f", … ({len(names) - SHOWN} more)" if len(names) > SHOWN else "")


def alarm(
    cmd: RemediationAlarm,
    *,
    per_hour: int,
    per_hour_fraction: float,
    same_minutes: float,
    quiet_minutes: float,
    offers: list[Offer] | str,
) -> str:
    cell = literal(cmd.cell)
    share = f"{per_hour_fraction:.0%} of the cell's GPU nodes"
    if cmd.reason == "rate":
        of = f" of {cmd.gpu_nodes} ({cmd.count / cmd.gpu_nodes:.0%})" if cmd.gpu_nodes else ""
        head = (
            f":rotating_light: *Remediation alarm, {cell}*: {cmd.count}{of} GPU nodes were taken out of service "
            f"for remediation or as unhealthy in the last hour (policy: more than {per_hour} an hour, or more than "
            f"{share}, alarms)."
        )
    else:
        head = (
            f":rotating_light: *Remediation alarm, {cell}*: {literal(_names(cmd.repeats))} went out of service again "
            f"within {same_minutes:g} minutes ({cmd.count} node(s) went out in the last hour). Don't restart into "
            "the same bad node."
        )
    lines = [head]
    if cmd.nodes:
        lines.append(f"Went out: {literal(_names(cmd.nodes))}.")
    if cmd.who:
        lines.append(f"Out now, by who: {literal(cmd.who)}.")
    if cmd.more:
        lines.append(f"{cmd.more} more went out since this burst first alarmed.")
    lines.append(
        "Automation can be the outage: check the signal (the exporter, the health check) before more nodes go."
    )
    if isinstance(offers, str):
        lines.append(offers)
    else:
        for o in offers:
            if o.line is None:
                lines.append(f"NodeHealthCheck {literal(o.nhc)}: {literal(o.plan)}")
            else:
                lines.append(
                    f"To stop NodeHealthCheck {literal(o.nhc)} starting new remediations: `{o.line}`\n"
                    f"Plan: {literal(o.plan)}"
                )
    lines.append(
        f"Further nodes going out in this burst are counted, not posted; after {quiet_minutes:g} minutes with none, "
        "the next burst alarms again."
    )
    return "\n".join(lines)
