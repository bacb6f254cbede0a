"""Who may sit in a seat (docs/security-model.md, "Eligibility"): policies/roles.yaml's entries against Slack and
the on-call.

A seat's entries are user groups (by handle or id), user ids, ``oncall`` and ``anyone``. Group
membership comes through the chat port (Slack's usergroups.list, then usergroups.users.list per
group) and is kept in this process for FIREBREAK_GROUP_CACHE_SECONDS (at most 5 minutes; each
replica keeps its own copy), measured on the app's clock. One check waits at most
FIREBREAK_GROUP_LOOKUP_TIMEOUT (1.5 s) for Slack; a group Slack did not answer for is
*unanswered*, and a seat that needs it fails closed (the caller refuses and says so). A failed
lookup is remembered for a few seconds, so a request that checks several seats (``levers``) or a
burst of presses waits once, not once per check.

An ``oncall`` entry counts only for the cells a check names (docs/security-model.md): the cell a lever, an
undo or an approval acts in; for the IC seat, the cells the incident had when it opened (not those
its IC added later). A check that names no cell (``None``: the fleet context, a grant across
cells) gives the on-call nothing: being on call for one cell is no power over the fleet. Who is on
call is policies/oncall.yaml as it is now (bot/policy/oncall_file.py reads it again on change).

Callers: `role`, `handoff` and `accept` (bot/incidents/handoffs.py), alerts joining a declared
incident (bot/signals/jobs.py), every lever pull and undo, and the requester again just before an
approved request runs (levers/authz.py), every Approve / Deny press, lever and break-glass alike
(bot/approvals/votes.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot import logs
from bot.chat import Chat, ChatError, UserGroup, person
from bot.clock import Clock
from bot.core.services import Services
from bot.policy import PolicyError
from bot.policy.eligible import ANYONE, ONCALL, is_group, kind
from bot.policy.oncall import OncallPolicy
from bot.policy.oncall_file import OncallFile
from bot.policy.roles import title
from bot.policy.sections import Policy

log = logs.get(__name__)

FAILED_MEMORY_S = 5.0  # how long a failed lookup is answered from memory before Slack is asked again
START_CHECK_S = 5.0  # at start, how long the policy's groups are looked up before giving up (and logging it)
LOOKUP_BUSY = "timeout"  # the error of a lookup cut off by the per-check bound


@dataclass(frozen=True)
class Group:
    """What the workspace says of one policy entry (``@ml-ic`` or ``S0123ABCD``)."""

    entry: str
    state: Literal["ok", "missing", "disabled"]
    name: str  # how a refusal names it: "@ml-ic" (the handle when known), else the id
    members: frozenset[str] = frozenset()


class Unanswered(Exception):
    """Slack did not say who is in a group (its error code, or ``timeout``)."""

    def __init__(self, name: str, error: str) -> None:
        super().__init__(f"{name}: {error}")
        self.name = name
        self.error = error


@dataclass(frozen=True)
class Verdict:
    """Whether ``user`` may hold ``seat`` now. ``why`` (when not ok) is a clause for a refusal, without
    the final punctuation; ``unanswered``: Slack could not say (the caller fails closed)."""

    user: str
    seat: str
    ok: bool
    why: str = ""
    unanswered: bool = False
    groups: tuple[str, ...] = ()  # the groups the seat needs, by name (for the audit)

    def refusal(self, consequence: str) -> str:
        """The full sentence: ``consequence`` says what is refused while Slack can't answer."""
        why = self.why[:1].upper() + self.why[1:]
        if self.unanswered:
            return f"{why}; {consequence} until it answers; nothing changed."
        return f"{why}; nothing changed."

    def audit(self) -> dict[str, object]:
        return {
            "ineligible": self.user,
            "seat": self.seat,
            "groups": list(self.groups),
            "eligibility": "unanswered" if self.unanswered else "not_eligible",
        }


@dataclass
class _Entry:
    at: float
    value: object


@dataclass
class Eligibility:
    chat: Chat
    policy: Policy
    clock: Clock
    ttl: float
    timeout: float
    oncall_file: OncallFile
    _directory: _Entry | None = None  # dict[str, UserGroup] by "@handle" and by id
    _members: dict[str, _Entry] = field(default_factory=dict)  # group id -> frozenset of user ids
    _failed: dict[str, _Entry] = field(default_factory=dict)  # "list" or a group id -> the error
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Short: it sits in Services (in every traceback's locals), and the policy is there already.
        return f"Eligibility(ttl={self.ttl}, timeout={self.timeout}, groups_cached={len(self._members)})"

    # the answers -------------------------------------------------------------------------
    async def check(self, user: str, seat: str, cells: Sequence[str] | None) -> Verdict:
        return (await self.check_seats(user, [seat], cells))[seat]

    async def check_seats(self, user: str, seats: Iterable[str], cells: Sequence[str] | None) -> dict[str, Verdict]:
        """A verdict per seat, from one lookup bounded by ``timeout`` (the groups in parallel).
        ``cells``: where ``oncall`` counts (None: nowhere, the fleet context)."""
        seats = list(dict.fromkeys(seats))
        roles = self.policy.roles
        oncall = on_call(self.oncall(), cells)
        out: dict[str, Verdict] = {}
        wanted: dict[str, list[str]] = {}  # seat -> its group entries, for seats not decided yet
        for seat in seats:
            entries = roles.of(seat)
            if ANYONE in entries or user in entries or (ONCALL in entries and user in oncall):
                out[seat] = Verdict(user, seat, True)
            else:
                wanted[seat] = [e for e in entries if kind(e) in ("handle", "group")]
        entries = list(dict.fromkeys(e for es in wanted.values() for e in es))
        found = await self._lookup(entries) if entries else {}
        for seat, groups in wanted.items():
            out[seat] = self._verdict(user, seat, groups, found, cells, oncall)
        return out

    async def seated_people(self, seat: str, cells: Sequence[str]) -> set[str]:
        """Everyone eligible for ``seat`` by name: its user ids, the members of its groups and, with
        ``oncall``, the cells' on-call (``anyone`` names nobody). A group Slack did not answer for
        is left out and logged: inviting fewer people is safe, refusing the declare is not."""
        entries = self.policy.roles.of(seat)
        people = {e for e in entries if kind(e) == "user"}
        if ONCALL in entries:
            people |= on_call(self.oncall(), cells)
        groups = [e for e in entries if is_group(e)]
        for entry, got in (await self._lookup(groups) if groups else {}).items():
            if isinstance(got, Group) and got.state == "ok":
                people |= got.members
            else:
                log.warning("seat_members_unknown", seat=seat, group=entry)
        return people

    def oncall(self) -> OncallPolicy:
        """Who is on call now (oncall.yaml, read again when it changed)."""
        return self.oncall_file.current()

    def _verdict(
        self,
        user: str,
        seat: str,
        groups: list[str],
        found: dict[str, Group | Unanswered],
        cells: Sequence[str] | None,
        oncall: set[str],
    ) -> Verdict:
        answers = [found[g] for g in groups]
        names = tuple(a.name for a in answers)
        if any(isinstance(a, Group) and a.state == "ok" and user in a.members for a in answers):
            return Verdict(user, seat, True, groups=names)
        gone = [a for a in answers if isinstance(a, Unanswered)]
        if gone:
            errors = "; ".join(f"{a.name} ({a.error})" for a in gone)
            who = "who is in " + " or ".join(a.name for a in gone)
            return Verdict(
                user,
                seat,
                False,
                f"Slack didn't say {who} ({gone[0].error})" if len(gone) == 1 else f"Slack didn't say {who}: {errors}",
                unanswered=True,
                groups=names,
            )
        return Verdict(user, seat, False, self._not_in(user, seat, answers, cells, oncall), groups=names)

    def _not_in(
        self, user: str, seat: str, answers: list[Group | Unanswered], cells: Sequence[str] | None, oncall: set[str]
    ) -> str:
        entries = self.policy.roles.of(seat)
        need = f"the {title(seat)} seat"
        live = [a for a in answers if isinstance(a, Group) and a.state == "ok"]
        missing = [a for a in answers if isinstance(a, Group) and a.state == "missing"]
        disabled = [a for a in answers if isinstance(a, Group) and a.state == "disabled"]
        alts: list[str] = []
        if live:
            alts.append("in " + " or ".join(a.name for a in live))
        if ONCALL in entries and cells is not None:
            where = ", ".join(cells) if cells else "an incident with no cell"
            unread = f" ({self.oncall_file.error})" if self.oncall_file.error else ""
            alts.append(f"the on-call for {where}{unread}")
        if any(kind(e) == "user" for e in entries):
            alts.append(f"one of the people policies/roles.yaml names for {need}")
        parts: list[str] = []
        if alts:
            fix = f": ask an admin of {live[0].name} to add them" if live else ""
            parts.append(f"{person(user)} isn't {' or '.join(alts)}, which {need} needs{fix}")
        for a in missing:
            parts.append(
                f"{need} needs {a.name}, which doesn't exist in this Slack workspace: create the user group "
                f"{a.name} and add the people who may hold the seat"
            )
        for a in disabled:
            parts.append(f"{need} needs {a.name}, which is disabled in Slack: ask a Slack admin to enable it")
        if parts and ONCALL in entries and cells is None:
            parts[0] += " (being on call counts only in a cell, never on the fleet context)"
        return "; ".join(parts) or f"nobody is eligible for {need} (policies/roles.yaml)"

    # the lookups ---------------------------------------------------------------------------
    async def _lookup(self, entries: list[str]) -> dict[str, Group | Unanswered]:
        """Each entry's group, within ``timeout`` overall; what did not answer in time is Unanswered."""
        tasks = {e: asyncio.ensure_future(self._group(e)) for e in entries}
        done, pending = await asyncio.wait(tasks.values(), timeout=self.timeout)
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        out: dict[str, Group | Unanswered] = {}
        for e, t in tasks.items():
            if t in done and t.exception() is None:
                out[e] = t.result()
                continue
            err = t.exception() if t in done else None
            if isinstance(err, Unanswered):
                out[e] = err
            elif err is not None:
                raise err
            else:
                out[e] = Unanswered(e, LOOKUP_BUSY)
                self._fail(LOOKUP_BUSY, LOOKUP_BUSY)
                log.warning("eligibility_lookup_timeout", group=e, seconds=self.timeout)
        return out

    def _fresh(self, entry: _Entry | None, ttl: float) -> bool:
        # Also stale when the clock went backwards: never kept longer than ttl by a clock step.
        return entry is not None and 0 <= self.clock.now() - entry.at < ttl

    def _fail(self, key: str, error: str) -> None:
        self._failed[key] = _Entry(self.clock.now(), error)

    def _recent_failure(self, key: str) -> str | None:
        """The error of a recent failed lookup of ``key``, or of any lookup that timed out (Slack is
        slow for everyone: the next check fails at once instead of waiting out its bound again)."""
        for k in (key, LOOKUP_BUSY):
            got = self._failed.get(k)
            if got is not None and self._fresh(got, FAILED_MEMORY_S):
                return str(got.value)
        return None

    def _lock(self, key: str) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    async def directory(self) -> dict[str, UserGroup]:
        """The workspace's groups by "@handle" and by id (cached); Unanswered("the user groups")."""
        async with self._lock("list"):
            if self._fresh(self._directory, self.ttl):
                assert self._directory is not None
                return self._directory.value  # type: ignore[return-value]
            failed = self._recent_failure("list")
            if failed:
                raise Unanswered("the user groups", failed)
            try:
                groups = await self.chat.user_groups()
            except ChatError as exc:
                self._fail("list", exc.error)
                log.warning("eligibility_lookup_failed", method=exc.method, error=exc.error)
                raise Unanswered("the user groups", exc.error) from None
            by: dict[str, UserGroup] = {}
            for g in groups:
                by[g.id] = g
                if g.handle:
                    by["@" + g.handle.lower()] = g
            self._directory = _Entry(self.clock.now(), by)
            self._failed.pop("list", None)
            self._failed.pop(LOOKUP_BUSY, None)
            return by

    async def _group(self, entry: str) -> Group:
        try:
            directory = await self.directory()
        except Unanswered as exc:
            raise Unanswered(entry, exc.error) from None
        g = directory.get(entry.lower() if entry.startswith("@") else entry)
        if g is None:
            return Group(entry, "missing", entry)
        name = f"@{g.handle}" if g.handle else g.id
        if g.disabled:
            return Group(entry, "disabled", name)
        members = await self._members_of(g.id, name)
        if members is None:  # gone between the two calls
            return Group(entry, "missing", name)
        return Group(entry, "ok", name, members)

    async def _members_of(self, group_id: str, name: str) -> frozenset[str] | None:
        async with self._lock(group_id):
            got = self._members.get(group_id)
            if self._fresh(got, self.ttl):
                assert got is not None
                return got.value  # type: ignore[return-value]
            failed = self._recent_failure(group_id)
            if failed:
                raise Unanswered(name, failed)
            try:
                users = frozenset(await self.chat.group_members(group_id))
            except ChatError as exc:
                if exc.error == "no_such_subteam":
                    return None
                self._fail(group_id, exc.error)
                log.warning("eligibility_lookup_failed", method=exc.method, error=exc.error, group=name)
                raise Unanswered(name, exc.error) from None
            self._members[group_id] = _Entry(self.clock.now(), users)
            self._failed.pop(group_id, None)
            self._failed.pop(LOOKUP_BUSY, None)
            return users


def on_call(oncall: OncallPolicy, cells: Sequence[str] | None) -> set[str]:
    """Whoever oncall.yaml names for ``cells`` (its ``default`` for an incident with none; nobody
    for None, the fleet context)."""
    if cells is None:
        return set()
    people = {oncall.ic_for(c) for c in cells} if cells else {oncall.default}
    return {p for p in people if p}


def _make(svc: Services) -> Eligibility:
    s, pol = svc.settings, svc.policy
    where = pol.sources["oncall"].where if "oncall" in pol.sources else "<packaged>"
    return Eligibility(
        svc.chat,
        pol,
        svc.clock,
        s.firebreak_group_cache_seconds,
        s.firebreak_group_lookup_timeout,
        OncallFile.at(where, pol.oncall),
    )


def eligibility(svc: Services) -> Eligibility:
    """The app's one eligibility checker (its cache is per process)."""
    return svc.part(_make)


def oncall_now(svc: Services) -> OncallPolicy:
    """Who is on call now: policies/oncall.yaml as it is, not as it was at start (svc.policy.oncall)."""
    return eligibility(svc).oncall()


async def check_policy_groups(svc: Services) -> None:
    """At start: every group roles.yaml names must exist in the workspace, else PolicyError with
    its file and line. Only when Slack answers: when it can't be asked, this is logged and each
    seat that needs a group fails closed at use until Slack answers."""
    pol = svc.policy
    named = pol.roles.groups()
    if not named:
        return
    try:
        async with asyncio.timeout(START_CHECK_S):
            groups = await svc.chat.user_groups()
    except (ChatError, TimeoutError) as exc:
        error = exc.error if isinstance(exc, ChatError) else "timeout"
        log.warning("policy_groups_unchecked", error=error, groups=[e for _, _, e in named])
        return
    by: dict[str, UserGroup] = {g.id: g for g in groups}
    by.update({"@" + g.handle.lower(): g for g in groups if g.handle})
    for seat, i, entry in named:
        g = by.get(entry.lower() if entry.startswith("@") else entry)
        if g is None:
            what = "user group" if entry.startswith("@") else "user group id"
            raise PolicyError(
                f"{pol.place('roles', seat, i)}: {seat}.{i}: {what} {entry} doesn't exist in this Slack "
                f"workspace: create it (Slack: People → User groups) and add the people who may hold the "
                f"{title(seat)} seat, or fix the entry"
            )
        if g.disabled:
            log.warning("policy_group_disabled", seat=seat, group=entry, where=pol.place("roles", seat, i))
