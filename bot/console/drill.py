"""A game-day drill inside the console: the runner (world/fbworld/drills) plays the timeline against the
demo fleet and the app's own /alertmanager; this side reads what the app did from the audit log,
times the decisions the drill expects, and at the end prints the report: the timeline, the time
from the first signal to each decision, the remediation alarms raised, each lever pulled with its
price, and each incident's postmortem draft."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from bot.core.services import Services
from bot.postmortem import document
from fbworld.drills import Decision, Drill, Match, Runner, clock
from fbworld.fleet import DemoFleet
from levers.price import Price

WATCH_S = 0.25  # how often the audit is read for the expected decisions
DELIVERY_WAIT_S = 15.0  # the scheduler picks a delivery up within its poll (0.5 s); Slack may be slow
REASON_CHARS = 160
DONE = "every step ran and every expected decision was taken"
_MENTION = re.compile(r"@(U[A-Z0-9]{1,20})\b")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _hms(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def _field(detail: dict[str, Any], path: str) -> Any:
    """A dotted path into an audit entry's detail (``args.lever``); None when absent."""
    cur: Any = detail
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def matches(m: Match, e: dict[str, Any]) -> bool:
    if e.get("action") != m.action:
        return False
    d = e.get("detail") or {}
    if any(_field(d, k) != v for k, v in m.detail.items()):
        return False
    return all(v.lower() in str(_field(d, k) or "").lower() for k, v in m.contains.items())


def taken(decision: Decision, entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The entry that took ``decision`` (its ``count``-th match), or None."""
    hits = [e for e in entries if any(matches(m, e) for m in decision.match)]
    return hits[decision.count - 1] if len(hits) >= decision.count else None


def opened(entries: list[dict[str, Any]]) -> list[str]:
    """Incidents opened during the drill, by a person or by Alertmanager, in order."""
    out: list[str] = []
    for e in entries:
        d = e.get("detail") or {}
        inc = e.get("incident")
        ok = d.get("result") == "ok"
        new = e["action"] == "command.declare" or (e["action"] == "command.alerts" and d.get("opened"))
        if inc and ok and new and inc not in out:
            out.append(inc)
    return out


@dataclass
class DrillSession:
    svc: Services
    fleet: DemoFleet
    drill: Drill
    app_url: str
    token: str
    out: Callable[[str], None]
    name: Callable[[str], str]  # a Slack user id as the console shows it
    speed: float = 1.0

    def __post_init__(self) -> None:
        self.runner = Runner(
            self.drill,
            self.fleet,
            f"{self.app_url}/alertmanager",
            self.token,
            self.out,
            self.speed,
            delivered=self._delivered,
        )
        self.start_seq = 0
        self.ended = False
        self._tasks: list[asyncio.Task[None]] = []
        self._ending = asyncio.Lock()

    # running -----------------------------------------------------------------------------------
    async def start(self) -> None:
        self.start_seq = await self.svc.audit.count()
        speed = "real time" if self.speed == 1 else f"{self.speed:g}x speed"
        self.out(f"━━ Drill {self.drill.name}: {self.drill.title} ━━")
        self.out(f"{self.drill.summary} ({clock(self.drill.length)} of timeline at {speed}.)")
        for line in self.drill.briefing.strip().splitlines():
            self.out("  " + line)
        self.out("  `drill` shows where it is; `drill end` ends it and prints the report.")
        self._tasks = [asyncio.create_task(self.runner.run()), asyncio.create_task(self._watch())]

    async def entries(self) -> list[dict[str, Any]]:
        return await self.svc.audit.since(self.start_seq)

    async def _delivered(self, delivery: str) -> str | None:
        """What the app made of a delivery, once its `alerts` entry is in the audit."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DELIVERY_WAIT_S
        while loop.time() < deadline:
            for e in await self.entries():
                if e.get("action") == "command.alerts" and _field(e.get("detail") or {}, "args.delivery") == delivery:
                    d = e["detail"]
                    if d.get("opened"):
                        return f"opened {e['incident']} (SEV{d.get('sev')})"
                    return f"joined {e['incident']}" if e.get("incident") else None
            await asyncio.sleep(0.1)
        return "the app has not handled it yet"

    async def _watch(self) -> None:
        while not self.ended:
            await asyncio.sleep(WATCH_S)
            if self.runner.finished and all(t is not None for t in await self._decisions()):
                await self.end(DONE)
                return

    async def _decisions(self) -> list[dict[str, Any] | None]:
        entries = await self.entries()
        return [taken(d, entries) for d in self.drill.decisions]

    def status(self) -> None:
        left = self.runner.steps_left()
        self.out(
            f"Drill {self.drill.name} at {clock(self.runner.offset())} of {clock(self.drill.length)}: "
            + (f"{left} step(s) to come" if left else "every step ran")
            + ("; ended" if self.ended else "")
        )

    async def wait_until(self, offset: float | None) -> str | None:
        """Until the drill clock passes ``offset`` (None: every step ran) and its steps are done.
        Returns why it could not wait: the drill ended, or its timeline stopped (a step failed)."""
        if self.ended:
            return "The drill has ended: there is no clock left to wait for."
        runner = self._tasks[0]
        waiting = asyncio.create_task(self.runner.wait_until(self.drill.length if offset is None else offset))
        await asyncio.wait({waiting, runner}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done() and not runner.cancelled() and runner.exception() is None:
            await waiting  # the timeline ran to its end; a wait past it runs out on its own
        if waiting.done():
            return None
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        if runner.cancelled():
            return "The drill has ended: there is no clock left to wait for."
        return f"The drill's timeline stopped: {runner.exception()!r}"[:200]

    # the end -----------------------------------------------------------------------------------
    async def end(self, why: str) -> None:
        async with self._ending:
            if self.ended:
                return
            self.ended = True
            at = self.runner.offset()
            if self.runner.finished and all(t is not None for t in await self._decisions()):
                why = DONE  # whatever stopped it, the drill was complete

            current = asyncio.current_task()
            for t in self._tasks:
                if t is not current:
                    t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*(t for t in self._tasks if t is not current), return_exceptions=True)
            await self._report(at, why)

    async def _report(self, at: float, why: str) -> None:
        entries = await self.entries()
        incidents = opened(entries)
        left = self.runner.steps_left()
        self.out(f"━━ Drill {self.drill.name} ended at {clock(at)}: {why} ━━")
        if left:
            self.out(f"({left} step(s) of the timeline did not run.)")
        self.out("Timeline (UTC):")
        for line in self._timeline(entries, incidents):
            self.out("  " + line)
        self.out(self._first_signal_line())
        for decision, entry in zip(
            self.drill.decisions, [taken(d, entries) for d in self.drill.decisions], strict=True
        ):
            self.out("  " + self._decision_line(decision, entry))
        for line in alarm_lines(entries):
            self.out(line)
        for line in lever_lines(entries):
            self.out(line)
        for inc in incidents:
            self.out(f"Postmortem draft for {inc} (as `firebreak postmortem {inc}` prints it):")
            self.out((await document.build(self.svc, inc)).rstrip())
        if not incidents:
            self.out("No incident was opened during the drill, so there is no postmortem draft.")

    def _timeline(self, entries: list[dict[str, Any]], incidents: list[str]) -> list[str]:
        # The audit's times are whole seconds: within a second, the drill's events come first.
        rows: list[tuple[int, int, str]] = [
            (int(ev.at), 0, f"{_hms(ev.at)}  drill {clock(ev.offset):>7}  {ev.text}") for ev in self.runner.events
        ]
        for e in entries:
            said = self._say(e) if e.get("incident") in incidents else None
            if said is not None:
                ts = _epoch(e["ts"])
                rows.append((int(ts), 1, f"{_hms(ts)}  {e['incident']:>13}  {said}"))
        return [text for _, _, text in sorted(rows, key=lambda r: (r[0], r[1]))]

    def _say(self, e: dict[str, Any]) -> str | None:
        """The postmortem's line for an entry, else (a refusal, a usage error) what was refused
        and why; None for what the postmortem leaves out as no event (reads, bookkeeping)."""
        said = document.phrase(e, self.svc.registry)
        d = e.get("detail") or {}
        if said is None and d.get("result", "ok") != "ok":
            who = "Firebreak" if e.get("actor") == "system" else f"@{e.get('actor', '')}"
            reason = " ".join(str(d.get("reason") or "").split())
            reason = reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
            said = f"`{e.get('action')}` by {who}: {d.get('result')}" + (f": {reason}" if reason else "")
        return None if said is None else _MENTION.sub(lambda m: "@" + self.name(m.group(1)), said)

    def _first_signal_line(self) -> str:
        first = self.runner.first_signal
        if first is None:
            return "Decisions: no alert reached the app, so there is no first signal to time from."
        return f"Decisions, timed from the first signal (the first page Firebreak took, {_hms(first)} UTC):"

    def _decision_line(self, decision: Decision, entry: dict[str, Any] | None) -> str:
        if entry is None:
            return f"{decision.name}: not taken"
        ts = _epoch(entry["ts"])
        by = "Firebreak" if entry.get("actor") == "system" else f"@{self.name(str(entry.get('actor', '')))}"
        first = self.runner.first_signal
        if first is None:
            return f"{decision.name}: at {_hms(ts)} UTC by {by}"
        gap = ts - int(first)  # the audit's times are whole seconds
        when = f"{_minsec(gap)} after the first signal" if gap >= 0 else f"{_minsec(-gap)} before the first signal"
        return f"{decision.name}: {when} ({_hms(ts)} UTC, {by})"


def alarm_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The remediation alarms Firebreak raised during the drill: when, how many nodes, who, and
    where it posted (or the incident it opened), with the NodeHealthChecks it offered to pause."""
    alarms = [e for e in entries if e.get("action") == "command.remediation_alarm"]
    alarms = [e for e in alarms if (e.get("detail") or {}).get("result") == "ok"]
    if not alarms:
        return []
    out = ["Remediation alarms:"]
    for e in alarms:
        d = e["detail"]
        why = "same node twice" if d.get("reason") == "repeat" else "rate"
        where = f"opened {e.get('incident')}" if d.get("opened") else f"in {e.get('incident') or 'no incident'}"
        offered = ", ".join(d.get("offered") or []) or "none"
        out.append(
            f"  {_hms(_epoch(e['ts']))} UTC {d.get('cell')}: {d.get('count')} node(s) out in the hour ({why}), "
            f"{where}; by who: {d.get('who') or 'unknown'}; offered remediation-pause on: {offered}"
        )
    return out


def price_text(detail: dict[str, Any]) -> str:
    """A lever's price as its audit entry records it (the entry's `price`, else its plan's), in the
    postmortem's one-paragraph form, or `not priced` when the lever recorded none: nothing is computed
    here."""
    raw = detail.get("price")
    if raw is None and isinstance(detail.get("plan"), dict):
        raw = detail["plan"].get("price")
    try:
        price = Price.from_record(raw)
    except ValidationError:
        return "not priced (the recorded price is not readable)"
    return price.text().removeprefix("Price: ") if price is not None else "not priced"


def lever_lines(entries: list[dict[str, Any]]) -> list[str]:
    """Each lever pulled during the drill (applied and verified) with what it cost."""
    done = [e for e in entries if e.get("action") == "lever.done"]
    if not done:
        return ["Levers pulled: none."]
    out = ["Levers pulled, and what each cost:"]
    for e in done:
        d = e.get("detail") or {}
        what = str(d.get("message") or d.get("lever") or "").split(":", 1)[0]
        out.append(f"  {_hms(_epoch(e['ts']))} UTC {e.get('incident') or ''} {what}: price: {price_text(d)}")
    return out


def _minsec(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}m {s:02d}s"
